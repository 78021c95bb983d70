//! Matrix product for the element types the f32 GEMM does not cover.
//!
//! An i-k-j loop over column tiles of `TILE` with the accumulators on the stack:
//! rows of `b` are read contiguously, nothing is allocated, floats accumulate in `f64`
//! and integers in `i64` (wrapping, which equals NumPy's wrapping in the element type
//! modulo its width).

use super::elem::Elem;
use super::params::{MatMul, RANK};

/// Output columns per accumulator tile (2 KiB of `f64` on the stack).
const TILE: usize = 256;

/// `out[b] = a[b] × b[b]` for every batch index of `p.batch_shape` (the output's,
/// contiguous): `a` is `m × k`, `b` is `k × n`, both row-major; each operand's batch
/// index counts whole matrices through its batch strides (0 = broadcast). `k = 0`
/// gives zeros. Precondition: every addressed matrix lies in its slice.
pub fn matmul<T: Elem>(p: &MatMul, a: &[T], b: &[T], out: &mut [T]) {
    let (m, n, k) = (p.m, p.n, p.k);
    let rank = p.batch_rank.min(RANK);
    let batches: usize = p.batch_shape[..rank].iter().product();
    let mut idx = [0usize; RANK];
    let (mut ao, mut bo) = (0usize, 0usize);
    for batch in 0..batches {
        let a = &a[ao * m * k..(ao + 1) * m * k];
        let b = &b[bo * k * n..(bo + 1) * k * n];
        let y = &mut out[batch * m * n..(batch + 1) * m * n];
        if T::IS_FLOAT {
            one_float(m, n, k, a, b, y);
        } else {
            one_int(m, n, k, a, b, y);
        }
        // Next batch index (odometer), moving both operands' matrix offsets.
        let mut d = rank;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            ao += p.a_batch_strides[d];
            bo += p.b_batch_strides[d];
            if idx[d] < p.batch_shape[d] {
                break;
            }
            ao -= p.a_batch_strides[d] * p.batch_shape[d];
            bo -= p.b_batch_strides[d] * p.batch_shape[d];
            idx[d] = 0;
        }
    }
}

fn one_float<T: Elem>(m: usize, n: usize, k: usize, a: &[T], b: &[T], y: &mut [T]) {
    for i in 0..m {
        let arow = &a[i * k..(i + 1) * k];
        for j0 in (0..n).step_by(TILE) {
            let w = TILE.min(n - j0);
            let mut acc = [0.0f64; TILE];
            for (kk, &av) in arow.iter().enumerate() {
                let av = av.to_f64();
                let brow = &b[kk * n + j0..kk * n + j0 + w];
                for (s, &bv) in acc[..w].iter_mut().zip(brow) {
                    *s += av * bv.to_f64();
                }
            }
            for (y, &s) in y[i * n + j0..i * n + j0 + w].iter_mut().zip(&acc[..w]) {
                *y = T::from_f64(s);
            }
        }
    }
}

fn one_int<T: Elem>(m: usize, n: usize, k: usize, a: &[T], b: &[T], y: &mut [T]) {
    for i in 0..m {
        let arow = &a[i * k..(i + 1) * k];
        for j0 in (0..n).step_by(TILE) {
            let w = TILE.min(n - j0);
            let mut acc = [0i64; TILE];
            for (kk, &av) in arow.iter().enumerate() {
                let av = av.to_i64();
                let brow = &b[kk * n + j0..kk * n + j0 + w];
                for (s, &bv) in acc[..w].iter_mut().zip(brow) {
                    *s = s.wrapping_add(av.wrapping_mul(bv.to_i64()));
                }
            }
            for (y, &s) in y[i * n + j0..i * n + j0 + w].iter_mut().zip(&acc[..w]) {
                *y = T::from_i64(s);
            }
        }
    }
}
