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
