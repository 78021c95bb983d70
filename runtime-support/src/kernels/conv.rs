//! 2-D convolution (NCHW input, OIHW weights), in four strategies:
//!
//! - **depthwise** (one input and one output channel per group): direct, in explicit
//!   SIMD over blocks of 8 channels interleaved (`depthwise.rs`);
//! - **direct** (3×3 with few input channels, or a 7×7 stride-2 image stem, one group:
//!   [`Conv2d::direct_applies`]):
//!   output channels as the vector lanes (`direct.rs`);
//! - **images at once**, where a batch's images have fewer positions than half a
//!   block ([`CONV_MAX_BLOCK`]) each: im2col of several images into one block and one
//!   faer GEMM for them all ([`Conv2d::conv_images_at_once`]);
//! - **everything else**, per image and group, as one product `Y = W_g · B` over blocks
//!   of B made on the fly (`blocked.rs`): B is a pointwise layer's input as it lies
//!   (1×1, unit stride, no padding: already the matrix `X[c_in/g, H*W]`), else its
//!   windows unfolded (im2col), packed straight into the panels of our 6×16
//!   micro-kernel (`packed.rs`), the weights read in place.
//!
//! Bias, the residual and the fused activation follow each block's product on the
//! columns it wrote, while they are still in cache. The packed product on panels
//! replaced faer's for im2col (which packs the unfolded block again): ResNet-50's
//! 256→512 s2 at 14² 1.98–2.05 → 1.90–2.01 ms, YOLOv8n's 64→128 s2 at 40² 0.88–0.96
//! → 0.83–0.84 ms; and for pointwise layers, once blocked with a dot-product tail:
//! 2048→512 at 7² 0.80× faer's cycles, 1024→256 at 14² 0.97×, 256→64 at 56² 0.99×
//! (one Zen 4 core).

use std::ops::Range;

use super::blocked;
use super::elementwise::{bias_activate, gather, residual_bias_activate};
use super::gemm::{self, Operand};
use super::packed::Epilogue;
use super::simd::vectorize;
use super::window::Window;
use crate::params::{Activation, CONV_MAX_BLOCK, Conv2d, Pool2d, PoolKind};
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
    conv(p, x, w, bias, Residual::None, y, scratch);
}

/// [`conv2d`] with a residual `r` (shaped as `y`) added before the activation:
/// `y = act(conv(x, w) + bias + r)`, the convolution and the `Add` after it (ResNet's
/// shortcut) in one step. The pointwise and im2col strategies add `r` in their output
/// stage, while each row of `y` is in cache; the direct and depthwise ones (which
/// activate in registers) add it in a pass after.
pub fn conv2d_residual(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    residual: &[f32],
    y: &mut [f32],
    scratch: &mut [f32],
) {
    assert_eq!(residual.len(), y.len(), "conv2d_residual: residual");
    if p.is_depthwise() || p.direct_applies() {
        let plain = Conv2d {
            activation: Activation::None,
            ..*p
        };
        conv(&plain, x, w, bias, Residual::None, y, scratch);
        let act = p.activation;
        return vectorize!({ residual_bias_activate(act, 0.0, residual, y) });
    }
    conv(p, x, w, bias, Residual::Apart(residual), y, scratch);
}

/// [`conv2d`] then a max pool `pool` over its output, in one pass: `y` is the pooled
/// output, and the convolution's own output is never written whole (the direct
/// kernel pools each block's rows while they are in cache). For a layer the direct
/// kernel takes ([`Conv2d::direct_applies`]; the compiler fuses only such a layer with
/// the `MaxPool` after it) and a max pool over exactly its output; the scratch is
/// [`Conv2d::max_pool_scratch_len`]. Gives the bits of the two steps apart.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_max_pool(
    p: &Conv2d,
    pool: &Pool2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    assert!(
        p.direct_applies(),
        "conv2d_max_pool: a direct layer, not {p:?}"
    );
    let pooled = (pool.n, pool.c, pool.h_in, pool.w_in);
    assert!(
        pool.kind == PoolKind::Max
            && pooled == (p.n, p.c_out, p.h_out, p.w_out)
            && pool
                .kernel
                .iter()
                .chain(&pool.stride)
                .chain(&pool.dilation)
                .all(|&v| v > 0)
            && pool.pads[1] < pool.kernel[1] * pool.dilation[1],
        "conv2d_max_pool: {pool:?} does not pool {p:?}"
    );
    check_operands(p, x, w, bias);
    assert_eq!(
        y.len(),
        p.n * p.c_out * pool.h_out * pool.w_out,
        "conv2d_max_pool: Y"
    );
    let needed = p.max_pool_scratch_len(pool);
    assert!(scratch.len() >= needed, "conv2d_max_pool: scratch");
    if y.is_empty() || p.h_out == 0 {
        return;
    }
    super::direct::direct(p, Some(pool), x, w, bias, y, &mut scratch[..needed]);
}

/// [`conv2d_residual`] with the residual in `y`, overwritten by the result: the
/// products accumulate onto it (the planner puts a fused convolution's output over its
/// residual where the residual dies there, as the separate in-place `Add` did). For
/// the pointwise and im2col strategies only, which every 1×1 layer but a depthwise one
/// takes.
pub fn conv2d_residual_inplace(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    assert!(
        !p.is_depthwise() && !p.direct_applies(),
        "conv2d_residual_inplace: a pointwise or im2col layer, not {p:?}"
    );
    conv(p, x, w, bias, Residual::InOutput, y, scratch);
}

/// [`conv2d`] of a grouped convolution whose output channels are written in the order
/// of the channel shuffle after it (ShuffleNet's `Reshape` to `[N, g, C/g, H, W]`,
/// `Transpose(0, 2, 1, 3, 4)`, `Reshape` back, with `g` the convolution's groups):
/// channel `a` of group `b` is written as channel `a·g + b`. Each group's product
/// writes its rows `g` planes apart, so the shuffle, a copy of the whole output as a
/// step of its own, costs nothing. For a grouped layer of the pointwise or im2col
/// strategy, which every grouped layer but a depthwise one takes.
pub fn conv2d_shuffled(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    assert!(
        p.group > 1 && !p.is_depthwise(),
        "conv2d_shuffled: a grouped layer that is not depthwise, not {p:?}"
    );
    conv(p, x, w, bias, Residual::Shuffled, y, scratch);
}

/// Where a convolution's residual is, if it has one.
#[derive(Clone, Copy)]
enum Residual<'a> {
    None,
    /// A tensor of `y`'s shape apart from it.
    Apart(&'a [f32]),
    /// In `y` itself: products accumulate onto it.
    InOutput,
    /// None, and the output channels go in channel-shuffle order
    /// ([`conv2d_shuffled`]).
    Shuffled,
}

/// Checks a convolution's groups, input, weights and bias against `p`, and its output
/// size against its window (every entry point; the output's length is each one's own).
fn check_operands(p: &Conv2d, x: &[f32], w: &[f32], bias: Option<&[f32]>) {
    assert!(
        p.group > 0 && p.c_in.is_multiple_of(p.group) && p.c_out.is_multiple_of(p.group),
        "conv2d: {p:?}"
    );
    let k_len = p.c_in / p.group * p.kernel[0] * p.kernel[1];
    assert_eq!(x.len(), p.n * p.c_in * p.h_in * p.w_in, "conv2d: X");
    assert_eq!(w.len(), p.c_out * k_len, "conv2d: W");
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
}

/// [`conv2d`], [`conv2d_residual`] and [`conv2d_residual_inplace`]; a residual comes
/// only with the pointwise and im2col strategies.
fn conv(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    residual: Residual<'_>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    let accumulate = matches!(residual, Residual::InOutput);
    let shuffled = matches!(residual, Residual::Shuffled);
    let accum = if accumulate {
        faer::Accum::Add
    } else {
        faer::Accum::Replace
    };
    let residual = match residual {
        Residual::Apart(r) => Some(r),
        _ => None,
    };
    check_operands(p, x, w, bias);
    let (c_in_g, c_out_g) = (p.c_in / p.group, p.c_out / p.group);
    let [kh, kw] = p.kernel;
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    let k_len = c_in_g * kh * kw;
    assert_eq!(y.len(), p.n * p.c_out * plane_out, "conv2d: Y");
    // A build over declared ranges lends the scratch its largest size: use a prefix.
    // Images at once need more, and run only where the scratch has it (see
    // `Conv2d::least_scratch_len`).
    let needed = p.least_scratch_len();
    assert!(scratch.len() >= needed, "conv2d: scratch");
    if y.is_empty() {
        return;
    }
    if p.is_depthwise() {
        // Whole planes at once where the scratch has room for them.
        let lent = scratch.len().min(p.scratch_len());
        return super::depthwise::depthwise(p, x, w, bias, y, &mut scratch[..lent]);
    }
    if super::stem::takes(p) {
        return super::stem::stem(p, x, w, bias, y, &mut scratch[..needed]);
    }
    if p.direct_applies() {
        return super::direct::direct(p, None, x, w, bias, y, &mut scratch[..needed]);
    }
    let win = window(p);
    let wide = images_block_cols();
    let images_len = p.images_at_once_scratch_len(wide);
    if let Some(images) = p.conv_images_at_once(wide)
        && scratch.len() >= images_len
    {
        let scratch = &mut scratch[..images_len];
        return images_at_once(p, &win, images, x, w, bias, residual, accum, y, scratch);
    }
    // One block where the scratch holds it (a build over ranges may lend less).
    let one_block = p.one_block_scratch_len();
    let lent = if scratch.len() >= one_block {
        one_block
    } else {
        needed
    };
    let scratch = &mut scratch[..lent];
    for img in 0..p.n {
        let x = &x[img * p.c_in * plane_in..][..p.c_in * plane_in];
        let y = &mut y[img * p.c_out * plane_out..][..p.c_out * plane_out];
        let residual = residual.map(|r| &r[img * p.c_out * plane_out..][..p.c_out * plane_out]);
        for g in 0..p.group {
            let xg = &x[g * c_in_g * plane_in..][..c_in_g * plane_in];
            let wg = &w[g * c_out_g * k_len..][..c_out_g * k_len];
            // Shuffled, the group's rows are `group` planes apart from its first.
            let (first, row_stride) = if shuffled {
                (g, p.group * plane_out)
            } else {
                (g * c_out_g, plane_out)
            };
            let yg = &mut y[first * plane_out..][..(c_out_g - 1) * row_stride + plane_out];
            let bias_g = bias.map(|b| &b[g * c_out_g..][..c_out_g]);
            let residual_g = residual.map(|r| &r[g * c_out_g * plane_out..][..c_out_g * plane_out]);
            // What the output stage adds to channel `c` at output positions `cols`:
            // its bias, and its residual there.
            let stage = |c: usize, cols: Range<usize>| {
                let channel_bias = bias_g.map_or(0.0, |b| b[c]);
                (channel_bias, residual_g.map(|r| &r[c * plane_out..][cols]))
            };
            // The output stage in the product's registers where it has a vector form
            // and no residual to read, else (and for each block's tail) over each
            // finished block.
            let epilogue = match residual_g {
                None if k_len > 0 => Epilogue::new(bias_g, p.activation),
                _ => None,
            };
            // The output stage of a product's block `out`: output channels `rows`
            // at positions `cols`.
            let finish =
                |rows: Range<usize>, cols: Range<usize>, mut out: faer::MatMut<'_, f32>| {
                    vectorize!({
                        for (c, row) in rows.zip(out.as_mut().row_iter_mut()) {
                            let row = row.try_as_row_major_mut().expect("rows are contiguous");
                            let (b, r) = stage(c, cols.clone());
                            finish_row(p.activation, b, r, row.as_slice_mut());
                        }
                    });
                };
            // The product's right operand: a pointwise layer's input as it lies, else
            // its windows unfolded (im2col), a block at a time in either case.
            let b = if p.is_pointwise() {
                blocked::Operand::Rows {
                    x: xg,
                    ld: plane_out,
                }
            } else {
                blocked::Operand::Unfolded { win: &win, x: xg }
            };
            let yg = gemm::row_major_mut(yg, c_out_g, plane_out, row_stride);
            blocked::product(wg, b, yg, accumulate, epilogue, scratch, finish);
        }
    }
}

/// im2col + GEMM for `images` images at a time, each with fewer positions than half
/// a block: one product's columns are all their positions, so the weights are read
/// once per `images` images instead of once per image (a batch of short 1-D signals,
/// as silero VAD's STFT and encoder run, is otherwise one narrow product each).
#[allow(clippy::too_many_arguments)]
fn images_at_once(
    p: &Conv2d,
    win: &Window,
    images: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    accum: faer::Accum,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    let k_len = p.c_in * p.kernel[0] * p.kernel[1];
    let lhs = Operand::rows(w, k_len).view(p.c_out, k_len);
    let parts = x
        .chunks(images * p.c_in * plane_in)
        .zip(y.chunks_mut(images * p.c_out * plane_out))
        .enumerate();
    let macs = p.n * p.c_out * plane_out * k_len;
    threads::for_each_with_scratch(parts, macs, scratch, |(part, (x, y)), scratch| {
        let residual = residual.map(|r| &r[part * images * p.c_out * plane_out..][..y.len()]);
        let cols = x.len() / (p.c_in * plane_in) * plane_out;
        let (unfolded, product) = scratch.split_at_mut(k_len * cols);
        for (i, x) in x.chunks_exact(p.c_in * plane_in).enumerate() {
            im2col_at(win, x, 0..plane_out, unfolded, cols, i * plane_out);
        }
        let product = &mut product[..p.c_out * cols];
        let rhs = Operand::rows(unfolded, cols).view(k_len, cols);
        let out = gemm::row_major_mut(product, p.c_out, cols, cols);
        gemm::product_shared(out, faer::Accum::Replace, lhs, rhs, 1.0);
        // Row `c` of the product holds channel `c` of every image in turn.
        vectorize!({
            for (c, row) in product.chunks_exact(cols).enumerate() {
                let channel_bias = bias.map_or(0.0, |b| b[c]);
                let planes = y.chunks_exact_mut(p.c_out * plane_out);
                for (i, (from, image)) in row.chunks_exact(plane_out).zip(planes).enumerate() {
                    let dst = &mut image[c * plane_out..][..plane_out];
                    match accum {
                        faer::Accum::Add => dst.iter_mut().zip(from).for_each(|(d, f)| *d += f),
                        faer::Accum::Replace => dst.copy_from_slice(from),
                    }
                    let r = residual.map(|r| &r[(i * p.c_out + c) * plane_out..][..plane_out]);
                    finish_row(p.activation, channel_bias, r, dst);
                }
            }
        });
    });
}

/// The output stage of one row of a product: `act(row + bias)`, with the residual
/// added first where there is one. Called inside `vectorize!`, inlined into it.
#[inline(always)]
fn finish_row(act: Activation, bias: f32, residual: Option<&[f32]>, row: &mut [f32]) {
    match residual {
        Some(r) => residual_bias_activate(act, bias, r, row),
        None => bias_activate(act, bias, row),
    }
}

/// Output positions per block of images at once on this CPU (see [`CONV_MAX_BLOCK`]).
fn images_block_cols() -> usize {
    #[cfg(target_arch = "x86_64")]
    let wide = std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    let wide = false;
    let block = if wide { 96 } else { 48 };
    debug_assert!(block <= CONV_MAX_BLOCK);
    block
}

/// Unfolds output positions `cols` of one group of one image into columns `at ..` of
/// `out`, rows `row_len` long: one row per `(ci, ki, kj)` and one column per position,
/// the input element that tap meets there (zero in the padding). One image's part of
/// a product over several ([`Conv2d::conv_images_at_once`]).
///
/// Taps are the outer loops and channels the inner one, so the geometry of each tap
/// and output-row segment (valid range, input offset) is worked out once for all
/// channels, and the innermost work is a copy of a contiguous or strided run.
fn im2col_at(
    win: &Window,
    x: &[f32],
    cols: Range<usize>,
    out: &mut [f32],
    row_len: usize,
    at: usize,
) {
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
                let rows = out.chunks_exact_mut(row_len).skip(tap).step_by(taps);
                let rows = rows.map(|row| &mut row[at..]);
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
