//! Compiling the `.cu` sources with NVRTC (feature `cuda`).
//!
//! cudarc loads `libnvrtc` by name on first use and panics when it is missing, so every
//! entry point here first makes sure the library is loadable — from the system, or
//! from the full path in `KILN_NVRTC_LIB` (the PyPI wheel `nvidia-cuda-nvrtc-cu12`
//! ships `nvidia/cuda_nvrtc/lib/libnvrtc.so.12`) — and turns absence into an
//! [`Error::Cuda`]. cudarc's own compile call drops the log on success; the ptxas
//! resource report (`-Xptxas=-v`) is in that log, so [`compile`] keeps it.

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

use cudarc::nvrtc::{result, sys};

use crate::Error;
use crate::cuda::geometry;

/// Environment variable naming `libnvrtc.so.12` by full path.
pub const NVRTC_LIB_VAR: &str = "KILN_NVRTC_LIB";

/// A compiled source: PTX (or, for a real `sm_XY` target, the PTX NVRTC also keeps)
/// and the full compiler log.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub ptx: String,
    pub log: String,
}

/// Makes `libnvrtc` loadable by cudarc, or says why it is not.
pub fn ensure_loaded() -> Result<(), Error> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            if let Ok(path) = std::env::var(NVRTC_LIB_VAR) {
                // SAFETY: loading a shared library runs its initialisers; libnvrtc's
                // are the vendor's and have no preconditions. The handle is leaked on
                // purpose so the library stays mapped for cudarc, which then finds it
                // by its soname.
                let lib = unsafe { libloading::Library::new(&path) }
                    .map_err(|e| format!("loading {NVRTC_LIB_VAR}={path}: {e}"))?;
                std::mem::forget(lib);
            }
            // SAFETY: only tries to dlopen the library by its usual names.
            if unsafe { sys::is_culib_present() } {
                Ok(())
            } else {
                Err(format!(
                    "libnvrtc.so.12 not found; install the `nvidia-cuda-nvrtc-cu12` wheel and set \
                     {NVRTC_LIB_VAR} to its nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
                ))
            }
        })
        .clone()
        .map_err(Error::Cuda)
}

/// Compiles `src` (named `name` in messages) with NVRTC `options`, returning the PTX
/// and the log even on success.
pub fn compile(src: &str, name: &str, options: &[String]) -> Result<Compiled, Error> {
    ensure_loaded()?;
    let c_src =
        CString::new(src).map_err(|_| Error::Cuda(format!("{name}: NUL byte in source")))?;
    let c_name =
        CString::new(name).map_err(|_| Error::Cuda(format!("{name}: NUL byte in name")))?;
    for o in options {
        if o.contains('\0') {
            return Err(Error::Cuda(format!("{name}: NUL byte in option {o:?}")));
        }
    }
    let prog = result::create_program(&c_src, Some(&c_name))
        .map_err(|e| Error::Cuda(format!("{name}: nvrtcCreateProgram: {e:?}")))?;
    // SAFETY: `prog` was just created and is destroyed exactly once, below, after its
    // last use; `c_src`/`c_name`, which it may reference, outlive it.
    let compiled = unsafe { result::compile_program(prog, options) };
    // SAFETY: as above.
    let log = unsafe { result::get_program_log(prog) }.map(|l| c_chars_to_string(&l));
    let ptx = match (&compiled, &log) {
        // SAFETY: as above; compilation succeeded.
        (Ok(()), Ok(_)) => unsafe { result::get_ptx(prog) }.map(|p| c_chars_to_string(&p)),
        _ => Ok(String::new()),
    };
    // SAFETY: as above; `prog` is not used after this.
    let destroyed = unsafe { result::destroy_program(prog) };
    let log = log.map_err(|e| Error::Cuda(format!("{name}: nvrtcGetProgramLog: {e:?}")))?;
    compiled.map_err(|e| Error::Cuda(format!("{name}: {e:?}\n{log}")))?;
    destroyed.map_err(|e| Error::Cuda(format!("{name}: nvrtcDestroyProgram: {e:?}")))?;
    let ptx = ptx.map_err(|e| Error::Cuda(format!("{name}: nvrtcGetPTX: {e:?}")))?;
    Ok(Compiled { ptx, log })
}

fn c_chars_to_string(chars: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    match CStr::from_bytes_until_nul(&bytes) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// `src` with each `#include "NAME"` of another file in [`geometry::SOURCES`]
/// replaced by that file's text (recursively), because NVRTC gets no include path at
/// run time: the sources are embedded in the binary.
pub fn self_contained(src: &str) -> String {
    fn expand(src: &str, depth: usize, out: &mut String) {
        for line in src.lines() {
            let included = line
                .trim()
                .strip_prefix("#include \"")
                .and_then(|rest| rest.strip_suffix('"'))
                .and_then(|name| geometry::SOURCES.iter().find(|(file, _)| *file == name));
            match included {
                Some((_, text)) if depth < 8 => expand(text, depth + 1, out),
                _ => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
    }
    let mut out = String::with_capacity(src.len());
    expand(src, 0, &mut out);
    out
}
