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
    -0.17000000178813934,
    0.4399999976158142,
    -1.0,
    -0.4000000059604645,
    -0.7099999785423279,
    -0.8199999928474426,
    -0.6299999952316284,
    -0.3100000023841858,
    -0.20999999344348907,
    0.07999999821186066,
    -0.1599999964237213,
    0.3700000047683716,
    -0.5899999737739563,
    0.7599999904632568,
    -0.949999988079071,
    0.3400000035762787,
    -0.17000000178813934,
    0.11999999731779099,
    -0.7200000286102295,
    -0.6000000238418579,
    0.6000000238418579,
    0.9399999976158142,
    -0.3700000047683716,
    0.3799999952316284,
];
const K1: [f32; 12] = [
    -0.12999999523162842,
    -0.949999988079071,
    0.10000000149011612,
    -0.12999999523162842,
    -0.1599999964237213,
    -0.3400000035762787,
    -0.5899999737739563,
    0.23999999463558197,
    -0.4000000059604645,
    -0.4699999988079071,
    0.23999999463558197,
    0.05999999865889549,
];
const V1: [f32; 8] = [
    0.10000000149011612,
    0.41999998688697815,
    -0.41999998688697815,
    0.019999999552965164,
    0.7900000214576721,
    0.7900000214576721,
    -0.75,
    -0.5899999737739563,
];
const PK1: [f32; 6] = [
    0.9300000071525574,
    0.09000000357627869,
    0.949999988079071,
    0.4300000071525574,
    0.4000000059604645,
    -0.5699999928474426,
];
const PV1: [f32; 4] = [
    -0.5600000023841858,
    0.7400000095367432,
    -0.5899999737739563,
    0.8399999737739563,
];
const M1: [f32; 4] = [0.0, -0.5, 0.25, 0.0];
const Y1: [f32; 16] = [
    -0.2578858435153961,
    0.5935204029083252,
    -0.10131049901247025,
    0.5176050662994385,
    -0.20123955607414246,
    0.5660555362701416,
    -0.2926667034626007,
    0.6103838682174683,
    -0.008121251128613949,
    0.818917453289032,
    -0.04371245205402374,
    0.8202069401741028,
    0.11321929097175598,
    0.814521074295044,
    -0.141863152384758,
    0.8237631320953369,
];
const PRESENT_K1: [f32; 18] = [
    0.9300000071525574,
    0.09000000357627869,
    0.949999988079071,
    -0.12999999523162842,
    -0.949999988079071,
    0.10000000149011612,
    -0.12999999523162842,
    -0.1599999964237213,
    -0.3400000035762787,
    0.4300000071525574,
    0.4000000059604645,
    -0.5699999928474426,
    -0.5899999737739563,
    0.23999999463558197,
    -0.4000000059604645,
    -0.4699999988079071,
    0.23999999463558197,
    0.05999999865889549,
];
const PRESENT_V1: [f32; 12] = [
    -0.5600000023841858,
    0.7400000095367432,
    0.10000000149011612,
    0.41999998688697815,
    -0.41999998688697815,
    0.019999999552965164,
    -0.5899999737739563,
    0.8399999737739563,
    0.7900000214576721,
    0.7900000214576721,
    -0.75,
    -0.5899999737739563,
];
const QK1: [f32; 24] = [
    -0.6168987154960632,
    -0.7863079309463501,
    f32::NEG_INFINITY,
    -0.4514227509498596,
    0.37210220098495483,
    f32::NEG_INFINITY,
    -0.4695589244365692,
    -0.2948097586631775,
    f32::NEG_INFINITY,
    0.4875796139240265,
    0.10311474651098251,
    f32::NEG_INFINITY,
    0.34167587757110596,
    0.025677382946014404,
    f32::NEG_INFINITY,
    0.25565803050994873,
    -0.16708514094352722,
    f32::NEG_INFINITY,
    -0.5147655010223389,
    -0.4764441251754761,
    f32::NEG_INFINITY,
    0.2728630602359772,
    -0.4592243432998657,
    f32::NEG_INFINITY,
];
// case 2
const Q2: [f32; 8] = [
    0.7900000214576721,
    -0.3400000035762787,
    0.6399999856948853,
    -0.9200000166893005,
    -0.7799999713897705,
    0.1899999976158142,
    0.05999999865889549,
    -0.1599999964237213,
];
const K2: [f32; 12] = [
    -0.8500000238418579,
    0.5600000023841858,
    -0.11999999731779099,
    0.44999998807907104,
    0.9599999785423279,
    0.07999999821186066,
    0.0,
    -0.8600000143051147,
    -0.46000000834465027,
    -0.0,
    0.36000001430511475,
    0.6100000143051147,
];
const V2: [f32; 12] = [
    0.75,
    0.9399999976158142,
    0.7400000095367432,
    0.05999999865889549,
    -0.5299999713897705,
    -0.9800000190734863,
    -0.14000000059604645,
    -0.20000000298023224,
    0.05000000074505806,
    -0.03999999910593033,
    0.10999999940395355,
    0.09000000357627869,
];
const M2: [u8; 6] = [1, 0, 1, 0, 0, 0];
const Y2: [f32; 8] = [
    0.3411375880241394,
    0.36759263277053833,
    0.4069039225578308,
    0.07586172223091125,
    0.0,
    0.0,
    0.0,
    0.0,
];
const QK2: [f32; 12] = [
    0.41591084003448486,
    0.0,
    0.5840891599655151,
    0.0,
    0.0,
    0.0,
    0.47127604484558105,
    0.0,
    0.5287240147590637,
    0.0,
    0.0,
    0.0,
];
// case 3
const Q3: [f32; 12] = [
    -0.9800000190734863,
    0.0,
    -0.009999999776482582,
    -0.7300000190734863,
    -0.7200000286102295,
    -0.5600000023841858,
    -0.1599999964237213,
    -0.5,
    -0.8299999833106995,
    -0.3100000023841858,
    -0.6700000166893005,
    0.7599999904632568,
];
const K3: [f32; 16] = [
    0.5400000214576721,
    -0.9599999785423279,
    0.27000001072883606,
    0.5,
    -0.0,
    -0.550000011920929,
    -0.6000000238418579,
    0.5199999809265137,
    -0.6600000262260437,
    -0.8199999928474426,
    0.3700000047683716,
    0.9100000262260437,
    -0.9900000095367432,
    0.019999999552965164,
    0.6299999952316284,
    0.23000000417232513,
];
const V3: [f32; 16] = [
    -0.6399999856948853,
    -0.9599999785423279,
    -0.07000000029802322,
    0.44999998807907104,
    -0.1599999964237213,
    -0.029999999329447746,
    -0.9700000286102295,
    -0.029999999329447746,
    0.8799999952316284,
    0.699999988079071,
    0.46000000834465027,
    -0.7799999713897705,
    0.7900000214576721,
    0.7099999785423279,
    -0.6700000166893005,
    0.25999999046325684,
];
const Y3: [f32; 12] = [
    -0.3284156918525696,
    -0.1892387717962265,
    -0.12694485485553741,
    0.14629405736923218,
    -0.5410866141319275,
    -0.029999997466802597,
    0.0,
    0.0,
    0.8799999952316284,
    0.699999988079071,
    0.6243581771850586,
    -0.20083317160606384,
];
