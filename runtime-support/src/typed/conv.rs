//! Convolution and pooling over any number of spatial dimensions and any element type,
//! and the quantized operators built on them: a direct (gather) formulation, so nothing
//! needs working memory and nothing allocates. The rank-4 float32 models keep the tuned
//! kernels of `kernels::conv` / `kernels::pool`; these serve everything else (1-D, 3-D,
//! float16/float64/integer data, ConvTranspose, LpPool, MaxPool's indices, MaxUnpool,
//! QuantizeLinear and friends).
//!
//! Tensors are `[N, C, spatial..]`, row-major. Floats accumulate in `f64` and round
//! once to their type; integer convolutions accumulate in `i64` (exact for the 8-bit
//! operands ONNX gives them). Shapes were checked by the compiler: a slice of the wrong
//! length is a compiler bug and asserts; indices read at run time (MaxUnpool) return
//! `Err(Error::IndexOutOfRange)`.

use core::ops::{Add, Mul};

use super::elem::{Elem, sigmoid};
use super::params::{MatMul, RANK};
use crate::Error;
use serde::Serialize;

/// An activation the fusion pass folded into a convolution (float32 only).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum ConvActivation {
    None,
    Relu,
    LeakyRelu { alpha: f32 },
    Clip { min: f32, max: f32 },
    Sigmoid,
    HardSigmoid { alpha: f32, beta: f32 },
    HardSwish,
    Swish { alpha: f32 },
}

impl ConvActivation {
    #[inline]
    fn apply(self, v: f64) -> f64 {
        match self {
            ConvActivation::None => v,
            ConvActivation::Relu => {
                if v < 0.0 {
                    0.0
                } else {
                    v
                }
            }
            ConvActivation::LeakyRelu { alpha } => {
                if v < 0.0 {
                    v * alpha as f64
                } else {
                    v
                }
            }
            ConvActivation::Clip { min, max } => v.max(min as f64).min(max as f64),
            ConvActivation::HardSigmoid { alpha, beta } => {
                (alpha as f64 * v + beta as f64).clamp(0.0, 1.0)
            }
            ConvActivation::HardSwish => v * (v / 6.0 + 0.5).clamp(0.0, 1.0),
            ConvActivation::Swish { alpha } => v * sigmoid(alpha as f64 * v),
            ConvActivation::Sigmoid => sigmoid(v),
        }
    }
}

/// The geometry of a convolution over `dims` spatial dimensions (the first `dims`
/// entries of each array are used). For [`conv_nd`]: input `[n, c_in, in_shape..]`,
/// weight `[c_out, c_in / group, kernel..]`, output `[n, c_out, out_shape..]`, output
/// position `o` reads input `o·stride + k·dilation − pad`. For [`conv_transpose`]:
/// input `[n, c_in, in_shape..]`, weight `[c_in, c_out / group, kernel..]`, and input
/// position `i` adds into output `i·stride + k·dilation − pad`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConvGeom {
    pub n: usize,
    pub c_in: usize,
    pub c_out: usize,
    pub group: usize,
    pub dims: usize,
    pub in_shape: [usize; RANK],
    pub out_shape: [usize; RANK],
    pub kernel: [usize; RANK],
    pub strides: [usize; RANK],
    pub dilations: [usize; RANK],
    /// Padding before each spatial dimension (negative for ConvTranspose crops).
    pub pads: [isize; RANK],
}

impl ConvGeom {
    fn plane(&self, shape: &[usize; RANK]) -> usize {
        shape[..self.dims].iter().product()
    }
    fn in_len(&self) -> usize {
        self.n * self.c_in * self.plane(&self.in_shape)
    }
    fn out_len(&self) -> usize {
        self.n * self.c_out * self.plane(&self.out_shape)
    }
}

/// Parameters of [`conv_nd`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ConvNd {
    pub geom: ConvGeom,
    pub activation: ConvActivation,
}

/// Parameters of [`conv_integer`]: `w_zp_per_channel` when the weight's zero point has
/// one entry per output channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConvInteger {
    pub geom: ConvGeom,
    pub w_zp_per_channel: bool,
}

/// Parameters of [`qlinear_conv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QLinearConv {
    pub geom: ConvGeom,
    pub w_scale_per_channel: bool,
    pub w_zp_per_channel: bool,
}

/// Row-major strides of the first `dims` entries of `shape`.
fn strides_of(dims: usize, shape: &[usize; RANK]) -> [usize; RANK] {
    let mut s = [0; RANK];
    let mut step = 1;
    for d in (0..dims).rev() {
        s[d] = step;
        step *= shape[d];
    }
    s
}

/// Advances the odometer `idx` over `lo[d]..hi[d]` for `d < dims`; false when done.
#[inline]
fn next(idx: &mut [usize; RANK], lo: &[usize; RANK], hi: &[usize; RANK], dims: usize) -> bool {
    let mut d = dims;
    while d > 0 {
        d -= 1;
        idx[d] += 1;
        if idx[d] < hi[d] {
            return true;
        }
        idx[d] = lo[d];
    }
    false
}

/// The kernel taps `lo..hi` along one axis whose input position `start + k·dil` lies
/// in `0..len`.
#[inline]
fn tap_range(start: isize, dil: usize, kernel: usize, len: usize) -> (usize, usize) {
    let dil = dil as isize;
    let lo = if start >= 0 {
        0
    } else {
        ((-start) + dil - 1) / dil
    };
    let end = len as isize - start; // positions k·dil < end
    let hi = if end <= 0 {
        0
    } else {
        ((end + dil - 1) / dil).min(kernel as isize)
    };
    (lo as usize, (hi.max(lo)) as usize)
}

/// An accumulator: `f64` for floats, `i64` for integers.
trait Acc: Copy + Default + Add<Output = Self> + Mul<Output = Self> {}
impl Acc for f64 {}
impl Acc for i64 {}

/// The direct convolution: `emit(out_index, co, Σ xv(x)·wv(w, co))` for every output
/// element, where the sum runs over the taps inside the input (padding adds nothing).
fn conv_direct<X: Copy, W: Copy, A: Acc>(
    g: &ConvGeom,
    x: &[X],
    w: &[W],
    xv: impl Fn(X) -> A,
    wv: impl Fn(W, usize) -> A,
    mut emit: impl FnMut(usize, usize, A),
) {
    let d = g.dims.min(RANK);
    let in_plane = g.plane(&g.in_shape);
    let out_plane = g.plane(&g.out_shape);
    let ksize = g.plane(&g.kernel);
    let group = g.group.max(1);
    let (cg_in, cg_out) = (g.c_in / group, (g.c_out / group).max(1));
    assert_eq!(x.len(), g.in_len(), "conv: X");
    assert_eq!(w.len(), g.c_out * cg_in * ksize, "conv: W");
    if out_plane == 0 {
        return;
    }
    let in_strides = strides_of(d, &g.in_shape);
    let k_strides = strides_of(d, &g.kernel);
    let zero = [0usize; RANK];
    let mut out_hi = [1usize; RANK];
    out_hi[..d].copy_from_slice(&g.out_shape[..d]);
    let mut out_index = 0;
    for n in 0..g.n {
        for co in 0..g.c_out {
            let grp = co / cg_out;
            let x_base = (n * g.c_in + grp * cg_in) * in_plane;
            let w_base = co * cg_in * ksize;
            let mut o = [0usize; RANK];
            loop {
                let mut acc = A::default();
                let mut lo = [0usize; RANK];
                let mut hi = [1usize; RANK];
                let mut start = [0isize; RANK];
                let mut empty = false;
                for j in 0..d {
                    start[j] = (o[j] * g.strides[j]) as isize - g.pads[j];
                    let (l, h) = tap_range(start[j], g.dilations[j], g.kernel[j], g.in_shape[j]);
                    lo[j] = l;
                    hi[j] = h;
                    empty |= l >= h;
                }
                if !empty && cg_in > 0 {
                    let mut k = lo;
                    loop {
                        let mut xo = 0usize;
                        let mut wo = 0usize;
                        for j in 0..d {
                            xo += (start[j] + (k[j] * g.dilations[j]) as isize) as usize
                                * in_strides[j];
                            wo += k[j] * k_strides[j];
                        }
                        for ci in 0..cg_in {
                            acc = acc
                                + xv(x[x_base + ci * in_plane + xo])
                                    * wv(w[w_base + ci * ksize + wo], co);
                        }
                        if !next(&mut k, &lo, &hi, d) {
                            break;
                        }
                    }
                }
                emit(out_index, co, acc);
                out_index += 1;
                if !next(&mut o, &zero, &out_hi, d) {
                    break;
                }
            }
        }
    }
}

/// ONNX Conv over `p.geom.dims` spatial dimensions with a bias (`b`, one value per
/// output channel; the compiler passes zeros when the model has none) and the fused
/// activation.
pub fn conv_nd<T: Elem>(p: &ConvNd, x: &[T], w: &[T], b: &[T], y: &mut [T]) {
    let g = &p.geom;
    assert_eq!(b.len(), g.c_out, "conv: B");
    assert_eq!(y.len(), g.out_len(), "conv: Y");
    conv_direct(
        g,
        x,
        w,
        |v: T| v.to_f64(),
        |v: T, _| v.to_f64(),
        |i, co, acc: f64| y[i] = T::from_f64(p.activation.apply(acc + b[co].to_f64())),
    );
}

/// ONNX ConvInteger: `(x − x_zp) ⊛ (w − w_zp)` in `i32` (wrapping). `x_zp` has one
/// element, `w_zp` one or (per channel) `c_out`; padding contributes nothing.
pub fn conv_integer<X: Elem, W: Elem>(
    p: &ConvInteger,
    x: &[X],
    w: &[W],
    x_zp: &[X],
    w_zp: &[W],
    y: &mut [i32],
) {
    let g = &p.geom;
    assert_eq!(y.len(), g.out_len(), "conv_integer: Y");
    let xz = x_zp.first().map_or(0, |v| v.to_i64());
    let wz = |co: usize| zp_at(w_zp, p.w_zp_per_channel, co);
    conv_direct(
        g,
        x,
        w,
        |v: X| v.to_i64() - xz,
        |v: W, co| v.to_i64() - wz(co),
        |i, _, acc: i64| y[i] = acc as i32,
    );
}

fn zp_at<Z: Elem>(zp: &[Z], per_channel: bool, c: usize) -> i64 {
    let k = if per_channel { c } else { 0 };
    zp.get(k).map_or(0, |v| v.to_i64())
}

/// ONNX QLinearConv: the integer convolution of ConvInteger plus `b` (`i32`, one per
/// output channel; zeros when absent), scaled by `x_scale·w_scale/y_scale` (computed in
/// `f32`, applied in `f64`), plus `y_zp`, rounded half to even and saturated to `Y`.
#[allow(clippy::too_many_arguments)]
pub fn qlinear_conv<X: Elem, W: Elem, Y: Elem>(
    p: &QLinearConv,
    x: &[X],
    x_scale: &[f32],
    x_zp: &[X],
    w: &[W],
    w_scale: &[f32],
    w_zp: &[W],
    y_scale: &[f32],
    y_zp: &[Y],
    b: &[i32],
    y: &mut [Y],
) {
    let g = &p.geom;
    assert_eq!(y.len(), g.out_len(), "qlinear_conv: Y");
    assert_eq!(b.len(), g.c_out, "qlinear_conv: B");
    let xz = x_zp.first().map_or(0, |v| v.to_i64());
    let xs = x_scale.first().copied().unwrap_or(1.0);
    let ys = y_scale.first().copied().unwrap_or(1.0);
    let yz = y_zp.first().map_or(0.0, |v| v.to_f64());
    let (qmin, qmax) = (Y::min_value().to_f64(), Y::max_value().to_f64());
    conv_direct(
        g,
        x,
        w,
        |v: X| v.to_i64() - xz,
        |v: W, co| v.to_i64() - zp_at(w_zp, p.w_zp_per_channel, co),
        |i, co, acc: i64| {
            let ws = w_scale[if p.w_scale_per_channel { co } else { 0 }];
            let factor = (xs * ws / ys) as f64;
            let r = (acc.wrapping_add(b[co] as i64) as i32) as f64 * factor + yz;
            y[i] = Y::from_f64(r.round_ties_even().clamp(qmin, qmax));
        },
    );
}

/// Parameters of [`conv_transpose`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConvTransposeNd {
    pub geom: ConvGeom,
}

/// ONNX ConvTranspose, as a gather: output position `o` sums `x[i]·w[k]` over every
/// input position `i` and tap `k` with `i·stride + k·dilation − pad = o`, plus the
/// bias `b` (one per output channel; zeros when absent).
pub fn conv_transpose<T: Elem>(p: &ConvTransposeNd, x: &[T], w: &[T], b: &[T], y: &mut [T]) {
    let g = &p.geom;
    let d = g.dims.min(RANK);
    let in_plane = g.plane(&g.in_shape);
    let out_plane = g.plane(&g.out_shape);
    let ksize = g.plane(&g.kernel);
    let group = g.group.max(1);
    let (cg_in, cg_out) = (g.c_in / group, g.c_out / group);
    assert_eq!(x.len(), g.in_len(), "conv_transpose: X");
    assert_eq!(w.len(), g.c_in * cg_out * ksize, "conv_transpose: W");
    assert_eq!(b.len(), g.c_out, "conv_transpose: B");
    assert_eq!(y.len(), g.out_len(), "conv_transpose: Y");
    if out_plane == 0 || cg_out == 0 {
        return;
    }
    let in_strides = strides_of(d, &g.in_shape);
    let k_strides = strides_of(d, &g.kernel);
    let zero = [0usize; RANK];
    let mut out_hi = [1usize; RANK];
    out_hi[..d].copy_from_slice(&g.out_shape[..d]);
    let mut kernel_hi = [1usize; RANK];
    kernel_hi[..d].copy_from_slice(&g.kernel[..d]);
    let mut out_index = 0;
    for n in 0..g.n {
        for (co, bias) in b.iter().enumerate() {
            let grp = co / cg_out;
            let m = co % cg_out;
            let x_base = (n * g.c_in + grp * cg_in) * in_plane;
            let mut o = [0usize; RANK];
            loop {
                let mut acc = bias.to_f64();
                let mut k = [0usize; RANK];
                if ksize > 0 {
                    loop {
                        // The input position feeding output `o` through tap `k`, if any.
                        let mut xo = 0usize;
                        let mut hit = true;
                        for j in 0..d {
                            let t = o[j] as isize + g.pads[j] - (k[j] * g.dilations[j]) as isize;
                            let s = g.strides[j] as isize;
                            if t < 0 || t % s != 0 || t / s >= g.in_shape[j] as isize {
                                hit = false;
                                break;
                            }
                            xo += (t / s) as usize * in_strides[j];
                        }
                        if hit {
                            let mut wo = m * ksize;
                            for j in 0..d {
                                wo += k[j] * k_strides[j];
                            }
                            for ci in 0..cg_in {
                                let xv = x[x_base + ci * in_plane + xo].to_f64();
                                let wv = w[(grp * cg_in + ci) * cg_out * ksize + wo].to_f64();
                                acc += xv * wv;
                            }
                        }
                        if !next(&mut k, &zero, &kernel_hi, d) {
                            break;
                        }
                    }
                }
                y[out_index] = T::from_f64(acc);
                out_index += 1;
                if !next(&mut o, &zero, &out_hi, d) {
                    break;
                }
            }
        }
    }
}

/// What a pooling window computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PoolOp {
    /// The largest tap inside the input (the type's least value for a window wholly in
    /// the padding).
    Max,
    /// The sum of the taps inside the input divided by the taps inside the input
    /// (`count_include_pad = false`) or inside the input and its pads (`true`).
    Average { count_include_pad: bool },
    /// `(K · Σ|x|^p / taps inside the padded input)^(1/p)` with `K` the kernel's size,
    /// as the ONNX reference computes LpPool (`(Σ|x|^p)^(1/p)` unless a `ceil_mode`
    /// window runs past the pads).
    Lp { p: i32 },
}

/// Parameters of [`pool`] and [`max_pool_indices`]: `planes = N·C` planes of
/// `in_shape` pooled to `out_shape`, output position `o` reading input
/// `o·stride + k·dilation − pads_begin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PoolNd {
    pub op: PoolOp,
    pub planes: usize,
    pub dims: usize,
    pub in_shape: [usize; RANK],
    pub out_shape: [usize; RANK],
    pub kernel: [usize; RANK],
    pub strides: [usize; RANK],
    pub dilations: [usize; RANK],
    pub pads_begin: [usize; RANK],
    pub pads_end: [usize; RANK],
    /// For [`max_pool_indices`]: indices count the plane in column-major order
    /// (`storage_order = 1`).
    pub column_major: bool,
}

/// Walks every output position of one plane: `f(out_index_in_plane, starts, lo, hi)`
/// with each axis's first input position and its range of taps inside the input.
fn pool_windows(
    p: &PoolNd,
    mut f: impl FnMut(usize, &[isize; RANK], &[usize; RANK], &[usize; RANK], &[usize; RANK]),
) {
    let d = p.dims.min(RANK);
    let zero = [0usize; RANK];
    let mut out_hi = [1usize; RANK];
    out_hi[..d].copy_from_slice(&p.out_shape[..d]);
    let mut o = [0usize; RANK];
    let mut index = 0;
    loop {
        let mut lo = [0usize; RANK];
        let mut hi = [1usize; RANK];
        let mut start = [0isize; RANK];
        for j in 0..d {
            start[j] = (o[j] * p.strides[j]) as isize - p.pads_begin[j] as isize;
            let (l, h) = tap_range(start[j], p.dilations[j], p.kernel[j], p.in_shape[j]);
            lo[j] = l;
            hi[j] = h;
        }
        f(index, &start, &lo, &hi, &o);
        index += 1;
        if !next(&mut o, &zero, &out_hi, d) {
            break;
        }
    }
}

/// Taps of output `o` along axis `j` inside the input and its pads.
fn taps_padded(p: &PoolNd, j: usize, o: usize) -> usize {
    let limit = p.in_shape[j] + p.pads_begin[j] + p.pads_end[j];
    let first = o * p.strides[j];
    (0..p.kernel[j])
        .filter(|&k| first + k * p.dilations[j] < limit)
        .count()
}

/// Calls `f(offset_in_plane, position)` for every tap inside the input.
#[inline]
fn for_taps(
    p: &PoolNd,
    in_strides: &[usize; RANK],
    start: &[isize; RANK],
    lo: &[usize; RANK],
    hi: &[usize; RANK],
    mut f: impl FnMut(usize, &[usize; RANK]),
) {
    let d = p.dims.min(RANK);
    if (0..d).any(|j| lo[j] >= hi[j]) {
        return;
    }
    let mut k = *lo;
    loop {
        let mut off = 0usize;
        let mut pos = [0usize; RANK];
        for j in 0..d {
            pos[j] = (start[j] + (k[j] * p.dilations[j]) as isize) as usize;
            off += pos[j] * in_strides[j];
        }
        f(off, &pos);
        if !next(&mut k, lo, hi, d) {
            break;
        }
    }
}

fn plane_lens(p: &PoolNd) -> (usize, usize) {
    let d = p.dims.min(RANK);
    (
        p.in_shape[..d].iter().product(),
        p.out_shape[..d].iter().product(),
    )
}

/// ONNX MaxPool, AveragePool and LpPool over `p.dims` spatial dimensions.
pub fn pool<T: Elem>(p: &PoolNd, x: &[T], y: &mut [T]) {
    let (in_plane, out_plane) = plane_lens(p);
    assert_eq!(x.len(), p.planes * in_plane, "pool: X");
    assert_eq!(y.len(), p.planes * out_plane, "pool: Y");
    if out_plane == 0 {
        return;
    }
    let d = p.dims.min(RANK);
    let in_strides = strides_of(d, &p.in_shape);
    let ksize: usize = p.kernel[..d].iter().product();
    for q in 0..p.planes {
        let xp = &x[q * in_plane..(q + 1) * in_plane];
        let yp = &mut y[q * out_plane..(q + 1) * out_plane];
        pool_windows(p, |i, start, lo, hi, o| {
            yp[i] = match p.op {
                PoolOp::Max => {
                    let mut best: Option<T> = None;
                    for_taps(p, &in_strides, start, lo, hi, |off, _| {
                        let v = xp[off];
                        if best.is_none_or(|b| v > b) {
                            best = Some(v);
                        }
                    });
                    best.unwrap_or_else(T::min_value)
                }
                PoolOp::Average { count_include_pad } => {
                    let mut sum = 0.0;
                    let mut taps = 0usize;
                    for_taps(p, &in_strides, start, lo, hi, |off, _| {
                        sum += xp[off].to_f64();
                        taps += 1;
                    });
                    let count = if count_include_pad {
                        (0..d).map(|j| taps_padded(p, j, o[j])).product()
                    } else {
                        taps
                    };
                    if count == 0 {
                        T::zero()
                    } else {
                        T::from_f64(sum / count as f64)
                    }
                }
                PoolOp::Lp { p: power } => {
                    let mut sum = 0.0;
                    for_taps(p, &in_strides, start, lo, hi, |off, _| {
                        sum += xp[off].to_f64().abs().powi(power);
                    });
                    let count: usize = (0..d).map(|j| taps_padded(p, j, o[j])).product();
                    let mean = if count == 0 { 0.0 } else { sum / count as f64 };
                    T::from_f64((ksize as f64 * mean).powf(1.0 / power as f64))
                }
            };
        });
    }
}

/// ONNX MaxPool with its Indices output: the flat index (over the whole input, the
/// plane's offset included) of each window's first largest tap; within a plane
/// row-major, or column-major when `p.column_major`. A window wholly in the padding
/// gives the type's least value and index -1.
pub fn max_pool_indices<T: Elem>(p: &PoolNd, x: &[T], y: &mut [T], indices: &mut [i64]) {
    let (in_plane, out_plane) = plane_lens(p);
    assert_eq!(x.len(), p.planes * in_plane, "max_pool_indices: X");
    assert_eq!(y.len(), p.planes * out_plane, "max_pool_indices: Y");
    assert_eq!(indices.len(), y.len(), "max_pool_indices: Indices");
    if out_plane == 0 {
        return;
    }
    let d = p.dims.min(RANK);
    let in_strides = strides_of(d, &p.in_shape);
    let mut col_strides = [0usize; RANK];
    let mut step = 1;
    for (cs, &len) in col_strides.iter_mut().zip(&p.in_shape).take(d) {
        *cs = step;
        step *= len;
    }
    for q in 0..p.planes {
        let xp = &x[q * in_plane..(q + 1) * in_plane];
        let base = q * out_plane;
        pool_windows(p, |i, start, lo, hi, _| {
            let mut best: Option<(T, i64)> = None;
            for_taps(p, &in_strides, start, lo, hi, |off, pos| {
                let v = xp[off];
                if best.is_none_or(|(b, _)| v > b) {
                    let within = if p.column_major {
                        (0..d).map(|j| pos[j] * col_strides[j]).sum()
                    } else {
                        off
                    };
                    best = Some((v, (q * in_plane + within) as i64));
                }
            });
            let (v, k) = best.unwrap_or((T::min_value(), -1));
            y[base + i] = v;
            indices[base + i] = k;
        });
    }
}

/// Parameters of [`max_unpool`]: `inferred` is the shape the indices address (ONNX's
/// default output shape), `out_shape` the output's; both of `rank` dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MaxUnpool {
    pub rank: usize,
    pub inferred: [usize; RANK],
    pub out_shape: [usize; RANK],
}

/// ONNX MaxUnpool (as the reference computes it): zeros, then each `x[e]` written at the
/// position `indices[e]` names in a tensor of shape `inferred`, that tensor lying in
/// the output's leading corner (positions outside the output are dropped).
pub fn max_unpool<T: Elem>(
    p: &MaxUnpool,
    x: &[T],
    indices: &[i64],
    y: &mut [T],
) -> Result<(), Error> {
    let r = p.rank.min(RANK);
    let total: usize = p.inferred[..r].iter().product();
    assert_eq!(x.len(), indices.len(), "max_unpool: indices");
    assert_eq!(y.len(), p.out_shape[..r].iter().product(), "max_unpool: Y");
    y.fill(T::zero());
    let out_strides = strides_of(r, &p.out_shape);
    for (&v, &ix) in x.iter().zip(indices) {
        if ix < 0 || ix as u64 >= total as u64 {
            return Err(Error::IndexOutOfRange {
                index: ix,
                len: total,
            });
        }
        let mut rest = ix as usize;
        let mut off = 0usize;
        let mut inside = true;
        for j in (0..r).rev() {
            let c = rest % p.inferred[j];
            rest /= p.inferred[j];
            inside &= c < p.out_shape[j];
            off += c * out_strides[j];
        }
        if inside {
            y[off] = v;
        }
    }
    Ok(())
}

/// Where the scale and zero point of each element come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum QuantMode {
    /// One scale for the whole tensor.
    Tensor,
    /// One per position along the axis.
    Axis,
    /// Shape of the input with the axis divided into blocks of `size`.
    Block { size: usize },
}

/// The floating type an ONNX computation rounds through (NumPy's promotion of the
/// operands' types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Precision {
    F64,
    F32,
    F16,
    BF16,
}

impl Precision {
    #[inline]
    fn round(self, v: f64) -> f64 {
        match self {
            Precision::F64 => v,
            Precision::F32 => v as f32 as f64,
            Precision::F16 => half::f16::from_f64(v).to_f64(),
            Precision::BF16 => half::bf16::from_f64(v).to_f64(),
        }
    }
}

/// Parameters of [`quantize_linear`] and [`dequantize_linear`]: the input viewed as
/// `[outer, len, inner]` around the quantization axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Quantize {
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    pub mode: QuantMode,
    /// The type `x / scale` rounds to (quantize only).
    pub precision: Precision,
}

/// Calls `f(flat index, scale index)` for every element.
#[inline]
fn for_quant(p: &Quantize, mut f: impl FnMut(usize, usize)) {
    let mut e = 0;
    for o in 0..p.outer {
        for a in 0..p.len {
            for i in 0..p.inner {
                let s = match p.mode {
                    QuantMode::Tensor => 0,
                    QuantMode::Axis => a,
                    QuantMode::Block { size } => {
                        let blocks = p.len.div_ceil(size.max(1));
                        (o * blocks + a / size.max(1)) * p.inner + i
                    }
                };
                f(e, s);
                e += 1;
            }
        }
    }
}

/// ONNX QuantizeLinear: `saturate(round_half_even(x / scale) + zp)` into `Q`, the
/// quotient rounded to `p.precision` first. `zp` has as many elements as `scale` (the
/// compiler passes zeros when the model has none). A float `Q` (float8, float4) is
/// ONNX Cast's saturating conversion of `x / scale + zp` (`zp` added at
/// `p.precision`).
pub fn quantize_linear<X: Elem, S: Elem, Q: Elem>(
    p: &Quantize,
    x: &[X],
    scale: &[S],
    zp: &[Q],
    y: &mut [Q],
) {
    assert_eq!(x.len(), p.outer * p.len * p.inner, "quantize_linear: X");
    assert_eq!(y.len(), x.len(), "quantize_linear: Y");
    assert_eq!(zp.len(), scale.len(), "quantize_linear: zero point");
    let (qmin, qmax) = (Q::min_value().to_i64(), Q::max_value().to_i64());
    for_quant(p, |e, s| {
        let q = p.precision.round(x[e].to_f64() / scale[s].to_f64());
        if Q::IS_FLOAT {
            let v = p.precision.round(q + zp[s].to_f64());
            y[e] = Q::cast_from(v, &super::small::CastMode::default());
            return;
        }
        let r = q.round_ties_even();
        // Saturating float → int; NaN becomes 0 (the zero point).
        let v = (r as i64).saturating_add(zp[s].to_i64());
        y[e] = Q::from_i64(v.clamp(qmin, qmax));
    });
}

/// ONNX DequantizeLinear: `(x − zp) · scale` in `f32` (in `f64` for 32-bit `x`, as
/// NumPy promotes), then rounded to `Y`.
pub fn dequantize_linear<Q: Elem, S: Elem, Y: Elem>(
    p: &Quantize,
    x: &[Q],
    scale: &[S],
    zp: &[Q],
    y: &mut [Y],
) {
    assert_eq!(x.len(), p.outer * p.len * p.inner, "dequantize_linear: X");
    assert_eq!(y.len(), x.len(), "dequantize_linear: Y");
    assert_eq!(zp.len(), scale.len(), "dequantize_linear: zero point");
    let wide = core::mem::size_of::<Q>() >= 4;
    for_quant(p, |e, s| {
        let xf = x[e].to_f64() as f32;
        let v = if wide {
            (xf as f64 - zp[s].to_f64()) * scale[s].to_f64() as f32 as f64
        } else {
            ((xf - zp[s].to_f64() as f32) * scale[s].to_f64() as f32) as f64
        };
        y[e] = Y::from_f64(v);
    });
}

/// ONNX DynamicQuantizeLinear (float32 in `f32` arithmetic, as the reference): `y`
/// (uint8), its scale `(max(0, max x) − min(0, min x)) / 255` and zero point.
pub fn dynamic_quantize_linear<T: Elem>(x: &[T], y: &mut [u8], scale: &mut [T], zp: &mut [u8]) {
    assert_eq!(y.len(), x.len(), "dynamic_quantize_linear: Y");
    assert_eq!(scale.len(), 1, "dynamic_quantize_linear: scale");
    assert_eq!(zp.len(), 1, "dynamic_quantize_linear: zero point");
    let (mut hi, mut lo) = (0.0f32, 0.0f32);
    for v in x {
        let v = v.to_f64() as f32;
        if v > hi || v.is_nan() {
            hi = v;
        }
        if v < lo || v.is_nan() {
            lo = v;
        }
    }
    let s = if hi == lo { 1.0f32 } else { hi - lo } / 255.0f32;
    let initial = 0.0f32 - lo / s;
    let z = initial.clamp(0.0, 255.0).round_ties_even();
    for (y, v) in y.iter_mut().zip(x) {
        let q = ((v.to_f64() as f32) / s).round_ties_even() + z;
        *y = q.clamp(0.0, 255.0) as u8;
    }
    scale[0] = T::from_f64(s as f64);
    zp[0] = z as u8;
}

/// Parameters of [`matmul_integer`] and [`qlinear_matmul`]: the product's geometry, and
/// which quantization parameters are per row of A (`M` entries) or per column of B
/// (`N` entries) rather than one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QMatMul {
    pub mm: MatMul,
    pub a_scale_rows: bool,
    pub a_zp_rows: bool,
    pub b_scale_cols: bool,
    pub b_zp_cols: bool,
}

/// `emit(out_index, row, col, Σ_k (a − a_zp[row])·(b − b_zp[col]))` over every batch.
fn int_matmul<A: Elem, B: Elem>(
    p: &QMatMul,
    a: &[A],
    b: &[B],
    a_zp: &[A],
    b_zp: &[B],
    mut emit: impl FnMut(usize, usize, usize, i64),
) {
    let mm = &p.mm;
    let (m, n, k) = (mm.m, mm.n, mm.k);
    let rank = mm.batch_rank.min(RANK);
    let batches: usize = mm.batch_shape[..rank].iter().product();
    let mut idx = [0usize; RANK];
    let (mut ao, mut bo) = (0usize, 0usize);
    let mut out = 0;
    for _ in 0..batches {
        let a = &a[ao * m * k..(ao + 1) * m * k];
        let b = &b[bo * k * n..(bo + 1) * k * n];
        for i in 0..m {
            let az = zp_at(a_zp, p.a_zp_rows, i);
            for j in 0..n {
                let bz = zp_at(b_zp, p.b_zp_cols, j);
                let mut acc = 0i64;
                for kk in 0..k {
                    acc += (a[i * k + kk].to_i64() - az) * (b[kk * n + j].to_i64() - bz);
                }
                emit(out, i, j, acc);
                out += 1;
            }
        }
        let mut d = rank;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            ao += mm.a_batch_strides[d];
            bo += mm.b_batch_strides[d];
            if idx[d] < mm.batch_shape[d] {
                break;
            }
            ao -= mm.a_batch_strides[d] * mm.batch_shape[d];
            bo -= mm.b_batch_strides[d] * mm.batch_shape[d];
            idx[d] = 0;
        }
    }
}

/// ONNX MatMulInteger: `(a − a_zp) × (b − b_zp)` in `i32` (wrapping).
pub fn matmul_integer<A: Elem, B: Elem>(
    p: &QMatMul,
    a: &[A],
    b: &[B],
    a_zp: &[A],
    b_zp: &[B],
    y: &mut [i32],
) {
    int_matmul(p, a, b, a_zp, b_zp, |e, _, _, acc| y[e] = acc as i32);
}

/// ONNX QLinearMatMul: the integer product scaled by `a_scale·b_scale/y_scale` (in the
/// scales' type `S`, applied in `f64`), plus `y_zp`, rounded half to even and saturated
/// to `Y`.
#[allow(clippy::too_many_arguments)]
pub fn qlinear_matmul<A: Elem, B: Elem, S: Elem, Y: Elem>(
    p: &QMatMul,
    a: &[A],
    a_scale: &[S],
    a_zp: &[A],
    b: &[B],
    b_scale: &[S],
    b_zp: &[B],
    y_scale: &[S],
    y_zp: &[Y],
    y: &mut [Y],
) {
    let ys = y_scale.first().map_or(1.0, |v| v.to_f64());
    let yz = y_zp.first().map_or(0.0, |v| v.to_f64());
    let (qmin, qmax) = (Y::min_value().to_f64(), Y::max_value().to_f64());
    let round = |v: f64| S::from_f64(v).to_f64();
    int_matmul(p, a, b, a_zp, b_zp, |e, i, j, acc| {
        let as_ = a_scale[if p.a_scale_rows { i } else { 0 }].to_f64();
        let bs = b_scale[if p.b_scale_cols { j } else { 0 }].to_f64();
        let factor = round(round(as_ * bs) / ys);
        let r = (acc as i32) as f64 * factor + yz;
        y[e] = Y::from_f64(r.round_ties_even().clamp(qmin, qmax));
    });
}

/// Parameters of [`deform_conv`] (2-D): input `[n, c_in, in_h, in_w]`, weight
/// `[c_out, c_in / group, kernel..]`, offsets `[n, offset_group·2·kh·kw, out_h, out_w]`
/// (per tap: Δh then Δw), mask `[n, offset_group·kh·kw, out_h, out_w]` when
/// `has_mask` (else the mask argument is ignored and every tap weighs 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DeformConv {
    pub n: usize,
    pub c_in: usize,
    pub c_out: usize,
    pub group: usize,
    pub offset_group: usize,
    pub in_hw: [usize; 2],
    pub out_hw: [usize; 2],
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// Padding before each spatial dimension.
    pub pads: [usize; 2],
    pub has_mask: bool,
}

/// Bilinear sample of one `h × w` plane at real position `(y, x)`, positions outside
/// the plane reading 0 (GridSample with `align_corners = 1`, zeros padding).
fn bilinear<T: Elem>(plane: &[T], h: usize, w: usize, y: f64, x: f64) -> f64 {
    let (y0, x0) = (y.floor(), x.floor());
    let (dy, dx) = (y - y0, x - x0);
    let mut v = 0.0;
    for (yy, wy) in [(y0, 1.0 - dy), (y0 + 1.0, dy)] {
        for (xx, wx) in [(x0, 1.0 - dx), (x0 + 1.0, dx)] {
            if yy >= 0.0 && xx >= 0.0 && yy < h as f64 && xx < w as f64 && wy * wx != 0.0 {
                v += wy * wx * plane[yy as usize * w + xx as usize].to_f64();
            }
        }
    }
    v
}

/// ONNX DeformConv over 2-D inputs: each tap reads the input bilinearly at its regular
/// position plus its learned offset, weighted by the mask; plus the bias `b` (zeros
/// when absent).
#[allow(clippy::too_many_arguments)]
pub fn deform_conv<T: Elem>(
    p: &DeformConv,
    x: &[T],
    w: &[T],
    offset: &[T],
    b: &[T],
    mask: &[T],
    y: &mut [T],
) {
    let [ih, iw] = p.in_hw;
    let [oh, ow] = p.out_hw;
    let [kh, kw] = p.kernel;
    let (group, og) = (p.group.max(1), p.offset_group.max(1));
    let (cg_in, cg_out) = (p.c_in / group, (p.c_out / group).max(1));
    let per_og = (p.c_in / og).max(1);
    let (plane, out_plane, taps) = (ih * iw, oh * ow, kh * kw);
    assert_eq!(x.len(), p.n * p.c_in * plane, "deform_conv: X");
    assert_eq!(w.len(), p.c_out * cg_in * taps, "deform_conv: W");
    assert_eq!(
        offset.len(),
        p.n * og * 2 * taps * out_plane,
        "deform_conv: offset"
    );
    assert_eq!(b.len(), p.c_out, "deform_conv: B");
    assert!(
        !p.has_mask || mask.len() == p.n * og * taps * out_plane,
        "deform_conv: mask"
    );
    assert_eq!(y.len(), p.n * p.c_out * out_plane, "deform_conv: Y");
    for n in 0..p.n {
        for co in 0..p.c_out {
            let grp = co / cg_out;
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = b[co].to_f64();
                    for ci in 0..cg_in {
                        let c = grp * cg_in + ci;
                        let g = c / per_og;
                        let xp = &x[(n * p.c_in + c) * plane..(n * p.c_in + c + 1) * plane];
                        for a in 0..kh {
                            for bb in 0..kw {
                                let tap = (n * og + g) * taps + a * kw + bb;
                                let o = (tap * 2) * out_plane + i * ow + j;
                                let dy = offset[o].to_f64();
                                let dx = offset[o + out_plane].to_f64();
                                let yy = (i * p.strides[0] + a * p.dilations[0]) as f64
                                    - p.pads[0] as f64
                                    + dy;
                                let xx = (j * p.strides[1] + bb * p.dilations[1]) as f64
                                    - p.pads[1] as f64
                                    + dx;
                                let m = if p.has_mask {
                                    mask[tap * out_plane + i * ow + j].to_f64()
                                } else {
                                    1.0
                                };
                                let wv = w[(co * cg_in + ci) * taps + a * kw + bb].to_f64();
                                acc += bilinear(xp, ih, iw, yy, xx) * wv * m;
                            }
                        }
                    }
                    y[((n * p.c_out + co) * oh + i) * ow + j] = T::from_f64(acc);
                }
            }
        }
    }
}
