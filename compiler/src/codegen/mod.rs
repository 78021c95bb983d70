//! Code generation. The plan and the program are target-independent; each target has
//! its own emitter module producing one Rust source file.

pub mod cpu;
pub mod cuda;
pub mod dynamic;
pub mod fit;
mod names;
pub mod params_expr;
mod tokens;

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use crate::error::Error;
use crate::lower::{Io, Program, Step};
use crate::plan::MemoryPlan;
use names::Namer;

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

// Helpers both emitters use: the items every generated module shares (sizes, the step
// list, input/output descriptions, arena offsets), step comments, and formatting.

/// Step comments travel through the token stream as doc attributes with this marker
/// (token streams carry no comments); [`format`] turns them into plain comments.
const STEP_MARKER: &str = "/// @step ";
const STEP_MARKER_DOC: &str = " @step ";

/// An unsuffixed `usize` literal.
fn us(v: usize) -> Literal {
    Literal::usize_unsuffixed(v)
}

/// The runtime crate's path as tokens.
fn runtime_tokens(opts: &CodegenOptions) -> Result<TokenStream, Error> {
    opts.runtime_path
        .parse()
        .map_err(|e| Error::Options(format!("runtime path `{}`: {e}", opts.runtime_path)))
}

/// Parses the module, formats it with prettyplease, turns step markers into comments
/// and puts `header` on top.
fn format(tokens: TokenStream, header: &str) -> Result<String, Error> {
    let file: syn::File = syn::parse2(tokens)
        .map_err(|e| Error::Codegen(format!("generated code does not parse: {e}")))?;
    let text = prettyplease::unparse(&file).replace(STEP_MARKER, "// ");
    Ok(format!("{header}\n{text}"))
}

/// The attribute that becomes the comment `// NODE (OP)` above a step, or
/// `// NODE (OP): NOTE` when the step is done differently from its kernel call.
fn step_comment(s: &Step, note: Option<&str>) -> TokenStream {
    let node = one_line(&s.node);
    let comment = match note {
        None => format!("{STEP_MARKER_DOC}{node} ({})", s.op_type),
        Some(note) => format!("{STEP_MARKER_DOC}{node} ({}): {note}", s.op_type),
    };
    quote!(#[doc = #comment])
}

/// An ONNX name for a comment: control characters (a newline would end a `//`
/// comment and leave the rest as a doc comment) escaped as in a string literal.
fn one_line(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The constant name in `offsets::` of each buffer.
fn offset_names(program: &Program) -> Vec<syn::Ident> {
    let mut namer = Namer::upper();
    program
        .buffers
        .iter()
        .map(|b| format_ident!("{}", namer.name(&b.name)))
        .collect()
}

/// Field names of `Inputs` and of the outputs structs.
struct IoFields {
    inputs: Vec<syn::Ident>,
    outputs: Vec<syn::Ident>,
}

impl IoFields {
    fn new(program: &Program) -> Self {
        let fields = |ios: Vec<&Io>| {
            let mut namer = Namer::snake();
            ios.into_iter()
                .map(|io| format_ident!("{}", namer.name(&io.name)))
                .collect()
        };
        IoFields {
            inputs: fields(program.inputs.iter().collect()),
            outputs: fields(program.outputs.iter().map(|(io, _)| io).collect()),
        }
    }
}

/// The element type of an `Inputs` or outputs field (`bool` for booleans; a path
/// through the runtime crate for `half::f16`, `typed::Int4`, ...).
fn api_type(rt: &TokenStream, io: &Io) -> TokenStream {
    let ty: TokenStream = io.dtype.api_type().parse().unwrap_or_default();
    if io.dtype.api_type().contains("::") {
        quote!(#rt::#ty)
    } else {
        ty
    }
}

/// The doc comment of an `Inputs` or outputs field.
fn io_doc(io: &Io) -> String {
    format!(" `{}`: {} {:?}", one_line(&io.name), io.dtype, io.shape)
}

/// The items every generated module has, whatever its target: `ARENA_BYTES`, the
/// [`tables`] and `mod offsets`.
fn common_items(
    program: &Program,
    plan: &MemoryPlan,
    opts: &CodegenOptions,
    rt: &TokenStream,
    offset_names: &[syn::Ident],
) -> TokenStream {
    let arena_bytes = us(plan.arena_bytes);
    let tables = tables(program, opts, rt);
    let offsets = offsets_module(program, plan, offset_names);
    quote! {
        /// Bytes of working memory one [`Context`] holds (kernel scratch included).
        pub const ARENA_BYTES: usize = #arena_bytes;
        #tables
        #offsets
    }
}

/// `mod offsets`: a constant per planned buffer, its byte offset in the arena.
fn offsets_module(
    program: &Program,
    plan: &MemoryPlan,
    offset_names: &[syn::Ident],
) -> TokenStream {
    let offsets = program.buffers.iter().enumerate().map(|(i, b)| {
        let name = &offset_names[i];
        let off = us(plan.offsets[i]);
        let doc = format!(
            " `{}`: {} bytes{}",
            one_line(&b.name),
            b.len * 4,
            if b.scratch { ", kernel scratch" } else { "" }
        );
        quote!(#[doc = #doc] pub const #name: usize = #off;)
    });
    quote! {
        /// Byte offset of every planned tensor in the arena.
        pub mod offsets {
            #(#offsets)*
        }
    }
}

/// The constants describing the model that every module has, whatever its target and
/// its dims: `WEIGHTS_BYTES`, `WEIGHTS_FILE`, `N_INPUTS`, `N_STEPS`, `STEPS`,
/// `N_OUTPUTS`, `INPUTS` and `OUTPUTS`.
fn tables(program: &Program, opts: &CodegenOptions, rt: &TokenStream) -> TokenStream {
    let p = program;
    let weights_bytes = us(p.weights.len());
    let (n_in, n_out) = (us(p.inputs.len()), us(p.outputs.len()));
    let infos = |ios: Vec<&Io>| {
        ios.into_iter()
            .map(|io| {
                let name = &io.name;
                let dtype = io.dtype.name();
                let shape = io.shape.iter().map(|&d| us(d));
                quote!(#rt::TensorInfo { name: #name, dtype: #dtype, shape: &[#(#shape),*] })
            })
            .collect::<Vec<_>>()
    };
    let input_infos = infos(p.inputs.iter().collect());
    let output_infos = infos(p.outputs.iter().map(|(io, _)| io).collect());
    let n_steps = us(p.steps.len());
    // Clippy's `large_const_arrays` (16 KiB) fires on very long tables: allowed there,
    // since `const` is what lets callers use them in their own constant tables.
    let large = |n: usize| {
        if n > 256 {
            quote!(#[allow(clippy::large_const_arrays)])
        } else {
            TokenStream::new()
        }
    };
    let (steps_allow, inputs_allow, outputs_allow) = (
        large(p.steps.len()),
        large(p.inputs.len()),
        large(p.outputs.len()),
    );
    let step_nodes = p.steps.iter().map(|s| s.node.as_str());
    let step_ops = p.steps.iter().map(|s| s.op_type);
    let weights_file = &opts.weights_file;
    quote! {
        /// Bytes in the weights file.
        pub const WEIGHTS_BYTES: usize = #weights_bytes;
        /// The weights file: its name beside this module's source, or the absolute
        /// path `include_model!` wrote it to.
        pub const WEIGHTS_FILE: &str = #weights_file;
        /// Number of model inputs.
        pub const N_INPUTS: usize = #n_in;
        /// Number of steps `run` takes: kernel calls, in order, as [`STEPS`] lists them.
        pub const N_STEPS: usize = #n_steps;
        /// Each step's ONNX node and operator, in execution order.
        #steps_allow
        pub const STEPS: [(&str, &str); N_STEPS] = [#((#step_nodes, #step_ops)),*];
        /// Number of model outputs.
        pub const N_OUTPUTS: usize = #n_out;
        /// The inputs, in the order the slice and byte interfaces take them.
        #inputs_allow
        pub const INPUTS: [#rt::TensorInfo; N_INPUTS] = [#(#input_infos),*];
        /// The outputs, in the order the slice and byte interfaces return them.
        #outputs_allow
        pub const OUTPUTS: [#rt::TensorInfo; N_OUTPUTS] = [#(#output_infos),*];
    }
}
