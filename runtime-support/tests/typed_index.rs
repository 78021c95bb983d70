//! Typed index kernels against the ONNX reference implementation (onnx
//! `onnx.reference.ops`, NumPy): every expected literal below was printed by the
//! reference (`np.take`, `gather_numpy`, `_gather_nd_impl`, `scatter_elements`,
//! `_scatter_nd_impl`, `_one_hot`, `topk_sorted_implementation`, `np.eye`) on the same
//! inputs.

use half::f16;
use kiln_runtime::Error;
use kiln_runtime::typed::params::*;
use kiln_runtime::typed::*;

/// A shape padded to `RANK` entries with 1.
fn sh(s: &[usize]) -> [usize; RANK] {
    let mut a = [1; RANK];
    a[..s.len()].copy_from_slice(s);
    a
}

fn iota<T: Elem>(n: usize, start: i64) -> Vec<T> {
    (0..n as i64).map(|i| T::from_i64(start + i)).collect()
}

fn out_of_range<T>(r: Result<T, Error>, index: i64, len: usize) {
    match r {
        Err(Error::IndexOutOfRange { index: i, len: l }) => {
            assert_eq!((i, l), (index, len), "wrong index in the error")
        }
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("no error for index {index} in an axis of {len}"),
    }
}

#[test]
fn gather_axis1_rank3_negative() {
    // np.take(arange(24).reshape(2,3,4), [[2,-1],[0,1]], axis=1)
    let x: Vec<f64> = iota(24, 0);
    let p = Gather {
        outer: 2,
        axis_len: 3,
        inner: 4,
    };
    let mut y = vec![0.0; 32];
    gather(&p, &x, &[2i64, -1, 0, 1], &mut y).unwrap();
    let want = [
        8., 9., 10., 11., 8., 9., 10., 11., 0., 1., 2., 3., 4., 5., 6., 7., 20., 21., 22., 23.,
        20., 21., 22., 23., 12., 13., 14., 15., 16., 17., 18., 19.,
    ];
    assert_eq!(y, want);
    // The same with int32 indices and an int8 tensor.
    let x: Vec<i8> = iota(24, 0);
    let mut y = vec![0i8; 32];
    gather(&p, &x, &[2i32, -1, 0, 1], &mut y).unwrap();
    assert_eq!(y, want.map(|v| v as i8));
}

#[test]
fn gather_out_of_range_is_an_error() {
    let p = Gather {
        outer: 1,
        axis_len: 3,
        inner: 2,
    };
    let x = [Bool(1); 6];
    let mut y = [Bool(0); 4];
    out_of_range(gather(&p, &x, &[0i64, 3], &mut y), 3, 3);
    out_of_range(gather(&p, &x, &[-4i32, 0], &mut y), -4, 3);
    out_of_range(gather(&p, &x, &[i64::MIN, 0], &mut y), i64::MIN, 3);
    // Empty index tensor: nothing to do.
    gather::<Bool, i64>(&p, &x, &[], &mut []).unwrap();
}

#[test]
fn gather_elements_rank3() {
    let x: Vec<i32> = iota(24, 0); // 2×3×4
    // axis 1, indices 2×1×4 (smaller than the data along the axis).
    let p = GatherElements {
        rank: 3,
        data_shape: sh(&[2, 3, 4]),
        idx_shape: sh(&[2, 1, 4]),
        axis: 1,
    };
    let mut y = [0i32; 8];
    gather_elements(&p, &x, &[1i64, -1, 0, 2, 2, 0, -3, 1], &mut y).unwrap();
    assert_eq!(y, [4, 9, 2, 11, 20, 13, 14, 19]);
    // axis 2, indices 2×3×2.
    let p = GatherElements {
        rank: 3,
        data_shape: sh(&[2, 3, 4]),
        idx_shape: sh(&[2, 3, 2]),
        axis: 2,
    };
    let idx = [3i32, -1, 0, 1, 2, 2, 0, 0, 1, -4, 3, 2];
    let mut y = [0i32; 12];
    gather_elements(&p, &x, &idx, &mut y).unwrap();
    assert_eq!(y, [3, 3, 4, 5, 10, 10, 12, 12, 17, 16, 23, 22]);
    let mut bad = idx;
    bad[7] = 4;
    out_of_range(gather_elements(&p, &x, &bad, &mut y), 4, 4);
}

#[test]
fn gather_nd_batch_dims() {
    let x: Vec<i64> = iota(24, 0); // 2×3×4
    let p = GatherNd {
        batch_dims: 0,
        data_rank: 3,
        data_shape: sh(&[2, 3, 4]),
        idx_rank: 3,
        idx_shape: sh(&[2, 1, 2]),
    };
    let mut y = [0i64; 8];
    gather_nd(&p, &x, &[1, -1, 0, 2], &mut y).unwrap();
    assert_eq!(y, [20, 21, 22, 23, 8, 9, 10, 11]);

    let p = GatherNd {
        batch_dims: 1,
        data_rank: 3,
        data_shape: sh(&[2, 3, 4]),
        idx_rank: 2,
        idx_shape: sh(&[2, 1]),
    };
    gather_nd(&p, &x, &[2, -3], &mut y).unwrap();
    assert_eq!(y, [8, 9, 10, 11, 12, 13, 14, 15]);

    let p = GatherNd {
        batch_dims: 1,
        data_rank: 3,
        data_shape: sh(&[2, 3, 4]),
        idx_rank: 3,
        idx_shape: sh(&[2, 2, 2]),
    };
    let mut y = [0i64; 4];
    gather_nd(&p, &x, &[1, 3, 0, 0, 2, -1, 1, 1], &mut y).unwrap();
    assert_eq!(y, [7, 0, 23, 17]);
    out_of_range(gather_nd(&p, &x, &[1, 3, 0, 0, 2, -1, 1, 4], &mut y), 4, 4);
    out_of_range(
        gather_nd(&p, &x, &[1, 3, -4, 0, 2, -1, 1, 1], &mut y),
        -4,
        3,
    );
}

#[test]
fn scatter_elements_reductions() {
    // data 2×3×2, indices/updates 2×2×2, axis 1; the index -1 of the first case
    // duplicates position 2 so that the reductions combine two updates there.
    let p = |r| ScatterElements {
        rank: 3,
        data_shape: sh(&[2, 3, 2]),
        idx_shape: sh(&[2, 2, 2]),
        axis: 1,
        reduction: r,
    };
    let idx = [0i64, 2, 1, -1, 2, 2, 0, -3];
    let upd: Vec<f32> = iota(8, 1);
    let data = [1.0f32; 12];
    let mut y = [0.0f32; 12];
    let cases: [(ScatterReduction, [f32; 12]); 3] = [
        (
            ScatterReduction::None,
            [1., 1., 3., 1., 1., 4., 7., 8., 1., 1., 5., 6.],
        ),
        (
            ScatterReduction::Add,
            [2., 1., 4., 1., 1., 7., 8., 9., 1., 1., 6., 7.],
        ),
        (
            ScatterReduction::Mul,
            [1., 1., 3., 1., 1., 8., 7., 8., 1., 1., 5., 6.],
        ),
    ];
    for (r, want) in cases {
        scatter_elements(&p(r), &data, &idx, &upd, &mut y).unwrap();
        assert_eq!(y, want, "{r:?}");
    }
    let idx = [0i32, 2, 1, 2, 2, 2, 0, 0];
    let data = [4.5f32; 12];
    let cases: [(ScatterReduction, [f32; 12]); 2] = [
        (
            ScatterReduction::Max,
            [4.5, 4.5, 4.5, 4.5, 4.5, 4.5, 7., 8., 4.5, 4.5, 5., 6.],
        ),
        (
            ScatterReduction::Min,
            [1., 4.5, 3., 4.5, 4.5, 2., 4.5, 4.5, 4.5, 4.5, 4.5, 4.5],
        ),
    ];
    for (r, want) in cases {
        scatter_elements(&p(r), &data, &idx, &upd, &mut y).unwrap();
        assert_eq!(y, want, "{r:?}");
    }
    let bad = [0i32, 2, 1, 2, 3, 2, 0, 0];
    out_of_range(
        scatter_elements(&p(ScatterReduction::Add), &data, &bad, &upd, &mut y),
        3,
        3,
    );
}

#[test]
fn scatter_elements_int_axis0() {
    let p = ScatterElements {
        rank: 2,
        data_shape: sh(&[3, 3]),
        idx_shape: sh(&[2, 3]),
        axis: 0,
        reduction: ScatterReduction::Add,
    };
    let mut y = [0i64; 9];
    scatter_elements(
        &p,
        &[5, -2, 7, 1, 1, 1, 0, 0, 0],
        &[1i64, 1, 0, 2, 0, 2],
        &[10, 20, 30, 1, 2, 3],
        &mut y,
    )
    .unwrap();
    assert_eq!(y, [5, 0, 37, 11, 21, 1, 1, 0, 3]);
    // uint8 wraps like NumPy.
    let mut y = [0u8; 9];
    scatter_elements(
        &p,
        &[250; 9],
        &[0i32, 0, 0, 0, 0, 0],
        &[3, 4, 5, 3, 2, 1],
        &mut y,
    )
    .unwrap();
    assert_eq!(y, [0, 0, 0, 250, 250, 250, 250, 250, 250]);
}

#[test]
fn scatter_nd_reductions() {
    // data 2×3×4 (1..=24), indices 3×2, updates 3×4; tuples 0 and 2 both hit (1, 2).
    let p = |r| ScatterNd {
        data_rank: 3,
        data_shape: sh(&[2, 3, 4]),
        idx_rank: 2,
        idx_shape: sh(&[3, 2]),
        reduction: r,
    };
    let data: Vec<f64> = iota(24, 1);
    let upd: Vec<f64> = iota(12, 100);
    let idx = [1i64, -1, 0, 0, 1, 2];
    let mut y = vec![0.0; 24];
    let with = |head: [f64; 4], tail: [f64; 4]| {
        let mut v: Vec<f64> = iota(24, 1);
        v[..4].copy_from_slice(&head);
        v[20..].copy_from_slice(&tail);
        v
    };
    let cases = [
        (
            ScatterReduction::None,
            with([104., 105., 106., 107.], [108., 109., 110., 111.]),
        ),
        (
            ScatterReduction::Add,
            with([105., 107., 109., 111.], [229., 232., 235., 238.]),
        ),
        (
            ScatterReduction::Mul,
            with(
                [104., 210., 318., 428.],
                [226800., 242198., 258060., 274392.],
            ),
        ),
        (
            ScatterReduction::Max,
            with([104., 105., 106., 107.], [108., 109., 110., 111.]),
        ),
        (ScatterReduction::Min, iota(24, 1)),
    ];
    for (r, want) in cases {
        scatter_nd(&p(r), &data, &idx, &upd, &mut y).unwrap();
        assert_eq!(y, want, "{r:?}");
    }
    out_of_range(
        scatter_nd(
            &p(ScatterReduction::None),
            &data,
            &[1, -1, 0, 0, 2, 2],
            &upd,
            &mut y,
        ),
        2,
        2,
    );
}

#[test]
fn scatter_nd_max_propagates_nan() {
    // np.maximum / np.minimum: NaN wins from either side.
    let p = ScatterNd {
        data_rank: 1,
        data_shape: sh(&[3]),
        idx_rank: 2,
        idx_shape: sh(&[2, 1]),
        reduction: ScatterReduction::Max,
    };
    let mut y = [0.0f32; 3];
    scatter_nd(&p, &[f32::NAN, 1.0, 2.0], &[0, 1], &[5.0, f32::NAN], &mut y).unwrap();
    assert!(y[0].is_nan() && y[1].is_nan());
    assert_eq!(y[2], 2.0);
}

#[test]
fn one_hot_axes_and_out_of_range() {
    // indices [[0,-1,3],[5,-4,2]], depth 4, values [2, 7] (int32).
    let ind = [0i64, -1, 3, 5, -4, 2];
    let v = [2i32, 7];
    let cases: [(OneHot, [i32; 24]); 3] = [
        // axis 1: 2×4×3
        (
            OneHot {
                outer: 2,
                depth: 4,
                inner: 3,
            },
            [
                7, 2, 2, 2, 2, 2, 2, 2, 2, 2, 7, 7, 2, 7, 2, 2, 2, 2, 2, 2, 7, 2, 2, 2,
            ],
        ),
        // axis 0: 4×2×3
        (
            OneHot {
                outer: 1,
                depth: 4,
                inner: 6,
            },
            [
                7, 2, 2, 2, 7, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 7, 2, 7, 7, 2, 2, 2,
            ],
        ),
        // axis -1: 2×3×4
        (
            OneHot {
                outer: 6,
                depth: 4,
                inner: 1,
            },
            [
                7, 2, 2, 2, 2, 2, 2, 7, 2, 2, 2, 7, 2, 2, 2, 2, 7, 2, 2, 2, 2, 2, 7, 2,
            ],
        ),
    ];
    for (p, want) in cases {
        let mut y = [0i32; 24];
        one_hot(&p, &ind, &v, &mut y).unwrap();
        assert_eq!(y, want, "{p:?}");
    }
    // Float indices: non-integral ones match nothing.
    let mut y = [9.0f64; 16];
    one_hot(
        &OneHot {
            outer: 4,
            depth: 4,
            inner: 1,
        },
        &[1.0f32, -1.0, 1.5, 4.0],
        &[0.0, 1.0],
        &mut y,
    )
    .unwrap();
    let mut want = [0.0; 16];
    want[1] = 1.0;
    want[7] = 1.0;
    assert_eq!(y, want);
    // u64 beyond i64::MAX does not wrap into range.
    let mut y = [0u8; 2];
    one_hot(
        &OneHot {
            outer: 1,
            depth: 2,
            inner: 1,
        },
        &[u64::MAX],
        &[0u8, 1],
        &mut y,
    )
    .unwrap();
    assert_eq!(y, [0, 0]);
}

#[test]
fn top_k_nan_ties_and_order() {
    let nan = f32::NAN;
    let x = [
        3., 1., nan, 3., -0.0, 0.0, 7., nan, 1., 2., 3., 4., 5., 6., 7., 8.,
    ];
    let run = |k: usize, largest: bool| {
        let p = TopK {
            outer: 2,
            len: 8,
            inner: 1,
            k,
            largest,
            sorted: true,
        };
        let mut v = vec![0.0f32; 2 * k];
        let mut i = vec![0i64; 2 * k];
        top_k(&p, &x, &mut v, &mut i);
        (v, i)
    };
    // Bitwise comparison keeps NaN and the sign of zero.
    let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let check = |k, largest, want_v: &[f32], want_i: &[i64]| {
        let (v, i) = run(k, largest);
        assert_eq!(i, want_i, "k {k} largest {largest}");
        assert_eq!(bits(&v), bits(want_v), "k {k} largest {largest}: {v:?}");
    };
    check(3, true, &[nan, nan, 7., 8., 7., 6.], &[2, 7, 6, 7, 6, 5]);
    check(
        8,
        true,
        &[
            nan, nan, 7., 3., 3., 1., -0.0, 0.0, 8., 7., 6., 5., 4., 3., 2., 1.,
        ],
        &[2, 7, 6, 0, 3, 1, 4, 5, 7, 6, 5, 4, 3, 2, 1, 0],
    );
    check(3, false, &[-0.0, 0.0, 1., 1., 2., 3.], &[4, 5, 1, 0, 1, 2]);
    check(
        8,
        false,
        &[
            -0.0, 0.0, 1., 3., 3., 7., nan, nan, 1., 2., 3., 4., 5., 6., 7., 8.,
        ],
        &[4, 5, 1, 0, 3, 6, 2, 7, 0, 1, 2, 3, 4, 5, 6, 7],
    );
    check(0, true, &[], &[]);
}

#[test]
fn top_k_inner_axis_int() {
    // int32 2×3×2, axis 1, k 2.
    let x = [5i32, 1, 2, 2, 5, 3, 0, 9, 0, 9, 1, -9];
    let mut v = [0i32; 8];
    let mut i = [0i64; 8];
    let p = TopK {
        outer: 2,
        len: 3,
        inner: 2,
        k: 2,
        largest: true,
        sorted: true,
    };
    top_k(&p, &x, &mut v, &mut i);
    assert_eq!(v, [5, 3, 5, 2, 1, 9, 0, 9]);
    assert_eq!(i, [0, 2, 2, 1, 2, 0, 0, 1]);
    let p = TopK {
        largest: false,
        ..p
    };
    top_k(&p, &x, &mut v, &mut i);
    assert_eq!(v, [2, 1, 5, 2, 0, -9, 0, 9]);
    assert_eq!(i, [1, 0, 0, 1, 0, 2, 1, 0]);
}

#[test]
fn top_k_matches_a_sort() {
    // A longer row against a stable sort (lower index first among equals).
    let x: Vec<i16> = (0..200)
        .map(|i: i32| ((i * 7919) % 37 - 18) as i16)
        .collect();
    for largest in [true, false] {
        for k in [1, 5, 64, 200] {
            let p = TopK {
                outer: 1,
                len: 200,
                inner: 1,
                k,
                largest,
                sorted: true,
            };
            let mut v = vec![0i16; k];
            let mut i = vec![0i64; k];
            top_k(&p, &x, &mut v, &mut i);
            let mut order: Vec<usize> = (0..200).collect();
            if largest {
                order.sort_by(|&a, &b| x[b].cmp(&x[a]));
            } else {
                order.sort_by(|&a, &b| x[a].cmp(&x[b]));
            }
            let want: Vec<i64> = order[..k].iter().map(|&j| j as i64).collect();
            assert_eq!(i, want, "k {k} largest {largest}");
            assert_eq!(v, want.iter().map(|&j| x[j as usize]).collect::<Vec<_>>());
        }
    }
}

#[test]
fn eye_like_diagonals() {
    let mut y = [9i8; 12];
    eye_like(
        &EyeLike {
            rows: 3,
            cols: 4,
            k: 1,
        },
        &mut y,
    );
    assert_eq!(y, [0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
    let mut y = [9.0f64; 6];
    eye_like(
        &EyeLike {
            rows: 3,
            cols: 2,
            k: -1,
        },
        &mut y,
    );
    assert_eq!(y, [0., 0., 1., 0., 0., 1.]);
    let mut y = [f16::ONE; 6];
    eye_like(
        &EyeLike {
            rows: 2,
            cols: 3,
            k: 5,
        },
        &mut y,
    );
    assert_eq!(y, [f16::ZERO; 6]);
    let mut y = [Bool(0); 4];
    eye_like(
        &EyeLike {
            rows: 2,
            cols: 2,
            k: 0,
        },
        &mut y,
    );
    assert_eq!(y, [Bool(1), Bool(0), Bool(0), Bool(1)]);
}
