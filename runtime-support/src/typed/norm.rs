//! Normalisations over the float element types (`f32`, `f64`, `f16`, `bf16`):
//! LayerNormalization, Group/InstanceNormalization, LpNormalization,
//! MeanVarianceNormalization, RMSNormalization, inference BatchNormalization and LRN.
//!
//! Every statistic is computed in `f64` (`Elem::to_f64`) and each output rounded once
//! to `T`, so half-precision inputs never accumulate in half precision (the ONNX
//! reference computes in the input type; `stash_type` asks for at least `float32`).
//! Means and variances are two-pass (`Σ(x - mean)²`), never `E[x²] - E[x]²`.
//! Shapes were checked by the compiler: a slice of the wrong length asserts.

use super::elem::{Elem, as_f32, as_f32_mut};
use super::index::{Odometer, strides_of};
use super::params::RANK;
use crate::kernels::simd::{self, vectorize};
use serde::Serialize;

/// Mean and (population) variance of `x`, two passes in `f64`, each summed in eight
/// interleaved partial sums ([`simd::fold8`]; one chain of dependent adds was four
/// cycles an element: a 128 × 384 LayerNorm took 0.13 ms). Always inlined: inside
/// [`layer_norm_f32`]'s `vectorize!` the sums are vector adds.
#[inline(always)]
fn moments<T: Elem>(x: &[T]) -> (f64, f64) {
    let inv_n = 1.0 / x.len() as f64;
    let add = |a: f64, b: f64| a + b;
    let mean = simd::fold8(x, 0.0, |acc, v: T| acc + v.to_f64(), add) * inv_n;
    let var = simd::fold8(
        x,
        0.0,
        |acc, v: T| {
            let d = v.to_f64() - mean;
            acc + d * d
        },
        add,
    ) * inv_n;
    (mean, var)
}

/// LayerNormalization: `x` is `outer × len`, normalised over each row of `len`
/// elements (the dimensions from ONNX `axis` on).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LayerNorm {
    pub outer: usize,
    pub len: usize,
    pub epsilon: f32,
    pub has_bias: bool,
}

/// ONNX LayerNormalization: `y = (x - mean) · inv_std_dev · scale + bias` per row, with
/// `inv_std_dev = 1 / sqrt(var + epsilon)`. `scale` and `bias` hold `len` elements (the
/// compiler broadcasts them to the normalised shape); `bias` is empty when `!has_bias`.
/// The optional outputs `mean` and `inv_std_dev` hold `outer` elements each, or are
/// empty when the node does not ask for them.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm<T: Elem>(
    p: &LayerNorm,
    x: &[T],
    scale: &[T],
    bias: &[T],
    out: &mut [T],
    mean: &mut [T],
    inv_std_dev: &mut [T],
) {
    assert_eq!(x.len(), p.outer * p.len, "layer_norm: X");
    assert_eq!(out.len(), x.len(), "layer_norm: Y");
    assert_eq!(scale.len(), p.len, "layer_norm: scale");
    assert_eq!(
        bias.len(),
        if p.has_bias { p.len } else { 0 },
        "layer_norm: bias"
    );
    assert!(mean.is_empty() || mean.len() == p.outer, "layer_norm: mean");
    assert!(
        inv_std_dev.is_empty() || inv_std_dev.len() == p.outer,
        "layer_norm: inv_std_dev"
    );
    if p.len == 0 {
        return;
    }
    if let (Some(x), Some(scale), Some(bias), Some(out), Some(mean), Some(inv_std_dev)) = (
        as_f32(x),
        as_f32(scale),
        as_f32(bias),
        as_f32_mut(out),
        as_f32_mut(mean),
        as_f32_mut(inv_std_dev),
    ) {
        return vectorize!({ layer_norm_f32(p, x, scale, bias, out, mean, inv_std_dev) });
    }
    let eps = p.epsilon as f64;
    for (r, (x, y)) in x
        .chunks_exact(p.len)
        .zip(out.chunks_exact_mut(p.len))
        .enumerate()
    {
        let (m, var) = moments(x);
        let inv = 1.0 / (var + eps).sqrt();
        for (j, (y, &x)) in y.iter_mut().zip(x).enumerate() {
            let b = if p.has_bias { bias[j].to_f64() } else { 0.0 };
            *y = T::from_f64((x.to_f64() - m) * inv * scale[j].to_f64() + b);
        }
        if let Some(o) = mean.get_mut(r) {
            *o = T::from_f64(m);
        }
        if let Some(o) = inv_std_dev.get_mut(r) {
            *o = T::from_f64(inv);
        }
    }
}

/// [`layer_norm`] for `f32`, run inside `vectorize!`: the same `f64` statistics
/// ([`moments`]), each output rounded once.
#[inline(always)]
fn layer_norm_f32(
    p: &LayerNorm,
    x: &[f32],
    scale: &[f32],
    bias: &[f32],
    out: &mut [f32],
    mean: &mut [f32],
    inv_std_dev: &mut [f32],
) {
    let eps = p.epsilon as f64;
    let rows = x.chunks_exact(p.len).zip(out.chunks_exact_mut(p.len));
    for (r, (x, y)) in rows.enumerate() {
        let (m, var) = moments(x);
        let inv = 1.0 / (var + eps).sqrt();
        if p.has_bias {
            for (((y, &x), &s), &b) in y.iter_mut().zip(x).zip(scale).zip(bias) {
                *y = ((x as f64 - m) * inv * s as f64 + b as f64) as f32;
            }
        } else {
            for ((y, &x), &s) in y.iter_mut().zip(x).zip(scale) {
                *y = ((x as f64 - m) * inv * s as f64) as f32;
            }
        }
        if let Some(o) = mean.get_mut(r) {
            *o = m as f32;
        }
        if let Some(o) = inv_std_dev.get_mut(r) {
            *o = inv as f32;
        }
    }
}

/// GroupNormalization / InstanceNormalization: `x` is `n × channels × inner`; the
/// channels fall into `groups` equal groups, each normalised over its
/// `channels / groups × inner` elements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GroupNorm {
    pub n: usize,
    pub groups: usize,
    pub channels: usize,
    pub inner: usize,
    pub epsilon: f32,
}

/// ONNX GroupNormalization (opset 21) and InstanceNormalization (`groups ==
/// channels`): `y = scale[c] · (x - mean_g) / sqrt(var_g + epsilon) + bias[c]`, with
/// `scale` and `bias` per channel (`channels` elements). GroupNormalization-18 had them
/// per group (`groups` elements, shared by the group's channels): the compiler repeats
/// each one `channels / groups` times to call this kernel.
pub fn group_norm<T: Elem>(p: &GroupNorm, x: &[T], scale: &[T], bias: &[T], out: &mut [T]) {
    assert!(
        p.groups > 0 && p.channels.is_multiple_of(p.groups),
        "group_norm: {} channels in {} groups",
        p.channels,
        p.groups
    );
    assert_eq!(x.len(), p.n * p.channels * p.inner, "group_norm: X");
    assert_eq!(out.len(), x.len(), "group_norm: Y");
    assert_eq!(scale.len(), p.channels, "group_norm: scale");
    assert_eq!(bias.len(), p.channels, "group_norm: bias");
    let per_group = p.channels / p.groups;
    let block = per_group * p.inner;
    if block == 0 || x.is_empty() {
        return;
    }
    let eps = p.epsilon as f64;
    for (b, (x, y)) in x
        .chunks_exact(block)
        .zip(out.chunks_exact_mut(block))
        .enumerate()
    {
        let (m, var) = moments(x);
        let inv = 1.0 / (var + eps).sqrt();
        let c0 = (b % p.groups) * per_group;
        for (i, (y, &x)) in y.iter_mut().zip(x).enumerate() {
            let c = c0 + i / p.inner;
            let v = (x.to_f64() - m) * inv;
            *y = T::from_f64(scale[c].to_f64() * v + bias[c].to_f64());
        }
    }
}

/// LpNormalization over an axis of `len` elements spaced `inner` apart, `outer` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LpNorm {
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    /// 1 (`Σ|x|`) or 2 (`sqrt(Σx²)`).
    pub p: u8,
}

/// ONNX LpNormalization: `y = x / ‖x‖_p` along the axis; a zero norm gives 0 (the
/// reference's `np.where(norm == 0, 0, x / norm)`), not NaN.
pub fn lp_norm<T: Elem>(p: &LpNorm, x: &[T], out: &mut [T]) {
    assert!(p.p == 1 || p.p == 2, "lp_norm: p = {}", p.p);
    assert_eq!(x.len(), p.outer * p.len * p.inner, "lp_norm: X");
    assert_eq!(out.len(), x.len(), "lp_norm: Y");
    for o in 0..p.outer {
        for i in 0..p.inner {
            let at = |j: usize| (o * p.len + j) * p.inner + i;
            let norm = if p.p == 1 {
                (0..p.len).map(|j| x[at(j)].to_f64().abs()).sum::<f64>()
            } else {
                (0..p.len)
                    .map(|j| {
                        let v = x[at(j)].to_f64();
                        v * v
                    })
                    .sum::<f64>()
                    .sqrt()
            };
            for j in 0..p.len {
                let y = if norm == 0.0 {
                    0.0
                } else {
                    x[at(j)].to_f64() / norm
                };
                out[at(j)] = T::from_f64(y);
            }
        }
    }
}

/// MeanVarianceNormalization over the dimensions marked in `reduced` (ONNX `axes`,
/// default `[0, 2, 3]`) of a `rank`-dimensional tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mvn {
    pub rank: usize,
    pub shape: [usize; RANK],
    pub reduced: [bool; RANK],
}

/// The ONNX function body's epsilon, added to the standard deviation.
const MVN_EPSILON: f64 = 1e-9;

/// ONNX MeanVarianceNormalization: `y = (x - mean) / (sqrt(var) + 1e-9)`, mean and
/// variance over the reduced dimensions. The function body computes the variance as
/// `E[x²] - E[x]²`, which can round below zero (NaN); here it is `E[(x - mean)²]`,
/// equal in exact arithmetic and never negative.
pub fn mean_variance_norm<T: Elem>(p: &Mvn, x: &[T], out: &mut [T]) {
    assert!(p.rank <= RANK, "mean_variance_norm: rank {}", p.rank);
    assert_eq!(
        x.len(),
        p.shape[..p.rank].iter().product::<usize>(),
        "mean_variance_norm: X"
    );
    assert_eq!(out.len(), x.len(), "mean_variance_norm: Y");
    if x.is_empty() {
        return;
    }
    let strides = strides_of(p.rank, &p.shape);
    // Split the dimensions into kept and reduced ones, each with its data strides.
    let (mut ks, mut kt, mut rs, mut rt) = ([1; RANK], [0; RANK], [1; RANK], [0; RANK]);
    let (mut kr, mut rr) = (0, 0);
    let dims = p.shape.iter().zip(&strides).zip(&p.reduced).take(p.rank);
    for ((&n, &s), &reduced) in dims {
        if reduced {
            (rs[rr], rt[rr]) = (n, s);
            rr += 1;
        } else {
            (ks[kr], kt[kr]) = (n, s);
            kr += 1;
        }
    }
    let groups: usize = ks[..kr].iter().product();
    let n: usize = rs[..rr].iter().product();
    let inv_n = 1.0 / n as f64;
    let mut kept = Odometer::new(kr, ks, kt);
    for _ in 0..groups {
        let base = kept.off;
        let mut walk = Odometer::new(rr, rs, rt);
        let mut sum = 0.0;
        for _ in 0..n {
            sum += x[base + walk.off].to_f64();
            walk.advance();
        }
        let mean = sum * inv_n;
        let mut sq = 0.0;
        for _ in 0..n {
            let d = x[base + walk.off].to_f64() - mean;
            sq += d * d;
            walk.advance();
        }
        let den = (sq * inv_n).sqrt() + MVN_EPSILON;
        for _ in 0..n {
            let at = base + walk.off;
            out[at] = T::from_f64((x[at].to_f64() - mean) / den);
            walk.advance();
        }
        kept.advance();
    }
}

/// RMSNormalization: `x` is `outer × len`, normalised over each row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RmsNorm {
    pub outer: usize,
    pub len: usize,
    pub epsilon: f32,
}

/// ONNX RMSNormalization (opset 23): `y = x / sqrt(mean(x²) + epsilon) · scale`, with
/// `scale` broadcast by the compiler to the `len` normalised elements.
pub fn rms_norm<T: Elem>(p: &RmsNorm, x: &[T], scale: &[T], out: &mut [T]) {
    assert_eq!(x.len(), p.outer * p.len, "rms_norm: X");
    assert_eq!(out.len(), x.len(), "rms_norm: Y");
    assert_eq!(scale.len(), p.len, "rms_norm: scale");
    if p.len == 0 {
        return;
    }
    let eps = p.epsilon as f64;
    for (x, y) in x.chunks_exact(p.len).zip(out.chunks_exact_mut(p.len)) {
        let ms = x.iter().map(|v| v.to_f64() * v.to_f64()).sum::<f64>() / p.len as f64;
        let inv = 1.0 / (ms + eps).sqrt();
        for ((y, &x), &s) in y.iter_mut().zip(x).zip(scale) {
            *y = T::from_f64(x.to_f64() * inv * s.to_f64());
        }
    }
}

/// Inference BatchNormalization over `n × c × inner` (the `f32` form is
/// `kernels::norm::batch_norm`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BatchNormT {
    pub n: usize,
    pub c: usize,
    pub inner: usize,
    pub epsilon: f32,
}

/// ONNX BatchNormalization in inference mode:
/// `y = scale · (x - mean) / sqrt(var + epsilon) + bias`, per channel.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm<T: Elem>(
    p: &BatchNormT,
    x: &[T],
    scale: &[T],
    bias: &[T],
    mean: &[T],
    var: &[T],
    out: &mut [T],
) {
    assert_eq!(x.len(), p.n * p.c * p.inner, "batch_norm: X");
    assert_eq!(out.len(), x.len(), "batch_norm: Y");
    for (name, v) in [
        ("scale", scale),
        ("bias", bias),
        ("mean", mean),
        ("var", var),
    ] {
        assert_eq!(v.len(), p.c, "batch_norm: {name}");
    }
    if p.inner == 0 {
        return;
    }
    let eps = p.epsilon as f64;
    for (r, (x, y)) in x
        .chunks_exact(p.inner)
        .zip(out.chunks_exact_mut(p.inner))
        .enumerate()
    {
        let c = r % p.c;
        let s = scale[c].to_f64() / (var[c].to_f64() + eps).sqrt();
        let (m, b) = (mean[c].to_f64(), bias[c].to_f64());
        for (y, &x) in y.iter_mut().zip(x) {
            *y = T::from_f64((x.to_f64() - m) * s + b);
        }
    }
}

/// LRN over `n × c × inner` (the `f32` form is `kernels::norm::lrn`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LrnT {
    pub n: usize,
    pub c: usize,
    pub inner: usize,
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub bias: f32,
}

/// ONNX LRN: `y = x / (bias + alpha / size · Σ x²)^beta`, the sum over channels
/// `c - floor((size-1)/2) ..= c + ceil((size-1)/2)` clipped to the tensor.
pub fn lrn<T: Elem>(p: &LrnT, x: &[T], out: &mut [T]) {
    assert!(p.size > 0, "lrn: size 0");
    assert_eq!(x.len(), p.n * p.c * p.inner, "lrn: X");
    assert_eq!(out.len(), x.len(), "lrn: Y");
    let before = (p.size - 1) / 2;
    let after = p.size / 2; // ceil((size - 1) / 2)
    let (alpha, beta, bias) = (p.alpha as f64 / p.size as f64, p.beta as f64, p.bias as f64);
    for b in 0..p.n {
        for c in 0..p.c {
            let (lo, hi) = (c.saturating_sub(before), (c + after).min(p.c - 1));
            for i in 0..p.inner {
                let at = |c: usize| (b * p.c + c) * p.inner + i;
                let sq: f64 = (lo..=hi)
                    .map(|c| {
                        let v = x[at(c)].to_f64();
                        v * v
                    })
                    .sum();
                out[at(c)] = T::from_f64(x[at(c)].to_f64() / (bias + alpha * sq).powf(beta));
            }
        }
    }
}
