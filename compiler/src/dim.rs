//! Dimensions that may be symbolic: a known size, or an integer expression in named
//! symbols (`N`, `2*W + 1`, `W/4`).
//!
//! Shape inference is written once over [`Dim`], so that the same rules serve fixed
//! shapes (every dim known, what lowering needs today) and declared ranges (dynamic
//! shapes, where a size is evaluated from the symbols at run time).
//!
//! A [`Dim`] is kept in a canonical form — a polynomial with integer coefficients over
//! atoms (symbols, floor divisions by a constant, min/max) — so that equal expressions
//! compare equal (`W*2 + W == 3*W`) and broadcasting can tell `W` from `H`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::{Add, Mul, Sub};
use std::sync::Arc;

/// One dimension of a shape. (Not `Ord`: `max`/`min` are the symbolic ones below.)
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Dim(Poly);

/// Sum of terms, each a coefficient times a product of atoms (sorted, repeated for
/// powers). The constant term has no atoms; zero coefficients are never stored.
/// Coefficients saturate at `i64::MAX` rather than wrap, so that a malformed model's
/// absurd sizes stay absurd and fail the element-count check.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
struct Poly(BTreeMap<Vec<Atom>, i64>);

/// An irreducible factor.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Atom {
    Sym(Arc<str>),
    /// `floor(p / k)`, `k > 1`, where `p` is not a multiple of `k` term by term.
    FloorDiv(Box<Poly>, u64),
    /// The larger of two expressions that are not comparable symbolically.
    Max(Box<Poly>, Box<Poly>),
    Min(Box<Poly>, Box<Poly>),
}

impl Poly {
    fn constant(c: i64) -> Poly {
        let mut m = BTreeMap::new();
        if c != 0 {
            m.insert(Vec::new(), c);
        }
        Poly(m)
    }

    fn atom(a: Atom) -> Poly {
        Poly(BTreeMap::from([(vec![a], 1)]))
    }

    fn as_constant(&self) -> Option<i64> {
        match self.0.len() {
            0 => Some(0),
            1 => self.0.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// The atom, when the polynomial is exactly one atom with coefficient 1.
    fn single_atom(&self) -> Option<&Atom> {
        match self.0.iter().next() {
            Some((atoms, 1)) if self.0.len() == 1 && atoms.len() == 1 => atoms.first(),
            _ => None,
        }
    }

    fn add_term(&mut self, atoms: Vec<Atom>, c: i64) {
        let e = self.0.entry(atoms).or_insert(0);
        *e = e.saturating_add(c);
        if *e == 0 {
            self.0.retain(|_, c| *c != 0);
        }
    }

    fn add(&self, o: &Poly) -> Poly {
        let mut r = self.clone();
        for (a, &c) in &o.0 {
            r.add_term(a.clone(), c);
        }
        r
    }

    fn scale(&self, k: i64) -> Poly {
        let mut r = Poly::default();
        for (a, &c) in &self.0 {
            r.add_term(a.clone(), c.saturating_mul(k));
        }
        r
    }

    fn mul(&self, o: &Poly) -> Poly {
        let mut r = Poly::default();
        for (a, &c) in &self.0 {
            for (b, &d) in &o.0 {
                let mut atoms = a.clone();
                atoms.extend(b.iter().cloned());
                atoms.sort();
                r.add_term(atoms, c.saturating_mul(d));
            }
        }
        r
    }

    fn eval(&self, sym: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
        let mut total = 0i64;
        for (atoms, &c) in &self.0 {
            let mut t = c;
            for a in atoms {
                t = t.checked_mul(a.eval(sym)?)?;
            }
            total = total.checked_add(t)?;
        }
        Some(total)
    }

    fn symbols(&self, out: &mut BTreeSet<Arc<str>>) {
        for atoms in self.0.keys() {
            for a in atoms {
                match a {
                    Atom::Sym(s) => {
                        out.insert(s.clone());
                    }
                    Atom::FloorDiv(p, _) => p.symbols(out),
                    Atom::Max(a, b) | Atom::Min(a, b) => {
                        a.symbols(out);
                        b.symbols(out);
                    }
                }
            }
        }
    }
}

impl Atom {
    fn eval(&self, sym: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
        match self {
            Atom::Sym(s) => sym(s),
            Atom::FloorDiv(p, k) => Some(p.eval(sym)?.div_euclid(i64::try_from(*k).ok()?)),
            Atom::Max(a, b) => Some(a.eval(sym)?.max(b.eval(sym)?)),
            Atom::Min(a, b) => Some(a.eval(sym)?.min(b.eval(sym)?)),
        }
    }
}

impl Dim {
    /// A symbol, as a model's `dim_param` names it.
    pub fn sym(name: &str) -> Dim {
        Dim(Poly::atom(Atom::Sym(name.into())))
    }

    /// The value, when the dim does not depend on any symbol.
    pub fn known(&self) -> Option<i64> {
        self.0.as_constant()
    }

    /// The value as a size, when known and not negative.
    pub fn to_usize(&self) -> Option<usize> {
        self.known().and_then(|v| usize::try_from(v).ok())
    }

    pub fn is_known(&self) -> bool {
        self.known().is_some()
    }

    /// True when the dim is the known value `v`.
    pub fn is(&self, v: i64) -> bool {
        self.known() == Some(v)
    }

    /// The symbols the dim depends on.
    pub fn symbols(&self) -> BTreeSet<Arc<str>> {
        let mut s = BTreeSet::new();
        self.0.symbols(&mut s);
        s
    }

    /// The value with each symbol given by `sym`; `None` if a symbol is unbound or the
    /// arithmetic overflows.
    pub fn eval(&self, sym: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
        self.0.eval(sym)
    }

    /// `floor(self / k)` for `k > 0` (sizes are never negative, so floor and
    /// truncation agree where ONNX says either).
    pub fn div_floor(&self, k: u64) -> Dim {
        if k == 1 {
            return self.clone();
        }
        if k == 0 {
            // Callers check divisors; keep the expression total rather than panic.
            return Dim::from(0usize);
        }
        let ki = i64::try_from(k).unwrap_or(i64::MAX);
        if let Some(c) = self.known() {
            return Dim::from(c.div_euclid(ki));
        }
        // Exact term by term: divide the coefficients.
        if self.0.0.values().all(|c| c % ki == 0) {
            let mut r = Poly::default();
            for (a, &c) in &self.0.0 {
                r.add_term(a.clone(), c / ki);
            }
            return Dim(r);
        }
        // Split off the part that divides exactly: floor((k*q + r) / k) = q + floor(r / k).
        let mut q = Poly::default();
        let mut rest = Poly::default();
        for (a, &c) in &self.0.0 {
            let (d, m) = (c.div_euclid(ki), c.rem_euclid(ki));
            if d != 0 {
                q.add_term(a.clone(), d);
            }
            if m != 0 {
                rest.add_term(a.clone(), m);
            }
        }
        let floor = match rest.as_constant() {
            Some(c) => Poly::constant(c.div_euclid(ki)),
            // floor(floor(p / a) / k) = floor(p / (a*k)).
            None => match rest.single_atom() {
                Some(Atom::FloorDiv(p, a)) if a.checked_mul(k).is_some() => {
                    Poly::atom(Atom::FloorDiv(p.clone(), a * k))
                }
                _ => Poly::atom(Atom::FloorDiv(Box::new(rest), k)),
            },
        };
        Dim(q.add(&floor))
    }

    /// `ceil(self / k)` for `k > 0`.
    pub fn div_ceil(&self, k: u64) -> Dim {
        let k1 = i64::try_from(k).unwrap_or(i64::MAX).saturating_sub(1);
        (self.clone() + Dim::from(k1)).div_floor(k)
    }

    /// `self / d` when it divides exactly term by term (`(N*S*768) / 768 = N*S`,
    /// `(N*S*768) / (N*S) = 768`); `None` when it does not or is not provable.
    pub fn div_exact(&self, d: &Dim) -> Option<Dim> {
        if let (Some(a), Some(b)) = (self.known(), d.known()) {
            return (b != 0 && a % b == 0).then(|| Dim::from(a / b));
        }
        // The divisor must be one term: coefficient times a product of atoms.
        let [(div_atoms, &div_c)] = d.0.0.iter().collect::<Vec<_>>()[..] else {
            return None;
        };
        if div_c == 0 {
            return None;
        }
        let mut r = Poly::default();
        for (atoms, &c) in &self.0.0 {
            if c % div_c != 0 {
                return None;
            }
            let mut left = atoms.clone();
            for a in div_atoms {
                let at = left.iter().position(|x| x == a)?;
                left.remove(at);
            }
            r.add_term(left, c / div_c);
        }
        Some(Dim(r))
    }

    /// The larger of two dims (`max(W, 1)` stays symbolic; known values compare).
    pub fn max(&self, o: &Dim) -> Dim {
        match (self.known(), o.known()) {
            (Some(a), Some(b)) => Dim::from(a.max(b)),
            _ if self == o => self.clone(),
            _ => {
                let (a, b) = if self.0 <= o.0 { (self, o) } else { (o, self) };
                Dim(Poly::atom(Atom::Max(
                    Box::new(a.0.clone()),
                    Box::new(b.0.clone()),
                )))
            }
        }
    }

    /// The smaller of two dims.
    pub fn min(&self, o: &Dim) -> Dim {
        match (self.known(), o.known()) {
            (Some(a), Some(b)) => Dim::from(a.min(b)),
            _ if self == o => self.clone(),
            _ => {
                let (a, b) = if self.0 <= o.0 { (self, o) } else { (o, self) };
                Dim(Poly::atom(Atom::Min(
                    Box::new(a.0.clone()),
                    Box::new(b.0.clone()),
                )))
            }
        }
    }
}

impl From<i64> for Dim {
    fn from(v: i64) -> Dim {
        Dim(Poly::constant(v))
    }
}

impl From<usize> for Dim {
    fn from(v: usize) -> Dim {
        Dim::from(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<&Dim> for Dim {
    fn from(d: &Dim) -> Dim {
        d.clone()
    }
}

impl Add for Dim {
    type Output = Dim;
    fn add(self, o: Dim) -> Dim {
        Dim(self.0.add(&o.0))
    }
}

impl Sub for Dim {
    type Output = Dim;
    fn sub(self, o: Dim) -> Dim {
        Dim(self.0.add(&o.0.scale(-1)))
    }
}

impl Mul for Dim {
    type Output = Dim;
    fn mul(self, o: Dim) -> Dim {
        Dim(self.0.mul(&o.0))
    }
}

impl Add<usize> for Dim {
    type Output = Dim;
    fn add(self, o: usize) -> Dim {
        self + Dim::from(o)
    }
}

impl Sub<usize> for Dim {
    type Output = Dim;
    fn sub(self, o: usize) -> Dim {
        self - Dim::from(o)
    }
}

impl Mul<usize> for Dim {
    type Output = Dim;
    fn mul(self, o: usize) -> Dim {
        self * Dim::from(o)
    }
}

impl std::iter::Product for Dim {
    fn product<I: Iterator<Item = Dim>>(it: I) -> Dim {
        it.fold(Dim::from(1usize), |a, b| a * b)
    }
}

impl<'a> std::iter::Product<&'a Dim> for Dim {
    fn product<I: Iterator<Item = &'a Dim>>(it: I) -> Dim {
        it.fold(Dim::from(1usize), |a, b| a * b.clone())
    }
}

impl std::iter::Sum for Dim {
    fn sum<I: Iterator<Item = Dim>>(it: I) -> Dim {
        it.fold(Dim::from(0usize), |a, b| a + b)
    }
}

impl PartialEq<usize> for Dim {
    fn eq(&self, o: &usize) -> bool {
        self.to_usize() == Some(*o)
    }
}

impl fmt::Display for Poly {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, "0");
        }
        // Highest-degree terms first, the constant last: `2*W + 1`.
        let mut terms: Vec<_> = self.0.iter().collect();
        terms.sort_by_key(|(a, _)| std::cmp::Reverse(a.len()));
        for (i, (atoms, &c)) in terms.into_iter().enumerate() {
            let (sign, mag) = if c < 0 {
                ("-", c.unsigned_abs())
            } else {
                ("+", c as u64)
            };
            match (i, sign) {
                (0, "-") => write!(f, "-")?,
                (0, _) => {}
                _ => write!(f, " {sign} ")?,
            }
            if atoms.is_empty() {
                write!(f, "{mag}")?;
                continue;
            }
            if mag != 1 {
                write!(f, "{mag}*")?;
            }
            for (j, a) in atoms.iter().enumerate() {
                if j > 0 {
                    write!(f, "*")?;
                }
                write!(f, "{a}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            // A quotient symbol (`W/32`) reads as one factor: `32*(W/32)`.
            Atom::Sym(s) if s.contains(['/', ' ']) => write!(f, "({s})"),
            Atom::Sym(s) => write!(f, "{s}"),
            Atom::FloorDiv(p, k) if p.0.len() == 1 && p.0.values().all(|&c| c == 1) => {
                write!(f, "{p}/{k}")
            }
            Atom::FloorDiv(p, k) => write!(f, "({p})/{k}"),
            Atom::Max(a, b) => write!(f, "max({a}, {b})"),
            Atom::Min(a, b) => write!(f, "min({a}, {b})"),
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Debug for Dim {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A symbol's declared range (`--dim W=32..2048:8`): the values `min, min + step, ..,`
/// up to `max`, both ends included. A build for dynamic shapes serves every value in it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SymbolRange {
    pub name: Arc<str>,
    pub min: u64,
    pub max: u64,
    /// At least 1; `max - min` need not be a multiple of it (the largest value is then
    /// the last step below `max`, see [`SymbolRange::largest`]).
    pub step: u64,
}

impl SymbolRange {
    /// Every integer in `min..=max`.
    pub fn new(name: &str, min: u64, max: u64) -> SymbolRange {
        SymbolRange {
            name: name.into(),
            min,
            max,
            step: 1,
        }
    }

    /// The largest value the range admits (`max`, or the last step below it).
    pub fn largest(&self) -> u64 {
        let step = self.step.max(1);
        self.min + (self.max.saturating_sub(self.min) / step) * step
    }

    /// Whether `v` is a value of the range: inside it and on a step.
    pub fn admits(&self, v: u64) -> bool {
        v >= self.min && v <= self.max && (v - self.min).is_multiple_of(self.step.max(1))
    }
}

impl fmt::Display for SymbolRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}..{}", self.name, self.min, self.max)?;
        if self.step > 1 {
            write!(f, ":{}", self.step)?;
        }
        Ok(())
    }
}

/// A shape's dims from fixed sizes.
pub fn dims_of(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::from(d)).collect()
}

/// The fixed sizes of `dims`, when every dim is known.
pub fn fixed_shape(dims: &[Dim]) -> Option<Vec<usize>> {
    dims.iter().map(Dim::to_usize).collect()
}

/// `[N, 3, W/4]`, for messages.
pub fn fmt_dims(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w() -> Dim {
        Dim::sym("W")
    }

    fn at(d: &Dim, v: i64) -> i64 {
        d.eval(&|s| (s == "W").then_some(v)).expect("bound")
    }

    #[test]
    fn canonical_form_makes_equal_expressions_equal() {
        assert_eq!(w() * 2 + w(), w() * 3);
        assert_eq!((w() + 1usize) * Dim::from(2usize), w() * 2 + 2);
        assert_eq!(w() - w(), Dim::from(0usize));
        assert_ne!(w(), Dim::sym("H"));
        assert_eq!((w() * 3).to_string(), "3*W");
        assert_eq!((w() * 2 + 1).to_string(), "2*W + 1");
        assert_eq!((w() * w() - 1).to_string(), "W*W - 1");
    }

    #[test]
    fn floor_division_simplifies_what_divides() {
        assert_eq!((w() * 8).div_floor(4), w() * 2);
        // floor((8W + 5) / 4) = 2W + 1.
        assert_eq!((w() * 8 + 5).div_floor(4), w() * 2 + 1);
        let q = (w() + 3usize).div_floor(4);
        assert_eq!(q.to_string(), "(W + 3)/4");
        for v in [1, 4, 5, 100, 2048] {
            assert_eq!(at(&q, v), (v + 3) / 4);
            assert_eq!(at(&w().div_ceil(8), v), (v + 7) / 8);
        }
        assert_eq!(Dim::from(7usize).div_floor(2), 3usize);
        let nested = (w() + 1usize).div_floor(2).div_floor(2);
        assert_eq!(nested.to_string(), "(W + 1)/4");
        for v in [0, 1, 2, 3, 4, 5, 6, 7, 100, 101] {
            assert_eq!(at(&nested, v), (v + 1) / 2 / 2);
        }
    }

    #[test]
    fn conv_output_size_evaluates_like_the_formula() {
        // (W + 2*1 - 3) / 2 + 1 with pads 1, kernel 3, stride 2.
        let out = (w() + 2 - 3).div_floor(2) + 1;
        for v in [3, 32, 33, 320, 2048] {
            assert_eq!(at(&out, v), (v - 1) / 2 + 1, "W = {v}");
        }
    }

    #[test]
    fn exact_division_by_a_term() {
        let n = Dim::sym("N");
        let s = Dim::sym("S");
        let all = n.clone() * s.clone() * 768;
        assert_eq!(
            all.div_exact(&Dim::from(768usize)),
            Some(n.clone() * s.clone())
        );
        assert_eq!(
            all.div_exact(&(n.clone() * s.clone())),
            Some(Dim::from(768usize))
        );
        assert_eq!(all.div_exact(&Dim::from(5usize)), None);
        assert_eq!((n.clone() + 1).div_exact(&n), None);
        assert_eq!(
            Dim::from(12usize).div_exact(&Dim::from(4usize)),
            Some(Dim::from(3usize))
        );
    }

    #[test]
    fn max_and_min_fold_when_known() {
        assert_eq!(Dim::from(3usize).max(&Dim::from(5usize)), 5usize);
        assert_eq!(w().max(&w()), w());
        let m = w().max(&Dim::from(10usize));
        assert_eq!(at(&m, 4), 10);
        assert_eq!(at(&m, 40), 40);
        assert_eq!(m, Dim::from(10usize).max(&w()), "order does not matter");
        assert_eq!(at(&w().min(&Dim::from(10usize)), 40), 10);
    }

    #[test]
    fn symbols_and_unbound_eval() {
        let d = Dim::sym("N") * Dim::sym("W").div_floor(4);
        let names: Vec<String> = d.symbols().iter().map(|s| s.to_string()).collect();
        assert_eq!(names, ["N", "W"]);
        assert_eq!(d.eval(&|s| (s == "W").then_some(8)), None);
        assert_eq!(
            d.eval(&|s| match s {
                "N" => Some(3),
                "W" => Some(9),
                _ => None,
            }),
            Some(6)
        );
        assert!(!d.is_known());
        assert_eq!(fixed_shape(&[Dim::from(2usize), d]), None);
        assert_eq!(fixed_shape(&dims_of(&[2, 3])), Some(vec![2, 3]));
    }
}

/// Rewriting with what the declared ranges tell: `min(512, S)` is `S` when `S` never
/// passes 512, and a symbol declared on a step (`W=32..2048:32`) is a multiple of it,
/// so `((W + 1)/2 + 1)/2` is exactly `W/4`.
impl Dim {
    /// The dim rebuilt atom by atom through `f` (canonical again afterwards).
    fn map_atoms(&self, f: &dyn Fn(&Atom) -> Dim) -> Dim {
        let mut out = Dim::from(0usize);
        for (atoms, &c) in &self.0.0 {
            let mut term = Dim(Poly::constant(c));
            for a in atoms {
                term = term * f(a);
            }
            out = out + term;
        }
        out
    }

    /// `self` with symbol `name` replaced by `by`.
    pub fn subst(&self, name: &str, by: &Dim) -> Dim {
        self.map_atoms(&|a| match a {
            Atom::Sym(s) if &**s == name => by.clone(),
            Atom::Sym(_) => Dim(Poly::atom(a.clone())),
            Atom::FloorDiv(p, k) => Dim((**p).clone()).subst(name, by).div_floor(*k),
            Atom::Max(x, y) => Dim((**x).clone())
                .subst(name, by)
                .max(&Dim((**y).clone()).subst(name, by)),
            Atom::Min(x, y) => Dim((**x).clone())
                .subst(name, by)
                .min(&Dim((**y).clone()).subst(name, by)),
        })
    }

    /// `self` with every `max`/`min` whose order the ranges decide resolved.
    pub fn simplify(&self, ranges: &[SymbolRange]) -> Dim {
        if self.is_known() || ranges.is_empty() {
            return self.clone();
        }
        // Which of a and b is larger on every value of the ranges, if one is.
        let order = |a: &Dim, b: &Dim| {
            let d = a.clone() - b.clone();
            if d.lower_bound(ranges).is_some_and(|l| l >= 0) {
                Some(true)
            } else if d.upper_bound(ranges).is_some_and(|u| u <= 0) {
                Some(false)
            } else {
                None
            }
        };
        self.map_atoms(&|a| match a {
            Atom::Sym(_) => Dim(Poly::atom(a.clone())),
            Atom::FloorDiv(p, k) => Dim((**p).clone()).simplify(ranges).div_floor(*k),
            Atom::Max(x, y) | Atom::Min(x, y) => {
                let (x, y) = (
                    Dim((**x).clone()).simplify(ranges),
                    Dim((**y).clone()).simplify(ranges),
                );
                let is_max = matches!(a, Atom::Max(..));
                match order(&x, &y) {
                    Some(x_larger) if x_larger == is_max => x,
                    Some(_) => y,
                    None if is_max => x.max(&y),
                    None => x.min(&y),
                }
            }
        })
    }
}

impl SymbolRange {
    /// For a range on a step (`W=32..2048:32`): the name of the symbol that counts
    /// steps (`W/32`; `(W - 1)/32` when `min` is not a multiple of the step), the
    /// remainder, and the quotient symbol's own range. `W` is then `32*(W/32) + r`
    /// exactly, which lets floors of it simplify. `None` without a step.
    pub fn quotient(&self) -> Option<(SymbolRange, u64)> {
        if self.step <= 1 {
            return None;
        }
        let r = self.min % self.step;
        let name = if r == 0 {
            format!("{}/{}", self.name, self.step)
        } else {
            format!("({} - {r})/{}", self.name, self.step)
        };
        let q = SymbolRange {
            name: name.into(),
            min: (self.min - r) / self.step,
            max: (self.largest() - r) / self.step,
            step: 1,
        };
        Some((q, r))
    }

    /// The dim that stands for this symbol in shapes: itself, or
    /// `step*quotient + remainder` for a range on a step.
    pub fn as_dim(&self) -> Dim {
        match self.quotient() {
            Some((q, r)) => {
                Dim::sym(&q.name) * Dim::from(self.step as usize) + Dim::from(r as usize)
            }
            None => Dim::sym(&self.name),
        }
    }
}

/// A declared range that inference and planning can use: `1 <= min <= max`, a step of
/// at least 1, and sizes far below overflow (`max` at most 2^31).
pub fn check_range(r: &SymbolRange) -> Result<(), String> {
    if r.step == 0 {
        return Err("the step must be at least 1".into());
    }
    if r.min == 0 {
        return Err(
            "the smallest value must be at least 1 (a zero-sized dim is a separate build)".into(),
        );
    }
    if r.min > r.max {
        return Err(format!("{} is above {}", r.min, r.max));
    }
    if r.max > 1 << 31 {
        return Err(format!(
            "{} is above the largest supported dim, 2^31",
            r.max
        ));
    }
    Ok(())
}

/// Binds `values` (`W=320`) for [`Dim::eval`], including the quotient symbols
/// ([`SymbolRange::quotient`]) of the ranges on a step.
pub fn bind<'a>(
    ranges: &'a [SymbolRange],
    values: &'a [(&'a str, i64)],
) -> impl Fn(&str) -> Option<i64> + 'a {
    move |s: &str| {
        if let Some(&(_, v)) = values.iter().find(|(n, _)| *n == s) {
            return Some(v);
        }
        let r = ranges
            .iter()
            .find(|r| r.quotient().is_some_and(|(q, _)| &*q.name == s))?;
        let (_, rem) = r.quotient()?;
        let &(_, v) = values.iter().find(|(n, _)| *n == &*r.name)?;
        Some((v - rem as i64).div_euclid(r.step as i64))
    }
}

/// Bounds and monotonicity, for planning memory once for every value of the ranges:
/// a size that never shrinks as a symbol grows is largest at the largest values.
impl Dim {
    /// Provably non-decreasing in every symbol for symbol values ≥ 0: every term but
    /// the constant has a positive coefficient and monotone atoms (a symbol, the floor
    /// of a monotone polynomial, the max or min of two), and the atoms of a product
    /// are also non-negative at 0 (a product of two negative factors shrinks as they
    /// grow). Sufficient, not necessary: `W*W - W` is monotone but not proved so.
    pub fn is_monotone(&self) -> bool {
        self.0.is_monotone()
    }

    /// A sound upper bound over every value of `ranges` (`None` when a symbol has no
    /// range or the bound overflows `i64`): interval arithmetic, so each term at its
    /// largest; exactly the value at every symbol's `largest()` for a monotone dim.
    pub fn upper_bound(&self, ranges: &[SymbolRange]) -> Option<i64> {
        let (_, hi) = self.0.bounds(ranges)?;
        i64::try_from(hi).ok()
    }

    /// A sound lower bound over every value of `ranges`, like
    /// [`Dim::upper_bound`]; exactly the value at every symbol's `min` for a
    /// monotone dim.
    pub fn lower_bound(&self, ranges: &[SymbolRange]) -> Option<i64> {
        let (lo, _) = self.0.bounds(ranges)?;
        i64::try_from(lo).ok()
    }

    /// Every coefficient (the constant's too) is a multiple of `k`, so the value is,
    /// wherever it is evaluated: how an aligned symbolic byte offset is proved aligned.
    pub fn is_multiple_of(&self, k: u64) -> bool {
        let Ok(k) = i64::try_from(k) else {
            return self.0.0.is_empty();
        };
        k != 0 && self.0.0.values().all(|c| c % k == 0)
    }
}

impl Poly {
    fn is_monotone(&self) -> bool {
        self.0.iter().all(|(atoms, &c)| match atoms.as_slice() {
            [] => true,
            [a] => c > 0 && a.is_monotone(),
            _ => {
                c > 0
                    && atoms
                        .iter()
                        .all(|a| a.is_monotone() && a.at_zero() >= Some(0))
            }
        })
    }

    /// `[lo, hi]` over the ranges, in i128 so that a product of two i64 bounds fits.
    fn bounds(&self, ranges: &[SymbolRange]) -> Option<(i128, i128)> {
        let (mut lo, mut hi) = (0i128, 0i128);
        for (atoms, &c) in &self.0 {
            let mut term = (i128::from(c), i128::from(c));
            for a in atoms {
                term = interval_mul(term, a.bounds(ranges)?)?;
            }
            lo = lo.checked_add(term.0)?;
            hi = hi.checked_add(term.1)?;
        }
        Some((lo, hi))
    }
}

impl Atom {
    fn is_monotone(&self) -> bool {
        match self {
            Atom::Sym(_) => true,
            Atom::FloorDiv(p, _) => p.is_monotone(),
            Atom::Max(a, b) | Atom::Min(a, b) => a.is_monotone() && b.is_monotone(),
        }
    }

    /// The value with every symbol 0: a monotone atom's least on values ≥ 0.
    fn at_zero(&self) -> Option<i64> {
        self.eval(&|_| Some(0))
    }

    fn bounds(&self, ranges: &[SymbolRange]) -> Option<(i128, i128)> {
        match self {
            Atom::Sym(s) => {
                let r = ranges.iter().find(|r| r.name == *s)?;
                Some((i128::from(r.min), i128::from(r.largest())))
            }
            Atom::FloorDiv(p, k) => {
                let (lo, hi) = p.bounds(ranges)?;
                let k = i128::from(*k);
                (k > 0).then(|| (lo.div_euclid(k), hi.div_euclid(k)))
            }
            Atom::Max(a, b) => {
                let ((al, ah), (bl, bh)) = (a.bounds(ranges)?, b.bounds(ranges)?);
                Some((al.max(bl), ah.max(bh)))
            }
            Atom::Min(a, b) => {
                let ((al, ah), (bl, bh)) = (a.bounds(ranges)?, b.bounds(ranges)?);
                Some((al.min(bl), ah.min(bh)))
            }
        }
    }
}

/// The product of two intervals: the least and greatest of the corner products.
fn interval_mul((al, ah): (i128, i128), (bl, bh): (i128, i128)) -> Option<(i128, i128)> {
    let corners = [
        al.checked_mul(bl)?,
        al.checked_mul(bh)?,
        ah.checked_mul(bl)?,
        ah.checked_mul(bh)?,
    ];
    Some((*corners.iter().min()?, *corners.iter().max()?))
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    fn w() -> Dim {
        Dim::sym("W")
    }

    fn h() -> Dim {
        Dim::sym("H")
    }

    /// W = 16..=100 on steps of 4 (largest 100), H = 1..=7.
    fn ranges() -> Vec<SymbolRange> {
        vec![
            SymbolRange {
                step: 4,
                ..SymbolRange::new("W", 16, 102)
            },
            SymbolRange::new("H", 1, 7),
        ]
    }

    /// Every value of `d` over the ranges, by brute force.
    fn all_values(d: &Dim) -> Vec<i64> {
        let mut out = Vec::new();
        for wv in (16..=100).step_by(4) {
            for hv in 1..=7 {
                let v = d.eval(&|s| match s {
                    "W" => Some(wv),
                    "H" => Some(hv),
                    _ => None,
                });
                out.push(v.expect("bound"));
            }
        }
        out
    }

    #[test]
    fn monotone_by_the_syntactic_rule() {
        let monotone = [
            Dim::from(5usize),
            Dim::from(-5i64),
            w() * 4 + 7,
            w() * h() * 3 + w() * 2,
            (w() + 1usize).div_floor(4) * 12,
            w().max(&h()) * 2,
            w().min(&Dim::from(10usize)) + h(),
            (w() - 3usize).div_floor(2),
            w() - 1000,
        ];
        for d in &monotone {
            assert!(d.is_monotone(), "{d}");
        }
        let not = [
            Dim::from(1000usize) - w(),
            w() * w() - w(),
            // Both factors are negative at W = 0: the product shrinks, then grows.
            (w() - 8usize).div_floor(2) * (w() - 8usize).div_floor(2),
            (Dim::from(64usize) - w()).div_floor(4),
            w().max(&(Dim::from(9usize) - h())),
        ];
        for d in &not {
            assert!(!d.is_monotone(), "{d}");
        }
    }

    #[test]
    fn bounds_are_exact_for_monotone_dims_and_sound_otherwise() {
        let dims = [
            w() * 4 + 7,
            w() * h() * 3 + w() * 2,
            (w() + 1usize).div_floor(4) * 12,
            w().max(&(h() * 20)) - 30,
            Dim::from(1000usize) - w(),
            w() * w() - w() * 10,
            (Dim::from(64usize) - w()).div_floor(4) * h(),
            w().min(&(Dim::from(50usize) - h())),
        ];
        for d in &dims {
            let values = all_values(d);
            let (lo, hi) = (values.iter().min(), values.iter().max());
            let (lower, upper) = (d.lower_bound(&ranges()), d.upper_bound(&ranges()));
            assert!(lower <= lo.copied() && upper >= hi.copied(), "{d}");
            if d.is_monotone() {
                assert_eq!((lower, upper), (lo.copied(), hi.copied()), "{d}");
            }
        }
        // 1000 - W: positive terms at their max, negative at their min.
        assert_eq!(
            (Dim::from(1000usize) - w()).upper_bound(&ranges()),
            Some(984)
        );
        assert_eq!(
            (Dim::from(1000usize) - w()).lower_bound(&ranges()),
            Some(900)
        );
    }

    #[test]
    fn bounds_fail_without_a_range_or_on_overflow() {
        assert_eq!(Dim::sym("N").upper_bound(&ranges()), None);
        assert_eq!((w() + Dim::sym("N")).lower_bound(&ranges()), None);
        assert_eq!(Dim::from(3usize).upper_bound(&[]), Some(3));
        let huge = [SymbolRange::new("W", 0, u64::MAX)];
        assert_eq!(w().upper_bound(&huge), None);
        assert_eq!((w() * w()).upper_bound(&huge), None);
        // The lower bound alone still fits.
        assert_eq!(w().lower_bound(&huge), Some(0));
    }

    #[test]
    fn multiples_of_a_constant() {
        assert!((w() * 256 + h() * 512).is_multiple_of(256));
        assert!(!(w() * 256 + 4).is_multiple_of(256));
        assert!(Dim::from(0usize).is_multiple_of(64));
        assert!(!w().is_multiple_of(0));
        assert!(!w().is_multiple_of(u64::MAX));
    }
}

/// Dims as Rust expressions, for generated code that evaluates them at run time.
impl Dim {
    /// An `i64` expression computing the dim, with each symbol written as `sym(name)`
    /// returns (an `i64` place such as `s.w`). Floors are `div_euclid` (the divisor is
    /// positive), `min`/`max` the methods of `i64`.
    pub fn to_rust(&self, sym: &dyn Fn(&str) -> String) -> String {
        self.0.to_rust(sym)
    }
}

impl Poly {
    fn to_rust(&self, sym: &dyn Fn(&str) -> String) -> String {
        if self.0.is_empty() {
            return "0i64".into();
        }
        let terms: Vec<Vec<String>> = self
            .0
            .iter()
            .map(|(atoms, &c)| {
                let mut factors: Vec<String> = atoms.iter().map(|a| a.to_rust(sym)).collect();
                if factors.is_empty() || c != 1 {
                    factors.insert(0, format!("{c}i64"));
                }
                factors
            })
            .collect();
        // One factor is already a place or a call; anything else is parenthesised, so
        // the result can take a method call or an `as`.
        match terms.as_slice() {
            [t] if t.len() == 1 => t[0].clone(),
            _ => {
                let terms: Vec<String> = terms.iter().map(|t| t.join(" * ")).collect();
                format!("({})", terms.join(" + "))
            }
        }
    }
}

impl Atom {
    fn to_rust(&self, sym: &dyn Fn(&str) -> String) -> String {
        match self {
            Atom::Sym(s) => sym(s),
            Atom::FloorDiv(p, k) => format!("{}.div_euclid({k}i64)", p.to_rust(sym)),
            Atom::Max(a, b) => format!("{}.max({})", a.to_rust(sym), b.to_rust(sym)),
            Atom::Min(a, b) => format!("{}.min({})", a.to_rust(sym), b.to_rust(sym)),
        }
    }
}
