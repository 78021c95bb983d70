//! Model weights: embedded in the binary with `include_bytes!`, or read from the
//! weights file at run time. Both are one dense little-endian `f32` blob whose layout
//! (constant offsets) the compiler fixed.

use std::path::Path;

use crate::Error;
use crate::pages::{HUGE_PAGE, LargePages};

/// Wrapper that gives `include_bytes!` data the alignment of its type parameter's
/// alignment attribute: `static W: &Aligned<[u8]> = &Aligned(*include_bytes!(..));`.
#[repr(C, align(64))]
pub struct Aligned<T: ?Sized>(pub T);

/// The weights of one model. Weights of at least a huge page are held on huge pages
/// ([`LargePages`]), copied there from the binary where they were embedded: a run
/// streams them in full, and on 4 KiB pages every 4 KiB of them is a TLB miss.
pub enum Weights {
    Static(&'static [f32]),
    Owned(LargePages<f32>),
}

impl Weights {
    /// Weights embedded in the binary. `bytes` comes from [`Aligned`], so it is aligned.
    /// At least [`HUGE_PAGE`] of them are copied onto huge pages, once per model.
    pub fn from_static(
        bytes: &'static Aligned<[u8]>,
        expected_bytes: usize,
    ) -> Result<Self, Error> {
        check_len(bytes.0.len(), expected_bytes)?;
        let floats: &'static [f32] =
            bytemuck::try_cast_slice(&bytes.0).map_err(|_| Error::WeightsLength {
                expected: expected_bytes,
                got: bytes.0.len(),
            })?;
        if bytes.0.len() >= HUGE_PAGE {
            return Ok(Weights::Owned(LargePages::copy_of(floats)));
        }
        Ok(Weights::Static(floats))
    }

    /// Reads a weights file written by the compiler.
    pub fn from_file(path: impl AsRef<Path>, expected_bytes: usize) -> Result<Self, Error> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| Error::WeightsFile {
            path: path.to_owned(),
            source,
        })?;
        Self::from_bytes(&bytes, expected_bytes)
    }

    /// Copies weights from any byte buffer (no alignment needed).
    pub fn from_bytes(bytes: &[u8], expected_bytes: usize) -> Result<Self, Error> {
        check_len(bytes.len(), expected_bytes)?;
        let floats = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        Ok(Weights::Owned(LargePages::collect(bytes.len() / 4, floats)))
    }

    pub fn as_f32(&self) -> &[f32] {
        match self {
            Weights::Static(w) => w,
            Weights::Owned(w) => w,
        }
    }
}

fn check_len(got: usize, expected: usize) -> Result<(), Error> {
    if got != expected || !got.is_multiple_of(4) {
        return Err(Error::WeightsLength { expected, got });
    }
    Ok(())
}

#[cfg(target_endian = "big")]
compile_error!("Kiln weights files are little-endian; big-endian targets are not supported yet");
