//! The element types of the typed kernels and their arithmetic.
//!
//! [`Elem`] is implemented once per ONNX dtype by two macros (floats, integers), by
//! hand for [`Bool`], and in [`super::small`] for float8, float4, int4 and int2. Floats compute in `f64` and round once to their own type, so
//! `float16`/`bfloat16` are stored as themselves and never accumulate in half
//! precision. Integers are exact and wrap like NumPy; nothing here panics for any
//! operand, including `x / 0`, `MIN / -1` and shifts past the width.

use super::params::{BinaryOp, UnaryOp};
use super::small::CastMode;
use half::{bf16, f16};

/// An ONNX `bool` element: one byte holding 0 or 1 (`bool` itself is not `Pod`, and a
/// tensor read from outside may hold any byte, so inputs are validated where they enter).
#[repr(transparent)]
#[derive(
    Clone,
    Copy,
    Default,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    bytemuck::Pod,
    bytemuck::Zeroable,
)]
pub struct Bool(pub u8);

impl Bool {
    pub const FALSE: Bool = Bool(0);
    pub const TRUE: Bool = Bool(1);

    /// Any nonzero byte is true.
    pub const fn get(self) -> bool {
        self.0 != 0
    }
}

impl From<bool> for Bool {
    fn from(b: bool) -> Self {
        Bool(b as u8)
    }
}

impl From<Bool> for bool {
    fn from(b: Bool) -> Self {
        b.get()
    }
}

/// One ONNX element type. Comparison is `PartialOrd`/`PartialEq` (IEEE for floats: NaN
/// is unordered and unequal to itself, `-0 == +0`).
pub trait Elem:
    bytemuck::Pod + Default + core::fmt::Debug + PartialEq + PartialOrd + Send + Sync + 'static
{
    /// NumPy's name: `"float32"`, `"int64"`, `"bool"`, ...
    const DTYPE: &'static str;
    const IS_FLOAT: bool;
    /// True for signed integers and floats.
    const IS_SIGNED: bool;

    /// Exact for every type but 64-bit integers beyond 2^53.
    fn to_f64(self) -> f64;
    /// NumPy `astype` semantics: float → int truncates toward zero, saturating, NaN → 0;
    /// → `Bool` is `!= 0` (NaN is true).
    fn from_f64(v: f64) -> Self;
    /// Floats truncate (saturating, NaN → 0); `u64` above `i64::MAX` wraps.
    fn to_i64(self) -> i64;
    /// Integers wrap like NumPy's integer casts; → `Bool` is `!= 0`.
    fn from_i64(v: i64) -> Self;
    /// Exact for every integer type (`u64` included); floats truncate, saturating.
    fn to_i128(self) -> i128;
    /// Integers wrap; floats round to nearest once (`i64 → f32` exactly like NumPy).
    fn from_i128(v: i128) -> Self;
    /// ONNX Cast of `x` into this type with the node's attributes: NumPy `astype`
    /// (`from_f64` from a float, `from_i128` from an integer or `Bool`) for every type
    /// but the float8 ones, which read `mode.saturate`, and E8M0, which reads both.
    fn cast_from<A: Elem>(x: A, _mode: &CastMode) -> Self {
        if A::IS_FLOAT {
            Self::from_f64(x.to_f64())
        } else {
            Self::from_i128(x.to_i128())
        }
    }

    /// The element-wise function `op`. An (op, type) pair ONNX does not define returns
    /// something harmless (float-only ops on integers go through `f64`; bit operations
    /// on floats return `x`); the compiler only emits defined pairs.
    fn unary(op: UnaryOp, x: Self) -> Self;
    /// The element-wise function `op`; undefined pairs return something harmless.
    fn binary(op: BinaryOp, a: Self, b: Self) -> Self;

    fn zero() -> Self;
    fn one() -> Self;
    /// The least value: `-inf` for floats.
    fn min_value() -> Self;
    /// The greatest value: `+inf` for floats.
    fn max_value() -> Self;

    /// NaN test (always false for integers and `Bool`).
    fn is_nan(self) -> bool {
        Self::IS_FLOAT && self.to_f64().is_nan()
    }

    /// NumPy truthiness: nonzero, NaN included.
    fn is_nonzero(self) -> bool {
        self != Self::zero()
    }

    /// 0 or 1.
    fn from_bool(b: bool) -> Self {
        if b { Self::one() } else { Self::zero() }
    }
}

/// `base^exp` by repeated squaring, wrapping; a negative exponent gives 0 unless the
/// base is 1 or -1 (NumPy raises there; ONNX leaves it undefined).
pub fn int_pow<T: Elem>(base: T, exp: i128) -> T {
    if exp < 0 {
        let b = base.to_i128();
        return match b {
            1 => T::one(),
            -1 if exp % 2 == 0 => T::one(),
            -1 => base,
            _ => T::zero(),
        };
    }
    let mut e = exp as u128;
    let mut acc = T::one();
    let mut sq = base;
    while e != 0 {
        if e & 1 == 1 {
            acc = T::binary(BinaryOp::Mul, acc, sq);
        }
        e >>= 1;
        if e != 0 {
            sq = T::binary(BinaryOp::Mul, sq, sq);
        }
    }
    acc
}

/// The error function, relative error below 1e-15 (checked against Python's
/// `math.erf`): the everywhere-positive series
/// `erf(x) = 2/√π · e^{-x²} · Σ (2x²)ⁿ x / (1·3·…·(2n+1))` below 2.5 (no cancellation),
/// the continued fraction of `erfc` above it, and ±1 beyond 6 (`erfc(6)` < 2.2e-17).
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 2.5 {
        let a2 = a * a;
        let mut term = a;
        let mut sum = a;
        let mut n = 0.0;
        while term > sum * 1e-17 {
            n += 1.0;
            term *= 2.0 * a2 / (2.0 * n + 1.0);
            sum += term;
        }
        core::f64::consts::FRAC_2_SQRT_PI * (-a2).exp() * sum
    } else if a < 6.0 {
        // erfc(a) = e^{-a²}/√π · 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + …)))), evaluated
        // from the tail; 80 levels converge to f64 precision for a ≥ 2.5.
        let mut t = a;
        for n in (1..=80).rev() {
            t = a + (n as f64 * 0.5) / t;
        }
        let erfc = (-a * a).exp() / (core::f64::consts::PI.sqrt() * t);
        1.0 - erfc
    } else {
        1.0
    };
    r.copysign(x)
}

/// NumPy's `maximum`: NaN in either operand gives NaN.
fn fmax(a: f64, b: f64) -> f64 {
    if a.is_nan() || a >= b { a } else { b }
}

/// NumPy's `minimum`: NaN in either operand gives NaN.
fn fmin(a: f64, b: f64) -> f64 {
    if a.is_nan() || a <= b { a } else { b }
}

pub(crate) fn sigmoid(x: f64) -> f64 {
    // Two forms so that exp never overflows into inf/inf.
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `ln(1 + e^x)` without overflow for large `x`.
fn softplus(x: f64) -> f64 {
    if x > 0.0 {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    }
}

/// Every unary op on a float, in `f64` (also the fallback for float-only ops on integers).
pub(crate) fn float_unary(op: UnaryOp, x: f64) -> f64 {
    use UnaryOp::*;
    match op {
        Abs => x.abs(),
        Neg => -x,
        // Zeros (of either sign) and NaN are their own sign, like np.sign.
        Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }
        Ceil => x.ceil(),
        Floor => x.floor(),
        Round => x.round_ties_even(),
        Sqrt => x.sqrt(),
        Reciprocal => 1.0 / x,
        Exp => x.exp(),
        Log => x.ln(),
        Sin => x.sin(),
        Cos => x.cos(),
        Tan => x.tan(),
        Asin => x.asin(),
        Acos => x.acos(),
        Atan => x.atan(),
        Sinh => x.sinh(),
        Cosh => x.cosh(),
        Asinh => x.asinh(),
        Acosh => x.acosh(),
        Atanh => x.atanh(),
        Tanh => x.tanh(),
        Sigmoid => sigmoid(x),
        Erf => erf(x),
        // np.maximum(x, 0): NaN stays NaN, -0 stays -0.
        Relu => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
        LeakyRelu { alpha } => {
            if x < 0.0 {
                x * alpha as f64
            } else {
                x
            }
        }
        Elu { alpha } => {
            if x > 0.0 {
                x
            } else {
                alpha as f64 * x.exp_m1()
            }
        }
        Selu { alpha, gamma } => {
            let y = if x > 0.0 {
                x
            } else {
                alpha as f64 * x.exp() - alpha as f64
            };
            gamma as f64 * y
        }
        Celu { alpha } => {
            let a = alpha as f64;
            fmax(0.0, x) + fmin(0.0, a * (x / a).exp_m1())
        }
        HardSigmoid { alpha, beta } => fmax(0.0, fmin(1.0, alpha as f64 * x + beta as f64)),
        HardSwish => x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5)),
        Softplus => softplus(x),
        Softsign => x / (1.0 + x.abs()),
        Mish => x * softplus(x).tanh(),
        Swish { alpha } => x * sigmoid(alpha as f64 * x),
        Gelu { tanh: false } => 0.5 * x * (1.0 + erf(x * core::f64::consts::FRAC_1_SQRT_2)),
        Gelu { tanh: true } => {
            let c = (2.0 / core::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
        }
        ThresholdedRelu { alpha } => {
            if x > alpha as f64 {
                x
            } else {
                0.0
            }
        }
        Shrink { bias, lambd } => {
            let (b, l) = (bias as f64, lambd as f64);
            if x < -l {
                x + b
            } else if x > l {
                x - b
            } else {
                0.0
            }
        }
        Not => (x == 0.0) as u8 as f64,
        BitwiseNot | Identity => x,
    }
}

/// Every binary op on floats, in `f64`.
pub(crate) fn float_binary(op: BinaryOp, a: f64, b: f64) -> f64 {
    use BinaryOp::*;
    match op {
        Add => a + b,
        Sub => a - b,
        Mul => a * b,
        Div => a / b,
        Pow => a.powf(b),
        Mod { fmod: true } => a % b,
        // np.mod (npy_divmod): the remainder takes the divisor's sign, a zero
        // remainder included; x mod 0 is NaN.
        Mod { fmod: false } => {
            let r = a % b;
            if b == 0.0 || r.is_nan() {
                r
            } else if r == 0.0 {
                0.0f64.copysign(b)
            } else if (r < 0.0) != (b < 0.0) {
                r + b
            } else {
                r
            }
        }
        Max => {
            if b.is_nan() {
                b
            } else {
                fmax(a, b)
            }
        }
        Min => {
            if b.is_nan() {
                b
            } else {
                fmin(a, b)
            }
        }
        And => (a != 0.0 && b != 0.0) as u8 as f64,
        Or => (a != 0.0 || b != 0.0) as u8 as f64,
        Xor => ((a != 0.0) != (b != 0.0)) as u8 as f64,
        PRelu => {
            if a < 0.0 {
                b * a
            } else {
                a
            }
        }
        BitShiftLeft | BitShiftRight | BitwiseAnd | BitwiseOr | BitwiseXor => a,
    }
}

macro_rules! float_elem {
    ($t:ty, $name:literal, $to:expr, $from:expr, $from_i128:expr) => {
        impl Elem for $t {
            const DTYPE: &'static str = $name;
            const IS_FLOAT: bool = true;
            const IS_SIGNED: bool = true;

            #[inline]
            fn to_f64(self) -> f64 {
                ($to)(self)
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                ($from)(v)
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self.to_f64() as i64
            }
            #[inline]
            fn from_i64(v: i64) -> Self {
                ($from_i128)(v as i128)
            }
            #[inline]
            fn to_i128(self) -> i128 {
                self.to_f64() as i128
            }
            #[inline]
            fn from_i128(v: i128) -> Self {
                ($from_i128)(v)
            }
            #[inline]
            fn unary(op: UnaryOp, x: Self) -> Self {
                match op {
                    UnaryOp::Identity | UnaryOp::BitwiseNot => x,
                    _ => Self::from_f64(float_unary(op, x.to_f64())),
                }
            }
            #[inline]
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
                Self::from_f64(f64::NEG_INFINITY)
            }
            fn max_value() -> Self {
                Self::from_f64(f64::INFINITY)
            }
        }
    };
}

float_elem!(
    f32,
    "float32",
    |x: f32| x as f64,
    |v: f64| v as f32,
    |v: i128| v as f32
);
float_elem!(f64, "float64", |x: f64| x, |v: f64| v, |v: i128| v as f64);
float_elem!(
    f16,
    "float16",
    |x: f16| x.to_f64(),
    f16::from_f64,
    |v: i128| f16::from_f64(v as f64)
);
float_elem!(
    bf16,
    "bfloat16",
    |x: bf16| x.to_f64(),
    bf16::from_f64,
    |v: i128| bf16::from_f64(v as f64)
);

macro_rules! int_elem {
    (@neg signed, $x:expr) => { $x < 0 };
    (@neg unsigned, $x:expr) => { false };
    (@abs signed, $x:expr) => { $x.wrapping_abs() };
    (@abs unsigned, $x:expr) => { $x };
    (@sign signed, $x:expr) => { $x.signum() };
    (@sign unsigned, $x:expr) => { ($x != 0) as Self };
    ($t:ty, $name:literal, $s:ident) => {
        impl Elem for $t {
            const DTYPE: &'static str = $name;
            const IS_FLOAT: bool = false;
            const IS_SIGNED: bool = <$t>::MIN != 0;

            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                v as Self
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline]
            fn from_i64(v: i64) -> Self {
                v as Self
            }
            #[inline]
            fn to_i128(self) -> i128 {
                self as i128
            }
            #[inline]
            fn from_i128(v: i128) -> Self {
                v as Self
            }
            #[inline]
            fn unary(op: UnaryOp, x: Self) -> Self {
                use UnaryOp::*;
                match op {
                    Abs => int_elem!(@abs $s, x),
                    Neg => x.wrapping_neg(),
                    Sign => int_elem!(@sign $s, x),
                    Ceil | Floor | Round | Identity => x,
                    Relu => {
                        if int_elem!(@neg $s, x) {
                            0
                        } else {
                            x
                        }
                    }
                    Not => (x == 0) as Self,
                    BitwiseNot => !x,
                    _ => Self::from_f64(float_unary(op, x as f64)),
                }
            }
            #[inline]
            fn binary(op: BinaryOp, a: Self, b: Self) -> Self {
                use BinaryOp::*;
                match op {
                    Add => a.wrapping_add(b),
                    Sub => a.wrapping_sub(b),
                    Mul => a.wrapping_mul(b),
                    // Truncates toward zero (C), like the ONNX reference; x / 0 is 0.
                    Div => {
                        if b == 0 {
                            0
                        } else {
                            a.wrapping_div(b)
                        }
                    }
                    Mod { fmod } => {
                        if b == 0 {
                            return 0;
                        }
                        let r = a.wrapping_rem(b);
                        if !fmod && r != 0 && int_elem!(@neg $s, r) != int_elem!(@neg $s, b) {
                            r.wrapping_add(b)
                        } else {
                            r
                        }
                    }
                    Pow => int_pow(a, b as i128),
                    Max => a.max(b),
                    Min => a.min(b),
                    And => (a != 0 && b != 0) as Self,
                    Or => (a != 0 || b != 0) as Self,
                    Xor => ((a != 0) != (b != 0)) as Self,
                    // Shift amounts outside 0..width give 0 (left) or the sign fill
                    // (right), like the ONNX reference.
                    BitShiftLeft => {
                        if int_elem!(@neg $s, b) || (b as u128) >= Self::BITS as u128 {
                            0
                        } else {
                            a.wrapping_shl(b as u32)
                        }
                    }
                    BitShiftRight => {
                        if int_elem!(@neg $s, b) || (b as u128) >= Self::BITS as u128 {
                            if int_elem!(@neg $s, a) { !0 } else { 0 }
                        } else {
                            a.wrapping_shr(b as u32)
                        }
                    }
                    BitwiseAnd => a & b,
                    BitwiseOr => a | b,
                    BitwiseXor => a ^ b,
                    PRelu => {
                        if int_elem!(@neg $s, a) {
                            a.wrapping_mul(b)
                        } else {
                            a
                        }
                    }
                }
            }
            fn zero() -> Self {
                0
            }
            fn one() -> Self {
                1
            }
            fn min_value() -> Self {
                Self::MIN
            }
            fn max_value() -> Self {
                Self::MAX
            }
        }
    };
}

int_elem!(i8, "int8", signed);
int_elem!(i16, "int16", signed);
int_elem!(i32, "int32", signed);
int_elem!(i64, "int64", signed);
int_elem!(u8, "uint8", unsigned);
int_elem!(u16, "uint16", unsigned);
int_elem!(u32, "uint32", unsigned);
int_elem!(u64, "uint64", unsigned);

impl Elem for Bool {
    const DTYPE: &'static str = "bool";
    const IS_FLOAT: bool = false;
    const IS_SIGNED: bool = false;

    fn to_f64(self) -> f64 {
        self.get() as u8 as f64
    }
    fn from_f64(v: f64) -> Self {
        Bool::from(v != 0.0)
    }
    fn to_i64(self) -> i64 {
        self.get() as i64
    }
    fn from_i64(v: i64) -> Self {
        Bool::from(v != 0)
    }
    fn to_i128(self) -> i128 {
        self.get() as i128
    }
    fn from_i128(v: i128) -> Self {
        Bool::from(v != 0)
    }
    fn unary(op: UnaryOp, x: Self) -> Self {
        match op {
            UnaryOp::Not | UnaryOp::BitwiseNot => Bool::from(!x.get()),
            _ => x,
        }
    }
    fn binary(op: BinaryOp, a: Self, b: Self) -> Self {
        use BinaryOp::*;
        let (x, y) = (a.get(), b.get());
        match op {
            And | BitwiseAnd | Min | Mul => Bool::from(x && y),
            Or | BitwiseOr | Max | Add => Bool::from(x || y),
            Xor | BitwiseXor => Bool::from(x != y),
            _ => a,
        }
    }
    fn zero() -> Self {
        Bool::FALSE
    }
    fn one() -> Self {
        Bool::TRUE
    }
    fn min_value() -> Self {
        Bool::FALSE
    }
    fn max_value() -> Self {
        Bool::TRUE
    }
}

/// `x` as float32 elements, when `T` is `f32`: for the kernels' float32 fast paths.
pub(crate) fn as_f32<T: Elem>(x: &[T]) -> Option<&[f32]> {
    (core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>())
        .then(|| bytemuck::cast_slice(x))
}

/// [`as_f32`] for a mutable slice.
pub(crate) fn as_f32_mut<T: Elem>(x: &mut [T]) -> Option<&mut [f32]> {
    (core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>())
        .then(|| bytemuck::cast_slice_mut(x))
}
