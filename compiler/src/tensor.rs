//! Element types and constant tensors held in their own type.
//!
//! A constant keeps the type the model gave it: int64 shape arithmetic stays int64
//! (exact above 2^24), float16 weights stay float16. Generic code over the element
//! type goes through [`dispatch_data!`] (a `Data` value) and [`dispatch_dtype!`] (a
//! `DType`), which bind a type alias per arm so one body serves every type.

use std::fmt;

use half::{bf16, f16};
use kiln_runtime::typed::{Bool, Elem};

/// ONNX element types Kiln knows about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F64,
    F16,
    BF16,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Bool,
}

impl DType {
    /// Every type, in a fixed order (docs and tests).
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::Bool,
    ];

    /// From ONNX's `TensorProto.DataType` code.
    pub fn from_onnx(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            4 => DType::U16,
            5 => DType::I16,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            12 => DType::U32,
            13 => DType::U64,
            16 => DType::BF16,
            _ => return None,
        })
    }

    /// ONNX's name for an element type code Kiln does not support, for messages.
    pub fn onnx_code_name(code: i32) -> String {
        match code {
            8 => "string".into(),
            14 => "complex64".into(),
            15 => "complex128".into(),
            17..=20 => "float8".into(),
            21 => "uint4".into(),
            22 => "int4".into(),
            23 => "float4".into(),
            24 => "float8 e8m0".into(),
            25 => "uint2".into(),
            26 => "int2".into(),
            c => format!("type code {c}"),
        }
    }

    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// The name used in generated metadata (NumPy's spelling).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::Bool => "bool",
        }
    }

    /// The Rust type generated code uses for this element, after the runtime path
    /// (`f32`, `i64`, `half::f16`, `typed::Bool`, ...).
    pub fn rust_type(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "half::f16",
            DType::BF16 => "half::bf16",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::Bool => "typed::Bool",
        }
    }

    /// The type of a field of the generated `Inputs`/`Outputs` (users see `bool`).
    pub fn api_type(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            d => d.rust_type(),
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
    }

    pub fn is_signed(self) -> bool {
        self.is_float() || matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Constant tensor data in its own element type.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    Bool(Vec<Bool>),
}

/// `match` over a [`Data`] with one body for every element type: `$v` is the `Vec<T>`
/// and `$T` the element type in each arm.
#[macro_export]
macro_rules! dispatch_data {
    ($data:expr, $v:ident: $T:ident => $body:expr) => {{
        #[allow(unused_imports)]
        use ::half::{bf16, f16};
        use $crate::tensor::Data as D;
        match $data {
            D::F32($v) => {
                type $T = f32;
                $body
            }
            D::F64($v) => {
                type $T = f64;
                $body
            }
            D::F16($v) => {
                type $T = f16;
                $body
            }
            D::BF16($v) => {
                type $T = bf16;
                $body
            }
            D::I8($v) => {
                type $T = i8;
                $body
            }
            D::I16($v) => {
                type $T = i16;
                $body
            }
            D::I32($v) => {
                type $T = i32;
                $body
            }
            D::I64($v) => {
                type $T = i64;
                $body
            }
            D::U8($v) => {
                type $T = u8;
                $body
            }
            D::U16($v) => {
                type $T = u16;
                $body
            }
            D::U32($v) => {
                type $T = u32;
                $body
            }
            D::U64($v) => {
                type $T = u64;
                $body
            }
            D::Bool($v) => {
                type $T = ::kiln_runtime::typed::Bool;
                $body
            }
        }
    }};
}

/// `match` over a [`DType`] binding `$T` to its element type in each arm.
#[macro_export]
macro_rules! dispatch_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {{
        #[allow(unused_imports)]
        use ::half::{bf16, f16};
        use $crate::tensor::DType as DT;
        match $dtype {
            DT::F32 => {
                type $T = f32;
                $body
            }
            DT::F64 => {
                type $T = f64;
                $body
            }
            DT::F16 => {
                type $T = f16;
                $body
            }
            DT::BF16 => {
                type $T = bf16;
                $body
            }
            DT::I8 => {
                type $T = i8;
                $body
            }
            DT::I16 => {
                type $T = i16;
                $body
            }
            DT::I32 => {
                type $T = i32;
                $body
            }
            DT::I64 => {
                type $T = i64;
                $body
            }
            DT::U8 => {
                type $T = u8;
                $body
            }
            DT::U16 => {
                type $T = u16;
                $body
            }
            DT::U32 => {
                type $T = u32;
                $body
            }
            DT::U64 => {
                type $T = u64;
                $body
            }
            DT::Bool => {
                type $T = ::kiln_runtime::typed::Bool;
                $body
            }
        }
    }};
}

/// The element types a [`Data`] can hold, tied to their variant.
pub trait Scalar: Elem {
    const DTYPE: DType;
    fn wrap(v: Vec<Self>) -> Data;
    fn unwrap(d: &Data) -> Option<&[Self]>;
}

macro_rules! scalar {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl Scalar for $t {
            const DTYPE: DType = DType::$variant;
            fn wrap(v: Vec<Self>) -> Data {
                Data::$variant(v)
            }
            fn unwrap(d: &Data) -> Option<&[Self]> {
                match d {
                    Data::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    )*};
}

scalar!(f32 => F32, f64 => F64, f16 => F16, bf16 => BF16, i8 => I8, i16 => I16, i32 => I32,
    i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64, Bool => Bool);

impl Data {
    pub fn dtype(&self) -> DType {
        dispatch_data!(self, _v: T => <T as Scalar>::DTYPE)
    }

    pub fn len(&self) -> usize {
        dispatch_data!(self, v: _T => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Little-endian bytes (every supported target is little-endian).
    pub fn bytes(&self) -> &[u8] {
        dispatch_data!(self, v: _T => bytemuck::cast_slice(v))
    }

    /// `len` copies of the default (zero) value of `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> Data {
        dispatch_dtype!(dtype, T => T::wrap(vec![T::default(); len]))
    }
}

/// A constant tensor: a weight, or the result of constant folding.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    /// A tensor over `data`, whose length must match `shape` (checked by the caller).
    pub fn new(shape: Vec<usize>, data: Data) -> Tensor {
        Tensor {
            dtype: data.dtype(),
            shape,
            data,
        }
    }

    pub fn from_vec<T: Scalar>(shape: Vec<usize>, v: Vec<T>) -> Tensor {
        Tensor::new(shape, T::wrap(v))
    }

    pub fn f32(shape: Vec<usize>, v: Vec<f32>) -> Tensor {
        Tensor::from_vec(shape, v)
    }

    pub fn i64(shape: Vec<usize>, v: Vec<i64>) -> Tensor {
        Tensor::from_vec(shape, v)
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values as `T` if the tensor holds that type.
    pub fn values<T: Scalar>(&self) -> Option<&[T]> {
        T::unwrap(&self.data)
    }

    /// The values as integers (shape arithmetic): exact for integer types, floats
    /// truncated.
    pub fn as_i64(&self) -> Vec<i64> {
        dispatch_data!(&self.data, v: _T => v.iter().map(|x| x.to_i64()).collect())
    }

    /// The values as `f64`.
    pub fn as_f64(&self) -> Vec<f64> {
        dispatch_data!(&self.data, v: _T => v.iter().map(|x| x.to_f64()).collect())
    }

    /// The values as `f32`.
    pub fn as_f32(&self) -> Vec<f32> {
        dispatch_data!(&self.data, v: _T => v.iter().map(|x| x.to_f64() as f32).collect())
    }

    /// Same values converted to `dtype` with ONNX Cast semantics (the run-time kernel).
    pub fn cast(&self, dtype: DType) -> Tensor {
        if dtype == self.dtype {
            return self.clone();
        }
        let data = dispatch_data!(&self.data, v: _A => dispatch_dtype!(dtype, B => {
            let mut out = vec![B::default(); v.len()];
            kiln_runtime::typed::cast(v, &mut out);
            B::wrap(out)
        }));
        Tensor::new(self.shape.clone(), data)
    }

    /// A tensor of `shape` with every element `value`'s first element (zero if empty).
    pub fn filled(shape: Vec<usize>, value: &Tensor) -> Tensor {
        let n = shape.iter().product();
        let data = dispatch_data!(&value.data, v: T => {
            T::wrap(vec![v.first().copied().unwrap_or_default(); n])
        });
        Tensor::new(shape, data)
    }

    /// One scalar as `f64`, when the tensor holds exactly one element.
    pub fn scalar_f64(&self) -> Option<f64> {
        (self.data.len() == 1).then(|| self.as_f64()[0])
    }
}
