//! Resampling kernels: Resize (and Upsample) over per-axis tap tables
//! ([`super::resize_tables`](mod@super::resize_tables)), GridSample, AffineGrid and Col2Im.
//!
//! Floats compute in `f64` and round once to their own type; integer results round
//! half to even and saturate, like the ONNX reference's `saturate_cast`. Nothing
//! allocates: multi-dimensional walks use fixed [`RANK`]-entry odometers. Shapes and
//! tables were checked by the compiler; a slice of the wrong length asserts.

use super::elem::Elem;
use super::params::{BinaryOp, RANK};
use serde::Serialize;

/// Row-major strides of the first `rank` entries of `shape`.
fn strides_of(rank: usize, shape: &[usize; RANK]) -> [usize; RANK] {
    let mut s = [0; RANK];
    let mut step = 1;
    for d in (0..rank).rev() {
        s[d] = step;
        step *= shape[d];
    }
    s
}

/// Increments the row-major multi-index `idx` over `shape[..rank]`; false after the last.
#[inline]
fn next(idx: &mut [usize; RANK], shape: &[usize; RANK], rank: usize) -> bool {
    let mut d = rank;
    while d > 0 {
        d -= 1;
        idx[d] += 1;
        if idx[d] < shape[d] {
            return true;
        }
        idx[d] = 0;
    }
    false
}

/// `v` as `T`: floats round once, integers round half to even and saturate.
#[inline]
fn finish<T: Elem>(v: f64) -> T {
    if T::IS_FLOAT {
        T::from_f64(v)
    } else {
        T::from_f64(v.round_ties_even())
    }
}

/// Parameters of `resize`. Output position `o` along axis `d` reads the `taps[d]`
/// input positions `idx[offset[d] + o·taps[d] + t]` with weights
/// `w[offset[d] + o·taps[d] + t]`, `t < taps[d]`; the output element is the sum over
/// every combination of one tap per axis of the product of their weights times the
/// input element. A single tap has weight 1 (the element is copied, exact for every
/// type). An index of -1 marks an output position outside the crop region
/// (`tf_crop_and_resize`): every element it touches is `extrapolation`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Resize {
    pub rank: usize,
    pub in_shape: [usize; RANK],
    pub out_shape: [usize; RANK],
    pub taps: [usize; RANK],
    pub offset: [usize; RANK],
    pub extrapolation: f32,
}

impl Resize {
    /// Entries of the `idx` and `w` tables.
    pub fn table_len(&self) -> usize {
        (0..self.rank.min(RANK))
            .map(|d| self.out_shape[d] * self.taps[d])
            .sum()
    }
}

/// ONNX Resize through precomputed tap tables (see [`Resize`]).
pub fn resize<T: Elem>(p: &Resize, x: &[T], idx: &[i64], w: &[f64], out: &mut [T]) {
    let rank = p.rank.min(RANK);
    let n_in: usize = p.in_shape[..rank].iter().product();
    let n_out: usize = p.out_shape[..rank].iter().product();
    assert_eq!(x.len(), n_in, "resize: X");
    assert_eq!(out.len(), n_out, "resize: Y");
    assert!(
        idx.len() >= p.table_len() && w.len() >= p.table_len(),
        "resize: tables"
    );
    if n_out == 0 {
        return;
    }
    let strides = strides_of(rank, &p.in_shape);
    // The axes with more than one tap, walked for each output element.
    let mut active = [0usize; RANK];
    let mut n_active = 0;
    for d in 0..rank {
        if p.taps[d] > 1 {
            active[n_active] = d;
            n_active += 1;
        }
    }
    let extrapolation = finish::<T>(p.extrapolation as f64);
    if n_active == 0 && rank > 0 {
        copy_rows(p, x, idx, &strides, extrapolation, out);
        return;
    }
    let mut o = [0usize; RANK];
    let mut base = [0usize; RANK];
    for y in out.iter_mut() {
        let mut outside = false;
        let mut fixed = 0usize;
        for d in 0..rank {
            base[d] = p.offset[d] + o[d] * p.taps[d];
            let i = idx[base[d]];
            if i < 0 {
                outside = true;
            } else if p.taps[d] == 1 {
                fixed += i as usize * strides[d];
            }
        }
        *y = if outside {
            extrapolation
        } else if n_active == 0 {
            x[fixed]
        } else {
            let mut t = [0usize; RANK];
            let mut acc = 0.0;
            loop {
                let mut wt = 1.0;
                let mut off = fixed;
                for &d in &active[..n_active] {
                    let e = base[d] + t[d];
                    wt *= w[e];
                    off += idx[e].max(0) as usize * strides[d];
                }
                acc += wt * x[off].to_f64();
                // Next combination of taps over the active axes.
                let mut k = n_active;
                let mut more = false;
                while k > 0 {
                    k -= 1;
                    let d = active[k];
                    t[d] += 1;
                    if t[d] < p.taps[d] {
                        more = true;
                        break;
                    }
                    t[d] = 0;
                }
                if !more {
                    break;
                }
            }
            finish::<T>(acc)
        };
        next(&mut o, &p.out_shape, rank);
    }
}

/// [`resize`] where every axis has one tap (nearest, or not resized): each output row
/// gathers along the last axis from one input row, and a row reading the same input
/// row as the one before it (upsampling) is a copy of that output row.
fn copy_rows<T: Elem>(
    p: &Resize,
    x: &[T],
    idx: &[i64],
    strides: &[usize; RANK],
    extrapolation: T,
    out: &mut [T],
) {
    let last = p.rank.min(RANK) - 1;
    let width = p.out_shape[last];
    let columns = &idx[p.offset[last]..][..width];
    let mut o = [0usize; RANK];
    let mut previous: Option<(usize, usize)> = None;
    for start in (0..out.len()).step_by(width) {
        // The input row this output row reads, or None outside the crop region.
        let mut base = Some(0usize);
        for d in 0..last {
            let i = idx[p.offset[d] + o[d]];
            base = base.filter(|_| i >= 0).map(|b| b + i as usize * strides[d]);
        }
        match (base, previous) {
            (Some(b), Some((pb, from))) if b == pb => {
                out.copy_within(from..from + width, start);
            }
            (Some(b), _) => {
                let row = &mut out[start..start + width];
                for (y, &i) in row.iter_mut().zip(columns) {
                    *y = if i < 0 {
                        extrapolation
                    } else {
                        x[b + i as usize]
                    };
                }
                previous = Some((b, start));
            }
            (None, _) => out[start..start + width].fill(extrapolation),
        }
        next(&mut o, &p.out_shape, last);
    }
}

/// GridSample interpolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GridSampleMode {
    /// Bilinear / trilinear / ...: 2 taps per axis.
    Linear,
    /// The nearest position, ties to even (`np.rint`).
    Nearest,
    /// Keys cubic convolution, `a = -0.75`, 4 taps per axis.
    Cubic,
}

/// What GridSample reads outside the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GridPadding {
    Zeros,
    Border,
    Reflection,
}

/// Parameters of `grid_sample`: `x` is `[n, c, in_dims[..rank]]`, the grid
/// `[n, out_dims[..rank], rank]` (normalised coordinates in `[-1, 1]`, the last spatial
/// axis first), the output `[n, c, out_dims[..rank]]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GridSample {
    pub n: usize,
    pub c: usize,
    pub rank: usize,
    pub in_dims: [usize; RANK],
    pub out_dims: [usize; RANK],
    pub mode: GridSampleMode,
    pub padding: GridPadding,
    pub align_corners: bool,
}

/// The reference's `_gs_reflect`: reflects `x` by the nearer border until it lies in
/// `[lo, hi]`.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let rng = hi - lo;
    if rng <= 0.0 {
        return lo;
    }
    if x < lo {
        let dx = lo - x;
        let n = (dx / rng).trunc();
        let r = dx - n * rng;
        if n % 2.0 == 0.0 { lo + r } else { hi - r }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / rng).trunc();
        let r = dx - n * rng;
        if n % 2.0 == 0.0 { hi - r } else { lo + r }
    } else {
        x
    }
}

/// Keys cubic convolution weights of the 4 taps around a point `t` past the second.
fn cubic_weights(t: f64, a: f64) -> [f64; 4] {
    let near = |x: f64| ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// ONNX GridSample (opset 16 and 20 semantics, any number of spatial axes up to
/// `RANK - 2`), following the reference implementation: denormalised coordinates are
/// held in `float32`, nearest rounds half to even.
pub fn grid_sample<T: Elem, G: Elem>(p: &GridSample, x: &[T], grid: &[G], out: &mut [T]) {
    let rank = p.rank.min(RANK - 2);
    let in_sp: usize = p.in_dims[..rank].iter().product();
    let out_sp: usize = p.out_dims[..rank].iter().product();
    assert_eq!(x.len(), p.n * p.c * in_sp, "grid_sample: X");
    assert_eq!(grid.len(), p.n * out_sp * rank, "grid_sample: grid");
    assert_eq!(out.len(), p.n * p.c * out_sp, "grid_sample: Y");
    if out.is_empty() || rank == 0 {
        return;
    }
    let strides = strides_of(rank, &p.in_dims);
    let g64 = G::DTYPE == "float64";
    // Per axis: up to 4 taps (input position, or None for a zero) and their weights.
    let mut tap_idx = [[None::<usize>; 4]; RANK];
    let mut tap_w = [[0.0f64; 4]; RANK];
    let n_taps = match p.mode {
        GridSampleMode::Nearest => 1,
        GridSampleMode::Linear => 2,
        GridSampleMode::Cubic => 4,
    };
    for n in 0..p.n {
        for s in 0..out_sp {
            let g = &grid[(n * out_sp + s) * rank..(n * out_sp + s + 1) * rank];
            for d in 0..rank {
                let len = p.in_dims[d];
                let v = g[rank - 1 - d];
                // Denormalise as the reference does: in the grid's precision, stored
                // as float32.
                let xd = if g64 {
                    let v = v.to_f64();
                    let l = len as f64;
                    (if p.align_corners {
                        (v + 1.0) / 2.0 * (l - 1.0)
                    } else {
                        ((v + 1.0) * l - 1.0) / 2.0
                    }) as f32
                } else {
                    let v = v.to_f64() as f32;
                    let l = len as f32;
                    if p.align_corners {
                        (v + 1.0) / 2.0 * (l - 1.0)
                    } else {
                        ((v + 1.0) * l - 1.0) / 2.0
                    }
                };
                let mut xd = if p.mode == GridSampleMode::Nearest {
                    xd.round_ties_even()
                } else {
                    xd
                };
                let (lo, hi) = if p.align_corners {
                    (0.0, len as f64 - 1.0)
                } else {
                    (-0.5, len as f64 - 0.5)
                };
                let xv = xd as f64;
                if xv < lo || xv > hi {
                    match p.padding {
                        GridPadding::Border => xd = xv.clamp(0.0, len as f64 - 1.0) as f32,
                        GridPadding::Reflection => xd = reflect(xv, lo, hi) as f32,
                        GridPadding::Zeros => {}
                    }
                }
                let xv = xd as f64;
                // The input position of integer coordinate `i` under the padding mode.
                let at = |i: i64| -> Option<usize> {
                    let last = len as i64 - 1;
                    match p.padding {
                        GridPadding::Zeros => (0..len as i64).contains(&i).then_some(i as usize),
                        GridPadding::Border => Some(i.clamp(0, last.max(0)) as usize),
                        GridPadding::Reflection => {
                            let r = reflect(i as f64, lo, hi) as i64;
                            Some(r.clamp(0, last.max(0)) as usize)
                        }
                    }
                };
                match p.mode {
                    GridSampleMode::Nearest => {
                        tap_idx[d][0] = at(xv.trunc() as i64);
                        tap_w[d][0] = 1.0;
                    }
                    GridSampleMode::Linear => {
                        let x0 = xv.floor();
                        let t = (xd - x0 as f32) as f64;
                        tap_idx[d][0] = at(x0 as i64);
                        tap_idx[d][1] = at(x0 as i64 + 1);
                        tap_w[d][0] = 1.0 - t;
                        tap_w[d][1] = t;
                    }
                    GridSampleMode::Cubic => {
                        let x0 = xv.floor();
                        let t = (xd - x0 as f32) as f64;
                        for (k, i) in tap_idx[d].iter_mut().enumerate() {
                            *i = at(x0 as i64 - 1 + k as i64);
                        }
                        tap_w[d] = cubic_weights(t, -0.75);
                    }
                }
            }
            for c in 0..p.c {
                let plane = &x[(n * p.c + c) * in_sp..(n * p.c + c + 1) * in_sp];
                let mut t = [0usize; RANK];
                let mut acc = 0.0;
                loop {
                    let mut wt = 1.0;
                    let mut off = Some(0usize);
                    for d in 0..rank {
                        wt *= tap_w[d][t[d]];
                        off = off.zip(tap_idx[d][t[d]]).map(|(o, i)| o + i * strides[d]);
                    }
                    if let Some(off) = off {
                        acc += wt * plane[off].to_f64();
                    }
                    let mut k = rank;
                    let mut more = false;
                    while k > 0 {
                        k -= 1;
                        t[k] += 1;
                        if t[k] < n_taps {
                            more = true;
                            break;
                        }
                        t[k] = 0;
                    }
                    if !more {
                        break;
                    }
                }
                out[(n * p.c + c) * out_sp + s] = finish::<T>(acc);
            }
        }
    }
}

/// Parameters of `affine_grid`: `theta` is `[n, rank, rank + 1]`, the output
/// `[n, size[..rank], rank]` (`rank` 2: `[H, W]`; 3: `[D, H, W]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AffineGrid {
    pub n: usize,
    pub rank: usize,
    pub size: [usize; 3],
    pub align_corners: bool,
}

/// Normalised coordinate `i` of an axis of `len` positions (the reference's
/// `np.arange`: `start + i·delta`).
fn base_coord(i: usize, len: usize, align_corners: bool) -> f64 {
    let (start, step) = if align_corners {
        if len <= 1 {
            return -1.0;
        }
        (-1.0, 2.0 / (len as f64 - 1.0))
    } else {
        let step = 2.0 / len as f64;
        (-1.0 + step / 2.0, step)
    };
    let delta = (start + step) - start;
    start + i as f64 * delta
}

/// ONNX AffineGrid: `out[n, .., :] = theta[n] · [x, y, (z,) 1]`.
pub fn affine_grid<T: Elem>(p: &AffineGrid, theta: &[T], out: &mut [T]) {
    let rank = p.rank.clamp(1, 3);
    let sp: usize = p.size[..rank].iter().product();
    let cols = rank + 1;
    assert_eq!(theta.len(), p.n * rank * cols, "affine_grid: theta");
    assert_eq!(out.len(), p.n * sp * rank, "affine_grid: grid");
    for n in 0..p.n {
        let th = &theta[n * rank * cols..(n + 1) * rank * cols];
        let mut pos = [0usize; RANK];
        let mut shape = [1usize; RANK];
        shape[..rank].copy_from_slice(&p.size[..rank]);
        for s in 0..sp {
            // Homogeneous point: the last spatial axis first.
            let mut h = [1.0f64; 4];
            for (k, h) in h[..rank].iter_mut().enumerate() {
                let d = rank - 1 - k;
                *h = base_coord(pos[d], p.size[d], p.align_corners);
            }
            let o = &mut out[(n * sp + s) * rank..(n * sp + s + 1) * rank];
            for (r, o) in o.iter_mut().enumerate() {
                let acc: f64 = (0..cols).map(|j| th[r * cols + j].to_f64() * h[j]).sum();
                *o = finish::<T>(acc);
            }
            next(&mut pos, &shape, rank);
        }
    }
}

/// Parameters of `col2im`: the input is `[n, c · Π block, Π cols]`, the output
/// `[n, c, image[..rank]]`; column position `l` (row-major over `cols`) of block offset
/// `k` (row-major over `block`) adds into image position
/// `l_d · strides_d − pads_d + k_d · dilations_d` where that lies inside the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Col2Im {
    pub n: usize,
    pub c: usize,
    pub rank: usize,
    pub image: [usize; RANK],
    pub block: [usize; RANK],
    pub cols: [usize; RANK],
    pub strides: [usize; RANK],
    pub dilations: [usize; RANK],
    /// Padding at the start of each axis.
    pub pads: [usize; RANK],
}

/// ONNX Col2Im, accumulating in the element type in the reference's order.
pub fn col2im<T: Elem>(p: &Col2Im, x: &[T], out: &mut [T]) {
    let rank = p.rank.min(RANK);
    let img: usize = p.image[..rank].iter().product();
    let kk: usize = p.block[..rank].iter().product();
    let ll: usize = p.cols[..rank].iter().product();
    assert_eq!(x.len(), p.n * p.c * kk * ll, "col2im: X");
    assert_eq!(out.len(), p.n * p.c * img, "col2im: Y");
    out.fill(T::zero());
    let strides = strides_of(rank, &p.image);
    for nc in 0..p.n * p.c {
        let plane = &mut out[nc * img..(nc + 1) * img];
        let mut k = [0usize; RANK];
        for kf in 0..kk {
            let mut l = [0usize; RANK];
            for lf in 0..ll {
                let mut off = Some(0usize);
                for d in 0..rank {
                    let i = (l[d] * p.strides[d] + k[d] * p.dilations[d]) as i64 - p.pads[d] as i64;
                    off = off
                        .filter(|_| (0..p.image[d] as i64).contains(&i))
                        .map(|o| o + i as usize * strides[d]);
                }
                if let Some(off) = off {
                    let v = x[(nc * kk + kf) * ll + lf];
                    plane[off] = T::binary(BinaryOp::Add, plane[off], v);
                }
                next(&mut l, &p.cols, rank);
            }
            next(&mut k, &p.block, rank);
        }
    }
}
