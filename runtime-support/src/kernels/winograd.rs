//! Winograd convolution, F(2×2, 3×3) and F(4×4, 3×3): 3×3 windows at stride 1, one
//! group.
//!
//! A direct or im2col convolution spends 9 multiply-adds per output, input channel and
//! output channel. Winograd's minimal filtering computes a `T×T` tile of outputs from a
//! `P×P` patch of input (`P = T + 2`) with `P²`: each patch `d` and each kernel `g` are
//! transformed, `V = Bᵀ d B` and `U = G g Gᵀ`, multiplied elementwise and summed over
//! input channels, and the `P×P` sum `M` is transformed back, `Y = Aᵀ M A`. The sum
//! over input channels of element `(ξ, ν)` of the products, for every tile and output
//! channel at once, is a matrix product `M[ξν] = U[ξν] · V[ξν]` (`c_out × c_in` by
//! `c_in × tiles`): `P²` products with 2.25 (F(2×2): 16 for 4 outputs) or 4 (F(4×4):
//! 36 for 16) times fewer multiply-adds in all than the convolution's one. The kernel
//! transform `U` is done at compile time ([`winograd_weights`], called by the
//! compiler), so the weights blob holds `U[ξν][c_out][c_in]`; which variant a layer
//! runs as is the compiler's choice ([`Conv2d::winograd`]), passed to the kernel.
//!
//! Tiles are taken in blocks of at most [`Conv2d::winograd_block`] (whole tile rows, or
//! pieces of one row wider than a block) so that the transformed input and the
//! products of one block stay small: the block's input is transformed into `V` in the
//! scratch, multiplied into `M`, and `M` transformed into the output with bias and
//! activation. Parts of the input a
//! patch reaches outside the image (the padding, and the last tile where the output's
//! side is not a multiple of `T`) read as zeros: each patch row is first copied between
//! zero columns.
//!
//! With worker threads, each thread takes a run of whole blocks of tile rows (output
//! rows no other thread writes), in its own scratch; a layer with fewer blocks than
//! threads shares each of its products instead. Blocks are the same on any number
//! of threads, so the outputs are too, bit for bit.
//!
//! Rounding differs from the direct sum: F(2×2)'s transforms add and subtract inputs
//! (coefficients 0, ±1 and ±½, exact in binary), so each output's error is a few ulps
//! of its terms' magnitude, as for any reordered f32 sum; F(4×4)'s coefficients reach
//! 8 (and `G`'s ⅙ and 1/24 are rounded), which makes its error about four times
//! F(2×2)'s (1e-5 of the largest output on 256 channels of normal data, against
//! 3e-6).

use std::ops::Range;

use super::depthwise::Transpose;
use super::elementwise::bias_activate;
use super::gemm::{self, Operand, Split};
use super::simd::vectorize;
use crate::params::{Conv2d, WINOGRAD_LANES, Winograd};
use crate::threads;

/// Tiles transformed together, one per vector lane.
const LANES: usize = WINOGRAD_LANES;

/// The largest tile side, for buffers of either variant's output rows.
const MAX_TILE: usize = 4;

/// Lanes of one patch position (or product) for [`LANES`] tiles.
type Lanes = [f32; LANES];

/// A variant's transforms: tiles of `T×T` outputs, patches of `P×P` inputs.
///
/// The transforms are plain loops over fixed-size arrays, not `array::from_fn`, whose
/// helpers are not inlined into the vectorised caller.
trait Transforms<const T: usize, const P: usize>: Sync {
    /// `G`, which maps a 3-tap kernel row to the `P` points of the transform.
    const G: [[f64; 3]; P];
    /// `Bᵀ x` along one axis of a patch.
    fn input_1d(x: [Lanes; P]) -> [Lanes; P];
    /// `Aᵀ x` along one axis of a product.
    fn output_1d(x: [Lanes; P]) -> [Lanes; T];
}

/// F(2×2, 3×3), points 0, 1, −1, ∞.
struct F2;

impl Transforms<2, 4> for F2 {
    const G: [[f64; 3]; 4] = [
        [1.0, 0.0, 0.0],
        [0.5, 0.5, 0.5],
        [0.5, -0.5, 0.5],
        [0.0, 0.0, 1.0],
    ];

    /// `Bᵀ = [[1,0,-1,0], [0,1,1,0], [0,-1,1,0], [0,1,0,-1]]`.
    #[inline(always)]
    fn input_1d(x: [Lanes; 4]) -> [Lanes; 4] {
        let mut y = [[0.0; LANES]; 4];
        for l in 0..LANES {
            y[0][l] = x[0][l] - x[2][l];
            y[1][l] = x[1][l] + x[2][l];
            y[2][l] = x[2][l] - x[1][l];
            y[3][l] = x[1][l] - x[3][l];
        }
        y
    }

    /// `Aᵀ = [[1,1,1,0], [0,1,-1,-1]]`.
    #[inline(always)]
    fn output_1d(x: [Lanes; 4]) -> [Lanes; 2] {
        let mut y = [[0.0; LANES]; 2];
        for l in 0..LANES {
            y[0][l] = x[0][l] + x[1][l] + x[2][l];
            y[1][l] = x[1][l] - x[2][l] - x[3][l];
        }
        y
    }
}

/// F(4×4, 3×3), points 0, ±1, ±2, ∞ (Lavin and Gray's matrices).
struct F4;

impl Transforms<4, 6> for F4 {
    const G: [[f64; 3]; 6] = [
        [1.0 / 4.0, 0.0, 0.0],
        [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
        [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
        [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
        [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
        [0.0, 0.0, 1.0],
    ];

    /// `Bᵀ = [[4,0,-5,0,1,0], [0,-4,-4,1,1,0], [0,4,-4,-1,1,0], [0,-2,-1,2,1,0],
    /// [0,2,-1,-2,1,0], [0,4,0,-5,0,1]]`, its shared sums first.
    #[inline(always)]
    fn input_1d(x: [Lanes; 6]) -> [Lanes; 6] {
        let mut y = [[0.0; LANES]; 6];
        for l in 0..LANES {
            let [x0, x1, x2, x3, x4, x5] = [x[0][l], x[1][l], x[2][l], x[3][l], x[4][l], x[5][l]];
            let (a, b) = (x4 - 4.0 * x2, x3 - 4.0 * x1);
            let (c, d) = (x4 - x2, 2.0 * (x3 - x1));
            y[0][l] = 4.0 * x0 - 5.0 * x2 + x4;
            y[1][l] = a + b;
            y[2][l] = a - b;
            y[3][l] = c + d;
            y[4][l] = c - d;
            y[5][l] = 4.0 * x1 - 5.0 * x3 + x5;
        }
        y
    }

    /// `Aᵀ = [[1,1,1,1,1,0], [0,1,-1,2,-2,0], [0,1,1,4,4,0], [0,1,-1,8,-8,1]]`.
    #[inline(always)]
    fn output_1d(x: [Lanes; 6]) -> [Lanes; 4] {
        let mut y = [[0.0; LANES]; 4];
        for l in 0..LANES {
            let (s12, d12) = (x[1][l] + x[2][l], x[1][l] - x[2][l]);
            let (s34, d34) = (x[3][l] + x[4][l], x[3][l] - x[4][l]);
            y[0][l] = x[0][l] + s12 + s34;
            y[1][l] = d12 + 2.0 * d34;
            y[2][l] = s12 + 4.0 * s34;
            y[3][l] = d12 + 8.0 * d34 + x[5][l];
        }
        y
    }
}

/// The kernel transform `U = G g Gᵀ` of OIHW 3×3 `weights` (`c_out × c_in × 3 × 3`)
/// for variant `v`, laid out as the matrices the products read: `U[ξ·P + ν][co][ci]`.
/// Computed in f64 and rounded once. The compiler calls this once per layer; it
/// allocates.
pub fn winograd_weights(v: Winograd, c_out: usize, c_in: usize, weights: &[f32]) -> Vec<f32> {
    match v {
        Winograd::F2 => transform_weights::<F2, 2, 4>(c_out, c_in, weights),
        Winograd::F4 => transform_weights::<F4, 4, 6>(c_out, c_in, weights),
    }
}

fn transform_weights<W: Transforms<T, P>, const T: usize, const P: usize>(
    c_out: usize,
    c_in: usize,
    weights: &[f32],
) -> Vec<f32> {
    assert_eq!(weights.len(), c_out * c_in * 9, "winograd_weights: W");
    let mut u = vec![0.0f32; P * P * c_out * c_in];
    for (k, g) in weights.chunks_exact(9).enumerate() {
        // G g (P×3), then (G g) Gᵀ (P×P).
        let mut gg = [[0.0f64; 3]; P];
        for (i, gg) in gg.iter_mut().enumerate() {
            for (j, gg) in gg.iter_mut().enumerate() {
                *gg = (0..3).map(|t| W::G[i][t] * g[t * 3 + j] as f64).sum();
            }
        }
        for xi in 0..P {
            for nu in 0..P {
                let v: f64 = (0..3).map(|t| gg[xi][t] * W::G[nu][t]).sum();
                u[(xi * P + nu) * c_out * c_in + k] = v as f32;
            }
        }
    }
    u
}

/// `Tᵀ x T` of [`LANES`] patches or products `x[row][col]`, for the 1-D transform
/// `t` (`v ↦ Tᵀ v`, from `P` points to `O`): along the columns, then the rows.
#[inline(always)]
fn transform_2d<const P: usize, const O: usize>(
    x: &[[Lanes; P]; P],
    t: impl Fn([Lanes; P]) -> [Lanes; O],
) -> [[Lanes; O]; O] {
    // `cols[i][j]` is (Tᵀ x)[i][j].
    let mut cols = [[[0.0; LANES]; P]; O];
    for j in 0..P {
        let mut col = [[0.0; LANES]; P];
        for (i, c) in col.iter_mut().enumerate() {
            *c = x[i][j];
        }
        let col = t(col);
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

/// Winograd convolution of `x` by transformed weights `u` ([`winograd_weights`] for
/// the same `v`), for a layer of its window ([`Conv2d::winograd_geometry`]); `scratch` holds
/// at least [`Conv2d::winograd_scratch_len`] floats.
pub fn conv2d_winograd(
    p: &Conv2d,
    v: Winograd,
    x: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    assert!(p.winograd_geometry(), "conv2d_winograd: {p:?}");
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    assert_eq!(x.len(), p.n * p.c_in * plane_in, "conv2d_winograd: X");
    assert_eq!(
        u.len(),
        v.products() * p.c_out * p.c_in,
        "conv2d_winograd: U"
    );
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
    let scratch_len = p.winograd_scratch_len(v);
    assert!(scratch.len() >= scratch_len, "conv2d_winograd: scratch");
    let scratch = &mut scratch[..scratch_len];
    if y.is_empty() {
        return;
    }
    match v {
        Winograd::F2 => conv::<F2, 2, 4>(p, v, x, u, bias, y, scratch),
        Winograd::F4 => conv::<F4, 4, 6>(p, v, x, u, bias, y, scratch),
    }
}

/// [`conv2d_winograd`] as one variant, its operands checked.
fn conv<W: Transforms<T, P>, const T: usize, const P: usize>(
    p: &Conv2d,
    v: Winograd,
    x: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    let [tile_rows, tiles_w] = p.winograd_tiles(v);
    let block = p.winograd_block(v);
    // Blocks are groups of whole tile rows (or pieces of one row, when a row is wider
    // than a block), the same on any number of threads, so each product, and each
    // output's sum, is the same.
    let group = (block / tiles_w).max(1);
    let groups = tile_rows.div_ceil(group);
    let threads = threads::current();
    for (x, y) in x
        .chunks_exact(p.c_in * plane_in)
        .zip(y.chunks_exact_mut(p.c_out * plane_out))
    {
        let y = gemm::row_major_mut(y, p.c_out, plane_out, plane_out);
        let layer = Layer::<W, T, P> {
            p,
            block,
            region: p.winograd_floats_per_tile(v) * block,
            tiles_w,
            x,
            u,
            bias,
            transpose: Transpose::for_channels(LANES),
            transforms: std::marker::PhantomData,
        };
        if threads == 1 || groups < threads {
            layer.tile_rows(0..tile_rows, group, y, scratch, true);
            continue;
        }
        // Thread `t` takes groups `t * groups / threads ..`: output columns of `y` (its
        // rows are channels, its columns the positions of the plane).
        let first_row = |t: usize| {
            let tile_row = (t * groups / threads * group).min(tile_rows);
            (T * tile_row).min(p.h_out) * p.w_out
        };
        let runs = (0..threads).map(|t| first_row(t)..first_row(t + 1));
        let macs = P * P * p.c_out * p.c_in * tile_rows * tiles_w;
        threads::for_each_with_scratch(
            Split::new(y, false, runs),
            macs,
            scratch,
            |(cols, out), scratch| {
                let rows = cols.start / p.w_out / T..cols.end.div_ceil(p.w_out * T);
                layer.tile_rows(rows, group, out, scratch, false);
            },
        );
    }
}

/// One image of a layer: its input, weights and bias, and its variant's geometry.
struct Layer<'a, W, const T: usize, const P: usize> {
    p: &'a Conv2d,
    /// Tiles a block ([`Conv2d::winograd_block`]), floats its region of the scratch
    /// (transformed input and products), and tiles a tile row.
    block: usize,
    region: usize,
    tiles_w: usize,
    x: &'a [f32],
    u: &'a [f32],
    bias: Option<&'a [f32]>,
    /// How 8 tiles' patch columns are gathered and output rows interleaved.
    transpose: Transpose,
    transforms: std::marker::PhantomData<W>,
}

/// A run of consecutive tiles within one tile row: tile row `row`, tile columns
/// `cols`, at column `at` of the block's matrices.
#[derive(Clone)]
struct Segment {
    row: usize,
    cols: Range<usize>,
    at: usize,
}

impl<W: Transforms<T, P>, const T: usize, const P: usize> Layer<'_, W, T, P> {
    /// Computes output tile rows `rows` into `out` (`c_out` rows over the output
    /// positions of those tile rows), a block for every `group` tile rows from the
    /// first, or for every block's tiles of a row when `group` is 1. `share` lets each
    /// product be shared among the run's threads.
    fn tile_rows(
        &self,
        rows: Range<usize>,
        group: usize,
        mut out: faer::MatMut<'_, f32>,
        scratch: &mut [f32],
        share: bool,
    ) {
        let p = self.p;
        let (block, tiles_w, products) = (self.block, self.tiles_w, P * P);
        let (region, patch_rows) = scratch.split_at_mut(self.region);
        let first_out_row = T * rows.start;
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
                products * m_len - (products - 1) * v_len
            };
            let region = &mut region[..v_at + products * v_len];
            vectorize!({
                let v = &mut region[v_at..];
                self.transform_inputs(segments.clone(), n, v, patch_rows)
            });
            for f in 0..products {
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
                    let m = &region[..products * m_len];
                    self.transform_outputs(co, segments.clone(), n, m, rows);
                }
            });
        }
    }

    /// Writes `V[ξν][ci][t]` (rows `n` long) for the block's tiles: each patch row is
    /// copied between zero columns into `patch_rows`, then [`LANES`] tiles at a time
    /// are gathered (stride `T` along the row) and transformed.
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
        let row_len = patch_rows.len() / P;
        // Patch row floats a group of lanes reads: 8 from each lane's first column.
        let reach = T * (LANES - 1) + LANES;
        for (ci, x) in self.x.chunks_exact(plane).enumerate() {
            for s in segments.clone() {
                // Patch columns from the segment's first tile, rounded up to whole
                // lane groups: input column `c` is patch column `c + pad_left - T·cols.start`.
                let width = T * s.cols.len().next_multiple_of(LANES) + P - T;
                let c0 = (T * s.cols.start) as isize - p.pads[1] as isize;
                for (i, patch_row) in patch_rows.chunks_exact_mut(row_len).enumerate() {
                    let patch_row = &mut patch_row[..width];
                    let ih = (T * s.row + i) as isize - p.pads[0] as isize;
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
                    // Patch column `j` of lane `l` is row float `T·l + j`: an 8×8
                    // transpose of the rows' runs from `T·l` (the runs' floats past the
                    // patch, `j ≥ P`, are the row's slack, never used).
                    let mut d = [[[0.0; LANES]; P]; P];
                    for (i, d) in d.iter_mut().enumerate() {
                        let row = &patch_rows[i * row_len + T * l0..][..reach];
                        let runs = std::array::from_fn(|l| &row[T * l..][..LANES]);
                        let columns = self.transpose.rows(runs);
                        d.copy_from_slice(&columns[..P]);
                    }
                    let t = transform_2d(&d, W::input_1d);
                    let count = LANES.min(s.cols.len() - l0);
                    let at = ci * n + s.at + l0;
                    for (f, vf) in v.chunks_exact_mut(p.c_in * n).enumerate() {
                        let to = &mut vf[at..at + count];
                        copy_lanes(to, &t[f / P][f % P]);
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
                let mut prods = [[[0.0; LANES]; P]; P];
                for (f, mf) in m.chunks_exact(p.c_out * n).enumerate() {
                    copy_lanes(&mut prods[f / P][f % P], &mf[at..at + count]);
                }
                let tile = transform_2d(&prods, W::output_1d);
                for (i, tile_row) in tile.iter().enumerate() {
                    let oh = T * s.row + i;
                    if oh >= p.h_out {
                        break;
                    }
                    // Columns of the tiles' outputs in this row, interleaved: lane `l`'s
                    // `T` outputs at `T·l`, from an 8×8 transpose (each lane's run of 8
                    // written in turn, its floats past `T` overwritten by the next).
                    let zeros = [0.0; LANES];
                    let runs =
                        std::array::from_fn(|j| tile_row.get(j).unwrap_or(&zeros).as_slice());
                    let mut row = [0.0; MAX_TILE * (LANES - 1) + LANES];
                    for (l, run) in self.transpose.rows(runs).iter().enumerate() {
                        row[T * l..][..LANES].copy_from_slice(run);
                    }
                    let out = &mut row[..T * LANES];
                    bias_activate(p.activation, bias, out);
                    let ow = T * (s.cols.start + l0);
                    let len = (T * count).min(p.w_out - ow);
                    let y = &mut rows.y[(oh - rows.first) * p.w_out + ow..][..len];
                    // A whole row of lanes is a copy of fixed length (vector moves).
                    if len == T * LANES {
                        y.copy_from_slice(out);
                    } else {
                        y.copy_from_slice(&out[..len]);
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

    /// Each variant's transforms compute the `T×T` outputs of a 3×3 window over a
    /// `P×P` patch: `Aᵀ ((G g Gᵀ) ⊙ (Bᵀ d B)) A` against the direct sums, for single
    /// tiles.
    fn transforms_give_the_direct_convolution<W, const T: usize, const P: usize>(v: Winograd)
    where
        W: Transforms<T, P>,
    {
        let g: Vec<f32> = (0..9).map(|k| (k as f32 - 4.0) * 0.37).collect();
        let d: [[f32; P]; P] =
            std::array::from_fn(|i| std::array::from_fn(|j| ((i * 7 + j * 3) % 5) as f32 - 1.5));
        let u = winograd_weights(v, 1, 1, &g);
        let dl: [[Lanes; P]; P] = std::array::from_fn(|i| {
            std::array::from_fn(|j| std::array::from_fn(|l| d[i][j] * (l + 1) as f32))
        });
        let vt = transform_2d(&dl, W::input_1d);
        let m: [[Lanes; P]; P] = std::array::from_fn(|xi| {
            std::array::from_fn(|nu| std::array::from_fn(|l| u[xi * P + nu] * vt[xi][nu][l]))
        });
        let y = transform_2d(&m, W::output_1d);
        for i in 0..T {
            for j in 0..T {
                for (l, &got) in y[i][j].iter().enumerate() {
                    let terms = (0..3)
                        .flat_map(|ki| (0..3).map(move |kj| (ki, kj)))
                        .map(|(ki, kj)| g[ki * 3 + kj] * d[i + ki][j + kj] * (l + 1) as f32);
                    let want: f32 = terms.clone().sum();
                    // A reordered f32 sum: F(2×2)'s error is a few ulps of the result;
                    // F(4×4)'s of the terms' size (its transforms scale them by up to 8
                    // on the way).
                    let size: f32 = match v {
                        Winograd::F2 => want.abs(),
                        Winograd::F4 => terms.map(f32::abs).sum(),
                    };
                    assert!(
                        (got - want).abs() <= 1e-5 * size.max(1.0),
                        "{v:?} ({i}, {j}) lane {l}: {got} {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn transforms_give_the_direct_convolution_of_a_patch() {
        transforms_give_the_direct_convolution::<F2, 2, 4>(Winograd::F2);
        transforms_give_the_direct_convolution::<F4, 4, 6>(Winograd::F4);
    }

    #[test]
    fn segments_cut_a_block_at_tile_rows() {
        let s: Vec<_> = segments(5..17, 6).map(|s| (s.row, s.cols, s.at)).collect();
        assert_eq!(s, [(0, 5..6, 0), (1, 0..6, 1), (2, 0..5, 7)]);
    }
}
