//! Kernels of single operators that belong to no larger family: the losses
//! (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), Einsum, CumProd, BitCast,
//! ReverseSequence, Det, TensorScatter and SwiGLU. Float arithmetic is `f64`.

use serde::Serialize;

use super::elem::Elem;
use super::index::Index;
use crate::Error;

/// ONNX `reduction` of the losses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LossReduction {
    None,
    Sum,
    Mean,
}

/// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss over `x [n, c, d]` (`d` the
/// product of the trailing dimensions) and `target [n, d]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Loss {
    pub n: usize,
    pub c: usize,
    pub d: usize,
    pub reduction: LossReduction,
    pub has_ignore_index: bool,
    pub ignore_index: i64,
    /// SoftmaxCrossEntropyLoss: the log-softmax over `c` first.
    pub softmax: bool,
}

/// The loss (`[n, d]` for reduction none, else one element); `weight` (`[c]`) may be
/// empty (all ones). A target equal to `ignore_index` weighs 0; any other target
/// outside `0..c` is an error. Mean divides by the sum of the weights.
pub fn loss<T: Elem, I: Index>(
    p: &Loss,
    x: &[T],
    target: &[I],
    weight: &[T],
    out: &mut [T],
) -> Result<(), Error> {
    loss_log_prob(p, x, target, weight, out, &mut [])
}

/// [`loss`], also writing the log-probabilities (`x`'s shape) to `log_prob` when it is
/// not empty (SoftmaxCrossEntropyLoss's second output).
pub fn loss_log_prob<T: Elem, I: Index>(
    p: &Loss,
    x: &[T],
    target: &[I],
    weight: &[T],
    out: &mut [T],
    log_prob: &mut [T],
) -> Result<(), Error> {
    let (c, d) = (p.c, p.d);
    let (mut sum, mut wsum) = (0.0f64, 0.0f64);
    for n in 0..p.n {
        let xs = &x[n * c * d..][..c * d];
        for j in 0..d {
            // The log-softmax shift of this column.
            let shift = if p.softmax {
                let m = (0..c)
                    .map(|k| xs[k * d + j].to_f64())
                    .fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = (0..c).map(|k| (xs[k * d + j].to_f64() - m).exp()).sum();
                let shift = m + s.ln();
                if !log_prob.is_empty() {
                    for k in 0..c {
                        log_prob[n * c * d + k * d + j] =
                            T::from_f64(xs[k * d + j].to_f64() - shift);
                    }
                }
                shift
            } else {
                0.0
            };
            let t = target[n * d + j].index();
            let (l, w) = if p.has_ignore_index && t == p.ignore_index {
                (0.0, 0.0)
            } else {
                if t < 0 || t >= c as i64 {
                    return Err(Error::IndexOutOfRange { index: t, len: c });
                }
                let t = t as usize;
                let w = if weight.is_empty() {
                    1.0
                } else {
                    weight[t].to_f64()
                };
                (-(xs[t * d + j].to_f64() - shift) * w, w)
            };
            if p.reduction == LossReduction::None {
                out[n * d + j] = T::from_f64(l);
            }
            sum += l;
            wsum += w;
        }
    }
    match p.reduction {
        LossReduction::None => {}
        LossReduction::Sum => out[0] = T::from_f64(sum),
        LossReduction::Mean => out[0] = T::from_f64(sum / wsum),
    }
    Ok(())
}
