//! The small element types: float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0), float4
//! (E2M1), int4/uint4 and int2/uint2.
//!
//! **Storage.** One byte per element everywhere in Kiln: the arena, the weights blob,
//! the generated `Inputs`/`Outputs` fields (these types) and `run_bytes`. ONNX packs
//! the 4-bit types two per byte and the 2-bit types four per byte in its tensors; the
//! compiler unpacks initializers when it loads them, and NumPy (ml_dtypes) arrays of
//! these types are one element per byte too, so generic kernels stay per element.
//!
//! **Every byte is a valid element**, so bytes from outside need no check. The float8
//! types use all eight bits. Float4 and the small integers are the low four or two
//! bits (sign-extended for int4/int2); the high bits of a byte read are ignored, and
//! every kernel writes the canonical byte: the code with high bits zero for float4,
//! uint4 and uint2, the two's-complement `int8` of the value for int4 and int2 (what
//! NumPy's `astype(int8/uint8)` of an ml_dtypes array holds, and what ONNX's test data
//! hold).
//!
//! **Conversions** follow ml_dtypes 0.6.0 (NumPy `astype`, which ONNX's reference uses)
//! and `onnx.numpy_helper` 1.23.2, checked against both in
//! `tests/typed_small_types.rs`:
//! - float → float8/float4 rounds once to nearest, ties to even, from the exact value.
//!   Without saturation a magnitude that rounds past the largest finite value is inf
//!   (E5M2) or NaN (E4M3FN, and the FNUZ types, whose one NaN is `0x80`); with
//!   saturation (ONNX Cast's `saturate`, the default) it is the largest finite value,
//!   and inf too. Float4 has neither inf nor NaN: it always saturates, and NaN becomes
//!   a zero of the opposite sign (ml_dtypes' choice). The FNUZ types have no negative
//!   zero: a negative value that rounds to zero is `+0`.
//! - float → E8M0 is `onnx.numpy_helper.to_float8e8m0` on the value rounded to float32:
//!   the float32 exponent, moved up by the rounding mode (`up`, the default: any
//!   fraction; `nearest`: guard bit and round, sticky or exponent > 0; `down`: never),
//!   NaN and inf give NaN (`0xFF`), the sign is ignored, and saturation keeps 2^127 from
//!   rounding up into NaN. `from_f64` uses ONNX Cast's defaults (saturate, `up`).
//! - float → int4/int2/uint4/uint2 truncates toward zero and wraps to the width, as
//!   ml_dtypes does through `int32` on x86: NaN, ±inf and values outside the int32
//!   range give 0. Integer → small integer wraps.
//!
//! Arithmetic (no ONNX operator defines any on these types; generic kernels may still
//! be instantiated) computes in `f64` for the floats and in `i64` for the integers,
//! then converts back like `from_f64`/`from_i64`.

use serde::Serialize;

use super::elem::{Elem, float_binary, float_unary};
use super::params::{BinaryOp, UnaryOp};

/// How E8M0 rounds a float32 whose fraction is not zero (ONNX Cast's `round_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum RoundMode {
    /// To the next power of two up (ONNX's default).
    #[default]
    Up,
    /// Truncate to the power of two below.
    Down,
    /// `onnx.numpy_helper.to_float8e8m0`'s "nearest".
    Nearest,
}

/// The attributes of ONNX Cast that change a conversion: `saturate` (float8 targets;
/// ONNX's default is true) and `round_mode` (E8M0 targets). Other targets ignore both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CastMode {
    pub saturate: bool,
    pub round_mode: RoundMode,
}

impl Default for CastMode {
    /// ONNX Cast's defaults: saturate, round up.
    fn default() -> Self {
        CastMode {
            saturate: true,
            round_mode: RoundMode::Up,
        }
    }
}

/// ONNX Cast with its `saturate` and `round_mode` attributes: `B::cast_from` for every
/// element (NumPy `astype` for every target but float8 with saturation and E8M0;
/// `x` and `out` have equal lengths, the compiler guarantees it).
pub fn cast_with<A: Elem, B: Elem>(p: &CastMode, x: &[A], out: &mut [B]) {
    if core::any::TypeId::of::<A>() == core::any::TypeId::of::<B>() {
        let n = x.len().min(out.len());
        out[..n].copy_from_slice(bytemuck::cast_slice(&x[..n]));
        return;
    }
    for (y, &v) in out.iter_mut().zip(x) {
        *y = B::cast_from(v, p);
    }
}

/// What a float8/float4 format has besides finite numbers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Specials {
    /// IEEE: exponent all ones is inf (mantissa 0) or NaN (E5M2).
    Ieee,
    /// No inf; exponent and mantissa all ones is NaN (E4M3FN).
    Fn,
    /// No inf, no negative zero; `0x80` is the one NaN (the FNUZ types).
    Fnuz,
    /// Neither inf nor NaN (E2M1).
    None,
}

/// A sign-exponent-mantissa format of at most eight bits.
#[derive(Clone, Copy)]
struct Format {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    specials: Specials,
}

impl Format {
    const fn sign_shift(&self) -> u32 {
        self.exp_bits + self.man_bits
    }

    const fn exp_mask(&self) -> u32 {
        (1 << self.exp_bits) - 1
    }

    const fn man_mask(&self) -> u32 {
        (1 << self.man_bits) - 1
    }

    /// The exponent of the smallest normal number.
    const fn emin(&self) -> i32 {
        1 - self.bias
    }

    /// The largest finite magnitude.
    fn max(&self) -> f64 {
        let (e, m) = match self.specials {
            // The last exponent is inf/NaN.
            Specials::Ieee => (self.exp_mask() - 1, self.man_mask()),
            // The last code is NaN.
            Specials::Fn => (self.exp_mask(), self.man_mask() - 1),
            Specials::Fnuz | Specials::None => (self.exp_mask(), self.man_mask()),
        };
        self.value(e, m)
    }

    /// The magnitude of exponent field `e` and mantissa field `m` (finite codes).
    fn value(&self, e: u32, m: u32) -> f64 {
        let scale = |k: i32| pow2(k - self.man_bits as i32);
        if e == 0 {
            m as f64 * scale(self.emin())
        } else {
            ((1u32 << self.man_bits) + m) as f64 * scale(e as i32 - self.bias)
        }
    }

    /// The NaN code of a value of sign `neg` (formats with a NaN).
    fn nan(&self, neg: bool) -> u8 {
        let sign = (neg as u32) << self.sign_shift();
        match self.specials {
            // E5M2: ml_dtypes writes the quiet NaN 0x7E / 0xFE.
            Specials::Ieee => {
                (sign | (self.exp_mask() << self.man_bits) | (1 << (self.man_bits - 1))) as u8
            }
            Specials::Fn => (sign | (self.exp_mask() << self.man_bits) | self.man_mask()) as u8,
            Specials::Fnuz => 0x80,
            // No NaN: ml_dtypes gives a zero of the opposite sign.
            Specials::None => (((!neg) as u32) << self.sign_shift()) as u8,
        }
    }

    fn decode(&self, bits: u8) -> f64 {
        let bits = bits as u32 & ((1 << (self.sign_shift() + 1)) - 1);
        let neg = bits >> self.sign_shift() != 0;
        let e = (bits >> self.man_bits) & self.exp_mask();
        let m = bits & self.man_mask();
        let sign = if neg { -1.0 } else { 1.0 };
        match self.specials {
            Specials::Fnuz if bits == 0x80 => return -f64::NAN,
            Specials::Fn if e == self.exp_mask() && m == self.man_mask() => {
                return f64::NAN.copysign(sign);
            }
            Specials::Ieee if e == self.exp_mask() => {
                return if m == 0 {
                    f64::INFINITY * sign
                } else {
                    f64::NAN.copysign(sign)
                };
            }
            _ => {}
        }
        sign * self.value(e, m)
    }

    /// `v` rounded to nearest even; past the largest finite value: inf, NaN or (with
    /// `saturate`, and always for formats with neither) the largest finite value.
    fn encode(&self, v: f64, saturate: bool) -> u8 {
        let neg = v.is_sign_negative();
        if v.is_nan() {
            return self.nan(neg);
        }
        let sign = (neg as u32) << self.sign_shift();
        let max = self.max();
        let mut a = v.abs();
        if saturate || self.specials == Specials::None {
            a = a.min(max);
        }
        let overflow = || match self.specials {
            Specials::Ieee => (sign | (self.exp_mask() << self.man_bits)) as u8,
            _ => self.nan(neg),
        };
        if a.is_infinite() {
            return overflow();
        }
        // The quantum at `a`'s binade (the subnormal one below the normal range).
        let e = exponent(a).max(self.emin());
        let q = pow2(e - self.man_bits as i32);
        // Exact: `a / q` scales by a power of two; its rounding is the only rounding.
        let n = (a / q).round_ties_even();
        let r = n * q;
        if r > max {
            return overflow();
        }
        if r == 0.0 {
            return if self.specials == Specials::Fnuz {
                0
            } else {
                sign as u8
            };
        }
        let code = if r < pow2(self.emin()) {
            // Subnormal: exponent field 0; `n` is the mantissa (`e` is `emin`).
            n as u32
        } else {
            let er = exponent(r);
            let field = (er + self.bias) as u32;
            let m = (r / pow2(er - self.man_bits as i32)) as u32 - (1 << self.man_bits);
            (field << self.man_bits) | m
        };
        (sign | code) as u8
    }
}

/// `2^k` for the exponents these formats reach (exact).
fn pow2(k: i32) -> f64 {
    2f64.powi(k)
}

/// `floor(log2(a))` of a positive finite `a` (f64 subnormals give at most -1023, below
/// every format's `emin`).
fn exponent(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

const E4M3FN: Format = Format {
    exp_bits: 4,
    man_bits: 3,
    bias: 7,
    specials: Specials::Fn,
};
const E4M3FNUZ: Format = Format {
    exp_bits: 4,
    man_bits: 3,
    bias: 8,
    specials: Specials::Fnuz,
};
const E5M2: Format = Format {
    exp_bits: 5,
    man_bits: 2,
    bias: 15,
    specials: Specials::Ieee,
};
const E5M2FNUZ: Format = Format {
    exp_bits: 5,
    man_bits: 2,
    bias: 16,
    specials: Specials::Fnuz,
};
const E2M1: Format = Format {
    exp_bits: 2,
    man_bits: 1,
    bias: 1,
    specials: Specials::None,
};

/// `onnx.numpy_helper.to_float8e8m0` of one value (after rounding it to float32).
fn e8m0_encode(v: f64, p: &CastMode) -> u8 {
    let bits = (v as f32).to_bits();
    let exponent = (bits >> 23) & 0xff;
    if exponent == 0xff {
        return 0xff;
    }
    let up = match p.round_mode {
        RoundMode::Up => bits & 0x7f_ffff != 0,
        RoundMode::Down => false,
        RoundMode::Nearest => {
            let g = bits & 0x40_0000 != 0;
            let r = bits & 0x20_0000 != 0;
            let s = bits & 0x1f_ffff != 0;
            g && (r || s || exponent > 0)
        }
    };
    if up && !(p.saturate && exponent == 0xfe) {
        // 0xfe + 1 is 0xff, NaN, without saturation (as the reference).
        (exponent + 1) as u8
    } else {
        exponent as u8
    }
}

fn e8m0_decode(bits: u8) -> f64 {
    if bits == 0xff {
        f64::NAN
    } else {
        pow2(bits as i32 - 127)
    }
}

macro_rules! small_float {
    ($(#[$doc:meta])* $t:ident, $name:literal, signed: $signed:expr,
     decode: $decode:expr, encode: $encode:expr, cast: $cast:expr,
     min: $min:expr, max: $max:expr) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $t(u8);

        impl $t {
            pub const fn from_bits(bits: u8) -> Self {
                $t(bits)
            }
            pub const fn to_bits(self) -> u8 {
                self.0
            }
            /// NumPy `astype` (see the module documentation).
            pub fn from_f32(v: f32) -> Self {
                <Self as Elem>::from_f64(v as f64)
            }
            /// Exact.
            pub fn to_f32(self) -> f32 {
                self.to_f64() as f32
            }
        }

        impl core::fmt::Debug for $t {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}({:?} = {:#04x})", stringify!($t), self.to_f64(), self.0)
            }
        }

        /// IEEE equality of the values (NaN is unequal to itself, `-0 == +0`).
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.to_f64() == other.to_f64()
            }
        }

        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
                self.to_f64().partial_cmp(&other.to_f64())
            }
        }

        impl Elem for $t {
            const DTYPE: &'static str = $name;
            const IS_FLOAT: bool = true;
            const IS_SIGNED: bool = $signed;

            #[inline]
            fn to_f64(self) -> f64 {
                ($decode)(self.0)
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                $t(($encode)(v))
            }
            #[inline]
            fn cast_from<A: Elem>(x: A, mode: &CastMode) -> Self {
                $t(($cast)(x.to_f64(), mode))
            }
            fn to_i64(self) -> i64 {
                self.to_f64() as i64
            }
            fn from_i64(v: i64) -> Self {
                Self::from_f64(v as f64)
            }
            fn to_i128(self) -> i128 {
                self.to_f64() as i128
            }
            fn from_i128(v: i128) -> Self {
                Self::from_f64(v as f64)
            }
            fn unary(op: UnaryOp, x: Self) -> Self {
                match op {
                    UnaryOp::Identity | UnaryOp::BitwiseNot => x,
                    _ => Self::from_f64(float_unary(op, x.to_f64())),
                }
            }
            fn binary(op: BinaryOp, a: Self, b: Self) -> Self {
                Self::from_f64(float_binary(op, a.to_f64(), b.to_f64()))
            }
            fn zero() -> Self {
                Self::from_f64(0.0)
            }
            fn one() -> Self {
                Self::from_f64(1.0)
            }
            fn min_value() -> Self {
                $t($min)
            }
            fn max_value() -> Self {
                $t($max)
            }
        }
    };
}

small_float!(
    /// ONNX FLOAT8E4M3FN: 4 exponent bits (bias 7), 3 mantissa bits, no inf, NaN
    /// `0x7F`/`0xFF`, largest 448.
    Float8E4M3FN, "float8_e4m3fn", signed: true,
    decode: |b| E4M3FN.decode(b),
    encode: |v| E4M3FN.encode(v, false),
    cast: |v, m: &CastMode| E4M3FN.encode(v, m.saturate),
    min: 0xfe, max: 0x7e
);
small_float!(
    /// ONNX FLOAT8E4M3FNUZ: 4 exponent bits (bias 8), 3 mantissa bits, no inf, no
    /// negative zero, NaN `0x80`, largest 240.
    Float8E4M3FNUZ, "float8_e4m3fnuz", signed: true,
    decode: |b| E4M3FNUZ.decode(b),
    encode: |v| E4M3FNUZ.encode(v, false),
    cast: |v, m: &CastMode| E4M3FNUZ.encode(v, m.saturate),
    min: 0xff, max: 0x7f
);
small_float!(
    /// ONNX FLOAT8E5M2: 5 exponent bits (bias 15), 2 mantissa bits, IEEE inf and NaN,
    /// largest 57344.
    Float8E5M2, "float8_e5m2", signed: true,
    decode: |b| E5M2.decode(b),
    encode: |v| E5M2.encode(v, false),
    cast: |v, m: &CastMode| E5M2.encode(v, m.saturate),
    min: 0xfc, max: 0x7c
);
small_float!(
    /// ONNX FLOAT8E5M2FNUZ: 5 exponent bits (bias 16), 2 mantissa bits, no inf, no
    /// negative zero, NaN `0x80`, largest 57344.
    Float8E5M2FNUZ, "float8_e5m2fnuz", signed: true,
    decode: |b| E5M2FNUZ.decode(b),
    encode: |v| E5M2FNUZ.encode(v, false),
    cast: |v, m: &CastMode| E5M2FNUZ.encode(v, m.saturate),
    min: 0xff, max: 0x7f
);
small_float!(
    /// ONNX FLOAT8E8M0: a power of two `2^(bits - 127)`, `0xFF` NaN; no sign, no zero.
    /// Converting into it rounds up and saturates (ONNX Cast's defaults).
    Float8E8M0, "float8_e8m0fnu", signed: false,
    decode: e8m0_decode,
    encode: |v| e8m0_encode(v, &CastMode::default()),
    cast: e8m0_encode,
    min: 0x00, max: 0xfe
);
small_float!(
    /// ONNX FLOAT4E2M1: the low four bits, 2 exponent bits (bias 1), 1 mantissa bit,
    /// no inf or NaN, values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
    Float4E2M1, "float4_e2m1fn", signed: true,
    decode: |b| E2M1.decode(b),
    encode: |v| E2M1.encode(v, true),
    cast: |v, _: &CastMode| E2M1.encode(v, true),
    min: 0x0f, max: 0x07
);

macro_rules! small_int {
    ($(#[$doc:meta])* $t:ident, $name:literal, bits: $bits:expr, signed: $signed:expr) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $t(u8);

        impl $t {
            pub const BITS: u32 = $bits;
            pub const MIN: i8 = if $signed { -(1 << ($bits - 1)) } else { 0 };
            pub const MAX: i8 = if $signed { (1 << ($bits - 1)) - 1 } else { (1 << $bits) - 1 };

            /// `v` wrapped to the width.
            pub const fn new(v: i8) -> Self {
                let low = (v as u8) << (8 - $bits);
                $t(if $signed {
                    ((low as i8) >> (8 - $bits)) as u8
                } else {
                    low >> (8 - $bits)
                })
            }

            /// The value (the low bits of the byte).
            pub const fn get(self) -> i8 {
                $t::new(self.0 as i8).0 as i8
            }
        }

        impl core::fmt::Debug for $t {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}({})", stringify!($t), self.get())
            }
        }

        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.get() == other.get()
            }
        }

        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
                self.get().partial_cmp(&other.get())
            }
        }

        impl Elem for $t {
            const DTYPE: &'static str = $name;
            const IS_FLOAT: bool = false;
            const IS_SIGNED: bool = $signed;

            fn to_f64(self) -> f64 {
                self.get() as f64
            }
            /// Truncates, then wraps (ml_dtypes through `int32`: NaN, ±inf and values
            /// outside the int32 range give 0).
            fn from_f64(v: f64) -> Self {
                let t = v.trunc();
                if t.is_nan() || t < i32::MIN as f64 || t > i32::MAX as f64 {
                    return $t(0);
                }
                $t::new(t as i32 as i8)
            }
            fn to_i64(self) -> i64 {
                self.get() as i64
            }
            fn from_i64(v: i64) -> Self {
                $t::new(v as i8)
            }
            fn to_i128(self) -> i128 {
                self.get() as i128
            }
            fn from_i128(v: i128) -> Self {
                $t::new(v as i8)
            }
            fn unary(op: UnaryOp, x: Self) -> Self {
                Self::from_i64(<i64 as Elem>::unary(op, x.to_i64()))
            }
            fn binary(op: BinaryOp, a: Self, b: Self) -> Self {
                Self::from_i64(<i64 as Elem>::binary(op, a.to_i64(), b.to_i64()))
            }
            fn zero() -> Self {
                $t(0)
            }
            fn one() -> Self {
                $t(1)
            }
            fn min_value() -> Self {
                $t::new(Self::MIN)
            }
            fn max_value() -> Self {
                $t::new(Self::MAX)
            }
        }
    };
}

small_int!(
    /// ONNX INT4: -8..=7, stored sign-extended in one byte.
    Int4, "int4", bits: 4, signed: true
);
small_int!(
    /// ONNX UINT4: 0..=15 in one byte.
    UInt4, "uint4", bits: 4, signed: false
);
small_int!(
    /// ONNX INT2: -2..=1, stored sign-extended in one byte.
    Int2, "int2", bits: 2, signed: true
);
small_int!(
    /// ONNX UINT2: 0..=3 in one byte.
    UInt2, "uint2", bits: 2, signed: false
);
