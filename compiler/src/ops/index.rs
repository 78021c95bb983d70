//! Indexing: Gather, GatherElements, GatherND, ScatterElements, ScatterND, OneHot,
//! ArgMax/ArgMin and CumSum/CumProd, on the typed kernels. Indices read at run time are
//! checked by the kernels (an out-of-range index is an error, not a panic).

use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::{Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, R, Types, fixed, normalize_axis};
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

impl Gather {
    fn params(&self, cx: &InferCx) -> R<(tp::Gather, Vec<usize>)> {
        let ds = cx.shape(0)?;
        let axis = normalize_axis(self.axis, ds.len())?;
        let mut shape = ds[..axis].to_vec();
        shape.extend_from_slice(cx.shape(1)?);
        shape.extend_from_slice(&ds[axis + 1..]);
        let p = tp::Gather {
            outer: ds[..axis].iter().product(),
            axis_len: ds[axis],
            inner: ds[axis + 1..].iter().product(),
        };
        Ok((p, shape))
    }
}

impl Operator for Gather {
    fn name(&self) -> &'static str {
        "Gather"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        index_type(cx, 1)?;
        Ok(vec![Fact::new(cx.dtype(0)?, self.params(cx)?.1)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let (x, i) = (cx.constant(0, "data")?, cx.constant(1, "indices")?);
        let (p, _) = self.params(cx)?;
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
        let infer = cx.infer_cx();
        let (p, _) = self.params(&infer)?;
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

impl Elements {
    fn out_shape(&self, cx: &InferCx) -> R<Vec<usize>> {
        let ds = cx.shape(0)?;
        Ok(match self {
            Elements::Gather { .. } => cx.shape(1)?.to_vec(),
            Elements::Scatter { .. } | Elements::ScatterNd { .. } => ds.to_vec(),
            Elements::GatherNd { batch_dims } => {
                let is = cx.shape(1)?;
                let last = *is.last().ok_or("indices must have rank ≥ 1")?;
                let b = *batch_dims;
                if b + last > ds.len() || b >= is.len() {
                    return Err(format!(
                        "indices {is:?} do not fit data {ds:?} with batch_dims {b}"
                    ));
                }
                let mut s = is[..is.len() - 1].to_vec();
                s.extend_from_slice(&ds[b + last..]);
                s
            }
        })
    }

    fn call(&self, cx: &InferCx) -> R<TypedCall> {
        let ds = cx.shape(0)?;
        let is = cx.shape(1)?;
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
        self.call(cx)?;
        Ok(vec![Fact::new(cx.dtype(0)?, self.out_shape(cx)?)])
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

impl OneHot {
    fn params(&self, cx: &InferCx) -> R<(tp::OneHot, Vec<usize>)> {
        let is = cx.shape(0)?;
        let depth = cx
            .constant(1, "depth")?
            .as_f64()
            .first()
            .copied()
            .ok_or("depth is empty")?;
        if depth < 1.0 {
            return Err(format!("depth {depth} must be positive"));
        }
        let depth = depth as usize;
        let axis = normalize_axis(self.axis, is.len() + 1)?;
        let mut shape = is.to_vec();
        shape.insert(axis, depth);
        let p = tp::OneHot {
            outer: is[..axis].iter().product(),
            depth,
            inner: is[axis..].iter().product(),
        };
        Ok((p, shape))
    }
}

impl Operator for OneHot {
    fn name(&self) -> &'static str {
        "OneHot"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        cx.check_type(0, Types::Numeric)?;
        Ok(vec![Fact::new(cx.dtype(2)?, self.params(cx)?.1)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let (p, _) = self.params(&infer)?;
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

impl ArgReduce {
    fn params(&self, cx: &InferCx) -> R<(tp::ArgReduce, Vec<usize>)> {
        let s = cx.shape(0)?;
        let a = normalize_axis(self.axis, s.len())?;
        let mut shape = s.to_vec();
        if self.keepdims {
            shape[a] = 1;
        } else {
            shape.remove(a);
        }
        let p = tp::ArgReduce {
            max: self.max,
            outer: s[..a].iter().product(),
            len: s[a],
            inner: s[a + 1..].iter().product(),
            select_last_index: self.select_last_index,
        };
        Ok((p, shape))
    }
}

impl Operator for ArgReduce {
    fn name(&self) -> &'static str {
        if self.max { "ArgMax" } else { "ArgMin" }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        cx.check_type(0, Types::Numeric)?;
        Ok(vec![Fact::new(DType::I64, self.params(cx)?.1)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let (p, _) = self.params(&infer)?;
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
    fn params(&self, cx: &InferCx) -> R<tp::CumSum> {
        let s = cx.shape(0)?;
        let axis = cx
            .constant(1, "axis")?
            .as_i64()
            .first()
            .copied()
            .ok_or("axis is empty")?;
        let a = normalize_axis(axis, s.len())?;
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
        self.params(cx)?;
        Ok(vec![Fact::new(cx.dtype(0)?, cx.dims(0)?.to_vec())])
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

impl TopK {
    fn params(&self, cx: &InferCx) -> R<(tp::TopK, Vec<usize>)> {
        let s = cx.shape(0)?;
        let a = normalize_axis(self.axis, s.len())?;
        let k = match self.k {
            Some(k) => k,
            None => cx
                .constant(1, "k")?
                .as_i64()
                .first()
                .copied()
                .ok_or("k is empty")?,
        };
        if k < 0 || k as usize > s[a] {
            return Err(format!("k {k} is outside 0..={}", s[a]));
        }
        let k = k as usize;
        let mut shape = s.to_vec();
        shape[a] = k;
        let p = tp::TopK {
            outer: s[..a].iter().product(),
            len: s[a],
            inner: s[a + 1..].iter().product(),
            k,
            largest: self.largest,
            sorted: self.sorted,
        };
        Ok((p, shape))
    }
}

impl Operator for TopK {
    fn name(&self) -> &'static str {
        "TopK"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Numeric)?;
        let (_, shape) = self.params(cx)?;
        Ok(vec![
            Fact::new(d, shape.clone()),
            Fact::new(DType::I64, shape),
        ])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
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
