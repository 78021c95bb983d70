use std::path::PathBuf;

/// Every way a compile can fail. `Display` says everything a user needs: these errors
/// are `unwrap`ped in build scripts and printed as-is by the CLI and the macro.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a readable ONNX model: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("the model is malformed: {0}")]
    Model(String),
    #[error("{}", unsupported_message(.0))]
    Unsupported(Vec<UnsupportedOp>),
    /// Operators the CPU target runs but the CUDA target has no kernel for yet (every
    /// one is listed, as for unsupported operators).
    #[error("{}", no_cuda_message(.0))]
    NoCudaKernel(Vec<UnsupportedOp>),
    /// A problem with one node, named as tract does: "node `conv1` (Conv, opset 9): ...".
    #[error("node `{node}` ({op}, opset {opset}): {message}")]
    Node {
        node: String,
        op: String,
        opset: i64,
        message: String,
    },
    #[error("input `{input}`: {message}")]
    Input { input: String, message: String },
    /// Inference met an `If` whose condition is constant; `compile` inlines the taken
    /// branch and starts again, so a caller of `compile` never sees this.
    #[error("node #{node_index} (If): its condition is constant; inline the {} branch", if *.then { "then" } else { "else" })]
    InlineBranch { node_index: usize, then: bool },
    #[error("invalid option: {0}")]
    Options(String),
    #[error("memory plan: {0}")]
    Plan(#[from] crate::plan::PlanError),
    #[error("code generation: {0}")]
    Codegen(String),
    /// A step or buffer that does not build once for every shape of the declared
    /// ranges (`--dim`).
    #[error("dynamic dims: node `{node}` ({op}): {message}")]
    Dynamic {
        node: String,
        op: String,
        message: String,
    },
}

/// One unsupported operator type, with where it occurs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedOp {
    pub op_type: String,
    pub domain: String,
    pub opset: i64,
    pub count: usize,
    /// The first few node names (or `#index` for unnamed nodes).
    pub nodes: Vec<String>,
}

fn unsupported_message(ops: &[UnsupportedOp]) -> String {
    let mut s = format!(
        "the model uses {} operator type{} Kiln does not support:",
        ops.len(),
        if ops.len() == 1 { "" } else { "s" }
    );
    for op in ops {
        let domain = if op.domain.is_empty() || op.domain == "ai.onnx" {
            String::new()
        } else {
            format!("{}::", op.domain)
        };
        s.push_str(&format!(
            "\n  {domain}{} (opset {}): {} node{}, first: {}",
            op.op_type,
            op.opset,
            op.count,
            if op.count == 1 { "" } else { "s" },
            op.nodes.join(", ")
        ));
    }
    s
}

fn no_cuda_message(ops: &[UnsupportedOp]) -> String {
    let mut s = format!(
        "the CUDA target has no kernel yet for {} operator{} of this model (the CPU target runs them):",
        ops.len(),
        if ops.len() == 1 { "" } else { "s" }
    );
    for op in ops {
        s.push_str(&format!(
            "\n  {}: {} step{}, first: {}",
            op.op_type,
            op.count,
            if op.count == 1 { "" } else { "s" },
            op.nodes.join(", ")
        ));
    }
    s
}
