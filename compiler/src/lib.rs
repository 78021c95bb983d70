//! Kiln: an ahead-of-time compiler from ONNX models to plain Rust modules with a
//! static memory plan.
//!
//! The pipeline runs in one direction (see ARCHITECTURE.md):
//! [`load`] → [`infer`] → [`passes`] → [`lower`] → [`schedule`] → [`plan`] → [`codegen`],
//! driven by [`compile()`], the single entry point the CLI, the build.rs [`Builder`] and
//! `include_model!` share.

// Unsafe code lives only in kiln-runtime (each block with a `SAFETY:` comment).
#![forbid(unsafe_code)]

pub mod builder;
pub mod codegen;
mod compile;
pub mod dim;
mod error;
pub mod in_place;
pub mod infer;
pub mod ir;
pub mod load;
pub mod lower;
pub mod npy;
pub mod ops;
pub mod passes;
pub mod plan;
pub mod runner;
pub mod schedule;
pub mod tensor;
pub mod window;

pub use builder::Builder;
pub use codegen::WeightsMode;
pub use compile::{
    Compiled, Options, Target, compile, compile_bytes, default_name, infer_shapes, plan_input,
};
pub use error::{Error, UnsupportedOp};

/// Parses `1x3x224x224` (or `1,3,224,224`) into dims.
pub fn parse_dims(s: &str) -> Result<Vec<usize>, Error> {
    s.split(['x', ',', 'X'])
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|_| Error::Options(format!("`{s}` is not a shape like 1x3x224x224")))
        })
        .collect()
}

/// Parses `NAME=1x3x224x224`.
pub fn parse_input_spec(s: &str) -> Result<(String, Vec<usize>), Error> {
    let (name, dims) = s
        .rsplit_once('=')
        .ok_or_else(|| Error::Options(format!("`{s}` should look like NAME=1x3x224x224")))?;
    Ok((name.to_owned(), parse_dims(dims)?))
}

/// Parses `NAME=FILE.npy`: a graph input bound to the array in the file
/// ([`Options::constant_inputs`]).
pub fn parse_constant_spec(s: &str) -> Result<(String, tensor::Tensor), Error> {
    let (name, file) = s
        .split_once('=')
        .ok_or_else(|| Error::Options(format!("`{s}` should look like NAME=FILE.npy")))?;
    Ok((name.to_owned(), npy::read(std::path::Path::new(file))?))
}
