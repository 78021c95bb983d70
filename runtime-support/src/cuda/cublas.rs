//! The cuBLAS option for Gemm steps: how a row-major ONNX Gemm maps onto
//! column-major `cublasSgemm`.
//!
//! cuBLAS reads every matrix column-major. A row-major `m×n` matrix read column-major
//! is its `n×m` transpose, so `Y = op(A)·op(B)` becomes `Yᵀ = op(B)ᵀ·op(A)ᵀ`: swap the
//! operands, swap `m` and `n`, keep each operand's transpose flag, and give each the
//! length of its stored rows as leading dimension. The mapping is plain data so it can
//! be checked on the CPU against a model of column-major sgemm (no GPU needed); the
//! device launcher passes it to cuBLAS unchanged.

use crate::params::{Activation, Gemm};

/// Arguments of one column-major `cublasSgemm` call (`C = alpha·op(A)·op(B) + beta·C`,
/// `op(A)` is `m×k`, `op(B)` is `k×n`, `C` is `m×n`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SgemmArgs {
    pub trans_a: bool,
    pub trans_b: bool,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub beta: f32,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    /// True: cuBLAS's `A` is the ONNX `B` and its `B` is the ONNX `A`.
    pub swapped: bool,
}

/// The cuBLAS call for `p`, or `None` when cuBLAS cannot express it alone: a fused
/// activation, or a `C` that is not the full `m×n` output (cuBLAS accumulates into
/// `C` in place, so the caller first copies a dense `C` into the output).
pub const fn sgemm_args(p: &Gemm, has_c: bool) -> Option<SgemmArgs> {
    if !matches!(p.activation, Activation::None) {
        return None;
    }
    if has_c && p.beta != 0.0 && !(p.c_strides[0] == p.n && p.c_strides[1] == 1) {
        return None;
    }
    Some(SgemmArgs {
        trans_a: p.trans_b,
        trans_b: p.trans_a,
        m: p.n,
        n: p.m,
        k: p.k,
        alpha: p.alpha,
        beta: if has_c { p.beta } else { 0.0 },
        // ONNX B is k×n stored (n×k when transposed): its stored rows are n (or k) long.
        lda: if p.trans_b { p.k } else { p.n },
        // ONNX A is m×k stored (k×m when transposed).
        ldb: if p.trans_a { p.m } else { p.k },
        ldc: p.n,
        swapped: true,
    })
}

/// A reference column-major sgemm, exactly as cuBLAS defines it, for checking
/// [`sgemm_args`] on the CPU.
pub fn reference_sgemm(g: &SgemmArgs, a: &[f32], b: &[f32], c: &mut [f32]) {
    // Column-major element (i, j) of a matrix with leading dimension ld.
    let at = |i: usize, l: usize| {
        if g.trans_a {
            a[l + i * g.lda]
        } else {
            a[i + l * g.lda]
        }
    };
    let bt = |l: usize, j: usize| {
        if g.trans_b {
            b[j + l * g.ldb]
        } else {
            b[l + j * g.ldb]
        }
    };
    for j in 0..g.n {
        for i in 0..g.m {
            let mut acc = 0.0f32;
            for l in 0..g.k {
                acc += at(i, l) * bt(l, j);
            }
            let dst = &mut c[i + j * g.ldc];
            *dst = g.alpha * acc + if g.beta == 0.0 { 0.0 } else { g.beta * *dst };
        }
    }
}
