//! 2-D convolution (NCHW input, OIHW weights), in three strategies:
//!
//! - **pointwise** (1×1, unit stride, no padding): each group is already the matrix
//!   `X[c_in/g, H*W]`, so it is one GEMM `Y = W · X` on the input as it lies;
//! - **depthwise** (one input and one output channel per group): a direct sliding
//!   window, one multiply-add run per kernel tap and output row; a layer padded left
//!   or right first copies each plane into `scratch` between zero columns, so that
//!   every output of a row is an interior one (no clipped windows at the edges, which
//!   on a 14×14 map with a 5×5 kernel are 4 columns of 14). Rows of taps outside the
//!   plane are skipped, not padded: on a map 2 rows high a 5×5 kernel reads 2 rows;
//! - **everything else**: for each image, group and block of output positions,
//!   im2col of the block into `scratch` (`c_in/g * kh * kw` rows, one column per
//!   position), then one GEMM `Y[:, block] = W_g · cols`.
//!
//! Bias and the fused activation follow each GEMM on the columns it wrote, while they
//! are still in cache. im2col blocks are narrow (48 positions, two of faer's 24-row
//! AVX2 micro-tiles, the remainder joining the last block; 96 with AVX-512, the
//! remainder a block of its own), never wider than [`CONV_MAX_BLOCK`], which sizes
//! the scratch the compiler plans in the arena: it stays small and in L2 between the
//! unfolding and the product, and faer multiplies such a compact block faster than a
//! whole unfolded plane where the plane is wide (ResNet-50's 7×7 stem and 56×56 3×3
//! layers: 63–67 against 51–56 GFLOP/s, measured interleaved on one Zen 3 core), and
//! no slower elsewhere. Pointwise layers gain nothing from copying into blocks, so
//! they stay in place.

use std::ops::Range;

use super::elementwise::{bias_activate, gather};
use super::gemm::{self, Operand, Split, sgemm};
use super::simd::vectorize;
use super::window::Window;
use crate::params::{CONV_MAX_BLOCK, Conv2d, DEPTHWISE_LANES};
use crate::threads;

/// Output length of one axis under ONNX `Conv` with explicit pads.
fn out_len(in_len: usize, kernel: usize, stride: usize, dilation: usize, pads: usize) -> usize {
    let span = dilation * (kernel - 1) + 1;
    (in_len + pads).saturating_sub(span) / stride + 1
}

fn window(p: &Conv2d) -> Window {
    Window::new(
        [p.h_in, p.w_in],
        [p.h_out, p.w_out],
        p.kernel,
        p.stride,
        p.dilation,
        p.pads,
    )
}

pub fn conv2d(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    assert!(
        p.group > 0 && p.c_in.is_multiple_of(p.group) && p.c_out.is_multiple_of(p.group),
        "conv2d: {p:?}"
    );
    let (c_in_g, c_out_g) = (p.c_in / p.group, p.c_out / p.group);
    let [kh, kw] = p.kernel;
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    let k_len = c_in_g * kh * kw;
    assert_eq!(x.len(), p.n * p.c_in * plane_in, "conv2d: X");
    assert_eq!(w.len(), p.c_out * k_len, "conv2d: W");
    assert_eq!(y.len(), p.n * p.c_out * plane_out, "conv2d: Y");
    // A build over declared ranges lends the scratch its largest size: use a prefix.
    assert!(scratch.len() >= p.scratch_len(), "conv2d: scratch");
    let scratch = &mut scratch[..p.scratch_len()];
    if let Some(b) = bias {
        assert_eq!(b.len(), p.c_out, "conv2d: bias");
    }
    for i in 0..2 {
        let pads = p.pads[i] + p.pads[i + 2];
        let expect = out_len(
            [p.h_in, p.w_in][i],
            p.kernel[i],
            p.stride[i],
            p.dilation[i],
            pads,
        );
        assert_eq!([p.h_out, p.w_out][i], expect, "conv2d: output size, {p:?}");
    }
    if y.is_empty() {
        return;
    }
    if p.is_depthwise() {
        return depthwise(p, x, w, bias, y, scratch);
    }
    let win = window(p);
    let block = block_cols(plane_out);
    for img in 0..p.n {
        let x = &x[img * p.c_in * plane_in..][..p.c_in * plane_in];
        let y = &mut y[img * p.c_out * plane_out..][..p.c_out * plane_out];
        for g in 0..p.group {
            let xg = &x[g * c_in_g * plane_in..][..c_in_g * plane_in];
            let wg = &w[g * c_out_g * k_len..][..c_out_g * k_len];
            let yg = &mut y[g * c_out_g * plane_out..][..c_out_g * plane_out];
            let bias_g = bias.map(|b| &b[g * c_out_g..][..c_out_g]);
            let lhs = Operand::rows(wg, k_len).view(c_out_g, k_len);
            // Y[:, cols] = act(W_g · unfolded + bias), where `unfolded` holds the
            // input of positions `cols` (one row per (ci, ki, kj), one column each).
            let product = |cols: Range<usize>, out: faer::MatMut<'_, f32>, unfolded: &[f32]| {
                let rhs = Operand::rows(unfolded, cols.len()).view(k_len, cols.len());
                let mut out = out;
                // Inside a part of `for_each_with_scratch` this is one thread's product.
                gemm::product_shared(out.as_mut(), faer::Accum::Replace, lhs, rhs, 1.0);
                vectorize!({
                    for (c, row) in out.row_iter_mut().enumerate() {
                        let row = row.try_as_row_major_mut().expect("rows are contiguous");
                        let channel_bias = bias_g.map_or(0.0, |b| b[c]);
                        bias_activate(p.activation, channel_bias, row.as_slice_mut());
                    }
                });
            };
            if p.is_pointwise() {
                // One product over the whole plane, which `sgemm` shares among threads.
                let (lhs, rhs) = (Operand::rows(wg, k_len), Operand::rows(xg, plane_out));
                sgemm(
                    c_out_g, plane_out, k_len, 1.0, lhs, rhs, yg, plane_out, false,
                );
                vectorize!({
                    for (c, row) in yg.chunks_exact_mut(plane_out).enumerate() {
                        bias_activate(p.activation, bias_g.map_or(0.0, |b| b[c]), row);
                    }
                });
                continue;
            }
            // Blocks of output positions are independent: with worker threads, each
            // thread takes a run of consecutive blocks (one per thread: neighbouring
            // blocks on different cores would share the cache lines where rows meet)
            // and unfolds them into its own scratch. Fewer blocks than threads (a late
            // 7×7 stage is one block) share each block's product instead.
            let yg = gemm::row_major_mut(yg, c_out_g, plane_out, plane_out);
            let n_blocks = blocks(plane_out, block).count();
            let threads = threads::current();
            let unfold = |(cols, out): (Range<usize>, _), scratch: &mut [f32]| {
                let unfolded = &mut scratch[..k_len * cols.len()];
                im2col(&win, xg, cols.clone(), unfolded);
                product(cols, out, unfolded);
            };
            if n_blocks < threads {
                Split::new(yg, false, blocks(plane_out, block))
                    .for_each(|part| unfold(part, scratch));
                continue;
            }
            // Thread `t` takes blocks `t * n_blocks / threads ..`, as column ranges.
            let block_start = |b: usize| {
                blocks(plane_out, block)
                    .nth(b)
                    .map_or(plane_out, |r| r.start)
            };
            let runs = (0..threads).map(|t| {
                block_start(t * n_blocks / threads)..block_start((t + 1) * n_blocks / threads)
            });
            let macs = c_out_g * plane_out * k_len;
            threads::for_each_with_scratch(
                Split::new(yg, false, runs),
                macs,
                scratch,
                |(run, out), scratch| {
                    let local = blocks(plane_out, block)
                        .filter(|b| run.contains(&b.start))
                        .map(|b| b.start - run.start..b.end - run.start);
                    for (cols, out) in Split::new(out, false, local) {
                        unfold((cols.start + run.start..cols.end + run.start, out), scratch);
                    }
                },
            );
        }
    }
}

/// Output positions per block on this CPU (see the module documentation).
fn block_cols(positions: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    let wide = std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    let wide = false;
    let block = if wide { 96 } else { 48 };
    debug_assert!(block <= CONV_MAX_BLOCK);
    block.min(positions)
}

/// Splits `0..positions` into runs of `block`; the remainder joins the last run where
/// the joined run stays within [`CONV_MAX_BLOCK`] (no sliver on AVX2), else it is a
/// run of its own (on AVX-512), so the scratch planned for [`CONV_MAX_BLOCK`] columns
/// always suffices.
fn blocks(positions: usize, block: usize) -> impl Iterator<Item = Range<usize>> {
    let full = (positions / block).max(1);
    let rest = positions - (full * block).min(positions);
    let join = rest > 0 && block + rest <= CONV_MAX_BLOCK;
    let count = if rest > 0 && !join { full + 1 } else { full };
    (0..count).map(move |i| {
        let start = i * block;
        let end = if i + 1 == count {
            positions
        } else {
            start + block
        };
        start..end
    })
}

/// Unfolds output positions `cols` of one group of one image into `out`, one row per
/// `(ci, ki, kj)` and one column per position: the input element that tap meets there
/// (zero in the padding).
///
/// Taps are the outer loops and channels the inner one, so the geometry of each tap
/// and output-row segment (valid range, input offset) is worked out once for all
/// channels, and the innermost work is a copy of a contiguous or strided run.
fn im2col(win: &Window, x: &[f32], cols: Range<usize>, out: &mut [f32]) {
    let (h, w) = (&win.h, &win.w);
    let (plane, taps) = (h.in_len * w.in_len, h.kernel * w.kernel);
    let width = cols.len();
    for ki in 0..h.kernel {
        let oh_valid = h.outputs_for_tap(ki);
        for kj in 0..w.kernel {
            let ow_valid = w.outputs_for_tap(kj);
            let tap = ki * w.kernel + kj;
            // Walk the block one output row at a time: the segment of `len` positions
            // at `dst` in the block is columns `ow .. ow + len` of output row `oh`.
            let (mut oh, mut ow) = (cols.start / w.out_len, cols.start % w.out_len);
            let mut dst = 0;
            while dst < width {
                let len = (w.out_len - ow).min(width - dst);
                let valid = if oh_valid.contains(&oh) {
                    ow.max(ow_valid.start)..(ow + len).min(ow_valid.end)
                } else {
                    0..0
                };
                let rows = out.chunks_exact_mut(width).skip(tap).step_by(taps);
                if valid.is_empty() {
                    for row in rows {
                        row[dst..dst + len].fill(0.0);
                    }
                } else {
                    let ih = h.input_pos(oh, ki) as usize;
                    let src = ih * w.in_len + w.input_pos(valid.start, kj) as usize;
                    let (lead, n) = (valid.start - ow, valid.len());
                    for (row, plane) in rows.zip(x.chunks_exact(plane)) {
                        let row = &mut row[dst..dst + len];
                        row[..lead].fill(0.0);
                        row[lead + n..].fill(0.0);
                        let run = &mut row[lead..lead + n];
                        let src = &plane[src..];
                        if w.stride == 1 {
                            run.copy_from_slice(&src[..n]);
                        } else {
                            gather(run, &src[..(n - 1) * w.stride + 1], w.stride);
                        }
                    }
                }
                dst += len;
                oh += 1;
                ow = 0;
            }
        }
    }
}

/// Direct depthwise convolution, one output row at a time (see [`depthwise_row`]);
/// bias and activation finish each row while it is in L1. With left or right padding,
/// each plane is first copied between the zero columns `scratch` holds
/// ([`Conv2d::scratch_len`]).
fn depthwise(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    let taps = p.kernel[0] * p.kernel[1];
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    let [top, left, bottom, right] = p.pads;
    let w_pad = p.w_in + left + right;
    let bordered = !scratch.is_empty();
    let win = if bordered {
        let (out, rows_only) = ([p.h_out, p.w_out], [top, 0, bottom, 0]);
        Window::new(
            [p.h_in, w_pad],
            out,
            p.kernel,
            p.stride,
            p.dilation,
            rows_only,
        )
    } else {
        window(p)
    };
    // Planes are independent: with worker threads, each thread takes whole planes,
    // bordering them in its own scratch.
    let macs = y.len() * taps;
    let planes = x.chunks_exact(plane_in).zip(y.chunks_exact_mut(plane_out));
    threads::for_each_with_scratch(
        planes.enumerate(),
        macs,
        scratch,
        |(i, (x, out)), scratch| {
            let c = i % p.c_out;
            let wc = &w[c * taps..][..taps];
            vectorize!({
                let plane = if bordered {
                    border(x, p.w_in, [left, right], scratch);
                    &scratch[..]
                } else {
                    x
                };
                for (oh, row) in out.chunks_exact_mut(p.w_out).enumerate() {
                    depthwise_row(&win, plane, wc, oh, row, bordered);
                    bias_activate(p.activation, bias.map_or(0.0, |b| b[c]), row);
                }
            });
        },
    );
}

/// Copies plane `x` (rows `w_in` wide) into `out` between `pads[0]` zero columns on
/// the left and `pads[1]` on the right of each row, and zeroes the slack after the
/// last row. Everything it writes is rewritten for every plane, so `out` may hold
/// anything before (a worker's scratch holds another kernel's data).
#[inline(always)]
fn border(x: &[f32], w_in: usize, [left, right]: [usize; 2], out: &mut [f32]) {
    let w_pad = left + w_in + right;
    let rows = x.len() / w_in;
    for (row, padded) in x.chunks_exact(w_in).zip(out.chunks_exact_mut(w_pad)) {
        padded[..left].fill(0.0);
        padded[left..left + w_in].copy_from_slice(row);
        padded[left + w_in..].fill(0.0);
    }
    out[rows * w_pad..].fill(0.0);
}

/// Output positions computed together in registers by [`depthwise_row`].
const LANES: usize = DEPTHWISE_LANES;

/// One output row of a depthwise convolution, without bias.
///
/// In the interior, where every tap of the window lies inside the input row, [`LANES`]
/// outputs are accumulated together over all taps in an array the compiler keeps in
/// one vector register: one load and one multiply-add per tap, and one store. The few
/// outputs at the edges, whose windows reach into the padding, sum their valid taps
/// one by one. A `bordered` plane (padding copied in, slack after it) has no edges,
/// and a row narrower than a block is one block whose extra lanes are dropped.
#[inline(always)]
fn depthwise_row(
    win: &Window,
    plane: &[f32],
    wc: &[f32],
    oh: usize,
    out: &mut [f32],
    bordered: bool,
) {
    let (h, w) = (&win.h, &win.w);
    let rows = h.taps_inside(oh);
    let in_row = |ki: usize| {
        let ih = h.input_pos(oh, ki) as usize;
        &plane[ih * w.in_len..][..w.in_len]
    };
    let (first, last) = (w.outputs_for_tap(0), w.outputs_for_tap(w.kernel - 1));
    let start = first.start.min(w.out_len);
    let end = last.end.max(start);
    // The interior in blocks of LANES; a last partial block is computed as a full
    // block ending at `end`, overlapping the one before it.
    let blocked = end - start >= LANES || (bordered && start == 0 && end == w.out_len);
    if !blocked {
        // Narrow rows (small late-stage maps): one multiply-add pass per tap over the
        // outputs that tap reaches, instead of clipping every output's window.
        depthwise_row_by_tap(win, plane, wc, oh, out);
        return;
    }
    for ow in (0..start).chain(end..w.out_len) {
        let mut sum = 0.0;
        for ki in rows.clone() {
            let src = in_row(ki);
            for kj in w.taps_inside(ow) {
                sum += wc[ki * w.kernel + kj] * src[w.input_pos(ow, kj) as usize];
            }
        }
        out[ow] = sum;
    }
    // The interior, with the window width and stride of the common kernels constant, so
    // that the taps unroll and stride 1 is one unaligned vector load per tap.
    let interior = (win, plane, wc, oh, start..end, out);
    match (w.kernel, w.stride, w.dilation) {
        (3, 1, 1) => depthwise_interior::<3, 1>(interior),
        (3, 2, 1) => depthwise_interior::<3, 2>(interior),
        (5, 1, 1) => depthwise_interior::<5, 1>(interior),
        (5, 2, 1) => depthwise_interior::<5, 2>(interior),
        (7, 1, 1) => depthwise_interior::<7, 1>(interior),
        _ => depthwise_interior_any(interior),
    }
}

/// A depthwise output row as a sum over taps: for each tap, `out[r] += w · in[..]` over
/// the range `r` of outputs whose window tap lies inside the input.
#[inline(always)]
fn depthwise_row_by_tap(win: &Window, plane: &[f32], wc: &[f32], oh: usize, out: &mut [f32]) {
    let (h, w) = (&win.h, &win.w);
    for o in out.iter_mut() {
        *o = 0.0;
    }
    for ki in h.taps_inside(oh) {
        let ih = h.input_pos(oh, ki) as usize;
        let src = &plane[ih * w.in_len..][..w.in_len];
        for kj in 0..w.kernel {
            let r = w.outputs_for_tap(kj);
            if r.is_empty() {
                continue;
            }
            let wk = wc[ki * w.kernel + kj];
            let base = w.input_pos(r.start, kj) as usize;
            let n = r.len();
            let dst = &mut out[r];
            if w.stride == 1 {
                for (o, &v) in dst.iter_mut().zip(&src[base..base + n]) {
                    *o += wk * v;
                }
            } else {
                for (i, o) in dst.iter_mut().enumerate() {
                    *o += wk * src[base + i * w.stride];
                }
            }
        }
    }
}

/// The operands of [`depthwise_interior`]: window, input plane, channel weights,
/// output row index, interior columns, output row.
type Interior<'a> = (
    &'a Window,
    &'a [f32],
    &'a [f32],
    usize,
    Range<usize>,
    &'a mut [f32],
);

/// Blocks of [`LANES`] outputs [`depthwise_interior`] accumulates at once: each block's
/// sum is one chain of dependent adds over the taps, so independent chains side by side
/// keep the vector units busy while each waits for its previous add.
const CHAINS: usize = 4;

/// The interior of [`depthwise_row`] (at least [`LANES`] columns, or a bordered row)
/// for a window `KW` wide at stride `S` (dilation 1): [`CHAINS`]·[`LANES`] outputs at
/// a time, then [`LANES`] at a time, a last partial block computed as a full block
/// ending at the interior's end, overlapping the one before it. Each output sums its
/// taps in row-major order, as [`depthwise_interior_any`] does.
#[inline(always)]
fn depthwise_interior<const KW: usize, const S: usize>(
    (win, plane, wc, oh, cols, out): Interior<'_>,
) {
    let (h, w) = (&win.h, &win.w);
    let rows = h.taps_inside(oh);
    // Input row of the first tap row, and how far apart the tap rows lie.
    let first = h.input_pos(oh, rows.start) as usize * w.in_len;
    let row_step = h.dilation * w.in_len;
    let taps = |ow: usize| {
        // The first input column of output `ow`'s window: inside the row here.
        let at = (ow * S) as isize - w.pad_begin as isize;
        rows.clone().enumerate().map(move |(r, ki)| {
            let wk: &[f32; KW] = wc[ki * KW..][..KW].try_into().expect("KW taps");
            // The rest of the plane, not the row: a narrow row's block reads past it.
            (&plane[first + r * row_step + at as usize..], wk)
        })
    };
    let mut ow = cols.start;
    while ow + CHAINS * LANES <= cols.end {
        let acc = block_sums::<CHAINS, KW, S>(taps(ow));
        out[ow..ow + CHAINS * LANES].copy_from_slice(acc.as_flattened());
        ow += CHAINS * LANES;
    }
    let last_block = cols.end.saturating_sub(LANES).max(cols.start);
    for ow in (ow..cols.end).step_by(LANES).map(|ow| ow.min(last_block)) {
        let [acc] = block_sums::<1, KW, S>(taps(ow));
        let n = LANES.min(cols.end - ow);
        out[ow..ow + n].copy_from_slice(&acc[..n]);
    }
}

/// The sums of `B` consecutive blocks of [`LANES`] outputs over `taps`: per tap row,
/// the input from the first block's window start and the row's `KW` weights.
#[inline(always)]
fn block_sums<'a, const B: usize, const KW: usize, const S: usize>(
    taps: impl Iterator<Item = (&'a [f32], &'a [f32; KW])>,
) -> [[f32; LANES]; B] {
    let mut acc = [[0.0f32; LANES]; B];
    for (src, wk) in taps {
        for (kj, &wk) in wk.iter().enumerate() {
            for (b, acc) in acc.iter_mut().enumerate() {
                let v = lanes::<S>(src, b * LANES * S + kj);
                for (a, v) in acc.iter_mut().zip(v) {
                    *a += wk * v;
                }
            }
        }
    }
    acc
}

/// [`depthwise_interior`] for any window, stride and dilation, [`LANES`] outputs at a
/// time.
#[inline(always)]
fn depthwise_interior_any((win, plane, wc, oh, cols, out): Interior<'_>) {
    let (h, w) = (&win.h, &win.w);
    let rows = h.taps_inside(oh);
    let last_block = cols.end.saturating_sub(LANES).max(cols.start);
    for ow in cols.clone().step_by(LANES).map(|ow| ow.min(last_block)) {
        let mut acc = [0.0f32; LANES];
        for ki in rows.clone() {
            let ih = h.input_pos(oh, ki) as usize;
            let src = &plane[ih * w.in_len..];
            for kj in 0..w.kernel {
                let wk = wc[ki * w.kernel + kj];
                let at = w.input_pos(ow, kj) as usize;
                let v: [f32; LANES] = std::array::from_fn(|l| src[at + l * w.stride]);
                for (a, v) in acc.iter_mut().zip(v) {
                    *a += wk * v;
                }
            }
        }
        let n = LANES.min(cols.end - ow);
        out[ow..ow + n].copy_from_slice(&acc[..n]);
    }
}

/// [`LANES`] elements of `src` from `at`, `S` apart.
#[inline(always)]
fn lanes<const S: usize>(src: &[f32], at: usize) -> [f32; LANES] {
    let from = &src[at..at + (LANES - 1) * S + 1];
    std::array::from_fn(|l| from[l * S])
}

#[cfg(test)]
mod tests {
    use super::{CONV_MAX_BLOCK, blocks};

    /// Blocks tile the positions in order, never wider than the planned scratch, and
    /// only the AVX-512 width leaves a remainder narrower than a block.
    #[test]
    fn blocks_tile_the_positions_within_the_scratch() {
        for block in [48, 96] {
            for positions in block..600 {
                let runs: Vec<_> = blocks(positions, block).collect();
                assert_eq!(runs.first().map(|r| r.start), Some(0));
                assert_eq!(runs.last().map(|r| r.end), Some(positions));
                assert!(runs.windows(2).all(|w| w[0].end == w[1].start));
                assert!(runs.iter().all(|r| r.len() <= CONV_MAX_BLOCK), "{runs:?}");
                let narrow = runs.iter().filter(|r| r.len() < block).count();
                assert_eq!(narrow, usize::from(block == 96 && positions % 96 != 0));
            }
        }
    }
}
