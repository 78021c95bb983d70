//! Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (with its optional
//! `log_prob` output), on the typed kernel `typed::loss`.

use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::{Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, ParseCx, R, Types};
use crate::dim::{Dim, dims_of, fmt_dims};
use crate::lower::TypedCall;
use crate::tensor::{DType, Data, Scalar, Tensor};
use crate::{dispatch_dtype, impl_as_any};

#[derive(Debug, Clone)]
pub struct Loss {
    pub softmax: bool,
    pub reduction: tp::LossReduction,
    pub ignore_index: Option<i64>,
}

fn parse(cx: &ParseCx, softmax: bool) -> R<super::Op> {
    let reduction = match cx.attrs.string("reduction")?.as_deref() {
        None | Some("mean") => tp::LossReduction::Mean,
        Some("sum") => tp::LossReduction::Sum,
        Some("none") => tp::LossReduction::None,
        Some(r) => return Err(format!("reduction `{r}`, expected none, sum or mean")),
    };
    Ok(Arc::new(Loss {
        softmax,
        reduction,
        ignore_index: cx.attrs.int("ignore_index")?,
    }))
}

/// The loss's output dims (the target's without reduction, a scalar with one), after
/// checking input `xs` (`[N, C, d..]`), target `ts` (`[N, d..]`) and the optional weight
/// `ws` (`[C]`).
fn loss_dims(
    xs: &[Dim],
    ts: &[Dim],
    ws: Option<&[Dim]>,
    reduction: tp::LossReduction,
) -> R<Vec<Dim>> {
    if xs.len() < 2 {
        return Err(format!(
            "input {} must have rank ≥ 2 ([N, C, ...])",
            fmt_dims(xs)
        ));
    }
    let mut want = vec![xs[0].clone()];
    want.extend_from_slice(&xs[2..]);
    if ts != want.as_slice() {
        return Err(format!(
            "target has shape {}, expected {} (input {} without C)",
            fmt_dims(ts),
            fmt_dims(&want),
            fmt_dims(xs)
        ));
    }
    if let Some(ws) = ws
        && ws != std::slice::from_ref(&xs[1])
    {
        return Err(format!(
            "weight has shape {}, expected [{}]",
            fmt_dims(ws),
            xs[1]
        ));
    }
    Ok(if reduction == tp::LossReduction::None {
        ts.to_vec()
    } else {
        Vec::new()
    })
}

impl Loss {
    fn params(&self, cx: &InferCx) -> R<(tp::Loss, Vec<usize>)> {
        let xs = cx.shape(0)?;
        let ts = cx.shape(1)?;
        let ws = cx.opt(2).map(|w| w.dims());
        loss_dims(&dims_of(xs), &dims_of(ts), ws, self.reduction)?;
        let p = tp::Loss {
            n: xs[0],
            c: xs[1],
            d: xs[2..].iter().product(),
            reduction: self.reduction,
            has_ignore_index: self.ignore_index.is_some(),
            ignore_index: self.ignore_index.unwrap_or(0),
            softmax: self.softmax,
        };
        let shape = if self.reduction == tp::LossReduction::None {
            ts.to_vec()
        } else {
            Vec::new()
        };
        Ok((p, shape))
    }

    fn types(&self, cx: &InferCx) -> R<(DType, DType)> {
        let d = cx.check_type(0, Types::Float)?;
        let di = match cx.dtype(1)? {
            di @ (DType::I32 | DType::I64) => di,
            di => {
                return Err(format!(
                    "target has element type {di}, expected int32 or int64"
                ));
            }
        };
        if let Some(w) = cx.opt(2)
            && w.dtype != d
        {
            return Err(format!(
                "weight has element type {}, expected {d} like the input",
                w.dtype
            ));
        }
        Ok((d, di))
    }

    fn log_prob(&self, n_outputs: usize) -> bool {
        self.softmax && n_outputs > 1
    }
}

fn eval_typed<T: Scalar>(
    p: &tp::Loss,
    x: &Tensor,
    t: &Tensor,
    w: Option<&Tensor>,
    out: usize,
    lp: usize,
) -> R<Vec<Data>> {
    let get = |t: &Tensor| {
        T::unwrap(&t.data)
            .map(|v| v.to_vec())
            .ok_or_else(|| "constant of the wrong element type".to_string())
    };
    let x = get(x)?;
    let w = w.map(get).transpose()?.unwrap_or_default();
    let tv = t.as_i64();
    let mut o = vec![T::default(); out];
    let mut l = vec![T::default(); lp];
    typed::loss_log_prob(p, &x, &tv, &w, &mut o, &mut l).map_err(|e| e.to_string())?;
    Ok(vec![T::wrap(o), T::wrap(l)])
}

impl Operator for Loss {
    fn name(&self) -> &'static str {
        if self.softmax {
            "SoftmaxCrossEntropyLoss"
        } else {
            "NegativeLogLikelihoodLoss"
        }
    }

    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let (d, _) = self.types(cx)?;
        let ws = cx.opt(2).map(|w| w.dims());
        let shape = loss_dims(cx.dims(0)?, cx.dims(1)?, ws, self.reduction)?;
        let mut facts = vec![Fact::new(d, shape)];
        if self.log_prob(cx.n_outputs()) {
            facts.push(Fact::new(d, cx.dims(0)?.to_vec()));
        }
        Ok(facts)
    }

    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let (p, _) = self.params(cx)?;
        let x = cx.constant(0, "input")?;
        let t = cx.constant(1, "target")?;
        let w = cx.opt_constant(2);
        let n: usize = outs[0].shape.iter().product();
        let lp = if outs.len() > 1 { x.len() } else { 0 };
        let data = dispatch_dtype!(outs[0].dtype, T => eval_typed::<T>(&p, x, t, w, n, lp)?);
        Ok(Some(
            data.into_iter()
                .zip(outs)
                .map(|(d, f)| Tensor::new(f.shape.clone(), d))
                .collect(),
        ))
    }

    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let (p, shape) = self.params(&infer)?;
        let (d, di) = self.types(&infer)?;
        let log_prob = self.log_prob(infer.n_outputs());
        let xlen: usize = cx.shape(0)?.iter().product();
        let mut inputs = vec![cx.operand(0)?, cx.operand(1)?];
        inputs.push(if cx.opt(2).is_some() {
            cx.operand(2)?
        } else {
            let name = format!("{}:no_weight", cx.node.name);
            cx.weight(&name, &Tensor::new(vec![0], Data::zeros(d, 0)))
        });
        let func = if log_prob { "loss_log_prob" } else { "loss" };
        let call = TypedCall::new(func, vec![d, di], &p)
            .fallible()
            .inputs(vec![d, di, d]);
        if log_prob {
            let n = shape.iter().product();
            cx.typed_multi(call, inputs, &[(0, d, n), (1, d, xlen)])
        } else {
            cx.typed(call, inputs, 0)?;
            Ok(())
        }
    }

    impl_as_any!();
}

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "NegativeLogLikelihoodLoss",
        since: 12,
        types: Types::Float,
        cuda: false,
        parse: |cx| parse(cx, false),
    },
    OpDef {
        name: "SoftmaxCrossEntropyLoss",
        since: 12,
        types: Types::Float,
        cuda: false,
        parse: |cx| parse(cx, true),
    },
];

#[cfg(test)]
mod dims_tests {
    use super::*;
    use crate::ops::index::dims_tests::{In, dims, err, f32s, i64s, infer, shapes};

    fn loss(softmax: bool, reduction: tp::LossReduction) -> Loss {
        Loss {
            softmax,
            reduction,
            ignore_index: None,
        }
    }

    #[test]
    fn output_is_the_target_or_a_scalar() {
        let none = tp::LossReduction::None;
        let ins = || vec![f32s("N,C,H,W"), i64s("N,H,W"), f32s("C")];
        let facts = infer(loss(true, none), ins(), 2).unwrap();
        assert_eq!(shapes(&facts), vec![dims("N,H,W"), dims("N,C,H,W")]);
        let facts = infer(loss(false, tp::LossReduction::Mean), ins(), 1).unwrap();
        assert_eq!(shapes(&facts), vec![dims("")]);
        let no_weight = vec![f32s("N,5"), i64s("N"), In::Absent];
        let facts = infer(loss(false, none), no_weight, 1).unwrap();
        assert_eq!(shapes(&facts), vec![dims("N")]);
    }

    #[test]
    fn mismatches_name_the_expected_dims() {
        let none = tp::LossReduction::None;
        let e = err(infer(
            loss(false, none),
            vec![f32s("N,C,W"), i64s("M,W")],
            1,
        ));
        assert!(
            e.contains("target has shape [M, W], expected [N, W]"),
            "{e}"
        );
        let e = err(infer(
            loss(false, none),
            vec![f32s("N,C"), i64s("N"), f32s("5")],
            1,
        ));
        assert!(e.contains("weight has shape [5], expected [C]"), "{e}");
        assert!(err(infer(loss(false, none), vec![f32s("N"), i64s("N")], 1)).contains("rank ≥ 2"));
    }

    #[test]
    fn fixed_shapes_give_what_the_kernel_parameters_give() {
        // The same shape rule serves the lowering's fixed shapes.
        let out = loss_dims(&dims("2,3,4"), &dims("2,4"), None, tp::LossReduction::None).unwrap();
        assert_eq!(out, dims("2,4"));
    }
}
