//! Typed resampling kernels against the ONNX reference implementation (onnx
//! `onnx.reference.ops`: `op_resize._interpolate_nd`, `GridSample`, `AffineGrid`,
//! `Col2Im`): every expected literal below was printed by the reference on the same
//! inputs.

use kiln_runtime::typed::params::*;
use kiln_runtime::typed::*;

/// A shape padded to `RANK` entries with 1.
fn sh(s: &[usize]) -> [usize; RANK] {
    let mut a = [1; RANK];
    a[..s.len()].copy_from_slice(s);
    a
}

fn close(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "length");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-5 + 1e-5 * w.abs(),
            "element {k}: got {g}, want {w}\n got {got:?}"
        );
    }
}

/// 2×2 → 3×3 linear, align_corners: per axis the coordinates 0, 0.5, 1 (the table the
/// compiler builds: taps at 0 and 1).
fn align_corners_3x3() -> (Resize, Vec<i64>, Vec<f64>) {
    let p = Resize {
        rank: 2,
        in_shape: sh(&[2, 2]),
        out_shape: sh(&[3, 3]),
        taps: sh(&[2, 2]),
        offset: {
            let mut o = [0; RANK];
            o[1] = 6;
            o
        },
        extrapolation: 0.0,
    };
    let row_i = [0, 1, 0, 1, 0, 1];
    let row_w = [1.0, 0.0, 0.5, 0.5, 0.0, 1.0];
    let idx = [row_i, row_i].concat();
    let w = [row_w, row_w].concat();
    (p, idx, w)
}

#[test]
fn resize_linear_align_corners() {
    // _interpolate_nd([[1,2],[3,4]], _linear_coeffs, scale_factors=[1.5,1.5],
    //                 coordinate_transformation_mode="align_corners")
    let (p, idx, w) = align_corners_3x3();
    assert_eq!(p.table_len(), 12);
    let mut out = [0f32; 9];
    resize(&p, &[1f32, 2., 3., 4.], &idx, &w, &mut out);
    close(&out, &[1.0, 1.5, 2.0, 2.0, 2.5, 3.0, 3.0, 3.5, 4.0]);
}

#[test]
fn resize_integers_round_half_to_even() {
    // The same on int32: saturate_cast rounds half to even (1.5 → 2, 2.5 → 2, 3.5 → 4).
    let (p, idx, w) = align_corners_3x3();
    let mut out = [0i32; 9];
    resize(&p, &[1i32, 2, 3, 4], &idx, &w, &mut out);
    assert_eq!(out, [1, 2, 2, 2, 2, 3, 3, 4, 4]);
}

#[test]
fn resize_nearest_copies_and_extrapolates() {
    // One tap per position copies exactly (int64 beyond 2^53); index -1 on either axis
    // gives the extrapolation value (tf_crop_and_resize).
    let p = Resize {
        rank: 2,
        in_shape: sh(&[2, 2]),
        out_shape: sh(&[2, 3]),
        taps: sh(&[1, 1]),
        offset: {
            let mut o = [0; RANK];
            o[1] = 2;
            o
        },
        extrapolation: -7.0,
    };
    let idx = [1, -1, 1, 0, -1];
    let w = [1.0; 5];
    let big = (1i64 << 60) + 3;
    let x = [big, 2, 3, big + 1];
    let mut out = [0i64; 6];
    resize(&p, &x, &idx, &w, &mut out);
    assert_eq!(out, [big + 1, 3, -7, -7, -7, -7]);
}

const X34: [f32; 12] = [1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12.];
/// A 1×2×3×2 grid (x, y pairs), some points outside [-1, 1].
const GRID: [f32; 12] = [
    -1.0, -1.0, -0.3, 0.2, 0.9, -0.7, 1.4, 1.1, -1.6, 0.45, 0.05, 2.3,
];

fn gs(mode: GridSampleMode, padding: GridPadding, align_corners: bool) -> Vec<f32> {
    let p = GridSample {
        n: 1,
        c: 1,
        rank: 2,
        in_dims: sh(&[3, 4]),
        out_dims: sh(&[2, 3]),
        mode,
        padding,
        align_corners,
    };
    let mut out = vec![0f32; 6];
    grid_sample(&p, &X34, &GRID, &mut out);
    out
}

#[test]
fn grid_sample_every_mode_and_padding() {
    // GridSample()._run(arange(1,13).reshape(1,1,3,4), GRID.reshape(1,2,3,2), ...)
    use GridPadding::*;
    use GridSampleMode::*;
    #[rustfmt::skip]
    let cases: [(GridSampleMode, GridPadding, bool, [f64; 6]); 18] = [
        (Linear, Zeros, false, [0.25, 7.100000381469727, 2.6600003242492676, 0.0, 0.0, 0.0]),
        (Linear, Zeros, true, [1.0, 6.849999904632568, 5.050000190734863, 4.319998741149902, 0.679999828338623, 0.0]),
        (Linear, Border, false, [1.0, 7.100000381469727, 4.0, 12.0, 7.700000762939453, 10.600000381469727]),
        (Linear, Border, true, [1.0, 6.849999904632568, 5.050000190734863, 12.0, 6.800000190734863, 10.575000762939453]),
        (Linear, Reflection, false, [1.0, 7.100000381469727, 4.0, 11.699999809265137, 8.40000057220459, 4.8000006675720215]),
        (Linear, Reflection, true, [1.0, 6.849999904632568, 5.050000190734863, 11.0, 7.700000286102295, 5.375]),
        (Nearest, Zeros, false, [1.0, 6.0, 4.0, 0.0, 0.0, 0.0]),
        (Nearest, Zeros, true, [1.0, 6.0, 4.0, 0.0, 0.0, 0.0]),
        (Nearest, Border, false, [1.0, 6.0, 4.0, 12.0, 9.0, 11.0]),
        (Nearest, Border, true, [1.0, 6.0, 4.0, 12.0, 5.0, 11.0]),
        (Nearest, Reflection, false, [1.0, 6.0, 4.0, 12.0, 10.0, 7.0]),
        (Nearest, Reflection, true, [1.0, 6.0, 4.0, 11.0, 6.0, 7.0]),
        (Cubic, Zeros, false, [0.015625, 7.927136421203613, 2.778935432434082, -0.46681222319602966, -0.4247872531414032, 0.0]),
        (Cubic, Zeros, true, [1.0, 7.401083469390869, 5.678478717803955, 4.434591770172119, 0.6433880925178528, -1.1638706922531128]),
        (Cubic, Border, false, [0.53125, 7.414244651794434, 3.9748740196228027, 12.0, 7.990673065185547, 10.575996398925781]),
        (Cubic, Border, true, [1.0, 7.159373760223389, 4.813657283782959, 12.0, 7.183624267578125, 10.556673049926758]),
        (Cubic, Reflection, false, [0.0625, 7.414244651794434, 4.01499605178833, 12.450752258300781, 8.601425170898438, 4.392375469207764]),
        (Cubic, Reflection, true, [1.0, 7.255372524261475, 4.453939437866211, 11.510004997253418, 8.368249893188477, 4.810675144195557]),
    ];
    for (mode, padding, ac, want) in cases {
        let got = gs(mode, padding, ac);
        for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 1e-4 + 1e-4 * w.abs(),
                "{mode:?} {padding:?} align_corners={ac} element {k}: got {got:?}, want {want:?}"
            );
        }
    }
}

#[test]
fn affine_grid_2d() {
    // AffineGrid()._run([[[1, .2, .1], [-.3, .9, .5]]], size=[1, 1, 2, 3], align_corners)
    let theta = [1.0f32, 0.2, 0.1, -0.3, 0.9, 0.5];
    let want: [[f64; 12]; 2] = [
        [
            -0.6666666865348816,
            0.2500000298023224,
            0.0,
            0.050000011920928955,
            0.6666666865348816,
            -0.14999999105930328,
            -0.46666666865348816,
            1.149999976158142,
            0.20000000298023224,
            0.949999988079071,
            0.8666666746139526,
            0.75,
        ],
        [
            -1.100000023841858,
            -0.09999996423721313,
            -0.10000000149011612,
            -0.3999999761581421,
            0.8999999761581421,
            -0.699999988079071,
            -0.699999988079071,
            1.7000000476837158,
            0.30000001192092896,
            1.399999976158142,
            1.2999999523162842,
            1.0999999046325684,
        ],
    ];
    for (ac, want) in [false, true].into_iter().zip(want) {
        let p = AffineGrid {
            n: 1,
            rank: 2,
            size: [2, 3, 1],
            align_corners: ac,
        };
        let mut out = [0f32; 12];
        affine_grid(&p, &theta, &mut out);
        close(&out, &want);
    }
}

#[test]
fn col2im_asymmetric_pads() {
    // Col2Im()._run(arange(1, 97).reshape(1, 8, 12), image_shape=[3, 4],
    //               block_shape=[2, 2], pads=[1, 0, 0, 1], strides=[1, 1])
    let p = Col2Im {
        n: 1,
        c: 2,
        rank: 2,
        image: sh(&[3, 4]),
        block: sh(&[2, 2]),
        cols: sh(&[3, 4]),
        strides: sh(&[1, 1]),
        dilations: sh(&[1, 1]),
        pads: [1, 0, 0, 0, 0, 0, 0, 0],
    };
    let x: Vec<f32> = (1..=96).map(|v| v as f32).collect();
    let mut out = [0f32; 24];
    col2im(&p, &x, &mut out);
    close(
        &out,
        &[
            30.0, 86.0, 90.0, 94.0, 38.0, 102.0, 106.0, 110.0, 33.0, 79.0, 81.0, 83.0, 126.0,
            278.0, 282.0, 286.0, 134.0, 294.0, 298.0, 302.0, 81.0, 175.0, 177.0, 179.0,
        ],
    );
}
