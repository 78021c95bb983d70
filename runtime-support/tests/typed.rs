//! Typed kernels against values from the ONNX reference implementation (onnx 1.x
//! `onnx.reference`, NumPy) or derived by hand from its semantics.

use half::{bf16, f16};
use kiln_runtime::typed::params::*;
use kiln_runtime::typed::*;

/// Python's `math.erf` at these points.
#[test]
fn erf_matches_python() {
    let cases = [
        (0.0, 0.0),
        (1e-10, 1.1283791670955126e-10),
        (0.1, 0.1124629160182849),
        (0.5, 0.5204998778130465),
        (1.0, 0.8427007929497149),
        (1.5, 0.9661051464753108),
        (2.0, 0.9953222650189527),
        (2.4999, 0.9995928300996666),
        (2.5, 0.999593047982555),
        (3.0, 0.9999779095030014),
        (3.7, 0.9999998328489421),
        (4.5, 0.9999999998033839),
        (5.5, 0.9999999999999927),
        (5.99, 1.0),
        (6.0, 1.0),
        (-0.7, -0.6778011938374184),
        (-3.2, -0.9999939742388483),
    ];
    for (x, want) in cases {
        let got = elem::erf(x);
        let rel = ((got - want) / want).abs();
        assert!(
            want == 0.0 && got == 0.0 || rel < 1e-14,
            "erf({x}) = {got}, want {want}"
        );
    }
    assert!(elem::erf(f64::NAN).is_nan());
    assert_eq!(elem::erf(f64::INFINITY), 1.0);
    assert!(elem::erf(-0.0).is_sign_negative());
}

#[test]
fn elem_conversions() {
    assert_eq!(i32::from_f64(-2.9), -2);
    assert_eq!(i32::from_f64(f64::NAN), 0);
    assert_eq!(i8::from_f64(1e9), i8::MAX);
    assert_eq!(u8::from_i64(-1), 255);
    assert_eq!(i8::from_i64(200), -56);
    assert_eq!(Bool::from_f64(f64::NAN), Bool::TRUE);
    assert_eq!(Bool::from_i64(0), Bool::FALSE);
    assert_eq!(f16::from_f64(65520.0), f16::INFINITY);
    assert_eq!(<f32 as Elem>::min_value(), f32::NEG_INFINITY);
    assert_eq!(<bf16 as Elem>::max_value(), bf16::INFINITY);
    assert_eq!(u64::MAX.to_i128(), u64::MAX as i128);
    assert_eq!(<u64 as Elem>::DTYPE, "uint64");
    assert_eq!(<Bool as Elem>::DTYPE, "bool");
}

#[test]
fn elem_integer_arithmetic() {
    use BinaryOp::*;
    assert_eq!(i8::binary(Add, 127, 1), -128);
    assert_eq!(i32::binary(Div, -7, 2), -3);
    assert_eq!(i32::binary(Div, 7, 0), 0);
    assert_eq!(i64::binary(Div, i64::MIN, -1), i64::MIN);
    // np.mod / np.fmod
    assert_eq!(i32::binary(Mod { fmod: false }, -7, 3), 2);
    assert_eq!(i32::binary(Mod { fmod: false }, 7, -3), -2);
    assert_eq!(i32::binary(Mod { fmod: true }, -7, 3), -1);
    assert_eq!(i32::binary(Mod { fmod: true }, 7, 0), 0);
    assert_eq!(i64::binary(Mod { fmod: false }, i64::MIN, -1), 0);
    assert_eq!(i32::binary(Pow, 3, 4), 81);
    assert_eq!(i8::binary(Pow, 2, 8), 0);
    assert_eq!(i32::binary(Pow, -1, -3), -1);
    assert_eq!(i32::binary(Pow, 2, -1), 0);
    assert_eq!(u8::binary(BitShiftLeft, 1, 7), 128);
    assert_eq!(u8::binary(BitShiftLeft, 1, 8), 0);
    assert_eq!(u8::binary(BitShiftRight, 255, 9), 0);
    assert_eq!(i8::binary(BitShiftRight, -8, 1), -4);
    assert_eq!(i8::binary(BitShiftRight, -8, 100), -1);
    assert_eq!(u32::unary(UnaryOp::BitwiseNot, 0), u32::MAX);
    assert_eq!(i32::unary(UnaryOp::Abs, i32::MIN), i32::MIN);
    assert_eq!(i32::unary(UnaryOp::Sign, -5), -1);
    assert_eq!(u16::unary(UnaryOp::Sign, 5), 1);
    assert_eq!(i32::binary(PRelu, -3, 2), -6);
    assert_eq!(Bool::binary(Xor, Bool::TRUE, Bool::TRUE), Bool::FALSE);
    assert_eq!(Bool::unary(UnaryOp::Not, Bool::FALSE), Bool::TRUE);
}

#[test]
fn elem_float_arithmetic() {
    use BinaryOp::*;
    // np.mod(-0.5, 2.0) = 1.5; np.mod(2.0, -2.0) = -0.0; np.fmod(-7.5, 2) = -1.5.
    assert_eq!(f64::binary(Mod { fmod: false }, -0.5, 2.0), 1.5);
    assert!(f64::binary(Mod { fmod: false }, 2.0, -2.0).is_sign_negative());
    assert_eq!(f32::binary(Mod { fmod: true }, -7.5, 2.0), -1.5);
    assert!(f32::binary(Max, 1.0, f32::NAN).is_nan());
    assert!(f32::binary(Min, f32::NAN, 1.0).is_nan());
    assert_eq!(f32::unary(UnaryOp::Round, 2.5), 2.0);
    assert_eq!(f32::unary(UnaryOp::Round, -1.5), -2.0);
    assert!(f32::unary(UnaryOp::Relu, -0.0).is_sign_negative());
    assert_eq!(
        f16::unary(UnaryOp::Neg, f16::from_f32(1.5)),
        f16::from_f32(-1.5)
    );
    assert_eq!(f32::unary(UnaryOp::Softplus, 100.0), 100.0);
}

// ---------------------------------------------------------------------------------
// Helpers

const X7: [f32; 7] = [-2.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5];

fn assert_close(got: &[f64], want: &[f64], rel: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= rel * w.abs().max(1e-30) || (g - w).abs() < 1e-12
        };
        assert!(
            ok,
            "{what}[{i}]: got {g}, want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

fn f64s<T: Elem>(x: &[T]) -> Vec<f64> {
    x.iter().map(|v| v.to_f64()).collect()
}

fn un<T: Elem>(op: UnaryOp, x: &[T]) -> Vec<T> {
    let mut out = vec![T::zero(); x.len()];
    unary(&Unary { op }, x, &mut out);
    out
}

fn shape(s: &[usize]) -> [usize; RANK] {
    let mut a = [1; RANK];
    a[..s.len()].copy_from_slice(s);
    a
}

// ---------------------------------------------------------------------------------
// Unary

/// Expected values: onnx.reference (float32) on X7; Gelu from Python's math.erf/tanh.
#[test]
fn unary_float32_matches_reference() {
    use UnaryOp::*;
    let cases: [(UnaryOp, [f64; 7]); 22] = [
        (
            Sigmoid,
            [
                0.07585818320512772,
                0.26894140243530273,
                0.3775406777858734,
                0.5,
                0.622459352016449,
                0.7310585975646973,
                0.9241418242454529,
            ],
        ),
        (
            Erf,
            [
                -0.9995930194854736,
                -0.8427007794380188,
                -0.5204998850822449,
                0.0,
                0.5204998850822449,
                0.8427007794380188,
                0.9995930194854736,
            ],
        ),
        (
            Softplus,
            [
                0.07888973504304886,
                0.3132616877555847,
                0.4740769863128662,
                0.6931471824645996,
                0.9740769863128662,
                1.3132617473602295,
                2.578889846801758,
            ],
        ),
        (
            Selu {
                alpha: 1.6732632,
                gamma: 1.050_701,
            },
            [
                -1.6137858629226685,
                -1.1113307476043701,
                -0.6917582154273987,
                0.0,
                0.5253505110740662,
                1.0507010221481323,
                2.6267526149749756,
            ],
        ),
        (
            Elu { alpha: 0.7 },
            [
                -0.6425405144691467,
                -0.44248437881469727,
                -0.27542853355407715,
                0.0,
                0.5,
                1.0,
                2.5,
            ],
        ),
        (
            Celu { alpha: 1.5 },
            [
                -1.2166866064071655,
                -0.7298743724822998,
                -0.42520302534103394,
                0.0,
                0.5,
                1.0,
                2.5,
            ],
        ),
        (
            HardSigmoid {
                alpha: 0.2,
                beta: 0.5,
            },
            [
                0.0,
                0.30000001192092896,
                0.4000000059604645,
                0.5,
                0.6000000238418579,
                0.699999988079071,
                1.0,
            ],
        ),
        (
            HardSwish,
            [
                -0.20833328366279602,
                -0.3333333134651184,
                -0.2083333283662796,
                0.0,
                0.2916666567325592,
                0.6666666865348816,
                2.2916667461395264,
            ],
        ),
        (
            Mish,
            [
                -0.19681620597839355,
                -0.30340147018432617,
                -0.22074377536773682,
                0.0,
                0.37524518370628357,
                0.8650984168052673,
                2.4713923931121826,
            ],
        ),
        (
            Gelu { tanh: false },
            [
                -0.015524163314440398,
                -0.15865525393145707,
                -0.15426876936299344,
                0.0,
                0.34573123063700656,
                0.8413447460685429,
                2.4844758366855597,
            ],
        ),
        (
            Gelu { tanh: true },
            [
                -0.015084266089998577,
                -0.15880800939172324,
                -0.15428599017485606,
                0.0,
                0.34571400982514394,
                0.8411919906082768,
                2.484915733910001,
            ],
        ),
        (
            Softsign,
            [
                -0.7142857313156128,
                -0.5,
                -0.3333333432674408,
                0.0,
                0.3333333432674408,
                0.5,
                0.7142857313156128,
            ],
        ),
        (
            ThresholdedRelu { alpha: 0.6 },
            [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.5],
        ),
        (
            Shrink {
                bias: 0.2,
                lambd: 0.7,
            },
            [
                -2.299999952316284,
                -0.800000011920929,
                0.0,
                0.0,
                0.0,
                0.800000011920929,
                2.299999952316284,
            ],
        ),
        (
            LeakyRelu { alpha: 0.1 },
            [
                -0.25,
                -0.10000000149011612,
                -0.05000000074505806,
                0.0,
                0.5,
                1.0,
                2.5,
            ],
        ),
        (Round, [-2.0, -1.0, -0.0, 0.0, 0.0, 1.0, 2.0]),
        (Sign, [-1.0, -1.0, -1.0, 0.0, 1.0, 1.0, 1.0]),
        (
            Tanh,
            [
                -0.9866142868995667,
                -0.7615941762924194,
                -0.46211719512939453,
                0.0,
                0.46211719512939453,
                0.7615941762924194,
                0.9866142868995667,
            ],
        ),
        (
            Atan,
            [
                -1.1902899742126465,
                -0.7853981852531433,
                -0.46364760398864746,
                0.0,
                0.46364760398864746,
                0.7853981852531433,
                1.1902899742126465,
            ],
        ),
        (
            Asinh,
            [
                -1.647231101989746,
                -0.8813735842704773,
                -0.4812118113040924,
                0.0,
                0.4812118113040924,
                0.8813735842704773,
                1.647231101989746,
            ],
        ),
        (
            Exp,
            [
                0.0820850059390068,
                0.3678794205188751,
                0.6065306663513184,
                1.0,
                1.6487212181091309,
                2.7182819843292236,
                12.182493209838867,
            ],
        ),
        (
            Swish { alpha: 1.3 },
            [
                -0.09331721812486649,
                -0.21416503190994263,
                -0.17149478197097778,
                0.0,
                0.3285052180290222,
                0.7858350276947021,
                2.4066827297210693,
            ],
        ),
    ];
    for (op, want) in cases {
        // The reference computes in float32 (HardSwish with alpha = 1/6 rounded to f32),
        // the kernel in f64 with one rounding: a few f32 ulps apart.
        assert_close(&f64s(&un(op, &X7)), &want, 5e-7, &format!("{op:?} f32"));
        // The same op in float64 and bfloat16 (each rounds the f64 result once).
        let x64: Vec<f64> = X7.iter().map(|&v| v as f64).collect();
        assert_close(&un(op, &x64), &want, 5e-7, &format!("{op:?} f64"));
        let xb: Vec<bf16> = X7.iter().map(|&v| bf16::from_f32(v)).collect();
        assert_close(&f64s(&un(op, &xb)), &want, 8e-3, &format!("{op:?} bf16"));
    }
    // Round is half to even, and -0 and NaN keep their identity through Sign/Relu.
    let r = un(UnaryOp::Round, &[0.5f32, 1.5, -2.5, 2.4999998]);
    assert_eq!(r, [0.0, 2.0, -2.0, 2.0]);
    let s = un(UnaryOp::Sign, &[-0.0f32, f32::NAN]);
    assert!(s[0] == 0.0 && s[0].is_sign_negative() && s[1].is_nan());
    assert!(un(UnaryOp::Relu, &[f32::NAN])[0].is_nan());
    // Softplus and Sigmoid do not overflow.
    assert_eq!(un(UnaryOp::Softplus, &[1000.0f64, -1000.0]), [1000.0, 0.0]);
    assert_eq!(un(UnaryOp::Sigmoid, &[-1000.0f64, 1000.0]), [0.0, 1.0]);
    // f16 results round to nearest.
    let h = un(UnaryOp::Sqrt, &[f16::from_f32(2.0)]);
    assert_eq!(h[0], f16::from_f64(std::f64::consts::SQRT_2));
}

#[test]
fn unary_integers_and_bool() {
    use UnaryOp::*;
    assert_eq!(un(Abs, &[-5i8, i8::MIN, 7]), [5, i8::MIN, 7]);
    assert_eq!(un(Neg, &[1u8, 0]), [255, 0]);
    assert_eq!(un(Neg, &[i64::MIN, 3]), [i64::MIN, -3]);
    assert_eq!(un(Relu, &[-3i32, 0, 4]), [0, 0, 4]);
    assert_eq!(un(Sign, &[-3i16, 0, 9]), [-1, 0, 1]);
    assert_eq!(un(BitwiseNot, &[0u16, 0xff]), [0xffff, 0xff00]);
    assert_eq!(un(BitwiseNot, &[0i32, -1]), [-1, 0]);
    assert_eq!(
        un(Not, &[Bool::TRUE, Bool::FALSE]),
        [Bool::FALSE, Bool::TRUE]
    );
    assert_eq!(un(Identity, &[u64::MAX]), [u64::MAX]);
    // Float-only ops on integers go through f64 and do not panic.
    assert_eq!(un(Sqrt, &[16i32, -4]), [4, 0]);
    let mut y = [1i32, -2, 3];
    unary_inplace(&Unary { op: Neg }, &mut y);
    assert_eq!(y, [-1, 2, -3]);
}

#[test]
fn is_nan_and_is_inf() {
    let x = [1.0f32, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0];
    let mut out = [Bool::FALSE; 5];
    is_nan(&x, &mut out);
    assert_eq!(out.map(|b| b.0), [0, 1, 0, 0, 0]);
    let p = IsInf {
        detect_negative: true,
        detect_positive: false,
    };
    is_inf(&p, &x, &mut out);
    assert_eq!(out.map(|b| b.0), [0, 0, 0, 1, 0]);
    let p = IsInf {
        detect_negative: true,
        detect_positive: true,
    };
    let xh = x.map(f16::from_f32);
    is_inf(&p, &xh, &mut out);
    assert_eq!(out.map(|b| b.0), [0, 0, 1, 1, 0]);
    let mut o3 = [Bool::TRUE; 3];
    is_inf(&p, &[i32::MAX, 0, i32::MIN], &mut o3);
    assert_eq!(o3, [Bool::FALSE; 3]);
}

// ---------------------------------------------------------------------------------
// Binary, compare, where

fn bin<T: Elem>(
    op: BinaryOp,
    a: &[T],
    sa: &[usize],
    b: &[T],
    sb: &[usize],
    out: &[usize],
) -> Vec<T> {
    let bc = Broadcast::new(out, &[sa, sb]);
    let mut y = vec![T::zero(); bc.len()];
    binary(&Binary { op, bc }, a, b, &mut y);
    y
}

/// Expected values: onnx.reference Mod (fmod 0/1), Div, BitShift, Pow.
#[test]
fn binary_integer_semantics_match_reference() {
    use BinaryOp::*;
    let a = [-7i32, 7, -8, 5, -5, 0];
    let b = [3i32, -3, 4];
    let s = |op| bin(op, &a, &[2, 3], &b, &[3], &[2, 3]);
    assert_eq!(s(Mod { fmod: false }), [2, -2, 0, 2, -2, 0]);
    assert_eq!(s(Mod { fmod: true }), [-1, 1, 0, 2, -2, 0]);
    assert_eq!(s(Div), [-2, -2, -2, 1, 1, 0]);
    let u = [1u8, 255, 16, 3];
    let sh = [7u8, 1, 9, 0];
    assert_eq!(
        bin(BitShiftLeft, &u, &[4], &sh, &[4], &[4]),
        [128, 254, 0, 3]
    );
    assert_eq!(
        bin(BitShiftRight, &u, &[4], &sh, &[4], &[4]),
        [0, 127, 0, 3]
    );
    let p = bin(Pow, &[2i64, -3, 5, 7], &[4], &[10, 3, 0, 2], &[4], &[4]);
    assert_eq!(p, [1024, -27, 1, 49]);
    assert_eq!(bin(Pow, &[3i8, 2], &[2], &[5, 7], &[2], &[2]), [-13, -128]);
    // Overflow wraps; x / 0 and x % 0 are 0 (ONNX leaves them undefined).
    assert_eq!(bin(Add, &[i16::MAX], &[1], &[1], &[1], &[1]), [i16::MIN]);
    assert_eq!(bin(Mul, &[200u8], &[1], &[2], &[1], &[1]), [144]);
    assert_eq!(bin(Div, &[5u32, 6], &[2], &[0], &[1], &[2]), [0, 0]);
    assert_eq!(
        bin(Mod { fmod: false }, &[5i64], &[1], &[0], &[1], &[1]),
        [0]
    );
    assert_eq!(
        bin(BitwiseXor, &[0b1100u8], &[1], &[0b1010], &[1], &[1]),
        [0b0110]
    );
    assert_eq!(bin(PRelu, &[-4i32, 4], &[2], &[3], &[1], &[2]), [-12, 4]);
    let t = Bool::TRUE;
    let f = Bool::FALSE;
    assert_eq!(
        bin(And, &[t, t, f, f], &[4], &[t, f, t, f], &[4], &[4]),
        [t, f, f, f]
    );
    assert_eq!(
        bin(Or, &[t, t, f, f], &[4], &[t, f, t, f], &[4], &[4]),
        [t, t, t, f]
    );
    assert_eq!(
        bin(Xor, &[t, t, f, f], &[4], &[t, f, t, f], &[4], &[4]),
        [f, t, t, f]
    );
}

#[test]
fn binary_broadcasting_layouts() {
    use BinaryOp::*;
    // [2,1,3] + [4,1] → [2,4,3]: both operands broadcast (stride 0) in different axes.
    let a: Vec<i64> = (0..6).collect();
    let b: Vec<i64> = (0..4).map(|v| v * 100).collect();
    let y = bin(Add, &a, &[2, 1, 3], &b, &[4, 1], &[2, 4, 3]);
    let mut want = vec![];
    for i in 0..2 {
        for bj in &b {
            for k in 0..3 {
                want.push(a[i * 3 + k] + bj);
            }
        }
    }
    assert_eq!(y, want);
    // Scalar operand on the left, contiguous equal shapes, f16.
    let h: Vec<f16> = [1.0f32, 2.0, 3.0]
        .iter()
        .map(|&v| f16::from_f32(v))
        .collect();
    let y = bin(Sub, &[f16::from_f32(10.0)], &[], &h, &[3], &[3]);
    assert_eq!(f64s(&y), [9.0, 8.0, 7.0]);
    let y = bin(Mul, &h, &[3], &h, &[3], &[3]);
    assert_eq!(f64s(&y), [1.0, 4.0, 9.0]);
    // Rank 8 with a broadcast middle axis: b is [1,1,1,2,1,1,1,1].
    let out = [1, 1, 1, 2, 3, 1, 1, 2];
    let a: Vec<u32> = (0..12).collect();
    let y = bin(
        Add,
        &a,
        &out,
        &[1000, 2000],
        &[1, 1, 1, 2, 1, 1, 1, 1],
        &out,
    );
    let want: Vec<u32> = (0..12)
        .map(|i| i + if i < 6 { 1000 } else { 2000 })
        .collect();
    assert_eq!(y, want);
    // Empty output.
    let y = bin(Add, &[] as &[f32], &[0, 3], &[1.0, 2.0, 3.0], &[3], &[0, 3]);
    assert!(y.is_empty());
    // NaN propagates through Max/Min; float Mod by zero is NaN.
    let y = bin(Max, &[1.0f32, f32::NAN], &[2], &[f32::NAN, 0.0], &[2], &[2]);
    assert!(y[0].is_nan() && y[1].is_nan());
    let y = bin(Mod { fmod: true }, &[1.0f64], &[1], &[0.0], &[1], &[1]);
    assert!(y[0].is_nan());
}

#[test]
fn binary_accumulate_variadic() {
    // Sum of [2,3] with a [3] row and a [2,1] column.
    let bc_row = Broadcast::new(&[2, 3], &[&[2, 3], &[3]]);
    let bc_col = Broadcast::new(&[2, 3], &[&[2, 3], &[2, 1]]);
    let mut acc = [1i32, 2, 3, 4, 5, 6];
    binary_acc(
        &Binary {
            op: BinaryOp::Add,
            bc: bc_row,
        },
        &mut acc,
        &[10, 20, 30],
    );
    binary_acc(
        &Binary {
            op: BinaryOp::Max,
            bc: bc_col,
        },
        &mut acc,
        &[22, 0],
    );
    assert_eq!(acc, [22, 22, 33, 14, 25, 36]);
}

/// Expected values: onnx.reference Pow with an int32 base and float32 exponent
/// (`np.power(a, b).astype(a.dtype)`).
#[test]
fn pow_mixed_types() {
    let bc = Broadcast::new(&[3], &[&[3], &[3]]);
    let mut y = [0i32; 3];
    pow(&bc, &[2i32, 3, 4], &[0.5f32, 2.0, -1.0], &mut y);
    assert_eq!(y, [1, 9, 0]);
    let mut y = [0.0f32; 3];
    pow(&bc, &[2.0f32, -2.0, 9.0], &[3i64, 3, 0], &mut y);
    assert_eq!(y, [8.0, -8.0, 1.0]);
    let mut y = [0u8; 2];
    let bc = Broadcast::new(&[2], &[&[2], &[]]);
    pow(&bc, &[2u8, 3], &[9i64], &mut y);
    assert_eq!(y, [0, 3u8.wrapping_pow(9)]);
}

#[test]
fn compare_ops() {
    let bc = Broadcast::new(&[4], &[&[4], &[]]);
    let a = [1.0f32, f32::NAN, -0.0, 3.0];
    let run = |op, b: f32| {
        let mut out = [Bool::FALSE; 4];
        compare(&Compare { op, bc }, &a, &[b], &mut out);
        out.map(|v| v.0)
    };
    assert_eq!(run(CompareOp::Equal, 0.0), [0, 0, 1, 0]);
    assert_eq!(run(CompareOp::Less, 1.0), [0, 0, 1, 0]);
    assert_eq!(run(CompareOp::LessOrEqual, 1.0), [1, 0, 1, 0]);
    assert_eq!(run(CompareOp::Greater, 1.0), [0, 0, 0, 1]);
    assert_eq!(run(CompareOp::GreaterOrEqual, 1.0), [1, 0, 0, 1]);
    let mut out = [Bool::FALSE; 2];
    let bc = Broadcast::new(&[2], &[&[2], &[2]]);
    compare(
        &Compare {
            op: CompareOp::Less,
            bc,
        },
        &[u64::MAX, 0],
        &[0, u64::MAX],
        &mut out,
    );
    assert_eq!(out, [Bool::FALSE, Bool::TRUE]);
    compare(
        &Compare {
            op: CompareOp::Equal,
            bc,
        },
        &[Bool::TRUE, Bool::FALSE],
        &[Bool::TRUE, Bool::TRUE],
        &mut out,
    );
    assert_eq!(out, [Bool::TRUE, Bool::FALSE]);
}

#[test]
fn where_broadcasts_three_operands() {
    // cond [2,1], x [3], y scalar → [2,3].
    let bc = Broadcast::new(&[2, 3], &[&[2, 1], &[3], &[]]);
    let mut out = [0i64; 6];
    where_(&bc, &[Bool::TRUE, Bool::FALSE], &[1, 2, 3], &[-1], &mut out);
    assert_eq!(out, [1, 2, 3, -1, -1, -1]);
    let bc = Broadcast::new(&[3], &[&[3], &[3], &[3]]);
    let mut out = [0u8; 3];
    where_(
        &bc,
        &[Bool::FALSE, Bool::TRUE, Bool::FALSE],
        &[1, 2, 3],
        &[7, 8, 9],
        &mut out,
    );
    assert_eq!(out, [7, 2, 9]);
}

/// A contiguous condition against a repeated value on either side or both (an
/// attention mask choosing a constant), the selects that run vectorised.
#[test]
fn where_selects_runs_and_repeated_values() {
    let cond = [true, false, false, true, true, false, true, false].map(Bool::from);
    let run = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let mut out = [0f32; 8];
    let bc = Broadcast::new(&[2, 4], &[&[2, 4], &[], &[2, 4]]);
    where_(&bc, &cond, &[-1.0], &run, &mut out);
    assert_eq!(out, [-1.0, 2.0, 3.0, -1.0, -1.0, 6.0, -1.0, 8.0]);
    let bc = Broadcast::new(&[2, 4], &[&[2, 4], &[2, 4], &[1]]);
    where_(&bc, &cond, &run, &[0.5], &mut out);
    assert_eq!(out, [1.0, 0.5, 0.5, 4.0, 5.0, 0.5, 7.0, 0.5]);
    let bc = Broadcast::new(&[2, 4], &[&[2, 4], &[1, 1], &[]]);
    where_(&bc, &cond, &[9.0], &[-9.0], &mut out);
    assert_eq!(out, [9.0, -9.0, -9.0, 9.0, 9.0, -9.0, 9.0, -9.0]);
}

// ---------------------------------------------------------------------------------
// Cast, range

/// Expected values: NumPy `astype` (the ONNX Cast reference).
#[test]
fn cast_matches_numpy() {
    let f = [
        1.0 + 1.0 / 1024.0f32,
        1.0 + 0.5 / 1024.0,
        1.0 + 1.5 / 1024.0,
        65519.0,
        65520.0,
        -0.0,
        3.4e38,
    ];
    let mut h = [f16::ZERO; 7];
    cast(&f, &mut h);
    assert_eq!(
        h.map(f16::to_bits),
        [0x3c01, 0x3c00, 0x3c02, 0x7bff, 0x7c00, 0x8000, 0x7c00]
    );
    let mut back = [0.0f32; 7];
    cast(&h, &mut back);
    assert_eq!(back[0], 1.0 + 1.0 / 1024.0);
    let g = [-2.7f64, 2.7, 0.0, -0.0, 1e10];
    let mut i = [0i32; 4];
    cast(&g[..4], &mut i);
    assert_eq!(i, [-2, 2, 0, 0]);
    let mut b = [Bool::FALSE; 5];
    cast(&g, &mut b);
    assert_eq!(b.map(|v| v.0), [1, 1, 0, 0, 1]);
    let mut i8s = [0i8; 5];
    cast(&[127i64, 128, -129, 300, -1], &mut i8s);
    assert_eq!(i8s, [127, -128, 127, 44, -1]);
    let mut u16s = [0u16; 3];
    cast(&[-1i64, 65536, 70000], &mut u16s);
    assert_eq!(u16s, [65535, 0, 4464]);
    // Rounded once, directly from the integer (through f64 would round twice).
    let mut f32s = [0.0f32; 2];
    cast(&[(1u64 << 63) + (1 << 40) + 1, u64::MAX], &mut f32s);
    assert_eq!(f32s[0] as f64, 9.223373136366404e18);
    cast(&[(1i64 << 60) + (1 << 36) + 1, 16777217], &mut f32s);
    assert_eq!(f32s, [((1u64 << 60) + (1 << 37)) as f32, 16777216.0]);
    // Saturating float → int, NaN → 0 (NumPy leaves these undefined).
    let mut sat = [0i16; 3];
    cast(&[1e9f32, -1e9, f32::NAN], &mut sat);
    assert_eq!(sat, [i16::MAX, i16::MIN, 0]);
    let mut fb = [0.0f32; 2];
    cast(&[Bool::TRUE, Bool::FALSE], &mut fb);
    assert_eq!(fb, [1.0, 0.0]);
    let mut same = [0u64; 2];
    cast(&[5u64, u64::MAX], &mut same);
    assert_eq!(same, [5, u64::MAX]);
    let mut bf = [bf16::ZERO; 1];
    cast(&[1.00390625f64], &mut bf); // halfway between 1 and 1 + 2^-7: to even
    assert_eq!(bf[0], bf16::ONE);
}

/// Expected values: onnx.reference Range(1.0, 2.0, 0.3) in float32, which accumulates
/// float32 rounding (1.8999999 where the kernel's `1 + 3 · 0.3` rounds to 1.9000001);
/// integer ranges.
#[test]
fn range_values() {
    let mut out = [0.0f32; 4];
    range(&[1.0], &[0.3], &mut out);
    assert_close(
        &f64s(&out),
        &[
            1.0,
            1.2999999523162842,
            1.5999999046325684,
            1.8999998569488525,
        ],
        2e-7,
        "range",
    );
    let mut out = [0i32; 4];
    range(&[10], &[-3], &mut out);
    assert_eq!(out, [10, 7, 4, 1]);
    let mut out = [0u8; 3];
    range(&[250], &[3], &mut out);
    assert_eq!(out, [250, 253, 0]);
    range(&[], &[3], &mut out); // no start: nothing written
    assert_eq!(out, [250, 253, 0]);
}

// ---------------------------------------------------------------------------------
// Layout

fn strided(shape_: &[usize], offset: usize, strides: &[isize]) -> Strided {
    let mut s = [0isize; RANK];
    s[..strides.len()].copy_from_slice(strides);
    Strided {
        rank: shape_.len(),
        shape: shape(shape_),
        offset,
        strides: s,
    }
}

#[test]
fn copy_strided_transpose_slice_expand() {
    // Transpose [2,3,4] by (2,0,1).
    let x: Vec<i32> = (0..24).collect();
    let p = Strided::transpose(&[2, 3, 4], &[2, 0, 1]);
    let mut out = vec![0; 24];
    copy_strided(&p, &x, &mut out).unwrap();
    let mut want = vec![];
    for k in 0..4 {
        for i in 0..2 {
            for j in 0..3 {
                want.push(x[i * 12 + j * 4 + k]);
            }
        }
    }
    assert_eq!(out, want);
    // x[::-1, 3:0:-2] on [2,4]: offset 1·4 + 3, strides (-4, -2).
    let x: Vec<u8> = (0..8).collect();
    let mut out = [0u8; 4];
    copy_strided(&strided(&[2, 2], 7, &[-4, -2]), &x, &mut out).unwrap();
    assert_eq!(out, [7, 5, 3, 1]);
    // Reversed contiguous innermost run (stride -1).
    let mut out = [0u8; 8];
    copy_strided(&strided(&[2, 4], 7, &[-4, -1]), &x, &mut out).unwrap();
    assert_eq!(out, [7, 6, 5, 4, 3, 2, 1, 0]);
    // Expand [3] → [2,3] (stride 0 outer) and [3,1] → [3,2] (stride 0 inner).
    let mut out = [0u8; 6];
    copy_strided(&strided(&[2, 3], 0, &[0, 1]), &x[..3], &mut out).unwrap();
    assert_eq!(out, [0, 1, 2, 0, 1, 2]);
    copy_strided(&strided(&[3, 2], 0, &[1, 0]), &x[..3], &mut out).unwrap();
    assert_eq!(out, [0, 0, 1, 1, 2, 2]);
    // Tile [2] × 3 as the view [3, 2] with strides (0, 1) of the input.
    let xs = [Bool::TRUE, Bool::FALSE];
    let mut out = [Bool::FALSE; 6];
    copy_strided(&strided(&[3, 2], 0, &[0, 1]), &xs, &mut out).unwrap();
    assert_eq!(out.map(|b| b.0), [1, 0, 1, 0, 1, 0]);
}

#[test]
fn copy_strided_rank8_and_bounds() {
    // A rank-8 transpose (reverse all axes) of a 2×1×2×1×2×1×2×2 tensor.
    let dims = [2, 1, 2, 1, 2, 1, 2, 2];
    let x: Vec<i64> = (0..32).collect();
    let perm = [7, 6, 5, 4, 3, 2, 1, 0];
    let p = Strided::transpose(&dims, &perm);
    let mut out = vec![0; 32];
    copy_strided(&p, &x, &mut out).unwrap();
    // Reference: out[i7..i0] = x[i0..i7].
    let st = [16, 16, 8, 8, 4, 4, 2, 1];
    let mut want = vec![];
    for a in 0..2 {
        for b in 0..2 {
            for c in 0..2 {
                for d in 0..2 {
                    for e in 0..2 {
                        let idx = [e, 0, d, 0, c, 0, b, a];
                        want.push(idx.iter().zip(&st).map(|(i, s)| i * s).sum::<usize>() as i64);
                    }
                }
            }
        }
    }
    // Output shape [2,2,1,2,1,2,1,2]: loops a (dim0 = in dim7), b (dim1 = in dim6),
    // c (dim3 = in dim4), d (dim5 = in dim2), e (dim7 = in dim0).
    assert_eq!(out, want);
    // Out of range: negative first index, index past the end, wrong output size.
    let mut o4 = [0i64; 4];
    let e = copy_strided(&strided(&[4], 2, &[-1]), &x[..8], &mut o4);
    assert!(matches!(
        e,
        Err(kiln_runtime::Error::IndexOutOfRange { index: -1, len: 8 })
    ));
    let e = copy_strided(&strided(&[4], 5, &[1]), &x[..8], &mut o4);
    assert!(matches!(
        e,
        Err(kiln_runtime::Error::IndexOutOfRange { index: 8, len: 8 })
    ));
    let e = copy_strided(&strided(&[3], 0, &[1]), &x[..8], &mut o4);
    assert!(e.is_err());
    assert_eq!(o4, [0; 4], "nothing written on error");
    // Empty output is fine whatever the offset.
    copy_strided(&strided(&[0, 3], 100, &[1, 1]), &x[..8], &mut []).unwrap();
}

#[test]
fn concat_rows() {
    // [2,1] ++ [2,3] ++ [2,0] along axis 1.
    let mut out = [0u16; 8];
    concat(
        &Concat { outer: 2 },
        &[&[1, 2], &[10, 11, 12, 20, 21, 22], &[]],
        &mut out,
    );
    assert_eq!(out, [1, 10, 11, 12, 2, 20, 21, 22]);
    let mut out = [0.0f64; 3];
    concat(&Concat { outer: 1 }, &[&[1.0], &[2.0, 3.0]], &mut out);
    assert_eq!(out, [1.0, 2.0, 3.0]);
}

fn pad_p(inp: &[usize], out: &[usize], begin: &[isize], mode: PadMode) -> Pad {
    let mut b = [0isize; RANK];
    b[..begin.len()].copy_from_slice(begin);
    Pad {
        rank: inp.len(),
        in_shape: shape(inp),
        out_shape: shape(out),
        begin: b,
        mode,
    }
}

/// Expected values: `np.pad` (the ONNX Pad reference) of [[1,2,3],[4,5,6]] with pads
/// ((1,2),(2,4)), and of [1,2,3] with (5,6) in reflect mode.
#[test]
fn pad_modes_match_numpy() {
    let x = [1i32, 2, 3, 4, 5, 6];
    let run = |mode| {
        let mut out = [0i32; 45];
        pad(&pad_p(&[2, 3], &[5, 9], &[1, 2], mode), &x, &[], &mut out);
        out
    };
    assert_eq!(
        run(PadMode::Reflect),
        [
            6, 5, 4, 5, 6, 5, 4, 5, 6, 3, 2, 1, 2, 3, 2, 1, 2, 3, 6, 5, 4, 5, 6, 5, 4, 5, 6, 3, 2,
            1, 2, 3, 2, 1, 2, 3, 6, 5, 4, 5, 6, 5, 4, 5, 6
        ]
    );
    assert_eq!(
        run(PadMode::Edge),
        [
            1, 1, 1, 2, 3, 3, 3, 3, 3, 1, 1, 1, 2, 3, 3, 3, 3, 3, 4, 4, 4, 5, 6, 6, 6, 6, 6, 4, 4,
            4, 5, 6, 6, 6, 6, 6, 4, 4, 4, 5, 6, 6, 6, 6, 6
        ]
    );
    assert_eq!(
        run(PadMode::Wrap),
        [
            5, 6, 4, 5, 6, 4, 5, 6, 4, 2, 3, 1, 2, 3, 1, 2, 3, 1, 5, 6, 4, 5, 6, 4, 5, 6, 4, 2, 3,
            1, 2, 3, 1, 2, 3, 1, 5, 6, 4, 5, 6, 4, 5, 6, 4
        ]
    );
    let c = run(PadMode::Constant);
    assert_eq!(&c[9..18], &[0, 0, 1, 2, 3, 0, 0, 0, 0]);
    // Pads wider than the input reflect periodically.
    let mut out = [0u8; 14];
    pad(
        &pad_p(&[3], &[14], &[5], PadMode::Reflect),
        &[1, 2, 3],
        &[],
        &mut out,
    );
    assert_eq!(out, [2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2, 1]);
    // Constant 9 with pads ((1,0),(-1,2)): np.pad(.., ((1,0),(0,2)))[:, 1:].
    let mut out = [0i32; 12];
    pad(
        &pad_p(&[2, 3], &[3, 4], &[1, -1], PadMode::Constant),
        &x,
        &[9],
        &mut out,
    );
    assert_eq!(out, [9, 9, 9, 9, 2, 3, 9, 9, 5, 6, 9, 9]);
    // Crop only, f16, rank 3.
    let xh: Vec<f16> = (0..8).map(|v| f16::from_f32(v as f32)).collect();
    let mut out = [f16::ZERO; 2];
    pad(
        &pad_p(&[2, 2, 2], &[1, 1, 2], &[-1, 0, 0], PadMode::Edge),
        &xh,
        &[],
        &mut out,
    );
    assert_eq!(f64s(&out), [4.0, 5.0]);
}

/// Expected values: onnx.reference Trilu on arange(12).reshape(3,4).
#[test]
fn trilu_upper_lower() {
    let x: Vec<i64> = (0..12).collect();
    let mut out = [0i64; 12];
    let p = Trilu {
        batch: 1,
        rows: 3,
        cols: 4,
        k: 1,
        upper: true,
    };
    trilu(&p, &x, &mut out);
    assert_eq!(out, [0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11]);
    let p = Trilu {
        batch: 1,
        rows: 3,
        cols: 4,
        k: -1,
        upper: false,
    };
    trilu(&p, &x, &mut out);
    assert_eq!(out, [0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0]);
    // Extreme k: everything or nothing; two batches.
    let p = Trilu {
        batch: 2,
        rows: 3,
        cols: 2,
        k: 100,
        upper: false,
    };
    trilu(&p, &x, &mut out);
    assert_eq!(out, x.as_slice());
    let p = Trilu {
        batch: 2,
        rows: 3,
        cols: 2,
        k: 100,
        upper: true,
    };
    trilu(&p, &x, &mut out);
    assert_eq!(out, [0; 12]);
}

// ---------------------------------------------------------------------------------
// Reductions

fn red<T: Elem>(op: ReduceOp, x: &[T], in_shape: &[usize], axes: &[usize]) -> Vec<T> {
    let mut reduced = [false; RANK];
    let mut n = 1;
    for (d, &s) in in_shape.iter().enumerate() {
        if axes.contains(&d) {
            reduced[d] = true;
        } else {
            n *= s;
        }
    }
    let p = Reduce {
        op,
        rank: in_shape.len(),
        in_shape: shape(in_shape),
        reduced,
    };
    let mut out = vec![T::zero(); n];
    reduce(&p, x, &mut out);
    out
}

/// Expected values: onnx.reference Reduce* (keepdims) on (arange(24) - 10) / 4 as
/// [2,3,4] float32 over axes (0, 2).
#[test]
fn reduce_float_matches_reference() {
    use ReduceOp::*;
    let x: Vec<f32> = (0..24).map(|v| (v as f32 - 10.0) / 4.0).collect();
    let cases: [(ReduceOp, [f64; 3]); 9] = [
        (Sum, [-5.0, 3.0, 11.0]),
        (Mean, [-0.625, 0.375, 1.375]),
        (Max, [1.25, 2.25, 3.25]),
        (Min, [-2.5, -1.5, -0.5]),
        (Prod, [9.228515625, 16.611328125, 0.0]),
        (L1, [12.0, 12.0, 12.5]),
        (L2, [4.663689613342285, 4.44409704208374, 5.809474945068359]),
        (
            LogSumExp,
            [2.3486037254333496, 3.3486037254333496, 4.34860372543335],
        ),
        (SumSquare, [21.75, 19.75, 33.75]),
    ];
    for (op, want) in cases {
        assert_close(
            &f64s(&red(op, &x, &[2, 3, 4], &[0, 2])),
            &want,
            3e-7,
            &format!("{op:?}"),
        );
        let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        assert_close(
            &red(op, &xd, &[2, 3, 4], &[0, 2]),
            &want,
            3e-7,
            &format!("{op:?} f64"),
        );
    }
    // ReduceLogSum over axis 1 of |x| + 1.
    let y: Vec<f32> = x.iter().map(|v| v.abs() + 1.0).collect();
    let want = [
        2.0149030685424805,
        1.9095425605773926,
        1.7917594909667969,
        1.7491998672485352,
        2.0149030685424805,
        2.110213279724121,
        2.1972246170043945,
        2.2772672176361084,
    ];
    assert_close(
        &f64s(&red(LogSum, &y, &[2, 3, 4], &[1])),
        &want,
        3e-7,
        "LogSum",
    );
    // All axes, and none (a copy).
    assert_eq!(red(Sum, &x, &[2, 3, 4], &[0, 1, 2]), [9.0]);
    assert_eq!(red(Max, &x, &[2, 3, 4], &[]), x);
    // NaN propagates through Max and Sum.
    let n = [1.0f32, f32::NAN, 3.0];
    assert!(red(Max, &n, &[3], &[0])[0].is_nan());
    assert!(red(Min, &n, &[3], &[0])[0].is_nan());
    assert!(red(Sum, &n, &[3], &[0])[0].is_nan());
    // LogSumExp does not overflow.
    assert_close(
        &red(LogSumExp, &[1000.0f64, 1000.0], &[2], &[0]),
        &[1000.0 + std::f64::consts::LN_2],
        1e-15,
        "lse",
    );
}

/// Expected values: onnx.reference ReduceSum/Mean/Prod on int8 [[100,100,100],
/// [-128,1,2]] over axis 1 (wrapping in int8; Mean truncates the wrapped sum / 3).
#[test]
fn reduce_integers_wrap() {
    use ReduceOp::*;
    let x = [100i8, 100, 100, -128, 1, 2];
    assert_eq!(red(Sum, &x, &[2, 3], &[1]), [44, -125]);
    assert_eq!(red(Mean, &x, &[2, 3], &[1]), [14, -41]);
    assert_eq!(red(Prod, &x, &[2, 3], &[1]), [64, 0]);
    assert_eq!(red(Max, &x, &[2, 3], &[0]), [100, 100, 100]);
    assert_eq!(red(Min, &x, &[2, 3], &[0]), [-128, 1, 2]);
    assert_eq!(red(L1, &[-3i64, 4], &[2], &[0]), [7]);
    assert_eq!(red(SumSquare, &[u64::MAX, 2], &[2], &[0]), [5]);
    let b = [Bool::FALSE, Bool::TRUE, Bool::FALSE, Bool::FALSE];
    assert_eq!(red(Max, &b, &[2, 2], &[1]), [Bool::TRUE, Bool::FALSE]);
    assert_eq!(red(Min, &b, &[2, 2], &[0]), [Bool::FALSE, Bool::FALSE]);
}

/// Empty reductions give ONNX's identities (onnx.reference: `reduce_constant`).
#[test]
fn reduce_empty_identities() {
    use ReduceOp::*;
    let e: [f32; 0] = [];
    let one = |op| red(op, &e, &[2, 0], &[1]);
    assert_eq!(one(Sum), [0.0, 0.0]);
    assert_eq!(one(Prod), [1.0, 1.0]);
    assert_eq!(one(Max), [f32::NEG_INFINITY; 2]);
    assert_eq!(one(Min), [f32::INFINITY; 2]);
    assert_eq!(one(LogSumExp), [f32::NEG_INFINITY; 2]);
    assert_eq!(one(LogSum), [f32::NEG_INFINITY; 2]);
    assert_eq!(one(L2), [0.0; 2]);
    assert!(one(Mean)[0].is_nan());
    let ei: [i32; 0] = [];
    assert_eq!(red(Max, &ei, &[0, 3], &[0]), [i32::MIN; 3]);
    assert_eq!(red(Min, &ei, &[0, 3], &[0]), [i32::MAX; 3]);
    assert_eq!(red(Sum, &ei, &[0, 3], &[0]), [0; 3]);
    assert_eq!(red(Prod, &ei, &[0, 3], &[0]), [1; 3]);
    // An empty kept axis: empty output, nothing read.
    assert!(red(Sum, &ei, &[0, 3], &[1]).is_empty());
}

/// Expected values: onnx.reference ArgMax (select_last_index=1), ArgMax with NaN,
/// ArgMin over axis 0.
#[test]
fn arg_reduce_ties_and_nan() {
    let p = |max, outer, len, inner, last| ArgReduce {
        max,
        outer,
        len,
        inner,
        select_last_index: last,
    };
    let mut out = [0i64; 2];
    arg_reduce(&p(true, 2, 3, 1, true), &[1i32, 3, 3, 2, 2, 1], &mut out);
    assert_eq!(out, [2, 1]);
    arg_reduce(&p(true, 2, 3, 1, false), &[1i32, 3, 3, 2, 2, 1], &mut out);
    assert_eq!(out, [1, 0]);
    let mut o1 = [0i64; 1];
    arg_reduce(
        &p(true, 1, 4, 1, false),
        &[1.0f32, f32::NAN, 3.0, f32::NAN],
        &mut o1,
    );
    assert_eq!(o1, [1]);
    arg_reduce(
        &p(true, 1, 4, 1, true),
        &[1.0f32, f32::NAN, 3.0, f32::NAN],
        &mut o1,
    );
    assert_eq!(o1, [3]);
    arg_reduce(&p(false, 1, 3, 2, false), &[1i64, 3, 0, 5, 2, -1], &mut out);
    assert_eq!(out, [1, 2]);
}

/// Expected values: onnx.reference Softmax/LogSoftmax (float64) on
/// [[1,2,3],[-1,0,1000]] over axes 1 and 0. The reference's LogSoftmax gives -inf for
/// the underflowing entries (it takes the log of the softmax); the kernel keeps
/// `x - max - ln Σ`, exact there: -1001 and -1000.
#[test]
fn softmax_and_log_softmax() {
    let x = [1.0f64, 2.0, 3.0, -1.0, 0.0, 1000.0];
    let mut out = [0.0f64; 6];
    softmax(
        &RowSoftmax {
            outer: 2,
            len: 3,
            inner: 1,
            log: false,
        },
        &x,
        &mut out,
    );
    assert_close(
        &out,
        &[
            0.09003057317038046,
            0.24472847105479764,
            0.6652409557748218,
            0.0,
            0.0,
            1.0,
        ],
        1e-15,
        "softmax",
    );
    softmax(
        &RowSoftmax {
            outer: 2,
            len: 3,
            inner: 1,
            log: true,
        },
        &x,
        &mut out,
    );
    assert_close(
        &out,
        &[
            -2.40760596444438,
            -1.4076059644443804,
            -0.40760596444438046,
            -1001.0,
            -1000.0,
            0.0,
        ],
        1e-15,
        "log_softmax",
    );
    softmax(
        &RowSoftmax {
            outer: 1,
            len: 2,
            inner: 3,
            log: false,
        },
        &x,
        &mut out,
    );
    assert_close(
        &out,
        &[
            0.8807970779778823,
            0.8807970779778823,
            0.0,
            0.11920292202211755,
            0.11920292202211755,
            1.0,
        ],
        1e-15,
        "softmax axis 0",
    );
    let xh: Vec<f16> = [0.0f32, 0.0].iter().map(|&v| f16::from_f32(v)).collect();
    let mut oh = [f16::ZERO; 2];
    softmax(
        &RowSoftmax {
            outer: 1,
            len: 2,
            inner: 1,
            log: false,
        },
        &xh,
        &mut oh,
    );
    assert_eq!(f64s(&oh), [0.5, 0.5]);
}

/// Expected values: onnx.reference Hardmax on [[3,1,3],[0,5,5]] (first max wins).
#[test]
fn hardmax_first_max() {
    let mut out = [9.0f32; 6];
    hardmax(
        &Hardmax {
            outer: 2,
            len: 3,
            inner: 1,
        },
        &[3.0, 1.0, 3.0, 0.0, 5.0, 5.0],
        &mut out,
    );
    assert_eq!(out, [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
    let mut out = [0i32; 4];
    hardmax(
        &Hardmax {
            outer: 1,
            len: 2,
            inner: 2,
        },
        &[1, 7, 4, 7],
        &mut out,
    );
    assert_eq!(out, [0, 1, 1, 0]);
}

/// Expected values: onnx.reference CumSum on [[1,2,3],[4,5,6]] int32 along axis 0.
#[test]
fn cumsum_modes() {
    let x = [1i32, 2, 3, 4, 5, 6];
    let run = |exclusive, reverse| {
        let mut out = [0i32; 6];
        cumsum(
            &CumSum {
                outer: 1,
                len: 2,
                inner: 3,
                exclusive,
                reverse,
            },
            &x,
            &mut out,
        );
        out
    };
    assert_eq!(run(false, false), [1, 2, 3, 5, 7, 9]);
    assert_eq!(run(false, true), [5, 7, 9, 4, 5, 6]);
    assert_eq!(run(true, false), [0, 0, 0, 1, 2, 3]);
    assert_eq!(run(true, true), [4, 5, 6, 0, 0, 0]);
    let mut out = [0u8; 3];
    cumsum(
        &CumSum {
            outer: 1,
            len: 3,
            inner: 1,
            exclusive: false,
            reverse: false,
        },
        &[200u8, 100, 1],
        &mut out,
    );
    assert_eq!(out, [200, 44, 45]);
    let mut out = [0.0f32; 3];
    cumsum(
        &CumSum {
            outer: 1,
            len: 3,
            inner: 1,
            exclusive: false,
            reverse: true,
        },
        &[1e8f32, 1.0, -1e8],
        &mut out,
    );
    assert_eq!(out, [1.0, -99999999.0, -1e8]);
}

// ---------------------------------------------------------------------------------
// MatMul

fn mm_params(m: usize, n: usize, k: usize, batch: &[usize], sa: &[usize], sb: &[usize]) -> MatMul {
    let mut a = [0; RANK];
    let mut b = [0; RANK];
    a[..sa.len()].copy_from_slice(sa);
    b[..sb.len()].copy_from_slice(sb);
    MatMul {
        m,
        n,
        k,
        batch_rank: batch.len(),
        batch_shape: shape(batch),
        a_batch_strides: a,
        b_batch_strides: b,
    }
}

/// Expected values: `np.matmul` of int8 [2,3,4] (((arange % 7) - 3) · 11) by
/// [1,4,5] (((arange % 5) - 2) · 13), wrapping in int8; b broadcast over the batch.
#[test]
fn matmul_int8_wraps_and_broadcasts() {
    let a: Vec<i8> = (0..24).map(|v| ((v % 7) - 3) * 11).collect();
    let b: Vec<i8> = (0..20).map(|v| ((v % 5) - 2) * 13).collect();
    let mut out = [0i8; 30];
    matmul(&mm_params(3, 5, 4, &[2], &[1], &[0]), &a, &b, &mut out);
    assert_eq!(
        out,
        [
            -76, 90, 0, -90, 76, -90, 83, 0, -83, 90, 60, 30, 0, -30, -60, 0, 0, 0, 0, 0, -60, -30,
            0, 30, 60, 90, -83, 0, 83, -90
        ]
    );
}

#[test]
fn matmul_floats_and_edges() {
    // f16 [2,3]·[3,2]: expected values from NumPy in float64, rounded to float16.
    let a: Vec<f16> = (0..6).map(|v| f16::from_f64(v as f64 / 7.0)).collect();
    let b: Vec<f16> = (0..6).map(|v| f16::from_f64(v as f64 - 2.5)).collect();
    let mut out = [f16::ZERO; 4];
    matmul(&mm_params(2, 2, 3, &[], &[], &[]), &a, &b, &mut out);
    assert_eq!(
        f64s(&out),
        [0.35693359375, 0.78564453125, -0.28515625, 1.4287109375]
    );
    // Batch [2,2] with a broadcast along the first axis, b along the second; f64,
    // wider than one accumulator tile (n = 300).
    let (m, n, k) = (2, 300, 3);
    let a: Vec<f64> = (0..2 * m * k).map(|v| v as f64).collect(); // a: [1,2,m,k]
    let b: Vec<f64> = (0..2 * k * n).map(|v| (v % 17) as f64 - 8.0).collect(); // b: [2,1,k,n]
    let mut out = vec![0.0f64; 4 * m * n];
    matmul(
        &mm_params(m, n, k, &[2, 2], &[0, 1], &[1, 0]),
        &a,
        &b,
        &mut out,
    );
    for bi in 0..2 {
        for bj in 0..2 {
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k)
                        .map(|kk| a[bj * m * k + i * k + kk] * b[bi * k * n + kk * n + j])
                        .sum();
                    assert_eq!(out[((bi * 2 + bj) * m + i) * n + j], want);
                }
            }
        }
    }
    // k = 0 gives zeros; u64 wraps.
    let mut out = [7i32; 4];
    matmul(&mm_params(2, 2, 0, &[], &[], &[]), &[], &[], &mut out);
    assert_eq!(out, [0; 4]);
    let mut out = [0u64; 1];
    matmul(
        &mm_params(1, 1, 2, &[], &[], &[]),
        &[u64::MAX, 2],
        &[2, 3],
        &mut out,
    );
    assert_eq!(out, [4]);
}
