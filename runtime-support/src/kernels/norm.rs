//! Normalisations: inference-time BatchNormalization, LRN and (Log)Softmax.

use super::elementwise::{Row, map_row};
use super::simd::{self, vectorize};
use crate::params::{BatchNorm, Lrn, Softmax};
use crate::threads;

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
    normalize(p, Some(x), [scale, bias, mean, var], y);
}

/// [`batch_norm`] with the input in `y`, overwritten by the result.
pub fn batch_norm_inplace(
    p: &BatchNorm,
    scale: &[f32],
    bias: &[f32],
    mean: &[f32],
    var: &[f32],
    y: &mut [f32],
) {
    normalize(p, None, [scale, bias, mean, var], y);
}

/// The body of both BatchNorm forms; `x` is `None` when it is `y` itself.
fn normalize(p: &BatchNorm, x: Option<&[f32]>, stats: [&[f32]; 4], y: &mut [f32]) {
    assert_eq!(y.len(), p.n * p.c * p.inner, "batch_norm: Y");
    for (name, v) in ["scale", "bias", "mean", "var"].into_iter().zip(stats) {
        assert_eq!(v.len(), p.c, "batch_norm: {name}");
    }
    if y.is_empty() {
        return;
    }
    let [scale, bias, mean, var] = stats;
    let x = Row::source(x);
    vectorize!({
        for (i, y) in y.chunks_exact_mut(p.inner).enumerate() {
            let c = i % p.c;
            let s = scale[c] / (var[c] + p.epsilon).sqrt();
            let t = bias[c] - mean[c] * s;
            map_row(y, x.sub(i * p.inner, p.inner), Row::Splat(t), |x, t| {
                x * s + t
            });
        }
    });
}

/// ONNX LRN: `y = x / (bias + alpha / size * sum of x^2 over the channels
/// c - floor((size-1)/2) ..= c + ceil((size-1)/2))^beta`.
pub fn lrn(p: &Lrn, x: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), p.n * p.c * p.inner, "lrn: X");
    lrn_channels(p, Some(x), y);
}

/// The largest `size` [`lrn_inplace`] takes: the channels it still needs after
/// overwriting them are kept in a fixed ring on the stack. ONNX models use 5.
pub const LRN_INPLACE_MAX_SIZE: usize = 16;

/// [`lrn`] with the input in `y`, overwritten by the result (`p.size` at most
/// [`LRN_INPLACE_MAX_SIZE`]). Channel `c` reads channels `c - before ..= c + after` at
/// its own position: those after `c` are still intact, and the original values of the
/// `before` channels already overwritten are kept in a ring, block of columns by block.
pub fn lrn_inplace(p: &Lrn, y: &mut [f32]) {
    assert!(
        p.size <= LRN_INPLACE_MAX_SIZE,
        "lrn_inplace: size {} over {LRN_INPLACE_MAX_SIZE}",
        p.size
    );
    lrn_channels(p, None, y);
}

/// Columns (spatial positions) of an image LRN processes together.
const LRN_BLOCK: usize = 256;
/// Rows of the in-place ring: the original values of channels `c - before .. c`, row
/// `channel % LRN_RING`.
const LRN_RING: usize = LRN_INPLACE_MAX_SIZE / 2;
const _: () = assert!((LRN_INPLACE_MAX_SIZE - 1) / 2 < LRN_RING);

/// The body of both LRN forms; `x` is `None` when it is `y` itself. Each image is
/// processed in blocks of [`LRN_BLOCK`] columns: for each channel the square sum over
/// its window is built in `acc`, then turned into the result.
fn lrn_channels(p: &Lrn, x: Option<&[f32]>, y: &mut [f32]) {
    assert_eq!(y.len(), p.n * p.c * p.inner, "lrn: Y");
    assert!(p.size > 0, "lrn: size 0");
    if y.is_empty() {
        return;
    }
    let (before, after) = ((p.size - 1) / 2, p.size / 2);
    let k = p.alpha / p.size as f32;
    let image = p.c * p.inner;
    let mut ring = [[0.0f32; LRN_BLOCK]; LRN_RING];
    let mut acc = [0.0f32; LRN_BLOCK];
    vectorize!({
        for (i, y) in y.chunks_exact_mut(image).enumerate() {
            let x = x.map(|x| &x[i * image..][..image]);
            for j0 in (0..p.inner).step_by(LRN_BLOCK) {
                let w = LRN_BLOCK.min(p.inner - j0);
                let at = |c: usize| c * p.inner + j0..c * p.inner + j0 + w;
                let acc = &mut acc[..w];
                for c in 0..p.c {
                    acc.fill(0.0);
                    for cc in c.saturating_sub(before)..(c + after + 1).min(p.c) {
                        let row = match x {
                            Some(x) => &x[at(cc)],
                            None if cc < c => &ring[cc % LRN_RING][..w],
                            None => &y[at(cc)],
                        };
                        for (a, &v) in acc.iter_mut().zip(row) {
                            *a += v * v;
                        }
                    }
                    let xc = match x {
                        Some(x) => &x[at(c)],
                        None => {
                            let saved = &mut ring[c % LRN_RING][..w];
                            saved.copy_from_slice(&y[at(c)]);
                            &*saved
                        }
                    };
                    for ((o, &v), &s) in y[at(c)].iter_mut().zip(xc).zip(acc.iter()) {
                        *o = v / (p.bias + k * s).powf(p.beta);
                    }
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
    softmax_rows(p, Some(x), y);
}

/// [`softmax`] with the input in `y`, overwritten by the result. Row-wise, so legal in
/// place: every row is read whole (its maximum and sum) before any of it is written,
/// and then each element is read only before it is written.
pub fn softmax_inplace(p: &Softmax, y: &mut [f32]) {
    softmax_rows(p, None, y);
}

/// The body of both forms; `x` is `None` when it is `y` itself.
fn softmax_rows(p: &Softmax, x: Option<&[f32]>, y: &mut [f32]) {
    assert_eq!(y.len(), p.outer * p.len * p.inner, "softmax: Y");
    if y.is_empty() {
        return;
    }
    let block = p.len * p.inner;
    // Rows are independent: with worker threads, each takes runs of whole rows (an
    // attention's 12 × 128 rows of 128: four runs a thread). Each element costs an
    // `exp` and four passes: weighed as 16 for the threshold.
    let runs = threads::current() * 4;
    let rows = p.outer.div_ceil(runs).max(1);
    let work = y.len() * 16;
    let parts = y.chunks_mut(rows * block).enumerate();
    threads::for_each(parts, work, |(part, y)| {
        let first = part * rows;
        vectorize!({
            for (k, y) in y.chunks_exact_mut(block).enumerate() {
                let x = x.map(|x| &x[(first + k) * block..][..block]);
                if p.inner == 1 {
                    softmax_row(x, y, p.log);
                } else {
                    for i0 in (0..p.inner).step_by(LANES) {
                        softmax_columns(p, x, y, i0, LANES.min(p.inner - i0));
                    }
                }
            }
        })
    });
}

/// Columns processed together when the softmax axis is not innermost.
const LANES: usize = 64;

/// Softmax of one contiguous row `x` (`None`: `y` itself) into `y`.
///
/// Log-softmax never stores `exp`: it sums it on the fly and then reads `x` once more,
/// which must still be intact when `x` is `y`.
#[inline(always)]
fn softmax_row(x: Option<&[f32]>, y: &mut [f32], log: bool) {
    let m = simd::max(x.unwrap_or(&*y));
    if log {
        let s = simd::sum_of(x.unwrap_or(&*y), |v| simd::exp(v - m));
        let shift = m + s.ln();
        map_row(y, Row::source(x), Row::Splat(shift), |v, shift| v - shift);
    } else {
        simd::map_vectors(simd::VectorMap::Exp, -m, x, y);
        let r = 1.0 / simd::sum(y);
        for y in y {
            *y *= r;
        }
    }
}

/// Softmax of columns `i0 .. i0 + w` of the `len × inner` block `x` (`None`: `y`
/// itself), down each column. As in [`softmax_row`], log-softmax stores no `exp`.
#[inline(always)]
fn softmax_columns(p: &Softmax, x: Option<&[f32]>, y: &mut [f32], i0: usize, w: usize) {
    let mut max = [f32::NEG_INFINITY; LANES];
    let mut sum = [0.0f32; LANES];
    let (max, sum) = (&mut max[..w], &mut sum[..w]);
    let rows = |j: usize| i0 + j * p.inner..i0 + j * p.inner + w;
    for j in 0..p.len {
        for (m, &v) in max.iter_mut().zip(&x.unwrap_or(&*y)[rows(j)]) {
            *m = m.max(v);
        }
    }
    for j in 0..p.len {
        if p.log {
            let x = &x.unwrap_or(&*y)[rows(j)];
            for ((&v, &m), s) in x.iter().zip(max.iter()).zip(sum.iter_mut()) {
                *s += simd::exp(v - m);
            }
        } else {
            // One fused loop per form: a generic map then a separate sum, or an
            // indexed read of the source, ran 40 % slower.
            let (y, max, sum) = (&mut y[rows(j)], &max[..w], &mut sum[..w]);
            match x {
                Some(x) => {
                    for (((y, &v), &m), s) in y.iter_mut().zip(&x[rows(j)]).zip(max).zip(sum) {
                        *y = simd::exp(v - m);
                        *s += *y;
                    }
                }
                None => {
                    for ((y, &m), s) in y.iter_mut().zip(max).zip(sum) {
                        *y = simd::exp(*y - m);
                        *s += *y;
                    }
                }
            }
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
        let y = &mut y[rows(j)];
        if p.log {
            let x = x.map(|x| &x[rows(j)]);
            map_run(x, y, max, |v, m| v - m);
        } else {
            for (y, &r) in y.iter_mut().zip(sum.iter()) {
                *y *= r;
            }
        }
    }
}

/// `y[i] = f(v, e[i])` over a short run, `v` being `x[i]`, or `y[i]` itself when `x`
/// is `None` (in place). Plain zipped loops: on runs of 64, [`map_row`]'s set-up per
/// call costs as much as the loop.
#[inline(always)]
fn map_run(x: Option<&[f32]>, y: &mut [f32], e: &[f32], f: impl Fn(f32, f32) -> f32) {
    match x {
        Some(x) => {
            for ((y, &v), &e) in y.iter_mut().zip(x).zip(e) {
                *y = f(v, e);
            }
        }
        None => {
            for (y, &e) in y.iter_mut().zip(e) {
                *y = f(*y, e);
            }
        }
    }
}
