//! Pooling: 2-D max/average pooling over NCHW, and the mean over the innermost axis
//! that GlobalAveragePool becomes.
//!
//! A plane is pooled in bands of output rows, each through three stack buffers and
//! with no edge case and no gather:
//!
//! 1. **copy**: the band's input rows are copied with their padding written out as the
//!    reduction's identity (`-inf`, or 0 for a sum), split by phase of both strides:
//!    padded row `r`, column `c` goes to phase plane `(r % sh, c % sw)`, at row `r / sh`,
//!    column `c / sw`. Stride 2 becomes four planes of contiguous runs.
//! 2. **across**: for each row phase, tap `kj` of every output column is the run of
//!    phase plane `kj·dw % sw` from `kj·dw / sw`, so the horizontal reduction of the whole
//!    band is `kw` operations on flat slices (rows included: a row's last columns pick
//!    up the next row's, and are never read).
//! 3. **down**: tap `ki` of every output row is the across-result of row phase
//!    `ki·dh % sh` from row `ki·dh / sh`: `kh` more flat operations.
//!
//! Then each output row is copied out (or scaled by the reciprocal of its tap count, for
//! an average).
//! Rows too wide for the buffers go tap by tap.
//!
//! Where the vertical stride is 2 or more (every stride-2 pool of the zoo), the work
//! is done row by row instead, vertical first: each output row's `kh` input rows fold into one padded row (contiguous runs,
//! no split), only that row is split by horizontal phase, and `kw` runs of it give the
//! output row. Input rows are not split at all, and the horizontal reduction runs over
//! one row per output row instead of `sh`.
//!
//! Stride-1 pools whose output is as large as their input (Inception's 3×3 pools,
//! YOLO's SPPF) skip the copy: the taps are flat operations straight over the input
//! of as many whole planes as the buffer holds, the few outputs whose window leaves
//! their row (or plane) are recomputed from that row (or plane) alone, and the result
//! is written in place of a copy out. A 7×7 late stage costs a few loops per dozens
//! of planes instead of a few per row.
//!
//! Narrow planes (output rows under [`INTERLEAVED_MAX_WIDTH`]) go instead in blocks of
//! eight planes interleaved as `[position][channel]`, as the depthwise kernel does
//! (its AVX2 transposes in and out): every operation is then a run of whole
//! positions, where a 7- or 14-wide planar row is mostly loop set-up and scalar
//! tails. Measured in cycles on one Zen 4 core against the planar paths: max 3×3 s2
//! on 576×14² −60 %, on 320×28² −34 %, on 256×27² −40 %; 3×3 s1 on 1024×7² −24 %,
//! average on 576×14² −25 %; a 7×7 plane averaged whole −62 %; 2×2 s2 average
//! (DenseNet) −49 %; 5×5 s1 on 128×10² (YOLO's SPPF) −41 %. A block's outputs are
//! kept until its inputs are all read, so the overlapping variant takes the same path
//! (an output plane may lie on earlier input planes of its block). The taps fold in
//! the planar paths' order.

use super::depthwise::{Transpose, deinterleave_row, interleave_row};
use super::simd::{self, vectorize};
use super::window::{Axis, Window, accumulate};
use crate::arena::Overlapped;
use crate::params::{Activation, Conv2d, DEPTHWISE_BLOCK as BLOCK, Pool2d, PoolKind, ReduceMean};
use crate::threads;

/// ONNX MaxPool / AveragePool. Windows are clipped to the input; a max over a window
/// that lies wholly in the padding is `-inf`. The average divides by the number of
/// taps inside the input (`count_include_pad = 0`) or inside the input and its pads
/// (`= 1`; under `ceil_mode` a window can also run past the pads, and those positions
/// are not counted, as in onnxruntime).
pub fn pool2d(p: &Pool2d, x: &[f32], y: &mut [f32]) {
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    let planes = p.n * p.c;
    assert_eq!(x.len(), planes * plane_in, "pool2d: X");
    assert_eq!(y.len(), planes * plane_out, "pool2d: Y");
    if y.is_empty() {
        return;
    }
    Pooling::new(p).shared(x, y, planes);
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
    let pool = Pooling::new(p);
    // Runs of planes whose outputs lie on none of the inputs still to read are pooled
    // as `pool2d` pools (shared among threads); the rest one plane (or interleaved
    // block) at a time. Runs grow as the outputs fall behind the inputs: a pool that
    // quarters the plane over its own input takes 1, 4, 16, … planes a run.
    let mut first = 0;
    while first < planes {
        let mut end = xy.apart_from(first);
        if let Path::Interleaved(geometry) = &pool.path {
            let whole = (end - first) / BLOCK * BLOCK;
            if whole == 0 {
                // A block's inputs are read whole before its outputs are written.
                let block = first..(first + BLOCK).min(planes);
                vectorize!({
                    let mut bufs = Buffers::new(pool.identity());
                    pool.interleaved_block(geometry, xy.inputs(block.clone()), &mut bufs);
                    pool.write_block(geometry, &bufs, xy.outputs(block.clone()));
                });
                first = block.end;
                continue;
            }
            end = if end == planes { end } else { first + whole };
        }
        let (x, y) = xy.apart(first..end);
        pool.shared(x, y, end - first);
        first = end;
    }
}

/// Floats in each of the stack buffers a band is pooled through (8 KiB each).
const BAND_MAX: usize = 2048;

/// The working memory of [`Pooling::planes`], set up once per group of planes.
struct Buffers {
    /// The band's input, phase-split and padded. Every band of every plane has the
    /// same layout, so the cells of padding columns, filled with the identity here,
    /// are never written again; rows of padding are filled band by band.
    copy: [f32; BAND_MAX],
    /// The horizontal reduction, one plane per row phase (or of whole planes).
    across: [f32; BAND_MAX],
    /// The band's outputs, `phase_len` apart.
    down: [f32; BAND_MAX],
}

impl Buffers {
    fn new(identity: f32) -> Self {
        Buffers {
            copy: [identity; BAND_MAX],
            across: [0.0; BAND_MAX],
            down: [0.0; BAND_MAX],
        }
    }
}

/// One pooling call's geometry, worked out once for all its planes.
struct Pooling {
    win: Window,
    kind: PoolKind,
    path: Path,
    /// For [`Path::Rows`] with a 3-wide window at horizontal stride 2: the AVX2
    /// shuffles that fold a row across without splitting it by phase.
    pairs: Option<Pairs>,
    /// Where [`super::strided_max`] takes the pool (AVX-512, max 3×3 at stride 2,
    /// unpadded, rows of at most 128): it does, whatever `path` says.
    #[cfg(target_arch = "x86_64")]
    strided_max: Option<faer::traits::pulp::x86::V4>,
    /// For an average: each output column's share of its tap count ([`Path::Bands`],
    /// [`Path::Rows`]), or each output's [`reciprocal`] ([`Path::Same`],
    /// [`Path::Interleaved`]).
    counts: [f32; BAND_MAX],
}

/// How the planes of a call are pooled (see the module doc).
#[derive(Debug, Clone, Copy)]
enum Path {
    /// Stride 1, output as large as the input, and a plane fits the buffers.
    Same,
    /// Vertical stride 2 or more (measured faster than bands at every zoo shape, a
    /// 7-wide output included).
    Rows(Bands),
    Bands(Bands),
    /// Narrow planes, in blocks of [`BLOCK`] interleaved as the depthwise kernel
    /// interleaves them (the window as a depthwise layer's geometry): each tap is one
    /// vector operation for the block, however short the rows.
    Interleaved(Conv2d),
    /// A band of one output row does not fit the buffers.
    TapByTap,
}

/// How a plane is cut into bands (see the module doc).
#[derive(Debug, Clone, Copy)]
struct Bands {
    /// Output rows per band (the last band may have fewer).
    rows: usize,
    /// Rows of each phase plane (those a full band copies).
    phase_rows: usize,
    /// Padded columns per phase of the horizontal stride: the row length of every
    /// phase plane, and the distance between output rows in `across` and `down`.
    phase_len: usize,
    /// The input columns some window reads (the rest are never copied).
    cols_read: usize,
}

/// Padded positions a window reads along `a` for `out` outputs.
fn span(a: &Axis, out: usize) -> usize {
    (out - 1) * a.stride + (a.kernel - 1) * a.dilation + 1
}

impl Bands {
    fn new(win: &Window) -> Option<Self> {
        let (h, w) = (&win.h, &win.w);
        if h.kernel == 0 || w.kernel == 0 {
            return None;
        }
        let phase_len = span(w, w.out_len).div_ceil(w.stride);
        // A band of `b` output rows copies `phase_rows(b) · sh` rows of
        // `phase_len · sw` floats.
        let row_len = phase_len * w.stride;
        let max_phase_rows = BAND_MAX / row_len / h.stride;
        let first = span(h, 1).div_ceil(h.stride);
        if max_phase_rows < first {
            return None;
        }
        // `phase_rows(b) = b - 1 + phase_rows(1)`.
        let rows = (max_phase_rows - first + 1).min(h.out_len);
        Some(Bands {
            rows,
            phase_rows: span(h, rows).div_ceil(h.stride),
            phase_len,
            cols_read: w.in_len.min(span(w, w.out_len).saturating_sub(w.pad_begin)),
        })
    }
}

/// Output rows narrower than this are pooled interleaved ([`Path::Interleaved`]),
/// where the ring of input rows and the output row fit the buffers.
const INTERLEAVED_MAX_WIDTH: usize = 16;

/// The pooling window as the geometry of a depthwise layer over one block, for the
/// depthwise kernel's interleaving, if its rings of rows and the block's outputs fit
/// the buffers.
fn interleaved(p: &Pool2d) -> Option<Conv2d> {
    if p.kernel[0] == 0 || p.kernel[1] == 0 || p.w_out >= INTERLEAVED_MAX_WIDTH {
        return None;
    }
    let geometry = Conv2d {
        n: 1,
        c_in: BLOCK,
        h_in: p.h_in,
        w_in: p.w_in,
        c_out: BLOCK,
        h_out: p.h_out,
        w_out: p.w_out,
        kernel: p.kernel,
        stride: p.stride,
        dilation: p.dilation,
        pads: p.pads,
        group: BLOCK,
        activation: Activation::None,
    };
    // The ring of input rows, the ring of their across-results (or one row folded
    // down), and the block's output (with room for its last row's whole tiles).
    let [ring, row, tiles] = geometry.depthwise_rows();
    let fits = ring * row * BLOCK <= BAND_MAX
        && (ring * p.w_out).max(row) * BLOCK <= BAND_MAX
        && (p.h_out * p.w_out + tiles) * BLOCK <= BAND_MAX;
    fits.then_some(geometry)
}

impl Pooling {
    /// Pools `planes` whole planes `x` into `y`. Planes are independent: with worker
    /// threads, each takes a group of whole planes (one group per thread, so that the
    /// buffers are set up once per thread), whole blocks of them where blocks are
    /// interleaved.
    fn shared(&self, x: &[f32], y: &mut [f32], planes: usize) {
        let (h, w) = (&self.win.h, &self.win.w);
        let (plane_in, plane_out) = (h.in_len * w.in_len, h.out_len * w.out_len);
        let mut per_group = planes.div_ceil(threads::current());
        if let Path::Interleaved(_) = self.path {
            per_group = per_group.next_multiple_of(BLOCK);
        }
        let work = y.len() * h.kernel * w.kernel;
        let groups = y.chunks_mut(per_group * plane_out).enumerate();
        threads::for_each(groups, work, |(g, out)| {
            let x = &x[g * per_group * plane_in..][..out.len() / plane_out * plane_in];
            #[cfg(target_arch = "x86_64")]
            if let Some(v4) = self.strided_max {
                let (input, output) = ([h.in_len, w.in_len], [h.out_len, w.out_len]);
                return super::strided_max::planes(v4, input, output, x, out);
            }
            vectorize!({ self.planes(x, out, &mut Buffers::new(self.identity())) })
        });
    }

    fn new(p: &Pool2d) -> Self {
        let win = Window::new(
            [p.h_in, p.w_in],
            [p.h_out, p.w_out],
            p.kernel,
            p.stride,
            p.dilation,
            p.pads,
        );
        // The pads add up to the window's reach (what makes the output as large).
        let reach = |i: usize| p.kernel[i].saturating_sub(1) * p.dilation[i];
        let same = p.stride == [1, 1]
            && (p.h_out, p.w_out) == (p.h_in, p.w_in)
            && p.pads[0] + p.pads[2] == reach(0)
            && p.pads[1] + p.pads[3] == reach(1)
            && p.h_in * p.w_in <= BAND_MAX;
        let path = match Bands::new(&win) {
            _ if let Some(geometry) = interleaved(p) => Path::Interleaved(geometry),
            _ if same => Path::Same,
            Some(bands) if p.stride[0] >= 2 => Path::Rows(bands),
            Some(bands) => Path::Bands(bands),
            None => Path::TapByTap,
        };
        let mut counts = [0.0; BAND_MAX];
        if let PoolKind::Average { count_include_pad } = p.kind {
            let count = |a: &Axis, o: usize| taps_counted(a, o, count_include_pad) as f32;
            match path {
                // `h_out · w_out <= BAND_MAX` (`interleaved` fits the block's
                // outputs in a buffer).
                Path::Same | Path::Interleaved(_) => {
                    let rows = counts.chunks_exact_mut(p.w_out).take(p.h_out);
                    for (oh, row) in rows.enumerate() {
                        for (ow, c) in row.iter_mut().enumerate() {
                            *c = reciprocal(count(&win.h, oh) * count(&win.w, ow));
                        }
                    }
                }
                // `w_out < phase_len <= BAND_MAX`.
                Path::Bands(_) | Path::Rows(_) => {
                    for (ow, c) in counts[..p.w_out].iter_mut().enumerate() {
                        *c = count(&win.w, ow);
                    }
                }
                Path::TapByTap => {}
            }
        }
        let pairs = match path {
            Path::Rows(bands) if (p.kernel[1], p.stride[1], p.dilation[1]) == (3, 2, 1) => {
                Pairs::new(bands.phase_len)
            }
            _ => None,
        };
        Pooling {
            win,
            kind: p.kind,
            path,
            pairs,
            #[cfg(target_arch = "x86_64")]
            strided_max: super::strided_max::applies(p),
            counts,
        }
    }

    /// The reduction's start: the value of padding.
    fn identity(&self) -> f32 {
        match self.kind {
            PoolKind::Max => f32::NEG_INFINITY,
            PoolKind::Average { .. } => 0.0,
        }
    }

    /// Output planes from as many whole input planes (the two must not share bytes).
    #[inline(always)]
    fn planes(&self, x: &[f32], out: &mut [f32], bufs: &mut Buffers) {
        match self.kind {
            PoolKind::Max => self.reduce(x, out, bufs, f32::max),
            PoolKind::Average { .. } => self.reduce(x, out, bufs, |a, b| a + b),
        }
    }

    /// [`Pooling::reduce_interleaved`] with this pooling's reduction.
    #[inline(always)]
    fn interleaved_block(&self, geometry: &Conv2d, x: &[f32], bufs: &mut Buffers) {
        match self.kind {
            PoolKind::Max => self.reduce_interleaved(geometry, x, bufs, f32::max),
            PoolKind::Average { .. } => self.reduce_interleaved(geometry, x, bufs, |a, b| a + b),
        }
    }

    /// `out[o] = f(..f(identity, x[tap 0])..)` over each window's taps inside its
    /// plane, divided by the tap count for an average. The paths below take the
    /// identity from [`Pooling::identity`].
    #[inline(always)]
    fn reduce(
        &self,
        x: &[f32],
        out: &mut [f32],
        bufs: &mut Buffers,
        f: impl Fn(f32, f32) -> f32 + Copy,
    ) {
        let (h, w) = (&self.win.h, &self.win.w);
        let (plane_in, plane_out) = (h.in_len * w.in_len, h.out_len * w.out_len);
        let planes = out.chunks_exact_mut(plane_out).enumerate();
        let x_plane = |q: usize| &x[q * plane_in..][..plane_in];
        match self.path {
            Path::Same => self.reduce_same(x, out, bufs, f),
            Path::Bands(bands) => {
                for (q, out) in planes {
                    self.reduce_bands(bands, x_plane(q), out, bufs, f);
                }
            }
            Path::Rows(bands) => {
                for (q, out) in planes {
                    self.reduce_rows(bands, x_plane(q), out, bufs, f);
                }
            }
            Path::TapByTap => {
                for (q, out) in planes {
                    self.reduce_tap_by_tap(x_plane(q), out, f);
                }
            }
            Path::Interleaved(geometry) => {
                let blocks = out.chunks_mut(BLOCK * plane_out).enumerate();
                for (b, out) in blocks {
                    let x = &x[b * BLOCK * plane_in..][..out.len() / plane_out * plane_in];
                    self.reduce_interleaved(&geometry, x, bufs, f);
                    self.write_block(&geometry, bufs, out);
                }
            }
        }
    }

    /// [`Path::Interleaved`]: the outputs of one block of at most [`BLOCK`] input
    /// planes `x`, into `bufs.down` as `[position][channel]` (written out by
    /// [`Pooling::write_block`]), so that every operation below is a flat run over
    /// whole positions, however short the rows. A ring holds the input rows one
    /// output row reads, padding as the identity. The taps fold in the planar paths'
    /// order, so that an average has the same bits whichever path a shape takes: at
    /// vertical stride 1 each input row is folded across once, as it enters (a second
    /// ring), and an output row is its window rows' across-results folded down; at
    /// stride 2 or more ([`Path::Rows`]' order) the window rows fold down first, then
    /// across.
    #[inline(always)]
    fn reduce_interleaved(
        &self,
        geometry: &Conv2d,
        x: &[f32],
        bufs: &mut Buffers,
        f: impl Fn(f32, f32) -> f32 + Copy,
    ) {
        let (h, w) = (&self.win.h, &self.win.w);
        let channels = x.len() / (h.in_len * w.in_len);
        let [ring_rows, row, _] = geometry.depthwise_rows();
        let (row_len, out_len) = (row * BLOCK, w.out_len * BLOCK);
        // Positions of a padded row that some window reads (`depthwise_rows` made
        // every ring row at least this long).
        let reach = span(w, w.out_len) * BLOCK;
        let Buffers { copy, across, down } = bufs;
        let ring = &mut copy[..ring_rows * row_len];
        let transpose = Transpose::for_channels(channels);
        let across_first = h.stride == 1;
        let mut loaded = 0;
        for oh in 0..h.out_len {
            let first = oh * h.stride;
            let last = first + (h.kernel - 1) * h.dilation;
            for r in loaded.max(first)..=last {
                let slot = r % ring_rows;
                let input = &mut ring[slot * row_len..][..row_len];
                interleave_row(geometry, x, channels, r, input, transpose, self.identity());
                if across_first {
                    let folded = &mut across[slot * out_len..][..out_len];
                    fold_across(input, folded, w, f);
                }
            }
            loaded = last + 1;
            let out_row = &mut down[oh * out_len..][..out_len];
            let slots = (0..h.kernel).map(|ki| (first + ki * h.dilation) % ring_rows);
            if across_first {
                let rows = slots.map(|slot| &across[slot * out_len..][..out_len]);
                fold_runs(out_row, rows, f);
            } else {
                let column = &mut across[..reach];
                fold_runs(
                    column,
                    slots.map(|slot| &ring[slot * row_len..][..reach]),
                    f,
                );
                fold_across(column, out_row, w, f);
            }
            if let PoolKind::Average { .. } = self.kind {
                let scales = &self.counts[oh * w.out_len..][..w.out_len];
                for (y, &scale) in out_row.chunks_exact_mut(BLOCK).zip(scales) {
                    for y in y {
                        *y *= scale;
                    }
                }
            }
        }
    }

    /// Writes the block's outputs from `bufs.down` ([`Pooling::reduce_interleaved`])
    /// to its planes `out`.
    #[inline(always)]
    fn write_block(&self, geometry: &Conv2d, bufs: &Buffers, out: &mut [f32]) {
        let (h, w) = (&self.win.h, &self.win.w);
        let [_, _, tiles] = geometry.depthwise_rows();
        let transpose = Transpose::for_channels(out.len() / (h.out_len * w.out_len));
        for oh in 0..h.out_len {
            // Whole tiles from the row's start: the last is read shifted back to end
            // with the row, or past it on a row narrower than a tile (`interleaved`
            // left room).
            let row = &bufs.down[oh * w.out_len * BLOCK..][..tiles * BLOCK];
            deinterleave_row(geometry, row, oh, out, transpose);
        }
    }

    /// [`Path::Bands`]: one plane.
    #[inline(always)]
    fn reduce_bands(
        &self,
        bands: Bands,
        x: &[f32],
        out: &mut [f32],
        bufs: &mut Buffers,
        f: impl Fn(f32, f32) -> f32 + Copy,
    ) {
        let identity = self.identity();
        let (h, w) = (&self.win.h, &self.win.w);
        let (l, sh, sw) = (bands.phase_len, h.stride, w.stride);
        let plane = bands.phase_rows * l;
        // The last columns of each flat result that no output reads.
        let unread = (w.kernel - 1) * w.dilation / sw;
        for oh0 in (0..h.out_len).step_by(bands.rows) {
            let rows = bands.rows.min(h.out_len - oh0);
            let phase_rows = span(h, rows).div_ceil(sh);

            // 1. copy: padded row `r` of the band to row phase `r % sh`.
            let copy = &mut bufs.copy[..plane * sh * sw];
            for r in 0..phase_rows * sh {
                let ih = (oh0 * sh + r) as isize - h.pad_begin as isize;
                let phases = &mut copy[(r % sh) * sw * plane..][..sw * plane];
                let at = r / sh * l;
                if (0..h.in_len as isize).contains(&ih) {
                    let src = &x[ih as usize * w.in_len..][..bands.cols_read];
                    split_columns(src, w.pad_begin, sw, plane, at, phases);
                } else {
                    for phase in phases.chunks_exact_mut(plane) {
                        phase[at..][..l].fill(identity);
                    }
                }
            }

            // 2. across: `kw` flat operations per row phase.
            let n = phase_rows * l - unread;
            for rp in 0..sh {
                let taps = (0..w.kernel).map(|kj| {
                    let c = kj * w.dilation;
                    &copy[(rp * sw + c % sw) * plane + c / sw..][..n]
                });
                fold_runs(&mut bufs.across[rp * plane..][..n], taps, f);
            }

            // 3. down: `kh` flat operations.
            let m = rows * l - unread;
            let down = &mut bufs.down[..m];
            let taps = (0..h.kernel).map(|ki| {
                let r = ki * h.dilation;
                &bufs.across[(r % sh) * plane + r / sh * l..][..m]
            });
            fold_runs(down, taps, f);

            // Output rows are `l` apart in `down`, `w.out_len <= l - unread` long.
            let out = out[oh0 * w.out_len..][..rows * w.out_len].chunks_exact_mut(w.out_len);
            for (b, y) in out.enumerate() {
                y.copy_from_slice(&down[b * l..][..w.out_len]);
                self.scale_row(oh0 + b, y);
            }
        }
    }

    /// [`Path::Rows`]: one plane, row by row, vertical first (see the module doc).
    #[inline(always)]
    fn reduce_rows(
        &self,
        bands: Bands,
        x: &[f32],
        out: &mut [f32],
        bufs: &mut Buffers,
        f: impl Fn(f32, f32) -> f32 + Copy,
    ) {
        let identity = self.identity();
        let (h, w) = (&self.win.h, &self.win.w);
        let (l, sw, cols) = (bands.phase_len, w.stride, bands.cols_read);
        // The padded row: its padding cells hold the identity from `Buffers::new` and
        // are never written (the same cells as a band's first row).
        let (copy, phases) = (&mut bufs.copy, &mut bufs.across[..l * sw]);
        for (oh, y) in out.chunks_exact_mut(w.out_len).enumerate() {
            let row = &mut copy[..l * sw];
            let inside = &mut row[w.pad_begin..][..cols];
            let taps = h.taps_inside(oh);
            if taps.is_empty() {
                inside.fill(identity);
            } else {
                let rows = taps.map(|ki| &x[h.input_pos(oh, ki) as usize * w.in_len..][..cols]);
                fold_runs(inside, rows, f);
            }
            if let Some(pairs) = self.pairs {
                // `row` is a prefix of `copy`: the shuffles read past it, never past `copy`.
                pairs.fold(copy, y, f);
                self.scale_row(oh, y);
                continue;
            }
            split_columns(row, 0, sw, l, 0, phases);
            let phases = &*phases;
            let taps = (0..w.kernel).map(|kj| {
                let c = kj * w.dilation;
                &phases[c % sw * l + c / sw..][..w.out_len]
            });
            fold_runs(y, taps, f);
            self.scale_row(oh, y);
        }
    }

    /// For an average, scales output row `oh` by the [`reciprocal`]s of its windows'
    /// tap counts.
    #[inline(always)]
    fn scale_row(&self, oh: usize, y: &mut [f32]) {
        if let PoolKind::Average { count_include_pad } = self.kind {
            let rows_counted = taps_counted(&self.win.h, oh, count_include_pad) as f32;
            let cols = &self.counts[..y.len()];
            for (y, &c) in y.iter_mut().zip(cols) {
                *y *= reciprocal(rows_counted * c);
            }
        }
    }

    /// [`Path::Same`]: chunks of whole planes, the taps straight over the input.
    #[inline(always)]
    fn reduce_same(
        &self,
        x: &[f32],
        out: &mut [f32],
        bufs: &mut Buffers,
        f: impl Fn(f32, f32) -> f32 + Copy,
    ) {
        let identity = self.identity();
        let (h, w) = (&self.win.h, &self.win.w);
        let (row, plane) = (w.in_len, h.in_len * w.in_len);
        let chunk = BAND_MAX / plane * plane;
        // The outputs whose window leaves the row (plane): the first `pad_begin` and
        // the last `pad_end`.
        let edges = |a: &Axis| {
            let head = a.pad_begin.min(a.in_len);
            (0..head).chain(a.in_len.saturating_sub(a.pad_end).max(head)..a.in_len)
        };
        for (x, out) in x.chunks(chunk).zip(out.chunks_mut(chunk)) {
            // Across: the taps as flat runs over the chunk's rows (from the first
            // position whose every tap lies in the chunk to the last), then the edge
            // columns of every row again from that row alone: those include every
            // position the runs left out.
            let across = &mut bufs.across[..x.len()];
            let interior = w.pad_begin..x.len().saturating_sub(w.pad_end);
            if !interior.is_empty() {
                let taps = (0..w.kernel).map(|kj| {
                    &x[interior.start + kj * w.dilation - w.pad_begin..][..interior.len()]
                });
                fold_runs(&mut across[interior.clone()], taps, f);
            }
            for (x, a) in x.chunks_exact(row).zip(across.chunks_exact_mut(row)) {
                for ow in edges(w) {
                    a[ow] = w.inputs_read(ow).fold(identity, |acc, i| f(acc, x[i]));
                }
            }
            // Down: the same over rows, then the edge rows of every plane again.
            let across = &*across;
            let interior = h.pad_begin * row..out.len().saturating_sub(h.pad_end * row);
            if !interior.is_empty() {
                let taps = (0..h.kernel).map(|ki| {
                    &across[interior.start + (ki * h.dilation) * row - h.pad_begin * row..]
                        [..interior.len()]
                });
                fold_runs(&mut out[interior.clone()], taps, f);
            }
            for (out, a) in out.chunks_exact_mut(plane).zip(across.chunks_exact(plane)) {
                for oh in edges(h) {
                    let out = &mut out[oh * row..][..row];
                    out.fill(identity);
                    for ki in h.taps_inside(oh) {
                        let ih = h.input_pos(oh, ki) as usize;
                        combine(out, &a[ih * row..][..row], f);
                    }
                }
                if let PoolKind::Average { .. } = self.kind {
                    for (v, &scale) in out.iter_mut().zip(&self.counts[..plane]) {
                        *v *= scale;
                    }
                }
            }
        }
    }

    /// [`Path::TapByTap`], for rows too wide for the buffers: every tap over the
    /// outputs it reaches inside the plane (strided runs), then the division.
    fn reduce_tap_by_tap(&self, x: &[f32], out: &mut [f32], f: impl Fn(f32, f32) -> f32 + Copy) {
        let identity = self.identity();
        out.fill(identity);
        self.win.for_each_tap(
            x,
            out,
            #[inline(always)]
            |_, out, input| accumulate(out, input, f),
        );
        if let PoolKind::Average { count_include_pad } = self.kind {
            let (h, w) = (&self.win.h, &self.win.w);
            for (oh, row) in out.chunks_exact_mut(w.out_len).enumerate() {
                let rows = taps_counted(h, oh, count_include_pad);
                for (ow, v) in row.iter_mut().enumerate() {
                    let n = rows * taps_counted(w, ow, count_include_pad);
                    *v *= reciprocal(n as f32);
                }
            }
        }
    }
}

/// A padded row folded across by a 3-wide window at stride 2, eight outputs at a
/// time: `out[j] = f(f(row[2j], row[2j + 1]), row[2j + 2])` (the order the taps fold
/// in through the phase planes), the even and odd columns taken apart by AVX2
/// shuffles of 16 floats instead of a pass that splits the row by phase. Max 3×3 s2,
/// one Zen 4 core: 128×55² 0.139 → 0.128 ms, 256×27² 0.071 → 0.059 ms; 64×111²
/// unchanged at 0.20 ms (the vertical fold's reads of a plane beyond L2 bound it).
#[derive(Debug, Clone, Copy)]
struct Pairs {
    #[cfg(target_arch = "x86_64")]
    v3: faer::traits::pulp::x86::V3,
}

impl Pairs {
    /// Where AVX2 is present and a row's blocks of 16 (and the 2 floats after the
    /// last) stay within a buffer: `phase_len ≥ out_len + 1` padded pairs a row.
    fn new(phase_len: usize) -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        if (phase_len.div_ceil(BLOCK) * BLOCK + 1) * 2 <= BAND_MAX
            && let Some(v3) = faer::traits::pulp::x86::V3::try_new()
        {
            return Some(Pairs { v3 });
        }
        let _ = phase_len;
        None
    }

    /// Folds the padded row at the start of `row` into `out` (reads up to 16 floats
    /// past the columns the last output's window covers).
    #[inline(always)]
    fn fold(self, row: &[f32], out: &mut [f32], f: impl Fn(f32, f32) -> f32 + Copy) {
        // Inside V3's target-feature function, so that the shuffles are inlined
        // whatever the caller is compiled for.
        #[cfg(target_arch = "x86_64")]
        self.v3.vectorize(
            #[inline(always)]
            || {
                let v3 = self.v3;
                // Whole vectors only, the last shifted back to end with the row: a
                // store of either a vector or a shorter tail had become a call to
                // `memcpy` for every eight outputs (128×55² 3×3 s2, one Zen 5 core:
                // 0.074 → 0.062 ms).
                let n = out.len();
                if n < BLOCK {
                    let folded = fold_pairs(v3, row, 0, f);
                    for (o, &v) in out.iter_mut().zip(&folded) {
                        *o = v;
                    }
                    return;
                }
                let (chunks, tail) = out.as_chunks_mut::<BLOCK>();
                for (k, chunk) in chunks.iter_mut().enumerate() {
                    *chunk = fold_pairs(v3, row, k * BLOCK, f);
                }
                if !tail.is_empty() {
                    let last = out.last_chunk_mut::<BLOCK>().expect("a vector");
                    *last = fold_pairs(v3, row, n - BLOCK, f);
                }
            },
        );
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (row, out, f);
    }
}

/// Outputs `j..j + BLOCK` of [`Pairs::fold`]. Not a closure, which would not
/// inherit V3's target features where the inliner left it out of line (ten times
/// slower).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn fold_pairs(
    v3: faer::traits::pulp::x86::V3,
    row: &[f32],
    j: usize,
    f: impl Fn(f32, f32) -> f32,
) -> [f32; BLOCK] {
    let load = |at: usize| -> std::arch::x86_64::__m256 {
        let v: &[f32; BLOCK] = row[at..at + BLOCK].try_into().expect("a vector");
        bytemuck::cast(*v)
    };
    let at = 2 * j;
    let (e, o) = (
        pick::<0x88>(v3, load(at), load(at + BLOCK)),
        pick::<0xDD>(v3, load(at), load(at + BLOCK)),
    );
    let e2 = pick::<0x88>(v3, load(at + 2), load(at + 2 + BLOCK));
    let mut folded = [0.0; BLOCK];
    for l in 0..BLOCK {
        folded[l] = f(f(e[l], o[l]), e2[l]);
    }
    folded
}

/// The even (`MASK` `0x88`) or odd (`0xDD`) floats of `a` then `b`: the shuffle takes
/// them in 128-bit halves, the permutation puts the halves in order. Not a closure,
/// which would not inherit V3's target features where the inliner left it out of line.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn pick<const MASK: i32>(
    v3: faer::traits::pulp::x86::V3,
    a: std::arch::x86_64::__m256,
    b: std::arch::x86_64::__m256,
) -> [f32; BLOCK] {
    let t = v3
        .avx
        ._mm256_castps_pd(v3.avx._mm256_shuffle_ps::<MASK>(a, b));
    bytemuck::cast(v3.avx2._mm256_permute4x64_pd::<0xD8>(t))
}

/// `out[ow] = f(..f(row[ow·sw], row[ow·sw + dw])..)` over the window's `kw` taps,
/// for interleaved rows (`[position][channel]`): flat runs at stride 1, else
/// position by position.
#[inline(always)]
pub(super) fn fold_across(
    row: &[f32],
    out: &mut [f32],
    w: &Axis,
    f: impl Fn(f32, f32) -> f32 + Copy,
) {
    let (sw, dw) = (w.stride, w.dilation);
    if sw == 1 {
        let len = out.len();
        let taps = (0..w.kernel).map(|kj| &row[kj * dw * BLOCK..][..len]);
        return fold_runs(out, taps, f);
    }
    // The zoo's strided windows with their sizes as constants, so that the taps
    // unroll.
    match (w.kernel, sw, dw) {
        (3, 2, 1) => fold_strided(row, out, [3, 2, 1], f),
        (2, 2, 1) => fold_strided(row, out, [2, 2, 1], f),
        (kw, sw, dw) => fold_strided(row, out, [kw, sw, dw], f),
    }
}

/// [`fold_across`] position by position, for `kw` taps `dw` apart at stride `sw`.
#[inline(always)]
fn fold_strided(
    row: &[f32],
    out: &mut [f32],
    [kw, sw, dw]: [usize; 3],
    f: impl Fn(f32, f32) -> f32 + Copy,
) {
    let (positions, _) = row.as_chunks::<BLOCK>();
    let (outputs, _) = out.as_chunks_mut::<BLOCK>();
    // Every tap below lies in `positions`: checked once for the farthest.
    let Some(last) = outputs.len().checked_sub(1) else {
        return;
    };
    let positions = &positions[..last * sw + (kw - 1) * dw + 1];
    for (ow, out) in outputs.iter_mut().enumerate() {
        // Opaque to LLVM, so that it vectorises each position's eight lanes (one
        // vector operation a tap) instead of this loop, eight positions at a time from
        // lanes gathered one by one (`vinsertps`): SqueezeNet's stem, whose fused pool
        // folds 64 channels of 111 columns at stride 2 a row, one Zen 4 core, best of
        // 1000 runs, alternated: 0.636–0.647 → 0.573–0.577 ms.
        let ow = std::hint::black_box(ow);
        let window = &positions[ow * sw..][..(kw - 1) * dw + 1];
        let mut acc = window[0];
        for kj in 1..kw {
            for (a, &v) in acc.iter_mut().zip(&window[kj * dw]) {
                *a = f(*a, v);
            }
        }
        *out = acc;
    }
}

/// Writes one input row's columns into the `sw` phase planes of a row phase
/// (`plane` floats apart), at `at` in each: column `c` of the padded row (input
/// column `c - pad`) goes to plane `c % sw`, position `c / sw`.
#[inline(always)]
fn split_columns(src: &[f32], pad: usize, sw: usize, plane: usize, at: usize, phases: &mut [f32]) {
    match sw {
        1 => phases[at + pad..][..src.len()].copy_from_slice(src),
        2 => {
            // From the first even padded column on, pairs go one to each plane.
            let (head, src) = src.split_at((pad % 2).min(src.len()));
            let (even, odd) = phases.split_at_mut(plane);
            if let Some(&v) = head.first() {
                odd[at + pad / 2] = v;
            }
            let start = at + pad.div_ceil(2);
            let (pairs, tail) = src.as_chunks::<2>();
            let even_run = &mut even[start..][..pairs.len() + tail.len()];
            let odd_run = &mut odd[start..][..pairs.len()];
            for ((&[a, b], e), o) in pairs.iter().zip(even_run.iter_mut()).zip(odd_run) {
                *e = a;
                *o = b;
            }
            if let Some(&v) = tail.first() {
                even[start + pairs.len()] = v;
            }
        }
        _ => {
            for (i, &v) in src.iter().enumerate() {
                let c = i + pad;
                phases[c % sw * plane + at + c / sw] = v;
            }
        }
    }
}

/// `dst[i] = f(..f(f(tap0[i], tap1[i]), tap2[i])..)`: a window's taps as runs as long
/// as `dst`. The first three taps (a 3×3 window's along one axis) go in one pass,
/// each later one in a pass of its own. (Two taps in one pass measured slower than a
/// copy and a pass, on VGG's 2×2 pools: 1.0–1.15 ms against 0.72–0.80.)
#[inline(always)]
pub(super) fn fold_runs<'a>(
    dst: &mut [f32],
    mut taps: impl Iterator<Item = &'a [f32]>,
    f: impl Fn(f32, f32) -> f32 + Copy,
) {
    let Some(a) = taps.next() else { return };
    match (taps.next(), taps.next()) {
        (None, _) => dst.copy_from_slice(a),
        (Some(b), None) => {
            dst.copy_from_slice(a);
            combine(dst, b, f);
        }
        (Some(b), Some(c)) => {
            for (((d, &a), &b), &c) in dst.iter_mut().zip(a).zip(b).zip(c) {
                *d = f(f(a, b), c);
            }
            for tap in taps {
                combine(dst, tap, f);
            }
        }
    }
}

/// `dst = f(dst, src)`.
#[inline(always)]
fn combine(dst: &mut [f32], src: &[f32], f: impl Fn(f32, f32) -> f32) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = f(*d, s);
    }
}

/// What an average's sum of `taps` values is multiplied by: `1 / taps`, or 0 where no
/// tap lies inside (the sum is then 0). Every path scales by this, computed from the
/// same float product of the two axes' counts, so an average has the same bits
/// whichever path its shape takes. A multiply where the interleaved path divided
/// each position's eight lanes: a fifth of the time of Inception v2's 576×14² 3×3
/// average pool (one Zen 5 core).
#[inline(always)]
fn reciprocal(taps: f32) -> f32 {
    if taps == 0.0 { 0.0 } else { 1.0 / taps }
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
