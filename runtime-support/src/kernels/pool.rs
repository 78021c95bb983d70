//! Pooling: 2-D max/average pooling over NCHW, and the mean over the innermost axis
//! that GlobalAveragePool becomes.

use super::elementwise::Row;
use super::simd::{self, vectorize};
use super::window::{Axis, Window, accumulate};
use crate::arena::Overlapped;
use crate::params::{Pool2d, PoolKind, ReduceMean};
use crate::threads;

/// ONNX MaxPool / AveragePool. Windows are clipped to the input; a max over a window
/// that lies wholly in the padding is `-inf`. The average divides by the number of
/// taps inside the input (`count_include_pad = 0`) or inside the input and its pads
/// (`= 1`; under `ceil_mode` a window can also run past the pads, and those positions
/// are not counted, as in onnxruntime).
pub fn pool2d(p: &Pool2d, x: &[f32], y: &mut [f32]) {
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    assert_eq!(x.len(), p.n * p.c * plane_in, "pool2d: X");
    assert_eq!(y.len(), p.n * p.c * plane_out, "pool2d: Y");
    if y.is_empty() {
        return;
    }
    let win = window(p);
    // Planes are independent: with worker threads, each thread takes whole planes.
    let work = y.len() * p.kernel[0] * p.kernel[1];
    let planes = x.chunks_exact(plane_in).zip(y.chunks_exact_mut(plane_out));
    threads::for_each(planes, work, |(x, out)| {
        vectorize!({ pool_plane(p, &win, x, out) })
    });
}

/// [`pool2d`] with its output placed partly over its input (segment overlapping): one
/// plane after another, each output plane written only while its input plane is read,
/// which [`Overlapped`] proved lies apart from every input plane not yet read. Gives
/// the same bits as [`pool2d`].
pub fn pool2d_overlapping(p: &Pool2d, mut xy: Overlapped<'_>) {
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    let planes = p.n * p.c;
    assert_eq!(xy.planes(), planes, "pool2d_overlapping: planes");
    assert_eq!(
        xy.lens(),
        (planes * plane_in, planes * plane_out),
        "pool2d_overlapping: X, Y"
    );
    if plane_out == 0 {
        return;
    }
    let win = window(p);
    vectorize!({
        for q in 0..planes {
            let (x, out) = xy.plane(q);
            pool_plane(p, &win, x, out);
        }
    });
}

fn window(p: &Pool2d) -> Window {
    Window::new(
        [p.h_in, p.w_in],
        [p.h_out, p.w_out],
        p.kernel,
        p.stride,
        p.dilation,
        p.pads,
    )
}

/// One output plane from one input plane. The output is written before the input is
/// fully read, so the two must not share bytes.
#[inline(always)]
fn pool_plane(p: &Pool2d, win: &Window, x: &[f32], out: &mut [f32]) {
    match p.kind {
        PoolKind::Max => reduce_plane(win, x, out, f32::NEG_INFINITY, f32::max),
        PoolKind::Average { count_include_pad } => {
            reduce_plane(win, x, out, 0.0, |a, b| a + b);
            divide_by_count(win, count_include_pad, out);
        }
    }
}

/// Widest input row [`reduce_plane`] reduces through its stack buffer.
const ROW_MAX: usize = 1024;

/// `out[o] = f(..f(identity, x[tap 0])..)` over each window's taps inside the plane.
/// Max and sum are separable: for each output row, the rows its window covers are
/// first reduced into one (contiguous, vectorised), then each output reduces its
/// window's columns of that row (`kh + kw` steps per output instead of `kh · kw`,
/// where a tap-by-tap walk spent its time in per-tap set-up on small planes). Rows
/// wider than [`ROW_MAX`] go tap by tap.
#[inline(always)]
fn reduce_plane(
    win: &Window,
    x: &[f32],
    out: &mut [f32],
    identity: f32,
    f: impl Fn(f32, f32) -> f32 + Copy,
) {
    let (h, w) = (&win.h, &win.w);
    if w.in_len > ROW_MAX {
        out.fill(identity);
        return win.for_each_tap(
            x,
            out,
            #[inline(always)]
            |_, out, input| accumulate(out, input, f),
        );
    }
    let mut buf = [0.0f32; ROW_MAX];
    let rows = &mut buf[..w.in_len];
    // Outputs whose every column tap lies inside the row.
    let inner = {
        let (first, last) = (w.outputs_for_tap(0), w.outputs_for_tap(w.kernel - 1));
        first.start.max(last.start)..first.end.min(last.end).max(first.start.max(last.start))
    };
    for (oh, out_row) in out.chunks_exact_mut(w.out_len).enumerate() {
        rows.fill(identity);
        for ki in h.taps_inside(oh) {
            let ih = h.input_pos(oh, ki) as usize;
            for (r, &v) in rows.iter_mut().zip(&x[ih * w.in_len..][..w.in_len]) {
                *r = f(*r, v);
            }
        }
        let rows = &*rows;
        // Edges tap by tap; the inner outputs one tap at a time over the whole run
        // (a contiguous or strided slice operation, vectorised).
        for ow in (0..inner.start).chain(inner.end..w.out_len) {
            let mut acc = identity;
            for kj in w.taps_inside(ow) {
                acc = f(acc, rows[w.input_pos(ow, kj) as usize]);
            }
            out_row[ow] = acc;
        }
        let run = &mut out_row[inner.clone()];
        run.fill(identity);
        if !run.is_empty() {
            for kj in 0..w.kernel {
                let start = w.input_pos(inner.start, kj) as usize;
                accumulate(run, Row::strided(&rows[start..], w.stride, run.len()), f);
            }
        }
    }
}

/// Turns the window sums of one output plane into averages. The count is separable:
/// (taps counted along the height) × (taps counted along the width).
#[inline(always)]
fn divide_by_count(win: &Window, count_include_pad: bool, out: &mut [f32]) {
    for (oh, row) in out.chunks_exact_mut(win.w.out_len).enumerate() {
        let rows = taps_counted(&win.h, oh, count_include_pad);
        for (ow, v) in row.iter_mut().enumerate() {
            let n = rows * taps_counted(&win.w, ow, count_include_pad);
            *v = if n == 0 { 0.0 } else { *v / n as f32 };
        }
    }
}

/// The divisor's share from one axis for output `o`.
#[inline(always)]
fn taps_counted(a: &Axis, o: usize, count_include_pad: bool) -> usize {
    if count_include_pad {
        a.taps_inside_padded(o)
    } else {
        a.taps_inside(o).len()
    }
}

/// `y[o] = mean(x[o * inner .. (o + 1) * inner])`.
pub fn reduce_mean(p: &ReduceMean, x: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), p.outer * p.inner, "reduce_mean: X");
    assert_eq!(y.len(), p.outer, "reduce_mean: Y");
    if p.inner == 0 {
        y.fill(f32::NAN); // the mean of nothing, as 0.0 / 0.0
        return;
    }
    let scale = 1.0 / p.inner as f32;
    vectorize!({
        for (v, row) in y.iter_mut().zip(x.chunks_exact(p.inner)) {
            *v = simd::sum(row) * scale;
        }
    });
}
