//! Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
//! ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare, and GlobalMaxPool (a
//! ReduceMax over the spatial axes). Axes come from the attribute (before the opset
//! where each moved them to input 1) or that input.

#[allow(unused_imports)]
use kiln_runtime::typed::Elem as _;
use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::{
    Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, ParseCx, R, Types, normalize_axis,
};
use crate::dim::Dim;
use crate::lower::TypedCall;
use crate::tensor::{Scalar, Tensor};
use crate::{dispatch_data, impl_as_any};

#[derive(Debug, Clone)]
pub struct Reduce {
    pub name: &'static str,
    pub op: tp::ReduceOp,
    /// `None`: axes from input 1 (or all axes when it is absent).
    pub axes: Option<Vec<i64>>,
    pub keepdims: bool,
    pub noop_with_empty_axes: bool,
}

impl Reduce {
    /// Which of the input's `rank` axes are reduced.
    fn reduced(&self, cx: &InferCx, rank: usize) -> R<[bool; tp::RANK]> {
        if rank > tp::RANK {
            return Err(format!("rank {rank} exceeds {}", tp::RANK));
        }
        let axes = match &self.axes {
            Some(a) => a.clone(),
            None => match cx.opt(1) {
                Some(_) => cx.constant(1, "axes")?.as_i64(),
                None => Vec::new(),
            },
        };
        let mut reduced = [false; tp::RANK];
        if axes.is_empty() {
            if !self.noop_with_empty_axes {
                reduced[..rank].iter_mut().for_each(|r| *r = true);
            }
        } else {
            for a in axes {
                reduced[normalize_axis(a, rank)?] = true;
            }
        }
        Ok(reduced)
    }

    /// The output dims: reduced axes dropped, or kept as 1 with `keepdims`.
    fn out_dims(&self, cx: &InferCx) -> R<Vec<Dim>> {
        let s = cx.dims(0)?;
        let reduced = self.reduced(cx, s.len())?;
        Ok(s.iter()
            .enumerate()
            .filter_map(|(d, n)| match (reduced[d], self.keepdims) {
                (false, _) => Some(n.clone()),
                (true, true) => Some(Dim::from(1usize)),
                (true, false) => None,
            })
            .collect())
    }

    /// The kernel's parameters.
    fn params(&self, cx: &InferCx) -> R<tp::Reduce> {
        let s = cx.shape(0)?;
        let rank = s.len();
        let mut p = tp::Reduce {
            op: self.op,
            rank,
            in_shape: [1; tp::RANK],
            reduced: self.reduced(cx, rank)?,
        };
        p.in_shape[..rank].copy_from_slice(s);
        Ok(p)
    }
}

impl Operator for Reduce {
    fn name(&self) -> &'static str {
        self.name
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        // Max and Min also take bool (opset 20: any and all).
        let types = match self.op {
            tp::ReduceOp::Max | tp::ReduceOp::Min => Types::All,
            _ => Types::Numeric,
        };
        cx.check_type(0, types)?;
        Ok(vec![Fact::new(cx.dtype(0)?, self.out_dims(cx)?)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "data")?;
        let p = self.params(cx)?;
        let n = outs[0].shape.iter().product();
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); n];
            typed::reduce(&p, v, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let p = self.params(&infer)?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        cx.typed(TypedCall::new("reduce", vec![d], &p), vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// Declares reductions: `"Name" ReduceOp since_axes_input Types;` — the opset from
/// which the axes are input 1 instead of an attribute, and the element types.
macro_rules! reduce_ops {
    ($($name:literal $op:ident $axes_input:literal $types:ident;)*) => {
        pub const OPS: &[OpDef] = &[
            $(OpDef {
                name: $name,
                since: 1,
                types: Types::$types,
                cuda: false,
                parse: |cx| reduce(cx, $name, tp::ReduceOp::$op, $axes_input),
            },)*
            OpDef {
                name: "GlobalMaxPool",
                since: 1,
                types: Types::Float,
                cuda: false,
                parse: |_| Ok(Arc::new(GlobalMaxPool)),
            },
        ];
    };
}

reduce_ops! {
    "ReduceSum" Sum 13 Numeric;
    "ReduceMean" Mean 18 Numeric;
    "ReduceMax" Max 18 All;
    "ReduceMin" Min 18 All;
    "ReduceProd" Prod 18 Numeric;
    "ReduceL1" L1 18 Numeric;
    "ReduceL2" L2 18 Numeric;
    "ReduceLogSum" LogSum 18 Numeric;
    "ReduceLogSumExp" LogSumExp 18 Numeric;
    "ReduceSumSquare" SumSquare 18 Numeric;
}

fn reduce(cx: &ParseCx, name: &'static str, op: tp::ReduceOp, axes_input: i64) -> R<super::Op> {
    let axes = if cx.opset < axes_input {
        Some(cx.attrs.ints("axes")?.unwrap_or_default())
    } else {
        None
    };
    Ok(Arc::new(Reduce {
        name,
        op,
        axes,
        keepdims: cx.attrs.int_or("keepdims", 1)? != 0,
        noop_with_empty_axes: cx.attrs.flag("noop_with_empty_axes")?,
    }))
}

/// GlobalMaxPool: ReduceMax over every axis after the first two, keeping them.
#[derive(Debug, Clone)]
pub struct GlobalMaxPool;

impl GlobalMaxPool {
    fn reduce(&self, rank: usize) -> Reduce {
        Reduce {
            name: "GlobalMaxPool",
            op: tp::ReduceOp::Max,
            axes: Some((2..rank as i64).collect()),
            keepdims: true,
            noop_with_empty_axes: true,
        }
    }
}

impl Operator for GlobalMaxPool {
    fn name(&self) -> &'static str {
        "GlobalMaxPool"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        self.reduce(cx.dims(0)?.len()).infer(cx)
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let rank = cx.shape(0)?.len();
        self.reduce(rank).lower(cx)
    }
    impl_as_any!();
}
