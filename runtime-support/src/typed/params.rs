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

/// NumPy broadcasting of up to three operands to one contiguous output: `shape` is the
/// output's, `strides[k]` operand `k`'s element strides over it (0 along broadcast
/// dimensions). Binary kernels use operands 0 and 1; `where_` uses all three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Broadcast {
    pub rank: usize,
    pub shape: [usize; RANK],
    pub strides: [[usize; RANK]; 3],
}

impl Broadcast {
    /// The broadcast of `operands` (NumPy rules: shapes aligned on the right, size-1
    /// dimensions stretch) onto `out`; missing operands get stride 0 everywhere.
    /// For the compiler and tests: panics when a shape does not broadcast to `out`.
    pub fn new(out: &[usize], operands: &[&[usize]]) -> Self {
        assert!(
            out.len() <= RANK && operands.len() <= 3,
            "rank or operand count"
        );
        let mut p = Broadcast {
            rank: out.len(),
            shape: [1; RANK],
            strides: [[0; RANK]; 3],
        };
        p.shape[..out.len()].copy_from_slice(out);
        for (k, s) in operands.iter().enumerate() {
            assert!(s.len() <= out.len(), "operand rank above the output's");
            let lead = out.len() - s.len();
            let mut step = 1;
            for d in (0..s.len()).rev() {
                let n = s[d];
                assert!(
                    n == out[lead + d] || n == 1,
                    "{s:?} does not broadcast to {out:?}"
                );
                p.strides[k][lead + d] = if n == 1 { 0 } else { step };
                step *= n;
            }
        }
        p
    }

    /// Number of output elements.
    pub const fn len(&self) -> usize {
        let mut n = 1;
        let mut d = 0;
        while d < self.rank {
            n *= self.shape[d];
            d += 1;
        }
        n
    }

    /// True when the output has no elements.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Parameters of `unary`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Unary {
    pub op: UnaryOp,
}

/// Parameters of `is_inf` (ONNX IsInf attributes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IsInf {
    pub detect_negative: bool,
    pub detect_positive: bool,
}

/// Parameters of `binary` and `binary_acc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Binary {
    pub op: BinaryOp,
    pub bc: Broadcast,
}

/// A comparison giving `Bool` (IEEE for floats: anything with NaN is false).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CompareOp {
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

/// Parameters of `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Compare {
    pub op: CompareOp,
    pub bc: Broadcast,
}

/// A strided view of the input copied to a contiguous output of `shape`:
/// `out[i] = x[offset + Σ i_d · strides[d]]`. Strides may be 0 (Expand, Tile) or
/// negative (Slice with negative steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Strided {
    pub rank: usize,
    pub shape: [usize; RANK],
    pub offset: usize,
    pub strides: [isize; RANK],
}

impl Strided {
    /// The transpose of a contiguous tensor of shape `in_shape`: output dimension `d`
    /// is input dimension `perm[d]`. Panics on a rank above [`RANK`].
    pub fn transpose(in_shape: &[usize], perm: &[usize]) -> Self {
        assert!(
            in_shape.len() <= RANK && perm.len() == in_shape.len(),
            "rank"
        );
        let mut in_strides = [0isize; RANK];
        let mut step = 1isize;
        for d in (0..in_shape.len()).rev() {
            in_strides[d] = step;
            step *= in_shape[d] as isize;
        }
        let mut p = Strided {
            rank: perm.len(),
            shape: [1; RANK],
            offset: 0,
            strides: [0; RANK],
        };
        for (d, &q) in perm.iter().enumerate() {
            p.shape[d] = in_shape[q];
            p.strides[d] = in_strides[q];
        }
        p
    }
}

/// Parameters of `concat`: the output is `outer` rows, each the concatenation of one
/// chunk (`len / outer` elements) of every input in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Concat {
    pub outer: usize,
}

/// How `pad` fills positions outside the input (ONNX Pad-19 `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PadMode {
    Constant,
    /// Mirror without repeating the edge (`np.pad` "reflect").
    Reflect,
    /// Repeat the edge element.
    Edge,
    /// Periodic (`np.pad` "wrap").
    Wrap,
}

/// Parameters of `pad`: output position `o` along dimension `d` reads input position
/// `o - begin[d]`; a negative `begin` crops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pad {
    pub rank: usize,
    pub in_shape: [usize; RANK],
    pub out_shape: [usize; RANK],
    pub begin: [isize; RANK],
    pub mode: PadMode,
}

/// A reduction over some axes (ONNX Reduce*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

/// Parameters of `reduce`: the output is `in_shape` with the `reduced` axes of size 1,
/// contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Reduce {
    pub op: ReduceOp,
    pub rank: usize,
    pub in_shape: [usize; RANK],
    pub reduced: [bool; RANK],
}

/// Parameters of `arg_reduce` (ArgMax when `max`, else ArgMin) over the middle axis of
/// an `[outer, len, inner]` view; the output is `[outer, inner]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ArgReduce {
    pub max: bool,
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    pub select_last_index: bool,
}

/// Parameters of the typed `matmul`: `[batch.., m, k] × [batch.., k, n]`, the output's
/// batch dimensions `batch_shape` (contiguous), each operand's batch strides counted in
/// whole matrices (0 where it is broadcast).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MatMul {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch_rank: usize,
    pub batch_shape: [usize; RANK],
    pub a_batch_strides: [usize; RANK],
    pub b_batch_strides: [usize; RANK],
}

/// Parameters of `softmax` over the middle axis of an `[outer, len, inner]` view
/// (LogSoftmax when `log`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RowSoftmax {
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    pub log: bool,
}

/// Parameters of `hardmax` over the middle axis of an `[outer, len, inner]` view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Hardmax {
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
}

/// Parameters of `cumsum` along the middle axis of an `[outer, len, inner]` view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CumSum {
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    pub exclusive: bool,
    pub reverse: bool,
}

/// Parameters of `trilu` over `batch` matrices of `rows × cols`: `upper` keeps
/// `j - i >= k`, lower keeps `j - i <= k`; the rest is zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Trilu {
    pub batch: usize,
    pub rows: usize,
    pub cols: usize,
    pub k: i64,
    pub upper: bool,
}

pub use super::attention::{Attention, AttentionMask, QkOutput, SoftmaxPrecision};
pub use super::conv::{
    ConvActivation, ConvGeom, ConvInteger, ConvNd, ConvTransposeNd, DeformConv, MaxUnpool, PoolNd,
    PoolOp, Precision, QLinearConv, QMatMul, QuantMode, Quantize,
};
pub use super::extent::{Compress, NonMaxSuppression, NonZero, Unique};
pub use super::index::{
    EyeLike, Gather, GatherElements, GatherNd, OneHot, ScatterElements, ScatterNd,
    ScatterReduction, TopK,
};
pub use super::misc::{
    Det, EINSUM_INPUTS, EINSUM_LABELS, Einsum, Loss, LossReduction, ReverseSequence, SwiGlu,
    TensorScatter,
};
pub use super::norm::{BatchNormT, GroupNorm, LayerNorm, LpNorm, LrnT, Mvn, RmsNorm};
pub use super::recurrent::{Gru, Lstm, Rnn, RnnActivation, RnnDirection};
pub use super::resize::{AffineGrid, Col2Im, GridPadding, GridSample, GridSampleMode, Resize};
pub use super::resize_tables::{
    NearestRounding, ResizeCoord, ResizeMode, ResizeSampled, ResizeSampling,
};
pub use super::rotary::Rotary;
pub use super::signal::{Dft, MelWeightMatrix, Stft, Window, WindowKind};
pub use super::small::{CastMode, RoundMode};
