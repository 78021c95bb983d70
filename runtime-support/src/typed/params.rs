//! Parameters of the typed kernels. Every type here derives `serde::Serialize`: the
//! compiler emits a value as `kiln_runtime::typed::params::Name { .. }`, so each type
//! name is unique in this module (types defined beside their kernel are re-exported).
//!
//! Shapes and strides are fixed arrays of [`RANK`] entries so that every value can be
//! built in `const` code; entries past `rank` are 1 in shapes and 0 in strides.

use serde::Serialize;

/// The most dimensions a typed kernel's index space has.
pub const RANK: usize = 8;

/// An element-wise function of one operand. Parameters are `f32` because ONNX
/// attributes are; they are widened to `f64` where the element type computes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum UnaryOp {
    Abs,
    Neg,
    Sign,
    Ceil,
    Floor,
    /// Half to even, like `np.round`.
    Round,
    Sqrt,
    Reciprocal,
    Exp,
    Log,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Tanh,
    Sigmoid,
    Erf,
    Relu,
    LeakyRelu {
        alpha: f32,
    },
    Elu {
        alpha: f32,
    },
    Selu {
        alpha: f32,
        gamma: f32,
    },
    Celu {
        alpha: f32,
    },
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    HardSwish,
    Softplus,
    Softsign,
    Mish,
    /// `x · sigmoid(alpha · x)` (ONNX Swish, opset 24).
    Swish {
        alpha: f32,
    },
    /// `tanh`: the tanh approximation (`approximate="tanh"`), else the exact erf form.
    Gelu {
        tanh: bool,
    },
    ThresholdedRelu {
        alpha: f32,
    },
    Shrink {
        bias: f32,
        lambd: f32,
    },
    /// Logical not (Bool).
    Not,
    BitwiseNot,
    Identity,
}

/// An element-wise function of two operands of the same type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// Integers truncate toward zero; `x / 0` is 0.
    Div,
    Pow,
    /// `fmod: false`: the result has the divisor's sign (Python `%`); `true`: C `fmod`.
    Mod {
        fmod: bool,
    },
    Max,
    Min,
    /// Logical (Bool).
    And,
    Or,
    Xor,
    BitShiftLeft,
    BitShiftRight,
    BitwiseAnd,
    BitwiseOr,
    BitwiseXor,
    /// `a < 0 ? b · a : a`.
    PRelu,
}
