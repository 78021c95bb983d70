//! Data movement: strided copies (Transpose, Slice, Expand, Tile, Split,
//! DepthToSpace, ...), Concat, Pad and Trilu, plus the index walker every typed kernel
//! shares.

use super::params::{Concat, Pad, PadMode, RANK, Strided, Trilu};
use crate::Error;

/// An index space and `K` sets of signed element strides over it, simplified: size-1
/// dimensions are dropped and a dimension is merged into the next one when, in every
/// stride set, stepping it once is the same as running through the whole next one.
/// Merging only removes loop levels, so the row-major visiting order is unchanged and
/// a contiguous output can be written with a running counter. The rank is at least 1
/// (a scalar is one run of one element).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Walk<const K: usize> {
    rank: usize,
    shape: [usize; RANK],
    strides: [[isize; RANK]; K],
}

impl<const K: usize> Walk<K> {
    pub(crate) fn new(rank: usize, shape: &[usize; RANK], strides: [[isize; RANK]; K]) -> Self {
        let mut w = Walk {
            rank: 0,
            shape: [1; RANK],
            strides: [[0; RANK]; K],
        };
        for d in 0..rank.min(RANK) {
            let n = shape[d];
            if n == 1 {
                continue;
            }
            let r = w.rank;
            let merges = r > 0 && (0..K).all(|k| w.strides[k][r - 1] == strides[k][d] * n as isize);
            let slot = if merges {
                w.shape[r - 1] *= n;
                r - 1
            } else {
                w.shape[r] = n;
                w.rank += 1;
                r
            };
            for (ws, s) in w.strides.iter_mut().zip(&strides) {
                ws[slot] = s[d];
            }
        }
        w.rank = w.rank.max(1);
        w
    }

    /// The strides of the innermost dimension (the step within a run).
    pub(crate) fn inner(&self) -> [isize; K] {
        core::array::from_fn(|k| self.strides[k][self.rank - 1])
    }

    /// Number of elements visited.
    pub(crate) fn len(&self) -> usize {
        self.shape[..self.rank].iter().product()
    }

    /// Calls `f(offsets, n)` for every innermost run of `n` elements, in row-major
    /// order, with each stride set's offset of the run's first element (`base` plus
    /// the outer dimensions' contribution). Never calls `f` when the space is empty.
    #[inline(always)]
    pub(crate) fn for_each_run(&self, base: [isize; K], mut f: impl FnMut([isize; K], usize)) {
        if self.shape[..self.rank].contains(&0) {
            return;
        }
        let outer = self.rank - 1;
        let n = self.shape[outer];
        let mut idx = [0usize; RANK];
        let mut off = base;
        loop {
            f(off, n);
            // Advance the odometer over the outer dimensions, innermost first.
            let mut d = outer;
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
                    *o -= s[d] * self.shape[d] as isize;
                }
                idx[d] = 0;
            }
        }
    }
}

/// Row-major element strides of the first `rank` entries of `shape`, as `isize`.
pub(crate) fn contiguous(rank: usize, shape: &[usize; RANK]) -> [isize; RANK] {
    let mut s = [0isize; RANK];
    let mut step = 1isize;
    for d in (0..rank.min(RANK)).rev() {
        s[d] = step;
        step *= shape[d] as isize;
    }
    s
}

/// `usize` broadcast strides as the walker's signed ones.
pub(crate) fn signed(s: &[usize; RANK]) -> [isize; RANK] {
    s.map(|v| v as isize)
}

/// `out[i] = x[offset + Σ i_d · strides[d]]` over the contiguous output `shape`: one
/// kernel for every operator that only moves elements (Transpose, Slice with any
/// steps, Expand, Tile as a strided view of a reshaped output, Split,
/// DepthToSpace/SpaceToDepth). Innermost runs with stride 1, 0 or -1 become a slice
/// copy, a fill or a reversed copy.
///
/// The compiler guarantees every addressed index lies in `x`; the kernel still checks
/// the smallest and largest one at entry and returns `IndexOutOfRange` (writing
/// nothing) rather than panicking, as it does when `out` is not `shape`'s size.
pub fn copy_strided<T: Copy>(p: &Strided, x: &[T], out: &mut [T]) -> Result<(), Error> {
    let rank = p.rank.min(RANK);
    let total: usize = p.shape[..rank].iter().product();
    if out.len() != total {
        return Err(Error::IndexOutOfRange {
            index: total as i64,
            len: out.len(),
        });
    }
    if total == 0 {
        return Ok(());
    }
    let (mut lo, mut hi) = (p.offset as i128, p.offset as i128);
    for d in 0..rank {
        let span = (p.shape[d] - 1) as i128 * p.strides[d] as i128;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    if lo < 0 || hi >= x.len() as i128 {
        let index = if lo < 0 { lo } else { hi };
        return Err(Error::IndexOutOfRange {
            index: index.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            len: x.len(),
        });
    }
    let w = Walk::<1>::new(rank, &p.shape, [p.strides]);
    let [s] = w.inner();
    let mut o = 0;
    w.for_each_run([p.offset as isize], |[i], n| {
        let y = &mut out[o..o + n];
        o += n;
        let i = i as usize;
        match s {
            1 => y.copy_from_slice(&x[i..i + n]),
            0 => y.fill(x[i]),
            -1 => {
                for (y, &v) in y.iter_mut().zip(x[i + 1 - n..=i].iter().rev()) {
                    *y = v;
                }
            }
            _ => {
                for (j, y) in y.iter_mut().enumerate() {
                    *y = x[(i as isize + j as isize * s) as usize];
                }
            }
        }
    });
    Ok(())
}

/// Concatenation along an axis: the output is `outer` rows, each holding one chunk of
/// every input in order, where input `i`'s chunk is `inputs[i].len() / outer`
/// elements (its extent from the axis inward). Precondition: `out` holds the sum of the
/// inputs' lengths.
pub fn concat<T: Copy>(p: &Concat, inputs: &[&[T]], out: &mut [T]) {
    if p.outer == 0 {
        return;
    }
    let mut o = 0;
    for r in 0..p.outer {
        for x in inputs {
            let c = x.len() / p.outer;
            out[o..o + c].copy_from_slice(&x[r * c..(r + 1) * c]);
            o += c;
        }
    }
}

/// Where input position `i` (possibly outside `0..n`) reads from, or `None` for the
/// constant. Reflect and Wrap are periodic, like `np.pad` with pads wider than the
/// input.
fn pad_source(i: isize, n: usize, mode: PadMode) -> Option<usize> {
    if i >= 0 && (i as usize) < n {
        return Some(i as usize);
    }
    if n == 0 {
        return None;
    }
    let n = n as isize;
    match mode {
        PadMode::Constant => None,
        PadMode::Edge => Some(i.clamp(0, n - 1) as usize),
        PadMode::Wrap => Some(i.rem_euclid(n) as usize),
        PadMode::Reflect if n == 1 => Some(0),
        PadMode::Reflect => {
            let period = 2 * (n - 1);
            let m = i.rem_euclid(period);
            Some(if m < n { m } else { period - m } as usize)
        }
    }
}

/// ONNX Pad (opset 19 semantics, `np.pad`): output position `o` along dimension `d`
/// reads input position `o - begin[d]`; positions outside the input take `value[0]`
/// (zero when `value` is empty) in Constant mode, the mirrored position (edge not
/// repeated) in Reflect, the nearest edge in Edge and the periodic position in Wrap.
/// Negative `begin` (and a smaller `out_shape`) crop. Precondition: `x` and `out` hold
/// `in_shape` and `out_shape` elements.
pub fn pad<T: Copy + Default>(p: &Pad, x: &[T], value: &[T], out: &mut [T]) {
    let fill = value.first().copied().unwrap_or_default();
    let rank = p.rank.min(RANK);
    if out.is_empty() {
        return;
    }
    if rank == 0 {
        out[0] = x.first().copied().unwrap_or(fill);
        return;
    }
    let last = rank - 1;
    let in_strides = contiguous(rank, &p.in_shape);
    let (n_out, n_in, b) = (p.out_shape[last], p.in_shape[last], p.begin[last]);
    // Output positions of the last dimension that read the input directly.
    let lo = b.clamp(0, n_out as isize) as usize;
    let hi = (b + n_in as isize).clamp(0, n_out as isize) as usize;
    let rows: usize = p.out_shape[..last].iter().product();
    let mut idx = [0usize; RANK];
    for r in 0..rows {
        let y = &mut out[r * n_out..(r + 1) * n_out];
        // The input row this output row reads, if any.
        let mut base = Some(0usize);
        for d in 0..last {
            base = base.and_then(|s| {
                pad_source(idx[d] as isize - p.begin[d], p.in_shape[d], p.mode)
                    .map(|i| s + i * in_strides[d] as usize)
            });
        }
        match base {
            None => y.fill(fill),
            Some(base) => {
                let row = &x[base..base + n_in];
                for (o, y) in y.iter_mut().enumerate().take(lo) {
                    *y = pad_source(o as isize - b, n_in, p.mode).map_or(fill, |i| row[i]);
                }
                if hi > lo {
                    let start = (lo as isize - b) as usize;
                    y[lo..hi].copy_from_slice(&row[start..start + (hi - lo)]);
                }
                for (o, y) in y.iter_mut().enumerate().skip(hi.max(lo)) {
                    *y = pad_source(o as isize - b, n_in, p.mode).map_or(fill, |i| row[i]);
                }
            }
        }
        // Next output row (odometer over the outer dimensions).
        let mut d = last;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            if idx[d] < p.out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// ONNX Trilu over `batch` row-major matrices: `upper` keeps the elements with
/// `j - i >= k`, lower those with `j - i <= k`, and the rest become zero.
pub fn trilu<T: Copy + Default>(p: &Trilu, x: &[T], out: &mut [T]) {
    let (rows, cols) = (p.rows, p.cols);
    for m in 0..p.batch {
        for i in 0..rows {
            let at = (m * rows + i) * cols;
            let (src, dst) = (&x[at..at + cols], &mut out[at..at + cols]);
            let diag = i as i64 + p.k;
            let (lo, hi) = if p.upper {
                (diag.clamp(0, cols as i64) as usize, cols)
            } else {
                (0, (diag + 1).clamp(0, cols as i64) as usize)
            };
            dst.fill(T::default());
            dst[lo..hi.max(lo)].copy_from_slice(&src[lo..hi.max(lo)]);
        }
    }
}
