//! The cuBLAS option's argument mapping (row-major Gemm through swapped operands and
//! leading dimensions), checked against a CPU model of column-major sgemm: the only
//! part of the cuBLAS path that can be checked without a GPU.

use kiln_runtime::cuda::cublas::{reference_sgemm, sgemm_args};
use kiln_runtime::kernels;
use kiln_runtime::params::{Activation, Gemm};

/// A small deterministic generator (no dependency needed for test data).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn swapped_column_major_sgemm_matches_the_row_major_gemm_kernel() {
    let shapes = [
        (1, 1, 1),
        (1, 257, 3),
        (255, 1, 7),
        (5, 7, 9),
        (17, 33, 64),
        (64, 3, 1),
    ];
    let mut checked = 0;
    for (case, &(m, n, k)) in shapes.iter().enumerate() {
        for trans_a in [false, true] {
            for trans_b in [false, true] {
                for with_c in [false, true] {
                    let p = Gemm {
                        m,
                        n,
                        k,
                        trans_a,
                        trans_b,
                        alpha: 0.75,
                        beta: if with_c { 1.5 } else { 0.0 },
                        c_strides: [n, 1],
                        activation: Activation::None,
                    };
                    let seed =
                        (case * 8 + trans_a as usize * 4 + trans_b as usize * 2 + with_c as usize)
                            as u64;
                    let a = values(seed, m * k);
                    let b = values(seed + 100, k * n);
                    let c = values(seed + 200, m * n);
                    let mut expected = vec![0.0; m * n];
                    kernels::gemm(&p, &a, &b, with_c.then_some(&c[..]), &mut expected);

                    let g = sgemm_args(&p, with_c).expect("plain Gemm maps onto sgemm");
                    assert!(g.swapped);
                    // cuBLAS accumulates into C in place: the launcher copies C first.
                    let mut got = if with_c {
                        c.clone()
                    } else {
                        vec![f32::NAN; m * n]
                    };
                    // cuBLAS's A is ONNX B, its B is ONNX A; its column-major C is Y.
                    reference_sgemm(&g, &b, &a, &mut got);
                    for (i, (x, y)) in got.iter().zip(&expected).enumerate() {
                        assert!(
                            (x - y).abs() <= 1e-5 * (1.0 + y.abs()) * k as f32,
                            "m={m} n={n} k={k} ta={trans_a} tb={trans_b} c={with_c}: [{i}] {x} vs {y}"
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, shapes.len() * 8);
}

#[test]
fn what_cublas_cannot_do_alone_is_refused() {
    let base = Gemm {
        m: 4,
        n: 5,
        k: 6,
        trans_a: false,
        trans_b: false,
        alpha: 1.0,
        beta: 1.0,
        c_strides: [0, 1],
        activation: Activation::None,
    };
    // A broadcast bias row needs the tiled kernel (or a copy first).
    assert_eq!(sgemm_args(&base, true), None);
    assert!(sgemm_args(&base, false).is_some());
    let relu = Gemm {
        activation: Activation::Relu,
        ..base
    };
    assert_eq!(sgemm_args(&relu, false), None);
}
