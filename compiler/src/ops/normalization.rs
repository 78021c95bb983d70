//! Normalisations over every float type, through the typed kernels of
//! `kiln_runtime::typed::norm`: LayerNormalization (with its optional Mean and
//! InvStdDev outputs), RMSNormalization, GroupNormalization, InstanceNormalization,
//! LpNormalization and MeanVarianceNormalization; RotaryEmbedding
//! (`typed::rotary`); and Swish, a unary operator with a parameter.
//!
//! The kernels compute every statistic in `f64` and round each output once, so
//! `stash_type` (the precision of the statistics) only decides the element type of
//! LayerNormalization's Mean and InvStdDev. Scale and bias inputs that broadcast to the
//! normalised shape are expanded to it (at compile time when constant, else by a
//! `copy_strided` step into a temporary buffer), as the kernels take them whole.

use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::elementwise::Unary;
use super::shape::strided;
use super::{
    Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, R, Types, broadcast_dims, checkable_shape,
    normalize_axis,
};
use crate::dim::Dim;
use crate::lower::{Kernel, Operand, TypedCall, broadcast_strides};
use crate::plan::BufferId;
use crate::tensor::{DType, Data, Scalar, Tensor};
use crate::{dispatch_data, impl_as_any};

// ---------------------------------------------------------------------------------
// Shared helpers

/// Checks that input `i` (the `what`) has element type `d` and a shape that broadcasts
/// unidirectionally to `target`.
fn check_param(cx: &InferCx, i: usize, what: &str, d: DType, target: &[Dim]) -> R<()> {
    let v = cx.input(i)?;
    if v.dtype != d {
        return Err(format!(
            "{what} (input {i}) has element type {}, expected {d} like the input",
            v.dtype
        ));
    }
    let s = v.dims();
    let extra = s.len().saturating_sub(target.len());
    let s_trim = if s[..extra].iter().all(|d| d.is(1)) {
        &s[extra..]
    } else {
        s
    };
    if broadcast_dims(&[s_trim, target]).ok().as_deref() != Some(target) {
        return Err(format!(
            "{what} (input {i}) has shape {s:?}, expected one that broadcasts to {target:?}"
        ));
    }
    Ok(())
}

/// `s` without the leading ones that make it longer than `rank`.
fn trim(s: &[usize], rank: usize) -> &[usize] {
    let extra = s.len().saturating_sub(rank);
    if s[..extra].iter().all(|&d| d == 1) {
        &s[extra..]
    } else {
        s
    }
}

/// The strided view reading a tensor of shape `from` as its broadcast to `to` (checked
/// to broadcast by [`check_param`]).
fn broadcast_view(from: &[usize], to: &[usize]) -> R<tp::Strided> {
    let from = trim(from, to.len());
    if from.len() > to.len() {
        return Err(format!("shape {from:?} does not broadcast to {to:?}"));
    }
    let st: Vec<isize> = broadcast_strides(from, to)
        .iter()
        .map(|&v| v as isize)
        .collect();
    strided(to, 0, &st)
}

/// `t` read through the strided view `p` (a constant of shape `shape`).
fn eval_view(t: &Tensor, p: &tp::Strided, shape: &[usize]) -> R<Tensor> {
    let n = shape.iter().product();
    let data = dispatch_data!(&t.data, v: T => {
        let mut out = vec![T::default(); n];
        typed::copy_strided(p, v, &mut out).map_err(|e| e.to_string())?;
        T::wrap(out)
    });
    Ok(Tensor::new(shape.to_vec(), data))
}

/// A constant broadcast to `to` (itself when it already has `to`'s element count).
fn expand_const(t: &Tensor, to: &[usize]) -> R<Tensor> {
    if t.len() == to.iter().product::<usize>() {
        return Ok(Tensor::new(to.to_vec(), t.data.clone()));
    }
    eval_view(t, &broadcast_view(&t.shape, to)?, to)
}

/// Input `i` read through the view `p` of shape `to`, as element type `dtype`: the
/// operand itself when neither changes anything, a folded weight when the input is
/// constant, else one `copy_strided` and/or `cast` step into temporary buffers.
fn param_operand(
    cx: &mut LowerCx,
    i: usize,
    view: Option<&tp::Strided>,
    to: &[usize],
    dtype: DType,
    what: &str,
) -> R<Operand> {
    let from = cx.dtype(i)?;
    let n: usize = to.iter().product();
    if let Some(t) = cx.opt_constant(i) {
        if view.is_none() && from == dtype {
            return cx.operand(i);
        }
        let mut t = match view {
            Some(p) => eval_view(t, p, to)?,
            None => t.clone(),
        };
        t = t.cast(dtype);
        let name = format!("{}:{what}", cx.node.name);
        return Ok(cx.weight(&name, &t));
    }
    let mut op = cx.operand(i)?;
    if let Some(p) = view {
        let tmp = cx.temp(from, n);
        let call = TypedCall::new("copy_strided", vec![from], p).fallible();
        cx.step(Kernel::Typed(call), vec![op], tmp);
        op = Operand::Buffer(tmp);
    }
    if from != dtype {
        op = cast_to(cx, op, from, dtype, n);
    }
    Ok(op)
}

/// A `cast` step of `n` elements into a new temporary buffer.
fn cast_to(cx: &mut LowerCx, op: Operand, from: DType, to: DType, n: usize) -> Operand {
    let tmp = cx.temp(to, n);
    let call = TypedCall::bare("cast", vec![from, to]).inputs(vec![from]);
    cx.step(Kernel::Typed(call), vec![op], tmp);
    Operand::Buffer(tmp)
}

/// The view broadcasting input `i` to `to`, or `None` when it already has `to`'s
/// element count (a broadcast that keeps the count keeps the element order).
fn broadcast_of(cx: &LowerCx, i: usize, to: &[usize]) -> R<Option<tp::Strided>> {
    let s = cx.shape(i)?;
    if s.iter().product::<usize>() == to.iter().product::<usize>() {
        Ok(None)
    } else {
        broadcast_view(s, to).map(Some)
    }
}

/// Whether the node names output `j` (an output it leaves empty is not read).
fn names_output(cx: &LowerCx, j: usize) -> bool {
    cx.node
        .outputs
        .get(j)
        .is_some_and(|&v| !cx.graph().value(v).name.contains(":unused"))
}

/// Output `j`'s buffer if the node names it, else a temporary of `elems`.
fn output_or_temp(cx: &mut LowerCx, j: usize, dtype: DType, elems: usize) -> R<BufferId> {
    if names_output(cx, j) {
        cx.output(j)
    } else {
        Ok(cx.temp(dtype, elems))
    }
}

/// Appends a typed call writing `outs` (the first is the step's output).
fn step_multi(cx: &mut LowerCx, call: TypedCall, inputs: Vec<Operand>, outs: &[BufferId]) {
    cx.step(Kernel::Typed(call), inputs, outs[0]);
    if let Some(s) = cx.l.program.steps.last_mut() {
        s.extra_outputs = outs[1..].to_vec();
    }
}

/// The element type an ONNX `stash_type` names, which must be a float type.
fn stash_dtype(code: i64) -> R<DType> {
    i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .filter(|d| d.is_float())
        .ok_or_else(|| {
            format!("stash_type {code} is not a float type (1 = float32, 16 = bfloat16, ...)")
        })
}

/// `outer × len` rows of a tensor normalised from `axis` on.
fn rows(xs: &[usize], axis: i64) -> R<(usize, usize, usize)> {
    let a = normalize_axis(axis, xs.len())?;
    Ok((a, xs[..a].iter().product(), xs[a..].iter().product()))
}

// ---------------------------------------------------------------------------------
// LayerNormalization

/// LayerNormalization (opset 17): inputs X, Scale, optional B; outputs Y and the
/// optional Mean and InvStdDev (shape X[..axis] followed by ones, element type
/// `stash_type`).
#[derive(Debug, Clone)]
pub struct LayerNormalization {
    pub axis: i64,
    pub epsilon: f32,
    pub stash: DType,
}

impl LayerNormalization {
    fn params(&self, xs: &[usize], has_bias: bool) -> R<(usize, tp::LayerNorm)> {
        let (a, outer, len) = rows(xs, self.axis)?;
        let p = tp::LayerNorm {
            outer,
            len,
            epsilon: self.epsilon,
            has_bias,
        };
        Ok((a, p))
    }
}

impl Operator for LayerNormalization {
    fn name(&self) -> &'static str {
        "LayerNormalization"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        let xs = cx.dims(0)?;
        let a = normalize_axis(self.axis, xs.len())?;
        check_param(cx, 1, "Scale", d, &xs[a..])?;
        if cx.opt(2).is_some() {
            check_param(cx, 2, "B", d, &xs[a..])?;
        }
        if cx.n_outputs() > 3 {
            return Err(format!(
                "{} outputs named, expected at most 3 (Y, Mean, InvStdDev)",
                cx.n_outputs()
            ));
        }
        let mut stat = xs[..a].to_vec();
        stat.resize(xs.len(), Dim::from(1usize));
        Ok(vec![
            Fact::new(d, xs.to_vec()),
            Fact::new(self.stash, stat.clone()),
            Fact::new(self.stash, stat),
        ])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "X")?;
        let (a, p) = self.params(&x.shape, cx.opt(2).is_some())?;
        let norm = &x.shape[a..];
        // With statistics of another type, compute in that type (the function body's
        // casts), then cast Y back.
        let u = if self.stash != x.dtype {
            self.stash
        } else {
            x.dtype
        };
        let xu = x.cast(u);
        let scale = expand_const(cx.constant(1, "Scale")?, norm)?.cast(u);
        let bias = match cx.opt(2) {
            Some(_) => expand_const(cx.constant(2, "B")?, norm)?.cast(u),
            None => Tensor::new(vec![0], Data::zeros(u, 0)),
        };
        let (y, mean, inv) = dispatch_data!(&xu.data, v: T => {
            let s = scale.values::<T>().ok_or("Scale type")?;
            let b = bias.values::<T>().ok_or("B type")?;
            let mut y = vec![T::default(); v.len()];
            let mut mean = vec![T::default(); p.outer];
            let mut inv = vec![T::default(); p.outer];
            typed::layer_norm(&p, v, s, b, &mut y, &mut mean, &mut inv);
            (T::wrap(y), T::wrap(mean), T::wrap(inv))
        });
        let y = Tensor::new(x.shape.clone(), y).cast(x.dtype);
        let mean = Tensor::new(outs[1].shape.clone(), mean).cast(self.stash);
        let inv = Tensor::new(outs[2].shape.clone(), inv).cast(self.stash);
        Ok(Some(vec![y, mean, inv]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let xs = cx.shape(0)?.to_vec();
        let has_bias = cx.opt(2).is_some();
        let (a, p) = self.params(&xs, has_bias)?;
        let norm = xs[a..].to_vec();
        let n = p.outer * p.len;
        // Statistics of another element type than X, and asked for: run the kernel in
        // that type between casts. Otherwise in X's type (the kernel is f64 inside).
        let stats_named = names_output(cx, 1) || names_output(cx, 2);
        let u = if self.stash != d && stats_named {
            self.stash
        } else {
            d
        };
        let x = cx.operand(0)?;
        let x = if u != d { cast_to(cx, x, d, u, n) } else { x };
        let view = broadcast_of(cx, 1, &norm)?;
        let scale = param_operand(cx, 1, view.as_ref(), &norm, u, "scale")?;
        let bias = if has_bias {
            let view = broadcast_of(cx, 2, &norm)?;
            param_operand(cx, 2, view.as_ref(), &norm, u, "bias")?
        } else {
            let name = format!("{}:no_bias", cx.node.name);
            cx.weight(&name, &Tensor::new(vec![0], Data::zeros(u, 0)))
        };
        let y = if u != d { cx.temp(u, n) } else { cx.output(0)? };
        let mean = output_or_temp(cx, 1, u, p.outer)?;
        let inv = output_or_temp(cx, 2, u, p.outer)?;
        let call = TypedCall::new("layer_norm", vec![u], &p);
        step_multi(cx, call, vec![x, scale, bias], &[y, mean, inv]);
        if u != d {
            let out = cx.output(0)?;
            let call = TypedCall::bare("cast", vec![u, d]).inputs(vec![u]);
            cx.step(Kernel::Typed(call), vec![Operand::Buffer(y)], out);
        }
        Ok(())
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// RMSNormalization

/// RMSNormalization (opset 23): inputs X and scale, of one element type.
#[derive(Debug, Clone)]
pub struct RmsNormalization {
    pub axis: i64,
    pub epsilon: f32,
}

impl Operator for RmsNormalization {
    fn name(&self) -> &'static str {
        "RMSNormalization"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        let xs = cx.dims(0)?;
        let a = normalize_axis(self.axis, xs.len())?;
        check_param(cx, 1, "scale", d, &xs[a..])?;
        Ok(vec![Fact::new(d, xs.to_vec())])
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "X")?;
        let (a, outer, len) = rows(&x.shape, self.axis)?;
        let scale = expand_const(cx.constant(1, "scale")?, &x.shape[a..])?;
        let p = tp::RmsNorm {
            outer,
            len,
            epsilon: self.epsilon,
        };
        let data = dispatch_data!(&x.data, v: T => {
            let s = scale.values::<T>().ok_or("scale type")?;
            let mut out = vec![T::default(); v.len()];
            typed::rms_norm(&p, v, s, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(x.shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let xs = cx.shape(0)?.to_vec();
        let (a, outer, len) = rows(&xs, self.axis)?;
        let norm = xs[a..].to_vec();
        let x = cx.operand(0)?;
        let view = broadcast_of(cx, 1, &norm)?;
        let scale = param_operand(cx, 1, view.as_ref(), &norm, d, "scale")?;
        let p = tp::RmsNorm {
            outer,
            len,
            epsilon: self.epsilon,
        };
        cx.typed(TypedCall::new("rms_norm", vec![d], &p), vec![x, scale], 0)?;
        Ok(())
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// GroupNormalization, InstanceNormalization

/// GroupNormalization (`groups` given; scale and bias per group before opset 21, per
/// channel from it) and InstanceNormalization (`groups: None`: one group per channel).
#[derive(Debug, Clone)]
pub struct GroupNormalization {
    pub name: &'static str,
    pub groups: Option<usize>,
    pub epsilon: f32,
}

impl GroupNormalization {
    /// The kernel's parameters and the length scale and bias must have.
    fn params(&self, xs: &[usize], opset: i64) -> R<(tp::GroupNorm, usize)> {
        if xs.len() < 2 {
            return Err(format!("input must have rank ≥ 2 (N, C, ...), got {xs:?}"));
        }
        let channels = xs[1];
        let groups = self.groups.unwrap_or(channels);
        if groups == 0 || !channels.is_multiple_of(groups) {
            return Err(format!(
                "num_groups {groups} must be positive and divide the {channels} channels"
            ));
        }
        let p = tp::GroupNorm {
            n: xs[0],
            groups,
            channels,
            inner: xs[2..].iter().product(),
            epsilon: self.epsilon,
        };
        let per_group = self.groups.is_some() && opset < 21;
        Ok((p, if per_group { groups } else { channels }))
    }

    /// The view repeating a per-group parameter for each channel of its group.
    fn repeat_view(p: &tp::GroupNorm) -> R<tp::Strided> {
        strided(&[p.groups, p.channels / p.groups], 0, &[1, 0])
    }
}

impl Operator for GroupNormalization {
    fn name(&self) -> &'static str {
        self.name
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        let xs = cx.dims(0)?;
        let (_, plen) = self.params(&checkable_shape(xs, &[1])?, cx.opset())?;
        for (i, what) in [(1, "scale"), (2, "bias")] {
            let v = cx.input(i)?;
            if v.dtype != d || v.shape() != [plen] {
                return Err(format!(
                    "{what} (input {i}) is {} {:?}, expected {d} [{plen}]",
                    v.dtype,
                    v.shape()
                ));
            }
        }
        Ok(vec![Fact::new(d, xs.to_vec())])
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "X")?;
        let (p, plen) = self.params(&x.shape, cx.opset())?;
        let per_channel = |i: usize, what: &str| -> R<Tensor> {
            let t = cx.constant(i, what)?;
            if plen == p.channels {
                Ok(t.clone())
            } else {
                eval_view(t, &Self::repeat_view(&p)?, &[p.channels])
            }
        };
        let (scale, bias) = (per_channel(1, "scale")?, per_channel(2, "bias")?);
        let data = dispatch_data!(&x.data, v: T => {
            let s = scale.values::<T>().ok_or("scale type")?;
            let b = bias.values::<T>().ok_or("bias type")?;
            let mut out = vec![T::default(); v.len()];
            typed::group_norm(&p, v, s, b, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(x.shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let (p, plen) = self.params(cx.shape(0)?, cx.opset())?;
        let view = if plen == p.channels {
            None
        } else {
            Some(Self::repeat_view(&p)?)
        };
        let x = cx.operand(0)?;
        let c = [p.channels];
        let scale = param_operand(cx, 1, view.as_ref(), &c, d, "scale")?;
        let bias = param_operand(cx, 2, view.as_ref(), &c, d, "bias")?;
        let call = TypedCall::new("group_norm", vec![d], &p);
        cx.typed(call, vec![x, scale, bias], 0)?;
        Ok(())
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// LpNormalization, MeanVarianceNormalization

/// LpNormalization: `x / ‖x‖_p` along `axis`, `p` 1 or 2.
#[derive(Debug, Clone)]
pub struct LpNormalization {
    pub axis: i64,
    pub p: u8,
}

impl LpNormalization {
    fn params(&self, xs: &[usize]) -> R<tp::LpNorm> {
        let a = normalize_axis(self.axis, xs.len())?;
        Ok(tp::LpNorm {
            outer: xs[..a].iter().product(),
            len: xs[a],
            inner: xs[a + 1..].iter().product(),
            p: self.p,
        })
    }
}

impl Operator for LpNormalization {
    fn name(&self) -> &'static str {
        "LpNormalization"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        let xs = cx.dims(0)?;
        self.params(&checkable_shape(xs, &[])?)?;
        Ok(vec![Fact::new(d, xs.to_vec())])
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "input")?;
        let p = self.params(&x.shape)?;
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); v.len()];
            typed::lp_norm(&p, v, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(x.shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let p = self.params(cx.shape(0)?)?;
        let x = cx.operand(0)?;
        cx.typed(TypedCall::new("lp_norm", vec![d], &p), vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// MeanVarianceNormalization over `axes`.
#[derive(Debug, Clone)]
pub struct MeanVarianceNormalization {
    pub axes: Vec<i64>,
}

impl MeanVarianceNormalization {
    fn params(&self, xs: &[usize]) -> R<tp::Mvn> {
        if xs.len() > tp::RANK {
            return Err(format!(
                "input of rank {} exceeds the supported {}",
                xs.len(),
                tp::RANK
            ));
        }
        let mut p = tp::Mvn {
            rank: xs.len(),
            shape: [1; tp::RANK],
            reduced: [false; tp::RANK],
        };
        p.shape[..xs.len()].copy_from_slice(xs);
        for &a in &self.axes {
            p.reduced[normalize_axis(a, xs.len())?] = true;
        }
        Ok(p)
    }
}

impl Operator for MeanVarianceNormalization {
    fn name(&self) -> &'static str {
        "MeanVarianceNormalization"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        let xs = cx.dims(0)?;
        self.params(&checkable_shape(xs, &[])?)?;
        Ok(vec![Fact::new(d, xs.to_vec())])
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "X")?;
        let p = self.params(&x.shape)?;
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); v.len()];
            typed::mean_variance_norm(&p, v, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(x.shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let p = self.params(cx.shape(0)?)?;
        let x = cx.operand(0)?;
        let call = TypedCall::new("mean_variance_norm", vec![d], &p);
        cx.typed(call, vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// RotaryEmbedding

/// RotaryEmbedding (opset 23): inputs X (`batch × heads × seq × head` or `batch × seq ×
/// hidden` with `num_heads`), cos_cache, sin_cache and optional position_ids.
#[derive(Debug, Clone)]
pub struct RotaryEmbedding {
    pub interleaved: bool,
    /// 0: the whole head.
    pub rotary_dim: usize,
    /// 0: not given.
    pub num_heads: usize,
}

impl RotaryEmbedding {
    fn params(&self, cx: &InferCx) -> R<tp::Rotary> {
        let xs = cx.shape(0)?;
        let (batch, seq, heads, head_size, heads_first) = match *xs {
            [b, h, s, d] => {
                if self.num_heads != 0 && self.num_heads != h {
                    return Err(format!(
                        "num_heads {} does not match the input's {h} heads (shape {xs:?})",
                        self.num_heads
                    ));
                }
                (b, s, h, d, true)
            }
            [b, s, hidden] => {
                let h = self.num_heads;
                if h == 0 || !hidden.is_multiple_of(h) {
                    return Err(format!(
                        "a 3-D input needs num_heads dividing its hidden size {hidden}, got {h}"
                    ));
                }
                (b, s, h, hidden / h, false)
            }
            _ => {
                return Err(format!(
                    "input must be 4-D (batch, heads, seq, head) or 3-D (batch, seq, hidden), got {xs:?}"
                ));
            }
        };
        let rot_dim = if self.rotary_dim == 0 {
            head_size
        } else {
            self.rotary_dim
        };
        if !rot_dim.is_multiple_of(2) || rot_dim > head_size {
            return Err(format!(
                "rotary_embedding_dim {rot_dim} must be even and at most the head size {head_size}"
            ));
        }
        let half = rot_dim / 2;
        let cs = cx.shape(1)?;
        let cache_rows = if let Some(pos) = cx.opt(3) {
            if pos.shape() != [batch, seq] || !pos.dtype.is_int() {
                return Err(format!(
                    "position_ids is {} {:?}, expected int64 [{batch}, {seq}]",
                    pos.dtype,
                    pos.shape()
                ));
            }
            match *cs {
                [rows, h] if h == half => rows,
                _ => {
                    return Err(format!(
                        "cos_cache has shape {cs:?}, expected [max_position, {half}] with position_ids"
                    ));
                }
            }
        } else {
            if cs != [batch, seq, half] {
                return Err(format!(
                    "cos_cache has shape {cs:?}, expected [{batch}, {seq}, {half}] without position_ids"
                ));
            }
            batch * seq
        };
        let d = cx.dtype(0)?;
        for (i, what) in [(1, "cos_cache"), (2, "sin_cache")] {
            let v = cx.input(i)?;
            if v.dtype != d || v.shape() != cs {
                return Err(format!(
                    "{what} is {} {:?}, expected {d} {cs:?}",
                    v.dtype,
                    v.shape()
                ));
            }
        }
        Ok(tp::Rotary {
            batch,
            seq,
            heads,
            head_size,
            rot_dim,
            interleaved: self.interleaved,
            heads_first,
            cache_rows,
        })
    }
}

impl Operator for RotaryEmbedding {
    fn name(&self) -> &'static str {
        "RotaryEmbedding"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        self.params(cx)?;
        Ok(vec![Fact::new(d, cx.dims(0)?.to_vec())])
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let p = self.params(cx)?;
        let x = cx.constant(0, "input")?;
        let (cos, sin) = (cx.constant(1, "cos_cache")?, cx.constant(2, "sin_cache")?);
        let pos = match cx.opt(3) {
            Some(_) => Some(cx.constant(3, "position_ids")?.as_i64()),
            None => None,
        };
        let data = dispatch_data!(&x.data, v: T => {
            let c = cos.values::<T>().ok_or("cos_cache type")?;
            let s = sin.values::<T>().ok_or("sin_cache type")?;
            let mut out = vec![T::default(); v.len()];
            match &pos {
                Some(pos) => typed::rotary_embedding_pos(&p, v, c, s, pos, &mut out)
                    .map_err(|e| format!("position_ids: {e}"))?,
                None => typed::rotary_embedding(&p, v, c, s, &mut out),
            }
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(x.shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let p = self.params(&infer)?;
        let d = cx.dtype(0)?;
        let inputs = cx.operands()?;
        let call = match cx.opt(3) {
            Some(pos) => TypedCall::new("rotary_embedding_pos", vec![d, pos.dtype], &p)
                .fallible()
                .inputs(vec![d, d, d, pos.dtype]),
            None => TypedCall::new("rotary_embedding", vec![d], &p),
        };
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// Declarations

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "LayerNormalization",
        since: 17,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(LayerNormalization {
                axis: cx.attrs.int_or("axis", -1)?,
                epsilon: cx.attrs.float_or("epsilon", 1e-5)?,
                stash: stash_dtype(cx.attrs.int_or("stash_type", 1)?)?,
            }))
        },
    },
    OpDef {
        name: "RMSNormalization",
        since: 23,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            stash_dtype(cx.attrs.int_or("stash_type", 1)?)?;
            Ok(Arc::new(RmsNormalization {
                axis: cx.attrs.int_or("axis", -1)?,
                epsilon: cx.attrs.float_or("epsilon", 1e-5)?,
            }))
        },
    },
    OpDef {
        name: "GroupNormalization",
        since: 18,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            stash_dtype(cx.attrs.int_or("stash_type", 1)?)?;
            let groups = cx
                .attrs
                .int("num_groups")?
                .ok_or("the num_groups attribute is required")?;
            let groups = usize::try_from(groups)
                .ok()
                .filter(|&g| g > 0)
                .ok_or_else(|| format!("num_groups {groups} must be positive"))?;
            Ok(Arc::new(GroupNormalization {
                name: "GroupNormalization",
                groups: Some(groups),
                epsilon: cx.attrs.float_or("epsilon", 1e-5)?,
            }))
        },
    },
    OpDef {
        name: "InstanceNormalization",
        since: 6,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(GroupNormalization {
                name: "InstanceNormalization",
                groups: None,
                epsilon: cx.attrs.float_or("epsilon", 1e-5)?,
            }))
        },
    },
    OpDef {
        name: "LpNormalization",
        since: 1,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            let p = match cx.attrs.int_or("p", 2)? {
                1 => 1,
                2 => 2,
                p => return Err(format!("p = {p} is not supported, expected 1 or 2")),
            };
            Ok(Arc::new(LpNormalization {
                axis: cx.attrs.int_or("axis", -1)?,
                p,
            }))
        },
    },
    OpDef {
        name: "MeanVarianceNormalization",
        since: 9,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(MeanVarianceNormalization {
                axes: cx.attrs.ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]),
            }))
        },
    },
    OpDef {
        name: "RotaryEmbedding",
        since: 23,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            let nonneg = |name: &str| -> R<usize> {
                let v = cx.attrs.int_or(name, 0)?;
                usize::try_from(v).map_err(|_| format!("{name} {v} must not be negative"))
            };
            Ok(Arc::new(RotaryEmbedding {
                interleaved: cx.attrs.flag("interleaved")?,
                rotary_dim: nonneg("rotary_embedding_dim")?,
                num_heads: nonneg("num_heads")?,
            }))
        },
    },
    OpDef {
        name: "Swish",
        since: 24,
        types: Types::Float,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(Unary {
                name: "Swish",
                op: tp::UnaryOp::Swish {
                    alpha: cx.attrs.float_or("alpha", 1.0)?,
                },
                types: Types::Float,
            }))
        },
    },
];
