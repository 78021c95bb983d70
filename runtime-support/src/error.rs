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
    /// A count read at run time that sets an output's extent (TopK's `k`) lies outside
    /// what the operator allows, `0..=max`.
    #[error("{what} is {value}, outside 0..={max}")]
    ExtentOutOfRange {
        what: &'static str,
        value: i64,
        max: usize,
    },
    /// A model built for declared ranges (`--dim`) was given a shape whose rank is not
    /// the input's.
    #[error("input `{name}` has rank {expected}, got a shape of rank {got}")]
    InputRank {
        name: &'static str,
        expected: usize,
        got: usize,
    },
    /// A dim the model fixes was given another size.
    #[error("input `{name}`, axis {axis}: expected {expected}, got {got}")]
    DimFixed {
        name: &'static str,
        axis: usize,
        expected: usize,
        got: usize,
    },
    /// A symbol's value lies outside its declared range.
    #[error(
        "symbol `{symbol}` (input `{name}`, axis {axis}) is {value}, outside its declared range {min}..={max}"
    )]
    DimOutOfRange {
        symbol: &'static str,
        name: &'static str,
        axis: usize,
        value: usize,
        min: usize,
        max: usize,
    },
    /// A symbol's value is in range but not on the declared step.
    #[error(
        "symbol `{symbol}` (input `{name}`, axis {axis}) is {value}, not {min} plus a multiple of its step {step}"
    )]
    DimOffStep {
        symbol: &'static str,
        name: &'static str,
        axis: usize,
        value: usize,
        min: usize,
        step: usize,
    },
    /// Two inputs give one symbol different values, or an input's dim is not the
    /// value its expression in the symbols gives.
    #[error(
        "input `{name}`, axis {axis}: is {got}, but `{expr}` is {expected} with the dims read so far ({from})"
    )]
    DimDisagrees {
        name: &'static str,
        axis: usize,
        expr: &'static str,
        expected: usize,
        got: usize,
        from: &'static str,
    },
    /// A [`crate::Arena`] sized for smaller dims than the ones given.
    /// The operating system refused to start a context's worker threads.
    #[error("starting {threads} threads: {message}")]
    Threads { threads: usize, message: String },
    #[error("the context's arena holds {got} bytes; these dims need {needed}")]
    ArenaTooSmall { needed: usize, got: usize },
    /// An input holds a value its element type cannot represent (a `bool` that is not
    /// 0 or 1).
    #[error("input `{name}` holds a byte that is not a valid {dtype}")]
    InvalidValue {
        name: &'static str,
        dtype: &'static str,
    },
}
