//! The CUDA C sources of the kernels, embedded so that the device launcher can compile
//! them with NVRTC when a model is created (re-exported from [`super::geometry`]).
//! Each `.cu` file starts with `#include "kiln.cuh"`, which is in [`SOURCES`] too:
//! `nvrtc::self_contained` inlines it, as NVRTC gets no include path at run time.

/// The CUDA sources, `(file name, text)`: the header `kiln.cuh`, then the kernel files.
/// A `static`, not a `const`: a constant is copied at each use, so the `&str`s of two
/// uses need not be the same pointer, and [`source_of`]'s result is compared by
/// address with these entries.
pub static SOURCES: &[(&str, &str)] = &[
    ("kiln.cuh", include_str!("../../cuda/kiln.cuh")),
    ("gemm.cu", include_str!("../../cuda/gemm.cu")),
    ("elementwise.cu", include_str!("../../cuda/elementwise.cu")),
    ("norm.cu", include_str!("../../cuda/norm.cu")),
    ("pool.cu", include_str!("../../cuda/pool.cu")),
    ("layout.cu", include_str!("../../cuda/layout.cu")),
];

/// Names of the `extern "C" __global__` kernels a source defines (each kernel's
/// declaration starts its line with `extern "C" __global__`).
pub fn kernels_in(source: &str) -> impl Iterator<Item = &str> {
    source
        .lines()
        .filter(|l| l.trim_start().starts_with("extern \"C\" __global__"))
        .filter_map(|l| {
            let rest = &l[l.find("kiln_")?..];
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
            Some(&rest[..end])
        })
}

/// The text of the file in [`SOURCES`] that defines `kernel` (the very `&'static str`
/// of that entry).
pub fn source_of(kernel: &str) -> Option<&'static str> {
    SOURCES
        .iter()
        .find(|(_, text)| kernels_in(text).any(|k| k == kernel))
        .map(|(_, text)| *text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::geometry::KERNEL_NAMES;

    #[test]
    fn every_kernel_has_exactly_one_source() {
        let defined: Vec<&str> = SOURCES.iter().flat_map(|(_, t)| kernels_in(t)).collect();
        let mut sorted = defined.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            defined.len(),
            "a kernel defined twice: {defined:?}"
        );
        let mut names = KERNEL_NAMES.to_vec();
        names.sort();
        assert_eq!(sorted, names, "KERNEL_NAMES and the sources differ");
        let gemm = SOURCES.iter().find(|(f, _)| *f == "gemm.cu").unwrap().1;
        assert!(std::ptr::eq(source_of("kiln_gemm").unwrap(), gemm));
        assert_eq!(source_of("kiln_nothing"), None);
    }

    #[test]
    fn kernel_files_include_only_the_header() {
        for (name, text) in SOURCES {
            let includes: Vec<&str> = text
                .lines()
                .filter(|l| l.trim_start().starts_with("#include"))
                .collect();
            let expected: &[&str] = if *name == "kiln.cuh" {
                // Inside `#ifdef KILN_EMULATOR`: never seen by NVRTC.
                &["#include \"shim/cuda_shim.h\""]
            } else {
                &["#include \"kiln.cuh\""]
            };
            assert_eq!(includes, expected, "{name}");
        }
    }
}
