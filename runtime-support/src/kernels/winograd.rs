//! Winograd F(2×2, 3×3) convolution: 3×3 windows at stride 1, one group.
//!
//! A direct or im2col convolution spends 9 multiply-adds per output, input channel and
//! output channel. Winograd's minimal filtering computes a 2×2 tile of outputs from a
//! 4×4 patch of input with 16: each patch `d` and each kernel `g` are transformed,
//! `V = Bᵀ d B` and `U = G g Gᵀ`, multiplied elementwise and summed over input
//! channels, and the 4×4 sum `M` is transformed back, `Y = Aᵀ M A`. The sum over
//! input channels of element `(ξ, ν)` of the 4×4 products, for every tile and output
//! channel at once, is a matrix product `M[ξν] = U[ξν] · V[ξν]` (`c_out × c_in` by
//! `c_in × tiles`): 16 products with 2.25 times fewer multiply-adds in all than the
//! convolution's one. The kernel transform `U` is done at compile time
//! ([`winograd_weights`], called by the compiler), so the weights blob holds
//! `U[ξν][c_out][c_in]`.
//!
//! Tiles are taken in blocks of at most [`Conv2d::winograd_block`] (whole tile rows, or
//! pieces of one row wider than a block) so that the transformed input and the
//! products of one block stay small: the block's input is transformed into `V` in the
//! scratch, multiplied into `M`, and `M` transformed into the output with bias and
//! activation. Parts of the input a
//! patch reaches outside the image (the padding, and the last tile of an odd-sized
//! output) read as zeros: each patch row is first copied between zero columns.
//!
//! With worker threads, each thread takes a run of whole blocks of tile rows (output
//! rows no other thread writes), in its own scratch; a layer with fewer blocks than
//! threads shares each of its 16 products instead. Blocks are the same on any number
//! of threads, so the outputs are too, bit for bit.
//!
//! Rounding differs from the direct sum: the transforms add and subtract inputs before
//! multiplying (coefficients 0, ±1 and ±½, exact in binary), so each output's error is a
//! few ulps of its terms' magnitude, as for any reordered f32 sum.

use std::ops::Range;

use super::elementwise::bias_activate;
use super::gemm::{self, Operand, Split};
use super::simd::vectorize;
use crate::params::{Conv2d, WINOGRAD_LANES};
use crate::threads;

/// Outputs per tile side (`m`) and input patch side (`m + 3 - 1`).
const TILE: usize = 2;
const PATCH: usize = 4;
/// Elements of `M` (and of `U`, `V`) per tile: one product each.
const PRODUCTS: usize = PATCH * PATCH;
/// Tiles transformed together, one per vector lane.
const LANES: usize = WINOGRAD_LANES;

/// `G`, which maps a 3-tap kernel row to the 4 points of the transform.
const G: [[f64; 3]; PATCH] = [
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.0, 0.0, 1.0],
];

/// The kernel transform `U = G g Gᵀ` of OIHW 3×3 `weights` (`c_out × c_in × 3 × 3`),
/// laid out as the 16 matrices the products read: `U[ξ·4 + ν][co][ci]`. Computed in
/// f64 and rounded once. The compiler calls this once per layer; it allocates.
pub fn winograd_weights(c_out: usize, c_in: usize, weights: &[f32]) -> Vec<f32> {
    assert_eq!(weights.len(), c_out * c_in * 9, "winograd_weights: W");
    let mut u = vec![0.0f32; PRODUCTS * c_out * c_in];
    for (k, g) in weights.chunks_exact(9).enumerate() {
        // G g (4×3), then (G g) Gᵀ (4×4).
        let gg: [[f64; 3]; PATCH] = std::array::from_fn(|i| {
            std::array::from_fn(|j| (0..3).map(|t| G[i][t] * g[t * 3 + j] as f64).sum())
        });
        for xi in 0..PATCH {
            for nu in 0..PATCH {
                let v: f64 = (0..3).map(|t| gg[xi][t] * G[nu][t]).sum();
                u[(xi * PATCH + nu) * c_out * c_in + k] = v as f32;
            }
        }
    }
    u
}

/// Lanes of one patch position (or product) for [`LANES`] tiles.
type Lanes = [f32; LANES];

/// `Bᵀ x` along one axis of a patch: `Bᵀ = [[1,0,-1,0], [0,1,1,0], [0,-1,1,0], [0,1,0,-1]]`.
///
/// The transforms are plain loops over fixed-size arrays, not `array::from_fn`, whose
/// helpers are not inlined into the vectorised caller.
#[inline(always)]
fn input_1d(x: [Lanes; PATCH]) -> [Lanes; PATCH] {
    let mut y = [[0.0; LANES]; PATCH];
    for l in 0..LANES {
        y[0][l] = x[0][l] - x[2][l];
        y[1][l] = x[1][l] + x[2][l];
        y[2][l] = x[2][l] - x[1][l];
        y[3][l] = x[1][l] - x[3][l];
    }
    y
}

/// `Aᵀ x` along one axis of a product: `Aᵀ = [[1,1,1,0], [0,1,-1,-1]]`.
#[inline(always)]
fn output_1d(x: [Lanes; PATCH]) -> [Lanes; TILE] {
    let mut y = [[0.0; LANES]; TILE];
    for l in 0..LANES {
        y[0][l] = x[0][l] + x[1][l] + x[2][l];
        y[1][l] = x[1][l] - x[2][l] - x[3][l];
    }
    y
}

/// `Tᵀ x T` of [`LANES`] patches or products `x[row][col]`, for the 1-D transform
/// `t` (`v ↦ Tᵀ v`, from `PATCH` points to `O`): along the columns, then the rows.
#[inline(always)]
fn transform_2d<const O: usize>(
    x: &[[Lanes; PATCH]; PATCH],
    t: impl Fn([Lanes; PATCH]) -> [Lanes; O],
) -> [[Lanes; O]; O] {
    // `cols[i][j]` is (Tᵀ x)[i][j].
    let mut cols = [[[0.0; LANES]; PATCH]; O];
    for j in 0..PATCH {
        let col = t([x[0][j], x[1][j], x[2][j], x[3][j]]);
        for i in 0..O {
            cols[i][j] = col[i];
        }
    }
    let mut y = [[[0.0; LANES]; O]; O];
    for i in 0..O {
        y[i] = t(cols[i]);
    }
    y
}

/// `Bᵀ d B` of [`LANES`] patches `d[row][col]`.
#[inline(always)]
fn transform_input(d: &[[Lanes; PATCH]; PATCH]) -> [[Lanes; PATCH]; PATCH] {
    transform_2d(d, input_1d)
}

/// `Aᵀ m A` of [`LANES`] products `m[ξ][ν]`.
#[inline(always)]
fn transform_output(m: &[[Lanes; PATCH]; PATCH]) -> [[Lanes; TILE]; TILE] {
    transform_2d(m, output_1d)
}

/// Copies `LANES.min(src.len())` values: a fixed-size copy (vector moves) when whole.
#[inline(always)]
fn copy_lanes(dst: &mut [f32], src: &[f32]) {
    if let (Some(d), Some(s)) = (dst.first_chunk_mut::<LANES>(), src.first_chunk::<LANES>()) {
        *d = *s;
    } else {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s;
        }
    }
}

/// Winograd convolution of `x` by transformed weights `u` ([`winograd_weights`]), for a
/// layer [`Conv2d::winograd_applies`] accepts; `scratch` holds at least
/// [`Conv2d::winograd_scratch_len`] floats.
pub fn conv2d_winograd(
    p: &Conv2d,
    x: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    assert!(p.winograd_applies(), "conv2d_winograd: {p:?}");
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    assert_eq!(x.len(), p.n * p.c_in * plane_in, "conv2d_winograd: X");
    assert_eq!(u.len(), PRODUCTS * p.c_out * p.c_in, "conv2d_winograd: U");
    assert_eq!(y.len(), p.n * p.c_out * plane_out, "conv2d_winograd: Y");
    assert!(
        p.h_out + 2 == p.h_in + p.pads[0] + p.pads[2]
            && p.w_out + 2 == p.w_in + p.pads[1] + p.pads[3],
        "conv2d_winograd: output size, {p:?}"
    );
    if let Some(b) = bias {
        assert_eq!(b.len(), p.c_out, "conv2d_winograd: bias");
    }
    // A build over declared ranges lends the scratch its largest size: use a prefix.
    assert!(
        scratch.len() >= p.winograd_scratch_len(),
        "conv2d_winograd: scratch"
    );
    let scratch = &mut scratch[..p.winograd_scratch_len()];
    if y.is_empty() {
        return;
    }
    let [tile_rows, tiles_w] = p.winograd_tiles();
    // Blocks are groups of whole tile rows (or pieces of one row, when a row is wider
    // than a block), the same on any number of threads, so each product, and each
    // output's sum, is the same.
    let group = (p.winograd_block() / tiles_w).max(1);
    let groups = tile_rows.div_ceil(group);
    let threads = threads::current();
    for (x, y) in x
        .chunks_exact(p.c_in * plane_in)
        .zip(y.chunks_exact_mut(p.c_out * plane_out))
    {
        let y = gemm::row_major_mut(y, p.c_out, plane_out, plane_out);
        let layer = Layer { p, x, u, bias };
        if threads == 1 || groups < threads {
            layer.tile_rows(0..tile_rows, group, y, scratch, true);
            continue;
        }
        // Thread `t` takes groups `t * groups / threads ..`: output columns of `y` (its
        // rows are channels, its columns the positions of the plane).
        let first_row = |t: usize| {
            let tile_row = (t * groups / threads * group).min(tile_rows);
            (TILE * tile_row).min(p.h_out) * p.w_out
        };
        let runs = (0..threads).map(|t| first_row(t)..first_row(t + 1));
        let macs = PRODUCTS * p.c_out * p.c_in * tile_rows * tiles_w;
        threads::for_each_with_scratch(
            Split::new(y, false, runs),
            macs,
            scratch,
            |(cols, out), scratch| {
                let rows = cols.start / p.w_out / TILE..cols.end.div_ceil(p.w_out * TILE);
                layer.tile_rows(rows, group, out, scratch, false);
            },
        );
    }
}

/// One image of a layer: its input, weights and bias.
struct Layer<'a> {
    p: &'a Conv2d,
    x: &'a [f32],
    u: &'a [f32],
    bias: Option<&'a [f32]>,
}

/// A run of consecutive tiles within one tile row: tile row `row`, tile columns
/// `cols`, at column `at` of the block's matrices.
#[derive(Clone)]
struct Segment {
    row: usize,
    cols: Range<usize>,
    at: usize,
}

impl Layer<'_> {
    /// Computes output tile rows `rows` into `out` (`c_out` rows over the output
    /// positions of those tile rows), a block for every `group` tile rows from the
    /// first, or for every [`Conv2d::winograd_block`] tiles of a row when `group` is 1.
    /// `share` lets each product be shared among the run's threads.
    fn tile_rows(
        &self,
        rows: Range<usize>,
        group: usize,
        mut out: faer::MatMut<'_, f32>,
        scratch: &mut [f32],
        share: bool,
    ) {
        let p = self.p;
        let [_, tiles_w] = p.winograd_tiles();
        let block = p.winograd_block();
        let (products, patch_rows) = scratch.split_at_mut(p.winograd_floats_per_tile() * block);
        let first_out_row = TILE * rows.start;
        // A row wider than a block is cut into blocks and a last, narrower piece: equal
        // pieces (narrower products) measured slower, 1.12× against 1.28× im2col's
        // speed on 128 channels at 112×112.
        let piece = block.min(tiles_w);
        let blocks = rows.clone().step_by(group).flat_map(|r| {
            let end = (r + group).min(rows.end) * tiles_w;
            let step = if group == 1 { piece } else { end - r * tiles_w };
            (r * tiles_w..end)
                .step_by(step)
                .map(move |start| start..(start + step).min(end))
        });
        for tiles in blocks {
            let n = tiles.len();
            let segments = segments(tiles, tiles_w);
            // `V[f]` lies at `v_at + f·c_in·n` and `M[f]` at `f·c_out·n`, in one region:
            // `M[f]` may cover `V[g]` for `g < f`, already multiplied, never `V[f..]`.
            let (v_len, m_len) = (p.c_in * n, p.c_out * n);
            let v_at = if m_len <= v_len {
                m_len
            } else {
                PRODUCTS * m_len - (PRODUCTS - 1) * v_len
            };
            let region = &mut products[..v_at + PRODUCTS * v_len];
            vectorize!({
                let v = &mut region[v_at..];
                self.transform_inputs(segments.clone(), n, v, patch_rows)
            });
            for f in 0..PRODUCTS {
                let (low, high) = region.split_at_mut(v_at + f * v_len);
                let (m, v) = (&mut low[f * m_len..][..m_len], &high[..v_len]);
                let u = Operand::rows(&self.u[f * p.c_out * p.c_in..], p.c_in);
                let lhs = u.view(p.c_out, p.c_in);
                let rhs = Operand::rows(v, n).view(p.c_in, n);
                let dst = gemm::row_major_mut(m, p.c_out, n, n);
                if share {
                    gemm::product_shared(dst, faer::Accum::Replace, lhs, rhs, 1.0);
                } else {
                    gemm::product(dst, faer::Accum::Replace, lhs, rhs, 1.0);
                }
            }
            vectorize!({
                for (co, y) in out.as_mut().row_iter_mut().enumerate() {
                    let y = y.try_as_row_major_mut().expect("rows are contiguous");
                    let rows = Rows {
                        y: y.as_slice_mut(),
                        first: first_out_row,
                    };
                    let m = &region[..PRODUCTS * m_len];
                    self.transform_outputs(co, segments.clone(), n, m, rows);
                }
            });
        }
    }

    /// Writes `V[ξν][ci][t]` (rows `n` long) for the block's tiles: each patch row is
    /// copied between zero columns into `patch_rows`, then [`LANES`] tiles at a time
    /// are gathered (stride 2 along the row) and transformed.
    #[inline(always)]
    fn transform_inputs(
        &self,
        segments: impl Iterator<Item = Segment> + Clone,
        n: usize,
        v: &mut [f32],
        patch_rows: &mut [f32],
    ) {
        let p = self.p;
        let plane = p.h_in * p.w_in;
        let row_len = patch_rows.len() / PATCH;
        for (ci, x) in self.x.chunks_exact(plane).enumerate() {
            for s in segments.clone() {
                // Patch columns from the segment's first tile, rounded up to whole
                // lane groups: input column `c` is patch column `c + pad_left - 2·cols.start`.
                let width = TILE * s.cols.len().next_multiple_of(LANES) + PATCH - TILE;
                let c0 = (TILE * s.cols.start) as isize - p.pads[1] as isize;
                for (i, patch_row) in patch_rows.chunks_exact_mut(row_len).enumerate() {
                    let patch_row = &mut patch_row[..width];
                    let ih = (TILE * s.row + i) as isize - p.pads[0] as isize;
                    if ih < 0 || ih >= p.h_in as isize {
                        patch_row.fill(0.0);
                        continue;
                    }
                    let src = &x[ih as usize * p.w_in..][..p.w_in];
                    // Columns `lo..hi` of the patch row lie inside the input row.
                    let lo = (-c0).clamp(0, width as isize) as usize;
                    let hi = (p.w_in as isize - c0).clamp(lo as isize, width as isize) as usize;
                    patch_row[..lo].fill(0.0);
                    patch_row[hi..].fill(0.0);
                    let from = (c0 + lo as isize) as usize;
                    patch_row[lo..hi].copy_from_slice(&src[from..from + hi - lo]);
                }
                for l0 in (0..s.cols.len()).step_by(LANES) {
                    let mut d = [[[0.0; LANES]; PATCH]; PATCH];
                    for (i, d) in d.iter_mut().enumerate() {
                        let row = &patch_rows[i * row_len + TILE * l0..];
                        let row: &[f32; TILE * LANES + 2] = row.first_chunk().expect("slack");
                        for (j, d) in d.iter_mut().enumerate() {
                            for (l, d) in d.iter_mut().enumerate() {
                                *d = row[TILE * l + j];
                            }
                        }
                    }
                    let t = transform_input(&d);
                    let count = LANES.min(s.cols.len() - l0);
                    let at = ci * n + s.at + l0;
                    for (f, vf) in v.chunks_exact_mut(p.c_in * n).enumerate() {
                        let to = &mut vf[at..at + count];
                        copy_lanes(to, &t[f / PATCH][f % PATCH]);
                    }
                }
            }
        }
    }

    /// Transforms output channel `co`'s products `M[ξν][co][t]` (rows `n` long) of the
    /// block's tiles into its output rows, with bias and activation.
    #[inline(always)]
    fn transform_outputs(
        &self,
        co: usize,
        segments: impl Iterator<Item = Segment>,
        n: usize,
        m: &[f32],
        rows: Rows<'_>,
    ) {
        let p = self.p;
        let bias = self.bias.map_or(0.0, |b| b[co]);
        for s in segments {
            for l0 in (0..s.cols.len()).step_by(LANES) {
                let count = LANES.min(s.cols.len() - l0);
                let at = co * n + s.at + l0;
                let mut prods = [[[0.0; LANES]; PATCH]; PATCH];
                for (f, mf) in m.chunks_exact(p.c_out * n).enumerate() {
                    copy_lanes(&mut prods[f / PATCH][f % PATCH], &mf[at..at + count]);
                }
                let tile = transform_output(&prods);
                for (i, tile_row) in tile.iter().enumerate() {
                    let oh = TILE * s.row + i;
                    if oh >= p.h_out {
                        break;
                    }
                    // Columns of the tiles' outputs in this row, interleaved.
                    let mut out = [0.0; TILE * LANES];
                    for (k, o) in out.iter_mut().enumerate() {
                        *o = tile_row[k % TILE][k / TILE];
                    }
                    bias_activate(p.activation, bias, &mut out);
                    let ow = TILE * (s.cols.start + l0);
                    let len = (TILE * count).min(p.w_out - ow);
                    let y = &mut rows.y[(oh - rows.first) * p.w_out + ow..][..len];
                    match (y.first_chunk_mut::<{ TILE * LANES }>(), len == TILE * LANES) {
                        (Some(y), true) => *y = out,
                        _ => y.copy_from_slice(&out[..len]),
                    }
                }
            }
        }
    }
}

/// One output channel's rows `first..` of the plane, as a slice.
struct Rows<'a> {
    y: &'a mut [f32],
    first: usize,
}

/// The runs of tiles `tiles` (row-major, `tiles_w` a row) within single tile rows.
fn segments(tiles: Range<usize>, tiles_w: usize) -> impl Iterator<Item = Segment> + Clone {
    let start = tiles.start;
    let mut k = start;
    std::iter::from_fn(move || {
        if k >= tiles.end {
            return None;
        }
        let (row, col) = (k / tiles_w, k % tiles_w);
        let len = (tiles_w - col).min(tiles.end - k);
        let s = Segment {
            row,
            cols: col..col + len,
            at: k - start,
        };
        k += len;
        Some(s)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transforms compute the 2×2 outputs of a 3×3 window over a 4×4 patch:
    /// `Aᵀ ((G g Gᵀ) ⊙ (Bᵀ d B)) A` against the direct sums, for single tiles.
    #[test]
    fn transforms_give_the_direct_convolution_of_a_patch() {
        let g: Vec<f32> = (0..9).map(|k| (k as f32 - 4.0) * 0.37).collect();
        let d: [[f32; PATCH]; PATCH] =
            std::array::from_fn(|i| std::array::from_fn(|j| ((i * 7 + j * 3) % 5) as f32 - 1.5));
        let u = winograd_weights(1, 1, &g);
        let dl: [[Lanes; PATCH]; PATCH] = std::array::from_fn(|i| {
            std::array::from_fn(|j| std::array::from_fn(|l| d[i][j] * (l + 1) as f32))
        });
        let v = transform_input(&dl);
        let m: [[Lanes; PATCH]; PATCH] = std::array::from_fn(|xi| {
            std::array::from_fn(|nu| std::array::from_fn(|l| u[xi * PATCH + nu] * v[xi][nu][l]))
        });
        let y = transform_output(&m);
        for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            for (l, &got) in y[i][j].iter().enumerate() {
                let want: f32 = (0..3)
                    .flat_map(|ki| (0..3).map(move |kj| (ki, kj)))
                    .map(|(ki, kj)| g[ki * 3 + kj] * d[i + ki][j + kj] * (l + 1) as f32)
                    .sum();
                assert!(
                    (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "{got} {want}"
                );
            }
        }
    }

    #[test]
    fn segments_cut_a_block_at_tile_rows() {
        let s: Vec<_> = segments(5..17, 6).map(|s| (s.row, s.cols, s.at)).collect();
        assert_eq!(s, [(0, 5..6, 0), (1, 0..6, 1), (2, 0..5, 7)]);
    }
}
