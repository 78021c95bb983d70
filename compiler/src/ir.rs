//! The typed graph IR every pass works on.
//!
//! Values and nodes live in arenas indexed by [`ValueId`] and [`NodeId`], which cannot
//! be mixed up. Operator attributes are parsed once, at load time, into [`Op`] variants;
//! nothing after loading looks an attribute up by name.

use std::fmt;

macro_rules! define_index {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

define_index!(
    /// A tensor in the graph: input, weight or intermediate.
    ValueId
);
define_index!(
    /// An operator node.
    NodeId
);

/// ONNX element types Kiln knows about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    F16,
    I64,
    I32,
    I8,
    U8,
    Bool,
}

impl DType {
    /// From ONNX's `TensorProto.DataType` code.
    pub fn from_onnx(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            _ => return None,
        })
    }

    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// The name used in generated metadata (NumPy's spelling).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::I64 => "int64",
            DType::I32 => "int32",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Constant tensor data. Floating types are held as `f32` (the only run-time type
/// today), integer types as `i64` (shape arithmetic); `dtype` keeps the original type.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

/// A constant tensor: a weight, or the result of constant folding.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn f32(shape: Vec<usize>, v: Vec<f32>) -> Tensor {
        Tensor {
            dtype: DType::F32,
            shape,
            data: Data::F32(v),
        }
    }

    pub fn i64(shape: Vec<usize>, v: Vec<i64>) -> Tensor {
        Tensor {
            dtype: DType::I64,
            shape,
            data: Data::I64(v),
        }
    }

    /// The values as integers (shape arithmetic), converting floats.
    pub fn as_i64(&self) -> Vec<i64> {
        match &self.data {
            Data::I64(v) => v.clone(),
            Data::F32(v) => v.iter().map(|&x| x as i64).collect(),
        }
    }

    /// The values as floats, converting integers.
    pub fn as_f32(&self) -> Vec<f32> {
        match &self.data {
            Data::F32(v) => v.clone(),
            Data::I64(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }

    /// Same values, converted to `dtype`.
    pub fn cast(&self, dtype: DType) -> Tensor {
        let data = match dtype {
            DType::F32 | DType::F64 | DType::F16 => Data::F32(self.as_f32()),
            _ => Data::I64(self.as_i64()),
        };
        Tensor {
            dtype,
            shape: self.shape.clone(),
            data,
        }
    }
}

/// A dimension of a graph input as declared in the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    Fixed(usize),
    Symbolic(String),
}

/// A tensor in the graph.
#[derive(Debug, Clone)]
pub struct Value {
    pub name: String,
    pub dtype: DType,
    /// Static shape; `None` until shape inference has run.
    pub shape: Option<Vec<usize>>,
    /// Set for weights and folded constants.
    pub constant: Option<Tensor>,
}

impl Value {
    pub fn shape(&self) -> &[usize] {
        self.shape.as_deref().unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A graph input the caller provides, with its declared dims.
#[derive(Debug, Clone)]
pub struct Input {
    pub value: ValueId,
    pub dims: Vec<Dim>,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub op: Op,
    /// Optional inputs that are absent in the model are `None`.
    pub inputs: Vec<Option<ValueId>>,
    pub outputs: Vec<ValueId>,
}

impl Node {
    /// The `i`-th input, if present.
    pub fn input(&self, i: usize) -> Option<ValueId> {
        self.inputs.get(i).copied().flatten()
    }
}

/// The whole model.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    pub name: String,
    pub opset: i64,
    pub values: Vec<Value>,
    /// In execution order (topological).
    pub nodes: Vec<Node>,
    pub inputs: Vec<Input>,
    pub outputs: Vec<ValueId>,
}

impl Graph {
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    pub fn value_mut(&mut self, id: ValueId) -> &mut Value {
        &mut self.values[id.index()]
    }

    pub fn add_value(&mut self, v: Value) -> ValueId {
        self.values.push(v);
        ValueId(self.values.len() as u32 - 1)
    }

    pub fn is_input(&self, id: ValueId) -> bool {
        self.inputs.iter().any(|i| i.value == id)
    }

    pub fn is_output(&self, id: ValueId) -> bool {
        self.outputs.contains(&id)
    }

    /// Number of node inputs reading each value (graph outputs not counted).
    pub fn use_counts(&self) -> Vec<usize> {
        let mut n = vec![0; self.values.len()];
        for node in &self.nodes {
            for v in node.inputs.iter().flatten() {
                n[v.index()] += 1;
            }
        }
        n
    }

    /// Replaces every read of `from` (by nodes and graph outputs) with `to`.
    pub fn replace_uses(&mut self, from: ValueId, to: ValueId) {
        for node in &mut self.nodes {
            for v in node.inputs.iter_mut().flatten() {
                if *v == from {
                    *v = to;
                }
            }
        }
        for o in &mut self.outputs {
            if *o == from {
                *o = to;
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid,
}

/// Attributes shared by convolution and pooling windows.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub kernel_shape: Option<Vec<usize>>,
    pub strides: Option<Vec<usize>>,
    pub dilations: Option<Vec<usize>>,
    /// `[x1_begin, x2_begin, ..., x1_end, x2_end, ...]` as in ONNX.
    pub pads: Option<Vec<usize>>,
    pub auto_pad: AutoPad,
    pub ceil_mode: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnaryOp {
    Relu,
    LeakyRelu { alpha: f32 },
    Sigmoid,
    Tanh,
    Exp,
    Neg,
    Abs,
    Sqrt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

/// An activation fused into a producer by the fusion pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Activation {
    Relu,
    LeakyRelu { alpha: f32 },
    Clip { min: f32, max: f32 },
    Sigmoid,
}

/// Operators with their attributes parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Conv {
        window: Window,
        group: usize,
        activation: Option<Activation>,
    },
    Gemm {
        alpha: f32,
        beta: f32,
        trans_a: bool,
        trans_b: bool,
        activation: Option<Activation>,
    },
    MatMul,
    BatchNormalization {
        epsilon: f32,
    },
    /// `y = x·scale[c] + shift[c]` over channel axis 1, then an optional activation:
    /// inference BatchNormalization with its statistics folded, and the per-channel
    /// Mul/Add that follow it. Made by the passes, never loaded. Inputs: x, scale, shift.
    ChannelAffine {
        activation: Option<Activation>,
    },
    Unary(UnaryOp),
    /// Bounds from attributes (opset < 11); from inputs 1 and 2 otherwise.
    Clip {
        min: Option<f32>,
        max: Option<f32>,
    },
    Binary(BinaryOp),
    /// `Sum`, `Max`, `Min` over any number of inputs.
    Variadic(BinaryOp),
    MaxPool(Window),
    AveragePool {
        window: Window,
        count_include_pad: bool,
    },
    GlobalAveragePool,
    Lrn {
        size: usize,
        alpha: f32,
        beta: f32,
        bias: f32,
    },
    Softmax {
        axis: i64,
        log: bool,
    },
    Concat {
        axis: i64,
    },
    Transpose {
        perm: Option<Vec<usize>>,
    },
    Reshape {
        allow_zero: bool,
    },
    Flatten {
        axis: i64,
    },
    /// Axes from the attribute (opset < 13) or input 1.
    Squeeze {
        axes: Option<Vec<i64>>,
    },
    Unsqueeze {
        axes: Option<Vec<i64>>,
    },
    Identity,
    Dropout,
    Constant(Tensor),
    ConstantOfShape(Tensor),
    Shape {
        start: i64,
        end: Option<i64>,
    },
    Gather {
        axis: i64,
    },
    Cast {
        to: DType,
    },
}

impl Op {
    /// The ONNX operator type, for messages.
    pub fn onnx_name(&self) -> &'static str {
        match self {
            Op::Conv { .. } => "Conv",
            Op::Gemm { .. } => "Gemm",
            Op::MatMul => "MatMul",
            Op::BatchNormalization { .. } => "BatchNormalization",
            Op::ChannelAffine { .. } => "BatchNormalization",
            Op::Unary(u) => match u {
                UnaryOp::Relu => "Relu",
                UnaryOp::LeakyRelu { .. } => "LeakyRelu",
                UnaryOp::Sigmoid => "Sigmoid",
                UnaryOp::Tanh => "Tanh",
                UnaryOp::Exp => "Exp",
                UnaryOp::Neg => "Neg",
                UnaryOp::Abs => "Abs",
                UnaryOp::Sqrt => "Sqrt",
            },
            Op::Clip { .. } => "Clip",
            Op::Binary(b) => match b {
                BinaryOp::Add => "Add",
                BinaryOp::Sub => "Sub",
                BinaryOp::Mul => "Mul",
                BinaryOp::Div => "Div",
                BinaryOp::Max => "Max",
                BinaryOp::Min => "Min",
            },
            Op::Variadic(b) => match b {
                BinaryOp::Max => "Max",
                BinaryOp::Min => "Min",
                _ => "Sum",
            },
            Op::MaxPool(_) => "MaxPool",
            Op::AveragePool { .. } => "AveragePool",
            Op::GlobalAveragePool => "GlobalAveragePool",
            Op::Lrn { .. } => "LRN",
            Op::Softmax { log: false, .. } => "Softmax",
            Op::Softmax { log: true, .. } => "LogSoftmax",
            Op::Concat { .. } => "Concat",
            Op::Transpose { .. } => "Transpose",
            Op::Reshape { .. } => "Reshape",
            Op::Flatten { .. } => "Flatten",
            Op::Squeeze { .. } => "Squeeze",
            Op::Unsqueeze { .. } => "Unsqueeze",
            Op::Identity => "Identity",
            Op::Dropout => "Dropout",
            Op::Constant(_) => "Constant",
            Op::ConstantOfShape(_) => "ConstantOfShape",
            Op::Shape { .. } => "Shape",
            Op::Gather { .. } => "Gather",
            Op::Cast { .. } => "Cast",
        }
    }

    /// Operators whose output shares its input's bytes (no kernel call).
    pub fn is_view(&self) -> bool {
        matches!(
            self,
            Op::Reshape { .. }
                | Op::Flatten { .. }
                | Op::Squeeze { .. }
                | Op::Unsqueeze { .. }
                | Op::Identity
                | Op::Dropout
        )
    }
}
