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
                gamma: 1.0507010,
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
        for j in 0..4 {
            for k in 0..3 {
                want.push(a[i * 3 + k] + b[j]);
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

// ---------------------------------------------------------------------------------
// Cast, range

/// Expected values: NumPy `astype` (the ONNX Cast reference).
#[test]
fn cast_matches_numpy() {
    let f = [
        1.0009765625f32,
        1.00048828125,
        1.00146484375,
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
    assert_eq!(back[0], 1.0009765625);
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
    assert_eq!(f32s, [1.1529216420458004e18, 16777216.0]);
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
