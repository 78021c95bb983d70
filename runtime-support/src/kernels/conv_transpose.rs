//! ONNX ConvTranspose over NCHW float32 with two spatial dims, as matrix products.
//!
//! For one input row of one group, `Wᵀ · X_row` (`c_out/g · kh · kw` rows by the
//! row's `w_in` positions, one faer product) is every tap's contribution of that row;
//! each is then added into the output at `i·stride + k·dilation − pad`, which starts
//! as the bias. One row at a time keeps the scratch at `c_out/g · kh · kw · w_in`
//! floats, in L2, and growing with the width only (a build over declared ranges lends
//! it at its largest). The typed N-d kernel ([`crate::typed::conv_transpose`]) gathers
//! each output element instead, which is one scattered read per input channel and tap:
//! PP-OCRv4's detector head spent 172 ms of its 313 there.

use super::gemm::{Operand, sgemm};
use super::simd::vectorize;
use crate::typed::params::ConvTransposeNd;

impl ConvTransposeNd {
    /// `f32` elements of scratch [`conv_transpose_rows`] needs (2-D geometries).
    pub const fn rows_scratch_len(&self) -> usize {
        let g = &self.geom;
        let group = if g.group == 0 { 1 } else { g.group };
        (g.c_out / group) * g.kernel[0] * g.kernel[1] * g.in_shape[1]
    }
}

/// ONNX ConvTranspose of a 2-D `p` (see the module documentation); `b` holds one bias
/// per output channel (zeros when the node has none).
pub fn conv_transpose_rows(
    p: &ConvTransposeNd,
    x: &[f32],
    w: &[f32],
    b: &[f32],
    y: &mut [f32],
    scratch: &mut [f32],
) {
    let g = &p.geom;
    assert_eq!(g.dims, 2, "conv_transpose_rows: 2-D geometries only");
    let group = g.group.max(1);
    let (cg_in, cg_out) = (g.c_in / group, g.c_out / group);
    let (h_in, w_in) = (g.in_shape[0], g.in_shape[1]);
    let (h_out, w_out) = (g.out_shape[0], g.out_shape[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (in_plane, out_plane) = (h_in * w_in, h_out * w_out);
    let k_len = cg_out * kh * kw;
    assert_eq!(x.len(), g.n * g.c_in * in_plane, "conv_transpose_rows: X");
    assert_eq!(w.len(), g.c_in * k_len, "conv_transpose_rows: W");
    assert_eq!(b.len(), g.c_out, "conv_transpose_rows: B");
    assert_eq!(y.len(), g.n * g.c_out * out_plane, "conv_transpose_rows: Y");
    // A build over declared ranges lends the scratch its largest size: use a prefix.
    assert!(
        scratch.len() >= p.rows_scratch_len(),
        "conv_transpose_rows: scratch"
    );
    if out_plane == 0 {
        return;
    }
    for (plane, &bias) in y.chunks_exact_mut(out_plane).zip(b.iter().cycle()) {
        plane.fill(bias);
    }
    if in_plane == 0 || k_len == 0 {
        return;
    }
    let cols = &mut scratch[..k_len * w_in];
    for n in 0..g.n {
        for grp in 0..group {
            let xg = &x[(n * g.c_in + grp * cg_in) * in_plane..][..cg_in * in_plane];
            // W is [c_in, c_out/g, kh, kw]: the group's rows, used transposed.
            let wg = &w[grp * cg_in * k_len..][..cg_in * k_len];
            let yg = &mut y[(n * g.c_out + grp * cg_out) * out_plane..][..cg_out * out_plane];
            let lhs = Operand {
                data: wg,
                ld: k_len,
                trans: true,
            };
            for ih in 0..h_in {
                let rhs = Operand::rows(&xg[ih * w_in..], in_plane);
                sgemm(k_len, w_in, cg_in, 1.0, lhs, rhs, cols, w_in, false);
                vectorize!({ scatter_row(p, ih, cols, yg) });
            }
        }
    }
}

/// Adds input row `ih`'s contributions `cols` (one row per output channel and tap)
/// into the group's output planes `yg`.
#[inline(always)]
fn scatter_row(p: &ConvTransposeNd, ih: usize, cols: &[f32], yg: &mut [f32]) {
    let g = &p.geom;
    let (w_in, h_out, w_out) = (g.in_shape[1], g.out_shape[0], g.out_shape[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (sh, sw) = (g.strides[0], g.strides[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let mut taps = cols.chunks_exact(w_in);
    for plane in yg.chunks_exact_mut(h_out * w_out) {
        for ki in 0..kh {
            let oh = (ih * sh + ki * dh) as isize - g.pads[0];
            let mut row = (0..h_out as isize)
                .contains(&oh)
                .then(|| &mut plane[oh as usize * w_out..][..w_out]);
            for kj in 0..kw {
                let Some(src) = taps.next() else { return };
                let Some(row) = row.as_deref_mut() else {
                    continue;
                };
                // Output column iw·sw + off, kept where it lies in 0..w_out.
                let off = (kj * dw) as isize - g.pads[1];
                let lo = if off >= 0 {
                    0
                } else {
                    (off.unsigned_abs()).div_ceil(sw)
                };
                let hi = (w_out as isize - off).max(0) as usize;
                let hi = hi.div_ceil(sw).min(w_in);
                if lo >= hi {
                    continue;
                }
                let first = ((lo * sw) as isize + off) as usize;
                if sw == 1 {
                    let dst = &mut row[first..][..hi - lo];
                    for (o, &v) in dst.iter_mut().zip(&src[lo..hi]) {
                        *o += v;
                    }
                } else {
                    for (k, &v) in src[lo..hi].iter().enumerate() {
                        row[first + k * sw] += v;
                    }
                }
            }
        }
    }
}
