//! Resize's tap tables: which input positions, with which weights, each output
//! position along an axis reads (the onnx reference's `_interpolate_1d_along_axis`).
//!
//! The compiler builds them once for a fixed shape and embeds them in the weights; a
//! build over declared ranges (`--dim`) builds them on every run into kernel scratch
//! ([`resize_sampled`]), because they depend on the run's shapes. Both go through
//! [`resize_tables`], so the two builds agree bit for bit. Nothing here allocates.

use serde::Serialize;

use super::elem::Elem;
use super::params::RANK;
use super::resize::{Resize, resize};

/// Resize's `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ResizeMode {
    Nearest,
    Linear,
    Cubic,
}

/// Resize's `coordinate_transformation_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ResizeCoord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// Resize's `nearest_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum NearestRounding {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
    /// Upsample and Resize-10: floor when upsampling, ceil when downsampling.
    Legacy,
}

/// How a Resize samples its input, apart from the shapes: what its tables are built
/// from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ResizeSampling {
    pub mode: ResizeMode,
    pub coord: ResizeCoord,
    pub nearest: NearestRounding,
    pub cubic_a: f64,
    pub exclude_outside: bool,
    pub antialias: bool,
    /// The axes the node resizes (its `axes`); the others are copied.
    pub resized: [bool; RANK],
    /// Output size over input size, per axis (1 where not resized).
    pub scale: [f64; RANK],
    /// `tf_crop_and_resize`'s region per axis, as fractions of the axis (0 and 1
    /// elsewhere).
    pub roi_begin: [f64; RANK],
    pub roi_end: [f64; RANK],
}

/// Parameters of [`resize_sampled`]: the shapes (`taps` and `offset` are rebuilt on
/// every run) and the sampling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ResizeSampled {
    pub resize: Resize,
    pub sampling: ResizeSampling,
}

/// A coordinate that is not finite: the scale makes the axis meaningless.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NonFiniteCoordinate {
    pub axis: usize,
    pub input: usize,
    pub out: usize,
    pub coordinate: f64,
}

impl std::fmt::Display for NonFiniteCoordinate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "resizing axis {} from {} to {} gives the non-finite coordinate {}",
            self.axis, self.input, self.out, self.coordinate
        )
    }
}

/// Python's `math.isclose` with its defaults.
fn isclose(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Left end of an antialiased kernel's footprint, `floor(-radius / scale) + 1`,
/// saturating (a scale near 0 widens it without bound; the compiler caps it).
fn footprint_start(radius: f64, scale: f64) -> i64 {
    ((-radius / scale.min(1.0)).floor() + 1.0).max(-(1i64 << 40) as f64) as i64
}

impl ResizeSampling {
    /// Axis `d` of an `input`-long axis resized to `out` is a plain copy.
    fn copies(&self, d: usize, input: usize, out: usize) -> bool {
        !self.resized[d]
            || (isclose(self.scale[d], 1.0)
                && out == input
                && (self.coord != ResizeCoord::TfCropAndResize
                    || (isclose(self.roi_begin[d], 0.0) && isclose(self.roi_end[d], 1.0))))
    }

    /// Taps per output position of a resized axis, before `Self::axis_table` finds it
    /// is a copy (one tap).
    pub fn kernel_taps(&self, d: usize) -> usize {
        let footprint = |radius: f64| (2 - 2 * footprint_start(radius, self.scale[d])) as usize;
        match self.mode {
            ResizeMode::Nearest => 2,
            ResizeMode::Linear if self.antialias => footprint(1.0),
            ResizeMode::Linear => 2,
            ResizeMode::Cubic if self.antialias => footprint(2.0),
            ResizeMode::Cubic => 4,
        }
    }

    /// Entries the tables of `p`'s shapes take at most (every axis at its kernel's
    /// taps); at least 1.
    pub fn table_bound(&self, p: &Resize) -> usize {
        let n: usize = (0..p.rank.min(RANK))
            .map(|d| {
                let (i, o) = (p.in_shape[d], p.out_shape[d]);
                if self.copies(d, i, o) {
                    o
                } else {
                    o.saturating_mul(self.kernel_taps(d))
                }
            })
            .fold(0usize, usize::saturating_add);
        n.max(1)
    }

    /// The weights of the `c.len()` taps at fractional position `ratio`.
    fn coeffs(&self, d: usize, ratio: f64, c: &mut [f64]) {
        let (a, scale) = (self.cubic_a, self.scale[d]);
        match self.mode {
            ResizeMode::Nearest => {
                let up = ratio == ratio.trunc()
                    || match self.nearest {
                        NearestRounding::RoundPreferFloor => ratio > 0.5,
                        NearestRounding::RoundPreferCeil => ratio >= 0.5,
                        NearestRounding::Floor => false,
                        NearestRounding::Ceil => true,
                        NearestRounding::Legacy => scale < 1.0,
                    };
                c.copy_from_slice(if up { &[0.0, 1.0] } else { &[1.0, 0.0] });
            }
            ResizeMode::Linear if self.antialias => {
                let start = footprint_start(1.0, scale);
                let s = scale.min(1.0);
                for (k, v) in c.iter_mut().enumerate() {
                    let i = (start + k as i64) as f64;
                    *v = (1.0 - ((i - ratio) * s).abs()).clamp(0.0, 1.0);
                }
                normalize(c);
            }
            ResizeMode::Linear => c.copy_from_slice(&[1.0 - ratio, ratio]),
            ResizeMode::Cubic if self.antialias => {
                let cubic = |x: f64| {
                    let x = x.abs();
                    let (x2, x3) = (x * x, x * x * x);
                    if x <= 1.0 {
                        (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                    } else if x < 2.0 {
                        a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                    } else {
                        0.0
                    }
                };
                let start = footprint_start(2.0, scale);
                let s = scale.min(1.0);
                for (k, v) in c.iter_mut().enumerate() {
                    *v = cubic(s * ((start + k as i64) as f64 - ratio));
                }
                normalize(c);
            }
            ResizeMode::Cubic => {
                let (r, q) = (ratio, 1.0 - ratio);
                c.copy_from_slice(&[
                    ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                    ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                    ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                    ((a * (q + 1.0) - 5.0 * a) * (q + 1.0) + 8.0 * a) * (q + 1.0) - 4.0 * a,
                ]);
            }
        }
    }

    /// The input coordinate output position `y` maps to, and whether it lies outside
    /// the crop region.
    fn coordinate(&self, d: usize, input: usize, out: usize, y: usize) -> (f64, bool) {
        let (y, scale) = (y as f64, self.scale[d]);
        let (inw, ow) = (input as f64, scale * input as f64);
        match self.coord {
            ResizeCoord::AlignCorners if ow == 1.0 => (0.0, false),
            ResizeCoord::AlignCorners => (y * (inw - 1.0) / (ow - 1.0), false),
            ResizeCoord::Asymmetric => (y / scale, false),
            ResizeCoord::TfCropAndResize => {
                let (r0, r1) = (self.roi_begin[d], self.roi_end[d]);
                let within = if ow == 1.0 {
                    (r1 - r0) * (inw - 1.0) / 2.0
                } else {
                    y * (r1 - r0) * (inw - 1.0) / (ow - 1.0)
                };
                let x = within + r0 * (inw - 1.0);
                (x, x < 0.0 || x > inw - 1.0)
            }
            ResizeCoord::PytorchHalfPixel if ow == 1.0 => (-0.5, false),
            ResizeCoord::PytorchHalfPixel | ResizeCoord::HalfPixel => {
                ((y + 0.5) / scale - 0.5, false)
            }
            ResizeCoord::HalfPixelSymmetric => {
                let offset = inw / 2.0 * (1.0 - out as f64 / ow);
                (offset + (y + 0.5) / scale - 0.5, false)
            }
        }
    }

    /// Writes axis `d`'s table (`out` rows of taps) at the start of `idx` and `w`;
    /// returns its taps per row: 1 where every row reads one input position with
    /// weight 1 (then rows are rewritten one entry each).
    fn axis_table(
        &self,
        d: usize,
        input: usize,
        out: usize,
        idx: &mut [i64],
        w: &mut [f64],
    ) -> Result<usize, NonFiniteCoordinate> {
        if self.copies(d, input, out) {
            for (y, (i, v)) in idx[..out].iter_mut().zip(&mut w[..out]).enumerate() {
                *i = y as i64;
                *v = 1.0;
            }
            return Ok(1);
        }
        if out == 0 {
            return Ok(1);
        }
        let n = self.kernel_taps(d);
        // An empty axis has no rows (scale × 0 is 0); the clamp stays well formed.
        let last = (input as i64 - 1).max(0);
        let mut single = true;
        for y in 0..out {
            let (x, outside) = self.coordinate(d, input, out, y);
            if !x.is_finite() {
                return Err(NonFiniteCoordinate {
                    axis: d,
                    input,
                    out,
                    coordinate: x,
                });
            }
            let xf = x.floor();
            let ratio = if x == xf { 1.0 } else { x - xf };
            let (ri, rw) = (&mut idx[y * n..(y + 1) * n], &mut w[y * n..(y + 1) * n]);
            self.coeffs(d, ratio, rw);
            // The first neighbour, as the reference pads the axis and centres the taps.
            let pad = n.div_ceil(2) as f64;
            let xp = x + pad;
            let p = xp.floor();
            let frac = xp - p;
            let half = (n / 2) as i64;
            let off = if n.is_multiple_of(2) {
                if frac == 0.0 { -half } else { -half + 1 }
            } else {
                let base = -(((n - 1) / 2) as i64);
                if frac <= 0.5 { base } else { base + 1 }
            };
            let start = p as i64 + off - pad as i64;
            if self.exclude_outside {
                for (k, v) in rw.iter_mut().enumerate() {
                    let i = start + k as i64;
                    if i < 0 || i > last {
                        *v = 0.0;
                    }
                }
                let sum: f64 = rw.iter().sum();
                if sum != 0.0 {
                    rw.iter_mut().for_each(|v| *v /= sum);
                }
            }
            for (k, i) in ri.iter_mut().enumerate() {
                *i = if outside {
                    -1
                } else {
                    (start + k as i64).clamp(0, last)
                };
            }
            let mut nonzero = rw.iter().filter(|&&v| v != 0.0);
            single &= ri[0] < 0
                || (nonzero.next().is_some_and(|&v| v == 1.0) && nonzero.next().is_none());
        }
        if !single {
            return Ok(n);
        }
        // One weight-1 tap per position (nearest): a copy. Rows move forward in place.
        for y in 0..out {
            let row = y * n;
            let i = if idx[row] < 0 {
                -1
            } else {
                let k = (0..n).find(|&k| w[row + k] != 0.0).unwrap_or(0);
                idx[row + k]
            };
            idx[y] = i;
            w[y] = 1.0;
        }
        Ok(1)
    }
}

/// `c` scaled to sum to 1.
fn normalize(c: &mut [f64]) {
    let sum: f64 = c.iter().sum();
    c.iter_mut().for_each(|v| *v /= sum);
}

/// Builds every axis's table for `p`'s shapes into `idx` and `w` (each at least
/// [`ResizeSampling::table_bound`] long), and sets `p.taps` and `p.offset` to match;
/// returns the entries written.
pub fn resize_tables(
    p: &mut Resize,
    s: &ResizeSampling,
    idx: &mut [i64],
    w: &mut [f64],
) -> Result<usize, NonFiniteCoordinate> {
    let mut at = 0;
    for d in 0..p.rank.min(RANK) {
        p.offset[d] = at;
        p.taps[d] = s.axis_table(
            d,
            p.in_shape[d],
            p.out_shape[d],
            &mut idx[at..],
            &mut w[at..],
        )?;
        at += p.out_shape[d] * p.taps[d];
    }
    Ok(at)
}

/// [`resize`] in a build over declared ranges: the tables depend on the run's shapes,
/// so they are built first, into `scratch` (`2 ×` [`ResizeSampling::table_bound`]
/// entries: weights, then indices).
pub fn resize_sampled<T: Elem>(p: &ResizeSampled, x: &[T], out: &mut [T], scratch: &mut [f64]) {
    let mut shape = p.resize;
    let n = p.sampling.table_bound(&shape);
    assert!(scratch.len() >= 2 * n, "resize: scratch");
    let (w, rest) = scratch.split_at_mut(n);
    let idx: &mut [i64] = bytemuck::cast_slice_mut(&mut rest[..n]);
    // Unreachable: an axis has rows only where scale × input ≥ 1, which bounds every
    // coordinate (the compiler rejects the scales that do not). Were it reached, the
    // zeroed indices keep every read in bounds.
    if resize_tables(&mut shape, &p.sampling, idx, w).is_err() {
        idx.fill(0);
    }
    resize(&shape, x, idx, w, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling(mode: ResizeMode, coord: ResizeCoord, scale: [f64; 2]) -> ResizeSampling {
        let mut s = ResizeSampling {
            mode,
            coord,
            nearest: NearestRounding::RoundPreferFloor,
            cubic_a: -0.75,
            exclude_outside: false,
            antialias: false,
            resized: [true; RANK],
            scale: [1.0; RANK],
            roi_begin: [0.0; RANK],
            roi_end: [1.0; RANK],
        };
        s.scale[..2].copy_from_slice(&scale);
        s
    }

    fn shapes(input: [usize; 2], out: [usize; 2]) -> Resize {
        let mut p = Resize {
            rank: 2,
            in_shape: [1; RANK],
            out_shape: [1; RANK],
            taps: [0; RANK],
            offset: [0; RANK],
            extrapolation: 0.0,
        };
        p.in_shape[..2].copy_from_slice(&input);
        p.out_shape[..2].copy_from_slice(&out);
        p
    }

    /// ONNX's `test_resize_upsample_scales_linear`: [[1, 2], [3, 4]] doubled.
    #[test]
    fn tables_built_at_run_time_give_onnx_expected_output() {
        let p = ResizeSampled {
            resize: shapes([2, 2], [4, 4]),
            sampling: sampling(ResizeMode::Linear, ResizeCoord::HalfPixel, [2.0, 2.0]),
        };
        let mut scratch = vec![f64::NAN; 2 * p.sampling.table_bound(&p.resize)];
        let mut out = [0f32; 16];
        resize_sampled(&p, &[1.0f32, 2.0, 3.0, 4.0], &mut out, &mut scratch);
        #[rustfmt::skip]
        let want = [
            1.0, 1.25, 1.75, 2.0,
            1.5, 1.75, 2.25, 2.5,
            2.5, 2.75, 3.25, 3.5,
            3.0, 3.25, 3.75, 4.0,
        ];
        assert_eq!(out, want);
    }

    /// Nearest rows collapse to one tap each, written over the two-tap rows in place;
    /// the offsets follow.
    #[test]
    fn nearest_axes_collapse_to_one_tap() {
        let s = sampling(ResizeMode::Nearest, ResizeCoord::Asymmetric, [2.0, 1.0]);
        let mut p = shapes([3, 5], [6, 5]);
        let n = s.table_bound(&p);
        assert_eq!(n, 6 * 2 + 5, "axis 1 copies");
        let (mut idx, mut w) = (vec![-7; n], vec![f64::NAN; n]);
        let len = resize_tables(&mut p, &s, &mut idx, &mut w).unwrap();
        assert_eq!(len, 6 + 5);
        assert_eq!(p.taps[..2], [1, 1]);
        assert_eq!(p.offset[..2], [0, 6]);
        assert_eq!(idx[..len], [0, 0, 1, 1, 2, 2, 0, 1, 2, 3, 4]);
        assert!(w[..len].iter().all(|&v| v == 1.0));
    }

    /// Outside the crop region a row is -1 (the extrapolation value).
    #[test]
    fn crop_region_marks_rows_outside() {
        let mut s = sampling(ResizeMode::Linear, ResizeCoord::TfCropAndResize, [1.0, 2.0]);
        s.roi_begin[1] = -0.5;
        s.roi_end[1] = 1.0;
        let mut p = shapes([1, 3], [1, 6]);
        let n = s.table_bound(&p);
        let (mut idx, mut w) = (vec![0; n], vec![0.0; n]);
        resize_tables(&mut p, &s, &mut idx, &mut w).unwrap();
        assert_eq!(p.taps[1], 2);
        let row0 = p.offset[1];
        assert_eq!(idx[row0..row0 + 2], [-1, -1], "x = -1 lies before the axis");
        assert!(idx[row0 + 10..row0 + 12].iter().all(|&i| i >= 0));
    }
}
