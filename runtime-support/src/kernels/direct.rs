//! Direct convolution of one group ([`Conv2d::direct_applies`]): the layers im2col
//! serves worst, whose unfolding costs as much as their product (few input channels,
//! stride 2, an image stem's 7×7 window over 3 channels).
//!
//! Output channels go in blocks of [`DEPTHWISE_BLOCK`] as the vector lanes, and
//! positions in tiles, as in the depthwise kernel: each tap of a tile is one vector
//! load of a block's weights at that input channel and tap, times one input value per
//! position, broadcast. At stride 2 a tile spans two blocks, which share each
//! broadcast ([`output_rows`] says why stride 1 does not at eight lanes). With
//! AVX-512, at either stride, two blocks make one vector of sixteen lanes, half the
//! multiply-adds (one Zen 5 core: YOLOv8n's 32→64 3×3 s2 at 80² 0.48 → 0.27 ms, a
//! 3→64 7×7 stem at 224² 1.80 → 1.00; 8→64 3×3 s1 at 56² 0.27 → 0.15, 3→32 s1 at
//! 112² 0.225 → 0.16). The weights are packed once a call into that order
//! (`[block][c_in][kh][kw][channel]`, a block of sixteen channels there); each input
//! channel's padded rows live in a ring of the rows one output row reads. A finished
//! output row of a block (`[position][channel]`) is written back to its planes by the
//! depthwise kernel's 8×8 shuffles. Threads take runs of blocks of output channels,
//! each with its own ring, or where there are fewer than two blocks a thread, bands
//! of output rows of every block ([`Out::Band`]).

use std::ops::Range;

use faer::traits::pulp::{self, Simd, WithSimd};

use super::depthwise::{
    ACCUMULATORS, Transpose, deinterleave_row, deinterleave_rows, load, row_bands, store, take_rows,
};
use super::elementwise::bias_activate;
use super::pool::{fold_across, fold_runs};
use super::window::Axis;
use crate::params::{Activation, Conv2d, DEPTHWISE_BLOCK as BLOCK, Pool2d};
use crate::threads;

/// Direct `conv2d`, and where `pool` is given a max pool over its output (`y` is then
/// the pooled output; [`MaxPoolRows`]): the caller has checked the lengths and the
/// scratch, and that `y` is not empty.
pub(super) fn direct(
    p: &Conv2d,
    pool: Option<&Pool2d>,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    let k_len = p.c_in * p.kernel[0] * p.kernel[1];
    let blocks = p.c_out.div_ceil(BLOCK);
    // With AVX-512, pairs of blocks in one vector of sixteen lanes ([`strided_tiles`]),
    // their weights packed sixteen channels at a time.
    let wide = blocks.is_multiple_of(2) && super::simd::sixteen_lanes();
    let width = if wide { 2 * BLOCK } else { BLOCK };
    let (packed, local) = scratch.split_at_mut((blocks * k_len + blocks) * BLOCK);
    let (weights, biases) = packed.split_at_mut(blocks * k_len * BLOCK);
    // Lanes past `c_out` in the last block: zero weights and bias, never written out.
    weights[(blocks * BLOCK / width - 1) * k_len * width..].fill(0.0);
    biases.fill(0.0);
    for (co, w) in w.chunks_exact(k_len).enumerate() {
        let block = &mut weights[co / width * k_len * width..][..k_len * width];
        for (packed, &v) in block.chunks_exact_mut(width).zip(w) {
            packed[co % width] = v;
        }
        biases[co] = bias.map_or(0.0, |b| b[co]);
    }
    let (weights, biases) = (&*weights, &*biases);
    let plane_in = p.h_in * p.w_in;
    let plane_out = pool.map_or(p.h_out * p.w_out, |pool| pool.h_out * pool.w_out);
    let macs = p.n * p.c_out * plane_out * k_len;
    let threads = threads::current();
    let images = x
        .chunks_exact(p.c_in * plane_in)
        .zip(y.chunks_exact_mut(p.c_out * plane_out));
    // One part: an image's input, the first block it computes, where it writes.
    let compute = |(x, first, out): (&[f32], usize, Out<'_>), local: &mut [f32]| {
        let run = Run {
            p,
            pool,
            x,
            weights: &weights[first * k_len * BLOCK..],
            biases: &biases[first * BLOCK..],
            width,
            out,
            local,
        };
        if wide {
            super::simd::dispatch_wide(run)
        } else {
            super::simd::dispatch_narrow_wide_registers(run)
        }
    };
    if pool.is_none() && threads > 1 && blocks < 2 * threads && p.h_out >= 2 * threads {
        // Fewer than two blocks a thread (an image stem's 16 channels): threads take
        // bands of output rows of every block instead, each filling its ring with the
        // rows its band reads. A run of one block would lose the broadcasts blocks
        // share, and every thread would copy all of the input.
        let band = p.h_out.div_ceil(threads);
        let parts = images.flat_map(|(x, y)| {
            row_bands(p, y, band).map(move |(rows, y)| {
                let first_row = rows.start;
                (x, 0, Out::Band { y, first_row })
            })
        });
        return threads::for_each_with_scratch(parts, macs, local, compute);
    }
    // Threads take runs of blocks of output channels (whole planes), each filling its
    // own ring: one run an image on one thread, so the input is copied once.
    let run = blocks.div_ceil(threads).next_multiple_of(width / BLOCK) * BLOCK;
    let parts = images.flat_map(|(x, y)| {
        let runs = y.chunks_mut(run * plane_out).enumerate();
        runs.map(move |(i, out)| (x, i * run / BLOCK, Out::Planes(out)))
    });
    threads::for_each_with_scratch(parts, macs, local, compute);
}

/// Where a run writes: whole planes of consecutive channels, or a band of rows of
/// every channel (a view of the image's `c_out × plane` output, `first_row` on).
enum Out<'a> {
    Planes(&'a mut [f32]),
    Band {
        y: faer::MatMut<'a, f32>,
        first_row: usize,
    },
}

impl Out<'_> {
    /// Writes output row `oh` of the `channels` channels of block `b` from `out_row`
    /// (`[position][channel]`, whole tiles). Inlined into the vectorised caller: out of
    /// line it is compiled for the baseline, and its transposes' intrinsics become
    /// calls (the stem 3→16 s2 at 224², 0.25 → 0.9 ms).
    #[inline(always)]
    fn deinterleave(
        &mut self,
        p: &Conv2d,
        b: usize,
        channels: usize,
        oh: usize,
        out_row: &[f32],
        transpose: Transpose,
    ) {
        match self {
            Out::Planes(out) => {
                let plane_out = p.h_out * p.w_out;
                let planes = &mut out[b * BLOCK * plane_out..][..channels * plane_out];
                deinterleave_row(p, out_row, oh, planes, transpose);
            }
            Out::Band { y, first_row } => {
                let at = (oh - *first_row) * p.w_out;
                let mut rest = y.as_mut().subrows_mut(b * BLOCK, channels);
                let rows = take_rows(&mut rest, channels).map(|row| match row {
                    [] => row,
                    row => &mut row[at..][..p.w_out],
                });
                deinterleave_rows(out_row, rows, transpose);
            }
        }
    }
}

/// Consecutive blocks of output channels of one image: its input, their packed
/// weights and biases (from the first block's on), their output planes, and the
/// thread's scratch (the ring and one output row).
struct Run<'a> {
    p: &'a Conv2d,
    pool: Option<&'a Pool2d>,
    x: &'a [f32],
    weights: &'a [f32],
    biases: &'a [f32],
    /// Channels the weights are packed by: a block's, or two blocks' where a vector
    /// holds sixteen lanes.
    width: usize,
    out: Out<'a>,
    local: &'a mut [f32],
}

impl WithSimd for Run<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        if S::F32_LANES > self.width {
            // Weights packed a block at a time: a wider vector would span two.
            return self.with_simd(pulp::Scalar::new());
        }
        let Run {
            p,
            pool,
            x,
            weights,
            biases,
            width,
            mut out,
            local,
        } = self;
        assert!(
            width == S::F32_LANES.max(BLOCK),
            "direct conv: weights packed for another width"
        );
        let k_len = p.c_in * p.kernel[0] * p.kernel[1];
        let [ring_rows, row, tiles] = p.depthwise_rows();
        let (ring, rest) = local.split_at_mut(p.c_in * ring_rows * row);
        let at_once = p.direct_blocks_at_once();
        // Four blocks a tile need AVX-512's 32 registers; with 16, two at most. At
        // stride 1 below sixteen lanes, one ([`output_rows`]).
        let most = match (S::F32_LANES, p.stride[1]) {
            (16, _) => at_once,
            (_, 1) => 1,
            _ if super::simd::wide_registers() => at_once,
            _ => at_once.min(2),
        };
        let (out_rows, rest) = rest.split_at_mut(at_once * tiles * BLOCK);
        // Output rows this run computes, and its channels.
        let (rows_out, channels) = match &out {
            Out::Planes(planes) => {
                let plane_out = pool.map_or(p.h_out * p.w_out, |pool| pool.h_out * pool.w_out);
                (0..p.h_out, planes.len() / plane_out)
            }
            Out::Band { y, first_row } => (*first_row..first_row + y.ncols() / p.w_out, y.nrows()),
        };
        // An activation that never decreases commutes with the pool's maximum: it is
        // applied to the pooled rows, a quarter as many values at stride 2, instead of
        // to every convolution row (SqueezeNet's stem, 3→64 3×3 s2 at 224² with its
        // ReLU and 3×3 s2 pool, one Zen 4 core: see `MaxPoolRows::activation`).
        let pool_activates = pool.is_some() && p.activation.is_monotonic();
        let mut pooling = match (pool, &mut out) {
            (Some(pool), Out::Planes(planes)) => Some(MaxPoolRows::new(
                p,
                pool,
                planes.len(),
                pool_activates.then_some(p.activation),
                rest,
            )),
            _ => None,
        };
        let activation = match pooling {
            Some(ref m) if m.activation.is_some() => Activation::None,
            _ => p.activation,
        };
        // A pool in floor mode may leave the last rows unread: they are not computed.
        let rows_out = match &pooling {
            Some(m) => 0..m.last_row_read(m.pool.h_out - 1) + 1,
            None => rows_out,
        };
        let blocks = channels.div_ceil(BLOCK);
        let mut loaded = 0;
        for oh in rows_out {
            let first = oh * p.stride[0];
            let last = first + (p.kernel[0] - 1) * p.dilation[0];
            for r in loaded.max(first)..=last {
                load_row(p, x, r, ring_rows, row, ring);
            }
            loaded = last + 1;
            let pooled = pooling.as_mut().map_or(0..0, |m| m.ready(oh));
            let mut next = 0;
            while next < blocks {
                let first = next;
                let count = match blocks - first {
                    n if n >= 4 && most >= 4 => 4,
                    n if n >= 2 && most >= 2 => 2,
                    _ => 1,
                };
                next += count;
                let block = Block {
                    p,
                    ring,
                    ring_rows,
                    row,
                    weights: &weights[first * k_len * BLOCK..][..count * k_len * BLOCK],
                    bias: &biases[first * BLOCK..][..count * BLOCK],
                    activation,
                };
                // Where the blocks' rows go: their pool rings' slots, or `out_rows`.
                let (rows, at, stride) = match &mut pooling {
                    Some(m) => m.slots(first, oh),
                    None => (&mut *out_rows, 0, tiles * BLOCK),
                };
                let len = tiles * BLOCK;
                if count == 4 {
                    let rows = disjoint_rows::<4>(rows, at, stride, len);
                    finished_rows(s, &block, oh, rows);
                } else if count == 2 {
                    let rows = disjoint_rows::<2>(rows, at, stride, len);
                    finished_rows(s, &block, oh, rows);
                } else {
                    let rows = disjoint_rows::<1>(rows, at, stride, len);
                    finished_rows(s, &block, oh, rows);
                }
                for (j, b) in (first..first + count).enumerate() {
                    let in_block = (channels - b * BLOCK).min(BLOCK);
                    let transpose = Transpose::new::<S>(in_block);
                    match (&mut pooling, &mut out) {
                        (Some(m), Out::Planes(planes)) => {
                            let plane_out = m.plane_out();
                            let planes =
                                &mut planes[b * BLOCK * plane_out..][..in_block * plane_out];
                            m.pool_rows(b, oh, pooled.clone(), planes, transpose);
                        }
                        (_, out) => {
                            let row = &out_rows[j * len..][..len];
                            out.deinterleave(p, b, in_block, oh, row, transpose);
                        }
                    }
                }
            }
        }
    }
}

/// `NB` rows of `len` floats of `buf`, `stride` apart from `at` on.
fn disjoint_rows<const NB: usize>(
    buf: &mut [f32],
    at: usize,
    stride: usize,
    len: usize,
) -> [&mut [f32]; NB] {
    let ranges = std::array::from_fn(|j| at + j * stride..at + j * stride + len);
    buf.get_disjoint_mut(ranges)
        .expect("direct conv: a block's row overlaps the next block's")
}

/// A max pool over the direct kernel's output, fused in: each block of output
/// channels keeps a ring of the convolution rows (`[position][channel]`, as computed)
/// that one pooled row reads, with the pool's padding written out as `-inf`; once a
/// pooled row's last convolution row is in, its window rows are folded down, then
/// across (as `kernels::pool`'s interleaved path does), and the pooled row is written
/// to the block's planes. The convolution's output is never written to memory whole
/// or transposed back to planes: SqueezeNet's stem (3→64 3×3 s2 at 224², then 3×3 s2)
/// wrote 64 planes of 111² to pool them to 55².
struct MaxPoolRows<'a> {
    pool: &'a Pool2d,
    /// The pool's horizontal window (over the convolution's columns).
    across: Axis,
    /// The convolution's output rows and columns.
    h_conv: usize,
    w_conv: usize,
    /// Pooled rows written so far (the same for every block).
    done: usize,
    /// The pool's output geometry, for [`deinterleave_row`].
    geometry: Conv2d,
    /// `[span, slot, reach, tiles]` of [`Conv2d::max_pool_rows`].
    rows: [usize; 4],
    /// Every block's ring: `[block][span][slot][channel]`.
    rings: &'a mut [f32],
    /// Window rows folded down (`reach` positions).
    column: &'a mut [f32],
    /// One pooled row (`tiles` positions).
    pooled: &'a mut [f32],
    /// The layer's activation where it is applied to the pooled rows (it never
    /// decreases, so it commutes with the maximum) rather than to the convolution's:
    /// SqueezeNet's stem with its ReLU (3→64 3×3 s2 at 224², then 3×3 s2 to 55²), one
    /// Zen 4 core, best of 1000 runs, alternated: 0.676–0.686 → 0.636–0.647 ms.
    activation: Option<Activation>,
}

impl<'a> MaxPoolRows<'a> {
    /// The rings of the blocks of a run whose pooled planes take `out_len` floats, in
    /// `scratch` (what the direct kernel's own rows left of the thread's scratch).
    fn new(
        p: &Conv2d,
        pool: &'a Pool2d,
        out_len: usize,
        activation: Option<Activation>,
        scratch: &'a mut [f32],
    ) -> Self {
        let rows @ [span, slot, reach, tiles] = p.max_pool_rows(pool);
        let blocks = (out_len / (pool.h_out * pool.w_out)).div_ceil(BLOCK);
        let (rings, rest) = scratch.split_at_mut(blocks * span * slot * BLOCK);
        let (column, rest) = rest.split_at_mut(reach * BLOCK);
        let pooled = &mut rest[..tiles * BLOCK];
        // Padding columns are never written again; the convolution's columns are.
        rings.fill(f32::NEG_INFINITY);
        let geometry = Conv2d {
            h_out: pool.h_out,
            w_out: pool.w_out,
            ..*p
        };
        let across = Axis {
            in_len: p.w_out,
            out_len: pool.w_out,
            kernel: pool.kernel[1],
            stride: pool.stride[1],
            dilation: pool.dilation[1],
            pad_begin: pool.pads[1],
            pad_end: pool.pads[3],
        };
        MaxPoolRows {
            pool,
            across,
            h_conv: p.h_out,
            w_conv: p.w_out,
            done: 0,
            geometry,
            rows,
            rings,
            column,
            pooled,
            activation,
        }
    }

    fn plane_out(&self) -> usize {
        self.pool.h_out * self.pool.w_out
    }

    /// Where the slots of convolution row `oh` of blocks `first` on lie: the rings,
    /// the first block's slot (from the pool's left padding on, as
    /// [`Self::pool_rows`] expects the row) and the distance between two blocks'.
    fn slots(&mut self, first: usize, oh: usize) -> (&mut [f32], usize, usize) {
        let [span, slot, _, _] = self.rows;
        let left = self.pool.pads[1];
        let at = ((first * span + oh % span) * slot + left) * BLOCK;
        (&mut *self.rings, at, span * slot * BLOCK)
    }

    /// The last convolution row pooled row `ph` reads (clipped to the output).
    fn last_row_read(&self, ph: usize) -> usize {
        let pool = self.pool;
        let bottom = ph * pool.stride[0] + (pool.kernel[0] - 1) * pool.dilation[0];
        bottom.saturating_sub(pool.pads[0]).min(self.h_conv - 1)
    }

    /// The pooled rows whose last convolution row is `oh`, marked done: every block
    /// pools them once that row of it is in.
    fn ready(&mut self, oh: usize) -> Range<usize> {
        let first = self.done;
        let end = (first..self.pool.h_out)
            .find(|&ph| self.last_row_read(ph) > oh)
            .unwrap_or(self.pool.h_out);
        self.done = end;
        first..end
    }

    /// After convolution row `oh` of block `b` is in its slot ([`Self::row`]): fills
    /// the slot's right padding again (the row's last tile wrote over it), and pools
    /// the rows `pooled` ([`Self::ready`]) into the block's planes `out`.
    #[inline(always)]
    fn pool_rows(
        &mut self,
        b: usize,
        oh: usize,
        pooled: Range<usize>,
        out: &mut [f32],
        transpose: Transpose,
    ) {
        let MaxPoolRows {
            pool,
            across,
            h_conv,
            w_conv,
            geometry,
            rows: [span, slot, reach, tiles],
            rings,
            column,
            pooled: pooled_row,
            activation,
            ..
        } = self;
        let (span, slot, reach, tiles) = (*span, *slot, *reach, *tiles);
        let ring = &mut rings[b * span * slot * BLOCK..][..span * slot * BLOCK];
        let right = (pool.pads[1] + *w_conv) * BLOCK;
        ring[(oh % span) * slot * BLOCK..][right..slot * BLOCK].fill(f32::NEG_INFINITY);
        let ring = &*ring;
        for ph in pooled {
            let column = &mut column[..reach * BLOCK];
            // Window rows in the pool's padding are left out (its identity).
            let mut rows = (0..pool.kernel[0])
                .filter_map(|ki| {
                    let at = ph * pool.stride[0] + ki * pool.dilation[0];
                    at.checked_sub(pool.pads[0]).filter(|r| r < h_conv)
                })
                .map(|r| &ring[(r % span) * slot * BLOCK..][..reach * BLOCK])
                .peekable();
            if rows.peek().is_none() {
                column.fill(f32::NEG_INFINITY);
            }
            fold_runs(column, rows, f32::max);
            let row = &mut pooled_row[..tiles * BLOCK];
            fold_across(column, &mut row[..pool.w_out * BLOCK], across, f32::max);
            if let Some(activation) = *activation {
                bias_activate(activation, 0.0, &mut row[..pool.w_out * BLOCK]);
            }
            deinterleave_row(geometry, row, ph, out, transpose);
        }
    }
}

/// Writes padded input row `r` of every input channel into its slot of the ring
/// (`[c_in][ring_rows][row]`), the padding as zeros.
#[inline(always)]
pub(super) fn load_row(
    p: &Conv2d,
    x: &[f32],
    r: usize,
    ring_rows: usize,
    row: usize,
    ring: &mut [f32],
) {
    let [top, left, _, _] = p.pads;
    let ih = r.checked_sub(top).filter(|&ih| ih < p.h_in);
    let plane_in = p.h_in * p.w_in;
    for ci in 0..p.c_in {
        let slot = &mut ring[(ci * ring_rows + r % ring_rows) * row..][..row];
        let Some(ih) = ih else {
            slot.fill(0.0);
            continue;
        };
        let (pad, rest) = slot.split_at_mut(left);
        pad.fill(0.0);
        let (inside, pad) = rest.split_at_mut(p.w_in);
        inside.copy_from_slice(&x[ci * plane_in + ih * p.w_in..][..p.w_in]);
        pad.fill(0.0);
    }
}

/// One or two blocks of output channels at one output row: what their tiles read.
struct Block<'a> {
    p: &'a Conv2d,
    ring: &'a [f32],
    ring_rows: usize,
    /// Floats in one ring row.
    row: usize,
    /// The blocks' packed weights (`[block][c_in][kh][kw][channel]`, a block of ours,
    /// or of two at sixteen lanes: [`Run`]'s width) and biases.
    weights: &'a [f32],
    bias: &'a [f32],
    /// The activation of the finished rows: the layer's, unless a pool applies it.
    activation: Activation,
}

/// [`output_rows`], then the activation over each finished row while it is in L1: in
/// the tiles' stores its `match` kept the accumulators in memory, written back after
/// every multiply-add (half speed).
#[inline(always)]
fn finished_rows<S: Simd, const NB: usize>(
    s: S,
    b: &Block<'_>,
    oh: usize,
    mut rows: [&mut [f32]; NB],
) {
    // Vectors a position of the `NB` blocks takes.
    match (S::F32_LANES, NB) {
        (16, 1) => unreachable!("direct conv: one block at sixteen lanes"),
        (16, 2) => output_rows::<S, 1, NB>(s, b, oh, &mut rows),
        (16, _) => output_rows::<S, 2, NB>(s, b, oh, &mut rows),
        (8, _) => output_rows::<S, NB, NB>(s, b, oh, &mut rows),
        (4, 1) => output_rows::<S, 2, NB>(s, b, oh, &mut rows),
        (4, 2) => output_rows::<S, 4, NB>(s, b, oh, &mut rows),
        (4, _) => output_rows::<S, 8, NB>(s, b, oh, &mut rows),
        (_, 1) => output_rows::<pulp::Scalar, BLOCK, NB>(pulp::Scalar::new(), b, oh, &mut rows),
        (_, 2) => output_rows::<pulp::Scalar, 16, NB>(pulp::Scalar::new(), b, oh, &mut rows),
        _ => output_rows::<pulp::Scalar, 32, NB>(pulp::Scalar::new(), b, oh, &mut rows),
    }
    for row in rows {
        bias_activate(b.activation, 0.0, &mut row[..b.p.w_out * BLOCK]);
    }
}

/// Output row `oh` of `NB` blocks (one row each, `[position][channel]`), each block
/// `V` vectors.
///
/// At stride 1 (3×3) at eight lanes, one block at a time, in tiles of 8 positions
/// with the taps unrolled ([`three_by_three_row`]): the inputs neighbouring taps share
/// (position `p + 1` of a tap is position `p` of the next) stay in the registers 8
/// accumulators leave free. Two blocks a tile ran slower there (16→64 at 55² 0.61
/// against 0.56 ms). At sixteen lanes, stride 1 takes [`strided_tiles`] as stride 2
/// does (below).
///
/// At stride 2 two blocks a tile ([`strided_tiles`]) share each broadcast input
/// between two multiply-adds, with 6 positions for 3×3 and 5 for the 7×7 stem: 12
/// and 10 accumulators, the two weight vectors and the broadcast in the 16 AVX2
/// registers (6 positions at 7×7 spilled). A block left alone (an odd count, or one
/// block a thread) takes [`three_by_three_row`] at 3×3. One Zen 4 core, against one
/// block of 8 positions (runs alternated): ResNet-50's 3→64 7×7 stem at 224²
/// 3.03–3.20 → 2.37–2.42 ms, 16→32 3×3 at 160² 0.75–0.77 → 0.68, 32→64 at 80² 0.73 →
/// 0.68–0.69; with 3 input channels (3→64 at 224², 3→16 at 320²) unchanged.
///
/// Where AVX-512's 32 registers are there (the kernel is compiled for them,
/// `dispatch_narrow_wide_registers`), four blocks a tile at stride 2: 24 and 20
/// accumulators, each broadcast shared by four multiply-adds and each input row of
/// the ring read by half as many tiles. One Zen 4 core, best of 1000 runs, alternated
/// with two blocks: YOLOv8n's 32→64 3×3 s2 at 80² with its SiLU 0.713–0.739 → 0.618–
/// 0.626 ms, 16→32 at 160² 0.731–0.740 → 0.670–0.684, SqueezeNet's fused stem (3→64
/// at 224², then its pool) 0.573–0.577 → 0.558–0.571, a 3→64 7×7 stem at 224² with
/// ReLU 2.34–2.36 → 2.26–2.28 (best of 500).
///
/// With AVX-512's sixteen lanes (a vector two blocks, `NV` vectors a position), in
/// tiles of 8 positions: 16 accumulators where the four blocks take two vectors. Tiles
/// of 12 there (24 accumulators) ran 2.7× slower (32→64 at 80², 0.27 → 0.75 ms), and
/// of 16 where a position is one vector no faster (3→16 at 224², 0.101 ms). Where a
/// position is one vector (two blocks) at stride 1 under a 3-wide window, tiles of 10
/// with the window's columns unrolled (`KW`): ten accumulators, and no `kj` loop
/// around each column's ten multiply-adds. One Zen 5 core, alternated: YOLOv8n's
/// 16→16 at 80² 0.185 → 0.141 ms. Unrolled with four blocks (two vectors) they ran no
/// faster (16→64 at 55²), and slower at stride 2 (32→64 at 80² 0.28 → 0.29); eight
/// blocks a tile (four vectors, 6 positions) slower again (16→64 at 55² 0.27 → 0.29).
#[inline(always)]
fn output_rows<S: Simd, const NV: usize, const NB: usize>(
    s: S,
    b: &Block<'_>,
    oh: usize,
    rows: &mut [&mut [f32]; NB],
) {
    if S::F32_LANES > BLOCK {
        return match b.p.stride[1] {
            1 if NV == 1 && b.p.kernel[1] == 3 && b.p.w_out >= 10 => {
                strided_tiles::<S, NV, NB, 10, 1, 3>(s, b, oh, rows)
            }
            1 => strided_tiles::<S, NV, NB, 8, 1, 0>(s, b, oh, rows),
            _ => strided_tiles::<S, NV, NB, 8, 2, 0>(s, b, oh, rows),
        };
    }
    // Stride 1 comes one block at a time below sixteen lanes (`Run`'s `most`), which
    // `three_by_three_row` checks by its weights' length. Not matched on the window's
    // width itself: the compiler would know it in the arm, unroll the taps, keep the
    // inputs neighbouring taps share in registers and spill the accumulators (twice
    // as slow).
    match (b.p.stride[1], b.p.kernel[1] > 3) {
        (1, _) => three_by_three_row::<S, 1>(s, b, oh, rows[0]),
        (_, false) if NB >= 2 => strided_tiles::<S, NV, NB, 6, 2, 0>(s, b, oh, rows),
        (_, true) if NB >= 2 => strided_tiles::<S, NV, NB, 5, 2, 0>(s, b, oh, rows),
        (_, false) => three_by_three_row::<S, 2>(s, b, oh, rows[0]),
        (_, true) => strided_tiles::<S, NV, NB, 8, 2, 0>(s, b, oh, rows),
    }
}

/// [`output_rows`] at stride `SW` (2, or 1 at sixteen lanes), in tiles of `P`
/// positions, `NV` vectors a position (the `NB` blocks' channels), the taps loops.
/// Tiles start every `P` positions; the last one is shifted back to end with the row
/// (or at `P`, on a narrower row, which the row's whole tiles of
/// [`crate::params::DEPTHWISE_TILE`] leave room for), its first positions computed
/// twice. `KW`, where not 0, is the window's width, known to the compiler so that it
/// unrolls the taps of a window row.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // constant indices into the accumulators
fn strided_tiles<
    S: Simd,
    const NV: usize,
    const NB: usize,
    const P: usize,
    const SW: usize,
    const KW: usize,
>(
    s: S,
    b: &Block<'_>,
    oh: usize,
    rows: &mut [&mut [f32]; NB],
) {
    let p = b.p;
    let lanes = S::F32_LANES;
    let [kh, kw] = p.kernel;
    assert!(KW == 0 || KW == kw, "direct conv: tiles for another window");
    let kw = if KW > 0 { KW } else { kw };
    // Vector `n` holds channels `n·lanes..` of the blocks: packed block `n·lanes /
    // width`, from its lane `n·lanes % width` on (`Run` checked the weights were
    // packed by this width).
    let width = lanes.max(BLOCK);
    let taps = kh * kw * width;
    let k_len = p.c_in * taps;
    assert!(
        NV * lanes == NB * BLOCK
            && SW == p.stride[1]
            && b.weights.len() * width == NB * BLOCK * k_len
    );
    let tiles = rows[0].len() / BLOCK;
    let cover = p.w_out.max(P);
    assert!(
        cover <= tiles && (tiles - 1) * SW + kw - 1 < b.row && kh <= 7,
        "direct conv: a tile reads past its ring row"
    );
    // Where the rows output row `oh` reads lie in an input channel's rows of the ring
    // (a window is at most 7 rows: `Conv2d::direct_applies`).
    let mut slots = [0; 7];
    for (ki, slot) in slots.iter_mut().enumerate().take(kh) {
        *slot = (oh * p.stride[0] + ki) % b.ring_rows * b.row;
    }
    // Arrays are filled by loops: `std::array::from_fn`'s closures were not inlined
    // into the vectorised code, and kept the accumulators in memory.
    let zero = s.splat_f32s(0.0);
    let mut bias = [zero; NV];
    for n in 0..NV {
        bias[n] = load::<S>(&b.bias[n * lanes..][..lanes]);
    }
    for tile in 0..cover.div_ceil(P) {
        let ow = (tile * P).min(cover - P);
        let mut acc = [bias; P];
        for ci in 0..p.c_in {
            let rows_in = &b.ring[ci * b.ring_rows * b.row..][..b.ring_rows * b.row];
            let mut weights: [&[f32]; NV] = [&[]; NV];
            for (n, weights) in weights.iter_mut().enumerate() {
                let (block, lane) = (n * lanes / width, n * lanes % width);
                *weights = &b.weights[block * k_len + ci * taps + lane..][..taps - lane];
            }
            for (ki, &slot) in slots[..kh].iter().enumerate() {
                let in_row = &rows_in[slot..][..b.row];
                for kj in 0..kw {
                    let mut w = [zero; NV];
                    for n in 0..NV {
                        w[n] = load::<S>(&weights[n][(ki * kw + kj) * width..][..lanes]);
                    }
                    for position in 0..P {
                        let at = (ow + position) * SW + kj;
                        debug_assert!(at < in_row.len());
                        // SAFETY: `at` is input position `(ow + position)·SW + kj` of the
                        // ring row, with `ow + position < cover ≤ tiles` and `kj < kw`:
                        // at most `(tiles − 1)·SW + kw − 1`, which the assertion above
                        // checked to lie inside the row.
                        let x = s.splat_f32s(unsafe { *in_row.get_unchecked(at) });
                        for n in 0..NV {
                            acc[position][n] = s.mul_add_e_f32s(w[n], x, acc[position][n]);
                        }
                    }
                }
            }
        }
        // Each vector back to its blocks' rows (`[position][channel]`): one block's
        // part of it, or at sixteen lanes two blocks' halves.
        for position in 0..P {
            let at = (ow + position) * BLOCK;
            for n in 0..NV {
                let first = n * lanes;
                if lanes <= BLOCK {
                    let out = &mut rows[first / BLOCK][at + first % BLOCK..][..lanes];
                    store::<S>(out, acc[position][n]);
                } else {
                    let mut both = [0.0; 2 * BLOCK];
                    store::<S>(&mut both[..lanes], acc[position][n]);
                    for (h, half) in both.chunks_exact(BLOCK).enumerate() {
                        rows[first / BLOCK + h][at..][..BLOCK].copy_from_slice(half);
                    }
                }
            }
        }
    }
}

/// Output row `oh` of one block of a 3×3 window at stride `SW` into `out_row`, in
/// tiles of 8 positions, the taps unrolled (see [`output_rows`]).
#[inline(always)]
fn three_by_three_row<S: Simd, const SW: usize>(
    s: S,
    b: &Block<'_>,
    oh: usize,
    out_row: &mut [f32],
) {
    const K: usize = 3;
    let p = b.p;
    let lanes = S::F32_LANES;
    let per_position = BLOCK / lanes;
    let positions = ACCUMULATORS / per_position;
    let first_slot = (oh * p.stride[0]) % b.ring_rows;
    // The farthest input a tile reads is `(ow + positions − 1)·SW + K − 1` for
    // `ow + positions ≤ tiles`: inside every ring row (`depthwise_rows` sizes them).
    // Checked once here, so the loads below need no bounds checks of their own.
    let tiles = out_row.len() / BLOCK;
    assert!(
        p.kernel == [K, K]
            && p.stride[1] == SW
            && tiles.is_multiple_of(positions)
            && (tiles - 1) * SW + K - 1 < b.row
            && p.c_in * b.ring_rows * b.row <= b.ring.len()
            && b.weights.len() == p.c_in * K * K * BLOCK,
        "direct conv: a tile reads past its ring row"
    );
    let mut bias = [s.splat_f32s(0.0); ACCUMULATORS];
    for (a, bias) in bias.iter_mut().enumerate() {
        *bias = load::<S>(&b.bias[(a % per_position) * lanes..][..lanes]);
    }
    for (tile, out) in out_row.chunks_exact_mut(positions * BLOCK).enumerate() {
        let ow = tile * positions;
        let mut acc = bias;
        for ci in 0..p.c_in {
            let rows = &b.ring[ci * b.ring_rows * b.row..][..b.ring_rows * b.row];
            let weights = &b.weights[ci * K * K * BLOCK..][..K * K * BLOCK];
            let mut slot = first_slot;
            for ki in 0..K {
                let in_row = &rows[slot * b.row..][..b.row];
                slot += 1;
                if slot == b.ring_rows {
                    slot = 0;
                }
                let weights = &weights[ki * K * BLOCK..][..K * BLOCK];
                // Tap `kj` of the window row at accumulator `a`: where its weights
                // start, and its input. Scalars only: a closure does not inherit the
                // caller's target features, so the vector operations stay outside.
                let tap = |a: usize, kj: usize| {
                    let (position, v) = (a / per_position, a % per_position);
                    let at = (ow + position) * SW + kj;
                    debug_assert!(at < in_row.len());
                    // SAFETY: `at` is input position `(ow + position)·SW + kj` of the
                    // ring row, at most the farthest one the assertion above checked to
                    // lie inside it.
                    let x = unsafe { *in_row.get_unchecked(at) };
                    (&weights[kj * BLOCK + v * lanes..][..lanes], x)
                };
                if SW == 2 {
                    // Positions outermost: the input two neighbouring windows share
                    // (one's last tap, the next one's first) is broadcast once and used
                    // at once. Taps outermost, the compiler kept such broadcasts across
                    // a whole tap and spilled them: 3→16 at 112² 0.168 → 0.156 ms.
                    for (a, acc) in acc.iter_mut().enumerate() {
                        for kj in 0..K {
                            let (weight, x) = tap(a, kj);
                            *acc = s.mul_add_e_f32s(load::<S>(weight), s.splat_f32s(x), *acc);
                        }
                    }
                } else {
                    for kj in 0..K {
                        for (a, acc) in acc.iter_mut().enumerate() {
                            let (weight, x) = tap(a, kj);
                            *acc = s.mul_add_e_f32s(load::<S>(weight), s.splat_f32s(x), *acc);
                        }
                    }
                }
            }
        }
        for (a, acc) in acc.iter().enumerate() {
            store::<S>(&mut out[a * lanes..][..lanes], *acc);
        }
    }
}
