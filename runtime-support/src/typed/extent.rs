//! Kernels whose output extent depends on the data: each writes its outputs as a dense
//! row-major prefix of buffers sized for the planned upper bound and returns the actual
//! extent.
//!
//! NonZero, Compress, Unique, NonMaxSuppression and TopK with `k` read at run time.
//! Every kernel returns `Result<usize, Error>` (the extent along the data-dependent
//! axis), even the ones that cannot fail, so the compiler emits them uniformly. Output
//! buffers are capacity buffers: at least as long as the actual tensor needs (asserted),
//! written densely from the start, the tail left untouched. Shapes were checked by the
//! compiler and assert; what depends on run-time data is an `Err`. Nothing allocates:
//! sorting is `sort_unstable_by` with an index tie-break (as deterministic as a stable
//! sort) over the caller's scratch.

use super::elem::{Bool, Elem};
use super::index::{Odometer, top_k};
use super::params::{RANK, TopK};
use crate::Error;
use core::cmp::Ordering;
use serde::Serialize;

/// ONNX NonZero over a `rank`-dimensional tensor (`rank` 0 is a scalar).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NonZero {
    pub rank: usize,
    /// Entries past `rank` are 1.
    pub shape: [usize; RANK],
}

/// ONNX NonZero: the coordinates of the nonzero elements (NaN is nonzero, `-0` is
/// zero) in row-major order, as the `[rank, n]` matrix `out[..rank * n]` (row `r` holds
/// the `r`-th coordinate of every hit). Returns `n`. A scalar gives shape `[0, n]` and
/// writes nothing.
pub fn non_zero<T: Elem>(p: &NonZero, x: &[T], out: &mut [i64]) -> Result<usize, Error> {
    let rank = p.rank;
    assert!(rank <= RANK, "non_zero: rank {rank}");
    assert_eq!(x.len(), p.shape[..rank].iter().product(), "non_zero: X");
    let n = x.iter().filter(|v| v.is_nonzero()).count();
    assert!(
        out.len() >= rank * n,
        "non_zero: output holds {}, needs {}",
        out.len(),
        rank * n
    );
    if rank == 0 || n == 0 {
        return Ok(n);
    }
    let mut at = Odometer::new(rank, p.shape, [0; RANK]);
    let mut m = 0;
    for &v in x {
        if v.is_nonzero() {
            for (r, &c) in at.index().iter().enumerate() {
                out[r * n + m] = c as i64;
            }
            m += 1;
        }
        at.advance();
    }
    Ok(n)
}

/// ONNX Compress viewed as `[outer, len, inner]` around the axis (no axis: `outer = 1,
/// len = numel, inner = 1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Compress {
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
}

/// ONNX Compress (`np.compress`): keeps the positions `j` of the middle axis where
/// `condition[j]` is true; a condition shorter than the axis drops the rest. A longer
/// condition with a true entry at `j >= len` is `Err(IndexOutOfRange)`. Writes
/// `out[..outer * n * inner]` as `[outer, n, inner]` and returns `n`.
pub fn compress<T: Elem>(
    p: &Compress,
    x: &[T],
    condition: &[Bool],
    out: &mut [T],
) -> Result<usize, Error> {
    let (outer, len, inner) = (p.outer, p.len, p.inner);
    assert_eq!(x.len(), outer * len * inner, "compress: input");
    let m = condition.len().min(len);
    if let Some(j) = condition[m..].iter().position(|c| c.get()) {
        return Err(Error::IndexOutOfRange {
            index: (m + j) as i64,
            len,
        });
    }
    let cond = &condition[..m];
    let n = cond.iter().filter(|c| c.get()).count();
    let need = outer * n * inner;
    assert!(
        out.len() >= need,
        "compress: output holds {}, needs {need}",
        out.len()
    );
    if need == 0 {
        return Ok(n);
    }
    let mut w = 0;
    for o in 0..outer {
        for (j, _) in cond.iter().enumerate().filter(|(_, c)| c.get()) {
            let src = (o * len + j) * inner;
            out[w..w + inner].copy_from_slice(&x[src..src + inner]);
            w += inner;
        }
    }
    Ok(n)
}

/// ONNX Unique over the `len` slices `x[o, j, i]` (fixed `j`) of `[outer, len, inner]`
/// (no axis: `outer = 1, len = numel, inner = 1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Unique {
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    /// Ascending order; else the order of first occurrence.
    pub sorted: bool,
}

/// The `i64` scratch elements [`unique`] needs for an axis of `len` items.
pub const fn unique_scratch_len(len: usize) -> usize {
    len
}

/// NumPy's sort order: `-0 == +0`, NaN equal to NaN and above every number.
#[inline]
fn total_cmp<T: Elem>(a: T, b: T) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// ONNX Unique (opset 11, as the reference's `np.unique`): the distinct items, each a
/// slice `x[.., j, ..]` compared element by element in `(o, i)` order under NumPy's
/// order (`-0 == +0`, NaN equal to NaN and above every number). Returns `n`, the number
/// of distinct items, and writes:
/// - `y[..outer * n * inner]`: the items as `[outer, n, inner]`, each copied from its
///   first occurrence;
/// - `indices[..n]`: the first occurrence of each;
/// - `inverse_indices[..len]`: for every `j`, its item's position in `y`;
/// - `counts[..n]`: how often each occurs.
///
/// `sorted`: items ascending (lexicographically); else in order of first occurrence.
/// `scratch` holds [`unique_scratch_len`]`(len)` elements.
#[allow(clippy::too_many_arguments)]
pub fn unique<T: Elem>(
    p: &Unique,
    x: &[T],
    y: &mut [T],
    indices: &mut [i64],
    inverse_indices: &mut [i64],
    counts: &mut [i64],
    scratch: &mut [i64],
) -> Result<usize, Error> {
    let (outer, len, inner) = (p.outer, p.len, p.inner);
    assert_eq!(x.len(), outer * len * inner, "unique: X");
    assert!(
        inverse_indices.len() >= len,
        "unique: inverse_indices holds {}, needs {len}",
        inverse_indices.len()
    );
    assert!(
        scratch.len() >= unique_scratch_len(len),
        "unique: scratch holds {}, needs {}",
        scratch.len(),
        unique_scratch_len(len)
    );
    if len == 0 {
        return Ok(0);
    }
    let cmp_items = |a: usize, b: usize| {
        for o in 0..outer {
            let (ra, rb) = ((o * len + a) * inner, (o * len + b) * inner);
            for i in 0..inner {
                match total_cmp(x[ra + i], x[rb + i]) {
                    Ordering::Equal => {}
                    ord => return ord,
                }
            }
        }
        Ordering::Equal
    };
    // Items in ascending order, equal items by position (so a run starts at its first
    // occurrence).
    let perm = &mut scratch[..len];
    for (j, s) in perm.iter_mut().enumerate() {
        *s = j as i64;
    }
    perm.sort_unstable_by(|&a, &b| cmp_items(a as usize, b as usize).then(a.cmp(&b)));
    // `inverse_indices[j]`: the rank of `j`'s run in sorted order.
    let inverse = &mut inverse_indices[..len];
    let mut n = 0;
    let mut r = 0;
    while r < len {
        let first = perm[r] as usize;
        let mut e = r + 1;
        while e < len && cmp_items(first, perm[e] as usize) == Ordering::Equal {
            e += 1;
        }
        for &j in &perm[r..e] {
            inverse[j as usize] = n as i64;
        }
        n += 1;
        r = e;
    }
    if !p.sorted {
        // Renumber the runs by first occurrence; `perm` is free now.
        let map = &mut scratch[..n];
        map.fill(-1);
        let mut next = 0;
        for g in inverse.iter_mut() {
            let m = &mut map[*g as usize];
            if *m < 0 {
                *m = next;
                next += 1;
            }
            *g = *m;
        }
    }
    assert!(
        indices.len() >= n && counts.len() >= n,
        "unique: indices/counts hold {}/{}, need {n}",
        indices.len(),
        counts.len()
    );
    assert!(
        y.len() >= outer * n * inner,
        "unique: Y holds {}, needs {}",
        y.len(),
        outer * n * inner
    );
    let counts = &mut counts[..n];
    counts.fill(0);
    for (j, &g) in inverse.iter().enumerate() {
        let g = g as usize;
        if counts[g] == 0 {
            indices[g] = j as i64;
        }
        counts[g] += 1;
    }
    if inner > 0 {
        for o in 0..outer {
            for (g, &j) in indices[..n].iter().enumerate() {
                let src = (o * len + j as usize) * inner;
                let dst = (o * n + g) * inner;
                y[dst..dst + inner].copy_from_slice(&x[src..src + inner]);
            }
        }
    }
    Ok(n)
}

/// ONNX NonMaxSuppression: `boxes` is `[batches, boxes, 4]`, `scores` is
/// `[batches, classes, boxes]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NonMaxSuppression {
    pub batches: usize,
    pub classes: usize,
    pub boxes: usize,
    /// Boxes are `[x_center, y_center, width, height]`; else `[y1, x1, y2, x2]`, any two
    /// opposite corners.
    pub center_point_box: bool,
    /// The model gives `score_threshold`; without it no box is filtered by score.
    pub has_score_threshold: bool,
}

/// The `i64` scratch elements [`non_max_suppression`] needs for `boxes` boxes: one
/// class's candidates in score order, then the boxes it selected.
pub const fn nms_scratch_len(boxes: usize) -> usize {
    2 * boxes
}

/// Python's `max(a, b)`: `a` unless `b > a`.
#[inline]
fn py_max(a: f32, b: f32) -> f32 {
    if b > a { b } else { a }
}

/// Python's `min(a, b)`: `a` unless `b < a`.
#[inline]
fn py_min(a: f32, b: f32) -> f32 {
    if b < a { b } else { a }
}

/// The reference's `max_min`: `(min, max)` of two coordinates.
#[inline]
fn min_max(l: f32, r: f32) -> (f32, f32) {
    if l >= r { (r, l) } else { (l, r) }
}

/// The reference's `suppress_by_iou`, step by step in `f32`: whether the candidate
/// box `a` overlaps the selected box `b` with IoU strictly above `threshold`.
fn suppress_by_iou(a: &[f32], b: &[f32], center: bool, threshold: f32) -> bool {
    let (ax0, ax1, bx0, bx1, ay0, ay1, by0, by1);
    if !center {
        (ax0, ax1) = min_max(a[1], a[3]);
        (bx0, bx1) = min_max(b[1], b[3]);
        (ay0, ay1) = min_max(a[0], a[2]);
        (by0, by1) = min_max(b[0], b[2]);
    } else {
        let (aw, ah, bw, bh) = (a[2] / 2.0, a[3] / 2.0, b[2] / 2.0, b[3] / 2.0);
        (ax0, ax1) = (a[0] - aw, a[0] + aw);
        (bx0, bx1) = (b[0] - bw, b[0] + bw);
        (ay0, ay1) = (a[1] - ah, a[1] + ah);
        (by0, by1) = (b[1] - bh, b[1] + bh);
    }
    let (ix0, ix1) = (py_max(ax0, bx0), py_min(ax1, bx1));
    if ix1 <= ix0 {
        return false;
    }
    let (iy0, iy1) = (py_max(ay0, by0), py_min(ay1, by1));
    if iy1 <= iy0 {
        return false;
    }
    let inter = (ix1 - ix0) * (iy1 - iy0);
    if inter <= 0.0 {
        return false;
    }
    let area_a = (ax1 - ax0) * (ay1 - ay0);
    let area_b = (bx1 - bx0) * (by1 - by0);
    let union = area_a + area_b - inter;
    if area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > threshold
}

/// ONNX NonMaxSuppression, exactly as the reference implementation: per batch and
/// class, the candidates (every box, or with a score threshold those scoring strictly
/// above it) in descending score order, equal scores lower box index first (NaN scores
/// last); a candidate is selected unless its IoU with a box already selected for the
/// class is strictly above `iou_threshold`, until `max_output_boxes_per_class` are
/// selected (0 or negative: none). Writes the `(batch, class, box)` triples in
/// `selected[..3 * n]` as `[n, 3]` (batch, then class, then selection order) and
/// returns `n`. The three scalar inputs are 1-element slices; `scratch` holds
/// [`nms_scratch_len`]`(boxes)` elements.
#[allow(clippy::too_many_arguments)]
pub fn non_max_suppression(
    p: &NonMaxSuppression,
    boxes: &[f32],
    scores: &[f32],
    max_output_boxes_per_class: &[i64],
    iou_threshold: &[f32],
    score_threshold: &[f32],
    selected: &mut [i64],
    scratch: &mut [i64],
) -> Result<usize, Error> {
    let nb = p.boxes;
    assert_eq!(
        boxes.len(),
        p.batches * nb * 4,
        "non_max_suppression: boxes"
    );
    assert_eq!(
        scores.len(),
        p.batches * p.classes * nb,
        "non_max_suppression: scores"
    );
    assert_eq!(
        max_output_boxes_per_class.len(),
        1,
        "non_max_suppression: max_output"
    );
    assert_eq!(iou_threshold.len(), 1, "non_max_suppression: iou_threshold");
    assert_eq!(
        score_threshold.len(),
        1,
        "non_max_suppression: score_threshold"
    );
    assert!(
        scratch.len() >= nms_scratch_len(nb),
        "non_max_suppression: scratch holds {}, needs {}",
        scratch.len(),
        nms_scratch_len(nb)
    );
    let max_out = usize::try_from(max_output_boxes_per_class[0].max(0)).unwrap_or(usize::MAX);
    let limit = max_out.min(nb);
    if limit == 0 {
        return Ok(0);
    }
    let (iou_t, score_t) = (iou_threshold[0], score_threshold[0]);
    let (cand, chosen) = scratch[..2 * nb].split_at_mut(nb);
    let mut n = 0;
    for b in 0..p.batches {
        let bx = &boxes[b * nb * 4..(b + 1) * nb * 4];
        let bx = |i: i64| &bx[i as usize * 4..i as usize * 4 + 4];
        for c in 0..p.classes {
            let sc = &scores[(b * p.classes + c) * nb..][..nb];
            let mut nc = 0;
            for (i, &s) in sc.iter().enumerate() {
                if !p.has_score_threshold || s > score_t {
                    cand[nc] = i as i64;
                    nc += 1;
                }
            }
            let cand = &mut cand[..nc];
            cand.sort_unstable_by(|&i, &j| {
                let (si, sj) = (sc[i as usize], sc[j as usize]);
                // Descending, NaN last, then by box index.
                si.is_nan()
                    .cmp(&sj.is_nan())
                    .then_with(|| sj.partial_cmp(&si).unwrap_or(Ordering::Equal))
                    .then(i.cmp(&j))
            });
            let mut ns = 0;
            for &i in cand.iter() {
                if ns == limit {
                    break;
                }
                let a = bx(i);
                if chosen[..ns]
                    .iter()
                    .any(|&s| suppress_by_iou(a, bx(s), p.center_point_box, iou_t))
                {
                    continue;
                }
                chosen[ns] = i;
                ns += 1;
                assert!(
                    selected.len() >= 3 * (n + 1),
                    "non_max_suppression: output holds {}, needs at least {}",
                    selected.len(),
                    3 * (n + 1)
                );
                selected[3 * n..3 * n + 3].copy_from_slice(&[b as i64, c as i64, i]);
                n += 1;
            }
        }
    }
    Ok(n)
}

/// ONNX TopK (opset 10+) with `k` read at run time from a 1-element input; `p.k` is
/// ignored. `k` outside `0..=len` is `Err(ExtentOutOfRange)`. Writes
/// `values[..outer * k * inner]` and `indices[..]` alike as `[outer, k, inner]`
/// (exactly [`top_k`]) and returns `k`.
pub fn top_k_dynamic<T: Elem>(
    p: &TopK,
    x: &[T],
    k: &[i64],
    values: &mut [T],
    indices: &mut [i64],
) -> Result<usize, Error> {
    assert_eq!(k.len(), 1, "top_k_dynamic: K");
    let kv = k[0];
    let k = match usize::try_from(kv) {
        Ok(k) if k <= p.len => k,
        _ => {
            return Err(Error::ExtentOutOfRange {
                what: "TopK's k",
                value: kv,
                max: p.len,
            });
        }
    };
    let need = p.outer * k * p.inner;
    assert!(
        values.len() >= need && indices.len() >= need,
        "top_k_dynamic: values/indices hold {}/{}, need {need}",
        values.len(),
        indices.len()
    );
    top_k(
        &TopK { k, ..*p },
        x,
        &mut values[..need],
        &mut indices[..need],
    );
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    const S: i64 = -7;

    fn shape(dims: &[usize]) -> [usize; RANK] {
        let mut s = [1; RANK];
        s[..dims.len()].copy_from_slice(dims);
        s
    }

    fn bools(v: &[u8]) -> Vec<Bool> {
        v.iter().map(|&b| Bool(b)).collect()
    }

    // ---- NonZero ----

    #[test]
    fn non_zero_onnx_example() {
        // onnx backend test nonzero.py: [[1, 0], [1, 1]] -> [[0, 1, 1], [0, 0, 1]].
        let p = NonZero {
            rank: 2,
            shape: shape(&[2, 2]),
        };
        let x = bools(&[1, 0, 1, 1]);
        let mut out = [S; 10];
        assert_eq!(non_zero(&p, &x, &mut out).unwrap(), 3);
        assert_eq!(out[..6], [0, 1, 1, 0, 0, 1]);
        assert!(out[6..].iter().all(|&v| v == S), "tail untouched");
    }

    #[test]
    fn non_zero_3d_nan_and_negative_zero() {
        // np.nonzero of [[[0, NaN, -0.]], [[2, 0, 3]]] (shape [2, 1, 3]): NaN is nonzero,
        // -0 is zero; hits at (0,0,1), (1,0,0), (1,0,2).
        let p = NonZero {
            rank: 3,
            shape: shape(&[2, 1, 3]),
        };
        let x = [0.0f32, f32::NAN, -0.0, 2.0, 0.0, 3.0];
        let mut out = [S; 9];
        assert_eq!(non_zero(&p, &x, &mut out).unwrap(), 3);
        assert_eq!(out, [0, 1, 1, 0, 0, 0, 1, 0, 2]);
    }

    #[test]
    fn non_zero_scalar_and_empty() {
        // The reference: a scalar gives np.empty((0, count_nonzero(x))).
        let p = NonZero {
            rank: 0,
            shape: shape(&[]),
        };
        let mut out = [S; 2];
        assert_eq!(non_zero(&p, &[5i32], &mut out).unwrap(), 1);
        assert_eq!(non_zero(&p, &[0i32], &mut out).unwrap(), 0);
        assert_eq!(out, [S, S]);
        // All zeros: shape [rank, 0], nothing written.
        let p = NonZero {
            rank: 2,
            shape: shape(&[2, 3]),
        };
        let mut out = [S; 12];
        assert_eq!(non_zero(&p, &[0i64; 6], &mut out).unwrap(), 0);
        assert!(out.iter().all(|&v| v == S));
        assert_eq!(non_zero(&p, &[0i64; 6], &mut []).unwrap(), 0);
    }

    #[test]
    #[should_panic(expected = "non_zero: output holds")]
    fn non_zero_capacity_asserts() {
        let p = NonZero {
            rank: 1,
            shape: shape(&[3]),
        };
        let _ = non_zero(&p, &[1u8, 1, 1], &mut [0; 2]);
    }

    // ---- Compress ----

    const CX: [f32; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];

    #[test]
    fn compress_onnx_cases() {
        // onnx backend test compress.py, input [[1, 2], [3, 4], [5, 6]].
        // compress_0: axis 0, condition [0, 1, 1] -> [[3, 4], [5, 6]].
        let mut out = [-1.0f32; 8];
        let p0 = Compress {
            outer: 1,
            len: 3,
            inner: 2,
        };
        assert_eq!(compress(&p0, &CX, &bools(&[0, 1, 1]), &mut out).unwrap(), 2);
        assert_eq!(out, [3.0, 4.0, 5.0, 6.0, -1.0, -1.0, -1.0, -1.0]);
        // compress_1 / compress_negative_axis: axis 1 (-1), condition [0, 1] -> [[2], [4], [6]].
        let p1 = Compress {
            outer: 3,
            len: 2,
            inner: 1,
        };
        let mut out = [-1.0f32; 6];
        assert_eq!(compress(&p1, &CX, &bools(&[0, 1]), &mut out).unwrap(), 1);
        assert_eq!(out[..3], [2.0, 4.0, 6.0]);
        assert_eq!(out[3..], [-1.0; 3]);
        // compress_default_axis: flattened, condition [0, 1, 0, 0, 1] -> [2, 5].
        let pf = Compress {
            outer: 1,
            len: 6,
            inner: 1,
        };
        let mut out = [-1.0f32; 6];
        assert_eq!(
            compress(&pf, &CX, &bools(&[0, 1, 0, 0, 1]), &mut out).unwrap(),
            2
        );
        assert_eq!(out[..2], [2.0, 5.0]);
        // compress_bfloat16: compress_0 in bfloat16.
        let xb: Vec<bf16> = CX.iter().map(|&v| bf16::from_f32(v)).collect();
        let mut out = [bf16::ZERO; 6];
        assert_eq!(compress(&p0, &xb, &bools(&[0, 1, 1]), &mut out).unwrap(), 2);
        let want: Vec<bf16> = [3.0, 4.0, 5.0, 6.0, 0.0, 0.0]
            .iter()
            .map(|&v| bf16::from_f32(v))
            .collect();
        assert_eq!(out[..], want[..]);
    }

    #[test]
    fn compress_condition_length() {
        let p0 = Compress {
            outer: 1,
            len: 3,
            inner: 2,
        };
        // np.compress([0, 1], x, axis=0) -> [[3, 4]]: a short condition drops the rest.
        let mut out = [0.0f32; 6];
        assert_eq!(compress(&p0, &CX, &bools(&[0, 1]), &mut out).unwrap(), 1);
        assert_eq!(out[..2], [3.0, 4.0]);
        // np.compress([1, 0, 0, 0], x, axis=0) -> [[1, 2]]: false entries past the axis are fine.
        assert_eq!(
            compress(&p0, &CX, &bools(&[1, 0, 0, 0]), &mut out).unwrap(),
            1
        );
        assert_eq!(out[..2], [1.0, 2.0]);
        // np.compress([0, 1, 1, 1], x, axis=0) raises "index 3 is out of bounds ... size 3".
        let mut out = [-1.0f32; 6];
        match compress(&p0, &CX, &bools(&[0, 1, 1, 1]), &mut out) {
            Err(Error::IndexOutOfRange { index: 3, len: 3 }) => {}
            r => panic!("expected IndexOutOfRange, got {r:?}"),
        }
        assert_eq!(out, [-1.0; 6], "nothing written on error");
        // All false: n = 0, nothing written.
        assert_eq!(compress(&p0, &CX, &bools(&[0, 0, 0]), &mut out).unwrap(), 0);
        assert_eq!(compress(&p0, &CX, &[], &mut []).unwrap(), 0);
        assert_eq!(out, [-1.0; 6]);
    }

    // ---- Unique ----

    struct UniqueOut<T> {
        n: usize,
        y: Vec<T>,
        indices: Vec<i64>,
        inverse: Vec<i64>,
        counts: Vec<i64>,
    }

    /// Runs `unique` with capacity for the worst case plus 2, checks the tails kept
    /// their sentinels, and returns the actual outputs.
    fn run_unique<T: Elem>(p: Unique, x: &[T], sentinel: T) -> UniqueOut<T> {
        let mut y = vec![sentinel; x.len() + 2 * p.outer * p.inner];
        let mut indices = vec![S; p.len + 2];
        let mut inverse = vec![S; p.len + 2];
        let mut counts = vec![S; p.len + 2];
        let mut scratch = vec![0; unique_scratch_len(p.len)];
        let n = unique(
            &p,
            x,
            &mut y,
            &mut indices,
            &mut inverse,
            &mut counts,
            &mut scratch,
        )
        .unwrap();
        let ny = p.outer * n * p.inner;
        assert!(y[ny..].iter().all(|v| v.to_bits_eq(sentinel)), "Y tail");
        assert!(indices[n..].iter().all(|&v| v == S), "indices tail");
        assert!(inverse[p.len..].iter().all(|&v| v == S), "inverse tail");
        assert!(counts[n..].iter().all(|&v| v == S), "counts tail");
        UniqueOut {
            n,
            y: y[..ny].to_vec(),
            indices: indices[..n].to_vec(),
            inverse: inverse[..p.len].to_vec(),
            counts: counts[..n].to_vec(),
        }
    }

    trait BitsEq {
        fn to_bits_eq(&self, other: Self) -> bool;
    }

    impl<T: Elem> BitsEq for T {
        fn to_bits_eq(&self, other: T) -> bool {
            bytemuck::bytes_of(self) == bytemuck::bytes_of(&other)
        }
    }

    fn flat(len: usize, sorted: bool) -> Unique {
        Unique {
            outer: 1,
            len,
            inner: 1,
            sorted,
        }
    }

    #[test]
    fn unique_doc_example_1_not_sorted() {
        // ONNX Unique doc, example 1 (also backend test unique_not_sorted_without_axis).
        let r = run_unique(flat(6, false), &[2.0f32, 1.0, 1.0, 3.0, 4.0, 3.0], -1.0);
        assert_eq!(r.n, 4);
        assert_eq!(r.y, [2.0, 1.0, 3.0, 4.0]);
        assert_eq!(r.indices, [0, 1, 3, 4]);
        assert_eq!(r.inverse, [0, 1, 1, 2, 3, 2]);
        assert_eq!(r.counts, [1, 2, 2, 1]);
    }

    #[test]
    fn unique_sorted_without_axis() {
        // Backend test unique_sorted_without_axis: np.unique([2, 1, 1, 3, 4, 3]) ->
        // y [1, 2, 3, 4], indices [1, 0, 3, 4], inverse [1, 0, 0, 2, 3, 2], counts [2, 1, 2, 1].
        let r = run_unique(flat(6, true), &[2.0f32, 1.0, 1.0, 3.0, 4.0, 3.0], -1.0);
        assert_eq!(r.n, 4);
        assert_eq!(r.y, [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(r.indices, [1, 0, 3, 4]);
        assert_eq!(r.inverse, [1, 0, 0, 2, 3, 2]);
        assert_eq!(r.counts, [2, 1, 2, 1]);
    }

    #[test]
    fn unique_doc_example_2_flattened() {
        // ONNX Unique doc, example 2: [[1, 3], [2, 3]], sorted, no axis.
        let r = run_unique(flat(4, true), &[1i32, 3, 2, 3], -1);
        assert_eq!(r.n, 3);
        assert_eq!(r.y, [1, 2, 3]);
        assert_eq!(r.indices, [0, 2, 1]);
        assert_eq!(r.inverse, [0, 2, 1, 2]);
        assert_eq!(r.counts, [1, 1, 2]);
    }

    #[test]
    fn unique_doc_example_3_axis_0() {
        // ONNX Unique doc, example 3 (backend test unique_sorted_with_axis).
        let p = Unique {
            outer: 1,
            len: 3,
            inner: 3,
            sorted: true,
        };
        let x = [1.0f32, 0.0, 0.0, 1.0, 0.0, 0.0, 2.0, 3.0, 4.0];
        let r = run_unique(p, &x, -1.0);
        assert_eq!(r.n, 2);
        assert_eq!(r.y, [1.0, 0.0, 0.0, 2.0, 3.0, 4.0]);
        assert_eq!(r.indices, [0, 2]);
        assert_eq!(r.inverse, [0, 0, 1]);
        assert_eq!(r.counts, [2, 1]);
    }

    #[test]
    fn unique_doc_example_4_axis_1_3d() {
        // ONNX Unique doc, example 4 (backend test unique_sorted_with_axis_3d): x of
        // shape [2, 4, 2], axis 1.
        let p = Unique {
            outer: 2,
            len: 4,
            inner: 2,
            sorted: true,
        };
        let x = [
            1.0f32, 1.0, 0.0, 1.0, 2.0, 1.0, 0.0, 1.0, //
            1.0, 1.0, 0.0, 1.0, 2.0, 1.0, 0.0, 1.0,
        ];
        let r = run_unique(p, &x, -1.0);
        assert_eq!(r.n, 3);
        assert_eq!(
            r.y,
            [0.0, 1.0, 1.0, 1.0, 2.0, 1.0, 0.0, 1.0, 1.0, 1.0, 2.0, 1.0]
        );
        assert_eq!(r.indices, [1, 0, 2]);
        assert_eq!(r.inverse, [1, 0, 2, 0]);
        assert_eq!(r.counts, [2, 1, 1]);
        // Not sorted (the reference reorders np.unique's result by first occurrence):
        // items in order j = 0, 1, 2.
        let r = run_unique(Unique { sorted: false, ..p }, &x, -1.0);
        assert_eq!(r.n, 3);
        assert_eq!(
            r.y,
            [1.0, 1.0, 0.0, 1.0, 2.0, 1.0, 1.0, 1.0, 0.0, 1.0, 2.0, 1.0]
        );
        assert_eq!(r.indices, [0, 1, 2]);
        assert_eq!(r.inverse, [0, 1, 2, 1]);
        assert_eq!(r.counts, [1, 2, 1]);
    }

    #[test]
    fn unique_negative_axis_and_length_1() {
        // Backend test unique_sorted_with_negative_axis: [[1, 0, 0], [1, 0, 0], [2, 3, 3]],
        // axis -1 -> y [[0, 1], [0, 1], [3, 2]], indices [1, 0], inverse [1, 0, 0], counts [2, 1].
        let p = Unique {
            outer: 3,
            len: 3,
            inner: 1,
            sorted: true,
        };
        let x = [1.0f32, 0.0, 0.0, 1.0, 0.0, 0.0, 2.0, 3.0, 3.0];
        let r = run_unique(p, &x, -1.0);
        assert_eq!(r.n, 2);
        assert_eq!(r.y, [0.0, 1.0, 0.0, 1.0, 3.0, 2.0]);
        assert_eq!(r.indices, [1, 0]);
        assert_eq!(r.inverse, [1, 0, 0]);
        assert_eq!(r.counts, [2, 1]);
        // Backend test unique_length_1: [0] (int64) -> [0], [0], [0], [1].
        let r = run_unique(flat(1, true), &[0i64], -1);
        assert_eq!((r.n, r.y, r.indices), (1, vec![0], vec![0]));
        assert_eq!((r.inverse, r.counts), (vec![0], vec![1]));
    }

    #[test]
    fn unique_nan_and_signed_zero() {
        // NumPy 2.4: np.unique([nan, 1, nan, -0., 0., 1, 3], True, True, True) ->
        // y [-0., 1, 3, nan], indices [3, 1, 6, 0], inverse [3, 1, 3, 0, 0, 1, 2],
        // counts [2, 2, 1, 2].
        let x = [f32::NAN, 1.0, f32::NAN, -0.0, 0.0, 1.0, 3.0];
        let r = run_unique(flat(7, true), &x, -1.0);
        assert_eq!(r.n, 4);
        assert_eq!(r.y[0].to_bits(), (-0.0f32).to_bits());
        assert_eq!(r.y[1..3], [1.0, 3.0]);
        assert!(r.y[3].is_nan());
        assert_eq!(r.indices, [3, 1, 6, 0]);
        assert_eq!(r.inverse, [3, 1, 3, 0, 0, 1, 2]);
        assert_eq!(r.counts, [2, 2, 1, 2]);
        // sorted=0: the reference's reordering by first occurrence of the above.
        let r = run_unique(flat(7, false), &x, -1.0);
        assert_eq!(r.n, 4);
        assert!(r.y[0].is_nan());
        assert_eq!(r.y[1], 1.0);
        assert_eq!(r.y[2].to_bits(), (-0.0f32).to_bits());
        assert_eq!(r.y[3], 3.0);
        assert_eq!(r.indices, [0, 1, 3, 6]);
        assert_eq!(r.inverse, [0, 1, 0, 2, 2, 1, 3]);
        assert_eq!(r.counts, [2, 2, 2, 1]);
    }

    #[test]
    fn unique_empty_and_bool() {
        let r = run_unique(flat(0, true), &[] as &[f32], -1.0);
        assert_eq!(r.n, 0);
        assert!(r.y.is_empty() && r.indices.is_empty() && r.inverse.is_empty());
        // np.unique([True, False, True]) -> [False, True], indices [1, 0], inverse [1, 0, 1].
        let r = run_unique(flat(3, true), &bools(&[1, 0, 1]), Bool(9));
        assert_eq!(r.y, [Bool::FALSE, Bool::TRUE]);
        assert_eq!(r.indices, [1, 0]);
        assert_eq!(r.inverse, [1, 0, 1]);
        assert_eq!(r.counts, [1, 2]);
    }

    // ---- NonMaxSuppression ----

    /// The boxes of most of onnx's nonmaxsuppression.py cases.
    const NMS_BOXES: [f32; 24] = [
        0.0, 0.0, 1.0, 1.0, //
        0.0, 0.1, 1.0, 1.1, //
        0.0, -0.1, 1.0, 0.9, //
        0.0, 10.0, 1.0, 11.0, //
        0.0, 10.1, 1.0, 11.1, //
        0.0, 100.0, 1.0, 101.0,
    ];
    const NMS_SCORES: [f32; 6] = [0.9, 0.75, 0.6, 0.95, 0.5, 0.3];

    fn nms1(nboxes: usize) -> NonMaxSuppression {
        NonMaxSuppression {
            batches: 1,
            classes: 1,
            boxes: nboxes,
            center_point_box: false,
            has_score_threshold: true,
        }
    }

    /// Runs NMS with the output capacity of the worst case plus one row of sentinels,
    /// checks the tail survived, and returns the selected triples.
    fn run_nms(
        p: NonMaxSuppression,
        boxes: &[f32],
        scores: &[f32],
        max_out: i64,
        iou: f32,
        score: f32,
    ) -> Vec<[i64; 3]> {
        let cap = 3 * (p.batches * p.classes * p.boxes + 1);
        let mut selected = vec![S; cap];
        let mut scratch = vec![0; nms_scratch_len(p.boxes)];
        let n = non_max_suppression(
            &p,
            boxes,
            scores,
            &[max_out],
            &[iou],
            &[score],
            &mut selected,
            &mut scratch,
        )
        .unwrap();
        assert!(selected[3 * n..].iter().all(|&v| v == S), "tail untouched");
        selected[..3 * n]
            .chunks_exact(3)
            .map(|c| [c[0], c[1], c[2]])
            .collect()
    }

    #[test]
    fn nms_onnx_suppress_by_iou() {
        // nonmaxsuppression.py, suppress_by_IOU: -> [[0, 0, 3], [0, 0, 0], [0, 0, 5]].
        let r = run_nms(nms1(6), &NMS_BOXES, &NMS_SCORES, 3, 0.5, 0.0);
        assert_eq!(r, [[0, 0, 3], [0, 0, 0], [0, 0, 5]]);
        // suppress_by_IOU_and_scores (score_threshold 0.4): -> [[0, 0, 3], [0, 0, 0]].
        let r = run_nms(nms1(6), &NMS_BOXES, &NMS_SCORES, 3, 0.5, 0.4);
        assert_eq!(r, [[0, 0, 3], [0, 0, 0]]);
        // limit_output_size (max 2): -> [[0, 0, 3], [0, 0, 0]].
        let r = run_nms(nms1(6), &NMS_BOXES, &NMS_SCORES, 2, 0.5, 0.0);
        assert_eq!(r, [[0, 0, 3], [0, 0, 0]]);
    }

    #[test]
    fn nms_onnx_flipped_coordinates() {
        // nonmaxsuppression.py, flipped_coordinates: -> [[0, 0, 3], [0, 0, 0], [0, 0, 5]].
        let boxes = [
            1.0, 1.0, 0.0, 0.0, //
            0.0, 0.1, 1.0, 1.1, //
            0.0, 0.9, 1.0, -0.1, //
            0.0, 10.0, 1.0, 11.0, //
            1.0, 10.1, 0.0, 11.1, //
            1.0, 101.0, 0.0, 100.0,
        ];
        let r = run_nms(nms1(6), &boxes, &NMS_SCORES, 3, 0.5, 0.0);
        assert_eq!(r, [[0, 0, 3], [0, 0, 0], [0, 0, 5]]);
    }

    #[test]
    fn nms_onnx_center_point_box_format() {
        // nonmaxsuppression.py, center_point_box_format: -> [[0, 0, 3], [0, 0, 0], [0, 0, 5]].
        let boxes = [
            0.5, 0.5, 1.0, 1.0, //
            0.5, 0.6, 1.0, 1.0, //
            0.5, 0.4, 1.0, 1.0, //
            0.5, 10.5, 1.0, 1.0, //
            0.5, 10.6, 1.0, 1.0, //
            0.5, 100.5, 1.0, 1.0,
        ];
        let p = NonMaxSuppression {
            center_point_box: true,
            ..nms1(6)
        };
        let r = run_nms(p, &boxes, &NMS_SCORES, 3, 0.5, 0.0);
        assert_eq!(r, [[0, 0, 3], [0, 0, 0], [0, 0, 5]]);
    }

    #[test]
    fn nms_onnx_two_classes_and_two_batches() {
        // nonmaxsuppression.py, two_classes (max 2):
        // -> [[0, 0, 3], [0, 0, 0], [0, 1, 3], [0, 1, 0]].
        let p = NonMaxSuppression {
            classes: 2,
            ..nms1(6)
        };
        let scores = [NMS_SCORES, NMS_SCORES].concat();
        let r = run_nms(p, &NMS_BOXES, &scores, 2, 0.5, 0.0);
        assert_eq!(r, [[0, 0, 3], [0, 0, 0], [0, 1, 3], [0, 1, 0]]);
        // two_batches (max 2): -> [[0, 0, 3], [0, 0, 0], [1, 0, 3], [1, 0, 0]].
        let p = NonMaxSuppression {
            batches: 2,
            ..nms1(6)
        };
        let boxes = [NMS_BOXES, NMS_BOXES].concat();
        let r = run_nms(p, &boxes, &scores, 2, 0.5, 0.0);
        assert_eq!(r, [[0, 0, 3], [0, 0, 0], [1, 0, 3], [1, 0, 0]]);
    }

    #[test]
    fn nms_onnx_single_identical_and_boundary() {
        // nonmaxsuppression.py, single_box: -> [[0, 0, 0]].
        let r = run_nms(nms1(1), &[0.0, 0.0, 1.0, 1.0], &[0.9], 3, 0.5, 0.0);
        assert_eq!(r, [[0, 0, 0]]);
        // identical_boxes: ten copies of [0, 0, 1, 1], all scoring 0.9 -> [[0, 0, 0]]
        // (equal scores: lowest box index first).
        let boxes = [0.0f32, 0.0, 1.0, 1.0].repeat(10);
        let r = run_nms(nms1(10), &boxes, &[0.9; 10], 3, 0.5, 0.0);
        assert_eq!(r, [[0, 0, 0]]);
        // iou_threshold_boundary: IoU == threshold (f32(0.25 / 1.75)) keeps the box
        // -> [[0, 0, 0], [0, 0, 1]].
        let boxes = [0.0, 0.0, 1.0, 1.0, 0.5, 0.5, 1.5, 1.5];
        let t = (0.25f64 / 1.75) as f32;
        let r = run_nms(nms1(2), &boxes, &[0.9, 0.8], 3, t, 0.0);
        assert_eq!(r, [[0, 0, 0], [0, 0, 1]]);
    }

    #[test]
    fn nms_thresholds_and_empty() {
        // The reference: max_output <= 0 selects nothing.
        assert!(run_nms(nms1(6), &NMS_BOXES, &NMS_SCORES, 0, 0.5, 0.0).is_empty());
        assert!(run_nms(nms1(6), &NMS_BOXES, &NMS_SCORES, -4, 0.5, 0.0).is_empty());
        // The reference keeps scores strictly above the threshold: 0.95 itself is dropped.
        assert!(run_nms(nms1(6), &NMS_BOXES, &NMS_SCORES, 3, 0.5, 0.95).is_empty());
        // Without a score threshold input every box is a candidate, negative scores too:
        // the suppress_by_IOU case with scores shifted by -1 selects the same boxes, and
        // the huge score threshold is not read (onnx.reference.ReferenceEvaluator with
        // the score_threshold input omitted: [[0, 0, 3], [0, 0, 0], [0, 0, 5]]).
        let shifted: Vec<f32> = NMS_SCORES.iter().map(|s| s - 1.0).collect();
        let p = NonMaxSuppression {
            has_score_threshold: false,
            ..nms1(6)
        };
        let r = run_nms(p, &NMS_BOXES, &shifted, 3, 0.5, 100.0);
        assert_eq!(r, [[0, 0, 3], [0, 0, 0], [0, 0, 5]]);
        // iou_threshold 1: nothing suppresses; order by score, ties by index
        // (onnx.reference.ReferenceEvaluator: [[0, 0, 1], [0, 0, 4], [0, 0, 0], [0, 0, 2]]).
        let r = run_nms(p, &NMS_BOXES, &[0.5, 0.7, 0.5, 0.1, 0.7, 0.5], 4, 1.0, 0.0);
        assert_eq!(r, [[0, 0, 1], [0, 0, 4], [0, 0, 0], [0, 0, 2]]);
        // No boxes at all.
        let r = run_nms(nms1(0), &[], &[], 3, 0.5, 0.0);
        assert!(r.is_empty());
    }

    // ---- TopK with a run-time k ----

    /// onnx backend test topk.py, export_top_k: X = arange(12).reshape(3, 4), axis 1.
    fn topk_p() -> TopK {
        TopK {
            outer: 3,
            len: 4,
            inner: 1,
            k: 99,
            largest: true,
            sorted: true,
        }
    }

    #[test]
    fn top_k_dynamic_onnx_example() {
        // topk.py export_top_k, k = 3: values [[3, 2, 1], [7, 6, 5], [11, 10, 9]],
        // indices [[3, 2, 1], [3, 2, 1], [3, 2, 1]].
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let mut values = [-1.0f32; 12];
        let mut indices = [S; 12];
        assert_eq!(
            top_k_dynamic(&topk_p(), &x, &[3], &mut values, &mut indices).unwrap(),
            3
        );
        assert_eq!(values[..9], [3.0, 2.0, 1.0, 7.0, 6.0, 5.0, 11.0, 10.0, 9.0]);
        assert_eq!(indices[..9], [3, 2, 1, 3, 2, 1, 3, 2, 1]);
        assert_eq!(values[9..], [-1.0; 3]);
        assert_eq!(indices[9..], [S; 3]);
        // k = 0: an empty result, nothing written.
        let mut values = [-1.0f32; 12];
        let mut indices = [S; 12];
        assert_eq!(
            top_k_dynamic(&topk_p(), &x, &[0], &mut values, &mut indices).unwrap(),
            0
        );
        assert_eq!(values, [-1.0; 12]);
        assert_eq!(indices, [S; 12]);
    }

    #[test]
    fn top_k_dynamic_k_out_of_range() {
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let (mut values, mut indices) = ([0.0f32; 12], [0i64; 12]);
        for k in [5, -1, i64::MIN] {
            let e = top_k_dynamic(&topk_p(), &x, &[k], &mut values, &mut indices).unwrap_err();
            match e {
                Error::ExtentOutOfRange {
                    what: "TopK's k",
                    value,
                    max: 4,
                } if value == k => {}
                e => panic!("unexpected {e:?}"),
            }
        }
        let e = top_k_dynamic(&topk_p(), &x, &[5], &mut values, &mut indices).unwrap_err();
        assert_eq!(e.to_string(), "TopK's k is 5, outside 0..=4");
        // k = len is allowed.
        assert_eq!(
            top_k_dynamic(&topk_p(), &x, &[4], &mut values, &mut indices).unwrap(),
            4
        );
        assert_eq!(values[..4], [3.0, 2.0, 1.0, 0.0]);
    }
}
