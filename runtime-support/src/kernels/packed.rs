//! Matrix products whose right operand is a constant, packed at compile time.
//!
//! A linear layer (`Y = A · B`, B the layer's weights) is where faer loses most: it
//! repacks B on every call (2.4 MB for a BERT-mini feed-forward layer, a quarter of the
//! product's time). The compiler instead packs B once ([`pack_b`]) into the order the
//! micro-kernel reads it: panels of [`PANEL`] columns, each panel's `k` rows back to
//! back (`[panel][k][PANEL]`, the last panel zero-padded). A is read in place.
//!
//! The micro-kernel keeps an `MR × PANEL` block of Y in registers (6 × 16 with AVX2:
//! 12 accumulators, two loads of B and six broadcasts of A per step of `k`). Panels go
//! outermost, so one panel (at most `k · 64` bytes) is reused from L1/L2 by every block
//! of rows; A's rows stream from L2. Threads take bands of whole row blocks.

use faer::traits::pulp::{self, Simd, WithSimd};

use super::depthwise::{load, store};
use crate::params::PackedMatMul;
use crate::threads;

/// Columns of B in one packed panel: two AVX2 vectors.
pub const PANEL: usize = 16;

/// Rows of Y one micro-kernel call holds in registers.
const MR: usize = 6;

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
    if k == 0 {
        return y.fill(0.0);
    }
    let threads = threads::current();
    let band = m.div_ceil(threads).next_multiple_of(MR);
    let bands = y
        .chunks_mut(band * n)
        .enumerate()
        .map(|(i, y)| (i * band, y));
    threads::for_each(bands, m * n * k, |(first, y)| {
        let rows = y.len() / n;
        let a = &a[first * k..][..rows * k];
        pulp::Arch::new().dispatch(Product {
            rows,
            n,
            k,
            a,
            b,
            y,
        });
    });
}

/// One thread's rows of the product.
struct Product<'a> {
    rows: usize,
    n: usize,
    k: usize,
    a: &'a [f32],
    b: &'a [f32],
    y: &'a mut [f32],
}

impl WithSimd for Product<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        match S::F32_LANES {
            8 => self.panels::<S, 2>(s),
            4 => self.panels::<S, 4>(s),
            // A wider vector than a panel (AVX-512 where pulp enables it).
            _ => self.panels::<pulp::Scalar, PANEL>(pulp::Scalar::new()),
        }
    }
}

impl Product<'_> {
    /// Every panel against every block of rows, `V` vectors to a panel row.
    #[inline(always)]
    fn panels<S: Simd, const V: usize>(self, s: S) {
        let Product {
            rows,
            n,
            k,
            a,
            b,
            y,
        } = self;
        assert_eq!(V * S::F32_LANES, PANEL, "matmul_packed: lanes");
        // `k > 0` here and `b` is exactly the packed panels (`matmul_packed` checked).
        for (p, panel) in b.chunks_exact(PANEL * k).enumerate() {
            let cols = (n - p * PANEL).min(PANEL);
            let mut row = 0;
            while row < rows {
                let block = (rows - row).min(MR);
                let a = &a[row * k..];
                let y = &mut y[row * n + p * PANEL..];
                match block {
                    6 => block_of::<S, V, 6>(s, k, a, panel, y, n, cols),
                    5 => block_of::<S, V, 5>(s, k, a, panel, y, n, cols),
                    4 => block_of::<S, V, 4>(s, k, a, panel, y, n, cols),
                    3 => block_of::<S, V, 3>(s, k, a, panel, y, n, cols),
                    2 => block_of::<S, V, 2>(s, k, a, panel, y, n, cols),
                    _ => block_of::<S, V, 1>(s, k, a, panel, y, n, cols),
                }
                row += block;
            }
        }
    }
}

/// `R` rows of Y at one panel: `R × V` accumulators over all of `k`, then stored
/// (the first `cols` columns of the panel).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn block_of<S: Simd, const V: usize, const R: usize>(
    s: S,
    k: usize,
    a: &[f32],
    panel: &[f32],
    y: &mut [f32],
    ldy: usize,
    cols: usize,
) {
    let lanes = S::F32_LANES;
    // Every read below is in bounds once these hold: rows `0..R` of A reach column
    // `k − 1`, and the panel holds `k` rows of `PANEL`.
    assert!(
        a.len() >= R * k && panel.len() == k * PANEL && y.len() >= (R - 1) * ldy + cols,
        "matmul_packed: block out of bounds"
    );
    let rows: [&[f32]; R] = std::array::from_fn(|r| &a[r * k..][..k]);
    let mut acc = [[s.splat_f32s(0.0); V]; R];
    for (kk, b_row) in panel.chunks_exact(PANEL).enumerate() {
        let b: [S::f32s; V] = std::array::from_fn(|v| load::<S>(&b_row[v * lanes..][..lanes]));
        for r in 0..R {
            let x = s.splat_f32s(rows[r][kk]);
            for v in 0..V {
                acc[r][v] = s.mul_add_e_f32s(x, b[v], acc[r][v]);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        let out = &mut y[r * ldy..];
        if cols == PANEL {
            for (v, acc) in acc.iter().enumerate() {
                store::<S>(&mut out[v * lanes..][..lanes], *acc);
            }
        } else {
            let mut row = [0.0f32; PANEL];
            for (v, acc) in acc.iter().enumerate() {
                store::<S>(&mut row[v * lanes..][..lanes], *acc);
            }
            out[..cols].copy_from_slice(&row[..cols]);
        }
    }
}
