//! Convolution and pooling windows: kernel, strides, dilations and pads resolved from
//! ONNX attributes (including `auto_pad` and `ceil_mode`) into plain numbers.
//! Shape inference and lowering both call [`resolve`], so they cannot disagree.

use crate::dim::{Dim, dims_of, fixed_shape};
use crate::ir::{AutoPad, Window};

/// A resolved window over `n` spatial dimensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spatial {
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    /// Padding at the start of each spatial dim.
    pub pads_begin: Vec<usize>,
    /// Padding at the end of each spatial dim.
    pub pads_end: Vec<usize>,
    pub out: Vec<usize>,
}

/// Resolves `w` over input spatial dims `input`. Convolutions pass the weight's spatial
/// dims as `weight_kernel` (used when `kernel_shape` is absent); pooling requires
/// `kernel_shape` and honours `ceil_mode`.
pub fn resolve(
    w: &Window,
    input: &[usize],
    weight_kernel: Option<&[usize]>,
    pool: bool,
) -> Result<Spatial, String> {
    let n = input.len();
    let kernel = match (&w.kernel_shape, weight_kernel) {
        (Some(k), Some(wk)) if k.as_slice() != wk => {
            return Err(format!(
                "kernel_shape {k:?} disagrees with the weight's {wk:?}"
            ));
        }
        (Some(k), _) => k.clone(),
        (None, Some(wk)) => wk.to_vec(),
        (None, None) => return Err("attribute `kernel_shape` is required".into()),
    };
    let ones = vec![1; n];
    let strides = w.strides.clone().unwrap_or_else(|| ones.clone());
    let dilations = w.dilations.clone().unwrap_or(ones);
    for (name, v) in [
        ("kernel_shape", &kernel),
        ("strides", &strides),
        ("dilations", &dilations),
    ] {
        if v.len() != n {
            return Err(format!(
                "`{name}` has {} values for {n} spatial dims",
                v.len()
            ));
        }
        if v.contains(&0) {
            return Err(format!("`{name}` {v:?} contains 0"));
        }
    }
    // Saturating: absurd attributes must fail the fit check below, not overflow.
    let extent: Vec<usize> = (0..n)
        .map(|i| {
            (kernel[i] - 1)
                .saturating_mul(dilations[i])
                .saturating_add(1)
        })
        .collect();
    let (pads_begin, pads_end) = match w.auto_pad {
        AutoPad::NotSet => match &w.pads {
            None => (vec![0; n], vec![0; n]),
            Some(p) if p.len() == 2 * n => (p[..n].to_vec(), p[n..].to_vec()),
            Some(p) => {
                return Err(format!(
                    "`pads` has {} values for {n} spatial dims",
                    p.len()
                ));
            }
        },
        AutoPad::Valid => (vec![0; n], vec![0; n]),
        AutoPad::SameUpper | AutoPad::SameLower => {
            let mut b = Vec::with_capacity(n);
            let mut e = Vec::with_capacity(n);
            for i in 0..n {
                let out = input[i].div_ceil(strides[i]);
                let total = ((out.max(1) - 1) * strides[i])
                    .saturating_add(extent[i])
                    .saturating_sub(input[i]);
                let small = total / 2;
                let (pb, pe) = if w.auto_pad == AutoPad::SameUpper {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                b.push(pb);
                e.push(pe);
            }
            (b, e)
        }
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let padded = input[i]
            .saturating_add(pads_begin[i])
            .saturating_add(pads_end[i]);
        if padded < extent[i] {
            return Err(format!(
                "window of extent {} does not fit spatial dim {i} of size {} (padded {padded})",
                extent[i], input[i]
            ));
        }
        let span = padded - extent[i];
        let mut o = if pool && w.ceil_mode {
            span.div_ceil(strides[i]) + 1
        } else {
            span / strides[i] + 1
        };
        // With ceil_mode, a last window that starts in the end padding is dropped.
        if pool && w.ceil_mode && (o - 1) * strides[i] >= input[i] + pads_begin[i] {
            o -= 1;
        }
        out.push(o);
    }
    Ok(Spatial {
        kernel,
        strides,
        dilations,
        pads_begin,
        pads_end,
        out,
    })
}

/// The output spatial dims of `w` over `input`, symbolic where the input is: the same
/// formulas as [`resolve`] (`floor((in + pads - extent) / stride) + 1`, `ceil(in /
/// stride)` for `SAME_*`), over [`Dim`]s. The weight's kernel must be known.
pub fn out_dims(
    w: &Window,
    input: &[Dim],
    weight_kernel: Option<&[Dim]>,
    pool: bool,
) -> Result<Vec<Dim>, String> {
    let wk = match weight_kernel {
        Some(k) => Some(fixed_shape(k).ok_or_else(|| {
            format!(
                "the weight's spatial dims {} must be known",
                crate::dim::fmt_dims(k)
            )
        })?),
        None => None,
    };
    if let Some(x) = fixed_shape(input) {
        return Ok(dims_of(&resolve(w, &x, wk.as_deref(), pool)?.out));
    }
    // Attributes are checked, and kernel, strides and pads found, on a stand-in size
    // that fits any window; symbolic dims then take the formula.
    const STAND_IN: usize = 1 << 20;
    let stand_in: Vec<usize> = input
        .iter()
        .map(|d| d.to_usize().unwrap_or(STAND_IN))
        .collect();
    let sp = resolve(w, &stand_in, wk.as_deref(), pool)?;
    let mut out = Vec::with_capacity(input.len());
    for (i, d) in input.iter().enumerate() {
        if d.is_known() {
            out.push(Dim::from(sp.out[i]));
            continue;
        }
        let s = sp.strides[i] as u64;
        let extent = (sp.kernel[i] - 1) * sp.dilations[i] + 1;
        if matches!(w.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) {
            out.push(d.div_ceil(s));
            continue;
        }
        let span = d.clone() + (sp.pads_begin[i] + sp.pads_end[i]) - extent;
        if pool && w.ceil_mode {
            // The last window is dropped when it starts in the end padding, which can
            // happen only when the stride exceeds the extent minus that padding.
            if sp.strides[i] + sp.pads_end[i] > extent {
                return Err(format!(
                    "ceil_mode with stride {} over a window of extent {extent} needs spatial dim {i} ({d}) known",
                    sp.strides[i]
                ));
            }
            out.push(span.div_ceil(s) + 1);
        } else {
            out.push(span.div_floor(s) + 1);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win(k: usize, s: usize, p: usize, ceil: bool) -> Window {
        Window {
            kernel_shape: Some(vec![k, k]),
            strides: Some(vec![s, s]),
            dilations: None,
            pads: Some(vec![p; 4]),
            auto_pad: AutoPad::NotSet,
            ceil_mode: ceil,
        }
    }

    #[test]
    fn floor_and_ceil_modes() {
        // GoogLeNet pool1: 112 -> 56 with 3x3/2 and ceil_mode.
        assert_eq!(
            resolve(&win(3, 2, 0, true), &[112, 112], None, true)
                .unwrap()
                .out,
            vec![56, 56]
        );
        assert_eq!(
            resolve(&win(3, 2, 0, false), &[112, 112], None, true)
                .unwrap()
                .out,
            vec![55, 55]
        );
        assert_eq!(
            resolve(&win(7, 2, 3, false), &[224, 224], None, false)
                .unwrap()
                .out,
            vec![112, 112]
        );
    }

    #[test]
    fn same_upper_pads_at_the_end() {
        let mut w = win(2, 2, 0, false);
        w.pads = None;
        w.auto_pad = AutoPad::SameUpper;
        let s = resolve(&w, &[5, 5], None, true).unwrap();
        assert_eq!(
            (s.out, s.pads_begin, s.pads_end),
            (vec![3, 3], vec![0, 0], vec![1, 1])
        );
    }

    #[test]
    fn symbolic_output_dims_follow_the_formula() {
        let sym = [Dim::sym("H"), Dim::sym("W")];
        for (win, pool) in [
            (win(7, 2, 3, false), false),
            (win(3, 2, 0, true), true),
            (win(3, 1, 1, false), false),
            (win(2, 2, 0, false), true),
        ] {
            let out = out_dims(&win, &sym, None, pool).unwrap();
            for x in [7usize, 32, 33, 111, 224] {
                let want = resolve(&win, &[x, x + 1], None, pool).unwrap().out;
                let got: Vec<usize> = out
                    .iter()
                    .map(|d| {
                        let v = d.eval(&|s| match s {
                            "H" => Some(x as i64),
                            _ => Some(x as i64 + 1),
                        });
                        v.unwrap() as usize
                    })
                    .collect();
                assert_eq!(got, want, "{win:?} at {x}");
            }
        }
        let mut same = win(3, 2, 0, false);
        same.pads = None;
        same.auto_pad = AutoPad::SameUpper;
        assert_eq!(
            out_dims(&same, &sym, None, false).unwrap()[1].to_string(),
            "(W + 1)/2"
        );
    }

    #[test]
    fn rejects_windows_that_do_not_fit() {
        assert!(resolve(&win(5, 1, 0, false), &[3, 3], None, true).is_err());
        assert!(resolve(&win(3, 0, 0, false), &[3, 3], None, true).is_err());
    }
}
