//! Run-time dims of a model built for declared ranges (`kiln compile --dim`): what the
//! generated `Dims::from_shapes` and `Dims::check` call, and the integer helpers its
//! layout code uses. Everything here is checked arithmetic on a few integers.

use crate::Error;

/// A declared symbol: its range and step, and the input axis it is first read from
/// (named in errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol {
    pub name: &'static str,
    pub min: usize,
    pub max: usize,
    pub step: usize,
    /// The input and axis whose size gives the symbol.
    pub input: &'static str,
    pub axis: usize,
}

impl Symbol {
    /// Checks `value` against the range and the step.
    pub fn check(&self, value: usize) -> Result<(), Error> {
        if value < self.min || value > self.max {
            return Err(Error::DimOutOfRange {
                symbol: self.name,
                name: self.input,
                axis: self.axis,
                value,
                min: self.min,
                max: self.max,
            });
        }
        if !(value - self.min).is_multiple_of(self.step.max(1)) {
            return Err(Error::DimOffStep {
                symbol: self.name,
                name: self.input,
                axis: self.axis,
                value,
                min: self.min,
                step: self.step,
            });
        }
        Ok(())
    }
}

/// The shape of input `name`, checked for rank.
pub fn shape<'a>(
    name: &'static str,
    shape: &'a [usize],
    rank: usize,
) -> Result<&'a [usize], Error> {
    if shape.len() != rank {
        return Err(Error::InputRank {
            name,
            expected: rank,
            got: shape.len(),
        });
    }
    Ok(shape)
}

/// Checks that an input's dim is the value of its expression in the symbols read so
/// far (`expr`, evaluated to `expected`); a fixed dim when `expr` is a number.
pub fn expect(
    name: &'static str,
    axis: usize,
    got: usize,
    expr: &'static str,
    expected: i64,
    from: &'static str,
) -> Result<(), Error> {
    let expected = usize::try_from(expected).unwrap_or(usize::MAX);
    if got == expected {
        return Ok(());
    }
    if from.is_empty() {
        Err(Error::DimFixed {
            name,
            axis,
            expected,
            got,
        })
    } else {
        Err(Error::DimDisagrees {
            name,
            axis,
            expr,
            expected,
            got,
            from,
        })
    }
}

/// A size from an in-range expression (never negative there; 0 if it were).
pub const fn size(v: i64) -> usize {
    if v < 0 { 0 } else { v as usize }
}

/// `v` rounded up to a multiple of `align` (a power of two).
pub const fn align_up(v: usize, align: usize) -> usize {
    (v + align - 1) & !(align - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Symbol = Symbol {
        name: "W",
        min: 32,
        max: 2048,
        step: 8,
        input: "x",
        axis: 3,
    };

    #[test]
    fn checks_range_and_step() {
        assert!(W.check(32).is_ok() && W.check(40).is_ok() && W.check(2048).is_ok());
        assert!(matches!(
            W.check(31),
            Err(Error::DimOutOfRange { value: 31, .. })
        ));
        assert!(matches!(W.check(2056), Err(Error::DimOutOfRange { .. })));
        assert!(matches!(
            W.check(33),
            Err(Error::DimOffStep { step: 8, .. })
        ));
        let msg = W.check(2056).unwrap_err().to_string();
        assert_eq!(
            msg,
            "symbol `W` (input `x`, axis 3) is 2056, outside its declared range 32..=2048"
        );
    }

    #[test]
    fn checks_derived_and_fixed_dims() {
        assert!(expect("x", 1, 3, "3", 3, "").is_ok());
        assert!(matches!(
            expect("x", 1, 4, "3", 3, ""),
            Err(Error::DimFixed {
                expected: 3,
                got: 4,
                ..
            })
        ));
        let e = expect("mask", 1, 7, "S", 5, "`S` from input `ids`, axis 1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "input `mask`, axis 1: is 7, but `S` is 5 with the dims read so far (`S` from input `ids`, axis 1)"
        );
        assert!(matches!(
            shape("x", &[1, 2], 3),
            Err(Error::InputRank {
                expected: 3,
                got: 2,
                ..
            })
        ));
        assert_eq!(align_up(65, 64), 128);
        assert_eq!(size(-3), 0);
    }
}
