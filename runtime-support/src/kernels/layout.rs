//! Data movement: Concat, Transpose and plain copies.

use super::index::{Layout, contiguous_strides};
use crate::params::{Concat, MAX_RANK, Transpose};

/// The output is `p.outer` repetitions of each input's chunk in turn; a chunk is
/// `input.len() / outer` elements.
pub fn concat(p: &Concat, inputs: &[&[f32]], y: &mut [f32]) {
    let total: usize = inputs.iter().map(|x| x.len()).sum();
    assert_eq!(y.len(), total, "concat: Y");
    if total == 0 {
        return;
    }
    assert!(p.outer > 0, "concat: outer 0 with data");
    for x in inputs {
        assert_eq!(x.len() % p.outer, 0, "concat: input not divisible by outer");
    }
    let mut rest = y;
    for o in 0..p.outer {
        for x in inputs {
            let chunk = x.len() / p.outer;
            let (dst, tail) = rest.split_at_mut(chunk);
            dst.copy_from_slice(&x[o * chunk..][..chunk]);
            rest = tail;
        }
    }
}

/// Side of the square tiles a strided transpose is done in: small enough that a
/// tile's source and destination lines stay in L1.
const TILE: usize = 32;

/// `y = x.transpose(perm)`: `y.shape[i] = in_shape[perm[i]]`.
///
/// After merging axes that stay adjacent, an innermost axis that is contiguous in the
/// input is copied as whole runs; otherwise the last two output axes are walked in
/// 32-element-square tiles so that both the reads and the writes reuse cache lines.
pub fn transpose(p: &Transpose, x: &[f32], y: &mut [f32]) {
    let rank = p.rank;
    assert!(rank <= MAX_RANK, "transpose: rank {rank}");
    let in_shape = &p.in_shape[..rank];
    let perm = &p.perm[..rank];
    let mut seen = [false; MAX_RANK];
    for &a in perm {
        assert!(
            a < rank && !seen[a],
            "transpose: {perm:?} is not a permutation"
        );
        seen[a] = true;
    }
    let len: usize = in_shape.iter().product();
    assert_eq!(x.len(), len, "transpose: X");
    assert_eq!(y.len(), len, "transpose: Y");
    if len == 0 {
        return;
    }
    let in_strides = contiguous_strides(in_shape);
    let mut out_shape = [0; MAX_RANK];
    let mut src_strides = [0; MAX_RANK];
    for (i, &a) in perm.iter().enumerate() {
        out_shape[i] = in_shape[a];
        src_strides[i] = in_strides[a];
    }
    let out_strides = contiguous_strides(&out_shape[..rank]);
    let l = Layout::new(
        &out_shape[..rank],
        [&src_strides[..rank], &out_strides[..rank]],
    );
    if l.rank == 0 || l.strides[0][l.rank - 1] == 1 {
        // Innermost runs are contiguous on both sides (rank 0: one element).
        let run = if l.rank == 0 { 1 } else { l.shape[l.rank - 1] };
        l.for_each(l.rank.saturating_sub(1), |[src, dst]| {
            y[dst..dst + run].copy_from_slice(&x[src..src + run]);
        });
        return;
    }
    if l.rank == 1 {
        let s = l.strides[0][0];
        for (d, &v) in y.iter_mut().zip(x.iter().step_by(s)) {
            *d = v;
        }
        return;
    }
    let (r, c) = (l.rank - 2, l.rank - 1);
    let (rows, cols) = (l.shape[r], l.shape[c]);
    let (src_r, src_c, dst_r) = (l.strides[0][r], l.strides[0][c], l.strides[1][r]);
    l.for_each(r, |[src, dst]| {
        for i0 in (0..rows).step_by(TILE) {
            for j0 in (0..cols).step_by(TILE) {
                for i in i0..(i0 + TILE).min(rows) {
                    let out = &mut y[dst + i * dst_r..][j0..(j0 + TILE).min(cols)];
                    let from = src + i * src_r + j0 * src_c;
                    for (j, d) in out.iter_mut().enumerate() {
                        *d = x[from + j * src_c];
                    }
                }
            }
        }
    });
}

pub fn copy(x: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), y.len(), "copy: X and Y differ in length");
    y.copy_from_slice(x);
}
