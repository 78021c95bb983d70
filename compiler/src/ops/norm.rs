//! Normalisation: BatchNormalization (and the per-channel affine the passes fold it
//! into), Softmax, LogSoftmax and Hardmax.

#[allow(unused_imports)]
use kiln_runtime::typed::Elem as _;
use std::sync::Arc;

use kiln_runtime::params;
use kiln_runtime::typed::{self, params as tp};

use super::{Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, R, Types, normalize_axis};
use crate::ir::Activation;
use crate::lower::{Kernel, TypedCall, activation_param};
use crate::tensor::{DType, Scalar, Tensor};
use crate::{dispatch_data, impl_as_any};

/// Inference-mode BatchNormalization.
#[derive(Debug, Clone)]
pub struct BatchNormalization {
    pub epsilon: f32,
}

impl Operator for BatchNormalization {
    fn name(&self) -> &'static str {
        "BatchNormalization"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::F32)?;
        let xs = cx.dims(0)?;
        if xs.len() < 2 {
            return Err(format!("input must have rank ≥ 2, got {xs:?}"));
        }
        for i in 1..5 {
            let p = cx.input(i)?;
            if p.dims() != std::slice::from_ref(&xs[1]) {
                return Err(format!(
                    "parameter {i} has shape {:?}, expected [{}]",
                    p.dims(),
                    xs[1]
                ));
            }
        }
        if cx.n_outputs() > 1 {
            return Err("training-mode outputs (running mean/var) are not supported".into());
        }
        Ok(vec![Fact::new(d, xs.to_vec())])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let xs = cx.shape(0)?;
        let p = params::BatchNorm {
            n: xs[0],
            c: xs[1],
            inner: xs[2..].iter().product(),
            epsilon: self.epsilon,
        };
        let inputs = cx.operands()?;
        let out = cx.output(0)?;
        cx.step(Kernel::BatchNorm(p), inputs, out);
        Ok(())
    }
    impl_as_any!();
}

/// `y = x·scale[c] + shift[c]` over channel axis 1, then an optional activation:
/// inference BatchNormalization with its statistics folded, and the per-channel
/// Mul/Add that follow it. Made by the passes, never loaded. Inputs: x, scale, shift.
#[derive(Debug, Clone)]
pub struct ChannelAffine {
    pub activation: Option<Activation>,
}

impl Operator for ChannelAffine {
    fn name(&self) -> &'static str {
        "BatchNormalization"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        Ok(vec![Fact::new(cx.dtype(0)?, cx.dims(0)?.to_vec())])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let xs = cx.shape(0)?;
        let p = params::ChannelAffine {
            n: xs[0],
            c: xs[1],
            inner: xs[2..].iter().product(),
            activation: activation_param(self.activation),
        };
        let inputs = cx.operands()?;
        let out = cx.output(0)?;
        cx.step(Kernel::ChannelAffine(p), inputs, out);
        Ok(())
    }
    impl_as_any!();
}

/// Softmax, LogSoftmax and Hardmax along `axis` (before opset 13: over the input
/// flattened to 2-D at `axis`).
#[derive(Debug, Clone)]
pub struct Softmax {
    pub name: &'static str,
    pub axis: i64,
    pub log: bool,
    pub hard: bool,
}

impl Softmax {
    fn rows(&self, xs: &[usize], opset: i64) -> R<(usize, usize, usize)> {
        let a = normalize_axis(self.axis, xs.len())?;
        let outer = xs[..a].iter().product();
        Ok(if opset < 13 {
            (outer, xs[a..].iter().product(), 1)
        } else {
            (outer, xs[a], xs[a + 1..].iter().product())
        })
    }
}

impl Operator for Softmax {
    fn name(&self) -> &'static str {
        self.name
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        let xs = cx.dims(0)?;
        normalize_axis(self.axis, xs.len())?;
        Ok(vec![Fact::new(d, xs.to_vec())])
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "input")?;
        let (outer, len, inner) = self.rows(&x.shape, cx.opset())?;
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); v.len()];
            if self.hard {
                typed::hardmax(&tp::Hardmax { outer, len, inner }, v, &mut out);
            } else {
                typed::softmax(&tp::RowSoftmax { outer, len, inner, log: self.log }, v, &mut out);
            }
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(x.shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let (outer, len, inner) = self.rows(cx.shape(0)?, cx.opset())?;
        let x = cx.operand(0)?;
        if d == DType::F32 && !self.hard {
            let p = params::Softmax {
                outer,
                len,
                inner,
                log: self.log,
            };
            let out = cx.output(0)?;
            cx.step(Kernel::Softmax(p), vec![x], out);
            return Ok(());
        }
        let call = if self.hard {
            TypedCall::new("hardmax", vec![d], &tp::Hardmax { outer, len, inner })
        } else {
            let p = tp::RowSoftmax {
                outer,
                len,
                inner,
                log: self.log,
            };
            TypedCall::new("softmax", vec![d], &p)
        };
        cx.typed(call, vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "BatchNormalization",
        since: 7,
        types: Types::F32,
        cuda: true,
        parse: |cx| {
            if cx.attrs.int_or("training_mode", 0)? != 0 {
                return Err("training_mode=1 is not supported (inference only)".into());
            }
            Ok(Arc::new(BatchNormalization {
                epsilon: cx.attrs.float_or("epsilon", 1e-5)?,
            }))
        },
    },
    OpDef {
        name: "Softmax",
        since: 1,
        types: Types::Float,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(Softmax {
                name: "Softmax",
                axis: cx
                    .attrs
                    .int_or("axis", if cx.opset < 13 { 1 } else { -1 })?,
                log: false,
                hard: false,
            }))
        },
    },
    OpDef {
        name: "LogSoftmax",
        since: 1,
        types: Types::Float,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(Softmax {
                name: "LogSoftmax",
                axis: cx
                    .attrs
                    .int_or("axis", if cx.opset < 13 { 1 } else { -1 })?,
                log: true,
                hard: false,
            }))
        },
    },
    OpDef {
        name: "Hardmax",
        since: 1,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Softmax {
                name: "Hardmax",
                axis: cx
                    .attrs
                    .int_or("axis", if cx.opset < 13 { 1 } else { -1 })?,
                log: false,
                hard: true,
            }))
        },
    },
];
