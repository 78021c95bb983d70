//! The small element types (float8, float4, int4/uint4, int2/uint2) against values
//! printed by ml_dtypes 0.6.0 and onnx 1.23.2's `numpy_helper` (the semantics ONNX's
//! reference implementation and its node tests use): decoding, NumPy `astype`
//! (`from_f64`), ONNX's saturating cast (`cast_with`), E8M0's rounding modes, the
//! integer wrap-around; and every encoding against an independent brute-force search
//! for the nearest value, ties to the even code.
#![allow(clippy::excessive_precision)]

use kiln_runtime::typed::params::{CastMode, RoundMode};
use kiln_runtime::typed::{
    Elem, Float4E2M1, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0, Int2,
    Int4, UInt2, UInt4, cast_with,
};

/// `ml_dtypes`' name for each type, for messages.
trait Small: Elem {
    fn bits(self) -> u8;
    fn of_bits(b: u8) -> Self;
    /// Number of codes (256, or 16 for float4).
    const CODES: usize = 256;
}

macro_rules! small {
    ($($t:ty),*) => {$(
        impl Small for $t {
            fn bits(self) -> u8 {
                self.to_bits()
            }
            fn of_bits(b: u8) -> Self {
                <$t>::from_bits(b)
            }
        }
    )*};
}
small!(
    Float8E4M3FN,
    Float8E4M3FNUZ,
    Float8E5M2,
    Float8E5M2FNUZ,
    Float8E8M0
);

impl Small for Float4E2M1 {
    fn bits(self) -> u8 {
        self.to_bits()
    }
    fn of_bits(b: u8) -> Self {
        Float4E2M1::from_bits(b)
    }
    const CODES: usize = 16;
}

const SAT: CastMode = CastMode {
    saturate: true,
    round_mode: RoundMode::Up,
};
const NO_SAT: CastMode = CastMode {
    saturate: false,
    round_mode: RoundMode::Up,
};

/// Same bits, or both NaN of the same sign.
fn same(got: f64, want: f32) -> bool {
    if want.is_nan() {
        got.is_nan() && got.is_sign_negative() == want.is_sign_negative()
    } else {
        got == want as f64 && got.is_sign_negative() == want.is_sign_negative()
    }
}

fn check_decode<T: Small>(table: &[(u8, f32)]) {
    for &(b, want) in table {
        let got = T::of_bits(b).to_f64();
        assert!(
            same(got, want),
            "{} {b:#04x}: got {got}, want {want}",
            T::DTYPE
        );
    }
}

// Printed by: `np.array(codes, np.uint8).view(T).astype(np.float32)` (ml_dtypes 0.6.0).
#[test]
fn decodes_like_ml_dtypes() {
    check_decode::<Float8E4M3FN>(&[
        (0x00, 0.0),
        (0x01, 0.001953125),
        (0x02, 0.00390625),
        (0x07, 0.013671875),
        (0x08, 0.015625),
        (0x09, 0.017578125),
        (0x0f, 0.029296875),
        (0x37, 0.9375),
        (0x38, 1.0),
        (0x40, 2.0),
        (0x7b, 352.0),
        (0x7c, 384.0),
        (0x7d, 416.0),
        (0x7e, 448.0),
        (0x7f, f32::NAN),
        (0x80, -0.0),
        (0x81, -0.001953125),
        (0xfc, -384.0),
        (0xfe, -448.0),
        (0xff, -f32::NAN),
    ]);
    check_decode::<Float8E4M3FNUZ>(&[
        (0x00, 0.0),
        (0x01, 0.0009765625),
        (0x02, 0.001953125),
        (0x07, 0.0068359375),
        (0x08, 0.0078125),
        (0x09, 0.0087890625),
        (0x0f, 0.0146484375),
        (0x37, 0.46875),
        (0x38, 0.5),
        (0x40, 1.0),
        (0x7b, 176.0),
        (0x7c, 192.0),
        (0x7d, 208.0),
        (0x7e, 224.0),
        (0x7f, 240.0),
        (0x80, -f32::NAN),
        (0x81, -0.0009765625),
        (0xfc, -192.0),
        (0xfe, -224.0),
        (0xff, -240.0),
    ]);
    check_decode::<Float8E5M2>(&[
        (0x00, 0.0),
        (0x01, 1.52587890625e-05),
        (0x02, 3.0517578125e-05),
        (0x07, 0.0001068115234375),
        (0x08, 0.0001220703125),
        (0x09, 0.000152587890625),
        (0x0f, 0.00042724609375),
        (0x37, 0.4375),
        (0x38, 0.5),
        (0x40, 2.0),
        (0x7b, 57344.0),
        (0x7c, f32::INFINITY),
        (0x7d, f32::NAN),
        (0x7e, f32::NAN),
        (0x7f, f32::NAN),
        (0x80, -0.0),
        (0x81, -1.52587890625e-05),
        (0xfc, f32::NEG_INFINITY),
        (0xfe, -f32::NAN),
        (0xff, -f32::NAN),
    ]);
    check_decode::<Float8E5M2FNUZ>(&[
        (0x00, 0.0),
        (0x01, 7.62939453125e-06),
        (0x02, 1.52587890625e-05),
        (0x07, 5.340576171875e-05),
        (0x08, 6.103515625e-05),
        (0x09, 7.62939453125e-05),
        (0x0f, 0.000213623046875),
        (0x37, 0.21875),
        (0x38, 0.25),
        (0x40, 1.0),
        (0x7b, 28672.0),
        (0x7c, 32768.0),
        (0x7d, 40960.0),
        (0x7e, 49152.0),
        (0x7f, 57344.0),
        (0x80, -f32::NAN),
        (0x81, -7.62939453125e-06),
        (0xfc, -32768.0),
        (0xfe, -49152.0),
        (0xff, -57344.0),
    ]);
    check_decode::<Float4E2M1>(&[
        (0x00, 0.0),
        (0x01, 0.5),
        (0x02, 1.0),
        (0x03, 1.5),
        (0x04, 2.0),
        (0x05, 3.0),
        (0x06, 4.0),
        (0x07, 6.0),
        (0x08, -0.0),
        (0x09, -0.5),
        (0x0f, -6.0),
    ]);
    // E8M0: 2^(b - 127), 0xFF NaN.
    check_decode::<Float8E8M0>(&[
        (0x00, 5.877471754111438e-39),
        (0x01, 1.1754943508222875e-38),
        (0x7f, 1.0),
        (0x80, 2.0),
        (0x7c, 0.125),
        (0xfe, 1.7014118346046923e+38),
        (0xff, f32::NAN),
    ]);
    // Float4 reads only the low four bits of its byte.
    assert_eq!(Float4E2M1::from_bits(0xf7).to_f64(), 6.0);
}

/// Inputs of the conversion tables: NaN of both signs, infinities, signed zeros,
/// subnormals, ties between neighbours, the overflow boundaries of every format.
const INPUTS: [f32; 43] = [
    f32::NAN,
    -f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -0.0,
    1e-7,
    -1e-7,
    0.0009765625,
    0.00146484375,
    0.001953125,
    0.0029296875,
    0.0048828125,
    0.4789,
    1.0625,
    1.1875,
    -3.5,
    2.5,
    5.0,
    7.0,
    240.0,
    247.0,
    248.0,
    256.0,
    448.0,
    464.0,
    465.0,
    480.0,
    1000000.0,
    -1000000.0,
    57344.0,
    61439.0,
    61440.0,
    65536.0,
    1.52587890625e-05,
    7.62939453125e-06,
    2.288818359375e-05,
    0.25,
    0.75,
    0.26,
    1.25,
    3.0,
    -0.3,
];

/// `from_f64` (ml_dtypes `INPUTS.astype(T)`) and ONNX's saturating cast
/// (`onnx.numpy_helper.saturate_cast(INPUTS, T)`), bit for bit.
fn check_encode<T: Small>(astype: &[u8; 43], saturated: Option<&[u8; 43]>) {
    for (i, &x) in INPUTS.iter().enumerate() {
        let got = T::from_f64(x as f64).bits();
        assert_eq!(got, astype[i], "{} astype({x}): got {got:#04x}", T::DTYPE);
        let mut out = [T::default()];
        cast_with(&NO_SAT, &[x], &mut out);
        assert_eq!(
            out[0].bits(),
            astype[i],
            "{} cast saturate=0 ({x})",
            T::DTYPE
        );
        if let Some(s) = saturated {
            cast_with(&SAT, &[x], &mut out);
            let got = out[0].bits();
            assert_eq!(got, s[i], "{} saturate_cast({x}): got {got:#04x}", T::DTYPE);
        }
    }
}

#[test]
fn converts_like_ml_dtypes_and_saturate_cast() {
    check_encode::<Float8E4M3FN>(
        &[
            0x7f, 0xff, 0x7f, 0xff, 0x00, 0x80, 0x00, 0x80, 0x00, 0x01, 0x01, 0x02, 0x02, 0x2f,
            0x38, 0x3a, 0xc6, 0x42, 0x4a, 0x4e, 0x77, 0x77, 0x78, 0x78, 0x7e, 0x7e, 0x7f, 0x7f,
            0x7f, 0xff, 0x7f, 0x7f, 0x7f, 0x7f, 0x00, 0x00, 0x00, 0x28, 0x34, 0x28, 0x3a, 0x44,
            0xaa,
        ],
        Some(&[
            0x7f, 0xff, 0x7e, 0xfe, 0x00, 0x80, 0x00, 0x80, 0x00, 0x01, 0x01, 0x02, 0x02, 0x2f,
            0x38, 0x3a, 0xc6, 0x42, 0x4a, 0x4e, 0x77, 0x77, 0x78, 0x78, 0x7e, 0x7e, 0x7e, 0x7e,
            0x7e, 0xfe, 0x7e, 0x7e, 0x7e, 0x7e, 0x00, 0x00, 0x00, 0x28, 0x34, 0x28, 0x3a, 0x44,
            0xaa,
        ]),
    );
    check_encode::<Float8E4M3FNUZ>(
        &[
            0x80, 0x80, 0x80, 0x80, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x02, 0x03, 0x05, 0x37,
            0x40, 0x42, 0xce, 0x4a, 0x52, 0x56, 0x7f, 0x7f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
            0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x00, 0x00, 0x30, 0x3c, 0x30, 0x42, 0x4c,
            0xb2,
        ],
        Some(&[
            0x80, 0x80, 0x7f, 0xff, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x02, 0x03, 0x05, 0x37,
            0x40, 0x42, 0xce, 0x4a, 0x52, 0x56, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f,
            0x7f, 0xff, 0x7f, 0x7f, 0x7f, 0x7f, 0x00, 0x00, 0x00, 0x30, 0x3c, 0x30, 0x42, 0x4c,
            0xb2,
        ]),
    );
    check_encode::<Float8E5M2>(
        &[
            0x7e, 0xfe, 0x7c, 0xfc, 0x00, 0x80, 0x00, 0x80, 0x14, 0x16, 0x18, 0x1a, 0x1d, 0x38,
            0x3c, 0x3d, 0xc3, 0x41, 0x45, 0x47, 0x5c, 0x5c, 0x5c, 0x5c, 0x5f, 0x5f, 0x5f, 0x60,
            0x7c, 0xfc, 0x7b, 0x7b, 0x7c, 0x7c, 0x01, 0x00, 0x02, 0x34, 0x3a, 0x34, 0x3d, 0x42,
            0xb5,
        ],
        Some(&[
            0x7e, 0xfe, 0x7b, 0xfb, 0x00, 0x80, 0x00, 0x80, 0x14, 0x16, 0x18, 0x1a, 0x1d, 0x38,
            0x3c, 0x3d, 0xc3, 0x41, 0x45, 0x47, 0x5c, 0x5c, 0x5c, 0x5c, 0x5f, 0x5f, 0x5f, 0x60,
            0x7b, 0xfb, 0x7b, 0x7b, 0x7b, 0x7b, 0x01, 0x00, 0x02, 0x34, 0x3a, 0x34, 0x3d, 0x42,
            0xb5,
        ]),
    );
    check_encode::<Float8E5M2FNUZ>(
        &[
            0x80, 0x80, 0x80, 0x80, 0x00, 0x00, 0x00, 0x00, 0x18, 0x1a, 0x1c, 0x1e, 0x21, 0x3c,
            0x40, 0x41, 0xc7, 0x45, 0x49, 0x4b, 0x60, 0x60, 0x60, 0x60, 0x63, 0x63, 0x63, 0x64,
            0x80, 0x80, 0x7f, 0x7f, 0x80, 0x80, 0x02, 0x01, 0x03, 0x38, 0x3e, 0x38, 0x41, 0x46,
            0xb9,
        ],
        Some(&[
            0x80, 0x80, 0x7f, 0xff, 0x00, 0x00, 0x00, 0x00, 0x18, 0x1a, 0x1c, 0x1e, 0x21, 0x3c,
            0x40, 0x41, 0xc7, 0x45, 0x49, 0x4b, 0x60, 0x60, 0x60, 0x60, 0x63, 0x63, 0x63, 0x64,
            0x7f, 0xff, 0x7f, 0x7f, 0x7f, 0x7f, 0x02, 0x01, 0x03, 0x38, 0x3e, 0x38, 0x41, 0x46,
            0xb9,
        ]),
    );
    // Float4 always saturates; NaN becomes a zero of the opposite sign (ml_dtypes).
    check_encode::<Float4E2M1>(
        &[
            0x08, 0x00, 0x07, 0x0f, 0x00, 0x08, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
            0x02, 0x02, 0x0e, 0x04, 0x06, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07,
            0x07, 0x0f, 0x07, 0x07, 0x07, 0x07, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0x02, 0x05,
            0x09,
        ],
        None,
    );
}

// Printed by `onnx.numpy_helper.to_float8e8m0(x, saturate, round_mode)` (onnx 1.23.2).
#[test]
fn e8m0_rounds_like_the_onnx_reference() {
    let x: [f32; 20] = [
        0.0,
        0.124,
        0.125,
        0.25,
        0.5,
        1.1,
        1.5,
        1.75,
        3.0,
        2.0,
        4.0,
        -4.0,
        1e-40,
        f32::NAN,
        f32::INFINITY,
        3.4e38,
        1.7014118e38,
        1.8e38,
        1.4e-45,
        6e-39,
    ];
    let cases: [(bool, RoundMode, [u8; 20]); 6] = [
        (
            true,
            RoundMode::Up,
            [
                0x00, 0x7c, 0x7c, 0x7d, 0x7e, 0x80, 0x80, 0x80, 0x81, 0x80, 0x81, 0x81, 0x01, 0xff,
                0xff, 0xfe, 0xfe, 0xfe, 0x01, 0x01,
            ],
        ),
        (
            true,
            RoundMode::Down,
            [
                0x00, 0x7b, 0x7c, 0x7d, 0x7e, 0x7f, 0x7f, 0x7f, 0x80, 0x80, 0x81, 0x81, 0x00, 0xff,
                0xff, 0xfe, 0xfe, 0xfe, 0x00, 0x00,
            ],
        ),
        (
            true,
            RoundMode::Nearest,
            [
                0x00, 0x7c, 0x7c, 0x7d, 0x7e, 0x7f, 0x80, 0x80, 0x81, 0x80, 0x81, 0x81, 0x00, 0xff,
                0xff, 0xfe, 0xfe, 0xfe, 0x00, 0x01,
            ],
        ),
        (
            false,
            RoundMode::Up,
            [
                0x00, 0x7c, 0x7c, 0x7d, 0x7e, 0x80, 0x80, 0x80, 0x81, 0x80, 0x81, 0x81, 0x01, 0xff,
                0xff, 0xff, 0xfe, 0xff, 0x01, 0x01,
            ],
        ),
        (
            false,
            RoundMode::Down,
            [
                0x00, 0x7b, 0x7c, 0x7d, 0x7e, 0x7f, 0x7f, 0x7f, 0x80, 0x80, 0x81, 0x81, 0x00, 0xff,
                0xff, 0xfe, 0xfe, 0xfe, 0x00, 0x00,
            ],
        ),
        (
            false,
            RoundMode::Nearest,
            [
                0x00, 0x7c, 0x7c, 0x7d, 0x7e, 0x7f, 0x80, 0x80, 0x81, 0x80, 0x81, 0x81, 0x00, 0xff,
                0xff, 0xff, 0xfe, 0xfe, 0x00, 0x01,
            ],
        ),
    ];
    for (saturate, round_mode, want) in cases {
        let mode = CastMode {
            saturate,
            round_mode,
        };
        let mut out = [Float8E8M0::default(); 20];
        cast_with(&mode, &x, &mut out);
        let got: Vec<u8> = out.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "saturate={saturate} {round_mode:?}");
        // From float16 and float64 too: the reference rounds to float32 first.
        let h: Vec<half::f16> = [0.124f32, 3.0, 6.5]
            .iter()
            .map(|&v| half::f16::from_f32(v))
            .collect();
        let mut o3 = [Float8E8M0::default(); 3];
        cast_with(&mode, &h, &mut o3);
        for (v, o) in h.iter().zip(o3) {
            let direct = Float8E8M0::cast_from(v.to_f32(), &mode);
            assert_eq!(o.to_bits(), direct.to_bits());
        }
    }
    // `from_f64` is ONNX Cast's default: saturate, round up.
    assert_eq!(Float8E8M0::from_f64(0.124).to_bits(), 0x7c);
    assert_eq!(Float8E8M0::from_f64(3.4e38).to_bits(), 0xfe);
}

// Printed by `np.array(INT_INPUTS, np.float32).astype(T)` (ml_dtypes 0.6.0).
#[test]
fn small_ints_truncate_and_wrap_like_ml_dtypes() {
    let x: [f32; 24] = [
        -9.0,
        -8.5,
        -8.0,
        -7.5,
        -2.5,
        -1.5,
        -0.5,
        0.5,
        1.5,
        2.5,
        3.0,
        4.0,
        7.0,
        7.5,
        8.0,
        15.0,
        16.0,
        17.0,
        1e6,
        3e9,
        -3e9,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    fn check<T: Elem>(x: &[f32], want: &[i64]) {
        let got: Vec<i64> = x.iter().map(|&v| T::from_f64(v as f64).to_i64()).collect();
        assert_eq!(got, want, "{}", T::DTYPE);
    }
    check::<Int4>(
        &x,
        &[
            7, -8, -8, -7, -2, -1, 0, 0, 1, 2, 3, 4, 7, 7, -8, -1, 0, 1, 0, 0, 0, 0, 0, 0,
        ],
    );
    check::<UInt4>(
        &x,
        &[
            7, 8, 8, 9, 14, 15, 0, 0, 1, 2, 3, 4, 7, 7, 8, 15, 0, 1, 0, 0, 0, 0, 0, 0,
        ],
    );
    check::<Int2>(
        &x,
        &[
            -1, 0, 0, 1, -2, -1, 0, 0, 1, -2, -1, 0, -1, -1, 0, -1, 0, 1, 0, 0, 0, 0, 0, 0,
        ],
    );
    check::<UInt2>(
        &x,
        &[
            3, 0, 0, 1, 2, 3, 0, 0, 1, 2, 3, 0, 3, 3, 0, 3, 0, 1, 0, 0, 0, 0, 0, 0,
        ],
    );

    // Integer → small integer wraps; the stored byte is canonical (the int8 of the
    // value, as NumPy holds it), any byte is read by its low bits.
    let ints: Vec<i64> = (-9..=16).collect();
    let mut i4 = vec![Int4::default(); ints.len()];
    cast_with(&CastMode::default(), &ints, &mut i4);
    for (v, q) in ints.iter().zip(&i4) {
        let want = ((*v as i8) << 4) >> 4;
        assert_eq!(q.get(), want);
        assert_eq!(
            bytemuck::bytes_of(q)[0],
            want as u8,
            "canonical byte of {v}"
        );
    }
    let mut u2 = vec![UInt2::default(); ints.len()];
    cast_with(&CastMode::default(), &ints, &mut u2);
    for (v, q) in ints.iter().zip(&u2) {
        assert_eq!(bytemuck::bytes_of(q)[0], (*v as u8) & 3);
    }
    let raw: &[Int4] = bytemuck::cast_slice(&[0xf9u8, 0x17, 0x08]);
    assert_eq!(raw.iter().map(|v| v.get()).collect::<Vec<_>>(), [-7, 7, -8]);
    assert_eq!(Int4::new(-8), Int4::new(8));
    assert_eq!((Int4::min_value().get(), Int4::max_value().get()), (-8, 7));
    assert_eq!(
        (UInt4::min_value().get(), UInt4::max_value().get()),
        (0, 15)
    );
    assert_eq!((Int2::min_value().get(), Int2::max_value().get()), (-2, 1));
    assert_eq!((UInt2::min_value().get(), UInt2::max_value().get()), (0, 3));
    // Small integers to wider types are exact.
    let src: Vec<Int4> = (-8..8).map(Int4::new).collect();
    let mut wide = vec![0i8; 16];
    cast_with(&CastMode::default(), &src, &mut wide);
    assert_eq!(wide, (-8..8).collect::<Vec<i8>>());
    let mut f = vec![0f32; 16];
    cast_with(&CastMode::default(), &src, &mut f);
    assert_eq!(f, (-8..8).map(|v| v as f32).collect::<Vec<_>>());
}

/// The value of the code nearest to `x` by exhaustive search over the decoded codes,
/// ties to the even code (even mantissa); `None` when `x` overflows.
fn brute_force<T: Small>(x: f64, saturate: bool) -> Option<f64> {
    let finite: Vec<(u8, f64)> = (0..T::CODES as u32)
        .map(|b| (b as u8, T::of_bits(b as u8).to_f64()))
        .filter(|(_, v)| v.is_finite())
        .collect();
    let max = finite.iter().map(|p| p.1).fold(0.0, f64::max);
    // The step below the largest value is the ulp of its binade.
    let below = finite
        .iter()
        .map(|p| p.1)
        .filter(|&v| v < max)
        .fold(0.0, f64::max);
    let x = if saturate { x.clamp(-max, max) } else { x };
    // Halfway to the next (unrepresentable) step overflows, a tie only when the
    // largest code is odd (ties go to the even code).
    let edge = max + (max - below) / 2.0;
    let max_code = finite.iter().find(|p| p.1 == max).map_or(0, |p| p.0);
    if x.abs() > edge || (x.abs() == edge && max_code & 1 == 1) {
        return None;
    }
    let mut best: Option<(u8, f64)> = None;
    for &(b, v) in &finite {
        let better = match best {
            None => true,
            Some((bb, bv)) => {
                let (d, bd) = ((v - x).abs(), (bv - x).abs());
                d < bd || (d == bd && b & 1 == 0 && bb & 1 == 1)
            }
        };
        if better {
            best = Some((b, v));
        }
    }
    best.map(|p| p.1)
}

/// Every encoding agrees with the exhaustive search on values spread over the whole
/// range of each format (a fixed pseudo-random sequence), with and without saturation.
#[test]
fn rounding_matches_an_exhaustive_nearest_even_search() {
    fn check<T: Small>(range: f64) {
        // Log-uniform magnitudes from below half the smallest subnormal to twice the
        // largest value, both signs.
        let (lo, hi) = (T::of_bits(1).to_f64().log2() - 2.0, range.log2() + 1.0);
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            let mag = (lo + (hi - lo) * u).exp2();
            let x = if s & 1 == 0 { mag } else { -mag };
            for saturate in [false, true] {
                let mode = CastMode {
                    saturate,
                    round_mode: RoundMode::Up,
                };
                let got = T::cast_from(x, &mode).to_f64();
                match brute_force::<T>(x, saturate || T::CODES == 16) {
                    Some(want) => assert!(
                        got == want,
                        "{} cast({x}, saturate={saturate}): got {got}, want {want}",
                        T::DTYPE
                    ),
                    None => assert!(
                        got.is_nan() || got.is_infinite(),
                        "{} cast({x}, saturate={saturate}) overflows: got {got}",
                        T::DTYPE
                    ),
                }
            }
        }
    }
    check::<Float8E4M3FN>(448.0);
    check::<Float8E4M3FNUZ>(240.0);
    check::<Float8E5M2>(57344.0);
    check::<Float8E5M2FNUZ>(57344.0);
    check::<Float4E2M1>(6.0);
}

/// Decoding then encoding gives every non-NaN code back (the FNUZ types and float4
/// included); comparisons are IEEE.
#[test]
fn every_code_round_trips() {
    fn check<T: Small>() {
        for b in 0..T::CODES as u32 {
            let v = T::of_bits(b as u8);
            if v.to_f64().is_nan() {
                assert!(v != v, "{} NaN equals itself", T::DTYPE);
                continue;
            }
            let back = T::from_f64(v.to_f64()).bits();
            assert_eq!(
                back,
                b as u8,
                "{} {b:#04x} -> {} -> {back:#04x}",
                T::DTYPE,
                v.to_f64()
            );
        }
    }
    check::<Float8E4M3FN>();
    check::<Float8E4M3FNUZ>();
    check::<Float8E5M2>();
    check::<Float8E5M2FNUZ>();
    check::<Float4E2M1>();
    // E8M0 from code 1: 2^-127 (code 0) is a float32 subnormal, which rounds up.
    for b in 1..=0xfeu8 {
        assert_eq!(
            Float8E8M0::from_f64(Float8E8M0::from_bits(b).to_f64()).to_bits(),
            b
        );
    }
    assert!(Float8E4M3FN::from_bits(0x00) == Float8E4M3FN::from_bits(0x80));
    assert!(Float8E5M2::from_bits(0x7c) > Float8E5M2::from_bits(0x7b));
    assert!(Float8E4M3FN::min_value().to_f64() == -448.0);
    assert!(Float8E5M2::min_value().to_f64() == f64::NEG_INFINITY);
}
