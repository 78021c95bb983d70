//! Typed convolution, pooling and quantization kernels against the ONNX reference
//! implementation: every expected literal below was printed by `onnx.reference`
//! (ReferenceEvaluator, float64 inputs for the float kernels) on the same inputs.

use kiln_runtime::typed::params::*;
use kiln_runtime::typed::*;

fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "element {i}: {g} vs {w}"
        );
    }
}

fn arr(v: &[usize]) -> [usize; RANK] {
    let mut a = [1; RANK];
    a[..v.len()].copy_from_slice(v);
    a
}

#[allow(clippy::too_many_arguments)] // one argument per field of the geometry, as the tests read
fn geom(
    n: usize,
    c_in: usize,
    c_out: usize,
    group: usize,
    inp: &[usize],
    out: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[isize],
) -> ConvGeom {
    let mut p = [0isize; RANK];
    p[..pads.len()].copy_from_slice(pads);
    ConvGeom {
        n,
        c_in,
        c_out,
        group,
        dims: inp.len(),
        in_shape: arr(inp),
        out_shape: arr(out),
        kernel: arr(kernel),
        strides: arr(strides),
        dilations: arr(dilations),
        pads: p,
    }
}

#[test]
fn conv_1d_group_dilation_stride_bias() {
    // x = (arange(56) % 5 - 2) / 2 as [2, 4, 7]; w = (arange(24) % 7 - 3) / 4 as
    // [4, 2, 3]; group 2, dilations [2], pads [1, 2], strides [2].
    let x: Vec<f64> = (0..56).map(|i| ((i % 5) as f64 - 2.0) / 2.0).collect();
    let w: Vec<f64> = (0..24).map(|i| ((i % 7) as f64 - 3.0) / 4.0).collect();
    let b = [0.5, -1.0, 0.25, 2.0];
    let p = ConvNd {
        geom: geom(2, 4, 4, 2, &[7], &[3], &[3], &[2], &[2], &[1]),
        activation: ConvActivation::None,
    };
    let mut y = vec![0.0; 24];
    conv_nd(&p, &x, &w, &b, &mut y);
    let want = [
        0.25, 0.625, 0.625, -1.125, -1.375, 0.375, -0.5, -1.25, 0.625, 1.25, 2.125, 2.0, 0.25,
        -0.5, 0.375, -1.375, -0.25, -1.875, 1.625, 0.25, -0.5, 2.0, 2.125, 1.25,
    ];
    close(&y, &want, 1e-12);
    // The same in float16 (every value here is exact in half precision).
    let xh: Vec<half::f16> = x.iter().map(|&v| half::f16::from_f64(v)).collect();
    let wh: Vec<half::f16> = w.iter().map(|&v| half::f16::from_f64(v)).collect();
    let bh: Vec<half::f16> = b.iter().map(|&v| half::f16::from_f64(v)).collect();
    let mut yh = vec![half::f16::ZERO; 24];
    conv_nd(&p, &xh, &wh, &bh, &mut yh);
    let yh: Vec<f64> = yh.iter().map(|v| v.to_f64()).collect();
    close(&yh, &want, 1e-12);
}

#[test]
fn conv_3d_asymmetric_pads() {
    // x = (arange(72) % 7 - 3) / 3 as [1, 2, 3, 4, 3]; w = (arange(32) % 5 - 2) / 2 as
    // [2, 2, 2, 2, 2]; pads [1, 0, 1, 0, 1, 1].
    let x: Vec<f64> = (0..72).map(|i| ((i % 7) as f64 - 3.0) / 3.0).collect();
    let w: Vec<f64> = (0..32).map(|i| ((i % 5) as f64 - 2.0) / 2.0).collect();
    let p = ConvNd {
        geom: geom(
            1,
            2,
            2,
            1,
            &[3, 4, 3],
            &[3, 4, 4],
            &[2, 2, 2],
            &[1, 1, 1],
            &[1, 1, 1],
            &[1, 0, 1],
        ),
        activation: ConvActivation::None,
    };
    let mut y = vec![0.0; 96];
    conv_nd(&p, &x, &w, &[0.0, 0.0], &mut y);
    let t = 1.0 / 3.0;
    let s = 1.0 / 6.0;
    // The reference's first 12 and last 12 values.
    let head = [
        t,
        -5.0 * s,
        -5.0 * s,
        t,
        7.0 * s,
        -5.0 * s,
        t,
        2.0 * t,
        -1.5,
        1.5,
        -5.0 * s,
        -s,
    ];
    let tail = [
        -1.0,
        -4.0 * t,
        5.0 * s,
        7.0 * s,
        -5.0 * t,
        -2.0 * t,
        8.0 * t,
        -1.0,
        4.0 * t,
        -1.5,
        -5.0 * t,
        5.0 * s,
    ];
    close(&y[..12], &head, 1e-12);
    close(&y[84..], &tail, 1e-12);
}

#[test]
fn conv_transpose_1d_output_padding() {
    // x [1, 2, 3], w [2, 2, 3], strides [2], output_padding [1], pads [1, 0]: output 7.
    let x = [1.0, 2.0, -1.0, 0.5, 0.0, 3.0];
    let w = [1.0, -1.0, 2.0, 0.5, 0.5, 1.0, 2.0, 0.0, -1.0, 1.0, 1.0, 1.0];
    let p = ConvTransposeNd {
        geom: geom(1, 2, 2, 1, &[3], &[7], &[3], &[2], &[1], &[1]),
    };
    let mut y = vec![0.0; 14];
    conv_transpose(&p, &x, &w, &[0.0, 0.0], &mut y);
    let want = [
        -1.0, 3.5, -2.0, 9.0, 1.0, -5.0, 0.0, 1.0, 2.5, 1.0, 4.5, 2.5, 2.0, 0.0,
    ];
    close(&y, &want, 1e-12);
}

fn pool1d(op: PoolOp, kernel: usize, stride: usize, pads: [usize; 2], out: usize) -> PoolNd {
    PoolNd {
        op,
        planes: 1,
        dims: 1,
        in_shape: arr(&[8]),
        out_shape: arr(&[out]),
        kernel: arr(&[kernel]),
        strides: arr(&[stride]),
        dilations: arr(&[1]),
        pads_begin: arr(&[pads[0]]),
        pads_end: arr(&[pads[1]]),
        column_major: false,
    }
}

#[test]
fn average_and_lp_pool_1d() {
    let x = [3.0, -1.0, 4.0, 1.0, -5.0, 9.0, 2.0, -6.0];
    let mut y = vec![0.0; 4];
    let inc = PoolOp::Average {
        count_include_pad: true,
    };
    pool(&pool1d(inc, 3, 2, [1, 1], 4), &x, &mut y);
    close(&y, &[2.0 / 3.0, 4.0 / 3.0, 5.0 / 3.0, 5.0 / 3.0], 1e-12);
    let exc = PoolOp::Average {
        count_include_pad: false,
    };
    pool(&pool1d(exc, 3, 2, [1, 1], 4), &x, &mut y);
    close(&y, &[1.0, 4.0 / 3.0, 5.0 / 3.0, 5.0 / 3.0], 1e-12);
    let mut y = vec![0.0; 3];
    pool(&pool1d(PoolOp::Lp { p: 3 }, 3, 2, [0, 0], 3), &x, &mut y);
    close(&y, &[4.51435744, 5.74889708, 9.51705155], 1e-8);
}

#[test]
fn max_pool_indices_column_major_and_int8() {
    let x = [1.0, 5.0, 2.0, 7.0, 3.0, 8.0, 0.0, 9.0, 4.0];
    let p = PoolNd {
        op: PoolOp::Max,
        planes: 1,
        dims: 2,
        in_shape: arr(&[3, 3]),
        out_shape: arr(&[2, 2]),
        kernel: arr(&[2, 2]),
        strides: arr(&[1, 1]),
        dilations: arr(&[1, 1]),
        pads_begin: [0; RANK],
        pads_end: [0; RANK],
        column_major: true,
    };
    let (mut y, mut i) = (vec![0.0; 4], vec![0i64; 4]);
    max_pool_indices(&p, &x, &mut y, &mut i);
    assert_eq!(y, [7.0, 8.0, 9.0, 9.0]);
    // Column-major positions (h + w·H), as the reference's `_max_pool` computes them
    // for `storage_order = 1` (its unit-stride path ignores the attribute and gives
    // the row-major [3, 5, 7, 7]).
    assert_eq!(i, [1, 7, 5, 5]);
    let xi: Vec<i8> = x.iter().map(|&v| v as i8 - 4).collect();
    let mut yi = vec![0i8; 4];
    pool(&p, &xi, &mut yi);
    assert_eq!(yi, [3, 4, 5, 5]);
}

#[test]
fn max_unpool_into_a_larger_output() {
    // The node test's case: indices in the 4×4 default shape, output 5×5.
    let p = MaxUnpool {
        rank: 4,
        inferred: arr(&[1, 1, 4, 4]),
        out_shape: arr(&[1, 1, 5, 5]),
    };
    let mut y = vec![0.0f32; 25];
    max_unpool(&p, &[5.0, 6.0, 7.0, 8.0], &[5, 7, 13, 15], &mut y).unwrap();
    let mut want = [0.0f32; 25];
    (want[6], want[8], want[16], want[18]) = (5.0, 6.0, 7.0, 8.0);
    assert_eq!(y, want);
    assert!(max_unpool(&p, &[1.0], &[16], &mut y[..25]).is_err());
}

#[test]
fn quantize_per_axis_and_blocked() {
    let x: [f32; 8] = [-1.5, 0.5, 2.5, 300.0, -300.0, 3.5, -0.5, 1.0];
    let axis = Quantize {
        outer: 1,
        len: 2,
        inner: 4,
        mode: QuantMode::Axis,
        precision: Precision::F32,
    };
    let mut y = vec![0i16; 8];
    quantize_linear(&axis, &x, &[0.5f32, 2.0], &[128i16, -3], &mut y);
    assert_eq!(y, [125, 129, 133, 728, -153, -1, -3, -3]);
    let block = Quantize {
        outer: 2,
        len: 4,
        inner: 1,
        mode: QuantMode::Block { size: 2 },
        precision: Precision::F32,
    };
    let mut y = vec![0i8; 8];
    quantize_linear(
        &block,
        &x,
        &[1.0f32, 0.5, 2.0, 0.25],
        &[0i8, 1, 2, 3],
        &mut y,
    );
    assert_eq!(y, [-2, 0, 6, 127, -128, 4, 1, 7]);
}

#[test]
fn dequantize_per_axis() {
    let p = Quantize {
        outer: 2,
        len: 3,
        inner: 1,
        mode: QuantMode::Axis,
        precision: Precision::F32,
    };
    let mut y = vec![0.0f32; 6];
    dequantize_linear(
        &p,
        &[0u8, 255, 128, 7, 1, 200],
        &[0.1f32, 2.0, 0.5],
        &[128u8, 0, 1],
        &mut y,
    );
    assert_eq!(y, [-12.8, 510.0, 63.5, -12.1, 2.0, 99.5]);
}

#[test]
fn dynamic_quantize() {
    // The node test's inputs (test_dynamicquantizelinear): scale 0.0196078, zero point 153.
    let x: [f32; 6] = [0.0, 2.0, -3.0, -2.5, 1.34, 0.5];
    let (mut y, mut s, mut z) = (vec![0u8; 6], [0f32], [0u8]);
    dynamic_quantize_linear(&x, &mut y, &mut s, &mut z);
    assert_eq!(y, [153, 255, 0, 26, 221, 179]);
    assert!((s[0] - 0.019_607_844).abs() < 1e-9);
    assert_eq!(z, [153]);
}

#[test]
fn qlinear_matmul_and_conv_integer() {
    let mm = MatMul {
        m: 2,
        n: 3,
        k: 4,
        batch_rank: 0,
        batch_shape: [1; RANK],
        a_batch_strides: [0; RANK],
        b_batch_strides: [0; RANK],
    };
    let p = QMatMul {
        mm,
        a_scale_rows: false,
        a_zp_rows: false,
        b_scale_cols: false,
        b_zp_cols: false,
    };
    let a = [208u8, 236, 0, 238, 3, 214, 255, 29];
    let b = [152u8, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247];
    let mut y = vec![0u8; 6];
    qlinear_matmul(
        &p,
        &a,
        &[0.0066f32],
        &[113u8],
        &b,
        &[0.00705f32],
        &[114u8],
        &[0.0107f32],
        &[118u8],
        &mut y,
    );
    assert_eq!(y, [168, 115, 255, 1, 66, 151]);

    // x [1, 1, 3, 3], w [2, 1, 2, 2], pads 1, x_zp 1, w_zp per channel [0, 1].
    let x = [2u8, 3, 4, 5, 6, 7, 8, 9, 10];
    let w = [1u8, 1, 1, 1, 2, 0, 0, 3];
    let p = ConvInteger {
        geom: geom(
            1,
            1,
            2,
            1,
            &[3, 3],
            &[4, 4],
            &[2, 2],
            &[1, 1],
            &[1, 1],
            &[1, 1],
        ),
        w_zp_per_channel: true,
    };
    let mut y = vec![0i32; 32];
    conv_integer(&p, &x, &w, &[1u8], &[0u8, 1], &mut y);
    assert_eq!(
        y,
        [
            1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9, 2, 3, 4, -3, 7, 5, 6, -3, 10,
            8, 9, -3, -7, -1, -1, 9
        ]
    );
}

#[test]
fn deform_conv_with_mask_and_bias() {
    // x = arange(9) as [1, 1, 3, 3], w [[1, 2], [-1, 0.5]], offsets
    // (arange(32) % 5 - 2)·0.3 as [1, 8, 2, 2], mask (arange(16) % 3)·0.5, bias 0.25.
    // The reference samples through GridSample's normalised coordinates, which costs
    // it about 1e-7.
    let x: Vec<f64> = (0..9).map(f64::from).collect();
    let w = [1.0, 2.0, -1.0, 0.5];
    let off: Vec<f64> = (0..32).map(|i| ((i % 5) as f64 - 2.0) * 0.3).collect();
    let mask: Vec<f64> = (0..16).map(|i| (i % 3) as f64 * 0.5).collect();
    let p = DeformConv {
        n: 1,
        c_in: 1,
        c_out: 1,
        group: 1,
        offset_group: 1,
        in_hw: [3, 3],
        out_hw: [2, 2],
        kernel: [2, 2],
        strides: [1, 1],
        dilations: [1, 1],
        pads: [0, 0],
        has_mask: true,
    };
    let mut y = vec![0.0; 4];
    deform_conv(&p, &x, &w, &off, &[0.25], &mask, &mut y);
    close(
        &y,
        &[
            1.3100001001358024,
            6.030000546276578,
            2.999999971687796,
            0.8299992632865951,
        ],
        1e-6,
    );
}
