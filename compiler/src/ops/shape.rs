//! Shape and layout: views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout),
//! constants (Constant, ConstantOfShape, Shape, Size, Range, EyeLike), and data
//! movement (Concat, Transpose, Slice, Split, Expand, Tile, DepthToSpace,
//! SpaceToDepth, Pad, Trilu). Every movement that is a strided view of its input goes
//! through one typed kernel, `copy_strided`; float32 Transpose and Concat keep their
//! tuned kernels (Concat's inputs can then be planned in place as slices).

#[allow(unused_imports)]
use kiln_runtime::typed::Elem as _;
use std::sync::Arc;

use kiln_runtime::params;
use kiln_runtime::typed::{self, params as tp};

use super::{
    Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, R, Types, broadcast, broadcast_dims,
    foldable, normalize_axis,
};
use crate::dim::{Dim, fixed_shape, fmt_dims};
use crate::lower::{Kernel, TypedCall};
use crate::tensor::{DType, Data, Scalar, Tensor};
use crate::{dispatch_data, dispatch_dtype, impl_as_any};

/// Row-major element strides of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for d in (0..shape.len()).rev() {
        s[d] = acc;
        acc *= shape[d] as isize;
    }
    s
}

/// A strided view as the kernel's parameters: size-1 dims dropped, runs merged.
pub fn strided(out: &[usize], offset: usize, strides: &[isize]) -> R<tp::Strided> {
    let mut dims: Vec<(usize, isize)> = Vec::new();
    for (&n, &s) in out.iter().zip(strides) {
        if n == 1 {
            continue;
        }
        if let Some(last) = dims.last_mut()
            && last.1 == s * n as isize
        {
            *last = (last.0 * n, s);
            continue;
        }
        dims.push((n, s));
    }
    if out.contains(&0) {
        dims = vec![(0, 1)];
    }
    if dims.len() > tp::RANK {
        return Err(format!(
            "a layout of rank {} exceeds the supported {}",
            dims.len(),
            tp::RANK
        ));
    }
    let mut p = tp::Strided {
        rank: dims.len(),
        shape: [1; tp::RANK],
        offset,
        strides: [0; tp::RANK],
    };
    for (i, (n, s)) in dims.into_iter().enumerate() {
        p.shape[i] = n;
        p.strides[i] = s;
    }
    Ok(p)
}

/// The input reshaped to `shape` and transposed by `perm`, as a strided view.
fn reshape_transpose(shape: &[usize], perm: &[usize]) -> R<tp::Strided> {
    let cs = contiguous_strides(shape);
    let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let st: Vec<isize> = perm.iter().map(|&p| cs[p]).collect();
    strided(&out, 0, &st)
}

fn eval_strided(x: &Tensor, p: &tp::Strided, shape: &[usize]) -> R<Tensor> {
    let n = shape.iter().product();
    let data = dispatch_data!(&x.data, v: T => {
        let mut out = vec![T::default(); n];
        typed::copy_strided(p, v, &mut out).map_err(|e| e.to_string())?;
        T::wrap(out)
    });
    Ok(Tensor::new(shape.to_vec(), data))
}

/// Lowers output `j` as a strided view of input `i`.
fn lower_strided(cx: &mut LowerCx, i: usize, j: usize, p: &tp::Strided) -> R<()> {
    let d = cx.dtype(i)?;
    let x = cx.operand(i)?;
    cx.typed(
        TypedCall::new("copy_strided", vec![d], p).fallible(),
        vec![x],
        j,
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------
// Views

/// An operator whose output is its input's bytes under another shape.
#[derive(Debug, Clone)]
pub enum View {
    Reshape {
        allow_zero: bool,
    },
    Flatten {
        axis: i64,
    },
    /// Axes from the attribute (opset < 13) or input 1.
    Squeeze {
        axes: Option<Vec<i64>>,
    },
    Unsqueeze {
        axes: Option<Vec<i64>>,
    },
    Identity,
    Dropout,
}

/// Reshape's output dims: `0` copies the input's dim (unless `allow_zero`), one `-1`
/// takes what is left, which must divide exactly (`[N, S, 768]` to `[-1, 768]` is
/// `[N*S, 768]`). A target entry may itself be symbolic (`Concat(Shape(x)[0], 12, 64)`):
/// then it is neither `0` nor `-1`, which are always written as constants.
fn reshape_dims(input: &[Dim], target: &[Dim], allow_zero: bool) -> R<Vec<Dim>> {
    let total: Dim = input.iter().product();
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, t) in target.iter().enumerate() {
        match t.known() {
            Some(-1) if infer_at.is_none() => {
                infer_at = Some(i);
                out.push(Dim::from(1usize));
            }
            Some(0) if !allow_zero => out.push(
                input
                    .get(i)
                    .cloned()
                    .ok_or_else(|| format!("0 at position {i} copies a missing dim"))?,
            ),
            Some(t) if t >= 0 => out.push(Dim::from(t)),
            None => out.push(t.clone()),
            _ => return Err(format!("invalid target shape {}", fmt_dims(target))),
        }
    }
    let known: Dim = out.iter().product();
    let err = || {
        format!(
            "cannot reshape {} ({total} elements) to {}",
            fmt_dims(input),
            fmt_dims(target)
        )
    };
    if let Some(i) = infer_at {
        if known.is(0) {
            return Err(err());
        }
        out[i] = total.div_exact(&known).ok_or_else(err)?;
    } else if known != total {
        return Err(err());
    }
    Ok(out)
}

impl View {
    fn dims(&self, cx: &InferCx) -> R<Vec<Dim>> {
        let s = cx.dims(0)?;
        Ok(match self {
            View::Reshape { allow_zero } => {
                let target = cx.dims_value_req(1, "target shape")?;
                reshape_dims(s, &target, *allow_zero)?
            }
            View::Flatten { axis } => {
                let a = if *axis < 0 {
                    *axis + s.len() as i64
                } else {
                    *axis
                };
                if a < 0 || a as usize > s.len() {
                    return Err(format!("axis {axis} is out of range for rank {}", s.len()));
                }
                let a = a as usize;
                vec![s[..a].iter().product(), s[a..].iter().product()]
            }
            View::Squeeze { axes } => {
                let axes = match axes {
                    Some(a) => Some(a.clone()),
                    None if cx.opt(1).is_some() => Some(cx.constant(1, "axes")?.as_i64()),
                    None => None,
                };
                match axes {
                    // A symbolic dim is kept: it is not known to be 1.
                    None => s.iter().filter(|d| !d.is(1)).cloned().collect(),
                    Some(axes) => {
                        let axes = axes
                            .iter()
                            .map(|&a| normalize_axis(a, s.len()))
                            .collect::<R<Vec<_>>>()?;
                        if let Some(&a) = axes.iter().find(|&&a| !s[a].is(1)) {
                            return Err(format!("cannot squeeze axis {a} of size {}", s[a]));
                        }
                        (0..s.len())
                            .filter(|d| !axes.contains(d))
                            .map(|d| s[d].clone())
                            .collect()
                    }
                }
            }
            View::Unsqueeze { axes } => {
                let axes = match axes {
                    Some(a) => a.clone(),
                    None => cx.constant(1, "axes")?.as_i64(),
                };
                let rank = s.len() + axes.len();
                let axes = axes
                    .iter()
                    .map(|&a| normalize_axis(a, rank))
                    .collect::<R<Vec<_>>>()?;
                let mut it = s.iter();
                let mut shape = Vec::with_capacity(rank);
                for d in 0..rank {
                    shape.push(if axes.contains(&d) {
                        Dim::from(1usize)
                    } else {
                        it.next().ok_or("repeated axes")?.clone()
                    });
                }
                shape
            }
            View::Identity | View::Dropout => s.to_vec(),
        })
    }
}

impl Operator for View {
    fn name(&self) -> &'static str {
        match self {
            View::Reshape { .. } => "Reshape",
            View::Flatten { .. } => "Flatten",
            View::Squeeze { .. } => "Squeeze",
            View::Unsqueeze { .. } => "Unsqueeze",
            View::Identity => "Identity",
            View::Dropout => "Dropout",
        }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let x = cx.input(0)?;
        let dims = self.dims(cx)?;
        let mut out = vec![match (&x.constant, fixed_shape(&dims)) {
            (Some(t), Some(shape)) => Fact::constant(Tensor::new(shape, t.data.clone())),
            // A view keeps the elements' order, so a symbolic value passes through.
            _ => Fact {
                sym: x.sym.clone(),
                ..Fact::new(x.dtype, dims)
            },
        }];
        if matches!(self, View::Dropout) && cx.n_outputs() > 1 {
            // Inference: the mask keeps everything (a constant once its dims are fixed).
            out.push(match x.shape.clone() {
                Some(s) => {
                    let n = s.iter().product();
                    Fact::constant(Tensor::from_vec(s, vec![typed::Bool(1); n]))
                }
                None => Fact::new(DType::Bool, x.dims().to_vec()),
            });
        }
        Ok(out)
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        cx.alias(0, 0)
    }
    fn is_view(&self) -> bool {
        true
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// Constants

/// Operators whose outputs are always known at compile time.
#[derive(Debug, Clone)]
pub enum ConstantOp {
    Constant(Tensor),
    /// The fill value (a one-element tensor).
    ConstantOfShape(Tensor),
    Shape {
        start: i64,
        end: Option<i64>,
    },
    Size,
    Range,
    EyeLike {
        dtype: Option<DType>,
        k: i64,
    },
}

fn eval_range(start: &Tensor, limit: &Tensor, delta: &Tensor) -> R<Tensor> {
    let d = start.dtype;
    let (s, l, dl) = (
        start.as_f64().first().copied().ok_or("start is empty")?,
        limit.as_f64().first().copied().ok_or("limit is empty")?,
        delta.as_f64().first().copied().ok_or("delta is empty")?,
    );
    if dl == 0.0 {
        return Err("delta is zero".into());
    }
    let n = ((l - s) / dl).ceil().max(0.0) as usize;
    if !foldable(&[n]) {
        return Err(format!("a range of {n} elements is too large"));
    }
    let data = dispatch_data!(&start.data, sv: T => {
        let dv = delta.values::<T>().ok_or("start and delta types differ")?;
        let mut out = vec![T::default(); n];
        typed::range(sv, dv, &mut out);
        T::wrap(out)
    });
    let _ = d;
    Ok(Tensor::new(vec![n], data))
}

/// `Shape`'s `start`/`end`: negative counts from the end, clamped to `0..=rank`.
fn clamp_axis(v: i64, rank: i64) -> usize {
    (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize
}

impl ConstantOp {
    fn value(&self, cx: &InferCx) -> R<Tensor> {
        Ok(match self {
            ConstantOp::Constant(t) => t.clone(),
            ConstantOp::ConstantOfShape(v) => {
                let shape = cx.constant(0, "shape")?.as_i64();
                let shape = shape
                    .iter()
                    .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
                    .collect::<R<Vec<_>>>()?;
                if !foldable(&shape) {
                    return Err(format!(
                        "the constant of shape {shape:?} is too large to compute at compile time"
                    ));
                }
                Tensor::filled(shape, v)
            }
            ConstantOp::Shape { start, end } => {
                let s = cx.shape(0)?;
                let r = s.len() as i64;
                let (a, b) = (clamp_axis(*start, r), clamp_axis(end.unwrap_or(r), r));
                let dims: Vec<i64> = s[a..b.max(a)].iter().map(|&d| d as i64).collect();
                Tensor::i64(vec![dims.len()], dims)
            }
            ConstantOp::Size => Tensor::i64(vec![], vec![cx.input(0)?.len() as i64]),
            ConstantOp::Range => {
                let [s, l, d] = [0, 1, 2].map(|i| cx.constant(i, "bound"));
                eval_range(s?, l?, d?)?
            }
            ConstantOp::EyeLike { dtype, k } => {
                let s = cx.shape(0)?;
                if s.len() != 2 {
                    return Err(format!("input must be 2-D, got {s:?}"));
                }
                let d = dtype.unwrap_or(cx.dtype(0)?);
                let (rows, cols) = (s[0], s[1]);
                dispatch_dtype!(d, T => {
                    let mut v = vec![T::default(); rows * cols];
                    for r in 0..rows {
                        let c = r as i64 + k;
                        if c >= 0 && (c as usize) < cols {
                            v[r * cols + c as usize] = T::from_f64(1.0);
                        }
                    }
                    Tensor::from_vec(s.to_vec(), v)
                })
            }
        })
    }
}

impl Operator for ConstantOp {
    fn name(&self) -> &'static str {
        match self {
            ConstantOp::Constant(_) => "Constant",
            ConstantOp::ConstantOfShape(_) => "ConstantOfShape",
            ConstantOp::Shape { .. } => "Shape",
            ConstantOp::Size => "Size",
            ConstantOp::Range => "Range",
            ConstantOp::EyeLike { .. } => "EyeLike",
        }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        // The shape of a tensor with symbolic dims is a value known only at run time.
        // Its elements are then dims in the symbols (a constant where the selected
        // dims are all known), and shapes computed from them stay exact.
        match self {
            ConstantOp::Shape { start, end } if fixed_shape(cx.dims(0)?).is_none() => {
                let d = cx.dims(0)?;
                let r = d.len() as i64;
                let (a, b) = (clamp_axis(*start, r), clamp_axis(end.unwrap_or(r), r));
                Ok(vec![Fact::dims_value(d[a..b.max(a)].to_vec(), false)])
            }
            ConstantOp::Size if fixed_shape(cx.dims(0)?).is_none() => Ok(vec![Fact::dims_value(
                vec![cx.dims(0)?.iter().product()],
                true,
            )]),
            ConstantOp::ConstantOfShape(v) => match cx.dims_value(0) {
                Some(dims) if fixed_shape(&dims).is_none() => {
                    if let Some(d) = dims.iter().filter_map(Dim::known).find(|&d| d < 0) {
                        return Err(format!("negative dimension {d}"));
                    }
                    Ok(vec![Fact::new(v.dtype, dims)])
                }
                _ => Ok(vec![Fact::constant(self.value(cx)?)]),
            },
            ConstantOp::Range if cx.constants().is_none() => {
                let bound = |i: usize| -> R<Dim> {
                    let what = ["start", "limit", "delta"][i];
                    if let Some(t) = cx.opt_constant(i)
                        && t.as_f64().iter().any(|v| v.fract() != 0.0)
                    {
                        return Err(format!(
                            "a fractional {what} needs fixed shapes (the other bounds are \
                             computed from symbolic shapes)"
                        ));
                    }
                    cx.dims_value_req(i, what)?
                        .into_iter()
                        .next()
                        .ok_or_else(|| format!("{what} is empty"))
                };
                let (start, limit) = (bound(0)?, bound(1)?);
                let n = match bound(2)?.known() {
                    Some(d) if d > 0 => (limit - start).div_ceil(d as u64),
                    Some(d) if d < 0 => (start - limit).div_ceil(d.unsigned_abs()),
                    _ => return Err("delta must be a non-zero constant".into()),
                };
                Ok(vec![Fact::new(
                    cx.dtype(0)?,
                    vec![n.max(&Dim::from(0usize))],
                )])
            }
            _ => Ok(vec![Fact::constant(self.value(cx)?)]),
        }
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        match self {
            // Left to run time by a build over declared ranges (its length is a dim).
            ConstantOp::Range => {
                let d = cx.dtype(0)?;
                let (start, delta) = (cx.operand(0)?, cx.operand(2)?);
                cx.typed(TypedCall::bare("range", vec![d]), vec![start, delta], 0)?;
                Ok(())
            }
            // Left to run time too where its shape is computed from the dims: the value
            // broadcast over the output (a stride of 0).
            ConstantOp::ConstantOfShape(v) => {
                let shape = cx.out(0)?.shape().to_vec();
                let name = format!("{}:value", cx.node.name);
                let value = cx.weight(&name, v);
                let p = strided(&shape, 0, &vec![0; shape.len()])?;
                let call = TypedCall::new("copy_strided", vec![v.dtype], &p).fallible();
                cx.typed(call, vec![value], 0)?;
                Ok(())
            }
            _ => Err("should have been folded to a constant".into()),
        }
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// Data movement

/// Concatenation along `axis`.
#[derive(Debug, Clone)]
pub struct Concat {
    pub axis: i64,
}

impl Operator for Concat {
    fn name(&self) -> &'static str {
        "Concat"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let ins = cx.inputs();
        let first = ins.first().ok_or("needs at least one input")?;
        let rank = first.dims().len();
        let axis = normalize_axis(self.axis, rank)?;
        let mut shape = first.dims().to_vec();
        shape[axis] = Dim::from(0usize);
        for v in &ins {
            let s = v.dims();
            if s.len() != rank || (0..rank).any(|d| d != axis && s[d] != shape[d]) {
                return Err(format!(
                    "input `{}` has shape {:?}, incompatible with {:?} along axis {axis}",
                    v.name,
                    s,
                    first.dims()
                ));
            }
            if v.dtype != first.dtype {
                return Err(format!(
                    "input `{}` is {}, not {}",
                    v.name, v.dtype, first.dtype
                ));
            }
            shape[axis] = shape[axis].clone() + s[axis].clone();
        }
        // Joining shape vectors (`Concat(Shape(x)[:1], [12, 64])`) keeps their dims.
        let all_const = ins.iter().all(|v| v.constant.is_some());
        if rank == 1 && first.dtype.is_int() && !all_const {
            let parts: Option<Vec<Vec<Dim>>> = (0..ins.len()).map(|i| cx.dims_value(i)).collect();
            if let Some(parts) = parts {
                return Ok(vec![Fact::int_value(first.dtype, parts.concat(), false)]);
            }
        }
        Ok(vec![Fact::new(first.dtype, shape)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let ins = cx.constants().ok_or("inputs are not constant")?;
        let shape = &outs[0].shape;
        let axis = normalize_axis(self.axis, shape.len())?;
        let p = tp::Concat {
            outer: shape[..axis].iter().product(),
        };
        let data = dispatch_data!(&ins[0].data, _v: T => {
            let parts: Vec<&[T]> = ins
                .iter()
                .map(|t| t.values::<T>().ok_or_else(|| "input types differ".to_string()))
                .collect::<R<_>>()?;
            let mut out = vec![T::default(); shape.iter().product()];
            typed::concat(&p, &parts, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let y = cx.out(0)?.shape().to_vec();
        let a = normalize_axis(self.axis, y.len())?;
        let outer = y[..a].iter().product();
        let inputs = cx.operands()?;
        if d == DType::F32 {
            let out = cx.output(0)?;
            cx.step(Kernel::Concat(params::Concat { outer }), inputs, out);
        } else {
            let call = TypedCall::new("concat", vec![d], &tp::Concat { outer }).variadic();
            cx.typed(call, inputs, 0)?;
        }
        Ok(())
    }
    impl_as_any!();
}

/// Transpose by `perm` (default: reversed axes).
#[derive(Debug, Clone)]
pub struct Transpose {
    pub perm: Option<Vec<usize>>,
}

impl Transpose {
    fn perm(&self, rank: usize) -> R<Vec<usize>> {
        let perm = self
            .perm
            .clone()
            .unwrap_or_else(|| (0..rank).rev().collect());
        let mut seen = vec![false; rank];
        if perm.len() != rank
            || perm
                .iter()
                .any(|&p| p >= rank || std::mem::replace(&mut seen[p], true))
        {
            return Err(format!("perm {perm:?} is not a permutation of rank {rank}"));
        }
        Ok(perm)
    }
}

impl Operator for Transpose {
    fn name(&self) -> &'static str {
        "Transpose"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let s = cx.dims(0)?;
        let perm = self.perm(s.len())?;
        Ok(vec![Fact::new(
            cx.dtype(0)?,
            perm.iter().map(|&p| s[p].clone()).collect::<Vec<_>>(),
        )])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "input")?;
        let p = reshape_transpose(&x.shape, &self.perm(x.shape.len())?)?;
        Ok(Some(vec![eval_strided(x, &p, &outs[0].shape)?]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let x_shape = cx.shape(0)?.to_vec();
        let perm = self.perm(x_shape.len())?;
        if cx.dtype(0)? == DType::F32 && x_shape.len() <= params::MAX_RANK {
            let mut in_shape = [1; params::MAX_RANK];
            let mut p = [0; params::MAX_RANK];
            in_shape[..x_shape.len()].copy_from_slice(&x_shape);
            p[..perm.len()].copy_from_slice(&perm);
            for (i, slot) in p.iter_mut().enumerate().skip(perm.len()) {
                *slot = i;
            }
            let x = cx.operand(0)?;
            let out = cx.output(0)?;
            let t = params::Transpose {
                rank: x_shape.len(),
                in_shape,
                perm: p,
            };
            cx.step(Kernel::Transpose(t), vec![x], out);
            return Ok(());
        }
        lower_strided(cx, 0, 0, &reshape_transpose(&x_shape, &perm)?)
    }
    impl_as_any!();
}

/// Operators that are one strided view of their input per output: Slice, Split,
/// Expand, Tile, DepthToSpace, SpaceToDepth.
#[derive(Debug, Clone)]
pub enum Movement {
    /// Attributes before opset 10; inputs 1..=4 after.
    Slice {
        starts: Option<Vec<i64>>,
        ends: Option<Vec<i64>>,
        axes: Option<Vec<i64>>,
    },
    Split {
        axis: i64,
        split: Option<Vec<usize>>,
        num_outputs: Option<usize>,
    },
    Expand,
    /// Repeats from input 1.
    Tile,
    DepthToSpace {
        block: usize,
        crd: bool,
    },
    SpaceToDepth {
        block: usize,
        crd: bool,
    },
}

impl Movement {
    /// Each output's shape and view of input 0.
    fn views(&self, cx: &InferCx) -> R<Vec<(Vec<usize>, tp::Strided)>> {
        let s = cx.shape(0)?;
        let cs = contiguous_strides(s);
        let rank = s.len();
        Ok(match self {
            Movement::Slice { starts, ends, axes } => {
                let [starts, ends, axes, steps] = slice_args(cx, starts, ends, axes)?;
                let mut out: Vec<usize> = s.to_vec();
                let mut st: Vec<isize> = cs.clone();
                let mut offset = 0isize;
                for k in 0..starts.len() {
                    let a = normalize_axis(axes[k], rank)?;
                    let step = steps[k];
                    if step == 0 {
                        return Err("slice step is zero".into());
                    }
                    let (b, len) = slice_range(s[a] as i64, starts[k], ends[k], step);
                    out[a] = len as usize;
                    if len > 0 {
                        offset += b as isize * cs[a];
                    }
                    st[a] = cs[a] * step as isize;
                }
                vec![(out.clone(), strided(&out, offset.max(0) as usize, &st)?)]
            }
            Movement::Split {
                axis,
                split,
                num_outputs,
            } => {
                let a = normalize_axis(*axis, rank)?;
                let n_out = cx.n_outputs();
                let sizes: Vec<usize> = match (split, cx.opt(1)) {
                    (Some(v), _) => v.clone(),
                    (None, Some(_)) => cx
                        .constant(1, "split")?
                        .as_i64()
                        .iter()
                        .map(|&v| usize::try_from(v).map_err(|_| format!("negative split {v}")))
                        .collect::<R<_>>()?,
                    (None, None) => {
                        let k = num_outputs.unwrap_or(n_out).max(1);
                        let chunk = s[a].div_ceil(k);
                        (0..k)
                            .map(|i| chunk.min(s[a].saturating_sub(i * chunk)))
                            .collect()
                    }
                };
                if sizes.iter().sum::<usize>() != s[a] || sizes.len() != n_out {
                    return Err(format!(
                        "split {sizes:?} does not divide axis {a} of size {} into {n_out} outputs",
                        s[a]
                    ));
                }
                let mut at = 0;
                let mut views = Vec::new();
                for len in sizes {
                    let mut out = s.to_vec();
                    out[a] = len;
                    views.push((out.clone(), strided(&out, at * cs[a] as usize, &cs)?));
                    at += len;
                }
                views
            }
            Movement::Expand => {
                let target = cx.constant(1, "shape")?.as_i64();
                let target: Vec<usize> = target
                    .iter()
                    .map(|&v| usize::try_from(v).map_err(|_| format!("negative dim {v}")))
                    .collect::<R<_>>()?;
                let out = broadcast(&[s, &target])?;
                let st = crate::lower::broadcast_strides(s, &out);
                let st: Vec<isize> = st.iter().map(|&v| v as isize).collect();
                vec![(out.clone(), strided(&out, 0, &st)?)]
            }
            Movement::Tile => {
                let reps = cx.constant(1, "repeats")?.as_i64();
                if reps.len() != rank || reps.iter().any(|&r| r < 0) {
                    return Err(format!(
                        "repeats {reps:?} must be {rank} non-negative values"
                    ));
                }
                let out: Vec<usize> = s.iter().zip(&reps).map(|(&d, &r)| d * r as usize).collect();
                let mut view = Vec::new();
                let mut st = Vec::new();
                for d in 0..rank {
                    view.extend([reps[d] as usize, s[d]]);
                    st.extend([0, cs[d]]);
                }
                let mut p = strided(&view, 0, &st)?;
                if out.contains(&0) {
                    p = strided(&out, 0, &cs)?;
                }
                vec![(out, p)]
            }
            Movement::DepthToSpace { block: b, crd } => {
                let b = *b;
                if rank != 4 || s[1] % (b * b) != 0 {
                    return Err(format!("input {s:?} does not split into blocks of {b}x{b}"));
                }
                let (n, c, h, w) = (s[0], s[1] / (b * b), s[2], s[3]);
                let p = if *crd {
                    reshape_transpose(&[n, c, b, b, h, w], &[0, 1, 4, 2, 5, 3])?
                } else {
                    reshape_transpose(&[n, b, b, c, h, w], &[0, 3, 4, 1, 5, 2])?
                };
                vec![(vec![n, c, h * b, w * b], p)]
            }
            Movement::SpaceToDepth { block: b, crd } => {
                let b = *b;
                if rank != 4 || s[2] % b != 0 || s[3] % b != 0 {
                    return Err(format!("input {s:?} does not split into blocks of {b}x{b}"));
                }
                let (n, c, h, w) = (s[0], s[1], s[2] / b, s[3] / b);
                let perm: &[usize] = if *crd {
                    &[0, 1, 3, 5, 2, 4]
                } else {
                    &[0, 3, 5, 1, 2, 4]
                };
                let p = reshape_transpose(&[n, c, h, b, w, b], perm)?;
                vec![(vec![n, c * b * b, h, w], p)]
            }
        })
    }
}

impl Movement {
    /// The outputs' dims when input 0 has symbolic dims (the same rules as
    /// [`Movement::views`], over [`Dim`]s; a rule that needs the size of a symbolic
    /// axis says so).
    fn symbolic_dims(&self, cx: &InferCx) -> R<Vec<Vec<Dim>>> {
        let s = cx.dims(0)?;
        let rank = s.len();
        Ok(match self {
            Movement::Slice { starts, ends, axes } => {
                let (starts, ends, axes, steps) = slice_dim_args(cx, starts, ends, axes)?;
                let mut out = s.to_vec();
                for k in 0..starts.len() {
                    let a = normalize_axis(axes[k], rank)?;
                    out[a] = slice_len(&s[a], &starts[k], &ends[k], steps[k])?;
                }
                vec![out]
            }
            Movement::Split {
                axis,
                split,
                num_outputs,
            } => {
                let a = normalize_axis(*axis, rank)?;
                let n_out = cx.n_outputs();
                if split.is_some() || cx.opt(1).is_some() {
                    // Explicit sizes: the split axis must be known, the others may not.
                    let sizes: Vec<i64> = match split {
                        Some(v) => v.iter().map(|&v| v as i64).collect(),
                        None => cx.constant(1, "split")?.as_i64(),
                    };
                    if sizes.len() != n_out
                        || sizes.iter().any(|&v| v < 0)
                        || !s[a].is(sizes.iter().sum())
                    {
                        return Err(format!(
                            "split {sizes:?} does not divide axis {a} of size {} into {n_out} outputs",
                            s[a]
                        ));
                    }
                    return Ok(sizes
                        .iter()
                        .map(|&len| {
                            let mut o = s.to_vec();
                            o[a] = Dim::from(len);
                            o
                        })
                        .collect());
                }
                let k = num_outputs.unwrap_or(n_out).max(1);
                if k != n_out {
                    return Err(format!("{k} parts named for {n_out} outputs"));
                }
                // Equal parts of ceil(n / k), the last one what remains.
                let chunk = s[a].div_ceil(k as u64);
                (0..k)
                    .map(|i| {
                        let mut o = s.to_vec();
                        o[a] = if i + 1 < k {
                            chunk.clone()
                        } else {
                            s[a].clone() - chunk.clone() * (k - 1)
                        };
                        o
                    })
                    .collect()
            }
            Movement::Expand => {
                let target = cx.dims_value_req(1, "shape")?;
                if let Some(v) = target.iter().filter_map(Dim::known).find(|&v| v < 0) {
                    return Err(format!("negative dim {v}"));
                }
                vec![broadcast_dims(&[s, &target])?]
            }
            Movement::Tile => {
                let reps = cx.constant(1, "repeats")?.as_i64();
                if reps.len() != rank || reps.iter().any(|&r| r < 0) {
                    return Err(format!(
                        "repeats {reps:?} must be {rank} non-negative values"
                    ));
                }
                vec![
                    s.iter()
                        .zip(&reps)
                        .map(|(d, &r)| d.clone() * r as usize)
                        .collect(),
                ]
            }
            Movement::DepthToSpace { block: b, .. } => {
                let bb = Dim::from(b * b);
                let c = (rank == 4)
                    .then(|| s[1].div_exact(&bb))
                    .flatten()
                    .ok_or_else(|| format!("input {s:?} does not split into blocks of {b}x{b}"))?;
                vec![vec![s[0].clone(), c, s[2].clone() * *b, s[3].clone() * *b]]
            }
            Movement::SpaceToDepth { block: b, .. } => {
                let bd = Dim::from(*b);
                let split = |d: &Dim| d.div_exact(&bd);
                let (Some(h), Some(w)) = (
                    (rank == 4).then(|| split(&s[2])).flatten(),
                    (rank == 4).then(|| split(&s[3])).flatten(),
                ) else {
                    return Err(format!("input {s:?} does not split into blocks of {b}x{b}"));
                };
                vec![vec![s[0].clone(), s[1].clone() * (b * b), h, w]]
            }
        })
    }
}

/// Slice's `starts`, `ends`, `axes` and `steps`, from the attributes (opset < 10) or
/// the constant inputs 1..=4, checked to have equal lengths.
fn slice_args(
    cx: &InferCx,
    starts: &Option<Vec<i64>>,
    ends: &Option<Vec<i64>>,
    axes: &Option<Vec<i64>>,
) -> R<[Vec<i64>; 4]> {
    let get = |attr: &Option<Vec<i64>>, i: usize, what: &str| -> R<Option<Vec<i64>>> {
        match attr {
            Some(v) => Ok(Some(v.clone())),
            None if cx.opt(i).is_some() => Ok(Some(cx.constant(i, what)?.as_i64())),
            None => Ok(None),
        }
    };
    let starts = get(starts, 1, "starts")?.ok_or("starts are required")?;
    let ends = get(ends, 2, "ends")?.ok_or("ends are required")?;
    let axes = get(axes, 3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = get(&None, 4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err("starts, ends, axes and steps must have equal lengths".into());
    }
    Ok([starts, ends, axes, steps])
}

/// Starts and ends (dims), axes and steps.
type SliceDimArgs = (Vec<Dim>, Vec<Dim>, Vec<i64>, Vec<i64>);

/// [`slice_args`] where `starts` and `ends` may also be computed from shapes
/// (`x[:, :Shape(y)[1]]`): dims, symbolic or known.
fn slice_dim_args(
    cx: &InferCx,
    starts: &Option<Vec<i64>>,
    ends: &Option<Vec<i64>>,
    axes: &Option<Vec<i64>>,
) -> R<SliceDimArgs> {
    let bounds = |attr: &Option<Vec<i64>>, i: usize, what: &str| -> R<Vec<Dim>> {
        match attr {
            Some(v) => Ok(v.iter().map(|&v| Dim::from(v)).collect()),
            None => cx.dims_value_req(i, what),
        }
    };
    let get = |i: usize, what: &str| -> R<Option<Vec<i64>>> {
        match cx.opt(i) {
            Some(_) => Ok(Some(cx.constant(i, what)?.as_i64())),
            None => Ok(None),
        }
    };
    let starts = bounds(starts, 1, "starts")?;
    let ends = bounds(ends, 2, "ends")?;
    let axes = match axes {
        Some(a) => a.clone(),
        None => get(3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect()),
    };
    let steps = get(4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err("starts, ends, axes and steps must have equal lengths".into());
    }
    Ok((starts, ends, axes, steps))
}

/// `(first index, length)` of `start..end` by `step` (not 0) along an axis of size `n`,
/// clamped as Slice clamps them.
fn slice_range(n: i64, start: i64, end: i64, step: i64) -> (i64, i64) {
    let fix = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (b, e) = if step > 0 {
        (fix(start).clamp(0, n), fix(end).clamp(0, n))
    } else {
        (fix(start).clamp(-1, n - 1), fix(end).clamp(-1, n - 1))
    };
    let len = if step > 0 {
        ((e - b).max(0) + step - 1) / step
    } else {
        ((b - e).max(0) + (-step) - 1) / (-step)
    };
    (b, len)
}

/// The length of `start..end` by `step` along an axis of size `n`, as Slice clamps
/// them. A symbolic `n` takes step 1 only; an `end` at or beyond `i64::MAX / 2` (what
/// exporters write for "to the end") is `n`. A symbolic `start` or `end` is a position
/// computed from a shape (`x[:, :Shape(y)[1]]`), so it counts from the front.
fn slice_len(n: &Dim, start: &Dim, end: &Dim, step: i64) -> R<Dim> {
    if step == 0 {
        return Err("slice step is zero".into());
    }
    if let (Some(n), Some(start), Some(end)) = (n.known(), start.known(), end.known()) {
        return Ok(Dim::from(slice_range(n, start, end, step).1));
    }
    if step != 1 {
        return Err(format!(
            "a slice with step {step} needs the axis' size ({n}) and its bounds known"
        ));
    }
    let zero = Dim::from(0usize);
    let at = |v: &Dim| -> Dim {
        match v.known() {
            Some(v) if v >= i64::MAX / 2 => n.clone(),
            Some(v) if v >= 0 => Dim::from(v).min(n),
            Some(v) => (n.clone() + Dim::from(v)).max(&zero),
            None => v.min(n),
        }
    };
    Ok((at(end) - at(start)).max(&zero))
}

impl Operator for Movement {
    fn name(&self) -> &'static str {
        match self {
            Movement::Slice { .. } => "Slice",
            Movement::Split { .. } => "Split",
            Movement::Expand => "Expand",
            Movement::Tile => "Tile",
            Movement::DepthToSpace { .. } => "DepthToSpace",
            Movement::SpaceToDepth { .. } => "SpaceToDepth",
        }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.dtype(0)?;
        if let Movement::Slice { starts, ends, axes } = self
            && cx.input(0)?.sym.is_some()
            && let Some(data) = cx.dims_value(0)
            && cx.dims(0)?.len() == 1
        {
            // A slice of a shape vector (`Shape(x)[1:3]`) keeps the dims it selects.
            let [starts, ends, _, steps] = slice_args(cx, starts, ends, axes)?;
            let (Some(&start), Some(&end), Some(&step)) =
                (starts.first(), ends.first(), steps.first())
            else {
                return Ok(vec![Fact::int_value(d, data, false)]);
            };
            if step == 0 {
                return Err("slice step is zero".into());
            }
            let (b, len) = slice_range(data.len() as i64, start, end, step);
            let picked = (0..len).map(|k| data[(b + k * step) as usize].clone());
            return Ok(vec![Fact::int_value(d, picked.collect(), false)]);
        }
        // Starts, ends or a target shape computed from symbolic shapes take the
        // symbolic rules even when the data's shape is fixed.
        let args_known =
            (1..cx.node.inputs.len()).all(|i| cx.opt(i).is_none_or(|v| v.constant.is_some()));
        if cx.input(0)?.shape.is_some() && args_known {
            return Ok(self
                .views(cx)?
                .into_iter()
                .map(|(shape, _)| Fact::new(d, shape))
                .collect());
        }
        Ok(self
            .symbolic_dims(cx)?
            .into_iter()
            .map(|dims| Fact::new(d, dims))
            .collect())
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "input")?;
        let outs = self
            .views(cx)?
            .iter()
            .map(|(shape, p)| eval_strided(x, p, shape))
            .collect::<R<_>>()?;
        Ok(Some(outs))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let views = self.views(&infer)?;
        for (j, (_, p)) in views.iter().enumerate() {
            lower_strided(cx, 0, j, p)?;
        }
        Ok(())
    }
    impl_as_any!();
}

/// Pad (constant, reflect, edge, wrap), pads from the attribute (opset < 11) or input 1.
#[derive(Debug, Clone)]
pub struct Pad {
    pub mode: tp::PadMode,
    pub pads: Option<Vec<i64>>,
    pub value: f32,
}

impl Pad {
    /// The pads (begins then ends) and the axes they apply to, for input rank `rank`.
    fn pads_and_axes(&self, cx: &InferCx, rank: usize) -> R<(Vec<i64>, Vec<usize>)> {
        let pads = match &self.pads {
            Some(p) => p.clone(),
            None => cx.constant(1, "pads")?.as_i64(),
        };
        let axes: Vec<usize> = match cx.opt(3) {
            Some(_) => cx
                .constant(3, "axes")?
                .as_i64()
                .iter()
                .map(|&a| normalize_axis(a, rank))
                .collect::<R<_>>()?,
            None => (0..rank).collect(),
        };
        if pads.len() != 2 * axes.len() {
            return Err(format!(
                "pads {pads:?} must have 2 values per axis ({} axes)",
                axes.len()
            ));
        }
        Ok((pads, axes))
    }

    fn params(&self, cx: &InferCx) -> R<tp::Pad> {
        let s = cx.shape(0)?;
        let rank = s.len();
        let (pads, axes) = self.pads_and_axes(cx, rank)?;
        if rank > tp::RANK {
            return Err(format!("rank {rank} exceeds {}", tp::RANK));
        }
        let mut p = tp::Pad {
            rank,
            in_shape: [1; tp::RANK],
            out_shape: [1; tp::RANK],
            begin: [0; tp::RANK],
            mode: self.mode,
        };
        p.in_shape[..rank].copy_from_slice(s);
        p.out_shape[..rank].copy_from_slice(s);
        for (k, &a) in axes.iter().enumerate() {
            let (b, e) = (pads[k], pads[k + axes.len()]);
            let n = s[a] as i64 + b + e;
            if n < 0 {
                return Err(format!("pads {pads:?} remove more than axis {a} holds"));
            }
            p.out_shape[a] = n as usize;
            p.begin[a] = b as isize;
        }
        Ok(p)
    }
}

impl Operator for Pad {
    fn name(&self) -> &'static str {
        "Pad"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        if cx.input(0)?.shape.is_some() {
            let p = self.params(cx)?;
            return Ok(vec![Fact::new(
                cx.dtype(0)?,
                p.out_shape[..p.rank].to_vec(),
            )]);
        }
        // Symbolic dims: each padded axis grows by its pads.
        let s = cx.dims(0)?;
        let (pads, axes) = self.pads_and_axes(cx, s.len())?;
        let mut out = s.to_vec();
        for (k, &a) in axes.iter().enumerate() {
            out[a] = out[a].clone() + Dim::from(pads[k] + pads[k + axes.len()]);
        }
        Ok(vec![Fact::new(cx.dtype(0)?, out)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "data")?;
        let p = self.params(cx)?;
        let value = self.value(cx, x.dtype)?;
        let n = outs[0].shape.iter().product();
        let data = dispatch_data!(&x.data, v: T => {
            let val = value.values::<T>().ok_or("value type differs")?;
            let mut out = vec![T::default(); n];
            typed::pad(&p, v, val, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let p = self.params(&infer)?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        // A constant_value computed at run time is read by the kernel as it is.
        let v = match cx.opt(2) {
            Some(v) if self.pads.is_none() && v.constant.is_none() => cx.operand(2)?,
            _ => {
                let value = self.value(&infer, d)?;
                cx.weight(&format!("{}:pad_value", cx.node.name), &value)
            }
        };
        cx.typed(TypedCall::new("pad", vec![d], &p), vec![x, v], 0)?;
        Ok(())
    }
    impl_as_any!();
}

impl Pad {
    /// The constant fill value as a one-element tensor of `dtype`.
    fn value(&self, cx: &InferCx, dtype: DType) -> R<Tensor> {
        Ok(match cx.opt(2) {
            Some(_) if self.pads.is_none() => {
                let t = cx.constant(2, "constant_value")?;
                Tensor::new(
                    vec![1],
                    if t.is_empty() {
                        Data::zeros(dtype, 1)
                    } else {
                        t.data.clone()
                    },
                )
            }
            _ => Tensor::f32(vec![1], vec![self.value]).cast(dtype),
        })
    }
}

/// Trilu: keeps the upper or lower triangle of the last two dims.
#[derive(Debug, Clone)]
pub struct Trilu {
    pub upper: bool,
}

impl Trilu {
    fn params(&self, cx: &InferCx) -> R<tp::Trilu> {
        let s = cx.shape(0)?;
        if s.len() < 2 {
            return Err(format!("input must have rank ≥ 2, got {s:?}"));
        }
        let k = match cx.opt(1) {
            Some(_) => cx.constant(1, "k")?.as_i64().first().copied().unwrap_or(0),
            None => 0,
        };
        let (rows, cols) = (s[s.len() - 2], s[s.len() - 1]);
        Ok(tp::Trilu {
            batch: s[..s.len() - 2].iter().product(),
            rows,
            cols,
            k,
            upper: self.upper,
        })
    }
}

impl Operator for Trilu {
    fn name(&self) -> &'static str {
        "Trilu"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let s = cx.dims(0)?;
        if s.len() < 2 {
            return Err(format!("input must have rank ≥ 2, got {s:?}"));
        }
        Ok(vec![Fact::new(cx.dtype(0)?, s.to_vec())])
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "input")?;
        let p = self.params(cx)?;
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); v.len()];
            typed::trilu(&p, v, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(x.shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let p = self.params(&infer)?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        cx.typed(TypedCall::new("trilu", vec![d], &p), vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

fn constant_attr(cx: &super::ParseCx) -> R<Tensor> {
    let a = &cx.attrs;
    if let Some(t) = a.tensor("value")? {
        return Ok(t);
    }
    if let Some(f) = a.float("value_float")? {
        return Ok(Tensor::f32(vec![], vec![f]));
    }
    if let Some(f) = a.floats("value_floats")? {
        return Ok(Tensor::f32(vec![f.len()], f));
    }
    if let Some(i) = a.int("value_int")? {
        return Ok(Tensor::i64(vec![], vec![i]));
    }
    if let Some(i) = a.ints("value_ints")? {
        return Ok(Tensor::i64(vec![i.len()], i));
    }
    if a.get("sparse_value").is_some() {
        return Err("sparse constants are not supported".into());
    }
    Err("Constant needs a `value` (or value_float(s)/value_int(s)) attribute".into())
}

/// DepthToSpace/SpaceToDepth `mode`: column-row-depth (`CRD`) or the default `DCR`.
fn crd(cx: &super::ParseCx) -> R<bool> {
    match cx.attrs.string("mode")?.as_deref() {
        None | Some("DCR") => Ok(false),
        Some("CRD") => Ok(true),
        Some(m) => Err(format!("unknown mode `{m}`")),
    }
}

fn block(cx: &super::ParseCx) -> R<usize> {
    cx.attrs.positive("blocksize", None)
}

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "Reshape",
        since: 5,
        types: Types::All,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(View::Reshape {
                allow_zero: cx.attrs.flag("allowzero")?,
            }))
        },
    },
    OpDef {
        name: "Flatten",
        since: 1,
        types: Types::All,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(View::Flatten {
                axis: cx.attrs.int_or("axis", 1)?,
            }))
        },
    },
    OpDef {
        name: "Squeeze",
        since: 1,
        types: Types::All,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(View::Squeeze {
                axes: cx.attrs.ints("axes")?,
            }))
        },
    },
    OpDef {
        name: "Unsqueeze",
        since: 1,
        types: Types::All,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(View::Unsqueeze {
                axes: cx.attrs.ints("axes")?,
            }))
        },
    },
    OpDef {
        name: "Identity",
        since: 1,
        types: Types::All,
        cuda: true,
        parse: |_| Ok(Arc::new(View::Identity)),
    },
    OpDef {
        name: "Dropout",
        since: 1,
        types: Types::Float,
        cuda: true,
        parse: |cx| {
            if cx.n_inputs > 2 {
                return Err("training_mode input is not supported (inference only)".into());
            }
            Ok(Arc::new(View::Dropout))
        },
    },
    OpDef {
        name: "Constant",
        since: 1,
        types: Types::All,
        cuda: true,
        parse: |cx| Ok(Arc::new(ConstantOp::Constant(constant_attr(cx)?))),
    },
    OpDef {
        name: "ConstantOfShape",
        since: 9,
        types: Types::All,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(ConstantOp::ConstantOfShape(
                cx.attrs
                    .tensor("value")?
                    .unwrap_or_else(|| Tensor::f32(vec![1], vec![0.0])),
            )))
        },
    },
    OpDef {
        name: "Shape",
        since: 1,
        types: Types::All,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(ConstantOp::Shape {
                start: cx.attrs.int_or("start", 0)?,
                end: cx.attrs.int("end")?,
            }))
        },
    },
    OpDef {
        name: "Size",
        since: 1,
        types: Types::All,
        cuda: true,
        parse: |_| Ok(Arc::new(ConstantOp::Size)),
    },
    OpDef {
        name: "Range",
        since: 11,
        types: Types::Numeric,
        cuda: true,
        parse: |_| Ok(Arc::new(ConstantOp::Range)),
    },
    OpDef {
        name: "EyeLike",
        since: 9,
        types: Types::All,
        cuda: true,
        parse: |cx| {
            let dtype = match cx.attrs.int("dtype")? {
                Some(c) => Some(
                    DType::from_onnx(c as i32).ok_or_else(|| format!("unsupported dtype {c}"))?,
                ),
                None => None,
            };
            Ok(Arc::new(ConstantOp::EyeLike {
                dtype,
                k: cx.attrs.int_or("k", 0)?,
            }))
        },
    },
    OpDef {
        name: "Concat",
        since: 4,
        types: Types::All,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(Concat {
                axis: cx
                    .attrs
                    .int("axis")?
                    .ok_or("attribute `axis` is required")?,
            }))
        },
    },
    OpDef {
        name: "Transpose",
        since: 1,
        types: Types::All,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(Transpose {
                perm: cx.attrs.usizes("perm")?,
            }))
        },
    },
    OpDef {
        name: "Slice",
        since: 1,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(if cx.opset < 10 {
                Movement::Slice {
                    starts: Some(
                        cx.attrs
                            .ints("starts")?
                            .ok_or("attribute `starts` is required")?,
                    ),
                    ends: Some(
                        cx.attrs
                            .ints("ends")?
                            .ok_or("attribute `ends` is required")?,
                    ),
                    axes: cx.attrs.ints("axes")?,
                }
            } else {
                Movement::Slice {
                    starts: None,
                    ends: None,
                    axes: None,
                }
            }))
        },
    },
    OpDef {
        name: "Split",
        since: 2,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Movement::Split {
                axis: cx.attrs.int_or("axis", 0)?,
                split: cx.attrs.usizes("split")?,
                num_outputs: cx.attrs.int("num_outputs")?.map(|n| n.max(1) as usize),
            }))
        },
    },
    OpDef {
        name: "Expand",
        since: 8,
        types: Types::All,
        cuda: false,
        parse: |_| Ok(Arc::new(Movement::Expand)),
    },
    OpDef {
        name: "Tile",
        since: 6,
        types: Types::All,
        cuda: false,
        parse: |_| Ok(Arc::new(Movement::Tile)),
    },
    OpDef {
        name: "DepthToSpace",
        since: 11,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Movement::DepthToSpace {
                block: block(cx)?,
                crd: crd(cx)?,
            }))
        },
    },
    OpDef {
        name: "SpaceToDepth",
        since: 1,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Movement::SpaceToDepth {
                block: block(cx)?,
                crd: crd(cx)?,
            }))
        },
    },
    OpDef {
        name: "Pad",
        since: 2,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            let mode = match cx.attrs.string("mode")?.as_deref() {
                None | Some("constant") => tp::PadMode::Constant,
                Some("reflect") => tp::PadMode::Reflect,
                Some("edge") => tp::PadMode::Edge,
                Some("wrap") => tp::PadMode::Wrap,
                Some(m) => return Err(format!("unknown mode `{m}`")),
            };
            let pads = if cx.opset < 11 {
                Some(
                    cx.attrs
                        .ints("pads")?
                        .or(cx.attrs.ints("paddings")?)
                        .ok_or("attribute `pads` is required")?,
                )
            } else {
                None
            };
            Ok(Arc::new(Pad {
                mode,
                pads,
                value: cx.attrs.float_or("value", 0.0)?,
            }))
        },
    },
    OpDef {
        name: "Trilu",
        since: 14,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Trilu {
                upper: cx.attrs.int_or("upper", 1)? != 0,
            }))
        },
    },
];
