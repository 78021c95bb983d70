//! Matrix products over panels: the right operand packed into the order our
//! micro-kernel reads it.
//!
//! A linear layer (`Y = A · B`, B the layer's weights) is where faer loses most: it
//! repacks B on every call (2.4 MB for a BERT-mini feed-forward layer, a quarter of the
//! product's time). The compiler instead packs B once ([`pack_b`]) into the order the
//! micro-kernel reads it: panels of [`PANEL`] columns, each panel's `k` rows back to
//! back (`[panel][k][PANEL]`, the last panel zero-padded). A is read in place. The
//! convolutions' blocked product (`blocked.rs`) packs its blocks in the same layout
//! and runs the same micro-kernel ([`panel_of`]), with the weights as A; Winograd's
//! products (`winograd.rs`) run it on their transformed input where it lies, rows of
//! whole lane groups ([`Panels::rows`]), with no packing: 4–12 % faster a layer than
//! the faer products it replaced (one Zen 4 core; 64→64 at 56², 32→128 at 27²,
//! 48→192 at 13², 256→256 at 14²).
//!
//! The micro-kernel keeps an `MR × PANEL` block of Y in registers (6 × 16 with AVX2:
//! 12 accumulators, two loads of B and six broadcasts of A per step of `k`); with
//! AVX-512 it takes two panels at once, `MR × 32` in twelve 16-lane registers
//! ([`panels_per_step`]), and the convolutions' blocked product four, `MR × 64` in
//! 24: four loads of B and six broadcasts for 24 multiply-adds, where two panels took
//! eight for twelve (one Zen 5 core: 512→128 at 28² 0.474 → 0.457 ms, ResNet-50's
//! layers 2.3 % faster in all; Winograd's products, of few columns a block, ran no
//! faster or slower that way and keep two). A lone last panel there (a 7×7 plane's
//! 32 + 16 positions)
//! takes ten to twelve rows at once instead ([`lone_panel_block`]), so that its one
//! vector a row still fills the pipes. The panel layout is the same at either width, since the
//! compiler packs B without knowing the CPU that runs it. Panels go
//! outermost, so one panel (at most `k · 64` bytes) is reused from L1/L2 by every block
//! of rows; A's rows stream from L2. A last panel of no more than one vector of
//! columns takes that vector alone (half the multiply-adds where a 7×7 plane's 49th
//! position has a panel to itself: ResNet-50's 512→512 s2 to 7×7 −9 % cycles).
//! Threads take bands of whole row blocks.

use std::ops::Range;

use faer::traits::pulp::{self, Simd, WithSimd};

use super::depthwise::{load, store};
use super::elementwise::VectorActivation;
use super::gemm::{Split, row_major_mut};
use super::simd;
use crate::params::{Activation, PackedMatMul};
use crate::threads;

/// Columns of B in one packed panel: two AVX2 vectors.
pub const PANEL: usize = 16;

/// Rows of Y one micro-kernel call holds in registers.
pub(super) const MR: usize = 6;

/// Rows in the next block of `rest` rows: [`MR`], or `MR − 1` where enough rows are
/// left for blocks of `MR − 1` and `MR` to cover them with no smaller block. A block
/// of two rows has four accumulators, fewer than the eight that two FMA pipes of four
/// cycles' latency keep busy, and runs at half speed: 32 rows go as 5+5+5+5+6+6, not
/// 6·5+2 (16→32 at 112², one core: 0.188 → 0.183 ms). A row's sums do not depend on
/// its block.
pub(super) const fn row_block(rest: usize) -> usize {
    let fives = (MR - rest % MR) % MR;
    if fives > 0 && rest >= (MR - 1) * fives {
        MR - 1
    } else if rest < MR {
        rest
    } else {
        MR
    }
}

/// Rows in the next block of `rest` rows against a lone panel at sixteen lanes (one
/// vector a row, [`lone_panel_of`]): two of [`row_block`]'s blocks at once where they
/// make ten rows or more, so that ten to twelve accumulators cover the multiply-add's
/// latency, where six left the pipes idle half the time (512→512 at 8² ran at
/// 121 GMAC/s on one Zen 5 core, its 6 × 16 blocks at 16² at 78).
pub(super) const fn lone_panel_block(rest: usize) -> usize {
    let first = row_block(rest);
    let second = row_block(rest - first);
    if first + second >= 2 * MR - 2 {
        first + second
    } else {
        first
    }
}

/// Length of B (`k × n`) packed by [`pack_b`].
pub fn packed_b_len(k: usize, n: usize) -> usize {
    n.div_ceil(PANEL) * PANEL * k
}

/// Packs row-major `b` (`k × n`) into panels: `[panel][k][PANEL]`, zeros past column
/// `n`. Run by the compiler; the result goes into the weights blob.
pub fn pack_b(k: usize, n: usize, b: &[f32]) -> Vec<f32> {
    assert_eq!(b.len(), k * n, "pack_b: B");
    let mut packed = vec![0.0; packed_b_len(k, n)];
    for (p, panel) in packed.chunks_exact_mut(PANEL * k.max(1)).enumerate() {
        let cols = p * PANEL..((p + 1) * PANEL).min(n);
        for (row, out) in panel.chunks_exact_mut(PANEL).enumerate() {
            out[..cols.len()].copy_from_slice(&b[row * n..][cols.clone()]);
        }
    }
    packed
}

/// `y = a · b` for row-major `a` (`m × k`) and `b` packed by [`pack_b`]; `y` is
/// `m × n` row-major. Rows are shared among the current run's threads.
pub fn matmul_packed(p: &PackedMatMul, a: &[f32], b: &[f32], y: &mut [f32]) {
    let PackedMatMul { m, n, k } = *p;
    assert_eq!(a.len(), m * k, "matmul_packed: A");
    assert_eq!(b.len(), packed_b_len(k, n), "matmul_packed: packed B");
    assert_eq!(y.len(), m * n, "matmul_packed: Y");
    if y.is_empty() {
        return;
    }
    let b = Panels::packed(b, k);
    product_shared(a, k, b, k, row_major_mut(y, m, n, n), false, false);
}

/// `y = a · b` (or `y += a · b` where `accumulate`) on one thread: `a` is row-major
/// `y.nrows() × k` with rows `lda` apart, `b` is `k × y.ncols()` as [`Panels`] (a
/// partial last panel's extra columns are read but never stored: zeros where packed,
/// and where read in place whatever lies there, up to a panel past the last row's
/// `y.ncols()`), and `y`'s rows are contiguous. Where `fetch_a`, A is read once from
/// beyond L2 (Winograd's weights), and each block of rows asks for the next one's as
/// it goes ([`fetch_ahead`]).
pub(super) fn product(
    a: &[f32],
    lda: usize,
    b: Panels<'_>,
    k: usize,
    mut y: faer::MatMut<'_, f32>,
    accumulate: bool,
    fetch_a: bool,
) {
    let (m, n) = (y.nrows(), y.ncols());
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        lda >= k && a.len() >= (m - 1) * lda + k,
        "packed product: operands"
    );
    if k == 0 {
        if !accumulate {
            y.fill(0.0);
        }
        return;
    }
    super::simd::dispatch_wide(Product {
        k,
        a,
        lda,
        b,
        out: Out::new(y, accumulate, None),
        fetch_a,
    });
}

/// [`product`] with `y`'s rows shared among the current run's threads, in bands of
/// whole row blocks; every element is summed in the same order whatever the count.
pub(super) fn product_shared(
    a: &[f32],
    lda: usize,
    b: Panels<'_>,
    k: usize,
    y: faer::MatMut<'_, f32>,
    accumulate: bool,
    fetch_a: bool,
) {
    let (m, n) = (y.nrows(), y.ncols());
    let threads = threads::current();
    let band = m.div_ceil(threads).next_multiple_of(MR);
    let bands = (0..m.div_ceil(band)).map(|i| i * band..((i + 1) * band).min(m));
    threads::for_each(Split::new(y, true, bands), m * n * k, |(rows, y)| {
        product(&a[rows.start * lda..], lda, b, k, y, accumulate, fetch_a);
    });
}

/// One thread's product.
struct Product<'a> {
    k: usize,
    a: &'a [f32],
    lda: usize,
    b: Panels<'a>,
    out: Out<'a>,
    fetch_a: bool,
}

impl WithSimd for Product<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        match (S::F32_LANES, self.fetch_a) {
            (16 | 8, false) => self.panels::<S, 2, false>(s),
            (16 | 8, true) => self.panels::<S, 2, true>(s),
            (4, false) => self.panels::<S, 4, false>(s),
            (4, true) => self.panels::<S, 4, true>(s),
            _ => self.panels::<pulp::Scalar, PANEL, false>(pulp::Scalar::new()),
        }
    }
}

impl Product<'_> {
    /// Every step of panels ([`panels_per_step`]) against every block of rows, `V`
    /// vectors to a row of a step; each block asking for the next one's rows of A
    /// where `FETCH`.
    #[inline(always)]
    fn panels<S: Simd, const V: usize, const FETCH: bool>(self, s: S) {
        let Product {
            k,
            a,
            lda,
            b,
            mut out,
            ..
        } = self;
        let (rows, n) = (out.y.nrows(), out.y.ncols());
        let width = panels_per_step::<S, V>() * PANEL;
        for p in 0..n.div_ceil(width) {
            let panels = b.from(p * width / PANEL);
            let cols = p * width..(p * width + width).min(n);
            let lone = S::F32_LANES == PANEL && cols.len() <= PANEL;
            let mut row = 0;
            while row < rows {
                let block = if lone {
                    lone_panel_block(rows - row)
                } else {
                    row_block(rows - row)
                };
                let a = &a[row * lda..];
                // The next block's rows start where this one's end (past the last, the
                // next product's in Winograd's weights).
                let ahead = block * lda;
                let out = out.part(row..row + block, cols.clone());
                if lone {
                    lone_panel_of::<S, FETCH>(s, k, a, lda, panels, out, ahead);
                } else {
                    panel_of::<S, V, FETCH>(s, k, a, lda, panels, out, ahead);
                }
                row += block;
            }
        }
    }
}

/// B as the micro-kernel reads it, from its first panel on: row `r` of panel `p` starts
/// at `data[p · next + r · ld]`. Packed ([`pack_b`]'s layout, [`Panels::packed`]),
/// rows are a panel apart and panels `k` rows apart; a row-major matrix read in place
/// ([`Panels::rows`]: Winograd's transformed inputs) has its rows `ld` apart and its
/// panels side by side.
#[derive(Clone, Copy)]
pub(super) struct Panels<'a> {
    data: &'a [f32],
    /// Floats from one row of a panel to the next.
    ld: usize,
    /// Floats from one panel to the next.
    next: usize,
}

impl<'a> Panels<'a> {
    /// Panels in [`pack_b`]'s layout, of `k` rows each.
    pub(super) fn packed(data: &'a [f32], k: usize) -> Self {
        Panels {
            data,
            ld: PANEL,
            next: PANEL * k,
        }
    }

    /// A row-major matrix of rows `ld` apart (at least a panel), read in place.
    pub(super) fn rows(data: &'a [f32], ld: usize) -> Self {
        assert!(ld >= PANEL, "panels: rows narrower than a panel");
        Panels {
            data,
            ld,
            next: PANEL,
        }
    }

    /// The panels from panel `p` on.
    pub(super) fn from(self, p: usize) -> Self {
        Panels {
            data: &self.data[p * self.next..],
            ..self
        }
    }
}

/// Panels one micro-kernel call reads, at `V` vectors of `S` a row: one with AVX2's
/// two vectors of eight, two or four with AVX-512's vectors of sixteen (a `6 × 32`
/// block of Y in twelve of its 32 registers, half the instructions of AVX2's `6 × 16`
/// for the same multiply-adds; or `6 × 64` in 24).
pub(super) const fn panels_per_step<S: Simd, const V: usize>() -> usize {
    (V * S::F32_LANES).div_ceil(PANEL)
}

/// A block of Y as the micro-kernel stores it: its rows contiguous, its sums started
/// from zero or (where `accumulate`) from what it holds, and on a product's last run
/// of `k` its output stage applied in registers where there is one ([`Epilogue`]).
pub(super) struct Out<'a> {
    pub(super) y: faer::MatMut<'a, f32>,
    pub(super) accumulate: bool,
    pub(super) epilogue: Option<Epilogue<'a>>,
}

impl<'a> Out<'a> {
    #[inline(always)]
    pub(super) fn new(
        y: faer::MatMut<'a, f32>,
        accumulate: bool,
        epilogue: Option<Epilogue<'a>>,
    ) -> Self {
        Out {
            y,
            accumulate,
            epilogue,
        }
    }

    /// Rows `rows` and columns `cols` of this block, stored the same way.
    #[inline(always)]
    pub(super) fn part(&mut self, rows: Range<usize>, cols: Range<usize>) -> Out<'_> {
        Out {
            y: self
                .y
                .as_mut()
                .subrows_mut(rows.start, rows.len())
                .subcols_mut(cols.start, cols.len()),
            accumulate: self.accumulate,
            epilogue: self.epilogue.map(|e| e.rows_from(rows.start)),
        }
    }
}

/// A convolution's output stage applied to a block's sums before they are stored:
/// `act(sum + bias[row])`, the bits of `elementwise::bias_activate` over the stored
/// sums (but for a −0.0 sum with a zero bias and no activation, which it makes 0.0
/// where that pass skips the add), without that pass's load and store of each element
/// (figures in `blocked`'s module doc). Only for activations with a vector form
/// ([`VectorActivation`]).
#[derive(Clone, Copy)]
pub(crate) struct Epilogue<'a> {
    /// A bias for each row of Y from the block's first on (none: zero).
    bias: Option<&'a [f32]>,
    activation: VectorActivation,
}

impl<'a> Epilogue<'a> {
    /// The output stage `act(y + bias[row])` in registers, where `act` has a vector form
    /// and there is a stage at all.
    pub(crate) fn new(bias: Option<&'a [f32]>, activation: Activation) -> Option<Self> {
        let vector = VectorActivation::new(activation)?;
        (bias.is_some() || activation != Activation::None).then_some(Epilogue {
            bias,
            activation: vector,
        })
    }

    /// The stage of rows from `row` on.
    #[inline(always)]
    pub(super) fn rows_from(self, row: usize) -> Self {
        Epilogue {
            bias: self.bias.map(|b| &b[row..]),
            ..self
        }
    }

    /// `R` rows of sums, `V` vectors each, staged in place.
    #[inline(always)]
    fn apply<S: Simd, const V: usize, const R: usize>(self, s: S, acc: &mut [[S::f32s; V]; R]) {
        if let Some(bias) = self.bias {
            let bias = &bias[..R];
            for (acc, &b) in acc.iter_mut().zip(bias) {
                let b = s.splat_f32s(b);
                for v in acc {
                    *v = s.add_f32s(*v, b);
                }
            }
        } else if self.activation != VectorActivation::Identity {
            // `bias_activate` adds a zero bias before an activation (−0.0 becomes 0.0).
            let zero = s.splat_f32s(0.0);
            for v in acc.as_flattened_mut() {
                *v = s.add_f32s(*v, zero);
            }
        }
        self.activation.apply_each(s, acc.as_flattened_mut());
    }
}

/// `out` (at most [`MR`] rows, the columns of `panels`) from up to four consecutive
/// panels: [`block_of`] for its rows, over `V` vectors a row, or over as many as its
/// columns need where they are fewer (one where there are no more columns than a
/// vector: a last partial panel at eight lanes; at sixteen, a lone panel takes
/// [`lone_panel_of`]; two or three of four). Where `FETCH`, it asks for the rows of A
/// the next call reads as it goes, each `ahead` floats past one of these
/// ([`fetch_ahead`]).
#[inline(always)]
pub(super) fn panel_of<S: Simd, const V: usize, const FETCH: bool>(
    s: S,
    k: usize,
    a: &[f32],
    lda: usize,
    panels: Panels<'_>,
    out: Out<'_>,
    ahead: usize,
) {
    let (rows, vectors) = (out.y.nrows(), out.y.ncols().div_ceil(S::F32_LANES));
    match vectors {
        1 => rows_of::<S, 1, FETCH>(s, rows, k, a, lda, panels, out, ahead),
        2 if V == 4 => rows_of::<S, 2, FETCH>(s, rows, k, a, lda, panels, out, ahead),
        3 if V == 4 => rows_of::<S, 3, FETCH>(s, rows, k, a, lda, panels, out, ahead),
        _ => rows_of::<S, V, FETCH>(s, rows, k, a, lda, panels, out, ahead),
    }
}

/// `out` (at most `2 · MR` rows, [`lone_panel_block`], at most one vector of columns)
/// from one panel, one vector a row. Each element is summed in the same order as in
/// [`panel_of`]; asking for the next call's rows of A as it goes where `FETCH`, as
/// [`panel_of`] does.
#[inline(always)]
pub(super) fn lone_panel_of<S: Simd, const FETCH: bool>(
    s: S,
    k: usize,
    a: &[f32],
    lda: usize,
    panel: Panels<'_>,
    out: Out<'_>,
    ahead: usize,
) {
    match out.y.nrows() {
        12 => block_of::<S, 1, 12, FETCH>(s, k, a, lda, panel, out, ahead),
        11 => block_of::<S, 1, 11, FETCH>(s, k, a, lda, panel, out, ahead),
        10 => block_of::<S, 1, 10, FETCH>(s, k, a, lda, panel, out, ahead),
        rows => rows_of::<S, 1, FETCH>(s, rows, k, a, lda, panel, out, ahead),
    }
}

/// `out` (at most `2 · MR` rows, [`lone_panel_block`], at most eight columns) from a
/// panel whose columns past eight are zeros, at eight lanes: AVX-512's sixteen would
/// multiply the zeros, and such a half panel cost as much as a whole one (512→1000 on
/// one row of 168 positions, one Zen 4 core: 1.609 ms, 1.598 for 176). Compiled for
/// AVX-512's 32 registers (a half panel is taken apart only at sixteen lanes): in 16,
/// twelve rows' accumulators spilled (512→1000 at 13², 0.77 → 0.82 ms, against 0.74
/// in 32). Each element is summed in the same order as in [`panel_of`].
pub(super) fn half_panel_of(k: usize, a: &[f32], lda: usize, panel: Panels<'_>, out: Out<'_>) {
    super::simd::dispatch_narrow_wide_registers(HalfPanel(Product {
        k,
        a,
        lda,
        b: panel,
        out,
        fetch_a: false,
    }));
}

/// [`half_panel_of`]'s operands: a [`Product`] of one panel.
struct HalfPanel<'a>(Product<'a>);

impl WithSimd for HalfPanel<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let Product {
            k,
            a,
            lda,
            b: panel,
            mut out,
            ..
        } = self.0;
        assert!(out.y.ncols() <= PANEL / 2, "half panel: shape");
        if S::F32_LANES == PANEL / 2 {
            lone_panel_of::<S, false>(s, k, a, lda, panel, out, 0);
        } else {
            // Without AVX2 (not reached from a product at sixteen lanes).
            let s = pulp::Scalar::new();
            let (rows, cols, mut row) = (out.y.nrows(), out.y.ncols(), 0);
            while row < rows {
                let block = row_block(rows - row);
                let out = out.part(row..row + block, 0..cols);
                let a = &a[row * lda..];
                rows_of::<_, PANEL, false>(s, block, k, a, lda, panel, out, 0);
                row += block;
            }
        }
    }
}

/// [`block_of`] for a block of `rows` (at most [`MR`]) rows.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn rows_of<S: Simd, const V: usize, const FETCH: bool>(
    s: S,
    rows: usize,
    k: usize,
    a: &[f32],
    lda: usize,
    panels: Panels<'_>,
    out: Out<'_>,
    ahead: usize,
) {
    match rows {
        6 => block_of::<S, V, 6, FETCH>(s, k, a, lda, panels, out, ahead),
        5 => block_of::<S, V, 5, FETCH>(s, k, a, lda, panels, out, ahead),
        4 => block_of::<S, V, 4, FETCH>(s, k, a, lda, panels, out, ahead),
        3 => block_of::<S, V, 3, FETCH>(s, k, a, lda, panels, out, ahead),
        2 => block_of::<S, V, 2, FETCH>(s, k, a, lda, panels, out, ahead),
        _ => block_of::<S, V, 1, FETCH>(s, k, a, lda, panels, out, ahead),
    }
}

/// `R` rows of Y at up to four consecutive panels (`out`: `R` rows, the panels'
/// columns): `R × V` accumulators over all of `k`, started from zero or from Y,
/// staged ([`Epilogue`]) where `out` has a stage, then stored. Vector `v` of a row
/// reads panel `v / (PANEL / lanes)`. Where `FETCH`, a line of each of the next call's
/// rows (`ahead` floats past these) every [`FETCH_EVERY`] steps.
#[inline(always)]
fn block_of<S: Simd, const V: usize, const R: usize, const FETCH: bool>(
    s: S,
    k: usize,
    a: &[f32],
    lda: usize,
    panels: Panels<'_>,
    out: Out<'_>,
    ahead: usize,
) {
    let Out {
        mut y,
        accumulate,
        epilogue,
    } = out;
    let lanes = S::F32_LANES;
    let per_panel = PANEL / lanes;
    // Columns read of a row of each panel: all of it, or its first vector where `V`
    // is one.
    let width = V.min(per_panel) * lanes;
    let span = k.saturating_sub(1) * panels.ld + width;
    // Where the last panel read starts (vector `v` reads panel `v / per_panel`).
    let last = (V.div_ceil(per_panel) - 1) * panels.next;
    // Every read below is in bounds once these hold: rows `0..R` of A reach column
    // `k − 1`, and each panel read holds `k` rows of `width`, `ld` apart.
    assert!(
        a.len() >= (R - 1) * lda + k
            && panels.ld >= width
            && panels.data.len() >= last + span
            && V <= 4
            && y.nrows() == R,
        "packed product: block out of bounds"
    );
    let cols = y.ncols();
    let mut acc = [[s.splat_f32s(0.0); V]; R];
    // Vector `v` of a row covers columns `lanes(v)`: in a partial panel, fewer (masked
    // loads and stores; a copy of a run this short would be a call to `memmove`).
    let lanes_of = |v: usize| (v * lanes).min(cols)..((v + 1) * lanes).min(cols);
    if accumulate {
        for (r, acc) in acc.iter_mut().enumerate() {
            let row = row_of(y.as_mut(), r);
            for (v, acc) in acc.iter_mut().enumerate() {
                *acc = s.partial_load_f32s(&row[lanes_of(v)]);
            }
        }
    }
    let mut rows: [&[f32]; R] = [&[]; R];
    for (r, row) in rows.iter_mut().enumerate() {
        *row = &a[r * lda..][..k];
    }
    if panels.ld == PANEL && panels.data.len() >= last + k * PANEL {
        // Packed: rows back to back, as arrays (`chunks_exact(..).zip(..)` divides to
        // find its length, in a call where the inliner leaves it out of line: 4 % of
        // SqueezeNet's time built as one codegen unit).
        let walk = |p: usize| {
            let at = (p * panels.next).min(last);
            panels.data[at..][..k * PANEL].as_chunks::<PANEL>().0
        };
        if V <= 2 {
            for (kk, (b0, b1)) in walk(0).iter().zip(walk(1)).enumerate() {
                fetch_ahead::<R, FETCH>(ahead, &rows, kk);
                step(s, &mut acc, &rows, kk, [b0, b1, b1, b1]);
            }
        } else {
            let steps = walk(0).iter().zip(walk(1)).zip(walk(2)).zip(walk(3));
            for (kk, (((b0, b1), b2), b3)) in steps.enumerate() {
                fetch_ahead::<R, FETCH>(ahead, &rows, kk);
                step(s, &mut acc, &rows, kk, [b0, b1, b2, b3]);
            }
        }
    } else {
        // Walks down the panels' rows, two where `V` reads no more (as before there
        // were four), else four (the last panel's again past `V`'s): an index into
        // each instead ran 4 % slower (256→256 at 14², Winograd).
        let walk = |p: usize| panels.data[(p * panels.next).min(last)..][..span].chunks(panels.ld);
        if V <= 2 {
            for (kk, (b0, b1)) in walk(0).zip(walk(1)).take(k).enumerate() {
                fetch_ahead::<R, FETCH>(ahead, &rows, kk);
                let (b0, b1) = (&b0[..width], &b1[..width]);
                step(s, &mut acc, &rows, kk, [b0, b1, b1, b1]);
            }
        } else {
            let steps = walk(0).zip(walk(1)).zip(walk(2)).zip(walk(3)).take(k);
            for (kk, (((b0, b1), b2), b3)) in steps.enumerate() {
                fetch_ahead::<R, FETCH>(ahead, &rows, kk);
                let row = [&b0[..width], &b1[..width], &b2[..width], &b3[..width]];
                step(s, &mut acc, &rows, kk, row);
            }
        }
    }
    if let Some(epilogue) = epilogue {
        epilogue.apply::<S, V, R>(s, &mut acc);
    }
    for (r, acc) in acc.iter().enumerate() {
        let out = row_of(y.as_mut(), r);
        if cols == V * lanes {
            for (v, acc) in acc.iter().enumerate() {
                store::<S>(&mut out[v * lanes..][..lanes], *acc);
            }
        } else {
            for (v, acc) in acc.iter().enumerate() {
                s.partial_store_f32s(&mut out[lanes_of(v)], *acc);
            }
        }
    }
}

/// Steps along `k` between two of [`fetch_ahead`]'s fetches: a cache line of floats.
const FETCH_EVERY: usize = 16;

/// At step `kk` of [`block_of`], where it starts a cache line and where `FETCH`, asks
/// for that line of the rows the next call reads: each `ahead` floats past one of
/// this call's `rows` (the blocked product's next row block of W, read from L3 or
/// memory, where it has one column block). Spread this way, a line of each row every
/// 16 steps, the fetches keep pace with the multiply-adds; asked for all at once
/// before the block (hundreds of lines), they stalled it, and the hardware
/// prefetchers follow six rows at once late. One Zen 5 core, weights warm: 2048→512
/// at 7² 0.468 → 0.451 ms; in ResNet-50, its 7² pointwise layers 0.53 → 0.44 ms each,
/// 512→512 3×3 s2 1.26 → 1.09.
#[inline(always)]
fn fetch_ahead<const R: usize, const FETCH: bool>(ahead: usize, rows: &[&[f32]; R], kk: usize) {
    if FETCH && kk.is_multiple_of(FETCH_EVERY) {
        for row in rows {
            simd::prefetch(row.as_ptr().wrapping_add(ahead + kk));
        }
    }
}

/// One step of [`block_of`] along `k`: row `kk` of B's panels (`row[v / per_panel]`
/// the one vector `v` reads, of up to four) into the `R × V` accumulators.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // constant indices into the accumulators
fn step<S: Simd, const V: usize, const R: usize>(
    s: S,
    acc: &mut [[S::f32s; V]; R],
    a: &[&[f32]; R],
    kk: usize,
    row: [&[f32]; 4],
) {
    let lanes = S::F32_LANES;
    let per_panel = PANEL / lanes;
    let mut b = [s.splat_f32s(0.0); V];
    for v in 0..V {
        b[v] = load::<S>(&row[v / per_panel][v % per_panel * lanes..][..lanes]);
    }
    for r in 0..R {
        let x = s.splat_f32s(a[r][kk]);
        for v in 0..V {
            acc[r][v] = s.mul_add_e_f32s(x, b[v], acc[r][v]);
        }
    }
}

/// Row `r` of a view whose rows are contiguous, as a slice.
#[inline(always)]
pub(super) fn row_of(y: faer::MatMut<'_, f32>, r: usize) -> &mut [f32] {
    y.row_mut(r)
        .try_as_row_major_mut()
        .expect("packed product: rows are contiguous")
        .as_slice_mut()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::kernels::simd::at_both_widths;

    /// Shapes whose columns end in a full panel, a partial one, a lone vector or less,
    /// with an odd and an even count of panels (AVX-512 takes them in pairs), and whose
    /// rows end in blocks of every height.
    pub(crate) const SHAPES: [(usize, usize, usize); 9] = [
        (1, 1, 1),
        (5, 17, 3),
        (6, 32, 7),
        (7, 33, 16),
        (13, 48, 5),
        (12, 47, 9),
        (2, 16, 1),
        (17, 49, 64),
        (32, 100, 33),
    ];

    /// `(i, j)` of a `rows × cols` matrix of small values with no pattern of rows.
    pub(crate) fn values(rows: usize, cols: usize, seed: usize) -> Vec<f32> {
        (0..rows * cols)
            .map(|i| ((i * 7919 + seed * 104_729) % 211) as f32 / 211.0 - 0.5)
            .collect()
    }

    /// `a · b` summed in f64.
    pub(crate) fn reference(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f64> {
        let mut y = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                y[i * n + j] = (0..k)
                    .map(|l| a[i * k + l] as f64 * b[l * n + j] as f64)
                    .sum();
            }
        }
        y
    }

    /// Every shape at both vector widths: the same bits (each element summed in the
    /// same order), within 1e-5 of the f64 sums (terms of at most 0.25 in magnitude).
    #[test]
    fn packed_products_agree_at_both_widths() {
        for (m, n, k) in SHAPES {
            let (a, b) = (values(m, k, 1), values(k, n, 2));
            let packed = pack_b(k, n, &b);
            let p = PackedMatMul { m, n, k };
            let [wide, narrow] = at_both_widths(|| {
                let mut y = vec![f32::NAN; m * n];
                matmul_packed(&p, &a, &packed, &mut y);
                y
            });
            assert_eq!(wide, narrow, "{m}x{n}x{k}: the two widths differ");
            for (got, want) in wide.iter().zip(reference(m, n, k, &a, &b)) {
                assert!(
                    (*got as f64 - want).abs() <= 1e-5,
                    "{m}x{n}x{k}: {got} against {want}"
                );
            }
        }
    }

    /// B read in place ([`Panels::rows`]), rows `ld` apart with NaN past column `n` and
    /// a panel of NaN past the last row (what the micro-kernel may read there and must
    /// never store), at both widths: the same bits as the packed product, in every
    /// case of a last step (a whole step, one panel, a partial panel of more and of
    /// fewer than a vector), on one thread and shared, fetching A ahead or not.
    #[test]
    fn in_place_products_match_packed_ones() {
        let shapes = [
            (6, 16, 3, 16),
            (7, 24, 5, 24),
            (13, 40, 9, 40),
            (12, 45, 16, 48),
            (5, 56, 33, 56),
            (17, 17, 64, 24),
            (32, 96, 8, 104),
            (2, 9, 2, 16),
        ];
        for (m, n, k, ld) in shapes {
            let (a, b) = (values(m, k, 3), values(k, n, 4));
            let mut rows = vec![f32::NAN; k * ld + PANEL];
            for (row, b) in rows.chunks_exact_mut(ld).zip(b.chunks_exact(n)) {
                row[..n].copy_from_slice(b);
            }
            let packed = pack_b(k, n, &b);
            let want = at_both_widths(|| {
                let mut y = vec![f32::NAN; m * n];
                matmul_packed(&PackedMatMul { m, n, k }, &a, &packed, &mut y);
                y
            });
            for (shared, fetch) in [(false, false), (true, false), (false, true), (true, true)] {
                let got = at_both_widths(|| {
                    let mut y = vec![f32::NAN; m * n];
                    let (b, y_view) = (Panels::rows(&rows, ld), row_major_mut(&mut y, m, n, n));
                    if shared {
                        let threads = crate::Threads::new(2, 0).expect("threads");
                        threads.install(|| product_shared(&a, k, b, k, y_view, false, fetch));
                    } else {
                        product(&a, k, b, k, y_view, false, fetch);
                    }
                    y
                });
                let what = format!("{m}x{n}x{k}, rows {ld} apart, shared {shared}, fetch {fetch}");
                assert_eq!(got[0], want[0], "{what}: wide");
                assert_eq!(got[1], want[1], "{what}: narrow");
            }
        }
    }
}
