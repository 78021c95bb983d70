//! Index operators over any element type: Gather, GatherElements, GatherND,
//! ScatterElements, ScatterND, OneHot, TopK and EyeLike.
//!
//! Indices are data read at run time, so an index outside the axis it addresses is an
//! `Err(Error::IndexOutOfRange)` (ONNX leaves the result undefined), never a panic.
//! Negative indices count from the end of the axis, as in every ONNX index operator.
//! Shapes, on the other hand, were checked by the compiler; a slice of the wrong length
//! is a compiler bug and asserts. Nothing allocates: multi-dimensional walks use fixed
//! [`RANK`]-entry odometers, and TopK keeps its candidates in its own output buffers.

use super::elem::Elem;
use super::params::RANK;
use crate::Error;
use serde::Serialize;

/// An ONNX index element: `int32` or `int64`.
pub trait Index: Copy {
    /// The index as an `i64` (exact).
    fn index(self) -> i64;
}

impl Index for i32 {
    #[inline]
    fn index(self) -> i64 {
        self as i64
    }
}

impl Index for i64 {
    #[inline]
    fn index(self) -> i64 {
        self
    }
}

/// `i` as a position in an axis of `len` elements, counting from the end when negative.
#[inline]
fn resolve(i: i64, len: usize) -> Result<usize, Error> {
    let j = if i < 0 { i.wrapping_add(len as i64) } else { i };
    if (0..len as i64).contains(&j) {
        Ok(j as usize)
    } else {
        Err(Error::IndexOutOfRange { index: i, len })
    }
}

/// Row-major strides of the first `rank` entries of `shape`.
pub(super) fn strides_of(rank: usize, shape: &[usize; RANK]) -> [usize; RANK] {
    let mut s = [0; RANK];
    let mut step = 1;
    for d in (0..rank).rev() {
        s[d] = step;
        step *= shape[d];
    }
    s
}

fn volume(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// A row-major walk over `shape` that tracks one offset with its own `strides` (which
/// may differ from the shape's own: a smaller index tensor inside a larger data tensor,
/// or stride 0 on a dimension that is addressed separately).
pub(super) struct Odometer {
    rank: usize,
    shape: [usize; RANK],
    strides: [usize; RANK],
    idx: [usize; RANK],
    pub(super) off: usize,
}

impl Odometer {
    pub(super) fn new(rank: usize, shape: [usize; RANK], strides: [usize; RANK]) -> Self {
        Odometer {
            rank,
            shape,
            strides,
            idx: [0; RANK],
            off: 0,
        }
    }

    /// The current multi-index (`rank` entries).
    #[inline]
    pub(super) fn index(&self) -> &[usize] {
        &self.idx[..self.rank]
    }

    /// Moves to the next index (wrapping to all zeros after the last).
    #[inline]
    pub(super) fn advance(&mut self) {
        let mut d = self.rank;
        while d > 0 {
            d -= 1;
            self.idx[d] += 1;
            self.off += self.strides[d];
            if self.idx[d] < self.shape[d] {
                return;
            }
            self.off -= self.strides[d] * self.shape[d];
            self.idx[d] = 0;
        }
    }
}

/// Gather along one axis: `x` is `outer × axis_len × inner`, the output
/// `outer × idx.len() × inner` (the index tensor's shape replaces the axis).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Gather {
    pub outer: usize,
    pub axis_len: usize,
    pub inner: usize,
}

/// ONNX Gather (`np.take`): `out[o, j, i] = x[o, idx[j], i]`.
pub fn gather<T: Copy, I: Index>(
    p: &Gather,
    x: &[T],
    idx: &[I],
    out: &mut [T],
) -> Result<(), Error> {
    assert_eq!(x.len(), p.outer * p.axis_len * p.inner, "gather: X");
    assert_eq!(out.len(), p.outer * idx.len() * p.inner, "gather: Y");
    if out.is_empty() {
        return Ok(());
    }
    let block = p.axis_len * p.inner;
    for (o, out) in out.chunks_exact_mut(idx.len() * p.inner).enumerate() {
        let x = &x[o * block..(o + 1) * block];
        for (&i, out) in idx.iter().zip(out.chunks_exact_mut(p.inner)) {
            let k = resolve(i.index(), p.axis_len)?;
            out.copy_from_slice(&x[k * p.inner..(k + 1) * p.inner]);
        }
    }
    Ok(())
}

/// GatherElements over a `rank`-dimensional tensor; the output has the index shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GatherElements {
    pub rank: usize,
    pub data_shape: [usize; RANK],
    pub idx_shape: [usize; RANK],
    pub axis: usize,
}

/// Checks an element-wise index shape against the data shape: every dimension but the
/// axis must fit inside the data's. Returns the data strides with the axis zeroed (the
/// odometer's offset covers the other dimensions) and the axis stride.
fn elements_layout(
    what: &str,
    rank: usize,
    data_shape: &[usize; RANK],
    idx_shape: &[usize; RANK],
    axis: usize,
) -> ([usize; RANK], usize) {
    assert!(
        rank <= RANK && axis < rank,
        "{what}: rank {rank}, axis {axis}"
    );
    for d in 0..rank {
        assert!(
            d == axis || idx_shape[d] <= data_shape[d],
            "{what}: index dimension {d} exceeds the data's"
        );
    }
    let mut s = strides_of(rank, data_shape);
    let axis_stride = s[axis];
    s[axis] = 0;
    (s, axis_stride)
}

/// ONNX GatherElements: `out[u] = x[u with u[axis] = idx[u]]` for every index `u` of
/// the index tensor.
pub fn gather_elements<T: Copy, I: Index>(
    p: &GatherElements,
    x: &[T],
    idx: &[I],
    out: &mut [T],
) -> Result<(), Error> {
    let (strides, axis_stride) = elements_layout(
        "gather_elements",
        p.rank,
        &p.data_shape,
        &p.idx_shape,
        p.axis,
    );
    assert_eq!(
        x.len(),
        volume(&p.data_shape[..p.rank]),
        "gather_elements: X"
    );
    assert_eq!(
        idx.len(),
        volume(&p.idx_shape[..p.rank]),
        "gather_elements: indices"
    );
    assert_eq!(out.len(), idx.len(), "gather_elements: Y");
    let axis_len = p.data_shape[p.axis];
    let mut walk = Odometer::new(p.rank, p.idx_shape, strides);
    for (&i, out) in idx.iter().zip(out) {
        let k = resolve(i.index(), axis_len)?;
        *out = x[walk.off + k * axis_stride];
        walk.advance();
    }
    Ok(())
}

/// GatherND / ScatterND geometry shared by both: the index tensor's last dimension `m`
/// addresses the data dimensions `batch_dims .. batch_dims + m`; each index tuple
/// selects a slice of the remaining data dimensions.
struct NdLayout {
    /// Index tuples per batch.
    tuples: usize,
    /// Entries per index tuple.
    m: usize,
    /// Elements in the slice one tuple selects.
    slice: usize,
    /// Data elements per batch.
    batch_block: usize,
    /// Number of batches.
    batches: usize,
    data_strides: [usize; RANK],
}

fn nd_layout(
    what: &str,
    batch_dims: usize,
    data_rank: usize,
    data_shape: &[usize; RANK],
    idx_rank: usize,
    idx_shape: &[usize; RANK],
) -> NdLayout {
    assert!(
        data_rank <= RANK && (1..=RANK).contains(&idx_rank) && batch_dims < idx_rank,
        "{what}: ranks"
    );
    let m = idx_shape[idx_rank - 1];
    assert!(batch_dims + m <= data_rank, "{what}: index tuples too long");
    assert_eq!(
        idx_shape[..batch_dims],
        data_shape[..batch_dims],
        "{what}: batch dimensions"
    );
    NdLayout {
        tuples: volume(&idx_shape[batch_dims..idx_rank - 1]),
        m,
        slice: volume(&data_shape[batch_dims + m..data_rank]),
        batch_block: volume(&data_shape[batch_dims..data_rank]),
        batches: volume(&data_shape[..batch_dims]),
        data_strides: strides_of(data_rank, data_shape),
    }
}

impl NdLayout {
    /// Offset, within its batch, of the slice the tuple `t` selects.
    fn offset(
        &self,
        batch_dims: usize,
        data_shape: &[usize; RANK],
        t: &[i64],
    ) -> Result<usize, Error> {
        let mut off = 0;
        for (j, &i) in t.iter().enumerate() {
            let d = batch_dims + j;
            off += resolve(i, data_shape[d])? * self.data_strides[d];
        }
        Ok(off)
    }
}

/// GatherND with `batch_dims` leading dimensions shared by data and indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GatherNd {
    pub batch_dims: usize,
    pub data_rank: usize,
    pub data_shape: [usize; RANK],
    pub idx_rank: usize,
    pub idx_shape: [usize; RANK],
}

/// ONNX GatherND: for every batch and index tuple, copies the slice of `x` the tuple
/// selects; the output is `idx_shape[..idx_rank-1] ++ data_shape[batch_dims + m..]`.
pub fn gather_nd<T: Copy>(p: &GatherNd, x: &[T], idx: &[i64], out: &mut [T]) -> Result<(), Error> {
    let l = nd_layout(
        "gather_nd",
        p.batch_dims,
        p.data_rank,
        &p.data_shape,
        p.idx_rank,
        &p.idx_shape,
    );
    assert_eq!(x.len(), l.batches * l.batch_block, "gather_nd: X");
    assert_eq!(idx.len(), l.batches * l.tuples * l.m, "gather_nd: indices");
    assert_eq!(out.len(), l.batches * l.tuples * l.slice, "gather_nd: Y");
    if out.is_empty() {
        return Ok(());
    }
    for (n, out) in out.chunks_exact_mut(l.slice).enumerate() {
        let base = n / l.tuples * l.batch_block;
        let off = base + l.offset(p.batch_dims, &p.data_shape, &idx[n * l.m..(n + 1) * l.m])?;
        out.copy_from_slice(&x[off..off + l.slice]);
    }
    Ok(())
}

/// How a scatter combines an update with the value already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ScatterReduction {
    /// The update replaces the value (the last update to a position wins).
    None,
    Add,
    Mul,
    Max,
    Min,
}

/// `old` combined with `new`. `numpy_minmax`: Max/Min as `np.maximum`/`np.minimum`
/// (a NaN in either wins; ScatterND's reference), else as Python's `max`/`min`, which
/// keep `old` unless `new` compares greater/less (ScatterElements' reference).
#[inline]
fn combine<T: Elem>(r: ScatterReduction, old: T, new: T, numpy_minmax: bool) -> T {
    use super::params::BinaryOp;
    match r {
        ScatterReduction::None => new,
        ScatterReduction::Add => T::binary(BinaryOp::Add, old, new),
        ScatterReduction::Mul => T::binary(BinaryOp::Mul, old, new),
        ScatterReduction::Max if numpy_minmax => T::binary(BinaryOp::Max, old, new),
        ScatterReduction::Min if numpy_minmax => T::binary(BinaryOp::Min, old, new),
        ScatterReduction::Max => {
            if new > old {
                new
            } else {
                old
            }
        }
        ScatterReduction::Min => {
            if new < old {
                new
            } else {
                old
            }
        }
    }
}

/// ScatterElements over a `rank`-dimensional tensor; indices and updates share
/// `idx_shape`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ScatterElements {
    pub rank: usize,
    pub data_shape: [usize; RANK],
    pub idx_shape: [usize; RANK],
    pub axis: usize,
    pub reduction: ScatterReduction,
}

/// ONNX ScatterElements (and the deprecated Scatter): `out = data`, then for every
/// index `u` of the index tensor, in row-major order,
/// `out[u with u[axis] = idx[u]] = combine(that, updates[u])`. On an out-of-range index
/// the error is returned with `out` partly written.
pub fn scatter_elements<T: Elem, I: Index>(
    p: &ScatterElements,
    data: &[T],
    idx: &[I],
    updates: &[T],
    out: &mut [T],
) -> Result<(), Error> {
    let (strides, axis_stride) = elements_layout(
        "scatter_elements",
        p.rank,
        &p.data_shape,
        &p.idx_shape,
        p.axis,
    );
    assert_eq!(
        data.len(),
        volume(&p.data_shape[..p.rank]),
        "scatter_elements: data"
    );
    assert_eq!(
        idx.len(),
        volume(&p.idx_shape[..p.rank]),
        "scatter_elements: indices"
    );
    assert_eq!(updates.len(), idx.len(), "scatter_elements: updates");
    assert_eq!(out.len(), data.len(), "scatter_elements: Y");
    out.copy_from_slice(data);
    let axis_len = p.data_shape[p.axis];
    let mut walk = Odometer::new(p.rank, p.idx_shape, strides);
    for (&i, &u) in idx.iter().zip(updates) {
        let k = resolve(i.index(), axis_len)?;
        let o = &mut out[walk.off + k * axis_stride];
        *o = combine(p.reduction, *o, u, false);
        walk.advance();
    }
    Ok(())
}

/// ScatterND: index tuples of length `idx_shape[idx_rank - 1]` into `data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ScatterNd {
    pub data_rank: usize,
    pub data_shape: [usize; RANK],
    pub idx_rank: usize,
    pub idx_shape: [usize; RANK],
    pub reduction: ScatterReduction,
}

/// ONNX ScatterND: `out = data`, then for every index tuple in order, the slice it
/// selects is combined element-wise with the matching slice of `updates` (shape
/// `idx_shape[..idx_rank-1] ++ data_shape[m..]`). On an out-of-range index the error
/// is returned with `out` partly written.
pub fn scatter_nd<T: Elem>(
    p: &ScatterNd,
    data: &[T],
    idx: &[i64],
    updates: &[T],
    out: &mut [T],
) -> Result<(), Error> {
    let l = nd_layout(
        "scatter_nd",
        0,
        p.data_rank,
        &p.data_shape,
        p.idx_rank,
        &p.idx_shape,
    );
    assert_eq!(data.len(), l.batch_block, "scatter_nd: data");
    assert_eq!(idx.len(), l.tuples * l.m, "scatter_nd: indices");
    assert_eq!(updates.len(), l.tuples * l.slice, "scatter_nd: updates");
    assert_eq!(out.len(), data.len(), "scatter_nd: Y");
    out.copy_from_slice(data);
    if l.slice == 0 {
        return Ok(());
    }
    for (n, u) in updates.chunks_exact(l.slice).enumerate() {
        let off = l.offset(0, &p.data_shape, &idx[n * l.m..(n + 1) * l.m])?;
        for (o, &u) in out[off..off + l.slice].iter_mut().zip(u) {
            *o = combine(p.reduction, *o, u, true);
        }
    }
    Ok(())
}

/// OneHot: indices `outer × inner`, output `outer × depth × inner` (the new axis sits
/// where the ONNX `axis` attribute puts it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OneHot {
    pub outer: usize,
    pub depth: usize,
    pub inner: usize,
}

/// ONNX OneHot: `out[o, d, i] = values[1]` (on) where the index `indices[o, i]` (plus
/// `depth` when negative) equals `d`, else `values[0]` (off). Following the reference,
/// an index outside `[-depth, depth)`, or a float index that is not an integer, gives
/// an all-off row rather than an error. Indices may be of any numeric type.
pub fn one_hot<I: Elem, T: Copy>(
    p: &OneHot,
    indices: &[I],
    values: &[T],
    out: &mut [T],
) -> Result<(), Error> {
    assert_eq!(indices.len(), p.outer * p.inner, "one_hot: indices");
    assert_eq!(values.len(), 2, "one_hot: values");
    assert_eq!(out.len(), p.outer * p.depth * p.inner, "one_hot: Y");
    let (off, on) = (values[0], values[1]);
    out.fill(off);
    if p.inner == 0 || p.depth == 0 {
        return Ok(());
    }
    let depth = p.depth as i128;
    for (n, &i) in indices.iter().enumerate() {
        // Integers exactly (u64 included); floats only when integral.
        let v = if I::IS_FLOAT {
            let f = i.to_f64();
            if f.fract() != 0.0 || !f.is_finite() {
                continue;
            }
            f as i128
        } else {
            i.to_i128()
        };
        let v = if v < 0 { v + depth } else { v };
        if (0..depth).contains(&v) {
            let (o, inner) = (n / p.inner, n % p.inner);
            out[(o * p.depth + v as usize) * p.inner + inner] = on;
        }
    }
    Ok(())
}

/// TopK along an axis of `len` elements with `outer` rows before it and `inner` after;
/// both outputs are `outer × k × inner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TopK {
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    pub k: usize,
    pub largest: bool,
    /// ONNX leaves the order unspecified when false; the output is sorted either way
    /// (as in the reference).
    pub sorted: bool,
}

/// Whether `a` orders strictly after `b` with NaN above everything (NumPy's sort
/// order, which the reference's `lexsort` uses).
#[inline]
fn nan_greater<T: Elem>(a: T, b: T) -> bool {
    match (a.is_nan(), b.is_nan()) {
        (true, bnan) => !bnan,
        (false, true) => false,
        (false, false) => a > b,
    }
}

/// ONNX TopK: the `k` largest (or smallest) elements of every row along the axis and
/// their positions, best first. Like the reference: NaN counts as larger than every
/// number (first when `largest`, last otherwise), and equal values (`-0 == +0`, NaN
/// with NaN) come lower index first.
///
/// No scratch: the `k` candidates of a row live in the row's slots of `indices` as a
/// binary heap whose root is the worst candidate, then the heap is sorted in place,
/// `O(len · log k)` per row.
pub fn top_k<T: Elem>(p: &TopK, x: &[T], values: &mut [T], indices: &mut [i64]) {
    assert!(p.k <= p.len, "top_k: k {} > axis length {}", p.k, p.len);
    assert_eq!(x.len(), p.outer * p.len * p.inner, "top_k: X");
    assert_eq!(values.len(), p.outer * p.k * p.inner, "top_k: values");
    assert_eq!(indices.len(), values.len(), "top_k: indices");
    if values.is_empty() {
        return;
    }
    for o in 0..p.outer {
        for i in 0..p.inner {
            let row = |j: usize| x[(o * p.len + j) * p.inner + i];
            // `before(a, b)`: position `a` is output before position `b`.
            let before = |a: usize, b: usize| {
                let (va, vb) = (row(a), row(b));
                let (gt, lt) = if p.largest {
                    (nan_greater(va, vb), nan_greater(vb, va))
                } else {
                    (nan_greater(vb, va), nan_greater(va, vb))
                };
                gt || (!lt && a < b)
            };
            let base = o * p.k * p.inner + i;
            let slot = |h: usize| base + h * p.inner;
            let heap = &mut *indices;
            let get = |heap: &[i64], h: usize| heap[slot(h)] as usize;
            // Sift the element at `h` down a heap of `n` whose root is the worst.
            let sift = |heap: &mut [i64], mut h: usize, n: usize| loop {
                let (l, r) = (2 * h + 1, 2 * h + 2);
                let mut worst = h;
                if l < n && before(get(heap, worst), get(heap, l)) {
                    worst = l;
                }
                if r < n && before(get(heap, worst), get(heap, r)) {
                    worst = r;
                }
                if worst == h {
                    return;
                }
                heap.swap(slot(h), slot(worst));
                h = worst;
            };
            for (h, j) in (0..p.k).enumerate() {
                heap[slot(h)] = j as i64;
            }
            for h in (0..p.k / 2).rev() {
                sift(heap, h, p.k);
            }
            for j in p.k..p.len {
                if p.k > 0 && before(j, get(heap, 0)) {
                    heap[slot(0)] = j as i64;
                    sift(heap, 0, p.k);
                }
            }
            // Heap sort: the worst goes last, leaving the best at slot 0.
            for n in (1..p.k).rev() {
                heap.swap(slot(0), slot(n));
                sift(heap, 0, n);
            }
            for h in 0..p.k {
                values[slot(h)] = row(get(heap, h));
            }
        }
    }
}

/// EyeLike: a `rows × cols` output with ones on diagonal `k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EyeLike {
    pub rows: usize,
    pub cols: usize,
    /// 0 is the main diagonal, positive above it, negative below.
    pub k: i64,
}

/// ONNX EyeLike (`np.eye(rows, cols, k)`): one where `col - row == k`, zero elsewhere.
pub fn eye_like<T: Elem>(p: &EyeLike, out: &mut [T]) {
    assert_eq!(out.len(), p.rows * p.cols, "eye_like: Y");
    out.fill(T::zero());
    for r in 0..p.rows {
        let c = r as i64 + p.k;
        if (0..p.cols as i64).contains(&c) {
            out[r * p.cols + c as usize] = T::one();
        }
    }
}
