//! Dynamic shapes, code generation: which literals of the generated code change with
//! the symbols, and the expression each one is.
//!
//! The lowering and the emitters work on fixed shapes. A dynamic build lowers the
//! model at several points of the declared ranges and emits each step's tokens at
//! every one, with arena regions written as run-time places (`l.off[3]`), so that
//! only kernel parameters, lengths and slice offsets differ. [`merge`] walks those
//! token streams together: every token but an integer literal must be equal at every
//! point, and each integer literal that is not is replaced by the expression
//! [`Fitter::fit`] finds for its values: an integer multiple of a candidate (a product
//! of consecutive dims of some value, a buffer's size, a slice's offset) equal to it
//! at every point. The caller then checks the result at points it was not fitted on.

use std::collections::HashMap;

use proc_macro2::{Delimiter, Group, TokenStream, TokenTree};

use crate::dim::Dim;

/// Integer multiples of candidate dims, looked up by their values at the points.
pub struct Fitter {
    /// Candidates by their values divided by the values' gcd (sign of the first
    /// non-zero made positive), each with those values, simplest spelling first.
    /// Several may share a direction (`W` and `W/32` where `W` is on steps of 32);
    /// a value fits the first it is an integer multiple of.
    by_direction: HashMap<Vec<i64>, Vec<(Dim, Vec<i64>)>>,
    points: usize,
}

impl Fitter {
    /// A fitter over `candidates`, each evaluated by `eval` at the points (`eval`
    /// returns one value per point, or None where a candidate cannot be evaluated).
    pub fn new(
        candidates: impl IntoIterator<Item = Dim>,
        eval: impl Fn(&Dim) -> Option<Vec<i64>>,
    ) -> Self {
        let mut by_direction: HashMap<Vec<i64>, Vec<(Dim, Vec<i64>)>> = HashMap::new();
        let mut points = 0;
        for c in candidates {
            if c.is_known() {
                continue;
            }
            let Some(values) = eval(&c) else { continue };
            points = values.len();
            let Some(dir) = direction(&values) else {
                continue;
            };
            by_direction.entry(dir).or_default().push((c, values));
        }
        // The simplest spelling first (a symbol before `32*(W/32)`), then by text, so
        // the choice does not depend on the candidates' order.
        for same in by_direction.values_mut() {
            same.sort_by_cached_key(|(c, _)| {
                let s = c.to_string();
                (s.len(), s)
            });
        }
        Fitter {
            by_direction,
            points,
        }
    }

    /// The dim whose values at the points are `values`: `k * candidate`.
    pub fn fit(&self, values: &[i64]) -> Option<Dim> {
        if values.len() != self.points {
            return None;
        }
        let dir = direction(values)?;
        self.by_direction.get(&dir)?.iter().find_map(|(c, cv)| {
            let j = cv.iter().position(|&v| v != 0)?;
            let k = values[j] / cv[j];
            let all = values
                .iter()
                .zip(cv)
                .all(|(&v, &c)| c.checked_mul(k) == Some(v));
            all.then(|| c.clone() * Dim::from(k))
        })
    }
}

/// `values` divided by their gcd, the first non-zero positive; None when all are zero
/// or all equal (a constant needs no fit).
fn direction(values: &[i64]) -> Option<Vec<i64>> {
    if values.windows(2).all(|w| w[0] == w[1]) {
        return None;
    }
    let g = values.iter().fold(0u64, |g, &v| gcd(g, v.unsigned_abs()));
    let g = i64::try_from(g).ok().filter(|&g| g > 0)?;
    let first = values.iter().copied().find(|&v| v != 0)?;
    let sign = first.signum();
    Some(values.iter().map(|&v| v / g * sign).collect())
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Why token streams could not be merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// The streams differ in something other than an integer literal.
    Structure { first: String, other: String },
    /// An integer literal varies and no candidate fits its values.
    Unfitted { values: Vec<i64>, context: String },
}

/// Merges the streams emitted at each point (`streams[0]` is kept): every varying
/// integer literal becomes `EXPR as _`, EXPR from `to_rust` of its fitted dim (which
/// must be a place, a call or parenthesised, so that `as` applies to all of it).
pub fn merge(
    streams: &[TokenStream],
    fitter: &Fitter,
    to_rust: &dyn Fn(&Dim) -> String,
) -> Result<TokenStream, Mismatch> {
    let trees: Vec<Vec<TokenTree>> = streams
        .iter()
        .map(|s| s.clone().into_iter().collect())
        .collect();
    merge_trees(&trees, fitter, to_rust)
}

fn merge_trees(
    trees: &[Vec<TokenTree>],
    fitter: &Fitter,
    to_rust: &dyn Fn(&Dim) -> String,
) -> Result<TokenStream, Mismatch> {
    let first = &trees[0];
    let structure = |k: usize, i: usize| Mismatch::Structure {
        first: context(first, i),
        other: context(&trees[k], i),
    };
    if let Some(k) = trees.iter().position(|t| t.len() != first.len()) {
        let i = first
            .iter()
            .zip(&trees[k])
            .take_while(|(a, b)| a.to_string() == b.to_string())
            .count();
        return Err(structure(k, i));
    }
    let mut out = TokenStream::new();
    for (i, tree) in first.iter().enumerate() {
        match tree {
            TokenTree::Group(g) => {
                let mut inner = Vec::with_capacity(trees.len());
                for (k, t) in trees.iter().enumerate() {
                    match &t[i] {
                        TokenTree::Group(h) if h.delimiter() == g.delimiter() => {
                            inner.push(h.stream().into_iter().collect::<Vec<_>>());
                        }
                        _ => return Err(structure(k, i)),
                    }
                }
                let merged = merge_trees(&inner, fitter, to_rust)?;
                let mut group = Group::new(g.delimiter(), merged);
                group.set_span(g.span());
                out.extend([TokenTree::Group(group)]);
            }
            TokenTree::Literal(_) => {
                let texts: Vec<String> = trees.iter().map(|t| t[i].to_string()).collect();
                if texts.iter().all(|t| *t == texts[0]) {
                    out.extend([tree.clone()]);
                    continue;
                }
                let values: Option<Vec<i64>> = texts.iter().map(|t| int_value(t)).collect();
                let Some(values) = values else {
                    let k = texts.iter().position(|t| *t != texts[0]).unwrap_or(0);
                    return Err(structure(k, i));
                };
                let dim = fitter.fit(&values).ok_or_else(|| Mismatch::Unfitted {
                    values: values.clone(),
                    context: context(first, i),
                })?;
                // The literal's own type where it has a suffix (an operand of `+`
                // needs one); else the type its place expects.
                let ty = texts[0].trim_start_matches(|c: char| c.is_ascii_digit() || c == '_');
                let ty = if ty.is_empty() { "_" } else { ty };
                let expr: TokenStream =
                    format!("{} as {ty}", to_rust(&dim)).parse().map_err(|_| {
                        Mismatch::Unfitted {
                            values,
                            context: format!(
                                "{} (the fitted `{dim}` does not parse)",
                                context(first, i)
                            ),
                        }
                    })?;
                out.extend(expr);
            }
            _ => {
                if let Some(k) = trees
                    .iter()
                    .position(|t| t[i].to_string() != tree.to_string())
                {
                    return Err(structure(k, i));
                }
                out.extend([tree.clone()]);
            }
        }
    }
    Ok(out)
}

/// An integer literal's value (`48`, `48usize`, `3i64`); None for anything else.
fn int_value(text: &str) -> Option<i64> {
    let end = text
        .find(|c: char| !c.is_ascii_digit() && c != '_')
        .unwrap_or(text.len());
    let (num, suffix) = text.split_at(end);
    let integer_suffix = matches!(
        suffix,
        "" | "usize" | "isize" | "u8" | "u16" | "u32" | "u64" | "i8" | "i16" | "i32" | "i64"
    );
    if num.is_empty() || !integer_suffix {
        return None;
    }
    num.replace('_', "").parse().ok()
}

/// A few tokens around position `i`, for errors.
fn context(trees: &[TokenTree], i: usize) -> String {
    let lo = i.saturating_sub(6);
    let hi = (i + 3).min(trees.len());
    let text: Vec<String> = trees[lo..hi]
        .iter()
        .map(|t| match t {
            TokenTree::Group(g) if g.delimiter() != Delimiter::None => {
                let s = g.to_string();
                if s.len() > 40 {
                    format!("{}…", &s[..s.floor_char_boundary(40)])
                } else {
                    s
                }
            }
            t => t.to_string(),
        })
        .collect();
    text.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w() -> Dim {
        Dim::sym("W")
    }

    fn at(points: &[i64]) -> impl Fn(&Dim) -> Option<Vec<i64>> + '_ {
        move |d: &Dim| points.iter().map(|&p| d.eval(&|_| Some(p))).collect()
    }

    #[test]
    fn fits_multiples_of_candidates() {
        let points = [2048, 32, 77];
        let f = Fitter::new(
            [w(), w() * Dim::from(48usize), (w() + 1).div_floor(2)],
            at(&points),
        );
        assert_eq!(
            f.fit(&[2048 * 3, 32 * 3, 77 * 3]),
            Some(w() * Dim::from(3usize))
        );
        assert_eq!(
            f.fit(&[1024 * 6, 16 * 6, 39 * 6]),
            Some((w() + 1).div_floor(2) * Dim::from(6usize))
        );
        assert_eq!(f.fit(&[2049, 33, 78]), None);
    }

    #[test]
    fn a_value_fits_the_candidate_it_is_a_multiple_of() {
        // On steps of 32, `W` and `W/32` point the same way; W/2 is a multiple of the
        // second only (H/2 of a detector's first stride-2 convolution).
        let points = [960, 32, 544];
        let q = Dim::sym("W/32");
        let f = Fitter::new([w(), q.clone()], |d: &Dim| {
            points
                .iter()
                .map(|&p| d.eval(&|s| Some(if s == "W" { p } else { p / 32 })))
                .collect()
        });
        assert_eq!(f.fit(&[480, 16, 272]), Some(q * Dim::from(16usize)));
        assert_eq!(f.fit(&[1920, 64, 1088]), Some(w() * Dim::from(2usize)));
    }

    #[test]
    fn merges_streams_and_replaces_varying_literals() {
        let points = [2048, 32];
        let f = Fitter::new([w()], at(&points));
        let a: TokenStream = "f(&P { n: 6144usize, c: 3 }, x)".parse().unwrap();
        let b: TokenStream = "f(&P { n: 96usize, c: 3 }, x)".parse().unwrap();
        let sym = |s: &str| format!("s.{}", s.to_lowercase());
        let merged = merge(&[a.clone(), b], &f, &|d| d.to_rust(&sym)).unwrap();
        assert_eq!(
            merged.to_string(),
            "f (& P { n : (3i64 * s . w) as usize , c : 3 } , x)"
        );
        let c: TokenStream = "g(&P { n: 96usize, c: 3 }, x)".parse().unwrap();
        assert!(matches!(
            merge(&[a.clone(), c], &f, &|d| d.to_rust(&sym)),
            Err(Mismatch::Structure { .. })
        ));
        let d: TokenStream = "f(&P { n: 97usize, c: 3 }, x)".parse().unwrap();
        assert!(matches!(
            merge(&[a, d], &f, &|d| d.to_rust(&sym)),
            Err(Mismatch::Unfitted { .. })
        ));
    }

    #[test]
    fn reads_integer_literals_only() {
        assert_eq!(int_value("48"), Some(48));
        assert_eq!(int_value("48usize"), Some(48));
        assert_eq!(int_value("1_000i64"), Some(1000));
        assert_eq!(int_value("1.5f32"), None);
        assert_eq!(int_value("\"48\""), None);
    }
}
