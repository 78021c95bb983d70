//! The build.rs front door, in the style of prost-build:
//!
//! ```no_run
//! // build.rs
//! kiln_compiler::Builder::new("models/squeezenet.onnx")
//!     .name("squeezenet")
//!     .input("data_0", [1, 3, 224, 224])
//!     .compile()
//!     .unwrap();
//! // src/lib.rs: mod squeezenet { include!(concat!(env!("OUT_DIR"), "/squeezenet.rs")); }
//! ```

use std::path::PathBuf;

use crate::codegen::WeightsMode;
use crate::compile::{Compiled, Options, Target, compile};
use crate::error::Error;

/// Compiles one model into `OUT_DIR` (or [`Builder::out_dir`]).
#[derive(Debug, Clone)]
pub struct Builder {
    model: PathBuf,
    out_dir: Option<PathBuf>,
    options: Options,
    emit_rerun: bool,
}

impl Builder {
    pub fn new(model: impl Into<PathBuf>) -> Self {
        Builder {
            model: model.into(),
            out_dir: None,
            options: Options::default(),
            emit_rerun: true,
        }
    }

    /// Module name (file `NAME.rs`); defaults to the model file's stem.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.options.name = Some(name.into());
        self
    }

    /// The full shape of an input (required for symbolic dims).
    pub fn input(mut self, name: impl Into<String>, dims: impl AsRef<[usize]>) -> Self {
        self.options
            .input_dims
            .push((name.into(), crate::dim::dims_of(dims.as_ref())));
        self
    }

    /// The shape of an input with symbols (`[1, 3, 48, W]`, from
    /// [`crate::parse_input_spec`]), whose ranges [`Builder::dim`] declares.
    pub fn input_symbolic(mut self, name: impl Into<String>, dims: Vec<crate::dim::Dim>) -> Self {
        self.options.input_dims.push((name.into(), dims));
        self
    }

    /// Declares a symbol's range (`SymbolRange::new("W", 32, 2048)`, or
    /// [`crate::parse_dim_spec`]`("W=32..2048:8")`).
    pub fn dim(mut self, range: crate::dim::SymbolRange) -> Self {
        self.options.symbol_ranges.push(range);
        self
    }

    /// Also builds the module for one point of the declared ranges with every shape
    /// fixed (`.opt("W", 320)`, one call per declared symbol): `run` takes that
    /// constant-shape path when given exactly these dims ([`crate::Options::opt_dims`]).
    pub fn opt(mut self, symbol: impl Into<String>, value: u64) -> Self {
        self.options.opt_dims.push((symbol.into(), value));
        self
    }

    pub fn alignment(mut self, bytes: usize) -> Self {
        self.options.alignment = bytes;
        self
    }

    /// What the module runs on: [`Target::Cpu`] (the default) or [`Target::Cuda`]
    /// (kernel launches through `kiln_runtime::cuda`).
    pub fn target(mut self, target: Target) -> Self {
        self.options.target = target;
        self
    }

    /// Whether 3×3 stride-1 convolutions may run as Winograd F(2×2) or F(4×4) on the CPU
    /// (default `true`; see [`crate::Options::winograd`]).
    pub fn winograd(mut self, yes: bool) -> Self {
        self.options.winograd = yes;
        self
    }

    /// Embed the weights with `include_bytes!` (default) or load them at run time.
    pub fn weights(mut self, mode: WeightsMode) -> Self {
        self.options.weights = mode;
        self
    }

    /// Path of the runtime crate in generated code (default `::kiln_runtime`).
    pub fn runtime_path(mut self, path: impl Into<String>) -> Self {
        self.options.runtime_path = path.into();
        self
    }

    /// Where to write; defaults to `$OUT_DIR`.
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// Whether to print `cargo:rerun-if-changed` for the model (default true). Note that
    /// once a build script prints one, cargo stops rerunning it for other changes in
    /// the package.
    pub fn emit_rerun_if_changed(mut self, yes: bool) -> Self {
        self.emit_rerun = yes;
        self
    }

    /// Compiles and writes `NAME.rs` and `NAME.weights.bin`.
    pub fn compile(self) -> Result<Compiled, Error> {
        let out_dir = match self.out_dir {
            Some(d) => d,
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or_else(|| {
                    Error::Options("OUT_DIR is not set: call from build.rs or set out_dir()".into())
                })?,
        };
        if self.emit_rerun {
            println!("cargo:rerun-if-changed={}", self.model.display());
        }
        let compiled = compile(&self.model, &self.options)?;
        compiled.write_to(&out_dir)?;
        Ok(compiled)
    }
}
