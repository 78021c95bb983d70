//! RotaryEmbedding kernel against the ONNX reference
//! (`onnx.reference.ops.op_rotary_embedding.rotary_embedding`, onnx wheel pinned in
//! `.venv`). Inputs: `x[i] = (i % 7 - 3) / 4` (float32), caches `cos(k / 3)`,
//! `sin(k / 3)` over `k = 0..10` as `5 × 2` (with position ids) and `cos(k / 5)`,
//! `sin(k / 5)` over `k = 0..8` as `2 × 2 × 2` (without); expected values printed by the
//! reference in float32.

// The expected values are float32 results printed as Python floats.
#![allow(clippy::excessive_precision)]

use kiln_runtime::Error;
use kiln_runtime::typed::params::Rotary;
use kiln_runtime::typed::{rotary_embedding, rotary_embedding_pos};

fn x(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i % 7) as f32 - 3.0) / 4.0).collect()
}

fn cache(n: usize, div: f32, f: fn(f32) -> f32) -> Vec<f32> {
    (0..n).map(|k| f(k as f32 / div)).collect()
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-6 + 1e-5 * w.abs(), "[{i}]: {g} vs {w}");
    }
}

/// 4-D input `[batch 2, heads 2, seq 3, head 6]`, rotary_embedding_dim 4.
fn params_4d(interleaved: bool) -> Rotary {
    Rotary {
        batch: 2,
        seq: 3,
        heads: 2,
        head_size: 6,
        rot_dim: 4,
        interleaved,
        heads_first: true,
        cache_rows: 5,
    }
}

const POS: [i64; 6] = [0, 2, 4, 1, 3, 0];

#[rustfmt::skip]
const POS_ROT4_HALVES: [f32; 72] = [
    -0.75, -0.4724784791469574, -0.25, -0.16359736025333405, 0.25, 0.5, 0.6623970866203308, 0.3206446170806885, 0.6113346815109253, -0.7226250171661377, 0.0, 0.25, -0.10170888900756836, -0.6719343662261963, 0.8956312537193298, 0.6008362770080566, -0.25, 0.0, 0.25, 0.7178745269775391, 0.75, -0.545120358467102, -0.5, -0.25, -0.4859689474105835, -0.7704868316650391, 0.11761876940727234, 0.1770593523979187, -0.75, -0.5, 0.10801351815462112, -0.07056000083684921, -0.3366498053073883, -0.49499624967575073, 0.75, -0.75, -0.3929436206817627, -0.3454433083534241, -0.3091849088668823, -0.0752921849489212, 0.5, 0.75, 0.5394344925880432, 0.3453790545463562, -0.5779363512992859, -0.3615429699420929, 0.25, 0.5, 0.75, -0.6269190311431885, -0.5, -0.48163527250289917, 0.0, 0.25, 0.8567209839820862, 0.8259621858596802, -0.2802305221557617, 0.36095213890075684, -0.25, 0.0, -0.7860097289085388, 0.19693541526794434, -0.08478577435016632, 0.8796114921569824, -0.5, -0.25, 0.0, -0.009156808257102966, 0.5, 0.7905163764953613, -0.75, -0.5,
];

#[rustfmt::skip]
const POS_ROT4_INTERLEAVED: [f32; 72] = [
    -0.75, -0.5, -0.2362392395734787, -0.08179868012666702, 0.25, 0.5, 0.9053815603256226, 0.5525252819061279, 0.2967137396335602, -0.4737730920314789, 0.0, 0.25, -0.7876177430152893, -0.43835872411727905, 0.8130543231964111, 0.3891562521457672, -0.25, 0.0, 0.25, 0.5, 0.9541137218475342, -0.46332165598869324, -0.5, -0.25, -0.24298447370529175, 0.05880938470363617, -0.794417679309845, 0.4259113371372223, -0.75, -0.5, 0.22233165800571442, -0.11431813985109329, -0.3180581331253052, -0.459716260433197, 0.75, -0.75, -0.23835116624832153, -0.5056567192077637, -0.21036775410175323, 0.13507556915283203, 0.5, 0.75, 0.7667587995529175, -0.47389963269233704, 0.1726895272731781, -0.18077148497104645, 0.25, 0.5, 0.75, -0.75, -0.39067980647087097, -0.39983659982681274, 0.0, 0.25, -0.07083374261856079, 0.8986003398895264, 0.015508800745010376, -0.901254415512085, -0.25, 0.0, -0.5586854219436646, 0.019250944256782532, 0.024245917797088623, 1.0603830814361572, -0.5, -0.25, 0.0, 0.25, 0.22708243131637573, 0.8723150491714478, -0.75, -0.5,
];

#[test]
fn position_ids_halves() {
    let (c, s) = (cache(10, 3.0, f32::cos), cache(10, 3.0, f32::sin));
    let mut out = vec![0.0f32; 72];
    rotary_embedding_pos(&params_4d(false), &x(72), &c, &s, &POS, &mut out).unwrap();
    close(&out, &POS_ROT4_HALVES);
}

#[test]
fn position_ids_interleaved() {
    let (c, s) = (cache(10, 3.0, f32::cos), cache(10, 3.0, f32::sin));
    let mut out = vec![0.0f32; 72];
    rotary_embedding_pos(&params_4d(true), &x(72), &c, &s, &POS, &mut out).unwrap();
    close(&out, &POS_ROT4_INTERLEAVED);
}

#[test]
fn position_out_of_range_is_an_error() {
    let (c, s) = (cache(10, 3.0, f32::cos), cache(10, 3.0, f32::sin));
    let mut out = vec![0.0f32; 72];
    for bad in [5i64, -1] {
        let mut pos = POS;
        pos[4] = bad;
        let r = rotary_embedding_pos(&params_4d(false), &x(72), &c, &s, &pos, &mut out);
        assert!(
            matches!(r, Err(Error::IndexOutOfRange { index, len: 5 }) if index == bad),
            "{r:?}"
        );
    }
}

/// 3-D input `[batch 2, seq 2, 12]` with num_heads 3 (head 4, fully rotated), caches
/// `[2, 2, 2]` per token.
#[test]
fn no_position_ids_3d() {
    // The reference's x3 is the first two tokens of each batch of x(72) seen as [2, 3, 12].
    let all = x(72);
    let x3: Vec<f32> = (0..2)
        .flat_map(|b| all[b * 36..b * 36 + 24].to_vec())
        .collect();
    let (c, s) = (cache(8, 5.0, f32::cos), cache(8, 5.0, f32::sin));
    let p = Rotary {
        batch: 2,
        seq: 2,
        heads: 3,
        head_size: 4,
        rot_dim: 4,
        interleaved: false,
        heads_first: false,
        cache_rows: 4,
    };
    let mut out = vec![0.0f32; 48];
    rotary_embedding(&p, &x3, &c, &s, &mut out);
    #[rustfmt::skip]
    let want = [
        -0.75, -0.4900332987308502, -0.25, -0.09933466464281082, 0.25, 0.6390352845191956, 0.75, -0.6357153058052063, -0.5, -0.2946839928627014, 0.0, 0.19534932076931, 0.7525942325592041, 0.9013229608535767, -0.4960865378379822, 0.010814070701599121, -0.3276198208332062, -0.2823212444782257, 0.13291066884994507, 0.41266781091690063, 0.8855049014091492, -0.4778411388397217, -0.1684667468070984, -0.6298158168792725, -0.3483533561229706, -0.3454433083534241, -0.35867804288864136, -0.0752921849489212, 0.8863704204559326, 0.8259621858596802, -0.16385197639465332, 0.36095213890075684, -0.3535156846046448, -0.42073550820350647, -0.005162343382835388, 0.27015113830566406, 0.7377878427505493, 0.11888706684112549, 0.5178504586219788, -0.7815790772438049, -0.46601954102516174, -0.6965954899787903, 0.18117886781692505, 0.37383779883384705, -0.0387585312128067, -0.08498357981443405, -0.789618730545044, -0.49272486567497253,
    ];
    close(&out, &want);
}

/// Half precision: the f64 arithmetic rounds once to f16.
#[test]
fn half_precision() {
    use half::f16;
    let p = Rotary {
        batch: 1,
        seq: 1,
        heads: 1,
        head_size: 2,
        rot_dim: 2,
        interleaved: false,
        heads_first: true,
        cache_rows: 1,
    };
    let h = |v: f32| f16::from_f32(v);
    let mut out = [f16::ZERO; 2];
    rotary_embedding(&p, &[h(1.0), h(2.0)], &[h(0.5)], &[h(0.25)], &mut out);
    // real = 0.5·1 − 0.25·2 = 0, imag = 0.25·1 + 0.5·2 = 1.25.
    assert_eq!(out, [h(0.0), h(1.25)]);
}
