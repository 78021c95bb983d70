//! Typed normalisation and recurrent kernels against the ONNX reference implementation (onnx
//! `onnx.reference.ops`, NumPy in float64): every expected literal below was printed
//! by the reference (`_layer_normalization`, `_rms_normalization`,
//! `_batchnorm_test_mode`, the node tests' `_group_normalization` and
//! MeanVarianceNormalization formula, LpNormalization and LRN by their formulas) on
//! the same inputs.

use half::{bf16, f16};
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

fn widen<T: Elem>(v: &[T]) -> Vec<f64> {
    v.iter().map(|v| v.to_f64()).collect()
}

fn narrow<T: Elem>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&v| T::from_f64(v)).collect()
}

/// Tolerances are 1e-7 where 1e-15 would do otherwise: `epsilon` is an f32 attribute
/// (`1e-5f32` is not `1e-5`), while the reference ran with the f64 value.
///
/// X of shape 2×2×3 shared by several cases.
const X: [f64; 12] = [
    0.5, -1.25, 3.0, 2.0, 0.0, -0.75, 1.5, 1.5, 1.5, -2.0, 4.0, 0.25,
];

#[test]
fn layer_norm_with_bias_and_stats() {
    layer_norm_case::<f64>(1e-7);
}

/// Rows of 6 (axis 1), with bias and both statistics, in `T`, against the reference
/// within `tol`.
fn layer_norm_case<T: Elem>(tol: f64) {
    let w = [1.0, 0.5, -2.0, 0.25, 1.5, 3.0];
    let b = [0.1, 0.2, 0.3, -0.1, -0.2, -0.3];
    let p = LayerNorm {
        outer: 2,
        len: 6,
        epsilon: 1e-5,
        has_bias: true,
    };
    let (mut y, mut m, mut inv) = (vec![T::default(); 12], [T::default(); 2], [T::default(); 2]);
    let x: Vec<T> = narrow(&X);
    layer_norm(&p, &x, &narrow(&w), &narrow(&b), &mut y, &mut m, &mut inv);
    close(&widen(&y), &LAYER_NORM_Y, tol);
    close(&widen(&m), &LAYER_NORM_MEAN, tol);
    close(&widen(&inv), &LAYER_NORM_INV, tol);
}

/// The reference's outputs for [`layer_norm_case`].
const LAYER_NORM_Y: [f64; 12] = [
    0.04409842634090447,
    -0.4149173102500507,
    -2.9422912722275396,
    0.1375816880511559,
    -0.786966523420503,
    -2.9832755356365848,
    0.3095287616618423,
    0.30476438083092117,
    -0.11905752332368452,
    -0.5365182534621714,
    2.209580759111186,
    -1.7667013316328959,
];
const LAYER_NORM_MEAN: [f64; 2] = [0.5833333333333334, 1.125];
const LAYER_NORM_INV: [f64; 2] = [0.6708188839091461, 0.5587433644315793];

#[test]
fn layer_norm_no_bias_optional_outputs() {
    // axis -1: rows of 3, epsilon 1e-2; a constant row normalises to 0.
    let want = [
        -0.14311048769256013,
        -0.5724419507702405,
        -2.5759887784660824,
        1.3590857970885164,
        -0.17882707856427849,
        2.002863279919919,
        0.0,
        0.0,
        0.0,
        -1.1102618324491378,
        0.6560638100835814,
        0.4037315754360501,
    ];
    let p = LayerNorm {
        outer: 4,
        len: 3,
        epsilon: 1e-2,
        has_bias: false,
    };
    let mut y = [0.0; 12];
    let mut inv = [0.0; 4];
    layer_norm(&p, &X, &[1.0, 0.5, -2.0], &[], &mut y, &mut [], &mut inv);
    close(&y, &want, 1e-7);
    close(
        &inv,
        &[
            0.5724419507702405,
            0.8583699771085367,
            10.0,
            0.4037315754360501,
        ],
        1e-7,
    );
    // float16: computed in f64, rounded once.
    let x: Vec<f16> = narrow(&X);
    let mut y = [f16::ZERO; 12];
    let mut m = [f16::ZERO; 4];
    layer_norm(
        &p,
        &x,
        &narrow::<f16>(&[1.0, 0.5, -2.0]),
        &[],
        &mut y,
        &mut m,
        &mut [],
    );
    close(&widen(&y), &want, 2e-3);
    close(&widen(&m), &[0.75, 0.4166666666666667, 1.5, 0.75], 1e-3);
}

/// float32 takes a path of its own (partial sums, run vectorised): the reference's
/// values as above, and rows long enough for whole groups of partial sums and a rest
/// (37 elements), against the same statistics in f64.
#[test]
fn layer_norm_f32() {
    layer_norm_case::<f32>(1e-6);
    let p = LayerNorm {
        outer: 3,
        len: 37,
        epsilon: 1e-5,
        has_bias: false,
    };
    let x64: Vec<f64> = (0..111)
        .map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0)
        .collect();
    let s64: Vec<f64> = (0..37).map(|i| 0.5 + i as f64 / 37.0).collect();
    let (mut y64, mut inv64) = (vec![0.0; 111], vec![0.0; 3]);
    layer_norm(&p, &x64, &s64, &[], &mut y64, &mut [], &mut inv64);
    let (mut y32, mut inv32) = (vec![0f32; 111], vec![0f32; 3]);
    let x32: Vec<f32> = narrow(&x64);
    layer_norm(&p, &x32, &narrow(&s64), &[], &mut y32, &mut [], &mut inv32);
    close(&widen(&y32), &y64, 1e-6);
    close(&widen(&inv32), &inv64, 1e-6);
}

/// x 2×4×3: `(linspace(-3, 4, 24)² / 5 - 1)`.
fn group_x() -> Vec<f64> {
    (0..24)
        .map(|i| {
            let v = -3.0 + 7.0 * i as f64 / 23.0;
            v * v / 5.0 - 1.0
        })
        .collect()
}

#[test]
fn group_and_instance_norm() {
    let x = group_x();
    let s = [1.0, -0.5, 2.0, 0.75];
    let b = [0.0, 0.1, -0.2, 0.3];
    let mut y = [0.0; 24];
    let p = GroupNorm {
        n: 2,
        groups: 2,
        channels: 4,
        inner: 3,
        epsilon: 1e-5,
    };
    group_norm(&p, &x, &s, &b, &mut y);
    close(
        &y,
        &[
            1.5886527231054062,
            0.8475957258586112,
            0.1857356596152909,
            0.2984637378122778,
            0.5501968399304636,
            0.7623314765469127,
            3.6425601092616593,
            1.0929084602927464,
            -0.6972724847279762,
            -0.2729935221751932,
            -0.3747083485968253,
            -0.19162166103788686,
            -1.2383594761658205,
            -0.909118992682213,
            -0.45530102896156527,
            0.03845279250193884,
            -0.31303366959542633,
            -0.7268088718113119,
            -2.9378414989617783,
            -1.9890716048108248,
            -0.9305266815845512,
            0.46417247651889026,
            0.9434580945352293,
            1.4639093484548127,
        ],
        1e-7,
    );
    // InstanceNormalization: one group per channel.
    let p = GroupNorm { groups: 4, ..p };
    group_norm(&p, &x, &s, &b, &mut y);
    close(
        &y,
        &[
            1.2470421813970836,
            -0.04606488269013008,
            -1.2009772987069538,
            -0.5289342252600164,
            0.13480268440173984,
            0.6941315408582766,
            2.377538122064072,
            -0.4841380606999771,
            -2.4934000613640928,
            0.36458565118124153,
            -0.6041991165374059,
            1.1396134653561643,
            -1.1543016884133324,
            -0.12928178910229243,
            1.283583477515626,
            0.6950149789285787,
            0.13318808647410388,
            -0.5282030654026828,
            -2.6034828566542303,
            -0.28925400528689726,
            2.2927368619411275,
            -0.6056615497633768,
            0.2747927202849156,
            1.2308688294784613,
        ],
        1e-7,
    );
}

#[test]
fn lp_norm_l1_l2_zero_norm() {
    // 2×3×2 along axis 1; the first batch's second column and a whole zero column.
    let x = [1., -2., 3., 0., -4., 0., 0., 0., 0., 0., 2., 1.];
    let mut y = [9.0; 12];
    lp_norm(
        &LpNorm {
            outer: 2,
            len: 3,
            inner: 2,
            p: 1,
        },
        &x,
        &mut y,
    );
    assert_eq!(
        y,
        [
            0.125, -1.0, 0.375, 0.0, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0
        ]
    );
    lp_norm(
        &LpNorm {
            outer: 2,
            len: 3,
            inner: 2,
            p: 2,
        },
        &x,
        &mut y,
    );
    close(
        &y,
        &[
            0.19611613513818404,
            -1.0,
            0.5883484054145521,
            0.0,
            -0.7844645405527362,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            1.0,
            1.0,
        ],
        1e-15,
    );
    // bfloat16.
    let mut y = [bf16::ZERO; 12];
    lp_norm(
        &LpNorm {
            outer: 2,
            len: 3,
            inner: 2,
            p: 1,
        },
        &narrow::<bf16>(&x),
        &mut y,
    );
    assert_eq!(
        widen(&y),
        [
            0.125, -1.0, 0.375, 0.0, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0
        ]
    );
}

#[test]
fn rms_norm_rows() {
    let mut y = [0.0; 12];
    rms_norm(
        &RmsNorm {
            outer: 4,
            len: 3,
            epsilon: 1e-5,
        },
        &X,
        &[1.0, 0.5, -2.0],
        &mut y,
    );
    close(
        &y,
        &[
            0.26337040341459594,
            -0.32921300426824496,
            -3.1604448409751513,
            1.6217643763394443,
            0.0,
            1.2163232822545833,
            0.9999977777851852,
            0.4999988888925926,
            -1.9999955555703703,
            -0.77338861300227,
            0.77338861300227,
            -0.1933471532505675,
        ],
        1e-7,
    );
}

#[test]
fn batch_norm_f64_and_bf16() {
    let p = BatchNormT {
        n: 2,
        c: 2,
        inner: 3,
        epsilon: 1e-5,
    };
    let (s, b, m, v) = ([1.5, -0.5], [0.1, 0.2], [0.5, -1.0], [2.0, 0.25]);
    let want = [
        0.1,
        -1.7561506602438368,
        2.7516438003483388,
        -2.7999400017999396,
        -0.79998000059998,
        -0.04999500014999497,
        1.1606575201393354,
        1.1606575201393354,
        1.1606575201393354,
        1.19998000059998,
        -4.799900002999899,
        -1.0499750007499749,
    ];
    let mut y = [0.0; 12];
    batch_norm(&p, &X, &s, &b, &m, &v, &mut y);
    close(&y, &want, 1e-7);
    let n = narrow::<bf16>;
    let mut y = [bf16::ZERO; 12];
    batch_norm(&p, &n(&X), &n(&s), &n(&b), &n(&m), &n(&v), &mut y);
    close(&widen(&y), &want, 1e-2);
}

#[test]
fn mean_variance_norm_axes() {
    // x 2×3×2×2: linspace(-1, 2, 24)³.
    let x: Vec<f64> = (0..24)
        .map(|i| {
            let v = -1.0 + 3.0 * i as f64 / 23.0;
            v * v * v
        })
        .collect();
    let mut shape = [1; RANK];
    shape[..4].copy_from_slice(&[2, 3, 2, 2]);
    let mut reduced = [false; RANK];
    (reduced[0], reduced[2], reduced[3]) = (true, true, true);
    let mut y = [0.0; 24];
    mean_variance_norm(
        &Mvn {
            rank: 4,
            shape,
            reduced,
        },
        &x,
        &mut y,
    );
    close(
        &y,
        &[
            -1.602724207758217,
            -1.0301460378569403,
            -0.605968257562906,
            -0.3079308084350278,
            -0.9638187537683313,
            -0.9090699980923523,
            -0.8831997069487579,
            -0.8753784561379039,
            -0.9559556509615713,
            -0.9543106928601134,
            -0.9470258784107995,
            -0.9298713153527379,
            0.37100097401810556,
            0.6319383257441734,
            1.0115959891560347,
            1.532234022694777,
            0.16966097912775874,
            0.5926101575916398,
            1.116633961918865,
            1.7525618163090817,
            0.36659066261063233,
            0.7150867861052261,
            1.1199814730783797,
            1.5855046157909842,
        ],
        1e-7,
    );
    let mut reduced = [false; RANK];
    reduced[1] = true;
    mean_variance_norm(
        &Mvn {
            rank: 4,
            shape,
            reduced,
        },
        &x,
        &mut y,
    );
    close(
        &y,
        &[
            -1.4071545002601324,
            -1.4113126037463342,
            -1.4096303494256015,
            -1.3655185298241297,
            0.5813596057412754,
            0.6272500461094819,
            0.6062926234088609,
            0.36413827461976805,
            0.825794894518857,
            0.7840625576368523,
            0.8033377260167408,
            1.0013802552043616,
            -1.0098540426911098,
            -1.0321897318813975,
            -1.0506920261265078,
            -1.0661875995759464,
            -0.35247959605274337,
            -0.321125694363101,
            -0.2944312118411006,
            -0.27153841487327496,
            1.362333638743853,
            1.3533154262444989,
            1.3451232379676086,
            1.3377260144492211,
        ],
        1e-7,
    );
    // A constant group gives 0, not NaN.
    let mut y = [f16::ONE; 4];
    mean_variance_norm(
        &Mvn {
            rank: 1,
            shape: [4, 1, 1, 1, 1, 1, 1, 1],
            reduced: [true; RANK],
        },
        &[f16::from_f32(0.3); 4],
        &mut y,
    );
    assert_eq!(y, [f16::ZERO; 4]);
}

#[test]
fn lrn_odd_and_even_size() {
    // x 2×5×2: linspace(-2, 3, 20); alpha 0.1, beta 0.75, bias 1.
    let x: Vec<f64> = (0..20).map(|i| -2.0 + 5.0 * i as f64 / 19.0).collect();
    let p = LrnT {
        n: 2,
        c: 5,
        inner: 2,
        size: 3,
        alpha: 0.1,
        beta: 0.75,
        bias: 1.0,
    };
    let mut y = [0.0; 20];
    // alpha is an f32 attribute: 0.1f32 differs from 0.1 in the 9th digit.
    lrn(&p, &x, &mut y);
    close(
        &y,
        &[
            -1.7381763636392167,
            -1.5646132243896684,
            -1.257433434120959,
            -1.0795145499665764,
            -0.8771018555848196,
            -0.6525163892970571,
            -0.40997278697285827,
            -0.15545726187156583,
            0.10477016660012299,
            0.3669481456697338,
            0.6054347913918872,
            0.8364363125530739,
            1.0409438139939788,
            1.2238602745148028,
            1.3816790961975316,
            1.5149196797695492,
            1.6251258624396323,
            1.7144621895059438,
            2.112248900466623,
            2.2089799638284737,
        ],
        1e-7,
    );
    let p = LrnT { size: 4, ..p };
    let mut y = [f16::ZERO; 20];
    lrn(&p, &narrow::<f16>(&x), &mut y);
    close(
        &widen(&y),
        &[
            -1.7701986941437144,
            -1.5913182984583356,
            -1.3006844099450359,
            -1.1086394997061322,
            -0.8933403466711999,
            -0.6585188068299364,
            -0.4126786425921666,
            -0.15605837475206177,
            0.1048929088954577,
            0.3673150832949894,
            0.582298299857373,
            0.7977479453307792,
            0.9874300547397205,
            1.1550579830542378,
            1.2989540235809993,
            1.420253063677155,
            1.7358329400216461,
            1.850290753853543,
            2.235841136775811,
            2.358791639241216,
        ],
        2e-3,
    );
}

// Recurrent layers (typed/recurrent.rs) against `onnx.reference.ReferenceEvaluator` on
// one-node float64 models (opset 14). Inputs are `sin(a·i + b)·s` sequences, built
// identically here and in the generating script.

fn sines(n: usize, a: f64, b: f64, s: f64) -> Vec<f64> {
    (0..n).map(|i| (a * i as f64 + b).sin() * s).collect()
}

/// `x` as `[seq 3, batch 2, input 2]`, and the same transposed to `[batch, seq, input]`.
fn rnn_x() -> (Vec<f64>, Vec<f64>) {
    let x = sines(12, 0.37, 0.1, 1.0);
    let mut xb = vec![0.0; 12];
    for t in 0..3 {
        for b in 0..2 {
            for k in 0..2 {
                xb[(b * 3 + t) * 2 + k] = x[(t * 2 + b) * 2 + k];
            }
        }
    }
    (x, xb)
}

const LSTM_FWD_Y: &[f64] = &[
    0.05059993500467151,
    0.04139759844477261,
    0.16317327353654404,
    -0.06359186766832378,
    0.23683574321050596,
    0.14582769350436683,
    -0.14051779811378698,
    0.018523321223923417,
    0.19243125967990762,
    -0.10307047711806902,
    0.1019620751174981,
    0.19792602406229318,
    -0.047136522268292895,
    -0.006947255323457393,
    0.14814656771917123,
    0.0499013769531385,
    0.01103781926439518,
    -0.058131074433218875,
];
const LSTM_FWD_YH: &[f64] = &[
    -0.047136522268292895,
    -0.006947255323457393,
    0.14814656771917123,
    0.0499013769531385,
    0.01103781926439518,
    -0.058131074433218875,
];
const LSTM_FWD_YC: &[f64] = &[
    -0.09746234436055169,
    -0.013865479131256544,
    0.278282913227229,
    0.09662390923259787,
    0.0294108828046533,
    -0.10277489751358299,
];
const LSTM_BI_Y: &[f64] = &[
    -0.07097483105816324,
    0.023060124858935205,
    0.043556160042793834,
    0.12520355397619243,
    0.014434806338059703,
    -0.20029813326887058,
    -0.20948348624937022,
    0.007722792411123976,
    0.11445149365830694,
    0.12512641978112768,
    0.017317109276553614,
    -0.22462658915653894,
    -0.11672688655535789,
    -0.018707327408981567,
    0.07565228456728064,
    -0.030959406377728642,
    0.0174480899178815,
    0.018378866984384755,
    -0.17841877958278624,
    0.018959208424335947,
    0.08627684784763909,
    0.11651740611254098,
    0.017807708027660445,
    -0.2480897629928975,
    -0.19931180776677773,
    -0.015263516600311427,
    0.14217827769303482,
    -0.021397806997740625,
    0.016916563668311825,
    -0.0853434011743774,
    -0.038285836863708365,
    -0.013427204087533432,
    -0.09293523638124548,
    -0.1465349035134381,
    -0.017094339422727315,
    0.09235399539884907,
];
const LSTM_BI_YH: &[f64] = &[
    -0.11672688655535789,
    -0.018707327408981567,
    0.07565228456728064,
    0.12520355397619243,
    0.014434806338059703,
    -0.20029813326887058,
    -0.038285836863708365,
    -0.013427204087533432,
    -0.09293523638124548,
    0.11651740611254098,
    0.017807708027660445,
    -0.2480897629928975,
];
const LSTM_BI_YC: &[f64] = &[
    -0.23504233809914396,
    -0.03865276045351198,
    0.1511055809417784,
    0.26415766828898457,
    0.034352804893488575,
    -0.38416687753869305,
    -0.07153494640416053,
    -0.03853632945101926,
    -0.17254148883721301,
    0.21527628114755917,
    0.05736955077015318,
    -0.4925942294934758,
];
const GRU_BI_Y: &[f64] = &[
    -0.0029938928132239584,
    0.2427209760351532,
    0.2324884852491555,
    -0.07762604568437745,
    0.10353962824238737,
    -0.046401847666184895,
    0.17424407463240843,
    -0.32912508029393284,
    0.0446605775951206,
    0.22991857478985034,
    -0.21110964334641574,
    0.15559299666266835,
    -0.21395349447840245,
    0.3072159332150294,
    0.3546860346246703,
    -0.23857010961960975,
    0.15784603260591468,
    0.09155653843774615,
    0.25358840833995494,
    -0.39036899144352194,
    -0.03324251755323265,
    0.18588874306363662,
    0.1069292603695195,
    0.11611829203323937,
    -0.18852266957364502,
    0.0707571187428976,
    0.1991880259323244,
    0.1293497099458792,
    -0.22442525294711269,
    -0.0572752620786279,
    -0.05887796744365267,
    -0.1507791228540538,
    -0.09684372051709916,
    0.11846747449160291,
    0.5930824043083781,
    0.10227789901117158,
];
const GRU_BI_YH: &[f64] = &[
    -0.18852266957364502,
    0.0707571187428976,
    0.1991880259323244,
    0.1293497099458792,
    -0.22442525294711269,
    -0.0572752620786279,
    0.17424407463240843,
    -0.32912508029393284,
    0.0446605775951206,
    0.22991857478985034,
    -0.21110964334641574,
    0.15559299666266835,
];
const GRU_REV_LBR_Y: &[f64] = &[
    -0.1505450504656415,
    0.20157311923004084,
    0.19722691540644327,
    -0.12665365819042596,
    0.16016671777745253,
    0.26498073472317013,
    -0.14423334175803598,
    0.15791769109959808,
    0.2781204108075768,
    0.051632572490991596,
    -0.034233617728222754,
    0.11294534378181433,
    0.06513206316674476,
    -0.02987577285241737,
    0.009647147308497726,
    0.31283311989819645,
    -0.22340642610484077,
    -0.08799405673345641,
];
const GRU_REV_LBR_YH: &[f64] = &[
    -0.1505450504656415,
    0.20157311923004084,
    0.19722691540644327,
    -0.12665365819042596,
    0.16016671777745253,
    0.26498073472317013,
];
const RNN_Y: &[f64] = &[
    0.7470680009511181,
    0.6825660806242192,
    -0.08048049631565986,
    0.8459115933612296,
    0.923354510574445,
    -0.5320290114627776,
    0.45391781666473113,
    0.8189745821207964,
    0.39920173995845065,
    0.6303341328474381,
    0.7449325837058949,
    -0.016393903395943498,
    0.7745132644524465,
    0.88755651470292,
    -0.2883673639668431,
    0.25423183684168515,
    0.6403800354486976,
    0.6841777243851739,
];
const RNN_YH: &[f64] = &[
    0.45391781666473113,
    0.8189745821207964,
    0.39920173995845065,
    0.25423183684168515,
    0.6403800354486976,
    0.6841777243851739,
];

const LSTM_ACT: [RnnActivation; 6] = [
    RnnActivation::Sigmoid,
    RnnActivation::Tanh,
    RnnActivation::Tanh,
    RnnActivation::Sigmoid,
    RnnActivation::Tanh,
    RnnActivation::Tanh,
];

#[test]
fn lstm_forward_full_inputs() {
    let (x, _) = rnn_x();
    let p = Lstm {
        seq_len: 3,
        batch: 2,
        input_size: 2,
        hidden: 3,
        direction: RnnDirection::Forward,
        layout: 0,
        activations: LSTM_ACT,
        has_clip: false,
        clip: 0.0,
        input_forget: false,
    };
    let (w, r, b) = (
        sines(24, 0.91, 0.2, 0.5),
        sines(36, 0.53, 0.3, 0.5),
        sines(24, 0.29, 0.4, 0.3),
    );
    let (h0, c0, pp) = (
        sines(6, 0.71, 0.5, 0.4),
        sines(6, 0.43, 0.6, 0.4),
        sines(9, 0.17, 0.7, 0.3),
    );
    let (mut y, mut yh, mut yc) = (vec![0.0; 18], vec![0.0; 6], vec![0.0; 6]);
    let mut scratch = vec![0.0; p.scratch_len()];
    lstm(
        &p,
        &x,
        &w,
        &r,
        &b,
        &h0,
        &c0,
        &pp,
        &mut y,
        &mut yh,
        &mut yc,
        &mut scratch,
    );
    close(&y, LSTM_FWD_Y, 1e-12);
    close(&yh, LSTM_FWD_YH, 1e-12);
    close(&yc, LSTM_FWD_YC, 1e-12);
    // Only Y_c requested; a clip far above every value changes nothing.
    let p = Lstm {
        has_clip: true,
        clip: 1e6,
        ..p
    };
    let mut yc = vec![0.0; 6];
    lstm(
        &p,
        &x,
        &w,
        &r,
        &b,
        &h0,
        &c0,
        &pp,
        &mut [],
        &mut [],
        &mut yc,
        &mut scratch,
    );
    close(&yc, LSTM_FWD_YC, 1e-12);
    // float16 runs too (state rounded to f16 between steps).
    let n = narrow::<f16>;
    let mut y16 = vec![f16::ZERO; 18];
    let mut s16 = vec![f16::ZERO; p.scratch_len()];
    lstm(
        &p,
        &n(&x),
        &n(&w),
        &n(&r),
        &n(&b),
        &n(&h0),
        &n(&c0),
        &n(&pp),
        &mut y16,
        &mut [],
        &mut [],
        &mut s16,
    );
    close(&widen(&y16), LSTM_FWD_Y, 1e-2);
    // float32 takes the f32 matrix-vector path for the gates: f32 rounding only.
    let n = narrow::<f32>;
    let (mut y32, mut yh32, mut yc32) = (vec![0.0f32; 18], vec![0.0f32; 6], vec![0.0f32; 6]);
    let mut s32 = vec![f32::NAN; p.scratch_len()];
    lstm(
        &p,
        &n(&x),
        &n(&w),
        &n(&r),
        &n(&b),
        &n(&h0),
        &n(&c0),
        &n(&pp),
        &mut y32,
        &mut yh32,
        &mut yc32,
        &mut s32,
    );
    close(&widen(&y32), LSTM_FWD_Y, 1e-6);
    close(&widen(&yh32), LSTM_FWD_YH, 1e-6);
    close(&widen(&yc32), LSTM_FWD_YC, 1e-6);
    // Without the peephole, float32 takes the vectorised cell (σ and tanh over whole
    // gate vectors, biases added in f32): against the f64 path of the same kernel.
    let (mut y64, mut y32) = (vec![0.0f64; 18], vec![0.0f32; 18]);
    let (mut yc64, mut yc32) = (vec![0.0f64; 6], vec![0.0f32; 6]);
    lstm(
        &p,
        &x,
        &w,
        &r,
        &b,
        &h0,
        &c0,
        &[],
        &mut y64,
        &mut [],
        &mut yc64,
        &mut scratch,
    );
    lstm(
        &p,
        &n(&x),
        &n(&w),
        &n(&r),
        &n(&b),
        &n(&h0),
        &n(&c0),
        &[],
        &mut y32,
        &mut [],
        &mut yc32,
        &mut s32,
    );
    close(&widen(&y32), &y64, 1e-6);
    close(&widen(&yc32), &yc64, 1e-6);
}

#[test]
fn lstm_bidirectional_batch_major() {
    let (_, xb) = rnn_x();
    let p = Lstm {
        seq_len: 3,
        batch: 2,
        input_size: 2,
        hidden: 3,
        direction: RnnDirection::Bidirectional,
        layout: 1,
        activations: LSTM_ACT,
        has_clip: false,
        clip: 0.0,
        input_forget: false,
    };
    let (w, r) = (sines(48, 0.91, 0.2, 0.5), sines(72, 0.53, 0.3, 0.5));
    let (mut y, mut yh, mut yc) = (vec![0.0; 36], vec![0.0; 12], vec![0.0; 12]);
    let mut scratch = vec![0.0; p.scratch_len()];
    lstm(
        &p,
        &xb,
        &w,
        &r,
        &[],
        &[],
        &[],
        &[],
        &mut y,
        &mut yh,
        &mut yc,
        &mut scratch,
    );
    close(&y, LSTM_BI_Y, 1e-12);
    close(&yh, LSTM_BI_YH, 1e-12);
    close(&yc, LSTM_BI_YC, 1e-12);
    // float32: the vectorised cell, both directions, batch-major.
    let n = narrow::<f32>;
    let (mut y, mut yh, mut yc) = (vec![0.0f32; 36], vec![0.0f32; 12], vec![0.0f32; 12]);
    let mut scratch = vec![f32::NAN; p.scratch_len()];
    lstm(
        &p,
        &n(&xb),
        &n(&w),
        &n(&r),
        &[],
        &[],
        &[],
        &[],
        &mut y,
        &mut yh,
        &mut yc,
        &mut scratch,
    );
    close(&widen(&y), LSTM_BI_Y, 1e-6);
    close(&widen(&yh), LSTM_BI_YH, 1e-6);
    close(&widen(&yc), LSTM_BI_YC, 1e-6);
}

/// `(seq, batch, input, hidden)` of the long-sequence float32 checks below.
const LONG: (usize, usize, usize, usize) = (70, 2, 5, 4);

/// `[X, W, R, B, initial state]` of a bidirectional layer of `gates` gates at [`LONG`].
fn long_inputs(gates: usize) -> [Vec<f64>; 5] {
    let (seq, batch, input, hidden) = LONG;
    [
        sines(seq * batch * input, 0.37, 0.1, 1.0),
        sines(2 * gates * hidden * input, 0.91, 0.2, 0.5),
        sines(2 * gates * hidden * hidden, 0.53, 0.3, 0.5),
        sines(2 * 2 * gates * hidden, 0.71, 0.4, 0.3),
        sines(2 * batch * hidden, 0.29, 0.5, 0.5),
    ]
}

/// float32 computes `W·x` of up to 32 steps in one product: over 70 steps (three
/// chunks, the last one short; the reverse direction meets them last to first), in
/// both layouts, with biases and initial states, it must give what the `f64` path
/// (one dot product per gate and step, checked against onnx's reference above) gives.
#[test]
fn lstm_float32_long_sequences_match_f64() {
    let (seq, batch, input, hidden) = LONG;
    let [x, w, r, b, init] = long_inputs(4);
    for layout in [0, 1] {
        let p = Lstm {
            seq_len: seq,
            batch,
            input_size: input,
            hidden,
            direction: RnnDirection::Bidirectional,
            layout,
            activations: LSTM_ACT,
            has_clip: false,
            clip: 0.0,
            input_forget: false,
        };
        let run = |t: &dyn Fn(&[f64]) -> Vec<f64>| {
            let (mut y, mut yh, mut yc) = (
                vec![0.0; seq * 2 * batch * hidden],
                vec![0.0; 2 * batch * hidden],
                vec![0.0; 2 * batch * hidden],
            );
            let mut scratch = vec![f64::NAN; p.scratch_len()];
            let (x, w, r, b, init) = (t(&x), t(&w), t(&r), t(&b), t(&init));
            lstm(
                &p,
                &x,
                &w,
                &r,
                &b,
                &init,
                &init,
                &[],
                &mut y,
                &mut yh,
                &mut yc,
                &mut scratch,
            );
            (y, yh, yc)
        };
        // In f64 on the inputs rounded to f32, then in float32.
        let (y64, yh64, yc64) = run(&|v| widen(&narrow::<f32>(v)));
        let n = narrow::<f32>;
        let (mut y, mut yh, mut yc) = (
            vec![0.0f32; seq * 2 * batch * hidden],
            vec![0.0f32; 2 * batch * hidden],
            vec![0.0f32; 2 * batch * hidden],
        );
        let mut scratch = vec![f32::NAN; p.scratch_len()];
        lstm(
            &p,
            &n(&x),
            &n(&w),
            &n(&r),
            &n(&b),
            &n(&init),
            &n(&init),
            &[],
            &mut y,
            &mut yh,
            &mut yc,
            &mut scratch,
        );
        close(&widen(&y), &y64, 1e-5);
        close(&widen(&yh), &yh64, 1e-5);
        close(&widen(&yc), &yc64, 1e-5);
    }
}

#[test]
fn lstm_input_forget_and_clip() {
    // By hand: one step, one unit, zero weights but biases: pre-activations are the
    // biases, i = σ(1), c̃ = tanh(clip(3, 0.5)), f = 1 - i, C = i·c̃, H = σ(2)·tanh(C).
    let p = Lstm {
        seq_len: 1,
        batch: 1,
        input_size: 1,
        hidden: 1,
        direction: RnnDirection::Forward,
        layout: 0,
        activations: LSTM_ACT,
        has_clip: true,
        clip: 0.5,
        input_forget: true,
    };
    let b = [1.0, 2.0, -7.0, 3.0, 0.0, 0.0, 0.0, 0.0];
    let (mut yh, mut yc) = ([0.0], [0.0]);
    let mut scratch = vec![0.0; p.scratch_len()];
    lstm(
        &p,
        &[1.0],
        &[0.0; 4],
        &[0.0; 4],
        &b,
        &[],
        &[0.25],
        &[],
        &mut [],
        &mut yh,
        &mut yc,
        &mut scratch,
    );
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let (i, ct) = (sig(0.5), 0.5f64.tanh());
    let c = (1.0 - i) * 0.25 + i * ct;
    close(&yc, &[c], 1e-15);
    close(&yh, &[sig(0.5) * c.tanh()], 1e-15);
}

#[test]
fn gru_bidirectional_and_linear_before_reset() {
    let (x, _) = rnn_x();
    let p = Gru {
        seq_len: 3,
        batch: 2,
        input_size: 2,
        hidden: 3,
        direction: RnnDirection::Bidirectional,
        layout: 0,
        activations: [
            RnnActivation::Sigmoid,
            RnnActivation::Tanh,
            RnnActivation::Sigmoid,
            RnnActivation::Tanh,
        ],
        has_clip: false,
        clip: 0.0,
        linear_before_reset: false,
    };
    let (w, r, b) = (
        sines(36, 0.91, 0.2, 0.5),
        sines(54, 0.53, 0.3, 0.5),
        sines(36, 0.29, 0.4, 0.3),
    );
    let h0 = sines(12, 0.71, 0.5, 0.4);
    let (mut y, mut yh) = (vec![0.0; 36], vec![0.0; 12]);
    let mut scratch = vec![0.0; p.scratch_len()];
    gru(&p, &x, &w, &r, &b, &h0, &mut y, &mut yh, &mut scratch);
    close(&y, GRU_BI_Y, 1e-12);
    close(&yh, GRU_BI_YH, 1e-12);

    let p = Gru {
        direction: RnnDirection::Reverse,
        linear_before_reset: true,
        ..p
    };
    let (mut y, mut yh) = (vec![0.0; 18], vec![0.0; 6]);
    let mut scratch = vec![0.0; p.scratch_len()];
    gru(
        &p,
        &x,
        &w[..18],
        &r[..27],
        &b[..18],
        &[],
        &mut y,
        &mut yh,
        &mut scratch,
    );
    close(&y, GRU_REV_LBR_Y, 1e-12);
    close(&yh, GRU_REV_LBR_YH, 1e-12);
}

/// float32 runs the default GRU cell over whole gate vectors, with `W·x` of up to 32
/// steps in one product: over 70 steps, in both layouts, both `linear_before_reset`
/// forms, with and without biases and initial states, it must give what the `f64`
/// path (one dot product per gate and step, checked against onnx's reference above)
/// gives.
#[test]
fn gru_float32_long_sequences_match_f64() {
    let (seq, batch, input, hidden) = LONG;
    let [x, w, r, b, init] = long_inputs(3);
    for (layout, linear_before_reset, with_b) in
        [(0, false, true), (1, true, true), (0, true, false)]
    {
        let p = Gru {
            seq_len: seq,
            batch,
            input_size: input,
            hidden,
            direction: RnnDirection::Bidirectional,
            layout,
            activations: [
                RnnActivation::Sigmoid,
                RnnActivation::Tanh,
                RnnActivation::Sigmoid,
                RnnActivation::Tanh,
            ],
            has_clip: false,
            clip: 0.0,
            linear_before_reset,
        };
        let (b, init) = if with_b {
            (&b[..], &init[..])
        } else {
            (&[][..], &[][..])
        };
        // In f64 on the inputs rounded to f32, then in float32.
        let (y64, yh64) = run_gru(&p, [&x, &w, &r, b, init], |v| widen(&narrow::<f32>(v)));
        let (y, yh) = run_gru(&p, [&x, &w, &r, b, init], narrow::<f32>);
        close(&widen(&y), &y64, 1e-5);
        close(&widen(&yh), &yh64, 1e-5);
    }
}

/// `Y` and `Y_h` of a bidirectional GRU over `[X, W, R, B, initial_h]`, each made a
/// `T` by `to`.
fn run_gru<T: Elem>(
    p: &Gru,
    inputs: [&[f64]; 5],
    to: impl Fn(&[f64]) -> Vec<T>,
) -> (Vec<T>, Vec<T>) {
    let [x, w, r, b, init] = inputs.map(to);
    let state = 2 * p.batch * p.hidden; // both directions
    let (mut y, mut yh) = (vec![T::zero(); p.seq_len * state], vec![T::zero(); state]);
    let mut scratch = vec![T::from_f64(f64::NAN); p.scratch_len()];
    gru(p, &x, &w, &r, &b, &init, &mut y, &mut yh, &mut scratch);
    (y, yh)
}

#[test]
fn rnn_batch_major_with_bias() {
    let (_, xb) = rnn_x();
    let p = Rnn {
        seq_len: 3,
        batch: 2,
        input_size: 2,
        hidden: 3,
        direction: RnnDirection::Forward,
        layout: 1,
        activations: [RnnActivation::Tanh; 2],
        has_clip: false,
        clip: 0.0,
    };
    let (w, r, b) = (
        sines(6, 0.91, 0.2, 0.5),
        sines(9, 0.53, 0.3, 0.5),
        sines(6, 0.29, 0.4, 0.3),
    );
    let h0 = sines(6, 0.71, 0.5, 0.4);
    let (mut y, mut yh) = (vec![0.0; 18], vec![0.0; 6]);
    let mut scratch = vec![0.0; p.scratch_len()];
    rnn(&p, &xb, &w, &r, &b, &h0, &mut y, &mut yh, &mut scratch);
    close(&y, RNN_Y, 1e-12);
    close(&yh, RNN_YH, 1e-12);
}
