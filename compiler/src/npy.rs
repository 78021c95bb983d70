//! `.npy` files of every element type Kiln supports, through `npyz`: `kiln run`'s
//! inputs and outputs, and inputs bound at compile time ([`crate::Options::constant_inputs`]).

use std::path::Path;

use npyz::{DType as NpyType, TypeChar, WriterBuilder};

use crate::error::Error;
use crate::tensor::{DType, Tensor};

fn bad(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::Parse {
        path: path.to_owned(),
        message: format!("not a supported .npy file: {message}"),
    }
}

/// Reads a `.npy` file into a tensor of its own element type.
pub fn read(path: &Path) -> Result<Tensor, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(&bytes).map_err(|m| bad(path, m))
}

/// A float32 array: the values of any numeric `.npy` file converted to `f32` (tests
/// and tools that only deal in float32).
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Reads a `.npy` file as float32 values.
pub fn read_f32(path: &Path) -> Result<Array, Error> {
    let t = read(path)?;
    Ok(Array {
        data: t.as_f32(),
        shape: t.shape,
    })
}

/// The element type of a NumPy type description (`<f4`, `|b1`, ...).
fn dtype_of(t: &NpyType) -> Result<DType, String> {
    let NpyType::Plain(ty) = t else {
        return Err(format!("structured dtype {t:?}"));
    };
    Ok(match (ty.type_char(), ty.size_field()) {
        (TypeChar::Float, 2) => DType::F16,
        (TypeChar::Float, 4) => DType::F32,
        (TypeChar::Float, 8) => DType::F64,
        (TypeChar::Int, 1) => DType::I8,
        (TypeChar::Int, 2) => DType::I16,
        (TypeChar::Int, 4) => DType::I32,
        (TypeChar::Int, 8) => DType::I64,
        (TypeChar::Uint, 1) => DType::U8,
        (TypeChar::Uint, 2) => DType::U16,
        (TypeChar::Uint, 4) => DType::U32,
        (TypeChar::Uint, 8) => DType::U64,
        (TypeChar::Bool, 1) => DType::Bool,
        _ => return Err(format!("element type {ty} is not supported")),
    })
}

/// Parses the bytes of a `.npy` file (C order, little-endian).
pub fn parse(bytes: &[u8]) -> Result<Tensor, String> {
    let file = npyz::NpyFile::new(bytes).map_err(|e| e.to_string())?;
    if file.order() != npyz::Order::C && file.shape().len() > 1 {
        return Err("Fortran-order arrays are not supported".into());
    }
    let dtype = dtype_of(&file.dtype())?;
    let shape: Vec<usize> = file.shape().iter().map(|&d| d as usize).collect();
    let n: usize = shape.iter().product();
    macro_rules! vec_of {
        ($t:ty) => {
            file.into_vec::<$t>().map_err(|e| e.to_string())?
        };
    }
    use crate::tensor::Data;
    let data = match dtype {
        DType::F16 => Data::F16(vec_of!(half::f16)),
        DType::F32 => Data::F32(vec_of!(f32)),
        DType::F64 => Data::F64(vec_of!(f64)),
        DType::I8 => Data::I8(vec_of!(i8)),
        DType::I16 => Data::I16(vec_of!(i16)),
        DType::I32 => Data::I32(vec_of!(i32)),
        DType::I64 => Data::I64(vec_of!(i64)),
        DType::U8 => Data::U8(vec_of!(u8)),
        DType::U16 => Data::U16(vec_of!(u16)),
        DType::U32 => Data::U32(vec_of!(u32)),
        DType::U64 => Data::U64(vec_of!(u64)),
        DType::Bool => Data::Bool(
            vec_of!(bool)
                .into_iter()
                .map(|b| kiln_runtime::typed::Bool(b as u8))
                .collect(),
        ),
        d => return Err(format!("{d} has no NumPy type")),
    };
    if data.len() != n {
        return Err(format!("{} values for shape {shape:?}", data.len()));
    }
    Ok(Tensor::new(shape, data))
}

/// The `.npy` bytes of `t`. Types NumPy lacks are written as values it can read:
/// bfloat16, float8 and float4 as float32, int4/int2 as int8, uint4/uint2 as uint8.
pub fn to_bytes(t: &Tensor) -> Vec<u8> {
    let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
    let mut out = Vec::new();
    macro_rules! write {
        ($t:ty, $v:expr) => {{
            let mut w = npyz::WriteOptions::<$t>::new()
                .default_dtype()
                .shape(&shape)
                .writer(&mut out)
                .begin_nd()
                .expect("writing to a Vec cannot fail");
            w.extend($v).expect("writing to a Vec cannot fail");
            w.finish().expect("writing to a Vec cannot fail");
        }};
    }
    use crate::tensor::Data;
    match &t.data {
        Data::F16(v) => write!(half::f16, v.iter().copied()),
        Data::BF16(_) => write!(f32, t.as_f32().into_iter()),
        Data::F32(v) => write!(f32, v.iter().copied()),
        Data::F64(v) => write!(f64, v.iter().copied()),
        Data::I8(v) => write!(i8, v.iter().copied()),
        Data::I16(v) => write!(i16, v.iter().copied()),
        Data::I32(v) => write!(i32, v.iter().copied()),
        Data::I64(v) => write!(i64, v.iter().copied()),
        Data::U8(v) => write!(u8, v.iter().copied()),
        Data::U16(v) => write!(u16, v.iter().copied()),
        Data::U32(v) => write!(u32, v.iter().copied()),
        Data::U64(v) => write!(u64, v.iter().copied()),
        Data::Bool(v) => write!(bool, v.iter().map(|b| b.0 != 0)),
        Data::F8E4M3FN(_)
        | Data::F8E4M3FNUZ(_)
        | Data::F8E5M2(_)
        | Data::F8E5M2FNUZ(_)
        | Data::F8E8M0(_)
        | Data::F4E2M1(_) => write!(f32, t.as_f32().into_iter()),
        Data::I4(_) | Data::I2(_) => write!(i8, t.as_i64().into_iter().map(|v| v as i8)),
        Data::U4(_) | Data::U2(_) => write!(u8, t.as_i64().into_iter().map(|v| v as u8)),
    }
    out
}

/// `t` as ONNX element type `dtype`, for arrays written the way ONNX's test data are
/// (NumPy has no such dtype): bfloat16 from its `uint16` bits, float8 and float4 from
/// their `uint8` bits, int4/int2 from `int8` values, uint4/uint2 from `uint8` values.
/// A tensor already of `dtype` is returned as it is.
pub fn as_onnx_type(t: Tensor, dtype: DType) -> Result<Tensor, String> {
    use crate::tensor::Data;
    if t.dtype == dtype {
        return Ok(t);
    }
    let data = match (&t.data, dtype) {
        (Data::U16(bits), DType::BF16) => Some(Data::BF16(
            bits.iter().map(|&b| half::bf16::from_bits(b)).collect(),
        )),
        (Data::U8(codes), d) => Data::from_codes(d, codes),
        (Data::I8(v), d @ (DType::I4 | DType::I2)) => Data::from_codes(d, bytemuck::cast_slice(v)),
        _ => None,
    }
    .ok_or_else(|| format!("an array of {} cannot hold {dtype}", t.dtype))?;
    Ok(Tensor::new(t.shape, data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Data;

    #[test]
    fn round_trips_every_type_and_rejects_garbage() {
        let cases = [
            Tensor::f32(vec![2, 2], vec![1.0, -2.5, 3.0, 4.0]),
            Tensor::i64(vec![3], vec![i64::MAX, -1, 1 << 40]),
            Tensor::new(
                vec![2],
                Data::Bool(vec![
                    kiln_runtime::typed::Bool(1),
                    kiln_runtime::typed::Bool(0),
                ]),
            ),
            Tensor::new(
                vec![1, 2],
                Data::F16(vec![half::f16::from_f32(0.5), half::f16::ONE]),
            ),
            Tensor::new(vec![], Data::U8(vec![200])),
        ];
        for t in cases {
            assert_eq!(parse(&to_bytes(&t)).unwrap(), t);
        }
        assert!(parse(b"not an npy file").is_err());
        assert!(parse(&to_bytes(&Tensor::f32(vec![4], vec![0.0; 4]))[..70]).is_err());
    }
}
