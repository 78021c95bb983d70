//! Element types and constant tensors held in their own type.
//!
//! A constant keeps the type the model gave it: int64 shape arithmetic stays int64
//! (exact above 2^24), float16 weights stay float16. Generic code over the element
//! type goes through `dispatch_data!` (a `Data` value) and `dispatch_dtype!` (a
//! `DType`), which bind a type alias per arm so one body serves every type.
//!
//! The small types (float8, float4, int4/uint4, int2/uint2) are one byte per element
//! here as at run time (`kiln_runtime::typed::small`): ONNX's packed 4-bit and 2-bit
//! initializers are unpacked by the loader.

use std::fmt;

use half::{bf16, f16};
use kiln_runtime::typed::params::CastMode;
use kiln_runtime::typed::{
    Bool, Elem, Float4E2M1, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0,
    Int2, Int4, UInt2, UInt4,
};

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
    F8E4M3FN,
    F8E4M3FNUZ,
    F8E5M2,
    F8E5M2FNUZ,
    F8E8M0,
    F4E2M1,
    I4,
    U4,
    I2,
    U2,
}

impl DType {
    /// Every type, in a fixed order (docs and tests).
    pub const ALL: [DType; 23] = [
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
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F8E8M0,
        DType::F4E2M1,
        DType::I4,
        DType::U4,
        DType::I2,
        DType::U2,
    ];

    /// From ONNX's `TensorProto.DataType` name (`FLOAT`, `FLOAT8E4M3FN`, ...).
    pub fn from_onnx_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.onnx_name() == name)
    }

    /// ONNX's `TensorProto.DataType` name.
    pub fn onnx_name(self) -> &'static str {
        match self {
            DType::F32 => "FLOAT",
            DType::F64 => "DOUBLE",
            DType::F16 => "FLOAT16",
            DType::BF16 => "BFLOAT16",
            DType::I8 => "INT8",
            DType::I16 => "INT16",
            DType::I32 => "INT32",
            DType::I64 => "INT64",
            DType::U8 => "UINT8",
            DType::U16 => "UINT16",
            DType::U32 => "UINT32",
            DType::U64 => "UINT64",
            DType::Bool => "BOOL",
            DType::F8E4M3FN => "FLOAT8E4M3FN",
            DType::F8E4M3FNUZ => "FLOAT8E4M3FNUZ",
            DType::F8E5M2 => "FLOAT8E5M2",
            DType::F8E5M2FNUZ => "FLOAT8E5M2FNUZ",
            DType::F8E8M0 => "FLOAT8E8M0",
            DType::F4E2M1 => "FLOAT4E2M1",
            DType::I4 => "INT4",
            DType::U4 => "UINT4",
            DType::I2 => "INT2",
            DType::U2 => "UINT2",
        }
    }

    /// Bits per element in ONNX's serialized tensors (packed for the 4- and 2-bit
    /// types; Kiln holds every element in at least one byte).
    pub fn onnx_bits(self) -> usize {
        match self {
            DType::F4E2M1 | DType::I4 | DType::U4 => 4,
            DType::I2 | DType::U2 => 2,
            d => 8 * d.size(),
        }
    }

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
            17 => DType::F8E4M3FN,
            18 => DType::F8E4M3FNUZ,
            19 => DType::F8E5M2,
            20 => DType::F8E5M2FNUZ,
            21 => DType::U4,
            22 => DType::I4,
            23 => DType::F4E2M1,
            24 => DType::F8E8M0,
            25 => DType::U2,
            26 => DType::I2,
            _ => return None,
        })
    }

    /// ONNX's name for an element type code Kiln does not support, for messages.
    pub fn onnx_code_name(code: i32) -> String {
        match code {
            8 => "string".into(),
            14 => "complex64".into(),
            15 => "complex128".into(),
            27 => "float6 e2m3".into(),
            28 => "float6 e3m2".into(),
            c => match DType::from_onnx(c) {
                Some(d) => d.name().into(),
                None => format!("type code {c}"),
            },
        }
    }

    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            // The small types: one byte per element (unpacked).
            _ => 1,
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
            DType::F8E4M3FN => "float8_e4m3fn",
            DType::F8E4M3FNUZ => "float8_e4m3fnuz",
            DType::F8E5M2 => "float8_e5m2",
            DType::F8E5M2FNUZ => "float8_e5m2fnuz",
            DType::F8E8M0 => "float8_e8m0fnu",
            DType::F4E2M1 => "float4_e2m1fn",
            DType::I4 => "int4",
            DType::U4 => "uint4",
            DType::I2 => "int2",
            DType::U2 => "uint2",
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
            DType::F8E4M3FN => "typed::Float8E4M3FN",
            DType::F8E4M3FNUZ => "typed::Float8E4M3FNUZ",
            DType::F8E5M2 => "typed::Float8E5M2",
            DType::F8E5M2FNUZ => "typed::Float8E5M2FNUZ",
            DType::F8E8M0 => "typed::Float8E8M0",
            DType::F4E2M1 => "typed::Float4E2M1",
            DType::I4 => "typed::Int4",
            DType::U4 => "typed::UInt4",
            DType::I2 => "typed::Int2",
            DType::U2 => "typed::UInt2",
        }
    }

    /// The type of a field of the generated `Inputs`/`Outputs` (users see `bool`; the
    /// small types are the runtime's one-byte newtypes, `typed::Int4`, ...).
    pub fn api_type(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            d => d.rust_type(),
        }
    }

    /// Every float type, the float8 and float4 ones included.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32
                | DType::F64
                | DType::F16
                | DType::BF16
                | DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
        )
    }

    /// float8, float4, int4/uint4, int2/uint2: the types ONNX defines for casts,
    /// quantization and data movement, not for arithmetic.
    pub fn is_small(self) -> bool {
        matches!(
            self,
            DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
                | DType::I4
                | DType::U4
                | DType::I2
                | DType::U2
        )
    }

    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
    }

    pub fn is_signed(self) -> bool {
        (self.is_float() && self != DType::F8E8M0)
            || matches!(
                self,
                DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::I4 | DType::I2
            )
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
    F8E4M3FN(Vec<Float8E4M3FN>),
    F8E4M3FNUZ(Vec<Float8E4M3FNUZ>),
    F8E5M2(Vec<Float8E5M2>),
    F8E5M2FNUZ(Vec<Float8E5M2FNUZ>),
    F8E8M0(Vec<Float8E8M0>),
    F4E2M1(Vec<Float4E2M1>),
    I4(Vec<Int4>),
    U4(Vec<UInt4>),
    I2(Vec<Int2>),
    U2(Vec<UInt2>),
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
            D::F8E4M3FN($v) => {
                type $T = ::kiln_runtime::typed::Float8E4M3FN;
                $body
            }
            D::F8E4M3FNUZ($v) => {
                type $T = ::kiln_runtime::typed::Float8E4M3FNUZ;
                $body
            }
            D::F8E5M2($v) => {
                type $T = ::kiln_runtime::typed::Float8E5M2;
                $body
            }
            D::F8E5M2FNUZ($v) => {
                type $T = ::kiln_runtime::typed::Float8E5M2FNUZ;
                $body
            }
            D::F8E8M0($v) => {
                type $T = ::kiln_runtime::typed::Float8E8M0;
                $body
            }
            D::F4E2M1($v) => {
                type $T = ::kiln_runtime::typed::Float4E2M1;
                $body
            }
            D::I4($v) => {
                type $T = ::kiln_runtime::typed::Int4;
                $body
            }
            D::U4($v) => {
                type $T = ::kiln_runtime::typed::UInt4;
                $body
            }
            D::I2($v) => {
                type $T = ::kiln_runtime::typed::Int2;
                $body
            }
            D::U2($v) => {
                type $T = ::kiln_runtime::typed::UInt2;
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
            DT::F8E4M3FN => {
                type $T = ::kiln_runtime::typed::Float8E4M3FN;
                $body
            }
            DT::F8E4M3FNUZ => {
                type $T = ::kiln_runtime::typed::Float8E4M3FNUZ;
                $body
            }
            DT::F8E5M2 => {
                type $T = ::kiln_runtime::typed::Float8E5M2;
                $body
            }
            DT::F8E5M2FNUZ => {
                type $T = ::kiln_runtime::typed::Float8E5M2FNUZ;
                $body
            }
            DT::F8E8M0 => {
                type $T = ::kiln_runtime::typed::Float8E8M0;
                $body
            }
            DT::F4E2M1 => {
                type $T = ::kiln_runtime::typed::Float4E2M1;
                $body
            }
            DT::I4 => {
                type $T = ::kiln_runtime::typed::Int4;
                $body
            }
            DT::U4 => {
                type $T = ::kiln_runtime::typed::UInt4;
                $body
            }
            DT::I2 => {
                type $T = ::kiln_runtime::typed::Int2;
                $body
            }
            DT::U2 => {
                type $T = ::kiln_runtime::typed::UInt2;
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
    i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64, Bool => Bool,
    Float8E4M3FN => F8E4M3FN, Float8E4M3FNUZ => F8E4M3FNUZ, Float8E5M2 => F8E5M2,
    Float8E5M2FNUZ => F8E5M2FNUZ, Float8E8M0 => F8E8M0, Float4E2M1 => F4E2M1, Int4 => I4,
    UInt4 => U4, Int2 => I2, UInt2 => U2);

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

    /// A small type from one code per byte (ONNX's unpacked form, and what NumPy
    /// holds of an ml_dtypes array viewed as `uint8`/`int8`): every bit of a float8,
    /// the low bits of float4, int4 and int2 (so an `int8` value of int4 reads as
    /// itself); each element stored canonical. `None` for the other types.
    pub fn from_codes(dtype: DType, codes: &[u8]) -> Option<Data> {
        macro_rules! from {
            ($variant:ident, $f:expr) => {
                Data::$variant(codes.iter().map(|&c| ($f)(c)).collect())
            };
        }
        Some(match dtype {
            DType::F8E4M3FN => from!(F8E4M3FN, Float8E4M3FN::from_bits),
            DType::F8E4M3FNUZ => from!(F8E4M3FNUZ, Float8E4M3FNUZ::from_bits),
            DType::F8E5M2 => from!(F8E5M2, Float8E5M2::from_bits),
            DType::F8E5M2FNUZ => from!(F8E5M2FNUZ, Float8E5M2FNUZ::from_bits),
            DType::F8E8M0 => from!(F8E8M0, Float8E8M0::from_bits),
            DType::F4E2M1 => from!(F4E2M1, |c: u8| Float4E2M1::from_bits(c & 0x0f)),
            DType::I4 => from!(I4, |c: u8| Int4::new(c as i8)),
            DType::U4 => from!(U4, |c: u8| UInt4::new(c as i8)),
            DType::I2 => from!(I2, |c: u8| Int2::new(c as i8)),
            DType::U2 => from!(U2, |c: u8| UInt2::new(c as i8)),
            _ => return None,
        })
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

    /// Same values converted to `dtype` with NumPy `astype` semantics (the run-time
    /// kernel `cast`).
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

    /// Same values converted to `dtype` by ONNX Cast with its `saturate` and
    /// `round_mode` attributes (the run-time kernel `cast_with`).
    pub fn cast_with(&self, dtype: DType, mode: &CastMode) -> Tensor {
        if dtype == self.dtype {
            return self.clone();
        }
        let data = dispatch_data!(&self.data, v: _A => dispatch_dtype!(dtype, B => {
            let mut out = vec![B::default(); v.len()];
            kiln_runtime::typed::cast_with(mode, v, &mut out);
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

#[cfg(test)]
mod tests {
    use super::*;
    use onnx_protobuf::TensorProto;

    fn proto(data_type: i32, dims: &[i64]) -> TensorProto {
        TensorProto {
            dims: dims.to_vec(),
            data_type,
            ..Default::default()
        }
    }

    fn ints(t: &Tensor) -> Vec<i64> {
        t.as_i64()
    }

    /// ONNX packs 4-bit elements two per byte and 2-bit elements four per byte, first
    /// element in the low bits, in `raw_data` or one byte per `int32_data` entry (the
    /// bytes here are the `int32_data` onnx 1.23.2's `helper.make_tensor` writes for
    /// these values).
    #[test]
    fn packed_initializers_unpack_to_one_byte_per_element() {
        let load = crate::load::tensor_from_proto;
        // INT4 [1, -8, 7, -1, 3]: nibbles 1, 8, 7, f, 3 -> bytes 0x81, 0xf7, 0x03.
        let mut t = proto(22, &[5]);
        t.raw_data = vec![0x81, 0xf7, 0x03];
        let v = load(&t).unwrap();
        assert_eq!(v.dtype, DType::I4);
        assert_eq!(ints(&v), [1, -8, 7, -1, 3]);
        // Stored canonical: the int8 of each value.
        assert_eq!(v.data.bytes(), [1, 0xf8, 7, 0xff, 3]);
        let mut t = proto(22, &[5]);
        t.int32_data = vec![0x81, 0xf7, 0x03];
        assert_eq!(ints(&load(&t).unwrap()), [1, -8, 7, -1, 3]);
        // UINT4 [15, 0, 9].
        let mut t = proto(21, &[3]);
        t.raw_data = vec![0x0f, 0x09];
        assert_eq!(ints(&load(&t).unwrap()), [15, 0, 9]);
        // INT2 [0, 1, -1, -2, 1]: 0b10_11_01_00, then 0b01.
        let mut t = proto(26, &[5]);
        t.raw_data = vec![0b1011_0100, 0b01];
        assert_eq!(ints(&load(&t).unwrap()), [0, 1, -1, -2, 1]);
        // UINT2 [3, 2, 1, 0].
        let mut t = proto(25, &[4]);
        t.int32_data = vec![0b0001_1011];
        assert_eq!(ints(&load(&t).unwrap()), [3, 2, 1, 0]);
        // FLOAT4E2M1 [0.5, -6, 3]: codes 1, f, 5.
        let mut t = proto(23, &[3]);
        t.raw_data = vec![0xf1, 0x05];
        assert_eq!(load(&t).unwrap().as_f64(), [0.5, -6.0, 3.0]);
        // FLOAT8E4M3FN bits, one per byte or int32_data entry.
        let mut t = proto(17, &[2]);
        t.int32_data = vec![0x7e, 0xc6];
        assert_eq!(load(&t).unwrap().as_f64(), [448.0, -3.5]);
        // Wrong byte counts are errors naming both sizes.
        let mut t = proto(22, &[5]);
        t.raw_data = vec![0x81, 0xf7];
        let e = load(&t).unwrap_err();
        assert!(e.contains("holds 2 bytes") && e.contains("needs 3"), "{e}");
    }

    /// Casting folds with the node's attributes: saturating by default, not with
    /// `saturate = 0` (bits from ml_dtypes 0.6.0 `astype` and onnx's `saturate_cast`);
    /// E8M0 rounds by `round_mode`.
    #[test]
    fn cast_with_folds_saturate_and_round_mode() {
        let x = Tensor::f32(vec![3], vec![1e6, -0.1, 3.0]);
        let sat = x.cast_with(DType::F8E4M3FN, &CastMode::default());
        assert_eq!(sat.data.bytes(), [0x7e, 0x9d, 0x44]);
        let no_sat = CastMode {
            saturate: false,
            ..CastMode::default()
        };
        assert_eq!(
            x.cast_with(DType::F8E4M3FN, &no_sat).data.bytes(),
            [0x7f, 0x9d, 0x44]
        );
        let down = CastMode {
            round_mode: kiln_runtime::typed::params::RoundMode::Down,
            ..CastMode::default()
        };
        assert_eq!(x.cast_with(DType::F8E8M0, &down).data.bytes()[2], 0x80);
        assert_eq!(
            x.cast_with(DType::F8E8M0, &CastMode::default())
                .data
                .bytes()[2],
            0x81
        );
        for d in DType::ALL {
            assert_eq!(DType::from_onnx_name(d.onnx_name()), Some(d));
        }
    }
}
