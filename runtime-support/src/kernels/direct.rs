//! Direct convolution of one group ([`Conv2d::direct_applies`]): the layers im2col
//! serves worst, whose unfolding costs as much as their product (few input channels,
//! stride 2, an image stem's 7×7 window over 3 channels).
//!
//! Output channels go in blocks of [`DEPTHWISE_BLOCK`] as the vector lanes, and
//! positions in tiles of eight, as in the depthwise kernel: each tap of a tile is one
//! vector load of the block's weights at that input channel and tap, times one input
//! value per position, broadcast. The weights are packed once a call into that order
//! (`[block][c_in][kh][kw][channel]`); each input channel's padded rows live in a
//! ring of the rows one output row reads. A finished output row (`[position][channel]`)
//! is written back to the block's planes by the depthwise kernel's 8×8 shuffles.
//! Threads take bands of output rows, each with its own ring.

use std::ops::Range;

use faer::traits::pulp::{self, Simd, WithSimd};

use super::depthwise::{ACCUMULATORS, Transpose, deinterleave_row, load, store};
use super::elementwise::{VectorActivation, bias_activate};
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
    let (packed, local) = scratch.split_at_mut((blocks * k_len + blocks) * BLOCK);
    let (weights, biases) = packed.split_at_mut(blocks * k_len * BLOCK);
    // Lanes past `c_out` in the last block: zero weights and bias, never written out.
    weights[(blocks - 1) * k_len * BLOCK..].fill(0.0);
    biases.fill(0.0);
    for (co, w) in w.chunks_exact(k_len).enumerate() {
        let block = &mut weights[co / BLOCK * k_len * BLOCK..][..k_len * BLOCK];
        for (packed, &v) in block.chunks_exact_mut(BLOCK).zip(w) {
            packed[co % BLOCK] = v;
        }
        biases[co] = bias.map_or(0.0, |b| b[co]);
    }
    let (weights, biases) = (&*weights, &*biases);
    let plane_in = p.h_in * p.w_in;
    let plane_out = pool.map_or(p.h_out * p.w_out, |pool| pool.h_out * pool.w_out);
    // Threads take runs of blocks of output channels (whole planes), each filling its
    // own ring: one run an image on one thread, so the input is copied once.
    let run = blocks.div_ceil(threads::current()) * BLOCK;
    let images = x
        .chunks_exact(p.c_in * plane_in)
        .zip(y.chunks_exact_mut(p.c_out * plane_out));
    let parts = images.flat_map(|(x, y)| {
        let runs = y.chunks_mut(run * plane_out).enumerate();
        runs.map(move |(i, out)| (x, i * run / BLOCK, out))
    });
    let macs = p.n * p.c_out * plane_out * k_len;
    threads::for_each_with_scratch(parts, macs, local, |(x, first, out), local| {
        pulp::Arch::new().dispatch(Run {
            p,
            pool,
            x,
            weights: &weights[first * k_len * BLOCK..],
            biases: &biases[first * BLOCK..],
            out,
            local,
        });
    });
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
    out: &'a mut [f32],
    local: &'a mut [f32],
}

impl WithSimd for Run<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        if S::F32_LANES > BLOCK {
            // A position is one block of channels: a wider vector would span two.
            return self.with_simd(pulp::Scalar::new());
        }
        let Run {
            p,
            pool,
            x,
            weights,
            biases,
            out,
            local,
        } = self;
        let k_len = p.c_in * p.kernel[0] * p.kernel[1];
        let [ring_rows, row, tiles] = p.depthwise_rows();
        let (ring, rest) = local.split_at_mut(p.c_in * ring_rows * row);
        let (out_row, rest) = rest.split_at_mut(tiles * BLOCK);
        let mut pooling = pool.map(|pool| MaxPoolRows::new(p, pool, out.len(), rest));
        let plane_out = pooling
            .as_ref()
            .map_or(p.h_out * p.w_out, |m| m.plane_out());
        let in_registers = VectorActivation::new(p.activation);
        let activation = in_registers.unwrap_or(VectorActivation::Identity);
        // A pool in floor mode may leave the last rows unread: they are not computed.
        let h_out = pooling
            .as_ref()
            .map_or(p.h_out, |m| m.last_row_read(m.pool.h_out - 1) + 1);
        let mut loaded = 0;
        for oh in 0..h_out {
            let first = oh * p.stride[0];
            let last = first + (p.kernel[0] - 1) * p.dilation[0];
            for r in loaded.max(first)..=last {
                load_row(p, x, r, ring_rows, row, ring);
            }
            loaded = last + 1;
            let pooled = pooling.as_mut().map_or(0..0, |m| m.ready(oh));
            for (b, out) in out.chunks_mut(BLOCK * plane_out).enumerate() {
                let block = Block {
                    p,
                    ring,
                    ring_rows,
                    row,
                    weights: &weights[b * k_len * BLOCK..][..k_len * BLOCK],
                    bias: &biases[b * BLOCK..][..BLOCK],
                    activation,
                };
                let transpose = Transpose::new::<S>(out.len() / plane_out);
                let activate = in_registers.is_none().then_some(p.activation);
                if let Some(m) = &mut pooling {
                    finished_row(s, &block, oh, m.row(b, oh, tiles), activate);
                    m.pool_rows(b, oh, pooled.clone(), out, transpose);
                } else {
                    finished_row(s, &block, oh, out_row, activate);
                    deinterleave_row(p, out_row, oh, out, transpose);
                }
            }
        }
    }
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
}

impl<'a> MaxPoolRows<'a> {
    /// The rings of the blocks of a run whose pooled planes take `out_len` floats, in
    /// `scratch` (what the direct kernel's own rows left of the thread's scratch).
    fn new(p: &Conv2d, pool: &'a Pool2d, out_len: usize, scratch: &'a mut [f32]) -> Self {
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
        }
    }

    fn plane_out(&self) -> usize {
        self.pool.h_out * self.pool.w_out
    }

    /// The slot of convolution row `oh` of block `b`: `tiles` positions from the
    /// pool's left padding on, which [`Self::pool_rows`] expects the row in.
    fn row(&mut self, b: usize, oh: usize, tiles: usize) -> &mut [f32] {
        let [span, slot, _, _] = self.rows;
        let left = self.pool.pads[1];
        let at = ((b * span + oh % span) * slot + left) * BLOCK;
        &mut self.rings[at..][..tiles * BLOCK]
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
            deinterleave_row(geometry, row, ph, out, transpose);
        }
    }
}

/// Writes padded input row `r` of every input channel into its slot of the ring
/// (`[c_in][ring_rows][row]`), the padding as zeros.
#[inline(always)]
fn load_row(p: &Conv2d, x: &[f32], r: usize, ring_rows: usize, row: usize, ring: &mut [f32]) {
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

/// One block of output channels at one output row: what its tiles read.
struct Block<'a> {
    p: &'a Conv2d,
    ring: &'a [f32],
    ring_rows: usize,
    /// Floats in one ring row.
    row: usize,
    weights: &'a [f32],
    bias: &'a [f32],
    activation: VectorActivation,
}

/// [`output_row`], then `activate` (the activation with no vector form, applied over
/// the finished row).
#[inline(always)]
fn finished_row<S: Simd>(
    s: S,
    b: &Block<'_>,
    oh: usize,
    out_row: &mut [f32],
    activate: Option<Activation>,
) {
    output_row(s, b, oh, out_row);
    if let Some(activation) = activate {
        bias_activate(activation, 0.0, &mut out_row[..b.p.w_out * BLOCK]);
    }
}

/// Output row `oh` of the block into `out_row` as `[position][channel]`, in whole
/// tiles, with the windows' sizes and strides as constants (3×3, and the stems' 7×7 at
/// stride 2), as in the depthwise kernel, so that a tap's loads are fixed offsets and
/// the tap loops unroll.
#[inline(always)]
fn output_row<S: Simd>(s: S, b: &Block<'_>, oh: usize, out_row: &mut [f32]) {
    match (b.p.kernel, b.p.stride[1], b.p.dilation) {
        ([3, 3], 1, [1, 1]) => output_row_with(s, b, oh, out_row, [3, 3], 1, [1, 1]),
        ([3, 3], 2, [1, 1]) => output_row_with(s, b, oh, out_row, [3, 3], 2, [1, 1]),
        ([7, 7], 2, [1, 1]) => output_row_with(s, b, oh, out_row, [7, 7], 2, [1, 1]),
        (kernel, sw, dilation) => output_row_with(s, b, oh, out_row, kernel, sw, dilation),
    }
}

/// [`output_row`] for a window of `[kh, kw]` taps at horizontal stride `sw`.
#[inline(always)]
fn output_row_with<S: Simd>(
    s: S,
    b: &Block<'_>,
    oh: usize,
    out_row: &mut [f32],
    [kh, kw]: [usize; 2],
    sw: usize,
    [dh, dw]: [usize; 2],
) {
    let p = b.p;
    let lanes = S::F32_LANES;
    let per_position = BLOCK / lanes;
    let positions = ACCUMULATORS / per_position;
    let taps = kh * kw;
    let first_slot = (oh * p.stride[0]) % b.ring_rows;
    // The farthest input a tile reads is `(ow + positions − 1)·sw + (kw − 1)·dw` for
    // `ow + positions ≤ tiles`: inside every ring row (`depthwise_rows` sizes them).
    // Checked once here, so the loads below need no bounds checks of their own.
    let tiles = out_row.len() / BLOCK;
    assert!(
        tiles.is_multiple_of(positions)
            && (tiles - 1) * sw + (kw - 1) * dw < b.row
            && p.c_in * b.ring_rows * b.row <= b.ring.len()
            && b.weights.len() == p.c_in * taps * BLOCK,
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
            let weights = &b.weights[ci * taps * BLOCK..][..taps * BLOCK];
            let mut slot = first_slot;
            for ki in 0..kh {
                let in_row = &rows[slot * b.row..][..b.row];
                slot += dh;
                while slot >= b.ring_rows {
                    slot -= b.ring_rows;
                }
                if sw == 2 && kw == 3 {
                    // Positions outermost: the input two neighbouring windows share
                    // (one's last tap, the next one's first) is broadcast once and
                    // used at once. Taps outermost, the compiler kept such broadcasts
                    // across a whole tap and spilled them: 3→16 at 112² 0.168 → 0.156
                    // ms, 3→32 0.33 → 0.30 ms (one Zen 4 core, runs alternated). The
                    // other windows keep taps outermost (7×7 s2 and 3×3 s1 ran slower
                    // by positions).
                    for (a, acc) in acc.iter_mut().enumerate() {
                        let (position, v) = (a / per_position, a % per_position);
                        for kj in 0..kw {
                            let weights = &weights[(ki * kw + kj) * BLOCK..][..BLOCK];
                            let weight = load::<S>(&weights[v * lanes..][..lanes]);
                            let at = (ow + position) * sw + kj * dw;
                            debug_assert!(at < in_row.len());
                            // SAFETY: `at` is input position `(ow + position)·sw
                            // + kj·dw` of the ring row, at most the farthest one the
                            // assertion above checked to lie inside it.
                            let x = unsafe { *in_row.get_unchecked(at) };
                            *acc = s.mul_add_e_f32s(weight, s.splat_f32s(x), *acc);
                        }
                    }
                    continue;
                }
                for kj in 0..kw {
                    let weights = &weights[(ki * kw + kj) * BLOCK..][..BLOCK];
                    let start = ow * sw + kj * dw;
                    for (a, acc) in acc.iter_mut().enumerate() {
                        let (position, v) = (a / per_position, a % per_position);
                        let weight = load::<S>(&weights[v * lanes..][..lanes]);
                        let at = start + position * sw;
                        debug_assert!(at < in_row.len());
                        // SAFETY: `at` is input position `(ow + position)·sw + kj·dw`
                        // of the ring row, at most the farthest one the assertion
                        // above checked to lie inside it.
                        let x = unsafe { *in_row.get_unchecked(at) };
                        *acc = s.mul_add_e_f32s(weight, s.splat_f32s(x), *acc);
                    }
                }
            }
        }
        for (a, acc) in acc.iter().enumerate() {
            store::<S>(&mut out[a * lanes..][..lanes], b.activation.apply(s, *acc));
        }
    }
}
