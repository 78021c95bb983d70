//! Code generation. The plan and the program are target-independent; each target has
//! its own emitter module producing one Rust source file.

pub mod cpu;
mod names;
mod tokens;

/// How the generated module gets its weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightsMode {
    /// `include_bytes!` of the weights file, in an aligned wrapper (the default).
    #[default]
    Embed,
    /// Read from the weights file at run time with `Model::load(path)`.
    File,
}

/// Settings the emitters share.
#[derive(Debug, Clone)]
pub struct CodegenOptions {
    /// Path of the runtime crate in generated code, e.g. `::kiln_runtime`.
    pub runtime_path: String,
    pub weights: WeightsMode,
    /// The weights blob as `include_bytes!` names it: a file name beside the generated
    /// `.rs` file, or an absolute path (`Options::weights_dir`, for `include_model!`).
    pub weights_file: String,
    /// Name of the source model, for the header comment.
    pub source: String,
    /// Steps per generated function; long models are split so rustc stays fast.
    pub steps_per_fn: usize,
}
