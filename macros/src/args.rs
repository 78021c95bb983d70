//! Parsing `include_model!`'s arguments.
//!
//! The model path comes first; every other argument is parsed on its own, so several
//! bad arguments are all reported at once and a bad argument does not hide the module
//! name the stub needs (see `expand::stub`).

use kiln_compiler::dim::{Dim, SymbolRange};
use kiln_compiler::{Target, WeightsMode};
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Ident, LitInt, LitStr, Token, bracketed};

/// The arguments, as far as they parsed. `errors` holds every argument that did not.
pub struct Args {
    pub path: LitStr,
    pub name: Option<Ident>,
    pub inputs: Vec<InputArg>,
    /// Declared ranges (`dim = "W=32..2048"`), each with its literal's span.
    pub dims: Vec<(SymbolRange, Span)>,
    /// The constant-shape point (`opt = "W=320"`), each value with its literal's span.
    pub opt: Vec<((String, u64), Span)>,
    pub alignment: Option<(usize, Span)>,
    pub weights: Option<WeightsMode>,
    pub target: Option<Target>,
    /// `winograd = false`: every convolution a direct or im2col sum.
    pub winograd: Option<bool>,
    /// The runtime crate's path, as written (`::kiln_runtime` by default).
    pub runtime: Option<syn::Path>,
    pub errors: Option<syn::Error>,
}

/// `input("data" = [1, 3, 224, 224])`, or with symbols: `input("x" = [1, 3, 48, W])`.
pub struct InputArg {
    pub name: String,
    pub dims: Vec<Dim>,
    /// The whole argument, for errors Kiln reports about this input.
    pub span: Span,
}

const ARGUMENTS: &str =
    "`name`, `input`, `dim`, `opt`, `alignment`, `weights`, `target`, `winograd` or `runtime`";

const USAGE: &str = "expected the model's path as a string literal, relative to the crate's \
                     directory: include_model!(\"models/model.onnx\")";

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.is_empty() {
            return Err(syn::Error::new(Span::call_site(), USAGE));
        }
        let path: LitStr = input
            .parse()
            .map_err(|e| syn::Error::new(e.span(), USAGE))?;
        let mut args = Args {
            path,
            name: None,
            inputs: Vec::new(),
            dims: Vec::new(),
            opt: Vec::new(),
            alignment: None,
            weights: None,
            target: None,
            winograd: None,
            runtime: None,
            errors: None,
        };
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break; // a trailing comma
            }
            let raw: RawArg = input.parse()?;
            if let Err(e) = args.apply(raw) {
                match &mut args.errors {
                    Some(errors) => errors.combine(e),
                    None => args.errors = Some(e),
                }
            }
        }
        Ok(args)
    }
}

/// `key = value tokens` or `key(group)`, up to the next top-level comma.
struct RawArg {
    key: Ident,
    /// `Some` for `key(...)`.
    parens: Option<TokenStream>,
    eq: bool,
    value: TokenStream,
}

impl Parse for RawArg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input
            .call(syn::ext::IdentExt::parse_any)
            .map_err(|e| syn::Error::new(e.span(), format!("expected an argument: {ARGUMENTS}")))?;
        let mut raw = RawArg {
            key,
            parens: None,
            eq: false,
            value: TokenStream::new(),
        };
        if input.peek(syn::token::Paren) {
            let content;
            syn::parenthesized!(content in input);
            raw.parens = Some(content.parse()?);
        } else if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            raw.eq = true;
        }
        while !input.is_empty() && !input.peek(Token![,]) {
            raw.value.extend([input.parse::<TokenTree>()?]);
        }
        Ok(raw)
    }
}

impl RawArg {
    /// The whole argument's span, for errors about it.
    fn span(&self) -> Span {
        let mut tokens = self.key.to_token_stream();
        if let Some(p) = &self.parens {
            tokens.extend(p.clone());
        }
        tokens.extend(self.value.clone());
        tokens.span()
    }

    /// The value of `key = value`, parsed as `T`; `what` says what was expected.
    fn value<T: Parse>(&self, what: &str) -> syn::Result<T> {
        let key = &self.key;
        if !self.eq || self.parens.is_some() || self.value.is_empty() {
            return Err(syn::Error::new(
                self.span(),
                format!("`{key}` needs a value: {what}"),
            ));
        }
        syn::parse2(self.value.clone())
            .map_err(|_| syn::Error::new(self.value.span(), format!("`{key}` expects {what}")))
    }
}

impl Args {
    fn apply(&mut self, raw: RawArg) -> syn::Result<()> {
        let key = raw.key.to_string();
        let twice = || syn::Error::new(raw.key.span(), format!("`{key}` is given twice"));
        match key.as_str() {
            "name" => {
                if self.name.is_some() {
                    return Err(twice());
                }
                let ident: Ident =
                    raw.value("the generated module's name, an identifier: name = resnet")?;
                self.name = Some(ident);
            }
            "input" => {
                let input = parse_input(&raw)?;
                if self.inputs.iter().any(|i| i.name == input.name) {
                    return Err(syn::Error::new(
                        input.span,
                        format!("input `{}` is given twice", input.name),
                    ));
                }
                self.inputs.push(input);
            }
            "dim" => {
                const WHAT: &str = "a symbol's range as the CLI's --dim takes it: \
                                    dim = \"W=32..2048\" (or \"W=32..2048:32\" for a step)";
                let lit: LitStr = raw.value(WHAT)?;
                let range = kiln_compiler::parse_dim_spec(&lit.value())
                    .map_err(|e| syn::Error::new(lit.span(), e.to_string()))?;
                if self.dims.iter().any(|(r, _)| r.name == range.name) {
                    return Err(syn::Error::new(
                        lit.span(),
                        format!("`{}` is declared twice", range.name),
                    ));
                }
                self.dims.push((range, lit.span()));
            }
            "opt" => {
                const WHAT: &str = "a declared symbol's value for the constant-shape path, as \
                                    the CLI's --opt takes it: opt = \"W=320\"";
                let lit: LitStr = raw.value(WHAT)?;
                let value = kiln_compiler::parse_opt_spec(&lit.value())
                    .map_err(|e| syn::Error::new(lit.span(), e.to_string()))?;
                self.opt.push((value, lit.span()));
            }
            "alignment" => {
                if self.alignment.is_some() {
                    return Err(twice());
                }
                const WHAT: &str = "the arena alignment in bytes: alignment = 64";
                let lit: LitInt = raw.value(WHAT)?;
                let bytes = lit.base10_parse::<usize>().map_err(|_| {
                    syn::Error::new(lit.span(), format!("`alignment` expects {WHAT}"))
                })?;
                self.alignment = Some((bytes, lit.span()));
            }
            "weights" => {
                if self.weights.is_some() {
                    return Err(twice());
                }
                const WHAT: &str = "`embed` (the default: in the binary, Model::new()) \
                                    or `runtime` (read from a file, Model::load(path))";
                let mode: Ident = raw.value(WHAT)?;
                self.weights = Some(match mode.to_string().as_str() {
                    "embed" => WeightsMode::Embed,
                    "runtime" => WeightsMode::File,
                    _ => {
                        return Err(syn::Error::new(
                            mode.span(),
                            format!("`weights` expects {WHAT}"),
                        ));
                    }
                });
            }
            "target" => {
                if self.target.is_some() {
                    return Err(twice());
                }
                const WHAT: &str = "a code generation target: `cpu` (the default) or `cuda`";
                let target: Ident = raw.value(WHAT)?;
                self.target = Some(match target.to_string().as_str() {
                    "cpu" => Target::Cpu,
                    "cuda" => Target::Cuda,
                    t => {
                        return Err(syn::Error::new(
                            target.span(),
                            format!("unknown target `{t}`; `target` expects {WHAT}"),
                        ));
                    }
                });
            }
            "winograd" => {
                if self.winograd.is_some() {
                    return Err(twice());
                }
                let yes: syn::LitBool = raw.value(
                    "`true` (the default: 3×3 stride-1 convolutions as Winograd F(2×2) or F(4×4)) \
                     or `false`",
                )?;
                self.winograd = Some(yes.value);
            }
            "runtime" => {
                if self.runtime.is_some() {
                    return Err(twice());
                }
                let path: syn::Path = raw.value(
                    "the path of the kiln-runtime crate (or a re-export of it): \
                     runtime = ::kiln_runtime",
                )?;
                self.runtime = Some(path);
            }
            _ => {
                return Err(syn::Error::new(
                    raw.key.span(),
                    format!("unknown argument `{key}`; expected {ARGUMENTS}"),
                ));
            }
        }
        Ok(())
    }
}

const INPUT_USAGE: &str = "`input` expects an input's name and full shape: \
                           input(\"data\" = [1, 3, 224, 224]); a dim may be a symbol \
                           declared with `dim`: input(\"x\" = [1, 3, 48, W])";

/// One dim of `input(...)`: a size, or a symbol (an identifier, or a string for a
/// name that is not one, like `"DynamicDimension.0"`).
fn parse_dim(input: ParseStream) -> syn::Result<Dim> {
    if input.peek(LitInt) {
        let lit: LitInt = input.parse()?;
        return Ok(Dim::from(lit.base10_parse::<usize>()?));
    }
    if input.peek(LitStr) {
        let lit: LitStr = input.parse()?;
        return Ok(Dim::sym(&lit.value()));
    }
    let ident: Ident = input.parse()?;
    Ok(Dim::sym(&ident.to_string()))
}

/// `input("data" = [1, 3, 224, 224])`.
fn parse_input(raw: &RawArg) -> syn::Result<InputArg> {
    let span = raw.span();
    let (Some(content), true) = (&raw.parens, raw.value.is_empty()) else {
        return Err(syn::Error::new(span, INPUT_USAGE));
    };
    // Errors point at the token at fault (a name that is not a string, a negative dim),
    // or at the whole argument when something is missing.
    let (name, dims) = syn::parse::Parser::parse2(
        |input: ParseStream| {
            let missing = || syn::Error::new(span, INPUT_USAGE);
            let at = |e: syn::Error| syn::Error::new(e.span(), INPUT_USAGE);
            if input.is_empty() {
                return Err(missing());
            }
            let name: LitStr = input.parse().map_err(at)?;
            if input.is_empty() {
                return Err(missing());
            }
            input.parse::<Token![=]>().map_err(at)?;
            if input.is_empty() {
                return Err(missing());
            }
            if !input.peek(syn::token::Bracket) {
                return Err(input.error(INPUT_USAGE));
            }
            let dims;
            bracketed!(dims in input);
            let dims: Vec<Dim> = dims
                .parse_terminated(parse_dim, Token![,])
                .map_err(at)?
                .into_iter()
                .collect();
            if !input.is_empty() {
                return Err(input.error(INPUT_USAGE));
            }
            Ok((name.value(), dims))
        },
        content.clone(),
    )?;
    Ok(InputArg { name, dims, span })
}
