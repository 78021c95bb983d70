//! Indexing: Gather, GatherElements, GatherND, ScatterElements, ScatterND, OneHot,
//! ArgMax/ArgMin and CumSum/CumProd, on the typed kernels. Indices read at run time are
//! checked by the kernels (an out-of-range index is an error, not a panic).

use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::{
    Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, R, Types, checkable_shape, fixed,
    normalize_axis,
};
use crate::dim::{Dim, fmt_dims};
use crate::lower::TypedCall;
use crate::tensor::{DType, Scalar, Tensor};
use crate::{dispatch_data, impl_as_any};

fn index_type(cx: &InferCx, i: usize) -> R<DType> {
    match cx.dtype(i)? {
        d @ (DType::I32 | DType::I64) => Ok(d),
        d => Err(format!(
            "indices have element type {d}, expected int32 or int64"
        )),
    }
}

/// `Gather(data, indices)` along `axis`.
#[derive(Debug, Clone)]
pub struct Gather {
    pub axis: i64,
}

/// Gather's output dims: `data[..axis] ++ indices ++ data[axis + 1..]`.
fn gather_dims(data: &[Dim], indices: &[Dim], axis: i64) -> R<Vec<Dim>> {
    let a = normalize_axis(axis, data.len())?;
    let mut out = data[..a].to_vec();
    out.extend_from_slice(indices);
    out.extend_from_slice(&data[a + 1..]);
    Ok(out)
}

impl Gather {
    fn params(&self, cx: &InferCx) -> R<tp::Gather> {
        let ds = cx.shape(0)?;
        let axis = normalize_axis(self.axis, ds.len())?;
        Ok(tp::Gather {
            outer: ds[..axis].iter().product(),
            axis_len: ds[axis],
            inner: ds[axis + 1..].iter().product(),
        })
    }
}

impl Operator for Gather {
    fn name(&self) -> &'static str {
        "Gather"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        index_type(cx, 1)?;
        let out = gather_dims(cx.dims(0)?, cx.dims(1)?, self.axis)?;
        // Picking from a shape vector (`Shape(x)[1]`) keeps the picked dims.
        if cx.input(0)?.sym.is_some()
            && let (Some(data), Some(idx)) = (cx.dims_value(0), cx.opt_constant(1))
            && cx.dims(0)?.len() == 1
            && out.len() <= 1
        {
            let n = data.len() as i64;
            let picked: Option<Vec<Dim>> = idx
                .as_i64()
                .into_iter()
                .map(|i| {
                    data.get(usize::try_from(if i < 0 { i + n } else { i }).ok()?)
                        .cloned()
                })
                .collect();
            let picked =
                picked.ok_or_else(|| format!("an index is out of range for {n} values"))?;
            return Ok(vec![Fact::int_value(cx.dtype(0)?, picked, out.is_empty())]);
        }
        Ok(vec![Fact::new(cx.dtype(0)?, out)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let (x, i) = (cx.constant(0, "data")?, cx.constant(1, "indices")?);
        let p = self.params(cx)?;
        let idx = i.as_i64();
        let n = outs[0].shape.iter().product();
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); n];
            typed::gather(&p, v, &idx, &mut out).map_err(|e| e.to_string())?;
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        let (d, di) = (cx.dtype(0)?, cx.dtype(1)?);
        let inputs = cx.operands()?;
        let call = TypedCall::new("gather", vec![d, di], &p)
            .fallible()
            .inputs(vec![d, di]);
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// GatherElements, ScatterElements (with a reduction), GatherND, ScatterND.
#[derive(Debug, Clone)]
pub enum Elements {
    Gather {
        axis: i64,
    },
    Scatter {
        axis: i64,
        reduction: tp::ScatterReduction,
    },
    GatherNd {
        batch_dims: usize,
    },
    ScatterNd {
        reduction: tp::ScatterReduction,
    },
}

/// The length of GatherND's / ScatterND's index tuples (the last dim of the indices),
/// which sets the output's rank and so must be known at compile time.
fn tuple_len(is: &[Dim]) -> R<usize> {
    let last = is.last().ok_or("indices must have rank ≥ 1")?;
    last.to_usize().ok_or_else(|| {
        format!(
            "indices {} end in {last}: the index tuple length sets the output's rank and must be known at compile time",
            fmt_dims(is)
        )
    })
}

/// GatherND's output dims: `indices[..-1] ++ data[batch_dims + tuple length..]`.
fn gather_nd_dims(ds: &[Dim], is: &[Dim], b: usize) -> R<Vec<Dim>> {
    let last = tuple_len(is)?;
    if b + last > ds.len() || b >= is.len() {
        return Err(format!(
            "indices {} do not fit data {} with batch_dims {b}",
            fmt_dims(is),
            fmt_dims(ds)
        ));
    }
    if ds[..b] != is[..b] {
        return Err(format!(
            "indices {} and data {} differ in their first {b} (batch) dims",
            fmt_dims(is),
            fmt_dims(ds)
        ));
    }
    let mut s = is[..is.len() - 1].to_vec();
    s.extend_from_slice(&ds[b + last..]);
    Ok(s)
}

impl Elements {
    /// The output dims, after checking the indices (and updates `us`, for the
    /// scatters) against the data.
    fn out_dims(&self, ds: &[Dim], is: &[Dim], us: Option<&[Dim]>) -> R<Vec<Dim>> {
        if matches!(self, Elements::Gather { .. } | Elements::Scatter { .. })
            && is.len() != ds.len()
        {
            return Err(format!(
                "indices {} must have the rank of data {}",
                fmt_dims(is),
                fmt_dims(ds)
            ));
        }
        let want_updates = match self {
            Elements::Scatter { .. } => Some(is.to_vec()),
            Elements::ScatterNd { .. } => {
                let last = tuple_len(is)?;
                if last > ds.len() {
                    return Err(format!(
                        "indices {} select {last} dims of data {}",
                        fmt_dims(is),
                        fmt_dims(ds)
                    ));
                }
                let mut w = is[..is.len() - 1].to_vec();
                w.extend_from_slice(&ds[last..]);
                Some(w)
            }
            _ => None,
        };
        if let (Some(want), Some(us)) = (want_updates, us)
            && us != want.as_slice()
        {
            return Err(format!(
                "updates have shape {}, expected {}",
                fmt_dims(us),
                fmt_dims(&want)
            ));
        }
        Ok(match self {
            Elements::Gather { .. } => is.to_vec(),
            Elements::Scatter { .. } | Elements::ScatterNd { .. } => ds.to_vec(),
            Elements::GatherNd { batch_dims } => gather_nd_dims(ds, is, *batch_dims)?,
        })
    }

    fn call(&self, cx: &InferCx) -> R<TypedCall> {
        self.call_for(cx, cx.shape(0)?, cx.shape(1)?)
    }

    /// The kernel call for data `ds` and indices `is`.
    fn call_for(&self, cx: &InferCx, ds: &[usize], is: &[usize]) -> R<TypedCall> {
        let (d, di) = (cx.dtype(0)?, index_type(cx, 1)?);
        let rank = ds.len();
        Ok(match self {
            Elements::Gather { axis } => {
                let p = tp::GatherElements {
                    rank,
                    data_shape: fixed(ds, 1)?,
                    idx_shape: fixed(is, 1)?,
                    axis: normalize_axis(*axis, rank)?,
                };
                TypedCall::new("gather_elements", vec![d, di], &p).inputs(vec![d, di])
            }
            Elements::Scatter { axis, reduction } => {
                let p = tp::ScatterElements {
                    rank,
                    data_shape: fixed(ds, 1)?,
                    idx_shape: fixed(is, 1)?,
                    axis: normalize_axis(*axis, rank)?,
                    reduction: *reduction,
                };
                TypedCall::new("scatter_elements", vec![d, di], &p).inputs(vec![d, di, d])
            }
            Elements::GatherNd { batch_dims } => {
                let p = tp::GatherNd {
                    batch_dims: *batch_dims,
                    data_rank: rank,
                    data_shape: fixed(ds, 1)?,
                    idx_rank: is.len(),
                    idx_shape: fixed(is, 1)?,
                };
                TypedCall::new("gather_nd", vec![d], &p).inputs(vec![d, DType::I64])
            }
            Elements::ScatterNd { reduction } => {
                let p = tp::ScatterNd {
                    data_rank: rank,
                    data_shape: fixed(ds, 1)?,
                    idx_rank: is.len(),
                    idx_shape: fixed(is, 1)?,
                    reduction: *reduction,
                };
                TypedCall::new("scatter_nd", vec![d], &p).inputs(vec![d, DType::I64, d])
            }
        }
        .fallible())
    }
}

impl Operator for Elements {
    fn name(&self) -> &'static str {
        match self {
            Elements::Gather { .. } => "GatherElements",
            Elements::Scatter { .. } => "ScatterElements",
            Elements::GatherNd { .. } => "GatherND",
            Elements::ScatterNd { .. } => "ScatterND",
        }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        index_type(cx, 1)?;
        if matches!(self, Elements::GatherNd { .. } | Elements::ScatterNd { .. })
            && cx.dtype(1)? != DType::I64
        {
            return Err("indices must be int64".into());
        }
        let (ds, is) = (cx.dims(0)?, cx.dims(1)?);
        // Validates the attributes against the ranks (no dim is read).
        self.call_for(cx, &checkable_shape(ds, &[])?, &checkable_shape(is, &[])?)?;
        let us = match self {
            Elements::Scatter { .. } | Elements::ScatterNd { .. } => Some(cx.dims(2)?),
            _ => None,
        };
        Ok(vec![Fact::new(cx.dtype(0)?, self.out_dims(ds, is, us)?)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let call = self.call(&infer)?;
        let inputs = cx.operands()?;
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// `OneHot(indices, depth, values)`, depth constant.
#[derive(Debug, Clone)]
pub struct OneHot {
    pub axis: i64,
}

/// OneHot's output dims: the indices' with `depth` inserted at `axis`.
fn one_hot_dims(is: &[Dim], depth: usize, axis: i64) -> R<Vec<Dim>> {
    let a = normalize_axis(axis, is.len() + 1)?;
    let mut s = is.to_vec();
    s.insert(a, Dim::from(depth));
    Ok(s)
}

impl OneHot {
    /// The constant `depth` (its value sets an output dim, so it is needed here).
    fn depth(cx: &InferCx) -> R<usize> {
        let depth = cx
            .constant(1, "depth")?
            .as_f64()
            .first()
            .copied()
            .ok_or("depth is empty")?;
        if depth < 1.0 {
            return Err(format!("depth {depth} must be positive"));
        }
        Ok(depth as usize)
    }

    fn params(&self, cx: &InferCx) -> R<tp::OneHot> {
        let is = cx.shape(0)?;
        let depth = Self::depth(cx)?;
        let axis = normalize_axis(self.axis, is.len() + 1)?;
        Ok(tp::OneHot {
            outer: is[..axis].iter().product(),
            depth,
            inner: is[axis..].iter().product(),
        })
    }
}

impl Operator for OneHot {
    fn name(&self) -> &'static str {
        "OneHot"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        cx.check_type(0, Types::Numeric)?;
        let out = one_hot_dims(cx.dims(0)?, Self::depth(cx)?, self.axis)?;
        Ok(vec![Fact::new(cx.dtype(2)?, out)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        let (di, d) = (cx.dtype(0)?, cx.dtype(2)?);
        let inputs = vec![cx.operand(0)?, cx.operand(2)?];
        let call = TypedCall::new("one_hot", vec![di, d], &p)
            .fallible()
            .inputs(vec![di, d]);
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// ArgMax / ArgMin along `axis`.
#[derive(Debug, Clone)]
pub struct ArgReduce {
    pub max: bool,
    pub axis: i64,
    pub keepdims: bool,
    pub select_last_index: bool,
}

/// The dims of a reduction of `s` along `axis`: that dim becomes 1 or goes.
fn reduce_axis_dims(s: &[Dim], axis: i64, keepdims: bool) -> R<Vec<Dim>> {
    let a = normalize_axis(axis, s.len())?;
    let mut out = s.to_vec();
    if keepdims {
        out[a] = Dim::from(1usize);
    } else {
        out.remove(a);
    }
    Ok(out)
}

impl ArgReduce {
    fn params(&self, cx: &InferCx) -> R<tp::ArgReduce> {
        let s = cx.shape(0)?;
        let a = normalize_axis(self.axis, s.len())?;
        Ok(tp::ArgReduce {
            max: self.max,
            outer: s[..a].iter().product(),
            len: s[a],
            inner: s[a + 1..].iter().product(),
            select_last_index: self.select_last_index,
        })
    }
}

impl Operator for ArgReduce {
    fn name(&self) -> &'static str {
        if self.max { "ArgMax" } else { "ArgMin" }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        cx.check_type(0, Types::Numeric)?;
        let out = reduce_axis_dims(cx.dims(0)?, self.axis, self.keepdims)?;
        Ok(vec![Fact::new(DType::I64, out)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        let call = TypedCall::new("arg_reduce", vec![d], &p).inputs(vec![d]);
        cx.typed(call, vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// CumSum and CumProd along a constant axis.
#[derive(Debug, Clone)]
pub struct Cumulative {
    pub product: bool,
    pub exclusive: bool,
    pub reverse: bool,
}

impl Cumulative {
    /// The constant axis, normalised against `rank`.
    fn axis(cx: &InferCx, rank: usize) -> R<usize> {
        let axis = cx
            .constant(1, "axis")?
            .as_i64()
            .first()
            .copied()
            .ok_or("axis is empty")?;
        normalize_axis(axis, rank)
    }

    fn params(&self, cx: &InferCx) -> R<tp::CumSum> {
        let s = cx.shape(0)?;
        let a = Self::axis(cx, s.len())?;
        Ok(tp::CumSum {
            outer: s[..a].iter().product(),
            len: s[a],
            inner: s[a + 1..].iter().product(),
            exclusive: self.exclusive,
            reverse: self.reverse,
        })
    }

    /// Parses either operator's attributes.
    pub fn parse(cx: &super::ParseCx, product: bool) -> R<super::Op> {
        Ok(Arc::new(Cumulative {
            product,
            exclusive: cx.attrs.flag("exclusive")?,
            reverse: cx.attrs.flag("reverse")?,
        }))
    }
}

impl Operator for Cumulative {
    fn name(&self) -> &'static str {
        if self.product { "CumProd" } else { "CumSum" }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        cx.check_type(0, Types::Numeric)?;
        let xs = cx.dims(0)?;
        Self::axis(cx, xs.len())?;
        Ok(vec![Fact::new(cx.dtype(0)?, xs.to_vec())])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let p = self.params(cx)?;
        let x = cx.constant(0, "input")?;
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); v.len()];
            if self.product {
                typed::cumprod(&p, v, &mut out);
            } else {
                typed::cumsum(&p, v, &mut out);
            }
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        let func = if self.product { "cumprod" } else { "cumsum" };
        cx.typed(TypedCall::new(func, vec![d], &p), vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// TopK with a constant `k`: values and int64 indices.
#[derive(Debug, Clone)]
pub struct TopK {
    pub axis: i64,
    pub largest: bool,
    pub sorted: bool,
    /// The attribute (opset < 10); input 1 after.
    pub k: Option<i64>,
}

/// TopK's output dims: `s` with `k` along `axis` (`k` at most that dim, checked when
/// the dim is known).
fn top_k_dims(s: &[Dim], axis: i64, k: i64) -> R<Vec<Dim>> {
    let a = normalize_axis(axis, s.len())?;
    let fits = match s[a].known() {
        Some(n) => (0..=n).contains(&k),
        None => k >= 0,
    };
    if !fits {
        return Err(format!("k {k} is outside 0..={}", s[a]));
    }
    let mut out = s.to_vec();
    out[a] = Dim::from(k);
    Ok(out)
}

impl TopK {
    /// `k` is an input neither constant nor computed from the dims: the kernel reads it.
    fn k_at_run_time(&self, cx: &InferCx) -> bool {
        self.k.is_none() && cx.opt(1).is_some() && cx.dims_value(1).is_none()
    }

    /// TopK reading k at run time (`top_k_dynamic`): values and indices are planned for
    /// the whole axis and the run binds the extent k.
    fn lower_run_time_k(&self, cx: &mut LowerCx) -> R<()> {
        let s = cx.shape(0)?;
        let a = normalize_axis(self.axis, s.len())?;
        let p = self.kernel_params(s, a, s[a]);
        let d = cx.dtype(0)?;
        let n = cx.out(0)?.len();
        let inputs = vec![cx.operand(0)?, cx.operand(1)?];
        let call = TypedCall::new("top_k_dynamic", vec![d], &p)
            .inputs(vec![d, DType::I64])
            .binds(cx.infer_cx().extent(a));
        cx.typed_multi(call, inputs, &[(0, d, n), (1, DType::I64, n)])
    }

    /// `k`: the attribute, or the constant input (its value is an output dim).
    fn k(&self, cx: &InferCx) -> R<i64> {
        match self.k {
            Some(k) => Ok(k),
            None => cx
                .constant(1, "k")?
                .as_i64()
                .first()
                .copied()
                .ok_or_else(|| "k is empty".into()),
        }
    }

    fn params(&self, cx: &InferCx) -> R<(tp::TopK, Vec<usize>)> {
        let s = cx.shape(0)?;
        let a = normalize_axis(self.axis, s.len())?;
        let k = self.k(cx)?;
        if k < 0 || k as usize > s[a] {
            return Err(format!("k {k} is outside 0..={}", s[a]));
        }
        let k = k as usize;
        let mut shape = s.to_vec();
        shape[a] = k;
        Ok((self.kernel_params(s, a, k), shape))
    }

    /// The kernel's parameters for input shape `s`, `axis` normalised to `a`, and `k`.
    fn kernel_params(&self, s: &[usize], a: usize, k: usize) -> tp::TopK {
        tp::TopK {
            outer: s[..a].iter().product(),
            len: s[a],
            inner: s[a + 1..].iter().product(),
            k,
            largest: self.largest,
            sorted: self.sorted,
        }
    }
}

impl Operator for TopK {
    fn name(&self) -> &'static str {
        "TopK"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Numeric)?;
        if self.k_at_run_time(cx) {
            // The data decides k: an extent of at most the axis' length.
            let xs = cx.dims(0)?;
            let a = normalize_axis(self.axis, xs.len())?;
            if cx.dtype(1)? != DType::I64 || cx.dims(1)?.iter().any(|d| !d.is(1)) {
                return Err(format!(
                    "k must be one int64, got {} {}",
                    cx.dtype(1)?,
                    fmt_dims(cx.dims(1)?)
                ));
            }
            let k = cx.extent(a);
            let mut shape = xs.to_vec();
            shape[a] = k.clone();
            return Ok(vec![
                Fact::new(d, shape.clone()).with_extent(k, xs[a].clone()),
                Fact::new(DType::I64, shape),
            ]);
        }
        let shape = match (self.k, cx.dims_value(1)) {
            // k computed from the dims (`Shape` → `Gather`): an expression in them.
            (None, Some(k)) if k.len() == 1 && !k[0].is_known() => {
                let xs = cx.dims(0)?;
                let mut shape = xs.to_vec();
                shape[normalize_axis(self.axis, xs.len())?] = k[0].clone();
                shape
            }
            _ => top_k_dims(cx.dims(0)?, self.axis, self.k(cx)?)?,
        };
        Ok(vec![
            Fact::new(d, shape.clone()),
            Fact::new(DType::I64, shape),
        ])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        if self.k_at_run_time(&cx.infer_cx()) {
            return self.lower_run_time_k(cx);
        }
        let infer = cx.infer_cx();
        let (p, shape) = self.params(&infer)?;
        let d = cx.dtype(0)?;
        let n = shape.iter().product();
        let x = cx.operand(0)?;
        let call = TypedCall::new("top_k", vec![d], &p).inputs(vec![d]);
        cx.typed_multi(call, vec![x], &[(0, d, n), (1, DType::I64, n)])
    }
    impl_as_any!();
}

fn reduction(cx: &super::ParseCx) -> R<tp::ScatterReduction> {
    Ok(match cx.attrs.string("reduction")?.as_deref() {
        None | Some("none") => tp::ScatterReduction::None,
        Some("add") => tp::ScatterReduction::Add,
        Some("mul") => tp::ScatterReduction::Mul,
        Some("max") => tp::ScatterReduction::Max,
        Some("min") => tp::ScatterReduction::Min,
        Some(r) => return Err(format!("unknown reduction `{r}`")),
    })
}

fn arg(cx: &super::ParseCx, max: bool) -> R<super::Op> {
    Ok(Arc::new(ArgReduce {
        max,
        axis: cx.attrs.int_or("axis", 0)?,
        keepdims: cx.attrs.int_or("keepdims", 1)? != 0,
        select_last_index: cx.attrs.flag("select_last_index")?,
    }))
}

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "Gather",
        since: 1,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Gather {
                axis: cx.attrs.int_or("axis", 0)?,
            }))
        },
    },
    OpDef {
        name: "GatherElements",
        since: 11,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Elements::Gather {
                axis: cx.attrs.int_or("axis", 0)?,
            }))
        },
    },
    OpDef {
        name: "ScatterElements",
        since: 11,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Elements::Scatter {
                axis: cx.attrs.int_or("axis", 0)?,
                reduction: reduction(cx)?,
            }))
        },
    },
    OpDef {
        name: "GatherND",
        since: 11,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Elements::GatherNd {
                batch_dims: cx.attrs.int_or("batch_dims", 0)?.max(0) as usize,
            }))
        },
    },
    OpDef {
        name: "ScatterND",
        since: 11,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Elements::ScatterNd {
                reduction: reduction(cx)?,
            }))
        },
    },
    OpDef {
        name: "OneHot",
        since: 9,
        types: Types::Numeric,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(OneHot {
                axis: cx.attrs.int_or("axis", -1)?,
            }))
        },
    },
    OpDef {
        name: "ArgMax",
        since: 1,
        types: Types::Numeric,
        cuda: false,
        parse: |cx| arg(cx, true),
    },
    OpDef {
        name: "ArgMin",
        since: 1,
        types: Types::Numeric,
        cuda: false,
        parse: |cx| arg(cx, false),
    },
    OpDef {
        name: "TopK",
        since: 1,
        types: Types::Numeric,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(TopK {
                axis: cx.attrs.int_or("axis", -1)?,
                largest: cx.attrs.int_or("largest", 1)? != 0,
                sorted: cx.attrs.int_or("sorted", 1)? != 0,
                k: if cx.opset < 10 {
                    Some(cx.attrs.int("k")?.ok_or("attribute `k` is required")?)
                } else {
                    None
                },
            }))
        },
    },
    OpDef {
        name: "CumSum",
        since: 11,
        types: Types::Numeric,
        cuda: false,
        parse: |cx| Cumulative::parse(cx, false),
    },
];

/// Inference over symbolic dims, on one-node graphs (the test helper [`infer`] is
/// shared by the other families' `dims_tests`).
#[cfg(test)]
pub(crate) mod dims_tests {
    use super::*;
    use crate::ir::{Graph, Node, Value};

    /// One input of a one-node test graph.
    pub(crate) enum In {
        /// A value of this type and these dims.
        Dims(DType, Vec<Dim>),
        /// A constant.
        Const(Tensor),
        /// An optional input left out.
        Absent,
    }

    /// Dims from `"N,3,W"`: numbers are known sizes, names are symbols.
    pub(crate) fn dims(spec: &str) -> Vec<Dim> {
        spec.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| match p.parse::<usize>() {
                Ok(v) => Dim::from(v),
                Err(_) => Dim::sym(p),
            })
            .collect()
    }

    pub(crate) fn x(dtype: DType, spec: &str) -> In {
        In::Dims(dtype, dims(spec))
    }

    pub(crate) fn f32s(spec: &str) -> In {
        x(DType::F32, spec)
    }

    pub(crate) fn i64s(spec: &str) -> In {
        x(DType::I64, spec)
    }

    pub(crate) fn int_const(shape: Vec<usize>, v: Vec<i64>) -> In {
        In::Const(Tensor::i64(shape, v))
    }

    /// Runs `op`'s inference on a graph holding one node over `inputs` with `n_out`
    /// outputs.
    pub(crate) fn infer(op: impl Operator, inputs: Vec<In>, n_out: usize) -> R<Vec<Fact>> {
        infer_op(Arc::new(op), inputs, n_out)
    }

    /// [`infer`] for an operator as the registry's parser returns it.
    pub(crate) fn infer_op(op: super::super::Op, inputs: Vec<In>, n_out: usize) -> R<Vec<Fact>> {
        let mut g = Graph {
            opset: 23,
            ..Default::default()
        };
        let mut ids = Vec::new();
        for (i, input) in inputs.into_iter().enumerate() {
            let name = format!("in{i}");
            ids.push(match input {
                In::Absent => None,
                In::Const(t) => Some(g.add_value(Value::constant(name, t))),
                In::Dims(dtype, dims) => {
                    let mut v = Value::unknown(name, dtype);
                    v.set_dims(dims);
                    Some(g.add_value(v))
                }
            });
        }
        let outputs = (0..n_out)
            .map(|j| g.add_value(Value::unknown(format!("out{j}"), DType::F32)))
            .collect();
        let node = Node {
            name: "node".into(),
            op,
            inputs: ids,
            outputs,
        };
        node.op.infer(&InferCx {
            graph: &g,
            node: &node,
        })
    }

    /// The output dims of each fact.
    pub(crate) fn shapes(facts: &[Fact]) -> Vec<Vec<Dim>> {
        facts.iter().map(|f| f.shape.clone()).collect()
    }

    /// The single output's dims.
    pub(crate) fn one(r: R<Vec<Fact>>) -> Vec<Dim> {
        let facts = r.expect("inference succeeds");
        assert_eq!(facts.len(), 1, "one output");
        facts[0].shape.clone()
    }

    /// Inference's error message.
    pub(crate) fn err(r: R<Vec<Fact>>) -> String {
        match r {
            Ok(f) => panic!("expected an error, got {:?}", shapes(&f)),
            Err(e) => e,
        }
    }

    #[test]
    fn gather_keeps_symbols_of_data_and_indices() {
        let n = Dim::sym("N");
        assert_eq!(
            gather_dims(&[n.clone(), 5usize.into()], &dims("S,2"), 1).unwrap(),
            dims("N,S,2")
        );
        let out = one(infer(Gather { axis: 0 }, vec![f32s("V,D"), i64s("B,S")], 1));
        assert_eq!(out, dims("B,S,D"));
        let out = one(infer(Gather { axis: -1 }, vec![f32s("N,3,W"), i64s("")], 1));
        assert_eq!(out, dims("N,3"));
        assert!(
            err(infer(Gather { axis: 3 }, vec![f32s("N,3,W"), i64s("2")], 1)).contains("axis 3")
        );
    }

    #[test]
    fn gather_dims_agree_with_the_kernel_parameters_on_fixed_shapes() {
        // The lowering's parameters read the same split of the data dims.
        let data = dims("2,3,4");
        for axis in -3..3i64 {
            let out = gather_dims(&data, &dims("5,6"), axis).unwrap();
            let a = normalize_axis(axis, 3).unwrap();
            let n: usize = [2usize, 3, 4][..a].iter().product::<usize>()
                * 30
                * [2usize, 3, 4][a + 1..].iter().product::<usize>();
            assert_eq!(out.iter().product::<Dim>(), n, "axis {axis}");
        }
    }

    #[test]
    fn elements_and_nd_over_symbols() {
        let ge = Elements::Gather { axis: 1 };
        assert_eq!(
            one(infer(ge.clone(), vec![f32s("N,C"), i64s("N,K")], 1)),
            dims("N,K")
        );
        assert!(err(infer(ge, vec![f32s("N,C"), i64s("K")], 1)).contains("rank"));
        let se = Elements::Scatter {
            axis: 0,
            reduction: tp::ScatterReduction::None,
        };
        let ok = vec![f32s("N,C"), i64s("K,C"), f32s("K,C")];
        assert_eq!(one(infer(se.clone(), ok, 1)), dims("N,C"));
        let bad = vec![f32s("N,C"), i64s("K,C"), f32s("K,3")];
        assert!(err(infer(se, bad, 1)).contains("updates have shape [K, 3], expected [K, C]"));
        let gnd = Elements::GatherNd { batch_dims: 1 };
        assert_eq!(
            one(infer(gnd.clone(), vec![f32s("B,H,W,C"), i64s("B,S,2")], 1)),
            dims("B,S,C")
        );
        let e = err(infer(gnd.clone(), vec![f32s("B,H,W"), i64s("B,S,T")], 1));
        assert!(e.contains("must be known at compile time"), "{e}");
        let e = err(infer(gnd, vec![f32s("B,H,W"), i64s("A,S,1")], 1));
        assert!(e.contains("batch"), "{e}");
        let snd = Elements::ScatterNd {
            reduction: tp::ScatterReduction::Add,
        };
        let ins = vec![f32s("N,H,W"), i64s("K,1"), f32s("K,H,W")];
        assert_eq!(one(infer(snd.clone(), ins, 1)), dims("N,H,W"));
        let ins = vec![f32s("N,H,W"), i64s("K,2"), f32s("K,H")];
        assert!(err(infer(snd, ins, 1)).contains("expected [K, W]"));
    }

    #[test]
    fn one_hot_arg_reduce_cumsum_top_k() {
        let depth = int_const(vec![1], vec![10]);
        let values = In::Const(Tensor::from_vec(vec![2], vec![0f32, 1.0]));
        let out = one(infer(
            OneHot { axis: 1 },
            vec![i64s("N,S"), depth, values],
            1,
        ));
        assert_eq!(out, dims("N,10,S"));
        assert_eq!(one_hot_dims(&dims("N"), 4, -1).unwrap(), dims("N,4"));

        let arg = |axis, keepdims| ArgReduce {
            max: true,
            axis,
            keepdims,
            select_last_index: false,
        };
        assert_eq!(
            one(infer(arg(1, true), vec![f32s("N,C,W")], 1)),
            dims("N,1,W")
        );
        assert_eq!(
            one(infer(arg(-1, false), vec![f32s("N,C,W")], 1)),
            dims("N,C")
        );

        let cum = Cumulative {
            product: false,
            exclusive: false,
            reverse: false,
        };
        let ins = vec![f32s("N,T"), int_const(vec![], vec![1])];
        assert_eq!(one(infer(cum.clone(), ins, 1)), dims("N,T"));
        let ins = vec![f32s("N,T"), int_const(vec![], vec![2])];
        assert!(err(infer(cum, ins, 1)).contains("axis 2"));

        let topk = TopK {
            axis: -1,
            largest: true,
            sorted: true,
            k: None,
        };
        let facts = infer(
            topk.clone(),
            vec![f32s("N,L"), int_const(vec![1], vec![3])],
            2,
        )
        .unwrap();
        assert_eq!(shapes(&facts), vec![dims("N,3"), dims("N,3")]);
        assert_eq!(facts[1].dtype, DType::I64);
        // k beyond a known dim is an error; beyond a symbol it is the kernel's to check.
        let e = err(infer(
            topk.clone(),
            vec![f32s("N,2"), int_const(vec![1], vec![3])],
            2,
        ));
        assert!(e.contains("k 3 is outside 0..=2"), "{e}");
        // A k read at run time is an extent of at most the axis, in both outputs.
        let facts = infer(topk.clone(), vec![f32s("N,L"), i64s("1")], 2).unwrap();
        let (k, bound) = facts[0].extent.clone().expect("an extent");
        assert_eq!(bound, Dim::sym("L"));
        assert_eq!(
            shapes(&facts),
            vec![vec![Dim::sym("N"), k.clone()], vec![Dim::sym("N"), k]]
        );
        // ... which must be one int64.
        let e = err(infer(topk, vec![f32s("N,L"), i64s("2")], 2));
        assert!(e.contains("k must be one int64"), "{e}");
    }
}
