//! Single operators of no larger family, on the kernels of `typed::misc`: Einsum,
//! CumProd (the CumSum operator of `index`, with a product), BitCast,
//! ReverseSequence, Det, TensorScatter, SwiGLU, and the deprecated
//! Scatter (ScatterElements under its opset 9–10 name).

use std::collections::BTreeMap;
use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::{
    Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, ParseCx, R, Types, fixed, normalize_axis,
};
use crate::dim::{Dim, dims_of, fmt_dims};
use crate::lower::TypedCall;
use crate::tensor::{DType, Data, Scalar, Tensor};
use crate::{dispatch_data, dispatch_dtype, impl_as_any};

/// The values of a constant as `T` (its own element type).
fn values<T: Scalar>(t: &Tensor) -> R<&[T]> {
    T::unwrap(&t.data).ok_or_else(|| {
        format!(
            "constant of type {}, expected {}",
            t.dtype,
            <T as Scalar>::DTYPE
        )
    })
}

fn index_type(cx: &InferCx, i: usize, what: &str) -> R<DType> {
    match cx.dtype(i)? {
        d @ (DType::I32 | DType::I64) => Ok(d),
        d => Err(format!(
            "{what} has element type {d}, expected int32 or int64"
        )),
    }
}

/// The InferCx of a lowering (parameters are computed once, from the facts).
// ---------------------------------------------------------------------------------
// Einsum

#[derive(Debug, Clone)]
pub struct Einsum {
    pub equation: String,
}

/// One subscript: a letter, or the ellipsis.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sub {
    Letter(char),
    Ellipsis,
}

fn subscripts(term: &str) -> R<Vec<Sub>> {
    let mut v = Vec::new();
    let mut rest = term;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("...") {
            if v.contains(&Sub::Ellipsis) {
                return Err(format!("Einsum term `{term}` has two ellipses"));
            }
            v.push(Sub::Ellipsis);
            rest = r;
        } else if c.is_ascii_alphabetic() {
            v.push(Sub::Letter(c));
            rest = &rest[1..];
        } else {
            return Err(format!(
                "Einsum term `{term}`: `{c}` is neither a letter nor `...`"
            ));
        }
    }
    Ok(v)
}

/// Label ids: letters by their code, broadcast (ellipsis) dimension `j` as `1000 + j`.
const ELLIPSIS_LABEL: u32 = 1000;

/// An equation's labels: each operand's (one per dim), the output's, and every label
/// in order of first appearance.
struct Labels {
    operands: Vec<Vec<u32>>,
    out: Vec<u32>,
    order: Vec<u32>,
}

impl Einsum {
    /// Parses the equation against the operands' dims and finds each label's size: one
    /// size where a label repeats, a size-1 dim broadcasting, and a symbol against a
    /// known size taking the known one (the symbol must be it or 1 at run time, as in
    /// [`super::broadcast_dims`]).
    fn labels(&self, shapes: &[&[Dim]]) -> R<(Labels, BTreeMap<u32, Dim>)> {
        let eq: String = self
            .equation
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (eq.as_str(), None),
        };
        let terms: Vec<Vec<Sub>> = lhs.split(',').map(subscripts).collect::<R<_>>()?;
        if terms.len() != shapes.len() {
            return Err(format!(
                "Einsum equation `{}` names {} operands, the node has {}",
                self.equation,
                terms.len(),
                shapes.len()
            ));
        }
        if shapes.len() > tp::EINSUM_INPUTS {
            return Err(format!(
                "Einsum has {} operands; at most {} are supported",
                shapes.len(),
                tp::EINSUM_INPUTS
            ));
        }
        // Each operand's labels, one per dimension.
        let mut ell_rank = 0;
        let mut ell_ranks = Vec::new();
        for (t, s) in terms.iter().zip(shapes) {
            let letters = t.iter().filter(|s| **s != Sub::Ellipsis).count();
            let has_ell = t.contains(&Sub::Ellipsis);
            if s.len() < letters || (!has_ell && s.len() != letters) {
                return Err(format!(
                    "Einsum equation `{}`: an operand of shape {} does not match its \
                     subscripts",
                    self.equation,
                    fmt_dims(s)
                ));
            }
            let e = s.len() - letters;
            ell_rank = ell_rank.max(e);
            ell_ranks.push(e);
        }
        let expand = |t: &[Sub], e: usize| -> Vec<u32> {
            let mut v = Vec::new();
            for s in t {
                match s {
                    Sub::Letter(c) => v.push(*c as u32),
                    Sub::Ellipsis => {
                        v.extend((ell_rank - e..ell_rank).map(|j| ELLIPSIS_LABEL + j as u32))
                    }
                }
            }
            v
        };
        let labels: Vec<Vec<u32>> = terms
            .iter()
            .zip(&ell_ranks)
            .map(|(t, &e)| expand(t, e))
            .collect();
        // Sizes, with broadcasting of 1.
        let mut sizes: BTreeMap<u32, Dim> = BTreeMap::new();
        let mut order: Vec<u32> = Vec::new();
        for (ls, s) in labels.iter().zip(shapes) {
            for (&l, d) in ls.iter().zip(s.iter()) {
                match sizes.get(&l) {
                    None => {
                        sizes.insert(l, d.clone());
                        order.push(l);
                    }
                    Some(old) if old == d || d.is(1) => {}
                    Some(old) if old.is(1) || (!old.is_known() && d.is_known()) => {
                        sizes.insert(l, d.clone());
                    }
                    Some(old) if old.is_known() && !d.is_known() => {}
                    Some(old) => {
                        return Err(format!(
                            "Einsum equation `{}`: a label has sizes {old} and {d}",
                            self.equation
                        ));
                    }
                }
            }
        }
        let out: Vec<u32> = match rhs {
            Some(r) => {
                let subs = subscripts(r)?;
                let v = expand(&subs, ell_rank);
                for (i, l) in v.iter().enumerate() {
                    if v[..i].contains(l) {
                        return Err(format!("Einsum output `{r}` repeats a subscript"));
                    }
                    if !sizes.contains_key(l) {
                        return Err(format!(
                            "Einsum output `{r}` names a subscript no operand has"
                        ));
                    }
                }
                v
            }
            None => {
                let mut v: Vec<u32> = (0..ell_rank).map(|j| ELLIPSIS_LABEL + j as u32).collect();
                let mut letters: Vec<u32> = order
                    .iter()
                    .copied()
                    .filter(|&l| {
                        l < ELLIPSIS_LABEL
                            && labels.iter().flatten().filter(|&&m| m == l).count() == 1
                    })
                    .collect();
                letters.sort_unstable();
                v.extend(letters);
                v
            }
        };
        Ok((
            Labels {
                operands: labels,
                out,
                order,
            },
            sizes,
        ))
    }

    /// The output dims.
    fn out_dims(&self, shapes: &[&[Dim]]) -> R<Vec<Dim>> {
        let (l, sizes) = self.labels(shapes)?;
        l.out
            .iter()
            .map(|x| {
                sizes
                    .get(x)
                    .cloned()
                    .ok_or_else(|| "Einsum: an output label has no size".into())
            })
            .collect()
    }

    /// The kernel's parameters for operands of fixed `shapes`.
    fn params(&self, shapes: &[&[usize]]) -> R<tp::Einsum> {
        let dims: Vec<Vec<Dim>> = shapes.iter().map(|s| dims_of(s)).collect();
        let refs: Vec<&[Dim]> = dims.iter().map(Vec::as_slice).collect();
        let (
            Labels {
                operands: labels,
                out,
                order,
            },
            sym_sizes,
        ) = self.labels(&refs)?;
        let sizes = sym_sizes
            .iter()
            .map(|(&l, d)| Ok((l, d.to_usize().ok_or("Einsum: a size is not known")?)))
            .collect::<R<BTreeMap<u32, usize>>>()?;
        let mut all = out.clone();
        all.extend(order.iter().copied().filter(|l| !out.contains(l)));
        if all.len() > tp::EINSUM_LABELS {
            return Err(format!(
                "Einsum has {} distinct labels; at most {} are supported",
                all.len(),
                tp::EINSUM_LABELS
            ));
        }
        let mut p = tp::Einsum {
            n_labels: all.len(),
            n_out: out.len(),
            sizes: [1; tp::EINSUM_LABELS],
            n_inputs: shapes.len(),
            strides: [[0; tp::EINSUM_LABELS]; tp::EINSUM_INPUTS],
        };
        for (i, l) in all.iter().enumerate() {
            p.sizes[i] = sizes[l];
        }
        for (k, (ls, s)) in labels.iter().zip(shapes).enumerate() {
            let mut stride = 1;
            for (&l, &d) in ls.iter().zip(s.iter()).rev() {
                let i = all.iter().position(|&m| m == l).unwrap_or(0);
                if !(d == 1 && p.sizes[i] != 1) {
                    p.strides[k][i] += stride;
                }
                stride *= d;
            }
        }
        Ok(p)
    }
}

impl Operator for Einsum {
    fn name(&self) -> &'static str {
        "Einsum"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Numeric)?;
        for v in cx.inputs() {
            if v.dtype != d {
                return Err(format!(
                    "Einsum operands have element types {d} and {}, expected one type",
                    v.dtype
                ));
            }
        }
        let shapes: Vec<&[Dim]> = cx.inputs().iter().map(|v| v.dims()).collect();
        Ok(vec![Fact::new(d, self.out_dims(&shapes)?)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let ins = cx.constants().ok_or("Einsum: operands not constant")?;
        let shapes: Vec<&[usize]> = ins.iter().map(|t| t.shape.as_slice()).collect();
        let p = self.params(&shapes)?;
        let n = outs[0].shape.iter().product();
        let data = dispatch_dtype!(outs[0].dtype, T => {
            let slices: Vec<&[T]> = ins.iter().map(|t| values::<T>(t)).collect::<R<_>>()?;
            let mut out = vec![T::default(); n];
            typed::einsum(&p, &slices, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let shapes = cx.inputs_shapes();
        let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
        let p = self.params(&refs)?;
        let d = cx.dtype(0)?;
        let inputs = cx.operands()?;
        cx.typed(TypedCall::new("einsum", vec![d], &p).variadic(), inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// BitCast

#[derive(Debug, Clone)]
pub struct BitCast {
    pub to: DType,
}

impl Operator for BitCast {
    fn name(&self) -> &'static str {
        "BitCast"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let from = cx.dtype(0)?;
        if from.size() != self.to.size() {
            return Err(format!(
                "BitCast from {from} ({} bytes) to {} ({} bytes): the types must have the \
                 same width",
                from.size(),
                self.to,
                self.to.size()
            ));
        }
        Ok(vec![Fact::new(self.to, cx.dims(0)?.to_vec())])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "input")?;
        let data = dispatch_data!(&x.data, v: A => {
            dispatch_dtype!(self.to, B => {
                let mut out = vec![B::default(); v.len()];
                typed::bitcast::<A, B>(v, &mut out).map_err(|e| e.to_string())?;
                B::wrap(out)
            })
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let from = cx.dtype(0)?;
        let x = cx.operand(0)?;
        let call = TypedCall::bare("bitcast", vec![from, self.to])
            .fallible()
            .inputs(vec![from]);
        cx.typed(call, vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// ReverseSequence

#[derive(Debug, Clone)]
pub struct ReverseSequence {
    pub batch_axis: i64,
    pub time_axis: i64,
}

impl ReverseSequence {
    /// The batch and time axes, after checking input `s` and `sequence_lens` `lens`.
    fn axes(&self, s: &[Dim], lens: &[Dim]) -> R<(usize, usize)> {
        if s.len() < 2 {
            return Err(format!("input {} must have rank ≥ 2", fmt_dims(s)));
        }
        let b = normalize_axis(self.batch_axis, s.len())?;
        let t = normalize_axis(self.time_axis, s.len())?;
        if b > 1 || t > 1 || b == t {
            return Err(format!(
                "batch_axis {b} and time_axis {t} must be 0 and 1 in some order"
            ));
        }
        if lens != std::slice::from_ref(&s[b]) {
            return Err(format!(
                "sequence_lens has shape {}, expected [{}]",
                fmt_dims(lens),
                s[b]
            ));
        }
        Ok((b, t))
    }

    fn params(&self, cx: &InferCx) -> R<tp::ReverseSequence> {
        let s = cx.shape(0)?;
        let (b, t) = self.axes(&dims_of(s), cx.dims(1)?)?;
        Ok(tp::ReverseSequence {
            rank: s.len(),
            shape: fixed(s, 1)?,
            batch_axis: b,
            time_axis: t,
        })
    }
}

impl Operator for ReverseSequence {
    fn name(&self) -> &'static str {
        "ReverseSequence"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        index_type(cx, 1, "sequence_lens")?;
        let xs = cx.dims(0)?;
        self.axes(xs, cx.dims(1)?)?;
        Ok(vec![Fact::new(cx.dtype(0)?, xs.to_vec())])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let p = self.params(cx)?;
        let x = cx.constant(0, "input")?;
        let lens = cx.constant(1, "sequence_lens")?.as_i64();
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); v.len()];
            typed::reverse_sequence(&p, v, &lens, &mut out).map_err(|e| e.to_string())?;
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        let (d, di) = (cx.dtype(0)?, cx.dtype(1)?);
        let inputs = cx.operands()?;
        let call = TypedCall::new("reverse_sequence", vec![d, di], &p)
            .fallible()
            .inputs(vec![d, di]);
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// Det

#[derive(Debug, Clone)]
pub struct Det;

/// Det's output dims: the batch dims of `s` (`[.., n, n]`).
fn det_dims(s: &[Dim]) -> R<Vec<Dim>> {
    let r = s.len();
    if r < 2 || s[r - 1] != s[r - 2] {
        return Err(format!(
            "Det input {} must end with two equal dimensions (square matrices)",
            fmt_dims(s)
        ));
    }
    Ok(s[..r - 2].to_vec())
}

impl Det {
    fn params(&self, cx: &InferCx) -> R<tp::Det> {
        let s = cx.shape(0)?;
        det_dims(&dims_of(s))?;
        let r = s.len();
        Ok(tp::Det {
            batch: s[..r - 2].iter().product(),
            n: s[r - 1],
        })
    }
}

impl Operator for Det {
    fn name(&self) -> &'static str {
        "Det"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        Ok(vec![Fact::new(d, det_dims(cx.dims(0)?)?)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let p = self.params(cx)?;
        let x = cx.constant(0, "input")?;
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); p.batch];
            let mut scratch = vec![0.0; p.scratch_len()];
            typed::det(&p, v, &mut out, &mut scratch);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        let call = TypedCall::new("det", vec![d], &p).inputs(vec![d]);
        // The LU scratch (f64): one more output no value names.
        cx.typed_multi(
            call,
            vec![x],
            &[
                (0, d, p.batch),
                (usize::MAX, DType::F64, p.scratch_len().max(1)),
            ],
        )
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// TensorScatter

#[derive(Debug, Clone)]
pub struct TensorScatter {
    pub circular: bool,
    pub axis: i64,
}

impl TensorScatter {
    /// The axis, after checking cache `cs`, update `us` and write indices `ws`: equal
    /// dims except along the axis, where the update is at most the cache (checked when
    /// both are known).
    fn axis(&self, cs: &[Dim], us: &[Dim], ws: Option<&[Dim]>) -> R<usize> {
        let a = normalize_axis(self.axis, cs.len())?;
        if a == 0 {
            return Err("TensorScatter: axis must not be 0 (the batch axis)".into());
        }
        let fits = cs.len() == us.len()
            && cs.iter().zip(us).enumerate().all(|(i, (c, u))| {
                if i != a {
                    u == c
                } else {
                    match (u.known(), c.known()) {
                        (Some(u), Some(c)) => u <= c,
                        _ => true,
                    }
                }
            });
        if !fits {
            return Err(format!(
                "TensorScatter: update {} does not fit cache {} along axis {a}",
                fmt_dims(us),
                fmt_dims(cs)
            ));
        }
        if let Some(ws) = ws
            && ws != std::slice::from_ref(&cs[0])
        {
            return Err(format!(
                "write_indices has shape {}, expected [{}]",
                fmt_dims(ws),
                cs[0]
            ));
        }
        Ok(a)
    }

    fn params(&self, cx: &InferCx) -> R<tp::TensorScatter> {
        let cs = cx.shape(0)?;
        let us = cx.shape(1)?;
        let ws = cx.opt(2).map(|w| w.dims());
        let a = self.axis(&dims_of(cs), &dims_of(us), ws)?;
        Ok(tp::TensorScatter {
            batch: cs[0],
            mid: cs[1..a].iter().product(),
            max_seq: cs[a],
            seq: us[a],
            inner: cs[a + 1..].iter().product(),
            circular: self.circular,
        })
    }
}

impl Operator for TensorScatter {
    fn name(&self) -> &'static str {
        "TensorScatter"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.dtype(0)?;
        if cx.dtype(1)? != d {
            return Err(format!(
                "update has element type {}, expected {d} like the cache",
                cx.dtype(1)?
            ));
        }
        if cx.opt(2).is_some() {
            index_type(cx, 2, "write_indices")?;
        }
        let cs = cx.dims(0)?;
        self.axis(cs, cx.dims(1)?, cx.opt(2).map(|w| w.dims()))?;
        Ok(vec![Fact::new(d, cs.to_vec())])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let p = self.params(cx)?;
        let c = cx.constant(0, "past_cache")?;
        let u = cx.constant(1, "update")?;
        let w = cx.opt_constant(2).map(|t| t.as_i64()).unwrap_or_default();
        let data = dispatch_data!(&c.data, v: T => {
            let mut out = vec![T::default(); v.len()];
            typed::tensor_scatter(&p, v, values::<T>(u)?, &w, &mut out)
                .map_err(|e| e.to_string())?;
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        let d = cx.dtype(0)?;
        let mut inputs = vec![cx.operand(0)?, cx.operand(1)?];
        let di = if cx.opt(2).is_some() {
            inputs.push(cx.operand(2)?);
            cx.dtype(2)?
        } else {
            let name = format!("{}:no_write_indices", cx.node.name);
            inputs.push(cx.weight(&name, &Tensor::new(vec![0], Data::zeros(DType::I64, 0))));
            DType::I64
        };
        let call = TypedCall::new("tensor_scatter", vec![d, di], &p)
            .fallible()
            .inputs(vec![d, d, di]);
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// SwiGLU

#[derive(Debug, Clone)]
pub struct SwiGlu {
    pub alpha: f32,
}

impl Operator for SwiGlu {
    fn name(&self) -> &'static str {
        "SwiGLU"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        if cx.dtype(1)? != d || cx.dims(1)? != cx.dims(0)? {
            return Err(format!(
                "SwiGLU: B ({} {:?}) must have A's type and shape ({d} {:?})",
                cx.dtype(1)?,
                cx.dims(1)?,
                cx.dims(0)?
            ));
        }
        Ok(vec![Fact::new(d, cx.dims(0)?.to_vec())])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let a = cx.constant(0, "A")?;
        let b = cx.constant(1, "B")?;
        let p = tp::SwiGlu { alpha: self.alpha };
        let data = dispatch_data!(&a.data, v: T => {
            let mut out = vec![T::default(); v.len()];
            typed::swiglu(&p, v, values::<T>(b)?, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let inputs = cx.operands()?;
        let call = TypedCall::new("swiglu", vec![d], &tp::SwiGlu { alpha: self.alpha });
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

// ---------------------------------------------------------------------------------
// Signal: DFT, STFT, windows, MelWeightMatrix

/// The first value of constant input `i` as an integer.
fn const_int(cx: &InferCx, i: usize, what: &str) -> R<i64> {
    cx.constant(i, what)?
        .as_i64()
        .first()
        .copied()
        .ok_or_else(|| format!("{what} is empty"))
}

#[derive(Debug, Clone)]
pub struct Dft {
    pub inverse: bool,
    pub onesided: bool,
    /// The attribute (opset < 20); input 2 after.
    pub axis: Option<i64>,
}

impl Dft {
    /// The axis, the transform length and the output dims over input dims `s`.
    fn geometry(&self, cx: &InferCx, s: &[Dim]) -> R<(usize, Dim, Vec<Dim>)> {
        let r = s.len();
        if r < 2 || !(s[r - 1].is(1) || s[r - 1].is(2)) {
            return Err(format!(
                "DFT input {} must have rank ≥ 2 and end in 1 (real) or 2 (complex)",
                fmt_dims(s)
            ));
        }
        let axis = match self.axis {
            Some(a) => a,
            None if cx.opt(2).is_some() => const_int(cx, 2, "axis")?,
            None => -2,
        };
        let a = normalize_axis(axis, r)?;
        if a == r - 1 {
            return Err(format!(
                "DFT axis {axis} is the last (complex) dimension of {}",
                fmt_dims(s)
            ));
        }
        let n = &s[a];
        let length = if cx.opt(1).is_some() {
            // A constant: its value sets the output's length.
            let l = const_int(cx, 1, "dft_length")?;
            if l < 1 {
                return Err(format!("dft_length {l} must be positive"));
            }
            Dim::from(l)
        } else if self.inverse && self.onesided {
            match n.to_usize() {
                Some(n) => Dim::from(2 * n.saturating_sub(1)),
                None => (n.clone() - 1usize) * 2,
            }
        } else {
            n.clone()
        };
        if length.is(0) {
            return Err(format!(
                "DFT of {} along axis {a} has length 0",
                fmt_dims(s)
            ));
        }
        // As `tp::Dft::out_len` and `out_complex`.
        let mut out = s.to_vec();
        out[a] = if self.onesided && !self.inverse {
            length.div_floor(2) + 1
        } else {
            length.clone()
        };
        out[r - 1] = Dim::from(if self.onesided && self.inverse {
            1usize
        } else {
            2
        });
        Ok((a, length, out))
    }

    fn params(&self, cx: &InferCx) -> R<tp::Dft> {
        let s = cx.shape(0)?;
        let r = s.len();
        let (a, length, _) = self.geometry(cx, &dims_of(s))?;
        Ok(tp::Dft {
            outer: s[..a].iter().product(),
            n: s[a],
            inner: s[a + 1..r - 1].iter().product(),
            in_complex: s[r - 1] == 2,
            length: length.to_usize().ok_or("DFT length is not known")?,
            inverse: self.inverse,
            onesided: self.onesided,
        })
    }
}

impl Operator for Dft {
    fn name(&self) -> &'static str {
        "DFT"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        Ok(vec![Fact::new(d, self.geometry(cx, cx.dims(0)?)?.2)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let p = self.params(cx)?;
        let x = cx.constant(0, "input")?;
        let n = outs[0].shape.iter().product();
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); n];
            typed::dft(&p, v, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        cx.typed(
            TypedCall::new("dft", vec![d], &p).inputs(vec![d]),
            vec![x],
            0,
        )?;
        Ok(())
    }
    impl_as_any!();
}

#[derive(Debug, Clone)]
pub struct Stft {
    pub onesided: bool,
}

/// STFT's frame step, frame length and output dims `[batch, frames, bins, 2]`.
struct StftGeometry {
    step: usize,
    frame_len: Dim,
    out: Vec<Dim>,
}

impl Stft {
    /// The geometry over signal dims `s` (frame step and an explicit frame length are
    /// constants: their values set output dims).
    fn geometry(&self, cx: &InferCx, s: &[Dim]) -> R<StftGeometry> {
        if s.len() != 3 || !(s[2].is(1) || s[2].is(2)) {
            return Err(format!(
                "STFT signal {} must be [batch, length, 1 (real) or 2 (complex)]",
                fmt_dims(s)
            ));
        }
        let step = const_int(cx, 1, "frame_step")?;
        if step < 1 {
            return Err(format!("frame_step {step} must be positive"));
        }
        let window = cx.opt(2).map(|w| w.dims());
        if let Some(w) = window
            && w.len() != 1
        {
            return Err(format!("STFT window {} must have rank 1", fmt_dims(w)));
        }
        let frame_len = if cx.opt(3).is_some() {
            let l = const_int(cx, 3, "frame_length")?;
            if l < 1 {
                return Err(format!("frame_length {l} must be positive"));
            }
            Dim::from(l)
        } else if let Some(w) = window {
            w[0].clone()
        } else {
            s[1].clone()
        };
        if let Some(w) = window
            && w[0] != frame_len
        {
            return Err(format!(
                "STFT window has {} samples, frame_length is {frame_len}",
                w[0]
            ));
        }
        // At most the signal length: checked where both are known.
        let too_long = matches!((frame_len.known(), s[1].known()), (Some(f), Some(l)) if f > l);
        if frame_len.is(0) || too_long {
            return Err(format!(
                "STFT frame_length {frame_len} must be in 1..={} (the signal length)",
                s[1]
            ));
        }
        let step = step as usize;
        let frames = (s[1].clone() - frame_len.clone()).div_floor(step as u64) + 1;
        let bins = if self.onesided {
            frame_len.div_floor(2) + 1
        } else {
            frame_len.clone()
        };
        Ok(StftGeometry {
            step,
            frame_len,
            out: vec![s[0].clone(), frames, bins, Dim::from(2usize)],
        })
    }

    fn params(&self, cx: &InferCx) -> R<tp::Stft> {
        let s = cx.shape(0)?;
        let g = self.geometry(cx, &dims_of(s))?;
        let known = |d: &Dim| d.to_usize().ok_or("STFT: a size is not known");
        Ok(tp::Stft {
            batch: s[0],
            signal_len: s[1],
            in_complex: s[2] == 2,
            frames: known(&g.out[1])?,
            step: g.step,
            frame_len: known(&g.frame_len)?,
            bins: known(&g.out[2])?,
        })
    }
}

impl Operator for Stft {
    fn name(&self) -> &'static str {
        "STFT"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        if let Some(w) = cx.opt(2)
            && w.dtype != d
        {
            return Err(format!(
                "STFT window has element type {}, expected {d} like the signal",
                w.dtype
            ));
        }
        Ok(vec![Fact::new(d, self.geometry(cx, cx.dims(0)?)?.out)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let p = self.params(cx)?;
        let x = cx.constant(0, "signal")?;
        let w = cx.opt_constant(2);
        let n = outs[0].shape.iter().product();
        let data = dispatch_data!(&x.data, v: T => {
            let w: &[T] = match w {
                Some(w) => values::<T>(w)?,
                None => &[],
            };
            let mut out = vec![T::default(); n];
            typed::stft(&p, v, w, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        let w = if cx.opt(2).is_some() {
            cx.operand(2)?
        } else {
            let name = format!("{}:no_window", cx.node.name);
            cx.weight(&name, &Tensor::new(vec![0], Data::zeros(d, 0)))
        };
        let call = TypedCall::new("stft", vec![d], &p).inputs(vec![d, d]);
        cx.typed(call, vec![x, w], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// HannWindow, HammingWindow, BlackmanWindow of a constant size.
#[derive(Debug, Clone)]
pub struct WindowOp {
    pub kind: tp::WindowKind,
    pub periodic: bool,
    pub dtype: DType,
}

impl WindowOp {
    fn params(&self, cx: &InferCx) -> R<tp::Window> {
        cx.check_type(0, Types::Int)?;
        let size = const_int(cx, 0, "size")?;
        if size < 0 {
            return Err(format!("window size {size} must not be negative"));
        }
        Ok(tp::Window {
            kind: self.kind,
            size: size as usize,
            periodic: self.periodic,
        })
    }
}

impl Operator for WindowOp {
    fn name(&self) -> &'static str {
        match self.kind {
            tp::WindowKind::Hann => "HannWindow",
            tp::WindowKind::Hamming => "HammingWindow",
            tp::WindowKind::Blackman => "BlackmanWindow",
        }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let p = self.params(cx)?;
        Ok(vec![Fact::new(self.dtype, vec![p.size])])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let p = self.params(cx)?;
        let data = dispatch_dtype!(self.dtype, T => {
            let mut out = vec![T::default(); p.size];
            typed::window(&p, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        cx.typed(TypedCall::new("window", vec![self.dtype], &p), vec![], 0)?;
        Ok(())
    }
    impl_as_any!();
}

#[derive(Debug, Clone)]
pub struct MelWeightMatrix {
    pub dtype: DType,
}

impl MelWeightMatrix {
    fn params(&self, cx: &InferCx) -> R<tp::MelWeightMatrix> {
        let mels = const_int(cx, 0, "num_mel_bins")?;
        let len = const_int(cx, 1, "dft_length")?;
        let sr = const_int(cx, 2, "sample_rate")?;
        let edge = |i: usize, what: &str| -> R<f64> {
            cx.constant(i, what)?
                .as_f64()
                .first()
                .copied()
                .ok_or_else(|| format!("{what} is empty"))
        };
        let (lo, hi) = (edge(3, "lower_edge_hertz")?, edge(4, "upper_edge_hertz")?);
        if mels < 1 || len < 1 || sr < 1 {
            return Err(format!(
                "MelWeightMatrix: num_mel_bins {mels}, dft_length {len} and sample_rate {sr} \
                 must be positive"
            ));
        }
        Ok(tp::MelWeightMatrix {
            num_mel_bins: mels as usize,
            dft_length: len as usize,
            sample_rate: sr,
            lower_edge_hertz: lo,
            upper_edge_hertz: hi,
            f32_math: cx.dtype(3)? != DType::F64,
        })
    }
}

impl Operator for MelWeightMatrix {
    fn name(&self) -> &'static str {
        "MelWeightMatrix"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let p = self.params(cx)?;
        Ok(vec![Fact::new(
            self.dtype,
            vec![p.dft_length / 2 + 1, p.num_mel_bins],
        )])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let p = self.params(cx)?;
        let n = outs[0].shape.iter().product();
        let data = dispatch_dtype!(self.dtype, T => {
            let mut out = vec![T::default(); n];
            typed::mel_weight_matrix(&p, &mut out).map_err(|e| format!("MelWeightMatrix: {e}"))?;
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        let call = TypedCall::new("mel_weight_matrix", vec![self.dtype], &p).fallible();
        cx.typed(call, vec![], 0)?;
        Ok(())
    }
    impl_as_any!();
}

fn output_datatype(cx: &ParseCx) -> R<DType> {
    let code = cx.attrs.int_or("output_datatype", 1)?;
    match DType::from_onnx(code as i32) {
        Some(d) if d != DType::Bool => Ok(d),
        _ => Err(format!(
            "output_datatype {}, expected a numeric type",
            DType::onnx_code_name(code as i32)
        )),
    }
}

fn window_op(cx: &ParseCx, kind: tp::WindowKind) -> R<super::Op> {
    Ok(Arc::new(WindowOp {
        kind,
        periodic: cx.attrs.int_or("periodic", 1)? != 0,
        dtype: output_datatype(cx)?,
    }))
}

// ---------------------------------------------------------------------------------
// Declarations

fn to_dtype(cx: &ParseCx) -> R<DType> {
    let to = cx.attrs.int("to")?.ok_or("attribute `to` is required")?;
    DType::from_onnx(to as i32).ok_or_else(|| {
        format!(
            "attribute `to` is {}, which Kiln does not support",
            DType::onnx_code_name(to as i32)
        )
    })
}

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "Einsum",
        since: 12,
        types: Types::Numeric,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Einsum {
                equation: cx
                    .attrs
                    .string("equation")?
                    .ok_or("attribute `equation` is required")?,
            }))
        },
    },
    OpDef {
        name: "CumProd",
        since: 26,
        types: Types::Numeric,
        cuda: false,
        // The same operator as CumSum, with a product (ops/index.rs).
        parse: |cx| super::index::Cumulative::parse(cx, true),
    },
    OpDef {
        name: "BitCast",
        since: 26,
        types: Types::All,
        cuda: false,
        parse: |cx| Ok(Arc::new(BitCast { to: to_dtype(cx)? })),
    },
    OpDef {
        name: "ReverseSequence",
        since: 10,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(ReverseSequence {
                batch_axis: cx.attrs.int_or("batch_axis", 1)?,
                time_axis: cx.attrs.int_or("time_axis", 0)?,
            }))
        },
    },
    OpDef {
        name: "Det",
        since: 11,
        types: Types::Float,
        cuda: false,
        parse: |_| Ok(Arc::new(Det)),
    },
    OpDef {
        name: "TensorScatter",
        since: 24,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            let circular = match cx.attrs.string("mode")?.as_deref() {
                None | Some("linear") => false,
                Some("circular") => true,
                Some(m) => return Err(format!("mode `{m}`, expected linear or circular")),
            };
            Ok(Arc::new(TensorScatter {
                circular,
                axis: cx.attrs.int_or("axis", -2)?,
            }))
        },
    },
    OpDef {
        name: "Scatter",
        since: 9,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(super::index::Elements::Scatter {
                axis: cx.attrs.int_or("axis", 0)?,
                reduction: tp::ScatterReduction::None,
            }))
        },
    },
    OpDef {
        name: "SwiGLU",
        since: 28,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(SwiGlu {
                alpha: cx.attrs.float_or("alpha", 1.0)?,
            }))
        },
    },
    OpDef {
        name: "DFT",
        since: 17,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Dft {
                inverse: cx.attrs.flag("inverse")?,
                onesided: cx.attrs.flag("onesided")?,
                axis: if cx.opset < 20 {
                    Some(cx.attrs.int_or("axis", 1)?)
                } else {
                    None
                },
            }))
        },
    },
    OpDef {
        name: "STFT",
        since: 17,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Stft {
                onesided: cx.attrs.int_or("onesided", 1)? != 0,
            }))
        },
    },
    OpDef {
        name: "HannWindow",
        since: 17,
        types: Types::Int,
        cuda: false,
        parse: |cx| window_op(cx, tp::WindowKind::Hann),
    },
    OpDef {
        name: "HammingWindow",
        since: 17,
        types: Types::Int,
        cuda: false,
        parse: |cx| window_op(cx, tp::WindowKind::Hamming),
    },
    OpDef {
        name: "BlackmanWindow",
        since: 17,
        types: Types::Int,
        cuda: false,
        parse: |cx| window_op(cx, tp::WindowKind::Blackman),
    },
    OpDef {
        name: "MelWeightMatrix",
        since: 17,
        types: Types::Int,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(MelWeightMatrix {
                dtype: output_datatype(cx)?,
            }))
        },
    },
];

#[cfg(test)]
mod dims_tests {
    use super::*;
    use crate::ops::index::dims_tests::{In, dims, err, f32s, i64s, infer, int_const, one};

    fn einsum(eq: &str) -> Einsum {
        Einsum {
            equation: eq.into(),
        }
    }

    #[test]
    fn einsum_sizes_follow_labels_across_operands() {
        let out = one(infer(
            einsum("bij,bjk->bik"),
            vec![f32s("B,M,K"), f32s("B,K,N")],
            1,
        ));
        assert_eq!(out, dims("B,M,N"));
        // Implicit output: the ellipsis, then the letters seen once, sorted.
        let out = one(infer(
            einsum("...ij,jk"),
            vec![f32s("N,S,4,8"), f32s("8,H")],
            1,
        ));
        assert_eq!(out, dims("N,S,4,H"));
        // A size-1 dim broadcasts; a symbol against a known size takes the known one.
        let out = one(infer(
            einsum("ij,ij->ij"),
            vec![f32s("1,W"), f32s("N,3")],
            1,
        ));
        assert_eq!(out, dims("N,3"));
        let e = err(infer(
            einsum("ij,jk->ik"),
            vec![f32s("M,K"), f32s("L,N")],
            1,
        ));
        assert!(e.contains("a label has sizes K and L"), "{e}");
        let e = err(infer(einsum("ij->ij"), vec![f32s("N,3,4")], 1));
        assert!(e.contains("operand of shape [N, 3, 4]"), "{e}");
    }

    #[test]
    fn einsum_out_dims_match_the_kernel_parameters_on_fixed_shapes() {
        let op = einsum("bij,bjk->bik");
        let (a, b) = ([2usize, 3, 4], [2usize, 4, 5]);
        let out = op.out_dims(&[&dims_of(&a), &dims_of(&b)]).unwrap();
        let p = op.params(&[&a, &b]).unwrap();
        let from_params: Vec<usize> = p.sizes[..p.n_out].to_vec();
        assert_eq!(out, dims_of(&from_params));
    }

    #[test]
    fn reverse_sequence_det_tensor_scatter() {
        let rs = ReverseSequence {
            batch_axis: 1,
            time_axis: 0,
        };
        let out = one(infer(rs.clone(), vec![f32s("T,B,C"), i64s("B")], 1));
        assert_eq!(out, dims("T,B,C"));
        let e = err(infer(rs, vec![f32s("T,B,C"), i64s("T")], 1));
        assert!(
            e.contains("sequence_lens has shape [T], expected [B]"),
            "{e}"
        );

        assert_eq!(one(infer(Det, vec![f32s("N,K,K")], 1)), dims("N"));
        let e = err(infer(Det, vec![f32s("N,K,3")], 1));
        assert!(e.contains("[N, K, 3] must end with two equal"), "{e}");

        let ts = TensorScatter {
            circular: false,
            axis: -2,
        };
        let ins = vec![f32s("B,H,M,D"), f32s("B,H,S,D"), i64s("B")];
        assert_eq!(one(infer(ts.clone(), ins, 1)), dims("B,H,M,D"));
        // Along the axis the update may be shorter: checked once both are known.
        let ins = vec![f32s("B,H,4,D"), f32s("B,H,5,D"), In::Absent];
        assert!(err(infer(ts.clone(), ins, 1)).contains("does not fit cache"));
        let ins = vec![f32s("B,H,M,D"), f32s("B,G,S,D"), In::Absent];
        assert!(err(infer(ts, ins, 1)).contains("update [B, G, S, D] does not fit"));
    }

    #[test]
    fn dft_and_stft_over_symbolic_lengths() {
        let dft = |inverse, onesided| Dft {
            inverse,
            onesided,
            axis: Some(1),
        };
        let out = one(infer(dft(false, true), vec![f32s("N,L,1")], 1));
        assert_eq!(
            out,
            vec![Dim::sym("N"), Dim::sym("L").div_floor(2) + 1, 2usize.into()]
        );
        let out = one(infer(dft(true, true), vec![f32s("N,L,2")], 1));
        assert_eq!(
            out,
            vec![Dim::sym("N"), (Dim::sym("L") - 1usize) * 2, 1usize.into()]
        );
        let len = int_const(vec![], vec![16]);
        let out = one(infer(dft(false, false), vec![f32s("N,L,2"), len], 1));
        assert_eq!(out, dims("N,16,2"));
        let e = err(infer(dft(false, false), vec![f32s("N,L,C")], 1));
        assert!(e.contains("end in 1 (real) or 2 (complex)"), "{e}");
        // The fixed case agrees with the kernel's out_len.
        let s = [3usize, 10, 1];
        let op = dft(false, true);
        let g = infer(op, vec![f32s("3,10,1")], 1).unwrap();
        let p = tp::Dft {
            outer: 3,
            n: s[1],
            inner: 1,
            in_complex: false,
            length: 10,
            inverse: false,
            onesided: true,
        };
        assert_eq!(g[0].shape, dims_of(&[3, p.out_len(), 2]));

        let stft = Stft { onesided: true };
        let step = || int_const(vec![], vec![4]);
        let ins = vec![
            f32s("N,L,1"),
            step(),
            In::Absent,
            int_const(vec![], vec![8]),
        ];
        let out = one(infer(stft.clone(), ins, 1));
        let frames = (Dim::sym("L") - 8usize).div_floor(4) + 1;
        assert_eq!(
            out,
            vec![Dim::sym("N"), frames, 5usize.into(), 2usize.into()]
        );
        // The frame length from a window of symbolic length.
        let ins = vec![f32s("N,20,1"), step(), f32s("W")];
        let w = Dim::sym("W");
        let want = vec![
            Dim::sym("N"),
            (Dim::from(20usize) - w.clone()).div_floor(4) + 1,
            w.div_floor(2) + 1,
            2usize.into(),
        ];
        assert_eq!(one(infer(stft.clone(), ins, 1)), want);
        let ins = vec![
            f32s("N,20,1"),
            step(),
            f32s("W"),
            int_const(vec![], vec![8]),
        ];
        let e = err(infer(stft.clone(), ins, 1));
        assert!(e.contains("window has W samples, frame_length is 8"), "{e}");
        let ins = vec![
            f32s("N,6,1"),
            step(),
            In::Absent,
            int_const(vec![], vec![8]),
        ];
        assert!(err(infer(stft, ins, 1)).contains("must be in 1..=6"));
    }
}
