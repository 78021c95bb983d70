use kiln_runtime::kernels::{PANEL, gemm, matmul, matmul_packed, pack_b, packed_b_len};
use kiln_runtime::params::{Activation, Gemm, MAX_RANK, MatMul, PackedMatMul};

use crate::reference::{ACTIVATIONS, Rng, activation_ref, assert_close};

/// f32 products of up to a few hundred terms against an f64 reference, relative.
const TOL: f32 = 1e-4;

pub(crate) fn gemm_ref(p: &Gemm, a: &[f32], b: &[f32], c: Option<&[f32]>) -> Vec<f32> {
    let (m, n, k) = (p.m, p.n, p.k);
    let at = |i: usize, l: usize| {
        if p.trans_a {
            a[l * m + i]
        } else {
            a[i * k + l]
        }
    };
    let bt = |l: usize, j: usize| {
        if p.trans_b {
            b[j * k + l]
        } else {
            b[l * n + j]
        }
    };
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k).map(|l| at(i, l) as f64 * bt(l, j) as f64).sum();
            let cv = c.map_or(0.0, |c| c[i * p.c_strides[0] + j * p.c_strides[1]] as f64);
            let v = p.alpha as f64 * dot + p.beta as f64 * cv;
            y[i * n + j] = activation_ref(p.activation, v as f32);
        }
    }
    y
}

fn check_gemm(p: Gemm, c_len: Option<usize>, seed: u64) {
    let mut rng = Rng::new(seed);
    let a = rng.vec(p.m * p.k);
    let b = rng.vec(p.k * p.n);
    let c = c_len.map(|l| rng.vec(l));
    let mut y = vec![f32::NAN; p.m * p.n];
    gemm(&p, &a, &b, c.as_deref(), &mut y);
    assert_close(
        &y,
        &gemm_ref(&p, &a, &b, c.as_deref()),
        TOL,
        &format!("{p:?}"),
    );
}

pub(crate) fn gemm_params(m: usize, n: usize, k: usize) -> Gemm {
    Gemm {
        m,
        n,
        k,
        trans_a: false,
        trans_b: false,
        alpha: 1.0,
        beta: 1.0,
        c_strides: [0, 0],
        activation: Activation::None,
    }
}

#[test]
fn gemm_transposes_and_scalars() {
    for (i, (ta, tb)) in [(false, false), (true, false), (false, true), (true, true)]
        .into_iter()
        .enumerate()
    {
        for (m, n, k) in [
            (7, 5, 3),
            (1, 257, 255),
            (255, 1, 9),
            (64, 129, 300),
            (3, 4, 1),
        ] {
            let p = Gemm {
                trans_a: ta,
                trans_b: tb,
                alpha: 0.5,
                beta: -2.0,
                c_strides: [n, 1],
                ..gemm_params(m, n, k)
            };
            check_gemm(p, Some(m * n), i as u64);
            check_gemm(p, None, 10 + i as u64);
        }
    }
}

#[test]
fn gemm_broadcast_c() {
    let (m, n, k) = (9, 13, 17);
    let cases = [([0, 1], n), ([1, 0], m), ([0, 0], 1), ([n, 1], m * n)];
    for (i, (strides, len)) in cases.into_iter().enumerate() {
        let p = Gemm {
            c_strides: strides,
            beta: 0.75,
            ..gemm_params(m, n, k)
        };
        check_gemm(p, Some(len), 20 + i as u64);
        // beta = 0: C is ignored.
        check_gemm(Gemm { beta: 0.0, ..p }, Some(len), 30 + i as u64);
    }
}

#[test]
fn gemm_fused_activation() {
    for (i, act) in ACTIVATIONS.into_iter().enumerate() {
        let p = Gemm {
            activation: act,
            c_strides: [0, 1],
            trans_b: true,
            ..gemm_params(1, 1000, 64)
        };
        check_gemm(p, Some(1000), 40 + i as u64);
    }
}

#[test]
fn gemm_empty_k() {
    let p = Gemm {
        c_strides: [0, 1],
        ..gemm_params(2, 3, 0)
    };
    check_gemm(p, Some(3), 50);
}

fn matmul_params(
    m: usize,
    n: usize,
    k: usize,
    shape: &[usize],
    a: &[usize],
    b: &[usize],
) -> MatMul {
    let arr = |s: &[usize]| {
        let mut out = [0; MAX_RANK];
        out[..s.len()].copy_from_slice(s);
        out
    };
    MatMul {
        m,
        n,
        k,
        batch_rank: shape.len(),
        batch_shape: arr(shape),
        a_batch_strides: arr(a),
        b_batch_strides: arr(b),
    }
}

fn check_matmul(p: MatMul, seed: u64) {
    let shape = &p.batch_shape[..p.batch_rank];
    let mats = |st: &[usize]| {
        1 + shape
            .iter()
            .zip(st)
            .map(|(s, t)| (s - 1) * t)
            .sum::<usize>()
    };
    let a_mats = mats(&p.a_batch_strides[..p.batch_rank]);
    let b_mats = mats(&p.b_batch_strides[..p.batch_rank]);
    let batches: usize = shape.iter().product();
    let mut rng = Rng::new(seed);
    let a = rng.vec(a_mats * p.m * p.k);
    let b = rng.vec(b_mats * p.k * p.n);
    let mut y = vec![f32::NAN; batches * p.m * p.n];
    matmul(&p, &a, &b, &mut y);
    let single = gemm_params(p.m, p.n, p.k);
    for t in 0..batches {
        // Decompose the batch index into its digits to find each operand's matrix.
        let (mut rem, mut oa, mut ob) = (t, 0, 0);
        for d in (0..p.batch_rank).rev() {
            let i = rem % shape[d];
            rem /= shape[d];
            oa += i * p.a_batch_strides[d];
            ob += i * p.b_batch_strides[d];
        }
        let want = gemm_ref(
            &single,
            &a[oa * p.m * p.k..][..p.m * p.k],
            &b[ob * p.k * p.n..][..p.k * p.n],
            None,
        );
        let got = &y[t * p.m * p.n..][..p.m * p.n];
        assert_close(got, &want, TOL, &format!("{p:?} batch {t}"));
    }
}

#[test]
fn matmul_batches() {
    // No batch dimensions.
    check_matmul(matmul_params(5, 7, 3, &[], &[], &[]), 60);
    // Both batched.
    check_matmul(matmul_params(4, 6, 5, &[3], &[1], &[1]), 61);
    // B shared by every batch: folded into one taller product.
    check_matmul(matmul_params(5, 3, 8, &[2, 3], &[3, 1], &[0, 0]), 62);
    // A shared, B batched.
    check_matmul(matmul_params(3, 4, 2, &[4], &[0], &[1]), 63);
    // Broadcast on both sides: A [2,1], B [1,3] -> [2,3].
    check_matmul(matmul_params(2, 5, 3, &[2, 3], &[1, 0], &[0, 1]), 64);
    // Unit batch dimensions and odd sizes.
    check_matmul(
        matmul_params(1, 257, 255, &[1, 2, 1], &[2, 1, 1], &[2, 1, 1]),
        65,
    );
    // Both operands shared (every output batch equal).
    check_matmul(matmul_params(3, 3, 3, &[4], &[0], &[0]), 66);
}

/// faer 0.24.4's `MatMut::from_row_major_slice_with_stride_mut` builds a column-major
/// view, which wrote past the end of wide outputs; every shape class here once did.
#[test]
fn gemm_writes_only_y() {
    for (m, n, k) in [
        (2, 3, 4),
        (1, 4, 2),
        (3, 4, 1),
        (7, 5, 3),
        (1, 1000, 64),
        (65, 300, 17),
    ] {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let p = Gemm {
                trans_a: ta,
                trans_b: tb,
                beta: 0.0,
                ..gemm_params(m, n, k)
            };
            let (a, b) = (vec![1.0; m * k], vec![1.0; k * n]);
            let mut buf = vec![-7.0f32; m * n + 2048];
            gemm(&p, &a, &b, None, &mut buf[1024..1024 + m * n]);
            assert!(
                buf[..1024]
                    .iter()
                    .chain(&buf[1024 + m * n..])
                    .all(|&v| v == -7.0)
            );
            assert!(
                buf[1024..1024 + m * n].iter().all(|&v| v == k as f32),
                "{p:?}"
            );
        }
    }
}

/// B packed at compile time: every row count a register block can end with (1–6
/// rows, and several blocks), panels full, partial (of one vector or less, the
/// kernel's half-width case, and of more) and several, and `k` of 0 and 1.
#[test]
fn matmul_packed_matches_reference() {
    let mut seed = 300;
    for m in [1, 2, 3, 4, 5, 6, 7, 13, 20] {
        for n in [1, 5, PANEL, PANEL + 1, PANEL + 8, PANEL + 9, 2 * PANEL + 7] {
            for k in [0, 1, 3, 40] {
                seed += 1;
                let mut rng = Rng::new(seed);
                let (a, b) = (rng.vec(m * k), rng.vec(k * n));
                let packed = pack_b(k, n, &b);
                assert_eq!(packed.len(), packed_b_len(k, n));
                let mut y = vec![f32::NAN; m * n];
                matmul_packed(&PackedMatMul { m, n, k }, &a, &packed, &mut y);
                let want = gemm_ref(&gemm_params(m, n, k), &a, &b, None);
                assert_close(&y, &want, TOL, &format!("packed {m}x{n}x{k}"));
            }
        }
    }
}

/// The packing itself: panel `p`, row `r`, lane `j` holds `B[r][p·PANEL + j]`, zero
/// past the last column.
#[test]
fn pack_b_layout() {
    let (k, n) = (3, PANEL + 2);
    let b: Vec<f32> = (0..k * n).map(|i| i as f32 + 1.0).collect();
    let packed = pack_b(k, n, &b);
    for p in 0..2 {
        for r in 0..k {
            for j in 0..PANEL {
                let col = p * PANEL + j;
                let want = if col < n { b[r * n + col] } else { 0.0 };
                assert_eq!(
                    packed[(p * k + r) * PANEL + j],
                    want,
                    "panel {p} row {r} lane {j}"
                );
            }
        }
    }
}
