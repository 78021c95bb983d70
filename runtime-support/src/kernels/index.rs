//! Walking a multi-dimensional index space with several stride sets at once.
//!
//! Broadcasting, transposition and batched products all reduce to: simplify the shape
//! (drop unit dimensions, merge dimensions that are contiguous in every operand), then
//! visit the outer dimensions with an odometer and hand the innermost run to a tight
//! loop. Everything lives in fixed arrays of [`MAX_RANK`], so nothing allocates.

use crate::params::MAX_RANK;

/// A shape and `K` stride sets over it (element strides, one set per operand).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout<const K: usize> {
    pub rank: usize,
    pub shape: [usize; MAX_RANK],
    pub strides: [[usize; MAX_RANK]; K],
}

impl<const K: usize> Layout<K> {
    /// The simplest equivalent layout: dimensions of size 1 are dropped, and a dimension
    /// is merged into the one after it when, in every stride set, stepping it once is
    /// the same as running through the whole inner one. Merging only removes loop
    /// levels; offsets are unchanged, so callers may rely on the same element order.
    pub fn new(shape: &[usize], strides: [&[usize]; K]) -> Self {
        assert!(shape.len() <= MAX_RANK, "rank {} > {MAX_RANK}", shape.len());
        for s in strides {
            assert_eq!(s.len(), shape.len(), "one stride per dimension");
        }
        let mut dims = [1; MAX_RANK];
        dims[..shape.len()].copy_from_slice(shape);
        let mut sets = [[0; MAX_RANK]; K];
        for (set, s) in sets.iter_mut().zip(strides) {
            set[..s.len()].copy_from_slice(s);
        }
        Self::simplify(shape.len(), &dims, sets.each_ref())
    }

    /// [`Layout::new`] over the first `rank` entries of fixed arrays, usable in `const`
    /// code (the CUDA launch geometry simplifies at compile time with it).
    pub const fn simplify(
        rank: usize,
        shape: &[usize; MAX_RANK],
        strides: [&[usize; MAX_RANK]; K],
    ) -> Self {
        assert!(rank <= MAX_RANK, "rank over MAX_RANK");
        let mut out = Layout {
            rank: 0,
            shape: [1; MAX_RANK],
            strides: [[0; MAX_RANK]; K],
        };
        // `while` loops: `for` and iterator adapters are not allowed in `const fn`.
        let mut d = 0;
        while d < rank {
            if shape[d] != 1 {
                let r = out.rank;
                let mut merges = r > 0;
                let mut k = 0;
                while k < K {
                    if merges && out.strides[k][r - 1] != strides[k][d] * shape[d] {
                        merges = false;
                    }
                    k += 1;
                }
                let slot = if merges {
                    out.shape[r - 1] *= shape[d];
                    r - 1
                } else {
                    out.shape[r] = shape[d];
                    out.rank += 1;
                    r
                };
                let mut k = 0;
                while k < K {
                    out.strides[k][slot] = strides[k][d];
                    k += 1;
                }
            }
            d += 1;
        }
        out
    }

    /// Calls `f` with the `K` offsets of every index over the first `dims` dimensions,
    /// in row-major order (once, with zeros, when `dims` is 0; never when one of them
    /// is empty).
    #[inline(always)]
    pub fn for_each(&self, dims: usize, mut f: impl FnMut([usize; K])) {
        debug_assert!(dims <= self.rank);
        if self.shape[..dims].contains(&0) {
            return;
        }
        let mut idx = [0usize; MAX_RANK];
        let mut off = [0usize; K];
        loop {
            f(off);
            // Advance the odometer, innermost digit first.
            let mut d = dims;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                for (o, s) in off.iter_mut().zip(&self.strides) {
                    *o += s[d];
                }
                if idx[d] < self.shape[d] {
                    break;
                }
                for (o, s) in off.iter_mut().zip(&self.strides) {
                    *o -= s[d] * self.shape[d];
                }
                idx[d] = 0;
            }
        }
    }
}

/// Row-major (contiguous) strides of `shape`.
pub(crate) fn contiguous_strides(shape: &[usize]) -> [usize; MAX_RANK] {
    let mut strides = [0; MAX_RANK];
    let mut step = 1;
    for (s, &n) in strides[..shape.len()].iter_mut().zip(shape).rev() {
        *s = step;
        step *= n;
    }
    strides
}

/// Number of elements an operand with `strides` over `shape` spans: its length when
/// it is a contiguous tensor broadcast (stride 0) along some dimensions. `shape` must
/// not be empty (no zero dimension); callers return early for empty outputs.
pub(crate) fn extent(shape: &[usize], strides: &[usize]) -> usize {
    1 + shape
        .iter()
        .zip(strides)
        .map(|(&n, &s)| (n - 1) * s)
        .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_contiguous_and_drops_unit_dims() {
        let shape = [2, 1, 3, 4];
        let a = contiguous_strides(&shape);
        let b = [0, 0, 4, 1];
        let l = Layout::new(&shape, [&a[..4], &b[..]]);
        assert_eq!(l.rank, 2);
        assert_eq!(l.shape[..2], [2, 12]);
        assert_eq!(l.strides[0][..2], [12, 1]);
        assert_eq!(l.strides[1][..2], [0, 1]);
    }

    #[test]
    fn visits_in_row_major_order() {
        let l = Layout::new(&[2, 3], [&[3, 1], &[1, 2]]);
        let mut seen = [[0; 2]; 6];
        let mut i = 0;
        l.for_each(2, |o| {
            seen[i] = o;
            i += 1;
        });
        assert_eq!(i, 6);
        assert_eq!(seen, [[0, 0], [1, 2], [2, 4], [3, 1], [4, 3], [5, 5]]);
    }
}
