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
