//! Pointwise (1×1, stride 1) convolution: `Y = W · X` for each image and group, with
//! the weights W (`c_out × c_in`) read in place and the input X (`c_in × positions`)
//! packed block by block into the packed product's panels.
//!
//! Blocks: columns (output positions) in blocks of at most [`BLOCK_COLS`], and within a
//! block, input channels in runs of at most [`BLOCK_K`]: one run of one block packed
//! (at most 128 KiB, in L2), then every block of [`MR`] weight rows against each of
//! its panels, the rows' run of W staying in L1 while the panels stream from L2.
//!
//! A plane's last columns short of a vector (7×7's 49th, 14×14's last 4) are not a
//! padded panel, which multiplies zeros for the rest of its lanes (one column cost
//! half a panel: 49 positions ran 24 % slower than 48): they are packed along `k`
//! and taken as dot products, `R × T` accumulators of a vector of `k` each.

use std::ops::Range;

use faer::traits::pulp::{self, Simd, WithSimd};

use super::depthwise::load;
use super::gemm::Split;
use super::packed::{MR, PANEL, row_of, rows_of};
use crate::threads;

/// Output positions in one block, at most.
pub(crate) const BLOCK_COLS: usize = 128;

/// Input channels packed at once, at most.
pub(crate) const BLOCK_K: usize = 512;

/// Scratch floats a pointwise product of `k` input channels needs: one packed run of
/// a block, its panels (a half panel's zeros included) and its tail.
pub(crate) const fn scratch_len(k: usize) -> usize {
    let k = if k < BLOCK_K { k } else { BLOCK_K };
    k * (BLOCK_COLS + 8)
}

/// The column blocks of `n` positions: as few as hold at most [`BLOCK_COLS`], equal
/// and in whole panels but the last.
fn blocks(n: usize) -> impl Iterator<Item = Range<usize>> + Clone {
    let count = n.div_ceil(BLOCK_COLS).max(1);
    let width = n.div_ceil(count).next_multiple_of(PANEL);
    (0..count).map(move |i| (i * width).min(n)..((i + 1) * width).min(n))
}

/// `y = w · x` (`y += w · x` where `accumulate`): `w` is `m × k` row-major, `x` is
/// `k × n` with rows `ldx` apart, `y` is `m × n` with contiguous rows. `finish(rows,
/// cols, out)` is the output stage of each finished block. Shared among the current
/// run's threads, each element summed in the same order whatever their count.
pub(crate) fn pointwise(
    w: &[f32],
    x: &[f32],
    ldx: usize,
    y: faer::MatMut<'_, f32>,
    accumulate: bool,
    scratch: &mut [f32],
    finish: impl Fn(Range<usize>, Range<usize>, faer::MatMut<'_, f32>) + Sync,
) {
    let (m, n) = (y.nrows(), y.ncols());
    let k = w.len().checked_div(m).unwrap_or(0);
    assert!(
        w.len() == m * k && (k == 0 || x.len() >= (k - 1) * ldx + n) && ldx >= n,
        "pointwise: operands"
    );
    assert!(scratch.len() >= scratch_len(k), "pointwise: scratch");
    if m == 0 || n == 0 {
        return;
    }
    let threads = threads::current();
    let macs = m * n * k;
    let count = blocks(n).count();
    if count >= threads {
        // Runs of consecutive blocks, one run per thread.
        let start = |i: usize| blocks(n).nth(i).map_or(n, |b| b.start);
        let runs =
            (0..threads).map(|t| start(t * count / threads)..start((t + 1) * count / threads));
        threads::for_each_with_scratch(
            Split::new(y, false, runs),
            macs,
            scratch,
            |(run, mut y), scratch| {
                for cols in blocks(n).filter(|b| run.contains(&b.start)) {
                    let out = y.as_mut().subcols_mut(cols.start - run.start, cols.len());
                    block(w, k, x, ldx, cols.clone(), out, accumulate, scratch);
                    finish(
                        0..m,
                        cols.clone(),
                        y.as_mut().subcols_mut(cols.start - run.start, cols.len()),
                    );
                }
            },
        );
    } else {
        // Fewer blocks than threads: each thread packs a block for itself and takes
        // a band of whole row blocks.
        let band = m.div_ceil(threads).next_multiple_of(MR);
        let bands = (0..m.div_ceil(band)).map(|i| i * band..((i + 1) * band).min(m));
        threads::for_each_with_scratch(
            Split::new(y, true, bands),
            macs,
            scratch,
            |(rows, mut y), scratch| {
                let w = &w[rows.start * k..rows.end * k];
                for cols in blocks(n) {
                    block(
                        w,
                        k,
                        x,
                        ldx,
                        cols.clone(),
                        y.as_mut().subcols_mut(cols.start, cols.len()),
                        accumulate,
                        scratch,
                    );
                    finish(
                        rows.clone(),
                        cols.clone(),
                        y.as_mut().subcols_mut(cols.start, cols.len()),
                    );
                }
            },
        );
    }
}

/// One column block `cols` of the product, on one thread: for each run of input
/// channels, pack it, then multiply every row block by it.
#[allow(clippy::too_many_arguments)]
fn block(
    w: &[f32],
    k: usize,
    x: &[f32],
    ldx: usize,
    cols: Range<usize>,
    mut y: faer::MatMut<'_, f32>,
    accumulate: bool,
    scratch: &mut [f32],
) {
    if k == 0 {
        if !accumulate {
            y.fill(0.0);
        }
        return;
    }
    for k0 in (0..k).step_by(BLOCK_K) {
        pulp::Arch::new().dispatch(Run {
            x,
            ldx,
            run: k0..(k0 + BLOCK_K).min(k),
            cols: cols.clone(),
            a: &w[k0..],
            lda: k,
            y: y.as_mut(),
            accumulate: accumulate || k0 > 0,
            scratch: &mut *scratch,
        });
    }
}

/// One run of input channels of one column block: packed, then multiplied by every
/// row block of A (`a`, rows `lda` apart, from the run's first column).
struct Run<'a> {
    x: &'a [f32],
    ldx: usize,
    run: Range<usize>,
    cols: Range<usize>,
    a: &'a [f32],
    lda: usize,
    y: faer::MatMut<'a, f32>,
    accumulate: bool,
    scratch: &'a mut [f32],
}

impl WithSimd for Run<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let Run {
            x,
            ldx,
            run,
            cols,
            a,
            lda,
            y,
            accumulate,
            scratch,
        } = self;
        // Whole vectors of columns go in panels, the rest (`tail`) along `k`.
        let tail = cols.len() % 8;
        let paneled = cols.len() - tail;
        let k = run.len();
        let (panels, rest) = scratch.split_at_mut(paneled.div_ceil(PANEL) * PANEL * k);
        let tail_k = &mut rest[..tail * k];
        pack(
            x,
            ldx,
            run.clone(),
            cols.start..cols.start + paneled,
            panels,
        );
        for (t, out) in tail_k.chunks_exact_mut(k).enumerate() {
            let col = cols.start + paneled + t;
            for (o, r) in out.iter_mut().zip(run.clone()) {
                *o = x[r * ldx + col];
            }
        }
        let blocks = RowBlocks {
            k,
            a,
            lda,
            panels,
            tail: tail_k,
            y,
            accumulate,
        };
        match S::F32_LANES {
            16 => blocks.rows::<S, 1>(s),
            8 => blocks.rows::<S, 2>(s),
            4 => blocks.rows::<S, 4>(s),
            _ => blocks.rows::<pulp::Scalar, PANEL>(pulp::Scalar::new()),
        }
    }
}

/// Packs rows `rows` and columns `cols` of `x` (rows `ldx` apart) into panels
/// (`[panel][row][PANEL]`), zeros past `cols`.
#[inline(always)]
fn pack(x: &[f32], ldx: usize, rows: Range<usize>, cols: Range<usize>, out: &mut [f32]) {
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

/// A packed run against every row block of A: row blocks outermost.
struct RowBlocks<'a> {
    k: usize,
    a: &'a [f32],
    lda: usize,
    panels: &'a [f32],
    tail: &'a [f32],
    y: faer::MatMut<'a, f32>,
    accumulate: bool,
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
            mut y,
            accumulate,
        } = self;
        let (m, n) = (y.nrows(), y.ncols());
        let t = tail.len() / k;
        let paneled = n - t;
        let mut row = 0;
        while row < m {
            let block = (m - row).min(MR);
            let a = &a[row * lda..];
            for (p, panel) in panels.chunks_exact(PANEL * k).enumerate() {
                let cols = p * PANEL..(p * PANEL + PANEL).min(paneled);
                let y = y
                    .as_mut()
                    .subrows_mut(row, block)
                    .subcols_mut(cols.start, cols.len());
                if cols.len() <= S::F32_LANES {
                    rows_of::<S, 1>(s, block, k, a, lda, panel, y, accumulate);
                } else {
                    rows_of::<S, V>(s, block, k, a, lda, panel, y, accumulate);
                }
            }
            if t > 0 {
                let y = y.as_mut().subrows_mut(row, block).subcols_mut(paneled, t);
                tail_rows(s, block, k, a, lda, tail, y, accumulate);
            }
            row += block;
        }
    }
}

/// The tail columns of `rows` rows: as many rows at once as keep `rows × T`
/// accumulators within twelve registers, single rows for the rest.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn tail_rows<S: Simd>(
    s: S,
    rows: usize,
    k: usize,
    a: &[f32],
    lda: usize,
    tail: &[f32],
    y: faer::MatMut<'_, f32>,
    accumulate: bool,
) {
    match tail.len() / k {
        1 => tail_by::<S, 6, 1>(s, rows, k, a, lda, tail, y, accumulate),
        2 => tail_by::<S, 6, 2>(s, rows, k, a, lda, tail, y, accumulate),
        3 => tail_by::<S, 4, 3>(s, rows, k, a, lda, tail, y, accumulate),
        4 => tail_by::<S, 3, 4>(s, rows, k, a, lda, tail, y, accumulate),
        5 => tail_by::<S, 2, 5>(s, rows, k, a, lda, tail, y, accumulate),
        6 => tail_by::<S, 2, 6>(s, rows, k, a, lda, tail, y, accumulate),
        _ => tail_by::<S, 1, 7>(s, rows, k, a, lda, tail, y, accumulate),
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn tail_by<S: Simd, const R: usize, const T: usize>(
    s: S,
    rows: usize,
    k: usize,
    a: &[f32],
    lda: usize,
    tail: &[f32],
    mut y: faer::MatMut<'_, f32>,
    accumulate: bool,
) {
    let mut row = 0;
    while row < rows {
        let a = &a[row * lda..];
        if rows - row >= R {
            let y = y.as_mut().subrows_mut(row, R);
            dots::<S, R, T>(s, k, a, lda, tail, y, accumulate);
            row += R;
        } else {
            let y = y.as_mut().subrows_mut(row, 1);
            dots::<S, 1, T>(s, k, a, lda, tail, y, accumulate);
            row += 1;
        }
    }
}

/// `R` rows of A against the `T` tail columns (each `k` long): `R × T` accumulators
/// of a vector of `k` each, summed across at the end.
#[inline(always)]
fn dots<S: Simd, const R: usize, const T: usize>(
    s: S,
    k: usize,
    a: &[f32],
    lda: usize,
    tail: &[f32],
    mut y: faer::MatMut<'_, f32>,
    accumulate: bool,
) {
    let lanes = S::F32_LANES;
    assert!(
        a.len() >= (R - 1) * lda + k && tail.len() == T * k && y.nrows() == R && y.ncols() == T,
        "pointwise: tail out of bounds"
    );
    let rows: [&[f32]; R] = std::array::from_fn(|r| &a[r * lda..][..k]);
    let cols: [&[f32]; T] = std::array::from_fn(|t| &tail[t * k..][..k]);
    let mut acc = [[s.splat_f32s(0.0); T]; R];
    let full = k / lanes * lanes;
    for k0 in (0..full).step_by(lanes) {
        let mut xs = [s.splat_f32s(0.0); T];
        for t in 0..T {
            xs[t] = load::<S>(&cols[t][k0..][..lanes]);
        }
        for r in 0..R {
            let av = load::<S>(&rows[r][k0..][..lanes]);
            for t in 0..T {
                acc[r][t] = s.mul_add_e_f32s(av, xs[t], acc[r][t]);
            }
        }
    }
    if full < k {
        let mut xs = [s.splat_f32s(0.0); T];
        for t in 0..T {
            xs[t] = s.partial_load_f32s(&cols[t][full..]);
        }
        for r in 0..R {
            let av = s.partial_load_f32s(&rows[r][full..]);
            for t in 0..T {
                acc[r][t] = s.mul_add_e_f32s(av, xs[t], acc[r][t]);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        let out = row_of(y.as_mut(), r);
        for (o, acc) in out.iter_mut().zip(acc) {
            let sum = s.reduce_sum_f32s(*acc);
            *o = if accumulate { *o + sum } else { sum };
        }
    }
}
