//! ONNX `Attention` (opsets 23–25): scaled dot-product attention over one query row at
//! a time, generic over the element types of Q/K (`T`), V (`U`) and the mask (`M`).
//!
//! Arithmetic is `f64`, rounded to `T` where the ONNX reference computes in `T` (the
//! scaled Q and K, the scores, the biased scores, the probabilities), so half-precision
//! results follow the reference's. One row of scores, the scaled query and the output
//! accumulator live in a caller-provided `f64` scratch of [`Attention::scratch_len`]
//! elements (nothing allocates).
//!
//! Order of operations (the reference's): `s = (q·√scale)·(k·√scale)`, optional
//! softcap `c·tanh(s/c)`, plus the additive bias (mask, causal frontier, sliding window,
//! key padding, each 0 or `-inf`), softmax in the softmax precision, then `P·V`. A row
//! whose bias is `-inf` everywhere has all-zero probabilities (so `Y` is 0 there).

use super::elem::Elem;
use serde::Serialize;

/// How `attn_mask` enters the bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AttentionMask {
    /// No mask.
    None,
    /// Boolean: true attends (bias 0), false masks (`-inf`).
    Bool,
    /// Added to the scores as a number.
    Add,
}

/// The precision the softmax is computed in (ONNX `softmax_precision`, default the
/// type of Q).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SoftmaxPrecision {
    F64,
    F32,
    F16,
    Bf16,
}

impl SoftmaxPrecision {
    fn round(self, x: f64) -> f64 {
        match self {
            SoftmaxPrecision::F64 => x,
            SoftmaxPrecision::F32 => x as f32 as f64,
            SoftmaxPrecision::F16 => half::f16::from_f64(x).to_f64(),
            SoftmaxPrecision::Bf16 => half::bf16::from_f64(x).to_f64(),
        }
    }
}

/// What the optional fourth output (`qk_matmul_output`) holds, as the reference
/// computes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum QkOutput {
    /// Not written.
    None,
    /// The scaled scores after softcap (modes 0 and 1).
    Scores,
    /// The scores plus the bias (mode 2).
    WithBias,
    /// The probabilities (mode 3; zero on fully masked rows).
    Softmax,
}

/// Geometry and attributes of one `Attention` node, resolved by the compiler.
///
/// Q is read at `b·q_strides[0] + h·q_strides[1] + s·q_strides[2] + d` (the same for
/// K, V over their heads and positions, and for Y), which covers both the 4-D
/// `[batch, heads, seq, head]` and the 3-D `[batch, seq, heads·head]` layouts.
/// `past_key`/`past_value`, `present_key`/`present_value` and `qk_matmul_output` are
/// always 4-D and contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Attention {
    pub batch: usize,
    pub q_heads: usize,
    /// Divides `q_heads`; query head `h` reads key/value head `h / (q_heads / kv_heads)`.
    pub kv_heads: usize,
    pub q_len: usize,
    /// Positions in K and V (the new keys).
    pub kv_len: usize,
    /// Positions in `past_key`/`past_value` (0 when absent); keys `0..past_len` come
    /// from the cache, then K.
    pub past_len: usize,
    pub head_size: usize,
    pub v_head_size: usize,
    pub q_strides: [usize; 3],
    pub k_strides: [usize; 3],
    pub v_strides: [usize; 3],
    pub y_strides: [usize; 3],
    pub mask: AttentionMask,
    /// Mask strides over (batch, query head, query position), 0 where broadcast; the
    /// key stride is 1.
    pub mask_strides: [usize; 3],
    /// The mask's last dimension; keys at or past it are masked (the reference pads).
    pub mask_len: usize,
    /// `√scale` (the kernel rounds it to `T`, as the reference does).
    pub scale_sqrt: f64,
    /// Softcap `c` (`c·tanh(s/c)`); none when `<= 0`.
    pub softcap: f64,
    pub is_causal: bool,
    /// Sliding window: key `j` is allowed for query position `p = i + offset` when
    /// `p - left <= j <= p + right`; -1 leaves a side unbounded.
    pub left_window: i64,
    pub right_window: i64,
    /// `nonpad_kv_seqlen` is given: keys at or past `nonpad[b]` are masked and, with no
    /// cache, the causal/window offset of batch `b` is `nonpad[b] - q_len`.
    pub nonpad: bool,
    pub softmax: SoftmaxPrecision,
    pub qk_output: QkOutput,
    /// Write `present_key`/`present_value`.
    pub present: bool,
}

impl Attention {
    /// Keys per query: the cache plus the new keys.
    pub fn total_len(&self) -> usize {
        self.past_len + self.kv_len
    }

    /// `f64` elements of scratch the kernel needs.
    pub fn scratch_len(&self) -> usize {
        self.total_len() + self.head_size + self.v_head_size
    }

    /// Elements of `Y`.
    pub fn y_len(&self) -> usize {
        self.batch * self.q_heads * self.q_len * self.v_head_size
    }

    /// Elements of `present_key` (`present_value`: with `v_head_size`).
    pub fn present_len(&self, head_size: usize) -> usize {
        self.batch * self.kv_heads * self.total_len() * head_size
    }

    /// Elements of `qk_matmul_output`.
    pub fn qk_len(&self) -> usize {
        self.batch * self.q_heads * self.q_len * self.total_len()
    }
}

fn round<T: Elem>(x: f64) -> f64 {
    T::from_f64(x).to_f64()
}

/// Row `t` (a key position over the cache then the new keys) of head `kvh` in batch
/// `b`: `width` elements.
#[allow(clippy::too_many_arguments)]
fn kv_row<'a, X: Elem>(
    past: &'a [X],
    new: &'a [X],
    strides: [usize; 3],
    p: &Attention,
    width: usize,
    b: usize,
    kvh: usize,
    t: usize,
) -> &'a [X] {
    if t < p.past_len {
        let at = ((b * p.kv_heads + kvh) * p.past_len + t) * width;
        &past[at..at + width]
    } else {
        let at = b * strides[0] + kvh * strides[1] + (t - p.past_len) * strides[2];
        &new[at..at + width]
    }
}

/// ONNX `Attention`. Inputs: Q, K, V, the mask (ignored when `p.mask` is `None`), the
/// key/value cache (read when `p.past_len > 0`) and `nonpad_kv_seqlen` (read when
/// `p.nonpad`); absent inputs may be any slice. Outputs: Y, `present_key`,
/// `present_value` (written when `p.present`), `qk_matmul_output` (written unless
/// `p.qk_output` is `None`), then the `f64` scratch.
#[allow(clippy::too_many_arguments)]
pub fn attention<T: Elem, U: Elem, M: Elem>(
    p: &Attention,
    q: &[T],
    k: &[T],
    v: &[U],
    mask: &[M],
    past_key: &[T],
    past_value: &[U],
    nonpad: &[i64],
    y: &mut [T],
    present_key: &mut [T],
    present_value: &mut [U],
    qk: &mut [T],
    scratch: &mut [f64],
) {
    let (d, dv) = (p.head_size, p.v_head_size);
    let total = p.total_len();
    assert!(
        p.kv_heads > 0 && p.q_heads.is_multiple_of(p.kv_heads),
        "attention: heads"
    );
    assert!(y.len() >= p.y_len(), "attention: Y");
    assert!(scratch.len() >= p.scratch_len(), "attention: scratch");
    assert!(!p.nonpad || nonpad.len() >= p.batch, "attention: nonpad");
    let group = p.q_heads / p.kv_heads;

    if p.present {
        for b in 0..p.batch {
            for kvh in 0..p.kv_heads {
                for t in 0..total {
                    let at = ((b * p.kv_heads + kvh) * total + t) * d;
                    let row = kv_row(past_key, k, p.k_strides, p, d, b, kvh, t);
                    present_key[at..at + d].copy_from_slice(row);
                    let at = ((b * p.kv_heads + kvh) * total + t) * dv;
                    let row = kv_row(past_value, v, p.v_strides, p, dv, b, kvh, t);
                    present_value[at..at + dv].copy_from_slice(row);
                }
            }
        }
    }

    let (scores, rest) = scratch.split_at_mut(total);
    let (qs, rest) = rest.split_at_mut(d);
    let acc = &mut rest[..dv];
    let scale = round::<T>(p.scale_sqrt);
    let neg_inf = f64::NEG_INFINITY;

    for b in 0..p.batch {
        // The causal / window frontier: query `i` sits at key position `i + offset`.
        // Keys at or past `limit` are padding.
        let limit = match nonpad.get(b) {
            Some(&n) if p.nonpad => n,
            _ => i64::MAX,
        };
        let offset: i64 = if p.past_len > 0 || !p.nonpad {
            p.past_len as i64
        } else {
            limit - p.q_len as i64
        };
        for h in 0..p.q_heads {
            let kvh = h / group;
            for s in 0..p.q_len {
                let qa = b * p.q_strides[0] + h * p.q_strides[1] + s * p.q_strides[2];
                for (x, &e) in qs.iter_mut().zip(&q[qa..qa + d]) {
                    *x = round::<T>(e.to_f64() * scale);
                }
                let ma = b * p.mask_strides[0] + h * p.mask_strides[1] + s * p.mask_strides[2];
                let qk_at = ((b * p.q_heads + h) * p.q_len + s) * total;
                let pos = s as i64 + offset;
                let mut all_masked = true;
                for (t, score) in scores.iter_mut().enumerate() {
                    let key = kv_row(past_key, k, p.k_strides, p, d, b, kvh, t);
                    let dot: f64 = qs
                        .iter()
                        .zip(key)
                        .map(|(&a, &e)| a * round::<T>(e.to_f64() * scale))
                        .sum();
                    let mut x = round::<T>(dot);
                    if p.softcap > 0.0 {
                        x = round::<T>(p.softcap * (x / p.softcap).tanh());
                    }
                    if p.qk_output == QkOutput::Scores {
                        qk[qk_at + t] = T::from_f64(x);
                    }
                    // The additive bias.
                    let mut bias = match p.mask {
                        AttentionMask::None => 0.0,
                        _ if t >= p.mask_len => neg_inf,
                        AttentionMask::Bool => {
                            if mask[ma + t].is_nonzero() {
                                0.0
                            } else {
                                neg_inf
                            }
                        }
                        AttentionMask::Add => mask[ma + t].to_f64(),
                    };
                    let ti = t as i64;
                    if p.is_causal && ti > pos {
                        bias = neg_inf;
                    }
                    if (p.left_window >= 0 && pos - ti > p.left_window)
                        || (p.right_window >= 0 && ti - pos > p.right_window)
                    {
                        bias = neg_inf;
                    }
                    if ti >= limit {
                        bias = neg_inf;
                    }
                    if bias != neg_inf {
                        all_masked = false;
                    }
                    x = round::<T>(x + bias);
                    if p.qk_output == QkOutput::WithBias {
                        qk[qk_at + t] = T::from_f64(x);
                    }
                    *score = p.softmax.round(x);
                }
                // Softmax (all zero on a fully masked row).
                if all_masked {
                    scores.fill(0.0);
                } else {
                    let max = scores.iter().copied().fold(neg_inf, f64::max);
                    let max = if max == neg_inf { 0.0 } else { max };
                    let mut sum = 0.0;
                    for x in scores.iter_mut() {
                        *x = p.softmax.round((*x - max).exp());
                        sum += *x;
                    }
                    let sum = p.softmax.round(sum);
                    let sum = if sum == 0.0 { 1.0 } else { sum };
                    for x in scores.iter_mut() {
                        *x = round::<T>(p.softmax.round(*x / sum));
                    }
                }
                if p.qk_output == QkOutput::Softmax {
                    for (o, &x) in qk[qk_at..qk_at + total].iter_mut().zip(scores.iter()) {
                        *o = T::from_f64(x);
                    }
                }
                // P·V.
                acc.fill(0.0);
                for (t, &w) in scores.iter().enumerate() {
                    let row = kv_row(past_value, v, p.v_strides, p, dv, b, kvh, t);
                    for (a, &e) in acc.iter_mut().zip(row) {
                        *a += w * e.to_f64();
                    }
                }
                let ya = b * p.y_strides[0] + h * p.y_strides[1] + s * p.y_strides[2];
                for (o, &a) in y[ya..ya + dv].iter_mut().zip(acc.iter()) {
                    *o = T::from_f64(a);
                }
            }
        }
    }
}
