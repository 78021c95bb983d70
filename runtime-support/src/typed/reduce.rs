//! Reductions and row-wise kernels: Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax,
//! Hardmax and CumSum over every element type.
//!
//! Floats accumulate in `f64`; integers accumulate exactly in `i128` and wrap to their
//! own width at the end, which equals NumPy's wrapping in the element type because
//! sums and products modulo 2^128 reduce to the same value modulo 2^bits.

use super::elem::Elem;
use super::layout::{Walk, contiguous};
use super::params::{ArgReduce, BinaryOp, CumSum, Hardmax, RANK, Reduce, ReduceOp, RowSoftmax};

/// Calls `f` with every element of one reduction group (the reduced axes' walk from
/// `base`).
#[inline(always)]
fn visit<T: Copy>(x: &[T], red: &Walk<1>, base: isize, mut f: impl FnMut(T)) {
    let [s] = red.inner();
    red.for_each_run([base], |[i], n| {
        let i = i as usize;
        if s == 1 {
            for &v in &x[i..i + n] {
                f(v);
            }
        } else {
            for j in 0..n {
                f(x[i + j * s as usize]);
            }
        }
    });
}

/// One group's result; `count` is the group's size (0 for an empty reduction, which
/// gives ONNX's identities: 0 for sums, 1 for Prod, the type's least value for Max
/// (`-inf` for floats), the greatest for Min, `-inf` for LogSum and LogSumExp, NaN for
/// a float Mean).
fn reduce_group<T: Elem>(op: ReduceOp, x: &[T], red: &Walk<1>, base: isize, count: usize) -> T {
    use ReduceOp::*;
    match op {
        Max | Min => {
            let (bop, init) = if op == Max {
                (BinaryOp::Max, T::min_value())
            } else {
                (BinaryOp::Min, T::max_value())
            };
            let mut acc = init;
            visit(x, red, base, |v| acc = T::binary(bop, acc, v));
            acc
        }
        Sum | Mean | Prod | L1 | SumSquare if !T::IS_FLOAT => {
            let mut acc: i128 = if op == Prod { 1 } else { 0 };
            visit(x, red, base, |v| {
                let v = v.to_i128();
                acc = match op {
                    Prod => acc.wrapping_mul(v),
                    L1 => acc.wrapping_add(v.wrapping_abs()),
                    SumSquare => acc.wrapping_add(v.wrapping_mul(v)),
                    _ => acc.wrapping_add(v),
                }
            });
            let sum = T::from_i128(acc);
            match op {
                // np.mean(dtype=int): the wrapped sum divided, truncated.
                Mean if count == 0 => T::zero(),
                Mean => T::from_f64(sum.to_f64() / count as f64),
                _ => sum,
            }
        }
        LogSumExp => {
            // Shift by the largest finite element (as the reference does) so exp never
            // overflows; with none, the shift is 0.
            let mut m = f64::NEG_INFINITY;
            visit(x, red, base, |v| {
                let v = v.to_f64();
                if v.is_finite() && v > m {
                    m = v;
                }
            });
            if m == f64::NEG_INFINITY {
                m = 0.0;
            }
            let mut s = 0.0;
            visit(x, red, base, |v| s += (v.to_f64() - m).exp());
            T::from_f64(s.ln() + m)
        }
        _ => {
            let mut acc = if op == Prod { 1.0 } else { 0.0 };
            visit(x, red, base, |v| {
                let v = v.to_f64();
                match op {
                    Prod => acc *= v,
                    L1 => acc += v.abs(),
                    L2 | SumSquare => acc += v * v,
                    _ => acc += v,
                }
            });
            T::from_f64(match op {
                Mean => acc / count as f64,
                L2 => acc.sqrt(),
                LogSum => acc.ln(),
                _ => acc,
            })
        }
    }
}

/// ONNX Reduce*: the output is `in_shape` with the `reduced` axes of size 1,
/// contiguous. Each output element folds its group (strided reads when the reduced
/// axes are not innermost; no scratch). Precondition: `x` holds `in_shape`'s elements
/// and `out` the output's.
pub fn reduce<T: Elem>(p: &Reduce, x: &[T], out: &mut [T]) {
    let rank = p.rank.min(RANK);
    let strides = contiguous(rank, &p.in_shape);
    let (mut kept_shape, mut red_shape) = ([1; RANK], [1; RANK]);
    for d in 0..rank {
        if p.reduced[d] {
            red_shape[d] = p.in_shape[d];
        } else {
            kept_shape[d] = p.in_shape[d];
        }
    }
    let kept = Walk::<1>::new(rank, &kept_shape, [strides]);
    let red = Walk::<1>::new(rank, &red_shape, [strides]);
    let count = red.len();
    let [s] = kept.inner();
    let mut o = 0;
    kept.for_each_run([0], |[base], n| {
        for (j, y) in out[o..o + n].iter_mut().enumerate() {
            *y = reduce_group(p.op, x, &red, base + j as isize * s, count);
        }
        o += n;
    });
}

/// Index of the greatest (`max`) or least element of `len` elements at `base`, `step`
/// apart: the first one, or the last with `last`; NaN counts as the extreme (like
/// `np.argmax`). 0 when `len` is 0.
fn arg_extreme<T: Elem>(
    x: &[T],
    base: usize,
    step: usize,
    len: usize,
    max: bool,
    last: bool,
) -> usize {
    if len == 0 {
        return 0;
    }
    let mut bi = 0;
    let mut bv = x[base];
    for j in 1..len {
        let v = x[base + j * step];
        let take = if bv.is_nan() {
            last && v.is_nan()
        } else if v.is_nan() {
            true
        } else if max {
            v > bv || (last && v == bv)
        } else {
            v < bv || (last && v == bv)
        };
        if take {
            bi = j;
            bv = v;
        }
    }
    bi
}

/// ONNX ArgMax/ArgMin over the middle axis of `[outer, len, inner]`; `out` is
/// `[outer, inner]`. Ties give the first index, or the last with
/// `select_last_index`; NaN wins like in `np.argmax`.
pub fn arg_reduce<T: Elem>(p: &ArgReduce, x: &[T], out: &mut [i64]) {
    for o in 0..p.outer {
        for i in 0..p.inner {
            let base = o * p.len * p.inner + i;
            let j = arg_extreme(x, base, p.inner, p.len, p.max, p.select_last_index);
            out[o * p.inner + i] = j as i64;
        }
    }
}

/// Softmax (or LogSoftmax with `log`) over the middle axis of `[outer, len, inner]`,
/// in `f64`: `e^(x - max) / Σ`, or `(x - max) - ln Σ`. For the element types the f32
/// kernel does not cover.
pub fn softmax<T: Elem>(p: &RowSoftmax, x: &[T], out: &mut [T]) {
    let (len, inner) = (p.len, p.inner);
    for o in 0..p.outer {
        for i in 0..inner {
            let base = o * len * inner + i;
            let at = |j: usize| base + j * inner;
            let mut m = f64::NEG_INFINITY;
            for j in 0..len {
                let v = x[at(j)].to_f64();
                // NaN propagates through the sum below; max ignores it here.
                if v > m {
                    m = v;
                }
            }
            let mut s = 0.0;
            for j in 0..len {
                s += (x[at(j)].to_f64() - m).exp();
            }
            let ls = s.ln();
            for j in 0..len {
                let d = x[at(j)].to_f64() - m;
                out[at(j)] = T::from_f64(if p.log { d - ls } else { d.exp() / s });
            }
        }
    }
}

/// ONNX Hardmax over the middle axis of `[outer, len, inner]`: 1 at the first
/// greatest element (NaN counts as greatest, like `np.argmax`), 0 elsewhere.
pub fn hardmax<T: Elem>(p: &Hardmax, x: &[T], out: &mut [T]) {
    let (len, inner) = (p.len, p.inner);
    for o in 0..p.outer {
        for i in 0..inner {
            let base = o * len * inner + i;
            let best = arg_extreme(x, base, inner, len, true, false);
            for j in 0..len {
                out[base + j * inner] = T::from_bool(j == best);
            }
        }
    }
}

/// ONNX CumSum along the middle axis of `[outer, len, inner]`: `exclusive` leaves the
/// current element out of its own sum, `reverse` sums from the end. Floats
/// accumulate in `f64`, integers wrap.
pub fn cumsum<T: Elem>(p: &CumSum, x: &[T], out: &mut [T]) {
    let (len, inner) = (p.len, p.inner);
    for o in 0..p.outer {
        for i in 0..inner {
            let base = o * len * inner + i;
            let (mut accf, mut acci) = (0.0f64, T::zero());
            for t in 0..len {
                let j = if p.reverse { len - 1 - t } else { t };
                let at = base + j * inner;
                let v = x[at];
                if p.exclusive {
                    out[at] = if T::IS_FLOAT { T::from_f64(accf) } else { acci };
                }
                if T::IS_FLOAT {
                    accf += v.to_f64();
                } else {
                    acci = T::binary(BinaryOp::Add, acci, v);
                }
                if !p.exclusive {
                    out[at] = if T::IS_FLOAT { T::from_f64(accf) } else { acci };
                }
            }
        }
    }
}
