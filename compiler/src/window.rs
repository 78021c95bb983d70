//! Convolution and pooling windows: kernel, strides, dilations and pads resolved from
//! ONNX attributes (including `auto_pad` and `ceil_mode`) into plain numbers.
//! Shape inference and lowering both call [`resolve`], so they cannot disagree.

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
    fn rejects_windows_that_do_not_fit() {
        assert!(resolve(&win(5, 1, 0, false), &[3, 3], None, true).is_err());
        assert!(resolve(&win(3, 0, 0, false), &[3, 3], None, true).is_err());
    }
}
