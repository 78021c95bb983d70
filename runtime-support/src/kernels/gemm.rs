//! Matrix products: ONNX `Gemm` and batched `MatMul`, and the one place that calls faer.
//!
//! Every faer product (convolution's too) goes through [`sgemm`], so there is a single
//! spot that knows faer's API, its sequential mode, and the register
//! clean-up it needs afterwards.

use std::ops::Range;

use super::elementwise::{Row, activate, map_row};
use super::index::Layout;
use crate::params::{Gemm, MatMul};
use crate::threads;

/// One operand of [`sgemm`]: a row-major matrix stored in `data`, consecutive rows `ld`
/// elements apart, used as it is stored or transposed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Operand<'a> {
    pub data: &'a [f32],
    pub ld: usize,
    pub trans: bool,
}

impl<'a> Operand<'a> {
    /// A plain (untransposed) row-major matrix.
    pub fn rows(data: &'a [f32], ld: usize) -> Self {
        Operand {
            data,
            ld,
            trans: false,
        }
    }

    /// The operand as a faer view of its logical `rows × cols` shape.
    pub(crate) fn view(self, rows: usize, cols: usize) -> faer::MatRef<'a, f32> {
        if self.trans {
            faer::MatRef::from_row_major_slice_with_stride(self.data, cols, rows, self.ld)
                .transpose()
        } else {
            faer::MatRef::from_row_major_slice_with_stride(self.data, rows, cols, self.ld)
        }
    }
}

/// `c = alpha * a * b`, or `c += alpha * a * b` when `accumulate`, where `a` is `m × k`,
/// `b` is `k × n` and `c` is `m × n` row-major with rows `ldc` apart.
///
/// faer runs single-threaded here. Its x86 backend (private-gemm-x86) packs into a
/// thread-local buffer of twice the L3 size (64 MiB of address space on a 32 MiB-L3
/// CPU; only what packing touches becomes resident), allocated on a thread's first
/// large product and reused afterwards, so later calls allocate nothing
/// (`tests/no_alloc.rs` checks this). That buffer is working memory outside the arena,
/// one per thread that runs inference. Under a context with worker threads, large
/// products are shared among them ([`product_shared`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Operand<'_>,
    b: Operand<'_>,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) {
    let dst = row_major_mut(c, m, n, ldc);
    let accum = if accumulate {
        faer::Accum::Add
    } else {
        faer::Accum::Replace
    };
    product_shared(dst, accum, a.view(m, k), b.view(k, n), alpha);
}

/// [`product`], cut into one block of `dst` per thread of the current run along its
/// longer side (whole rows of `a`, or whole columns of `b`) when it has at least
/// [`threads::MIN_WORK`] multiply-adds.
pub(crate) fn product_shared(
    dst: faer::MatMut<'_, f32>,
    accum: faer::Accum,
    a: faer::MatRef<'_, f32>,
    b: faer::MatRef<'_, f32>,
    alpha: f32,
) {
    let (m, n, k) = (a.nrows(), b.ncols(), a.ncols());
    let threads = threads::current();
    if threads == 1 || m * n * k < threads::MIN_WORK {
        return product(dst, accum, a, b, alpha);
    }
    let by_rows = m >= n;
    let long = if by_rows { m } else { n };
    // Columns in whole micro-tiles of faer's (24 wide on AVX2).
    let step = if by_rows {
        long.div_ceil(threads)
    } else {
        long.div_ceil(threads).next_multiple_of(24)
    };
    let ranges = (0..long)
        .step_by(step)
        .map(move |at| at..(at + step).min(long));
    threads::for_each(Split::new(dst, by_rows, ranges), m * n * k, |(at, dst)| {
        let (a, b) = if by_rows {
            (a.subrows(at.start, at.len()), b)
        } else {
            (a, b.subcols(at.start, at.len()))
        };
        product(dst, accum, a, b, alpha);
    });
}

/// `y = m · x` (or `y += m · x` when `accumulate`) for a row-major matrix `m` of
/// `y.len()` rows: faer's matrix-vector kernel (the LSTM kernel's per-step `W·x` and
/// `R·h` for every gate).
pub(crate) fn matvec(m: &[f32], x: &[f32], y: &mut [f32], accumulate: bool) {
    let (rows, n) = (y.len(), x.len());
    assert_eq!(m.len(), rows * n, "matvec: shapes");
    let (a, b) = (Operand::rows(m, n), Operand::rows(x, 1));
    sgemm(rows, 1, n, 1.0, a, b, y, 1, accumulate);
}

/// `m × n` row-major `c` with rows `ldc` apart, as a faer view.
pub(crate) fn row_major_mut(
    c: &mut [f32],
    m: usize,
    n: usize,
    ldc: usize,
) -> faer::MatMut<'_, f32> {
    // Not `MatMut::from_row_major_slice_with_stride_mut`: in faer 0.24.4 it checks the
    // row-major extent but builds a column-major view (row stride 1, column stride
    // `ldc`), so a wide `c` is written past its end. The transposed column-major view
    // below is what it should have built.
    faer::MatMut::from_column_major_slice_with_stride_mut(c, n, m, ldc).transpose_mut()
}

/// One sequential faer product, `dst = alpha * a * b` (or `+=`).
pub(crate) fn product(
    dst: faer::MatMut<'_, f32>,
    accum: faer::Accum,
    a: faer::MatRef<'_, f32>,
    b: faer::MatRef<'_, f32>,
    alpha: f32,
) {
    faer::linalg::matmul::matmul(dst, accum, a, b, alpha, faer::Par::Seq);
    clear_upper_registers();
}

/// Makes faer set up its per-thread packing memory (`private_gemm_x86`'s, sized by
/// the L3 cache) on the calling thread now, if it has not: faer allocates it on a
/// thread's first product, and which thread of a pool takes a part that runs on faer
/// (a Winograd block of at most 8 tiles: ResNet-50's 7² layers at 2 threads) changes
/// from run to run, so any thread could reach its first one in any run. Called when a
/// worker starts and when a pool is installed on a thread.
pub(crate) fn prepare_thread() {
    thread_local! {
        static PREPARED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if PREPARED.replace(true) {
        return;
    }
    let (m, k, n) = (64, 64, 16);
    let (a, b, mut c) = (
        vec![0.0f32; m * k],
        vec![0.0f32; k * n],
        vec![0.0f32; m * n],
    );
    let a = faer::MatRef::from_row_major_slice(&a, m, k);
    let b = faer::MatRef::from_row_major_slice(&b, k, n);
    let c = faer::MatMut::from_row_major_slice_mut(&mut c, m, n);
    product(c, faer::Accum::Replace, a, b, 1.0);
}

/// A matrix cut into consecutive blocks of rows (or columns), disjoint views that
/// threads can write at once, each with its row (column) range.
pub(crate) struct Split<'a, R> {
    rest: faer::MatMut<'a, f32>,
    by_rows: bool,
    ranges: R,
    at: usize,
}

impl<'a, R: Iterator<Item = Range<usize>>> Split<'a, R> {
    /// `ranges` must be consecutive and cover the rows (columns) from 0.
    pub(crate) fn new(matrix: faer::MatMut<'a, f32>, by_rows: bool, ranges: R) -> Self {
        Split {
            rest: matrix,
            by_rows,
            ranges,
            at: 0,
        }
    }
}

impl<'a, R: Iterator<Item = Range<usize>>> Iterator for Split<'a, R> {
    type Item = (Range<usize>, faer::MatMut<'a, f32>);

    fn next(&mut self) -> Option<Self::Item> {
        let range = self.ranges.next()?;
        assert_eq!(range.start, self.at, "Split: ranges must be consecutive");
        let empty = faer::MatMut::from_column_major_slice_mut(&mut [], 0, 0);
        let rest = std::mem::replace(&mut self.rest, empty);
        let (block, rest) = if self.by_rows {
            rest.split_at_row_mut(range.len())
        } else {
            rest.split_at_col_mut(range.len())
        };
        self.rest = rest;
        self.at = range.end;
        Some((range, block))
    }
}

/// faer's AVX micro-kernels can return with the upper halves of the vector registers
/// dirty; on Intel cores the next legacy-SSE loop (this crate's baseline code) then pays
/// a transition penalty on every instruction, measured at 24× on a Xeon. `vzeroupper`
/// costs a cycle.
#[inline]
fn clear_upper_registers() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the only requirement of `_mm256_zeroupper` is the AVX feature, which
        // was detected on this CPU just above.
        unsafe { std::arch::x86_64::_mm256_zeroupper() }
    }
}

/// ONNX `Gemm`: `y = act(alpha * op(a) * op(b) + beta * c)`, with `c` broadcast through
/// `p.c_strides`. `c` is written into `y` first so the product can accumulate onto it.
pub fn gemm(p: &Gemm, a: &[f32], b: &[f32], c: Option<&[f32]>, y: &mut [f32]) {
    let Gemm { m, n, k, .. } = *p;
    assert_eq!(a.len(), m * k, "gemm: A");
    assert_eq!(b.len(), k * n, "gemm: B");
    assert_eq!(y.len(), m * n, "gemm: Y");
    let [c_row, c_col] = p.c_strides;
    if let Some(c) = c {
        let extent = if m * n == 0 {
            c.len()
        } else {
            1 + (m - 1) * c_row + (n - 1) * c_col
        };
        assert_eq!(c.len(), extent, "gemm: C does not match its strides");
    }
    if y.is_empty() {
        return;
    }
    let lhs = Operand {
        data: a,
        ld: if p.trans_a { m } else { k },
        trans: p.trans_a,
    };
    let rhs = Operand {
        data: b,
        ld: if p.trans_b { k } else { n },
        trans: p.trans_b,
    };
    let accumulate = match c {
        Some(c) if p.beta != 0.0 => {
            let beta = p.beta;
            for (i, y_row) in y.chunks_exact_mut(n).enumerate() {
                let c_row = Row::strided(&c[i * c_row..], c_col, n);
                map_row(y_row, c_row, Row::Splat(0.0), |c, _| beta * c);
            }
            true
        }
        _ => false,
    };
    sgemm(m, n, k, p.alpha, lhs, rhs, y, n, accumulate);
    activate(p.activation, y);
}

/// Batched `MatMul` with NumPy broadcasting over the batch dimensions.
///
/// When B is shared by every batch and A's matrices lie back to back (a linear layer
/// over a `[batch, seq, features]` tensor), the batches are one taller product.
pub fn matmul(p: &MatMul, a: &[f32], b: &[f32], y: &mut [f32]) {
    let MatMul { m, n, k, .. } = *p;
    let rank = p.batch_rank;
    let shape = &p.batch_shape[..rank];
    let batches: usize = shape.iter().product();
    assert_eq!(y.len(), batches * m * n, "matmul: Y");
    if batches == 0 {
        return;
    }
    let a_stride = &p.a_batch_strides[..rank];
    let b_stride = &p.b_batch_strides[..rank];
    let mats = |strides: &[usize]| -> usize {
        1 + shape
            .iter()
            .zip(strides)
            .map(|(s, t)| (s - 1) * t)
            .sum::<usize>()
    };
    assert_eq!(a.len(), mats(a_stride) * m * k, "matmul: A");
    assert_eq!(b.len(), mats(b_stride) * k * n, "matmul: B");
    if y.is_empty() {
        return;
    }
    let layout = Layout::new(shape, [a_stride, b_stride]);
    let b_shared = layout.strides[1][..layout.rank].iter().all(|&s| s == 0);
    let a_contiguous = layout.rank == 0 || (layout.rank == 1 && layout.strides[0][0] == 1);
    if b_shared && a_contiguous {
        let rows = batches * m;
        sgemm(
            rows,
            n,
            k,
            1.0,
            Operand::rows(a, k),
            Operand::rows(b, n),
            y,
            n,
            false,
        );
        return;
    }
    let mut ys = y.chunks_exact_mut(m * n);
    layout.for_each(layout.rank, |[oa, ob]| {
        let (a, b) = (&a[oa * m * k..][..m * k], &b[ob * k * n..][..k * n]);
        let y = ys.next().expect("one output matrix per batch index");
        sgemm(
            m,
            n,
            k,
            1.0,
            Operand::rows(a, k),
            Operand::rows(b, n),
            y,
            n,
            false,
        );
    });
}
