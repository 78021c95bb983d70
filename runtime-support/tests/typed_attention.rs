//! The Attention kernel against the onnx reference
//! (`onnx.reference.ops.op_attention._compute_attention`, onnx wheel pinned in
//! `.venv`); the expected values were printed by that reference for the inputs below
//! (two-decimal values from `np.random.RandomState(seed).uniform(-1, 1)`).

use kiln_runtime::typed::params::{Attention, AttentionMask, QkOutput, SoftmaxPrecision};
use kiln_runtime::typed::{Bool, attention};

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= 1e-5 + 1e-4 * w.abs()
        };
        assert!(ok, "element {i}: got {g}, want {w}");
    }
}

/// 4-D contiguous strides (batch, head, position) for `heads` heads of `len`
/// positions of `size` features.
fn strides4(heads: usize, len: usize, size: usize) -> [usize; 3] {
    [heads * len * size, len * size, size]
}

fn base(batch: usize, q_heads: usize, kv_heads: usize, q_len: usize, kv_len: usize) -> Attention {
    Attention {
        batch,
        q_heads,
        kv_heads,
        q_len,
        kv_len,
        past_len: 0,
        head_size: 0,
        v_head_size: 0,
        q_strides: [0; 3],
        k_strides: [0; 3],
        v_strides: [0; 3],
        y_strides: [0; 3],
        mask: AttentionMask::None,
        mask_strides: [0; 3],
        mask_len: 0,
        scale_sqrt: 0.0,
        softcap: 0.0,
        is_causal: false,
        left_window: -1,
        right_window: -1,
        nonpad: false,
        softmax: SoftmaxPrecision::F32,
        qk_output: QkOutput::None,
        present: false,
    }
}

/// 4-D grouped-query attention (4 query heads on 2 key/value heads) with a one-step
/// cache, `is_causal` (offset by the cache), a float mask of 2 columns padded to the 3
/// keys, and `qk_matmul_output_mode = 2`.
#[test]
fn gqa_cache_causal_padded_mask() {
    let (d, dv) = (3, 2);
    let p = Attention {
        past_len: 1,
        head_size: d,
        v_head_size: dv,
        q_strides: strides4(4, 2, d),
        k_strides: strides4(2, 2, d),
        v_strides: strides4(2, 2, dv),
        y_strides: strides4(4, 2, dv),
        mask: AttentionMask::Add,
        mask_strides: [0, 0, 2],
        mask_len: 2,
        scale_sqrt: (1.0 / (d as f64).sqrt()).sqrt(),
        is_causal: true,
        qk_output: QkOutput::WithBias,
        present: true,
        ..base(1, 4, 2, 2, 2)
    };
    let mut y = [0f32; 16];
    let (mut pk, mut pv, mut qk) = ([0f32; 18], [0f32; 12], [0f32; 24]);
    let mut scratch = vec![0f64; p.scratch_len()];
    attention::<f32, f32, f32>(
        &p,
        &Q1,
        &K1,
        &V1,
        &M1,
        &PK1,
        &PV1,
        &[],
        &mut y,
        &mut pk,
        &mut pv,
        &mut qk,
        &mut scratch,
    );
    close(&y, &Y1);
    close(&pk, &PRESENT_K1);
    close(&pv, &PRESENT_V1);
    close(&qk, &QK1);
}

/// 3-D inputs (2 heads), a bool mask whose second row allows nothing (that row is
/// zero, probabilities included), softcap 1.5, scale 0.75, `qk_matmul_output_mode = 3`.
#[test]
fn three_d_bool_mask_fully_masked_row_softcap() {
    let (h, d) = (2, 2);
    let p = Attention {
        head_size: d,
        v_head_size: d,
        q_strides: [2 * h * d, d, h * d],
        k_strides: [3 * h * d, d, h * d],
        v_strides: [3 * h * d, d, h * d],
        y_strides: [2 * h * d, d, h * d],
        mask: AttentionMask::Bool,
        mask_strides: [0, 0, 3],
        mask_len: 3,
        scale_sqrt: 0.75f32.sqrt() as f64,
        softcap: 1.5,
        qk_output: QkOutput::Softmax,
        ..base(1, h, h, 2, 3)
    };
    let mask = M2.map(Bool);
    let mut y = [0f32; 8];
    let mut qk = [0f32; 12];
    let mut scratch = vec![0f64; p.scratch_len()];
    attention::<f32, f32, Bool>(
        &p,
        &Q2,
        &K2,
        &V2,
        &mask,
        &[],
        &[],
        &[],
        &mut y,
        &mut [],
        &mut [],
        &mut qk,
        &mut scratch,
    );
    close(&y, &Y2);
    close(&qk, &QK2);
}

/// `nonpad_kv_seqlen = [4, 2]` with `is_causal` and `left_window_size = 1`: batch 1's
/// offset is 2 - 3 = -1, so its first query row sees no key and is zero.
#[test]
fn nonpad_causal_window() {
    let d = 2;
    let p = Attention {
        head_size: d,
        v_head_size: d,
        q_strides: strides4(1, 3, d),
        k_strides: strides4(1, 4, d),
        v_strides: strides4(1, 4, d),
        y_strides: strides4(1, 3, d),
        scale_sqrt: (1.0 / (d as f64).sqrt()).sqrt(),
        is_causal: true,
        left_window: 1,
        nonpad: true,
        ..base(2, 1, 1, 3, 4)
    };
    let mut y = [0f32; 12];
    let mut scratch = vec![0f64; p.scratch_len()];
    attention::<f32, f32, f32>(
        &p,
        &Q3,
        &K3,
        &V3,
        &[],
        &[],
        &[],
        &[4, 2],
        &mut y,
        &mut [],
        &mut [],
        &mut [],
        &mut scratch,
    );
    close(&y, &Y3);

    // The same in f64 (softmax in f64) agrees.
    let p64 = Attention {
        softmax: SoftmaxPrecision::F64,
        ..p
    };
    let widen = |x: &[f32]| x.iter().map(|&v| v as f64).collect::<Vec<f64>>();
    let mut y64 = [0f64; 12];
    attention::<f64, f64, f64>(
        &p64,
        &widen(&Q3),
        &widen(&K3),
        &widen(&V3),
        &[],
        &[],
        &[],
        &[4, 2],
        &mut y64,
        &mut [],
        &mut [],
        &mut [],
        &mut scratch,
    );
    close(&y64.map(|v| v as f32), &Y3);
}

// case 1
const Q1: [f32; 24] = [
    -0.17, 0.44, -1.0, -0.4, -0.71, -0.82, -0.63, -0.31, -0.21, 0.08, -0.16, 0.37, -0.59, 0.76,
    -0.95, 0.34, -0.17, 0.12, -0.72, -0.6, 0.6, 0.94, -0.37, 0.38,
];
const K1: [f32; 12] = [
    -0.13, -0.95, 0.1, -0.13, -0.16, -0.34, -0.59, 0.24, -0.4, -0.47, 0.24, 0.06,
];
const V1: [f32; 8] = [0.1, 0.42, -0.42, 0.02, 0.79, 0.79, -0.75, -0.59];
const PK1: [f32; 6] = [0.93, 0.09, 0.95, 0.43, 0.4, -0.57];
const PV1: [f32; 4] = [-0.56, 0.74, -0.59, 0.84];
const M1: [f32; 4] = [0.0, -0.5, 0.25, 0.0];
const Y1: [f32; 16] = [
    -0.25788584,
    0.5935204,
    -0.1013105,
    0.51760507,
    -0.20123956,
    0.56605554,
    -0.2926667,
    0.61038387,
    -0.008121251,
    0.81891745,
    -0.043712452,
    0.82020694,
    0.11321929,
    0.8145211,
    -0.14186315,
    0.82376313,
];
const PRESENT_K1: [f32; 18] = [
    0.93, 0.09, 0.95, -0.13, -0.95, 0.1, -0.13, -0.16, -0.34, 0.43, 0.4, -0.57, -0.59, 0.24, -0.4,
    -0.47, 0.24, 0.06,
];
const PRESENT_V1: [f32; 12] = [
    -0.56, 0.74, 0.1, 0.42, -0.42, 0.02, -0.59, 0.84, 0.79, 0.79, -0.75, -0.59,
];
const QK1: [f32; 24] = [
    -0.6168987,
    -0.78630793,
    f32::NEG_INFINITY,
    -0.45142275,
    0.3721022,
    f32::NEG_INFINITY,
    -0.46955892,
    -0.29480976,
    f32::NEG_INFINITY,
    0.4875796,
    0.10311475,
    f32::NEG_INFINITY,
    0.34167588,
    0.025677383,
    f32::NEG_INFINITY,
    0.25565803,
    -0.16708514,
    f32::NEG_INFINITY,
    -0.5147655,
    -0.47644413,
    f32::NEG_INFINITY,
    0.27286306,
    -0.45922434,
    f32::NEG_INFINITY,
];
// case 2
const Q2: [f32; 8] = [0.79, -0.34, 0.64, -0.92, -0.78, 0.19, 0.06, -0.16];
const K2: [f32; 12] = [
    -0.85, 0.56, -0.12, 0.45, 0.96, 0.08, 0.0, -0.86, -0.46, -0.0, 0.36, 0.61,
];
const V2: [f32; 12] = [
    0.75, 0.94, 0.74, 0.06, -0.53, -0.98, -0.14, -0.2, 0.05, -0.04, 0.11, 0.09,
];
const M2: [u8; 6] = [1, 0, 1, 0, 0, 0];
const Y2: [f32; 8] = [
    0.3411376, 0.36759263, 0.40690392, 0.07586172, 0.0, 0.0, 0.0, 0.0,
];
const QK2: [f32; 12] = [
    0.41591084, 0.0, 0.58408916, 0.0, 0.0, 0.0, 0.47127604, 0.0, 0.528724, 0.0, 0.0, 0.0,
];
// case 3
const Q3: [f32; 12] = [
    -0.98, 0.0, -0.01, -0.73, -0.72, -0.56, -0.16, -0.5, -0.83, -0.31, -0.67, 0.76,
];
const K3: [f32; 16] = [
    0.54, -0.96, 0.27, 0.5, -0.0, -0.55, -0.6, 0.52, -0.66, -0.82, 0.37, 0.91, -0.99, 0.02, 0.63,
    0.23,
];
const V3: [f32; 16] = [
    -0.64, -0.96, -0.07, 0.45, -0.16, -0.03, -0.97, -0.03, 0.88, 0.7, 0.46, -0.78, 0.79, 0.71,
    -0.67, 0.26,
];
const Y3: [f32; 12] = [
    -0.3284157,
    -0.18923877,
    -0.12694485,
    0.14629406,
    -0.5410866,
    -0.029999997,
    0.0,
    0.0,
    0.88,
    0.7,
    0.6243582,
    -0.20083317,
];
