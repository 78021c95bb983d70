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
pub mod dynamic;
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

/// Parses `NAME=1x3x224x224`; a dim may be a symbol (`x=1x3x48xW`, or with commas
/// `ids=1,seq_len` when a name holds an `x`), whose range `--dim` declares.
pub fn parse_input_spec(s: &str) -> Result<(String, Vec<dim::Dim>), Error> {
    let (name, dims) = s
        .rsplit_once('=')
        .ok_or_else(|| Error::Options(format!("`{s}` should look like NAME=1x3x224x224")))?;
    let parts: Vec<&str> = if dims.contains(',') {
        dims.split(',').collect()
    } else {
        dims.split(['x', 'X']).collect()
    };
    let dims = parts
        .iter()
        .map(|d| {
            let d = d.trim();
            if let Ok(v) = d.parse::<u64>() {
                if i64::try_from(v).is_err() {
                    return Err(Error::Options(format!(
                        "`{s}`: {v} is larger than any supported size"
                    )));
                }
                Ok(dim::Dim::from(v as usize))
            } else if is_symbol_name(d) {
                Ok(dim::Dim::sym(d))
            } else {
                Err(Error::Options(format!(
                    "`{s}`: `{d}` is neither a size nor a symbol name (shapes look like 1x3x224x224 or 1x3x48xW)"
                )))
            }
        })
        .collect::<Result<_, _>>()?;
    Ok((name.to_owned(), dims))
}

/// A symbol as `--input` and `--dim` write it: a letter or `_`, then letters, digits,
/// `_`, `.`, or a bracketed axis (the names Kiln gives unnamed dims, `x[2]`).
fn is_symbol_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.[]".contains(c))
}

/// Parses `W=32..2048` or `W=32..2048:8` (a step): a symbol's declared range
/// ([`Options::symbol_ranges`]).
pub fn parse_dim_spec(s: &str) -> Result<dim::SymbolRange, Error> {
    let err = |why: &str| {
        Error::Options(format!(
            "`{s}` should look like W=32..2048 or W=32..2048:8: {why}"
        ))
    };
    let (name, range) = s.rsplit_once('=').ok_or_else(|| err("no `=`"))?;
    if !is_symbol_name(name) {
        return Err(err("the name is not a symbol name"));
    }
    let (range, step) = match range.split_once(':') {
        Some((r, st)) => (
            r,
            st.trim()
                .parse::<u64>()
                .map_err(|_| err("the step is not a number"))?,
        ),
        None => (range, 1),
    };
    let (min, max) = range.split_once("..").ok_or_else(|| err("no `..`"))?;
    let num = |v: &str| {
        v.trim()
            .parse::<u64>()
            .map_err(|_| err("a bound is not a number"))
    };
    let r = dim::SymbolRange {
        name: name.into(),
        min: num(min)?,
        max: num(max)?,
        step,
    };
    dim::check_range(&r).map_err(|why| err(&why))?;
    Ok(r)
}

/// Parses `W=320`: a declared symbol's value at which the module also carries a
/// constant-shape build ([`Options::opt_dims`]).
pub fn parse_opt_spec(s: &str) -> Result<(String, u64), Error> {
    let err = |why: &str| Error::Options(format!("`{s}` should look like W=320: {why}"));
    let (name, value) = s.rsplit_once('=').ok_or_else(|| err("no `=`"))?;
    if !is_symbol_name(name) {
        return Err(err("the name is not a symbol name"));
    }
    let value = value
        .trim()
        .parse::<u64>()
        .map_err(|_| err("the value is not a number"))?;
    Ok((name.to_owned(), value))
}

/// Parses `NAME=FILE.npy`: a graph input bound to the array in the file
/// ([`Options::constant_inputs`]).
pub fn parse_constant_spec(s: &str) -> Result<(String, tensor::Tensor), Error> {
    let (name, file) = s
        .split_once('=')
        .ok_or_else(|| Error::Options(format!("`{s}` should look like NAME=FILE.npy")))?;
    Ok((name.to_owned(), npy::read(std::path::Path::new(file))?))
}
