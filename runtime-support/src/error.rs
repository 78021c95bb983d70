use std::path::PathBuf;

/// Everything that can go wrong when a generated model runs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("expected {expected} inputs, got {got}")]
    InputCount { expected: usize, got: usize },
    #[error(
        "input `{name}` must hold {expected} bytes ({elements} elements of {dtype}), got {got}"
    )]
    InputLength {
        name: &'static str,
        dtype: &'static str,
        elements: usize,
        expected: usize,
        got: usize,
    },
    #[error("input `{name}` is not aligned to {align} bytes; pass a buffer of {dtype} values")]
    InputMisaligned {
        name: &'static str,
        dtype: &'static str,
        align: usize,
    },
    #[error("input `{name}` must hold {expected} elements, got {got}")]
    InputElements {
        name: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("weights hold {got} bytes, the model was compiled for {expected}")]
    WeightsLength { expected: usize, got: usize },
    #[error("reading weights from {path}: {source}")]
    WeightsFile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A planned region lies outside the arena or overlaps a region written by the same
    /// step. Generated code never produces this unless the planner is wrong; it is an
    /// error rather than undefined behaviour.
    #[error("step `{step}`: arena region {offset}..{end} {problem}")]
    Region {
        step: &'static str,
        offset: usize,
        end: usize,
        problem: &'static str,
    },
    /// The CUDA driver, NVRTC or a device call failed, or the runtime was built
    /// without the `cuda` feature.
    #[error("CUDA: {0}")]
    Cuda(String),
    /// A kernel launch failed (on the device or in the CPU emulator).
    #[error("step `{step}`: launching `{kernel}`: {message}")]
    Launch {
        step: &'static str,
        kernel: &'static str,
        message: String,
    },
    /// An index read at run time (Gather, ScatterND, OneHot, ...) lies outside the
    /// axis it indexes: ONNX calls the result undefined; Kiln reports it.
    #[error("index {index} is out of range for an axis of length {len}")]
    IndexOutOfRange { index: i64, len: usize },
    /// An input holds a value its element type cannot represent (a `bool` that is not
    /// 0 or 1).
    #[error("input `{name}` holds a byte that is not a valid {dtype}")]
    InvalidValue {
        name: &'static str,
        dtype: &'static str,
    },
}
