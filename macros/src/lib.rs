//! `include_model!`: compile an ONNX model into the calling crate at build time.
//!
//! A thin shell over [`kiln_compiler::compile`], the entry point the `kiln` CLI and the
//! build.rs `Builder` share, so the three can never disagree.
//!
//! ```ignore
//! kiln_macros::include_model!("models/tiny_cnn.onnx", name = tiny, input("x" = [1, 3, 16, 16]));
//!
//! let model = tiny::Model::new()?;        // weights embedded in the binary
//! let mut ctx = tiny::Context::new();     // the arena, allocated once
//! let out = model.run(&mut ctx, tiny::Inputs { x: &image })?;
//! ```
//!
//! # Syntax
//!
//! ```text
//! include_model!("PATH.onnx" [, ARGUMENT]* [,])
//!
//! ARGUMENT:
//!     name = IDENT                     module name (default: the file stem, made an identifier)
//!     input("NAME" = [D0, D1, ...])    full shape of an input; required for symbolic dims;
//!                                      repeat for several inputs. A dim may be a symbol
//!                                      (`W`, or `"DynamicDimension.0"`) declared with `dim`
//!     dim = "W=32..2048[:STEP]"        a symbol's range, as the CLI's --dim: the module
//!                                      runs every shape in it (`Dims`, `arena_bytes`,
//!                                      `run(&mut ctx, dims, inputs)`); repeat per symbol
//!     opt = "W=320"                    as the CLI's --opt: also a constant-shape build at
//!                                      these dims, which `run` takes at exactly them;
//!                                      repeat for each declared symbol
//!     alignment = BYTES                arena offset alignment (default 256; a power of two, 4..=256)
//!     weights = embed | runtime        embed (default): in the binary, `Model::new()`;
//!                                      runtime: `Model::load(path)` reads a weights file
//!     target = cpu | cuda              code generation target (default cpu); cuda: kernel
//!                                      launches through kiln_runtime::cuda (see below)
//!     winograd = true | false          3×3 stride-1 convolutions with >= 64 input channels
//!                                      as Winograd F(2×2) or F(4×4) on the CPU (default true)
//!     runtime = PATH                   the kiln-runtime crate's path in the generated code
//!                                      (default `::kiln_runtime`)
//! ```
//!
//! `PATH` is relative to the calling crate's directory (`CARGO_MANIFEST_DIR`); absolute
//! paths are rejected so the crate builds wherever it is checked out.
//!
//! # What it expands to
//!
//! `pub mod NAME { ... }` holding the same items as a module written by the CLI or the
//! build.rs `Builder` (`Model`, `Context`, `Inputs`, `Outputs`, `ARENA_BYTES`, ...). The
//! generated code calls the runtime crate, so **the calling crate must depend on
//! `kiln-runtime`** (a proc-macro crate cannot re-export it), or name a re-export of it
//! with `runtime = ...`.
//!
//! With `target = cuda` the module launches CUDA kernels instead: `Model::new(ordinal)`
//! (or `load(ordinal, path)`) uploads the weights to that GPU, `Context::new(&model)?`
//! holds the device arena, and `model.run(&mut ctx, Inputs { .. }, OutputsMut { .. })`
//! copies host slices in and out. It needs `kiln-runtime`'s `cuda` feature at run time;
//! without it (or without a GPU) `Model::new` returns an error.
//!
//! # Weights and rebuilds
//!
//! Weights never become tokens (a 100 MB model would be millions of them): the blob is
//! written to `$KILN_WEIGHTS_DIR`, or else `<temp dir>/kiln-weights/`, as
//! `NAME-HASH.weights.bin`, named by a hash of its content, and the generated code
//! embeds it with `include_bytes!` by absolute path. The expansion also
//! `include_bytes!`s the model itself into an unused constant, so cargo rebuilds the
//! crate when the model changes; if the blob is deleted (a cleaned temp dir), cargo sees
//! a missing dependency, rebuilds, and the macro writes it again. With
//! `weights = runtime`, `NAME::WEIGHTS_FILE` is the blob's absolute path: copy it to
//! wherever the program will load it from.
//!
//! Blobs of models that changed are not deleted; they are as large as the models.
//!
//! # Build cost
//!
//! The macro runs the whole compiler inside rustc, and rustc holds every embedded byte
//! several times over. Measured for ResNet-50 (102 MB of weights; `cargo build --release`
//! of the crate alone, 2 cores): 12-19 s and 2.3-2.4 GB peak rustc memory; 7-9 s with an
//! optimised macro (`[profile.release.build-override] opt-level = 3`, likewise for
//! `dev`). Most of the memory is rustc's `include_bytes!` itself (1.5 GB for a bare
//! `static W: &[u8] = include_bytes!(..)` of 100 MB); with `weights = runtime` the same
//! crate builds in 2.4 s (optimised macro) in 0.57 GB.
//!
//! # Errors
//!
//! Every failure is a compile error at the path literal or at the argument it is about,
//! with the message the CLI prints: a missing file, a file that is not an ONNX model,
//! unsupported operators, a symbolic dim with no `input(...)`, a bad argument. The module
//! is still declared, as a stub, so the rest of the crate adds no errors of its own.

// Unsafe code lives only in kiln-runtime (each block with a `SAFETY:` comment).
#![forbid(unsafe_code)]

mod args;
mod expand;

/// Compiles an ONNX model into a module of the calling crate; see the crate docs for the
/// syntax.
#[proc_macro]
pub fn include_model(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let args = syn::parse_macro_input!(input as args::Args);
    expand::expand(args).into()
}
