//! Kernels of single operators that belong to no larger family: the losses
//! (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), Einsum, CumProd, BitCast,
//! ReverseSequence, Det, TensorScatter and SwiGLU. Float arithmetic is `f64`.

use serde::Serialize;

use super::elem::Elem;
use super::index::Index;
use super::params::RANK;
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

/// The most distinct labels (letters and broadcast dimensions) of one Einsum.
pub const EINSUM_LABELS: usize = 12;
/// The most operands of one Einsum.
pub const EINSUM_INPUTS: usize = 4;

/// Einsum over an index space of `n_labels` labels: the first `n_out` are the output's
/// dimensions in order (row-major), the rest are summed. `strides[k][l]` is operand
/// `k`'s element stride along label `l` (0 where it lacks the label or broadcasts it;
/// a label repeated within an operand has the sum of its strides: a diagonal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Einsum {
    pub n_labels: usize,
    pub n_out: usize,
    pub sizes: [usize; EINSUM_LABELS],
    pub n_inputs: usize,
    pub strides: [[usize; EINSUM_LABELS]; EINSUM_INPUTS],
}

/// Advances the multi-index `idx` over labels `from..to` (last fastest).
#[inline]
fn odometer(
    idx: &mut [usize; EINSUM_LABELS],
    sizes: &[usize; EINSUM_LABELS],
    from: usize,
    to: usize,
) {
    for l in (from..to).rev() {
        idx[l] += 1;
        if idx[l] < sizes[l] {
            return;
        }
        idx[l] = 0;
    }
}

/// ONNX Einsum: every output element is the sum over the summed labels of the
/// product of the operands. Floats accumulate in `f64`, integers in wrapping `i128`.
pub fn einsum<T: Elem>(p: &Einsum, inputs: &[&[T]], out: &mut [T]) {
    let (nl, no, ni) = (p.n_labels, p.n_out, p.n_inputs.min(inputs.len()));
    let inner: usize = p.sizes[no..nl].iter().product();
    let mut oidx = [0usize; EINSUM_LABELS];
    for o in out.iter_mut() {
        let mut base = [0usize; EINSUM_INPUTS];
        for (k, b) in base.iter_mut().enumerate().take(ni) {
            *b = (0..no).map(|l| oidx[l] * p.strides[k][l]).sum();
        }
        let mut iidx = [0usize; EINSUM_LABELS];
        let (mut acc_f, mut acc_i) = (0.0f64, 0i128);
        for _ in 0..inner {
            let (mut pf, mut pi) = (1.0f64, 1i128);
            for k in 0..ni {
                let off = base[k] + (no..nl).map(|l| iidx[l] * p.strides[k][l]).sum::<usize>();
                let v = inputs[k][off];
                if T::IS_FLOAT {
                    pf *= v.to_f64();
                } else {
                    pi = pi.wrapping_mul(v.to_i128());
                }
            }
            acc_f += pf;
            acc_i = acc_i.wrapping_add(pi);
            odometer(&mut iidx, &p.sizes, no, nl);
        }
        *o = if T::IS_FLOAT {
            T::from_f64(acc_f)
        } else {
            T::from_i128(acc_i)
        };
        odometer(&mut oidx, &p.sizes, 0, no);
    }
}

/// ONNX CumProd along the middle axis of an `[outer, len, inner]` view (the CumSum
/// parameters). Floats multiply in `f64`, integers in wrapping `i128`.
pub fn cumprod<T: Elem>(p: &super::params::CumSum, x: &[T], out: &mut [T]) {
    for o in 0..p.outer {
        for i in 0..p.inner {
            let (mut af, mut ai) = (1.0f64, 1i128);
            for s in 0..p.len {
                let k = if p.reverse { p.len - 1 - s } else { s };
                let at = (o * p.len + k) * p.inner + i;
                let cur = |af: f64, ai: i128| {
                    if T::IS_FLOAT {
                        T::from_f64(af)
                    } else {
                        T::from_i128(ai)
                    }
                };
                if p.exclusive {
                    out[at] = cur(af, ai);
                }
                af *= x[at].to_f64();
                ai = ai.wrapping_mul(x[at].to_i128());
                if !p.exclusive {
                    out[at] = cur(af, ai);
                }
            }
        }
    }
}

/// ONNX BitCast between types of the same width: the bytes of `x` as `B`s. A byte
/// that is not 0 or 1 cast to `bool` is an error.
pub fn bitcast<A: Elem, B: Elem>(x: &[A], out: &mut [B]) -> Result<(), Error> {
    let src: &[u8] = bytemuck::cast_slice(x);
    let dst: &mut [u8] = bytemuck::cast_slice_mut(out);
    let n = src.len().min(dst.len());
    if core::any::TypeId::of::<B>() == core::any::TypeId::of::<super::Bool>()
        && src[..n].iter().any(|&b| b > 1)
    {
        return Err(Error::InvalidValue {
            name: "BitCast",
            dtype: "bool",
        });
    }
    dst[..n].copy_from_slice(&src[..n]);
    Ok(())
}

/// ReverseSequence over `x` of `shape`: for batch entry `b`, the first `lens[b]`
/// steps along `time_axis` are reversed, the rest copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReverseSequence {
    pub rank: usize,
    pub shape: [usize; RANK],
    pub batch_axis: usize,
    pub time_axis: usize,
}

/// ONNX ReverseSequence; a length outside `0..=time` is an error.
pub fn reverse_sequence<T: Copy, I: Index>(
    p: &ReverseSequence,
    x: &[T],
    lens: &[I],
    out: &mut [T],
) -> Result<(), Error> {
    let rank = p.rank;
    let time = p.shape[p.time_axis];
    for &l in lens {
        let l = l.index();
        if l < 0 || l > time as i64 {
            return Err(Error::IndexOutOfRange {
                index: l,
                len: time + 1,
            });
        }
    }
    let tstride: usize = p.shape[p.time_axis + 1..rank].iter().product();
    let mut idx = [0usize; RANK];
    for (i, o) in out.iter_mut().enumerate() {
        let b = idx[p.batch_axis];
        let t = idx[p.time_axis];
        let len = lens[b].index() as usize;
        let src = if t < len {
            i + (len - 1 - t) * tstride - t * tstride
        } else {
            i
        };
        *o = x[src];
        for a in (0..rank).rev() {
            idx[a] += 1;
            if idx[a] < p.shape[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    Ok(())
}

/// Det over `batch` square matrices of side `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Det {
    pub batch: usize,
    pub n: usize,
}

impl Det {
    /// `f64` elements of the `scratch` argument of [`det`].
    pub const fn scratch_len(&self) -> usize {
        self.n * self.n
    }
}

/// ONNX Det: LU decomposition with partial pivoting in `f64`, in `scratch`
/// (`n·n` elements).
pub fn det<T: Elem>(p: &Det, x: &[T], out: &mut [T], scratch: &mut [f64]) {
    let n = p.n;
    let a = &mut scratch[..n * n];
    for (b, o) in out.iter_mut().enumerate().take(p.batch) {
        for (d, s) in a.iter_mut().zip(&x[b * n * n..][..n * n]) {
            *d = s.to_f64();
        }
        let mut det = 1.0f64;
        for c in 0..n {
            let piv = (c..n)
                .max_by(|&i, &j| a[i * n + c].abs().total_cmp(&a[j * n + c].abs()))
                .unwrap_or(c);
            if a[piv * n + c] == 0.0 {
                det = 0.0;
                break;
            }
            if piv != c {
                for k in 0..n {
                    a.swap(piv * n + k, c * n + k);
                }
                det = -det;
            }
            let d = a[c * n + c];
            det *= d;
            for r in c + 1..n {
                let f = a[r * n + c] / d;
                if f != 0.0 {
                    for k in c + 1..n {
                        a[r * n + k] -= f * a[c * n + k];
                    }
                }
            }
        }
        *o = T::from_f64(det);
    }
}

/// TensorScatter over a cache viewed as `[batch, mid, max_seq, inner]` and an update
/// `[batch, mid, seq, inner]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TensorScatter {
    pub batch: usize,
    pub mid: usize,
    pub max_seq: usize,
    pub seq: usize,
    pub inner: usize,
    pub circular: bool,
}

/// ONNX TensorScatter: the cache with the update written at each batch entry's
/// `write_indices` (empty: 0) along the sequence axis, wrapping in circular mode; a
/// linear write past the end is an error.
pub fn tensor_scatter<T: Copy, I: Index>(
    p: &TensorScatter,
    past: &[T],
    update: &[T],
    write_indices: &[I],
    out: &mut [T],
) -> Result<(), Error> {
    out.copy_from_slice(&past[..out.len()]);
    let inner = p.inner;
    for b in 0..p.batch {
        let w = write_indices.get(b).map_or(0, |w| w.index());
        for m in 0..p.mid {
            for s in 0..p.seq {
                let mut at = w + s as i64;
                if p.circular {
                    at = at.rem_euclid(p.max_seq.max(1) as i64);
                }
                if at < 0 || at >= p.max_seq as i64 {
                    return Err(Error::IndexOutOfRange {
                        index: at,
                        len: p.max_seq,
                    });
                }
                let row = b * p.mid + m;
                let dst = (row * p.max_seq + at as usize) * inner;
                let src = (row * p.seq + s) * inner;
                out[dst..dst + inner].copy_from_slice(&update[src..src + inner]);
            }
        }
    }
    Ok(())
}

/// SwiGLU's `alpha`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SwiGlu {
    pub alpha: f32,
}

/// ONNX SwiGLU: `a · σ(alpha · a) · b`, rounding to `T` after the sigmoid and after
/// each product as the reference does.
pub fn swiglu<T: Elem>(p: &SwiGlu, a: &[T], b: &[T], out: &mut [T]) {
    let alpha = p.alpha as f64;
    for ((o, &a), &b) in out.iter_mut().zip(a).zip(b) {
        let av = a.to_f64();
        let s = T::from_f64(1.0 / (1.0 + (-alpha * av).exp())).to_f64();
        let sa = T::from_f64(av * s).to_f64();
        *o = T::from_f64(sa * b.to_f64());
    }
}
