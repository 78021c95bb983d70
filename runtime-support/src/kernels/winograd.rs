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
use super::packed::{self, PANEL, Panels};
use super::simd::vectorize;
use crate::params::{
    Conv2d, WINOGRAD_LANES, WINOGRAD_MAX_BANDS, WINOGRAD_MAX_BLOCK, WINOGRAD_SKEW, Winograd,
};
use crate::threads;

/// Tiles transformed together, one per vector lane.
const LANES: usize = WINOGRAD_LANES;

/// Floats between one product's matrix and the next (`V[f]`, `M[f]`) past its end: a
/// matrix of 16-float rows and 64, 128, … of them is 4 KiB long, and the transforms'
/// 16 or 36 reads or writes 4 KiB apart meet in one set of L1 (64→64 F(4×4) at 56²:
/// 1.07× as many cycles with matrices end to end). It is also where a product's last
/// panel reads past `V[f]`'s last row ([`multiply`]): at least a panel.
const SKEW: usize = WINOGRAD_SKEW;
const _: () = assert!(SKEW >= PANEL);

/// The most products of a variant (F(4×4)'s 36).
const MAX_PRODUCTS: usize = 36;

/// One mutable slice per product matrix (the unused ones empty).
type Matrices<'a> = [&'a mut [f32]; MAX_PRODUCTS];

/// `v` cut into matrices `stride` floats apart.
fn matrices(v: &mut [f32], stride: usize) -> Matrices<'_> {
    let mut chunks = v.chunks_mut(stride);
    std::array::from_fn(|_| chunks.next().unwrap_or_default())
}

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

/// `Tᵀ x T` of [`LANES`] patches or products `x(row, col)`, for the 1-D transform
/// `t` (`v ↦ Tᵀ v`, from `P` points to `O`): along the columns, then the rows. Give
/// `x` and `t` as `#[inline(always)]` closures: a function item is called through its
/// `Fn::call` shim, which LLVM may leave out of line, compiled for the baseline
/// (F(4×4)'s input transform was, at 6 % of a layer's time). `x` reads each point
/// where it lies: the products, gathered first into an array of their own, took 72
/// stores more a tile group and channel.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // `j` is a point's column, not only an index
fn transform_2d<const P: usize, const O: usize>(
    x: impl Fn(usize, usize) -> Lanes,
    t: impl Fn([Lanes; P]) -> [Lanes; O],
) -> [[Lanes; O]; O] {
    // `cols[i][j]` is (Tᵀ x)[i][j].
    let mut cols = [[[0.0; LANES]; P]; O];
    for j in 0..P {
        let mut col = [[0.0; LANES]; P];
        for (i, c) in col.iter_mut().enumerate() {
            *c = x(i, j);
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

/// Winograd convolution of `x` by transformed weights `u` ([`winograd_weights`] for
/// the same `v`), for a layer of its window ([`Conv2d::winograd_geometry`]); `scratch` holds
/// at least [`Conv2d::winograd_least_scratch_len`] floats (and where it holds
/// [`Conv2d::winograd_scratch_len`], a layer of one block is shared among threads by
/// bands of output channels).
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
    // A build over declared ranges lends the scratch its largest size.
    assert!(
        scratch.len() >= p.winograd_least_scratch_len(v),
        "conv2d_winograd: scratch"
    );
    if y.is_empty() {
        return;
    }
    match v {
        Winograd::F2 => conv::<F2, 2, 4>(p, v, x, u, bias, y, scratch),
        Winograd::F4 => conv::<F4, 4, 6>(p, v, x, u, bias, y, scratch),
    }
}

/// A layer the direct kernel may take instead of Winograd
/// ([`Conv2d::direct_rivals_winograd`]), given both its transformed weights `u` and its
/// raw OIHW weights `w`: where the CPU does sixteen-lane multiply-adds at full rate
/// (`simd::full_rate_sixteen_lanes`) the direct kernel computes it from `w`
/// ([`super::conv2d`]), which is faster there, and elsewhere (eight lanes, or Zen 4's
/// halved sixteen) [`conv2d_winograd`] from `u`, which is faster there
/// ([`crate::params::DIRECT_RIVAL_MAX_CHANNELS_IN`] has the figures). The two round
/// differently; which one runs depends on the CPU alone, so a machine gives the same
/// bits on every run.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_winograd_or_direct(
    p: &Conv2d,
    v: Winograd,
    x: &[f32],
    u: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    assert!(
        p.direct_rivals_winograd(),
        "conv2d_winograd_or_direct: not a direct kernel's layer, {p:?}"
    );
    if super::simd::full_rate_sixteen_lanes() {
        super::conv2d(p, x, w, bias, y, scratch);
    } else {
        conv2d_winograd(p, v, x, u, bias, y, scratch);
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
    let groups = RowGroups {
        count: tile_rows.div_ceil(group),
        tile_rows,
    };
    let threads = threads::current();
    let window = p.winograd_window_len(v);
    for (x, y) in x
        .chunks_exact(p.c_in * plane_in)
        .zip(y.chunks_exact_mut(p.c_out * plane_out))
    {
        let y = gemm::row_major_mut(y, p.c_out, plane_out, plane_out);
        let layer = Layer::<W, T, P> {
            p,
            block,
            region: p.winograd_region_len(v),
            tiles_w,
            x,
            u,
            bias,
            transpose: Transpose::for_channels(LANES),
            transforms: std::marker::PhantomData,
        };
        let banded = p.winograd_banded_len(v);
        if threads > 1 && groups.count == 1 && banded > 0 && scratch.len() >= banded + window {
            layer.banded(tile_rows, y, scratch, threads.min(WINOGRAD_MAX_BANDS));
            continue;
        }
        if threads == 1 || groups.count < threads {
            layer.tile_rows(groups, 0..groups.count, group == 1, y, scratch, true);
            continue;
        }
        // Thread `t` takes the groups from the first that starts at or past its share
        // of tile rows, `t · tile_rows / threads`: output columns of `y` (its rows are
        // channels, its columns the positions of the plane). By count of groups, two
        // threads took 2 rows and 5 of 2, 2 and 3 (32→128 at 27²).
        let first_group = |t: usize| {
            let row = (t * tile_rows).div_ceil(threads);
            (0..groups.count)
                .find(|&g| groups.rows(g).start >= row)
                .unwrap_or(groups.count)
        };
        let first_row = |t: usize| {
            let tile_row = groups.rows(first_group(t)).start;
            (T * tile_row).min(p.h_out) * p.w_out
        };
        let runs = (0..threads).map(|t| first_row(t)..first_row(t + 1));
        let runs_groups = (0..threads).map(|t| first_group(t)..first_group(t + 1));
        let macs = P * P * p.c_out * p.c_in * tile_rows * tiles_w;
        threads::for_each_with_scratch(
            Split::new(y, false, runs).zip(runs_groups),
            macs,
            scratch,
            |((_, out), run), scratch| {
                layer.tile_rows(groups, run, group == 1, out, scratch, false);
            },
        );
    }
}

/// A layer's tile rows cut into `count` groups as even as whole rows allow (blocks of
/// rows, or one row each where a row is cut into blocks): 7 rows in three groups are
/// 2, 2 and 3, not 3, 3 and 1. A block multiplies its tiles in panels of 16 (one
/// row of 7 tiles, narrower than a panel, went to faer, 2.4× the cost a tile), so
/// 32→128 at 27² (F(4×4), 49 tiles) took 32 + 32 + 8 columns where it now takes 32 +
/// 16 + 16.
#[derive(Clone, Copy)]
struct RowGroups {
    count: usize,
    tile_rows: usize,
}

impl RowGroups {
    /// Tile rows of group `g` (`g == count` gives the end).
    fn rows(self, g: usize) -> Range<usize> {
        let at = |g: usize| g * self.tile_rows / self.count;
        at(g)..at(g + 1).min(self.tile_rows)
    }
}

/// `M[f] = U[f] · V[f]` for one product `f` of a block: `u` its weights (`y.nrows() ×
/// c_in`), `v` its transformed input (`c_in` rows `ld` apart, then [`SKEW`] floats),
/// read in place by the packed product's micro-kernel, whose last panel may read up
/// to a panel past a row's `y.ncols()` tiles: the next row's, or the skew (lanes that
/// are never stored). `shared` shares `y`'s rows among the run's threads.
///
/// `u` is read once a block, from memory in a model (F(4×4)'s weights are four times
/// the layer's): each block of rows asks for the next one's as it goes
/// (`packed::fetch_ahead`), where the hardware prefetchers follow up to twelve rows at
/// once late. One Zen 5 core, chains of 30 layers (weights from memory): 192→192 at
/// 14² (F(4×4)) 14.6 → 9.3 ms, 320→320 at 7² (F(2×2)) 20.6 → 9.0 ms; one layer alone,
/// its weights in cache, pays for the fetches: 192→192 at 14² 0.258 → 0.280 ms.
fn multiply(u: &[f32], c_in: usize, v: &[f32], ld: usize, y: faer::MatMut<'_, f32>, shared: bool) {
    if ld < PANEL {
        // Rows shorter than a panel (a block of at most 8 tiles).
        let lhs = Operand::rows(u, c_in).view(y.nrows(), c_in);
        let rhs = Operand::rows(v, ld).view(c_in, y.ncols());
        return gemm::product(y, faer::Accum::Replace, lhs, rhs, 1.0);
    }
    let v = Panels::rows(v, ld);
    if shared {
        packed::product_shared(u, c_in, v, c_in, y, false, true);
    } else {
        packed::product(u, c_in, v, c_in, y, false, true);
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

impl<W: Transforms<T, P>, const T: usize, const P: usize> Layer<'_, W, T, P> {
    /// Computes the tile rows of groups `run` of `groups` into `out` (`c_out` rows
    /// over the output positions of those tile rows), a block for each group, or where
    /// `pieces` (a group is one row, wider than a block) for every block's tiles of
    /// it. `share` lets each product be shared among the run's threads.
    fn tile_rows(
        &self,
        groups: RowGroups,
        run: Range<usize>,
        pieces: bool,
        mut out: faer::MatMut<'_, f32>,
        scratch: &mut [f32],
        share: bool,
    ) {
        let p = self.p;
        let (block, tiles_w, products) = (self.block, self.tiles_w, P * P);
        let (region, window) = scratch.split_at_mut(self.region);
        let first_out_row = T * groups.rows(run.start).start;
        // A row wider than a block is cut into blocks and a last, narrower piece: equal
        // pieces (narrower products) measured slower, 1.12× against 1.28× im2col's
        // speed on 128 channels at 112×112.
        let piece = block.min(tiles_w);
        let blocks = run.flat_map(|g| {
            let rows = groups.rows(g);
            let (start, end) = (rows.start * tiles_w, rows.end * tiles_w);
            let step = if pieces { piece } else { end - start };
            (start..end)
                .step_by(step)
                .map(move |start| start..(start + step).min(end))
        });
        for tiles in blocks {
            let tiles = BlockTiles::new::<T, P>(p, tiles, tiles_w, first_out_row);
            let (n, ld) = (tiles.n, tiles.ld);
            // `V[f]` lies at `v_at + f·vs` and `M[f]` at `f·ms`, in one region: `M[f]`
            // may cover `V[g]` for `g < f`, already multiplied, never `V[f..]`.
            let (v_len, m_len) = (p.c_in * ld, p.c_out * ld);
            let (vs, ms) = (v_len + SKEW, m_len + SKEW);
            let v_at = m_len + (products - 1) * ms.saturating_sub(vs);
            let region = &mut region[..v_at + products * vs];
            vectorize!({
                let mut v = matrices(&mut region[v_at..], vs);
                self.transform_inputs(&tiles, 0..p.c_in, &mut v, window)
            });
            for f in 0..products {
                let (low, high) = region.split_at_mut(v_at + f * vs);
                let (m, v) = (&mut low[f * ms..][..m_len], &high[..vs]);
                let u = &self.u[f * p.c_out * p.c_in..][..p.c_out * p.c_in];
                let dst = gemm::row_major_mut(m, p.c_out, n, ld);
                multiply(u, p.c_in, v, ld, dst, share);
            }
            vectorize!({
                for (co, y) in out.as_mut().row_iter_mut().enumerate() {
                    let y = y.try_as_row_major_mut().expect("rows are contiguous");
                    let m = &region[..products * ms];
                    self.transform_outputs(co, co, &tiles, m, ms, y.as_slice_mut());
                }
            });
        }
    }

    /// The whole plane as one block, its products shared among threads by `bands`
    /// bands of output channels: the input is transformed on this thread into `V`
    /// (each `V[f]` its own), then each band's thread multiplies all `P²` products for
    /// its rows into matrices of its own and transforms them into its channels'
    /// outputs: one hand-off a layer where sharing each product makes `P²`. Each sum
    /// is the one [`Self::tile_rows`] makes (the same products by rows).
    fn banded(
        &self,
        tile_rows: usize,
        out: faer::MatMut<'_, f32>,
        scratch: &mut [f32],
        bands: usize,
    ) {
        let p = self.p;
        let products = P * P;
        let tiles = BlockTiles::new::<T, P>(p, 0..tile_rows * self.tiles_w, self.tiles_w, 0);
        let (n, ld) = (tiles.n, tiles.ld);
        let vs = p.c_in * ld + SKEW;
        let (v, rest) = scratch.split_at_mut(products * vs);
        let (m, window) = rest.split_at_mut(products * (p.c_out * ld + bands * SKEW));
        // The input transform by bands of input channels, each with its rows of every
        // `V[f]` and a window of its own.
        let per = p.c_in.div_ceil(bands);
        let (mut rest, mut start) = (matrices(v, vs), 0);
        let parts = std::iter::from_fn(move || {
            let channels = start..(start + per).min(p.c_in);
            if channels.is_empty() {
                return None;
            }
            start = channels.end;
            let len = channels.len() * ld;
            let rows = std::array::from_fn(|f| {
                let matrix = std::mem::take(&mut rest[f]);
                let (rows, tail) = matrix.split_at_mut(len.min(matrix.len()));
                rest[f] = tail;
                rows
            });
            Some((channels, rows))
        });
        // The transform's operations (`P` for each of `P²` points a tile and channel),
        // each weighed as `SLOW_OP_MACS`: counted as one, F(4×4)'s 64 channels of 16
        // tiles (221k) fell under `MIN_WORK` and ran on this thread alone while the
        // other waited (64→256 at 13² on 2 threads: 0.149–0.152 → 0.136 ms; 48→192:
        // 0.098–0.124 → 0.090 ms).
        let work = p.c_in * n * products * P * threads::SLOW_OP_MACS;
        let window = &mut window[..tiles.window_rows * tiles.window_cols];
        threads::for_each_with_scratch(parts, work, window, |(channels, mut rows), window| {
            vectorize!({ self.transform_inputs(&tiles, channels, &mut rows, window) })
        });
        let v = &*v;
        // Bands of whole row blocks of 8, as even as that allows; each with its rows
        // of every product (`b·ld` floats and a skew apart) and of the output.
        let per = p.c_out.div_ceil(bands).next_multiple_of(8);
        let (mut m, mut out, mut start) = (m, Some(out), 0);
        let parts = std::iter::from_fn(move || {
            let rows = start..(start + per).min(p.c_out);
            if rows.is_empty() {
                return None;
            }
            start = rows.end;
            let ms = rows.len() * ld + SKEW;
            let (band, rest) = std::mem::take(&mut m).split_at_mut(products * ms);
            m = rest;
            let (y, rest) = out.take()?.split_at_row_mut(rows.len());
            out = Some(rest);
            Some((rows, band, ms, y))
        });
        let macs = products * p.c_out * p.c_in * n;
        threads::for_each(parts, macs, |(rows, band, ms, mut y)| {
            for f in 0..products {
                let u = &self.u[(f * p.c_out + rows.start) * p.c_in..][..rows.len() * p.c_in];
                let dst = gemm::row_major_mut(&mut band[f * ms..], rows.len(), n, ld);
                multiply(u, p.c_in, &v[f * vs..][..vs], ld, dst, false);
            }
            vectorize!({
                for (i, y) in y.as_mut().row_iter_mut().enumerate() {
                    let y = y.try_as_row_major_mut().expect("rows are contiguous");
                    self.transform_outputs(rows.start + i, i, &tiles, band, ms, y.as_slice_mut());
                }
            });
        });
    }

    /// Writes `V[ξν][ci][t]` (rows `ld` long) for the block's tiles and input channels
    /// `channels`, into `v[ξ·P + ν]` from its row `channels.start`: each channel's
    /// window is copied into `window` (zeros outside the image), then [`LANES`] tiles
    /// at a time are gathered (their patches' rows transposed) and transformed.
    #[inline(always)]
    fn transform_inputs(
        &self,
        tiles: &BlockTiles,
        channels: Range<usize>,
        v: &mut Matrices<'_>,
        window: &mut [f32],
    ) {
        let p = self.p;
        let plane = p.h_in * p.w_in;
        let cols = tiles.window_cols;
        let window = &mut window[..tiles.window_rows * cols];
        let x = &self.x[channels.start * plane..channels.end * plane];
        // Columns `lo..hi` of a window row lie inside the input row, from its column
        // `from` on. The padding (those columns and the rows outside the image) is the
        // same for every channel: zeroed once here, never written by a channel. Filled
        // row by row, it took two calls of `memset` a row and channel (6 % of 128→32
        // at 28²).
        let lo = (-tiles.left).clamp(0, cols as isize) as usize;
        let hi = (p.w_in as isize - tiles.left).clamp(lo as isize, cols as isize) as usize;
        let from = (tiles.left + lo as isize) as usize;
        window.fill(0.0);
        for (ci, x) in x.chunks_exact(plane).enumerate() {
            for (i, row) in window.chunks_exact_mut(cols).enumerate() {
                let ih = tiles.top + i as isize;
                if ih < 0 || ih >= p.h_in as isize {
                    continue;
                }
                let src = &x[ih as usize * p.w_in..][..p.w_in];
                row[lo..hi].copy_from_slice(&src[from..from + hi - lo]);
            }
            for (g, patches) in tiles.patch[..tiles.ld].chunks_exact(LANES).enumerate() {
                // Patch column `j` of lane `l` is window float `patches[l] + j` of the
                // patch's row: an 8×8 transpose of the rows' runs (the runs' floats
                // past the patch, `j ≥ P`, are never used).
                let mut d = [[[0.0; LANES]; P]; P];
                for (i, d) in d.iter_mut().enumerate() {
                    let mut runs: [&[f32]; LANES] = [&[]; LANES];
                    for (run, &at) in runs.iter_mut().zip(patches) {
                        *run = &window[at + i * cols..][..LANES];
                    }
                    let columns = self.transpose.rows(runs);
                    *d = columns[..P].try_into().expect("P columns");
                }
                let t = transform_2d(
                    #[inline(always)]
                    |i, j| d[i][j],
                    #[inline(always)]
                    |x| W::input_1d(x),
                );
                let at = ci * tiles.ld + g * LANES;
                for (f, vf) in v[..P * P].iter_mut().enumerate() {
                    let to: &mut Lanes = (&mut vf[at..at + LANES]).try_into().expect("lanes");
                    *to = t[f / P][f % P];
                }
            }
        }
    }

    /// Transforms output channel `co`'s products, row `row` of `M[ξν]` (`ms` floats
    /// apart, rows `ld` long), for the block's tiles into its output rows `y`, with
    /// bias and activation.
    #[inline(always)]
    fn transform_outputs(
        &self,
        co: usize,
        row: usize,
        tiles: &BlockTiles,
        m: &[f32],
        ms: usize,
        y: &mut [f32],
    ) {
        let p = self.p;
        let bias = self.bias.map_or(0.0, |b| b[co]);
        let zeros = [0.0; LANES];
        for g in (0..tiles.n).step_by(LANES) {
            let at = row * tiles.ld + g;
            let mut tile = transform_2d(
                #[inline(always)]
                |i, j| {
                    let f = i * P + j;
                    m[f * ms + at..][..LANES].try_into().expect("lanes")
                },
                #[inline(always)]
                |x| W::output_1d(x),
            );
            bias_activate(
                p.activation,
                bias,
                tile.as_flattened_mut().as_flattened_mut(),
            );
            for (i, tile_row) in tile.iter().enumerate() {
                // Lane `l`'s `T` outputs of this row are the first of run `l`.
                let mut runs: [&[f32]; LANES] = [&zeros; LANES];
                for (run, out) in runs.iter_mut().zip(tile_row) {
                    *run = out;
                }
                let lanes = self.transpose.rows(runs);
                let count = LANES.min(tiles.n - g);
                for (l, run) in lanes[..count].iter().enumerate() {
                    let k = g + l;
                    let [rows, cols] = tiles.extent[k];
                    if i >= rows as usize {
                        continue;
                    }
                    let y = &mut y[tiles.output[k] + i * p.w_out..];
                    // A whole tile's row as one fixed-size store, a partial one float
                    // by float. Two copies (`copy_from_slice`, or a loop LLVM takes
                    // for one) were merged into a call of `memcpy` per tile row.
                    let run: &[f32; T] = run[..T].try_into().expect("T lanes");
                    let cols = cols as usize;
                    if cols == T {
                        let to: &mut [f32; T] = (&mut y[..T]).try_into().expect("T outputs");
                        *to = *run;
                    } else {
                        for (j, &from) in run.iter().enumerate() {
                            if j < cols {
                                y[j] = from;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A block's tiles in the order the transforms take them, [`LANES`] at a time (across
/// tile rows where a row has fewer): where each one's patch starts in the block's input
/// window, where its outputs start, and how many of them lie inside the plane.
struct BlockTiles {
    /// Tiles, and the length of the block's matrix rows: `n` in whole lane groups.
    n: usize,
    ld: usize,
    /// The window: its first input row and column (negative in the padding), its
    /// size. It covers the block's tile rows and columns, and 8 floats from the
    /// last lane's first column (the transpose's reach).
    top: isize,
    left: isize,
    window_rows: usize,
    window_cols: usize,
    /// Per tile: its patch's first float in the window (for the lanes past `n`, the
    /// first tile's), its first output in the output rows, and `[rows, columns]` of
    /// its outputs inside the plane.
    patch: [usize; WINOGRAD_MAX_BLOCK],
    output: [usize; WINOGRAD_MAX_BLOCK],
    extent: [[u8; 2]; WINOGRAD_MAX_BLOCK],
}

impl BlockTiles {
    /// Tiles `tiles` (row-major, `tiles_w` a row: whole tile rows, or part of one) of
    /// a layer whose output rows start at row `first_out_row` of the plane.
    fn new<const T: usize, const P: usize>(
        p: &Conv2d,
        tiles: Range<usize>,
        tiles_w: usize,
        first_out_row: usize,
    ) -> Self {
        let (n, ld) = (tiles.len(), tiles.len().next_multiple_of(LANES));
        assert!(ld <= WINOGRAD_MAX_BLOCK, "winograd: block of {n} tiles");
        let (first, last) = (tiles.start, tiles.end - 1);
        let (row0, row1) = (first / tiles_w, last / tiles_w);
        let (col0, col1) = if row0 == row1 {
            (first % tiles_w, last % tiles_w)
        } else {
            (0, tiles_w - 1)
        };
        let window_cols = T * (col1 - col0) + LANES;
        let mut this = BlockTiles {
            n,
            ld,
            top: (T * row0) as isize - p.pads[0] as isize,
            left: (T * col0) as isize - p.pads[1] as isize,
            window_rows: T * (row1 - row0) + P,
            window_cols,
            patch: [0; WINOGRAD_MAX_BLOCK],
            output: [0; WINOGRAD_MAX_BLOCK],
            extent: [[0; 2]; WINOGRAD_MAX_BLOCK],
        };
        for (k, t) in tiles.enumerate() {
            let (row, col) = (t / tiles_w, t % tiles_w);
            this.patch[k] = T * (row - row0) * window_cols + T * (col - col0);
            this.output[k] = (T * row - first_out_row) * p.w_out + T * col;
            this.extent[k] = [
                (p.h_out - T * row).min(T) as u8,
                (p.w_out - T * col).min(T) as u8,
            ];
        }
        this
    }
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
        let vt = transform_2d(|i, j| dl[i][j], W::input_1d);
        let m: [[Lanes; P]; P] = std::array::from_fn(|xi| {
            std::array::from_fn(|nu| std::array::from_fn(|l| u[xi * P + nu] * vt[xi][nu][l]))
        });
        let y = transform_2d(|i, j| m[i][j], W::output_1d);
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

    /// A 10×10 output in F(4×4)'s tiles (3×3, the last row and column 2 wide), input
    /// padded by 1: the whole plane as one block, then a piece of the middle row.
    #[test]
    fn block_tiles_place_patches_and_outputs() {
        let p = Conv2d {
            n: 1,
            c_in: 1,
            h_in: 10,
            w_in: 10,
            c_out: 1,
            h_out: 10,
            w_out: 10,
            kernel: [3, 3],
            stride: [1, 1],
            dilation: [1, 1],
            pads: [1; 4],
            group: 1,
            activation: crate::params::Activation::None,
        };
        let all = BlockTiles::new::<4, 6>(&p, 0..9, 3, 0);
        assert_eq!((all.n, all.ld), (9, 16));
        assert_eq!((all.top, all.left), (-1, -1));
        // Patches of 6 rows from every 4th; 8 floats from the last tile's first column.
        assert_eq!((all.window_rows, all.window_cols), (14, 16));
        for k in 0..9 {
            let (r, c) = (k / 3, k % 3);
            assert_eq!(all.patch[k], 4 * r * 16 + 4 * c, "tile {k}");
            assert_eq!(all.output[k], 4 * r * 10 + 4 * c, "tile {k}");
            let side = |i| if i == 2 { 2 } else { 4 };
            assert_eq!(all.extent[k], [side(r), side(c)], "tile {k}");
        }
        // The lanes past the last tile read the first one's patch.
        assert!(all.patch[9..16].iter().all(|&at| at == 0));

        // Tiles 4 and 5 of the middle row, in output rows from 4 on.
        let piece = BlockTiles::new::<4, 6>(&p, 4..6, 3, 4);
        assert_eq!((piece.n, piece.ld), (2, 8));
        assert_eq!((piece.top, piece.left), (3, 3));
        assert_eq!((piece.window_rows, piece.window_cols), (6, 12));
        assert_eq!(piece.patch[..2], [0, 4]);
        assert_eq!(piece.output[..2], [4, 8]);
        assert_eq!(piece.extent[..2], [[4, 4], [4, 2]]);
    }
}
