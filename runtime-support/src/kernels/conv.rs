//! 2-D convolution (NCHW input, OIHW weights), in three strategies:
//!
//! - **pointwise** (1×1, unit stride, no padding): each group is already the matrix
//!   `X[c_in/g, H*W]`, so it is one GEMM `Y = W · X` on the input as it lies;
//! - **depthwise** (one input and one output channel per group): a direct sliding
//!   window, one multiply-add run per kernel tap and output row, no scratch;
//! - **general**: im2col of one group of one image into `scratch`
//!   (`[c_in/g * kh * kw, h_out * w_out]`), then one GEMM per group.
//!
//! Bias and the fused activation are applied per output channel right after its
//! group's GEMM, while the output is still in cache.

use super::elementwise::{Row, bias_activate};
use super::gemm::{Operand, sgemm};
use super::simd::vectorize;
use super::window::{Window, accumulate};
use crate::params::Conv2d;

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
    assert_eq!(scratch.len(), p.scratch_len(), "conv2d: scratch");
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
        return depthwise(p, x, w, bias, y);
    }
    for img in 0..p.n {
        let x = &x[img * p.c_in * plane_in..][..p.c_in * plane_in];
        let y = &mut y[img * p.c_out * plane_out..][..p.c_out * plane_out];
        for g in 0..p.group {
            let xg = &x[g * c_in_g * plane_in..][..c_in_g * plane_in];
            let wg = &w[g * c_out_g * k_len..][..c_out_g * k_len];
            let yg = &mut y[g * c_out_g * plane_out..][..c_out_g * plane_out];
            let cols: &[f32] = if p.is_pointwise() {
                xg
            } else {
                im2col(p, xg, scratch);
                scratch
            };
            sgemm(
                c_out_g,
                plane_out,
                k_len,
                1.0,
                Operand::rows(wg, k_len),
                Operand::rows(cols, plane_out),
                yg,
                plane_out,
                false,
            );
            let bias_g = bias.map(|b| &b[g * c_out_g..][..c_out_g]);
            output_stage(p, bias_g, yg, plane_out);
        }
    }
}

/// `y = act(y + bias[c])` over each channel's plane.
fn output_stage(p: &Conv2d, bias: Option<&[f32]>, y: &mut [f32], plane: usize) {
    vectorize(|| {
        for (c, y) in y.chunks_exact_mut(plane).enumerate() {
            bias_activate(p.activation, bias.map_or(0.0, |b| b[c]), y);
        }
    });
}

/// Unfolds one group of one image into `cols`: row `(ci, ki, kj)` holds, for every
/// output position, the input element that tap meets (zero in the padding).
fn im2col(p: &Conv2d, x: &[f32], cols: &mut [f32]) {
    let win = window(p);
    let (h, w) = (&win.h, &win.w);
    let plane_out = h.out_len * w.out_len;
    let mut rows = cols.chunks_exact_mut(plane_out);
    for plane in x.chunks_exact(h.in_len * w.in_len) {
        for ki in 0..h.kernel {
            let oh_valid = h.outputs_for_tap(ki);
            for kj in 0..w.kernel {
                let row = rows
                    .next()
                    .expect("scratch holds c_in/group * kh * kw rows");
                let ow_valid = w.outputs_for_tap(kj);
                for (oh, out) in row.chunks_exact_mut(w.out_len).enumerate() {
                    if !oh_valid.contains(&oh) || ow_valid.is_empty() {
                        out.fill(0.0);
                        continue;
                    }
                    let ih = h.input_pos(oh, ki) as usize;
                    let in_row = &plane[ih * w.in_len..][..w.in_len];
                    let start = w.input_pos(ow_valid.start, kj) as usize;
                    let src = Row::strided(&in_row[start..], w.stride, ow_valid.len());
                    out[..ow_valid.start].fill(0.0);
                    out[ow_valid.end..].fill(0.0);
                    let out = &mut out[ow_valid.clone()];
                    match src {
                        Row::Dense(s) => out.copy_from_slice(s),
                        Row::Strided(s, st) => out
                            .iter_mut()
                            .zip(s.iter().step_by(st))
                            .for_each(|(o, &v)| *o = v),
                        Row::Splat(_) | Row::Out => unreachable!("stride is positive"),
                    }
                }
            }
        }
    }
}

/// Direct depthwise convolution: per channel and output row, the row starts at the
/// bias and each kernel tap adds `weight * input` over the run of outputs it reaches.
fn depthwise(p: &Conv2d, x: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32]) {
    let win = window(p);
    let taps = p.kernel[0] * p.kernel[1];
    let (plane_in, w_out) = (p.h_in * p.w_in, p.w_out);
    vectorize(|| {
        let planes = x
            .chunks_exact(plane_in)
            .zip(y.chunks_exact_mut(p.h_out * w_out));
        for (i, (x, y)) in planes.enumerate() {
            let c = i % p.c_out;
            let wc = &w[c * taps..][..taps];
            for (oh, out) in y.chunks_exact_mut(w_out).enumerate() {
                out.fill(0.0);
                win.for_each_tap(x, oh, out, |k, out, input| {
                    let wk = wc[k];
                    accumulate(out, input, |o, v| o + wk * v);
                });
                bias_activate(p.activation, bias.map_or(0.0, |b| b[c]), out);
            }
        }
    });
}
