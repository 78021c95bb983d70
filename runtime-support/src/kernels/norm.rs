//! Normalisations: inference-time BatchNormalization, LRN and (Log)Softmax.

use super::simd::{self, vectorize};
use crate::params::{BatchNorm, Lrn, Softmax};

/// `y = scale * (x - mean) / sqrt(var + eps) + bias`, folded per channel into one
/// multiply-add: `y = x * s + t`.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    p: &BatchNorm,
    x: &[f32],
    scale: &[f32],
    bias: &[f32],
    mean: &[f32],
    var: &[f32],
    y: &mut [f32],
) {
    assert_eq!(x.len(), p.n * p.c * p.inner, "batch_norm: X");
    assert_eq!(y.len(), x.len(), "batch_norm: Y");
    for (name, v) in [
        ("scale", scale),
        ("bias", bias),
        ("mean", mean),
        ("var", var),
    ] {
        assert_eq!(v.len(), p.c, "batch_norm: {name}");
    }
    if y.is_empty() {
        return;
    }
    vectorize!({
        let blocks = x.chunks_exact(p.inner).zip(y.chunks_exact_mut(p.inner));
        for (i, (x, y)) in blocks.enumerate() {
            let c = i % p.c;
            let s = scale[c] / (var[c] + p.epsilon).sqrt();
            let t = bias[c] - mean[c] * s;
            for (y, &x) in y.iter_mut().zip(x) {
                *y = x * s + t;
            }
        }
    });
}

/// ONNX LRN: `y = x / (bias + alpha / size * sum of x^2 over the channels
/// c - floor((size-1)/2) ..= c + ceil((size-1)/2))^beta`. Each channel's square sum is
/// built in its own output plane, then turned into the result in place.
pub fn lrn(p: &Lrn, x: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), p.n * p.c * p.inner, "lrn: X");
    assert_eq!(y.len(), x.len(), "lrn: Y");
    assert!(p.size > 0, "lrn: size 0");
    if y.is_empty() {
        return;
    }
    let (before, after) = ((p.size - 1) / 2, p.size / 2);
    let k = p.alpha / p.size as f32;
    vectorize!({
        let images = x
            .chunks_exact(p.c * p.inner)
            .zip(y.chunks_exact_mut(p.c * p.inner));
        for (x, y) in images {
            for (c, out) in y.chunks_exact_mut(p.inner).enumerate() {
                out.fill(0.0);
                let channels = c.saturating_sub(before)..(c + after + 1).min(p.c);
                for plane in
                    x[channels.start * p.inner..channels.end * p.inner].chunks_exact(p.inner)
                {
                    for (o, &v) in out.iter_mut().zip(plane) {
                        *o += v * v;
                    }
                }
                let xc = &x[c * p.inner..][..p.inner];
                for (o, &v) in out.iter_mut().zip(xc) {
                    *o = v / (p.bias + k * *o).powf(p.beta);
                }
            }
        }
    });
}

/// Softmax (or LogSoftmax when `p.log`) over an axis of `len` elements spaced `inner`
/// apart, numerically stable (the row maximum is subtracted before `exp`).
///
/// With `inner == 1` each row is contiguous and is reduced along itself; otherwise the
/// `inner` independent rows are processed side by side in blocks of 64 columns,
/// so every loop still runs over contiguous memory.
pub fn softmax(p: &Softmax, x: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), p.outer * p.len * p.inner, "softmax: X");
    assert_eq!(y.len(), x.len(), "softmax: Y");
    if y.is_empty() {
        return;
    }
    vectorize!({
        let blocks = x
            .chunks_exact(p.len * p.inner)
            .zip(y.chunks_exact_mut(p.len * p.inner));
        for (x, y) in blocks {
            if p.inner == 1 {
                softmax_row(x, y, p.log);
            } else {
                for i0 in (0..p.inner).step_by(LANES) {
                    softmax_columns(p, x, y, i0, LANES.min(p.inner - i0));
                }
            }
        }
    });
}

/// Columns processed together when the softmax axis is not innermost.
const LANES: usize = 64;

/// Softmax of one contiguous row.
#[inline(always)]
fn softmax_row(x: &[f32], y: &mut [f32], log: bool) {
    let m = simd::max(x);
    for (y, &x) in y.iter_mut().zip(x) {
        *y = simd::exp(x - m);
    }
    let s = simd::sum(y);
    if log {
        let shift = m + s.ln();
        for (y, &x) in y.iter_mut().zip(x) {
            *y = x - shift;
        }
    } else {
        let r = 1.0 / s;
        for y in y {
            *y *= r;
        }
    }
}

/// Softmax of columns `i0 .. i0 + w` of the `len × inner` block `x`, down each column.
#[inline(always)]
fn softmax_columns(p: &Softmax, x: &[f32], y: &mut [f32], i0: usize, w: usize) {
    let mut max = [f32::NEG_INFINITY; LANES];
    let mut sum = [0.0f32; LANES];
    let (max, sum) = (&mut max[..w], &mut sum[..w]);
    let rows = |j: usize| i0 + j * p.inner..i0 + j * p.inner + w;
    for j in 0..p.len {
        for (m, &v) in max.iter_mut().zip(&x[rows(j)]) {
            *m = m.max(v);
        }
    }
    for j in 0..p.len {
        let (x, y) = (&x[rows(j)], &mut y[rows(j)]);
        for ((y, &v), (&m, s)) in y.iter_mut().zip(x).zip(max.iter().zip(sum.iter_mut())) {
            *y = simd::exp(v - m);
            *s += *y;
        }
    }
    // Turn the sums into what the last pass applies: the log-sum shift, or 1/sum.
    for (m, s) in max.iter_mut().zip(sum.iter_mut()) {
        if p.log {
            *m += s.ln();
        } else {
            *s = 1.0 / *s;
        }
    }
    for j in 0..p.len {
        let (x, y) = (&x[rows(j)], &mut y[rows(j)]);
        for ((y, &v), (&m, &r)) in y.iter_mut().zip(x).zip(max.iter().zip(sum.iter())) {
            *y = if p.log { v - m } else { *y * r };
        }
    }
}
