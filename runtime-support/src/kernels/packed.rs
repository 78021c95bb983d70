//! Matrix products over panels: the right operand packed into the order our
//! micro-kernel reads it.
//!
//! A linear layer (`Y = A · B`, B the layer's weights) is where faer loses most: it
//! repacks B on every call (2.4 MB for a BERT-mini feed-forward layer, a quarter of the
//! product's time). The compiler instead packs B once ([`pack_b`]) into the order the
//! micro-kernel reads it: panels of [`PANEL`] columns, each panel's `k` rows back to
//! back (`[panel][k][PANEL]`, the last panel zero-padded). A is read in place. The
//! convolutions' blocked product (`blocked.rs`) packs its blocks in the same layout
//! and runs the same micro-kernel ([`panel_of`]), with the weights as A.
//!
//! The micro-kernel keeps an `MR × PANEL` block of Y in registers (6 × 16 with AVX2:
//! 12 accumulators, two loads of B and six broadcasts of A per step of `k`). Panels go
//! outermost, so one panel (at most `k · 64` bytes) is reused from L1/L2 by every block
//! of rows; A's rows stream from L2. A last panel of no more than one vector of
//! columns takes that vector alone (half the multiply-adds where a 7×7 plane's 49th
//! position has a panel to itself: ResNet-50's 512→512 s2 to 7×7 −9 % cycles).
//! Threads take bands of whole row blocks.

use faer::traits::pulp::{self, Simd, WithSimd};

use super::depthwise::{load, store};
use super::gemm::{Split, row_major_mut};
use crate::params::PackedMatMul;
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
    product_shared(a, k, b, row_major_mut(y, m, n, n), false);
}

/// `y = a · b` (or `y += a · b` where `accumulate`) on one thread: `a` is row-major
/// `y.nrows() × k` with rows `lda` apart, `b` is `k × y.ncols()` in [`pack_b`]'s panel
/// layout (a partial last panel's extra columns are read but never stored), and `y`'s
/// rows are contiguous.
fn product(a: &[f32], lda: usize, b: &[f32], mut y: faer::MatMut<'_, f32>, accumulate: bool) {
    let (m, n) = (y.nrows(), y.ncols());
    if m == 0 || n == 0 {
        return;
    }
    let k = b.len() / (n.div_ceil(PANEL) * PANEL);
    assert!(
        b.len() == n.div_ceil(PANEL) * PANEL * k && lda >= k && a.len() >= (m - 1) * lda + k,
        "packed product: operands"
    );
    if k == 0 {
        if !accumulate {
            y.fill(0.0);
        }
        return;
    }
    pulp::Arch::new().dispatch(Product {
        k,
        a,
        lda,
        b,
        y,
        accumulate,
    });
}

/// [`product`] with `y`'s rows shared among the current run's threads, in bands of
/// whole row blocks; every element is summed in the same order whatever the count.
fn product_shared(a: &[f32], lda: usize, b: &[f32], y: faer::MatMut<'_, f32>, accumulate: bool) {
    let (m, n) = (y.nrows(), y.ncols());
    let k = b.len() / (n.div_ceil(PANEL) * PANEL).max(1);
    let threads = threads::current();
    let band = m.div_ceil(threads).next_multiple_of(MR);
    let bands = (0..m.div_ceil(band)).map(|i| i * band..((i + 1) * band).min(m));
    threads::for_each(Split::new(y, true, bands), m * n * k, |(rows, y)| {
        product(&a[rows.start * lda..], lda, b, y, accumulate);
    });
}

/// One thread's product.
struct Product<'a> {
    k: usize,
    a: &'a [f32],
    lda: usize,
    b: &'a [f32],
    y: faer::MatMut<'a, f32>,
    accumulate: bool,
}

impl WithSimd for Product<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        match S::F32_LANES {
            16 => self.panels::<S, 1>(s),
            8 => self.panels::<S, 2>(s),
            4 => self.panels::<S, 4>(s),
            _ => self.panels::<pulp::Scalar, PANEL>(pulp::Scalar::new()),
        }
    }
}

impl Product<'_> {
    /// Every panel against every block of rows, `V` vectors to a panel row.
    #[inline(always)]
    fn panels<S: Simd, const V: usize>(self, s: S) {
        let Product {
            k,
            a,
            lda,
            b,
            mut y,
            accumulate,
        } = self;
        assert_eq!(V * S::F32_LANES, PANEL, "packed product: lanes");
        let (rows, n) = (y.nrows(), y.ncols());
        // `k > 0` and `b` is exactly the panels of `n` columns (`product` checked).
        for (p, panel) in b.chunks_exact(PANEL * k).enumerate() {
            let cols = p * PANEL..(p * PANEL + PANEL).min(n);
            let mut row = 0;
            while row < rows {
                let block = row_block(rows - row);
                let a = &a[row * lda..];
                let y = y
                    .as_mut()
                    .subrows_mut(row, block)
                    .subcols_mut(cols.start, cols.len());
                panel_of::<S, V>(s, k, a, lda, panel, y, accumulate);
                row += block;
            }
        }
    }
}

/// `y` (at most [`MR`] rows, the panel's columns) from one panel: [`block_of`] for its
/// rows, over `V` vectors a panel row, or over the first alone where the panel has no
/// more columns than a vector (the last of a 7×7 plane's 49 positions, in `product`).
#[inline(always)]
pub(super) fn panel_of<S: Simd, const V: usize>(
    s: S,
    k: usize,
    a: &[f32],
    lda: usize,
    panel: &[f32],
    y: faer::MatMut<'_, f32>,
    accumulate: bool,
) {
    let rows = y.nrows();
    if y.ncols() <= S::F32_LANES {
        rows_of::<S, 1>(s, rows, k, a, lda, panel, y, accumulate);
    } else {
        rows_of::<S, V>(s, rows, k, a, lda, panel, y, accumulate);
    }
}

/// [`block_of`] for a block of `rows` (at most [`MR`]) rows.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn rows_of<S: Simd, const V: usize>(
    s: S,
    rows: usize,
    k: usize,
    a: &[f32],
    lda: usize,
    panel: &[f32],
    y: faer::MatMut<'_, f32>,
    accumulate: bool,
) {
    match rows {
        6 => block_of::<S, V, 6>(s, k, a, lda, panel, y, accumulate),
        5 => block_of::<S, V, 5>(s, k, a, lda, panel, y, accumulate),
        4 => block_of::<S, V, 4>(s, k, a, lda, panel, y, accumulate),
        3 => block_of::<S, V, 3>(s, k, a, lda, panel, y, accumulate),
        2 => block_of::<S, V, 2>(s, k, a, lda, panel, y, accumulate),
        _ => block_of::<S, V, 1>(s, k, a, lda, panel, y, accumulate),
    }
}

/// `R` rows of Y at one panel (`y`: `R` rows, the panel's columns): `R × V`
/// accumulators over all of `k`, started from zero or from `y`, then stored.
#[inline(always)]
fn block_of<S: Simd, const V: usize, const R: usize>(
    s: S,
    k: usize,
    a: &[f32],
    lda: usize,
    panel: &[f32],
    mut y: faer::MatMut<'_, f32>,
    accumulate: bool,
) {
    let lanes = S::F32_LANES;
    // Every read below is in bounds once these hold: rows `0..R` of A reach column
    // `k − 1`, and the panel holds `k` rows of `PANEL`.
    assert!(
        a.len() >= (R - 1) * lda + k && panel.len() == k * PANEL && y.nrows() == R,
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
    for (kk, b_row) in panel.chunks_exact(PANEL).enumerate() {
        let mut b = [s.splat_f32s(0.0); V];
        for (v, b) in b.iter_mut().enumerate() {
            *b = load::<S>(&b_row[v * lanes..][..lanes]);
        }
        for r in 0..R {
            let x = s.splat_f32s(rows[r][kk]);
            for v in 0..V {
                acc[r][v] = s.mul_add_e_f32s(x, b[v], acc[r][v]);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        let out = row_of(y.as_mut(), r);
        if cols == PANEL {
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

/// Row `r` of a view whose rows are contiguous, as a slice.
#[inline(always)]
pub(super) fn row_of(y: faer::MatMut<'_, f32>, r: usize) -> &mut [f32] {
    y.row_mut(r)
        .try_as_row_major_mut()
        .expect("packed product: rows are contiguous")
        .as_slice_mut()
}
