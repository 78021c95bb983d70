use kiln_runtime::kernels::{binary, binary_inplace, binary_inplace_b, unary, unary_inplace};
use kiln_runtime::params::{Binary, Broadcast, MAX_RANK, Unary};

use crate::reference::{Rng, assert_close, unary_ref};

const UNARY: [Unary; 16] = [
    Unary::Relu,
    Unary::LeakyRelu { alpha: 0.01 },
    Unary::Sigmoid,
    Unary::Tanh,
    Unary::Clip {
        min: -1.0,
        max: 6.0,
    },
    Unary::Exp,
    Unary::Neg,
    Unary::Abs,
    Unary::Sqrt,
    Unary::Erf,
    Unary::HardSigmoid {
        alpha: 0.2,
        beta: 0.5,
    },
    Unary::HardSwish,
    Unary::Swish { alpha: 1.0 },
    Unary::Swish { alpha: -0.5 },
    Unary::Gelu { tanh: false },
    Unary::Gelu { tanh: true },
];

const BINARY: [Binary; 6] = [
    Binary::Add,
    Binary::Sub,
    Binary::Mul,
    Binary::Div,
    Binary::Max,
    Binary::Min,
];

fn binary_ref(op: Binary, a: f32, b: f32) -> f32 {
    match op {
        Binary::Add => a + b,
        Binary::Sub => a - b,
        Binary::Mul => a * b,
        Binary::Div => a / b,
        Binary::Max => a.max(b),
        Binary::Min => a.min(b),
    }
}

/// Inputs spanning the interesting ranges of every unary op, plus special values.
fn unary_inputs() -> Vec<f32> {
    let mut x: Vec<f32> = (-2000..=2000).map(|i| i as f32 * 0.05).collect();
    x.extend((-60..=60).map(|i| i as f32 * 1e-3));
    x.extend([
        0.0, -0.0, 1e-30, -1e-30, 87.0, 88.5, 88.8, -87.0, -87.5, -103.0, -150.0, 150.0,
    ]);
    x.extend([
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MAX,
        f32::MIN,
    ]);
    x
}

/// Exact ops match bit for bit; `exp`, `sigmoid`, `tanh` and `erf` are polynomial
/// approximations, within 1e-6 relative of the f64 value over the normal range (GELU
/// within that and erf's absolute error times `x/2`).
#[test]
fn unary_ops_match_reference() {
    let x = unary_inputs();
    for op in UNARY {
        let mut y = vec![0.0; x.len()];
        unary(op, &x, &mut y);
        let mut inplace = x.clone();
        unary_inplace(op, &mut inplace);
        assert_eq!(
            y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            inplace.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{op:?}: in-place differs"
        );
        for (&xv, &got) in x.iter().zip(&y) {
            let want = unary_ref(op, xv);
            let gelu = matches!(op, Unary::Gelu { .. });
            let ok = if op == (Unary::Gelu { tanh: false }) && xv == f32::NEG_INFINITY {
                // −∞ · (1 + erf(−∞)): erf here stops at 1 − 1.2e-7, so −∞ where the
                // f64 reference (and erf exactly −1) gives NaN.
                got == xv
            } else if want.is_nan() {
                got.is_nan()
            } else if want.is_infinite() || got.is_infinite() {
                got == want
            } else if gelu {
                // `x/2 · (1 + erf(x/√2))` in f32: erf's (tanh's) absolute error (5e-7)
                // times `x/2`, which in the left tail is all of `want` (the same
                // cancellation as the exporters' five-node form in f32).
                (got - want).abs() <= 1e-6 * want.abs() + 3e-7 * xv.abs()
            } else if want.abs() < f32::MIN_POSITIVE * xv.abs().max(1.0) {
                // Flushed to zero below the normal range (Swish: x times a sigmoid
                // that flushed, as numpy's float32 reference does too).
                got.abs() < f32::MIN_POSITIVE * xv.abs().max(1.0)
            } else {
                (got - want).abs() <= 1e-6 * want.abs()
            };
            assert!(ok, "{op:?}({xv}) = {got}, want {want}");
        }
    }
}

/// The vector maps (exp, sigmoid, swish) run in batches of four vectors with a masked
/// last batch: every length from 0 to 80 gives each element the value a long run
/// gives it, in place and not.
#[test]
fn unary_tails_match_the_long_run() {
    let x: Vec<f32> = (0..80).map(|i| (i as f32 - 40.0) * 0.37).collect();
    for op in UNARY {
        let mut long = vec![0.0; x.len()];
        unary(op, &x, &mut long);
        for len in 0..=x.len() {
            let mut y = vec![f32::NAN; len];
            unary(op, &x[..len], &mut y);
            let mut inplace = x[..len].to_vec();
            unary_inplace(op, &mut inplace);
            for (i, (&a, &b)) in y.iter().zip(&inplace).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    long[i].to_bits(),
                    "{op:?}, length {len}, [{i}]"
                );
                assert_eq!(
                    b.to_bits(),
                    long[i].to_bits(),
                    "{op:?} in place, length {len}"
                );
            }
        }
    }
}

/// `erf` is within 5e-7 of the f64 function at 2 million points over [-6, 6] (the
/// approximation's worst is 4.4e-7, near ±3.2).
#[test]
fn erf_is_within_5e_7_everywhere() {
    let x: Vec<f32> = (-1_000_000..=1_000_000).map(|i| i as f32 * 6e-6).collect();
    let mut y = vec![0.0; x.len()];
    unary(Unary::Erf, &x, &mut y);
    let mut worst = (0.0f64, 0.0f32);
    for (&xv, &got) in x.iter().zip(&y) {
        let e = (f64::from(got) - kiln_runtime::typed::elem::erf(f64::from(xv))).abs();
        if e > worst.0 {
            worst = (e, xv);
        }
    }
    assert!(worst.0 <= 5e-7, "erf({}) is {} off", worst.1, worst.0);
}

/// Describes an operand broadcast to `shape`: contiguous strides over its own shape,
/// 0 where it has extent 1.
fn broadcast_strides(shape: &[usize], has: &[bool]) -> ([usize; MAX_RANK], usize) {
    let mut strides = [0; MAX_RANK];
    let mut step = 1;
    for d in (0..shape.len()).rev() {
        if has[d] {
            strides[d] = step;
            step *= shape[d];
        }
    }
    (strides, step)
}

fn broadcast(shape: &[usize], a: [usize; MAX_RANK], b: [usize; MAX_RANK]) -> Broadcast {
    let mut s = [1; MAX_RANK];
    s[..shape.len()].copy_from_slice(shape);
    Broadcast {
        rank: shape.len(),
        shape: s,
        a_strides: a,
        b_strides: b,
    }
}

fn binary_expected(op: Binary, p: &Broadcast, a: &[f32], b: &[f32]) -> Vec<f32> {
    let shape = &p.shape[..p.rank];
    let len: usize = shape.iter().product();
    (0..len)
        .map(|flat| {
            let (mut rem, mut oa, mut ob) = (flat, 0, 0);
            for d in (0..p.rank).rev() {
                let i = rem % shape[d];
                rem /= shape[d];
                oa += i * p.a_strides[d];
                ob += i * p.b_strides[d];
            }
            binary_ref(op, a[oa], b[ob])
        })
        .collect()
}

/// The same f32 operation per element, so results must be identical.
fn check_binary(p: &Broadcast, a_len: usize, b_len: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let a = rng.vec(a_len);
    let b = rng.vec(b_len);
    let len: usize = p.shape[..p.rank].iter().product();
    for op in BINARY {
        let want = binary_expected(op, p, &a, &b);
        let mut y = vec![f32::NAN; len];
        binary(op, p, &a, &b, &mut y);
        assert_close(&y, &want, 0.0, &format!("{op:?} {p:?}"));
        let dense = broadcast_strides(&p.shape[..p.rank], &[true; MAX_RANK]).0;
        // In place over either operand, where it is the output's own layout: the very
        // same values, bit for bit.
        if a_len == len && p.a_strides[..p.rank] == dense[..p.rank] {
            let mut y = a.clone();
            binary_inplace(op, p, &mut y, &b);
            assert_close(&y, &want, 0.0, &format!("in place over A {op:?} {p:?}"));
        }
        if b_len == len && p.b_strides[..p.rank] == dense[..p.rank] {
            let mut y = b.clone();
            binary_inplace_b(op, p, &a, &mut y);
            assert_close(&y, &want, 0.0, &format!("in place over B {op:?} {p:?}"));
        }
    }
}

#[test]
fn binary_fast_paths() {
    let c = |shape: &[usize]| broadcast_strides(shape, &[true; MAX_RANK]).0;
    // Same shape, contiguous.
    check_binary(&broadcast(&[257], c(&[257]), c(&[257])), 257, 257, 1);
    check_binary(
        &broadcast(&[3, 5, 7], c(&[3, 5, 7]), c(&[3, 5, 7])),
        105,
        105,
        2,
    );
    // Scalar operand on either side.
    check_binary(&broadcast(&[3, 5], c(&[3, 5]), [0; MAX_RANK]), 15, 1, 3);
    check_binary(&broadcast(&[3, 5], [0; MAX_RANK], c(&[3, 5])), 1, 15, 4);
    // Per-channel (NCHW bias): innermost stride 0 for b.
    let (bc, bl) = broadcast_strides(&[2, 3, 7], &[false, true, false]);
    check_binary(&broadcast(&[2, 3, 7], c(&[2, 3, 7]), bc), 42, bl, 5);
    // Row vector (innermost stride 1, outer stride 0).
    check_binary(
        &broadcast(&[4, 6], c(&[4, 6]), [0, 1, 0, 0, 0, 0]),
        24,
        6,
        6,
    );
    // Rank 0.
    check_binary(&broadcast(&[], [0; MAX_RANK], [0; MAX_RANK]), 1, 1, 7);
    // Empty.
    check_binary(&broadcast(&[3, 0], c(&[3, 0]), c(&[3, 0])), 0, 0, 8);
}

#[test]
fn binary_strided_operands() {
    // A read transposed: nothing merges and the inner run is strided.
    check_binary(
        &broadcast(&[3, 4], [1, 3, 0, 0, 0, 0], [4, 1, 0, 0, 0, 0]),
        12,
        12,
        9,
    );
    // Runs longer than the 64-element gather buffer, strides 2 and 3, on either side.
    check_binary(
        &broadcast(&[2, 130], [1, 2, 0, 0, 0, 0], [130, 1, 0, 0, 0, 0]),
        260,
        260,
        11,
    );
    check_binary(
        &broadcast(&[3, 100], [100, 1, 0, 0, 0, 0], [1, 3, 0, 0, 0, 0]),
        300,
        300,
        12,
    );
    check_binary(
        &broadcast(&[3, 100], [1, 3, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]),
        300,
        1,
        13,
    );
    check_binary(
        &broadcast(&[5, 2], [1, 5, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]),
        10,
        1,
        10,
    );
}

#[test]
fn binary_random_broadcasts_up_to_rank_6() {
    let mut rng = Rng::new(99);
    for case in 0..200 {
        let rank = rng.below(MAX_RANK + 1);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4)).collect();
        let has_a: Vec<bool> = (0..rank).map(|_| rng.below(3) != 0).collect();
        let has_b: Vec<bool> = (0..rank).map(|_| rng.below(3) != 0).collect();
        let (sa, la) = broadcast_strides(&shape, &has_a);
        let (sb, lb) = broadcast_strides(&shape, &has_b);
        check_binary(&broadcast(&shape, sa, sb), la, lb, 100 + case);
    }
}

#[test]
#[should_panic(expected = "broadcast: B")]
fn binary_rejects_wrong_length() {
    let p = broadcast(&[4], [1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]);
    binary(Binary::Add, &p, &[0.0; 4], &[0.0; 3], &mut [0.0; 4]);
}

#[test]
#[should_panic(expected = "B is the output, so it must be contiguous")]
fn binary_inplace_b_rejects_a_broadcast_output() {
    let p = broadcast(&[4], [1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]);
    binary_inplace_b(Binary::Sub, &p, &[0.0; 4], &mut [0.0; 4]);
}
