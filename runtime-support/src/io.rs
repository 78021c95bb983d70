//! Input and output conversions used by generated `run` functions.

use crate::{Error, TensorInfo};

/// Views a caller's byte buffer as the `f32` input `info` describes: length and
/// alignment are checked, nothing is copied.
pub fn f32_input<'a>(info: &TensorInfo, bytes: &'a [u8]) -> Result<&'a [f32], Error> {
    let expected = info.len() * 4;
    if bytes.len() != expected {
        return Err(Error::InputLength {
            name: info.name,
            dtype: info.dtype,
            elements: info.len(),
            expected,
            got: bytes.len(),
        });
    }
    bytemuck::try_cast_slice(bytes).map_err(|_| Error::InputMisaligned {
        name: info.name,
        dtype: info.dtype,
        align: 4,
    })
}

/// Bytes per element of the ONNX element type `dtype` names (NumPy's spelling).
pub fn dtype_size(dtype: &str) -> usize {
    match dtype {
        "float64" | "int64" | "uint64" => 8,
        "float32" | "int32" | "uint32" => 4,
        "float16" | "bfloat16" | "int16" | "uint16" => 2,
        _ => 1,
    }
}

/// Checks a caller's input bytes against `info`: exact length, aligned for the type.
pub fn bytes_input<'a>(info: &TensorInfo, bytes: &'a [u8]) -> Result<&'a [u8], Error> {
    bytes_input_of(info, bytes, info.len())
}

/// [`bytes_input`] for an input of `elements` elements (its shape at run time).
pub fn bytes_input_of<'a>(
    info: &TensorInfo,
    bytes: &'a [u8],
    elements: usize,
) -> Result<&'a [u8], Error> {
    let size = dtype_size(info.dtype);
    let expected = elements * size;
    if bytes.len() != expected {
        return Err(Error::InputLength {
            name: info.name,
            dtype: info.dtype,
            elements,
            expected,
            got: bytes.len(),
        });
    }
    if !(bytes.as_ptr() as usize).is_multiple_of(size) {
        return Err(Error::InputMisaligned {
            name: info.name,
            dtype: info.dtype,
            align: size,
        });
    }
    Ok(bytes)
}

/// A typed input's bytes, after checking its element count against `info`.
pub fn typed_input<'a, T: bytemuck::NoUninit>(
    info: &TensorInfo,
    data: &'a [T],
) -> Result<&'a [u8], Error> {
    typed_input_of(info, data, info.len())
}

/// [`typed_input`] for an input of `elements` elements (its shape at run time).
pub fn typed_input_of<'a, T: bytemuck::NoUninit>(
    info: &TensorInfo,
    data: &'a [T],
    elements: usize,
) -> Result<&'a [u8], Error> {
    if data.len() != elements {
        return Err(Error::InputElements {
            name: info.name,
            expected: elements,
            got: data.len(),
        });
    }
    Ok(bytemuck::cast_slice(data))
}

/// The first `bytes` bytes of an output region.
pub fn output_bytes(region: &[f32], bytes: usize) -> Result<&[u8], Error> {
    let all: &[u8] = bytemuck::cast_slice(region);
    all.get(..bytes).ok_or(Error::Region {
        step: "outputs",
        offset: 0,
        end: bytes,
        problem: "is longer than the output's region",
    })
}

/// An output of element type `T` (not `bool`).
pub fn output<'a, T: bytemuck::Pod>(
    info: &TensorInfo,
    region: &'a [f32],
) -> Result<&'a [T], Error> {
    crate::typed::view(region, info.len())
}

/// [`output`] of `elements` elements (its shape at run time).
pub fn output_of<T: bytemuck::Pod>(region: &[f32], elements: usize) -> Result<&[T], Error> {
    crate::typed::view(region, elements)
}

/// A `bool` output: every byte is checked to be 0 or 1.
pub fn output_bool<'a>(info: &TensorInfo, region: &'a [f32]) -> Result<&'a [bool], Error> {
    output_bool_of(info, region, info.len())
}

/// [`output_bool`] of `elements` elements (its shape at run time).
pub fn output_bool_of<'a>(
    info: &TensorInfo,
    region: &'a [f32],
    elements: usize,
) -> Result<&'a [bool], Error> {
    let bytes = output_bytes(region, elements)?;
    bytemuck::checked::try_cast_slice(bytes).map_err(|_| Error::InvalidValue {
        name: info.name,
        dtype: "bool",
    })
}

/// Bytes copied into 8-byte words, so a view of them is aligned for every element
/// type ([`words_as_bytes`] gives the bytes back).
pub fn aligned_words(bytes: &[u8]) -> Vec<u64> {
    let mut words = vec![0u64; bytes.len().div_ceil(8)];
    bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
    words
}

/// The first `len` bytes of `words`.
pub fn words_as_bytes(words: &[u64], len: usize) -> &[u8] {
    let all: &[u8] = bytemuck::cast_slice(words);
    &all[..len.min(all.len())]
}

/// Checks the length of a typed input.
pub fn check_input(info: &TensorInfo, data: &[f32]) -> Result<(), Error> {
    if data.len() != info.len() {
        return Err(Error::InputElements {
            name: info.name,
            expected: info.len(),
            got: data.len(),
        });
    }
    Ok(())
}

/// The bytes of an `f32` output (little-endian on every supported target).
pub fn as_bytes(data: &[f32]) -> &[u8] {
    bytemuck::cast_slice(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: TensorInfo = TensorInfo {
        name: "x",
        dtype: "float32",
        shape: &[2, 2],
    };

    #[test]
    fn checks_length_and_alignment() {
        let data = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        let bytes = as_bytes(&data);
        assert_eq!(
            f32_input(&INFO, &bytes[..16]).unwrap(),
            &[1.0, 2.0, 3.0, 4.0]
        );
        assert!(matches!(
            f32_input(&INFO, &bytes[..12]),
            Err(Error::InputLength { .. })
        ));
        assert!(matches!(
            f32_input(&INFO, &bytes[1..17]),
            Err(Error::InputMisaligned { .. })
        ));
        assert!(check_input(&INFO, &data).is_err());
    }
}
