//! Minimal `.npy` reading and writing for `kiln run`: version 1–3 headers, C order,
//! little-endian `f4`/`f8`/`i4`/`i8` read as `f32`, `f4` written.

use std::path::Path;

use crate::error::Error;

/// An array read from a `.npy` file.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

fn bad(path: &Path, message: impl Into<String>) -> Error {
    Error::Parse {
        path: path.to_owned(),
        message: format!("not a supported .npy file: {}", message.into()),
    }
}

pub fn read(path: &Path) -> Result<Array, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(&bytes).map_err(|m| bad(path, m))
}

pub fn parse(bytes: &[u8]) -> Result<Array, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("missing the \\x93NUMPY magic".into());
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("unknown format version {v}")),
    };
    let header = bytes
        .get(start..start + header_len)
        .ok_or("truncated header")?;
    let header = std::str::from_utf8(header).map_err(|_| "header is not text")?;
    let field = |key: &str| -> Result<&str, String> {
        let at = header
            .find(&format!("'{key}'"))
            .ok_or(format!("header lacks '{key}'"))?;
        let rest = &header[at + key.len() + 2..];
        Ok(rest.trim_start_matches([' ', ':']))
    };
    let descr = field("descr")?;
    let descr = descr.split('\'').nth(1).ok_or("bad descr")?;
    if field("fortran_order")?.starts_with("True") {
        return Err("Fortran-order arrays are not supported".into());
    }
    let shape_text = field("shape")?;
    let shape_text = &shape_text[1..shape_text.find(')').ok_or("bad shape")?];
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad dimension `{s}`"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let n: usize = shape.iter().product();
    let body = &bytes[start + header_len..];
    let (size, conv): (usize, fn(&[u8]) -> f32) = match descr {
        "<f4" | "|f4" => (4, |c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        "<f8" => (8, |c| {
            f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32
        }),
        "<i4" => (4, |c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32),
        "<i8" => (8, |c| {
            i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32
        }),
        other => {
            return Err(format!(
                "element type `{other}` is not supported (use float32)"
            ));
        }
    };
    if body.len() != n * size {
        return Err(format!(
            "holds {} data bytes, shape {shape:?} of `{descr}` needs {}",
            body.len(),
            n * size
        ));
    }
    Ok(Array {
        shape,
        data: body.chunks_exact(size).map(conv).collect(),
    })
}

/// Serialises a float32 array as `.npy` version 1.
pub fn to_bytes(shape: &[usize], data: &[f32]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape_text}, }}");
    // Pad so that the data starts at a multiple of 64 bytes, newline-terminated.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 4);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let bytes = to_bytes(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let a = parse(&bytes).unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.data, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert!(parse(&bytes[..bytes.len() - 1]).is_err());
        assert!(parse(b"not numpy at all").is_err());
        assert!(parse(&bytes[..20]).is_err());
    }
}
