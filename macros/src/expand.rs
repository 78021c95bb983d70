//! Everything `include_model!` does besides parsing: resolve the path, call
//! `kiln_compiler::compile`, store the weights, and wrap the generated items in a module
//! (or, on any failure, a `compile_error!` and a stub of that module).

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use kiln_compiler::{Compiled, Options};
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::Ident;
use syn::spanned::Spanned;

use crate::args::Args;

/// Read before `CARGO_MANIFEST_DIR`: trybuild builds each UI case in a crate of its own
/// under `target/tests/trybuild/`, where fixture paths would not resolve
/// (dtolnay/trybuild#202). Only `macros/tests/ui.rs` sets it.
const MANIFEST_DIR_OVERRIDE: &str = "KILN_MANIFEST_DIR_OVERRIDE";

/// Where the weights files go, when set; otherwise `<temp dir>/kiln-weights`.
const WEIGHTS_DIR: &str = "KILN_WEIGHTS_DIR";

pub fn expand(mut args: Args) -> TokenStream {
    if let Some(errors) = args.errors.take() {
        return stub(&args, errors);
    }
    match compile(&args) {
        Ok(tokens) => tokens,
        Err(errors) => stub(&args, errors),
    }
}

fn compile(args: &Args) -> syn::Result<TokenStream> {
    let lit = &args.path;
    let model = resolve(lit)?;
    // include_bytes! takes a string; a path that is not UTF-8 cannot be named.
    let model_str = model.to_str().ok_or_else(|| {
        syn::Error::new(
            lit.span(),
            format!("{} is not valid UTF-8", model.display()),
        )
    })?;
    let weights_dir = std::env::var_os(WEIGHTS_DIR)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("kiln-weights"));
    // Built from the defaults, so a new option in the library needs no change here.
    let mut opts = Options {
        name: args.name.as_ref().map(Ident::to_string),
        input_dims: args
            .inputs
            .iter()
            .map(|i| (i.name.clone(), i.dims.clone()))
            .collect(),
        symbol_ranges: args.dims.iter().map(|(r, _)| r.clone()).collect(),
        opt_dims: args.opt.iter().map(|(v, _)| v.clone()).collect(),
        weights_dir: Some(weights_dir.clone()),
        ..Options::default()
    };
    if let Some((bytes, _)) = args.alignment {
        opts.alignment = bytes;
    }
    if let Some(target) = args.target {
        opts.target = target;
    }
    if let Some(weights) = args.weights {
        opts.weights = weights;
    }
    if let Some(yes) = args.winograd {
        opts.winograd = yes;
    }
    if let Some(path) = &args.runtime {
        opts.runtime_path = path.to_token_stream().to_string();
    }
    let compiled = kiln_compiler::compile(&model, &opts).map_err(|e| kiln_error(&e, args))?;
    let name = module_ident(&compiled.name, args)?;
    store_weights(&weights_dir, &compiled, &model).map_err(|e| {
        let path = weights_dir.join(compiled.weights_file_name());
        syn::Error::new(
            lit.span(),
            format!(
                "writing the weights to {}: {e} (set {WEIGHTS_DIR} to a writable directory)",
                path.display()
            ),
        )
    })?;
    let code: TokenStream = compiled.code.parse().map_err(|e| {
        syn::Error::new(
            lit.span(),
            format!("code generation: the generated code does not lex: {e}"),
        )
    })?;
    let doc = format!(
        " The model `{}`, compiled by Kiln: {} steps, an arena of {} bytes, {} bytes of weights.",
        lit.value(),
        compiled.program.steps.len(),
        compiled.plan.arena_bytes,
        compiled.weights.len(),
    );
    // The unused `include_bytes!` of the model makes rustc list it among the crate's
    // dependencies, so cargo rebuilds the crate (and reruns this macro) when it changes;
    // `proc_macro::tracked_path` would say so directly but is unstable. The weights blob
    // is tracked the same way by the generated code's own `include_bytes!`.
    Ok(quote! {
        #[doc = #doc]
        pub mod #name {
            const _: &[u8] = ::core::include_bytes!(#model_str);
            #code
        }
    })
}

/// The model's path: relative to the calling crate's directory, never absolute, so the
/// crate builds wherever it is checked out (sqlx does the same).
fn resolve(lit: &syn::LitStr) -> syn::Result<PathBuf> {
    let rel = PathBuf::from(lit.value());
    if rel.is_absolute() {
        return Err(syn::Error::new(
            lit.span(),
            "the model path must be relative to the crate's directory (CARGO_MANIFEST_DIR), \
             so that the crate builds wherever it is checked out",
        ));
    }
    let dir = std::env::var_os(MANIFEST_DIR_OVERRIDE)
        .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR"))
        .ok_or_else(|| {
            syn::Error::new(
                lit.span(),
                "CARGO_MANIFEST_DIR is not set: include_model! resolves the model path against \
                 it, so it must be built by cargo",
            )
        })?;
    Ok(PathBuf::from(dir).join(rel))
}

/// The module's name as an identifier. A file stem can be a keyword (`type.onnx`) even
/// after `kiln_compiler` made it alphanumeric.
fn module_ident(name: &str, args: &Args) -> syn::Result<Ident> {
    syn::parse_str::<Ident>(name).map_err(|_| {
        let span = args.name.as_ref().map_or(args.path.span(), Ident::span);
        syn::Error::new(
            span,
            format!("`{name}` cannot name a module; choose a name with `name = ...`"),
        )
    })
}

/// A compile error as a `syn::Error` with the message the CLI prints (the error's
/// `Display`), pointing at the argument it is about, or else at the model's path.
fn kiln_error(e: &kiln_compiler::Error, args: &Args) -> syn::Error {
    use kiln_compiler::Error;
    let span = match e {
        Error::Input { input, .. } => args
            .inputs
            .iter()
            .find(|i| &i.name == input)
            .map(|i| i.span),
        Error::Options(m) if m.starts_with("alignment") => args.alignment.map(|(_, s)| s),
        Error::Options(m) if m.starts_with("--dim") => args
            .dims
            .iter()
            .find(|(r, _)| m.contains(&format!("{r}")))
            .map(|(_, s)| *s),
        Error::Options(m) if m.starts_with("--opt") => args
            .opt
            .iter()
            .find(|((n, _), _)| m.starts_with(&format!("--opt {n}=")))
            .or(args.opt.first())
            .map(|(_, s)| *s),
        Error::Dynamic { message, .. } if message.starts_with("--opt") => {
            args.opt.first().map(|(_, s)| *s)
        }
        Error::Options(m) if m.starts_with("name") => args.name.as_ref().map(Ident::span),
        Error::Options(m) if m.starts_with("runtime path") => {
            args.runtime.as_ref().map(Spanned::span)
        }
        _ => None,
    };
    let mut message = e.to_string();
    // The CLI's message says how to give a shape on the command line; say it in the
    // macro's syntax too.
    if let Error::Input { input, message: m } = e
        && m.contains("is symbolic")
    {
        let example = m
            .rsplit_once("(for example ")
            .and_then(|(_, dims)| kiln_compiler::parse_dims(dims.trim_end_matches(')')).ok())
            .map_or_else(
                || "...".to_owned(),
                |d| {
                    d.iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            );
        message.push_str(&format!(
            "\n\nhelp: in include_model!, give it as an argument: input({input:?} = [{example}])"
        ));
    }
    syn::Error::new(span.unwrap_or_else(|| args.path.span()), message)
}

/// Writes the weights blob where the generated `include_bytes!` expects it, unless an
/// identical file is already there. The name is a content hash, so a file once complete
/// never changes; it is written under a temporary name and renamed, so a parallel rustc
/// (a crate's lib and test targets expand the macro at once) never reads half a file.
///
/// Its modification time is set to the model's: the blob is derived from the model, and
/// cargo calls a dependency newer than the start of the build that read it stale, so a
/// blob stamped "now" would cost one needless rebuild.
fn store_weights(dir: &Path, compiled: &Compiled, model: &Path) -> io::Result<()> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let path = dir.join(compiled.weights_file_name());
    let same = |p: &Path| {
        fs::metadata(p).is_ok_and(|m| m.len() == compiled.weights.len() as u64)
            && fs::read(p).is_ok_and(|old| old == compiled.weights)
    };
    if same(&path) {
        return Ok(());
    }
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}-{}.tmp",
        compiled.weights_file_name(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&compiled.weights)?;
        if let Ok(t) = fs::metadata(model).and_then(|m| m.modified()) {
            f.set_modified(t)?;
        }
        drop(f);
        fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// On failure: the errors, and a stub of the module so that the crate's uses of it add
/// no errors of their own. The stub's items are built on one type whose array length is
/// the first `compile_error!`: rustc reports that error once, and the type then
/// "references an error", on which rustc reports nothing further (unknown methods,
/// fields and struct-literal fields). `compile_error!` as a type itself would not do:
/// it stands for `()`.
fn stub(args: &Args, errors: syn::Error) -> TokenStream {
    let mut errors = errors.into_iter();
    let first = errors
        .next()
        .map(|e| e.to_compile_error())
        .unwrap_or_default();
    let rest: Vec<TokenStream> = errors.map(|e| e.to_compile_error()).collect();
    let name = args.name.clone().or_else(|| {
        let default = kiln_compiler::default_name(Path::new(&args.path.value()));
        syn::parse_str::<Ident>(&default)
            .ok()
            .map(|i| Ident::new(&i.to_string(), args.path.span()))
    });
    let Some(name) = name else {
        return quote!(#first #(#rest)*);
    };
    let span = Span::call_site();
    let failed = Ident::new("KilnCompileFailed", span);
    let stub = Ident::new("KilnStub", span);
    quote! {
        pub mod #name {
            #(#rest)*
            type #failed = [(); { #first; 0 }];
            /// `Inputs { .. }` is a struct literal: it needs a struct, one whose type
            /// references the error.
            pub struct #stub<T> {
                _failed: T,
            }
            pub type Model = #failed;
            pub type Context = #failed;
            pub type Inputs<'a> = #stub<#failed>;
            pub type Outputs<'a> = #failed;
            pub type OutputsMut<'a> = #stub<#failed>;
            pub const ARENA_BYTES: usize = 0;
            pub const WEIGHTS_BYTES: usize = 0;
            pub const WEIGHTS_FILE: &str = "";
            pub const N_INPUTS: usize = 0;
            pub const N_OUTPUTS: usize = 0;
            pub const INPUTS: [#failed; 0] = [];
            pub const OUTPUTS: [#failed; 0] = [];
            pub const OUTPUT_REGIONS: [#failed; 0] = [];
            pub const KERNELS: &[&str] = &[];
        }
    }
}
