//! Resampling: Resize and Upsample (per-axis tap tables computed here, one generic
//! kernel), GridSample, AffineGrid, CenterCropPad (the `pad` kernel: a negative begin
//! crops) and Col2Im. Semantics follow the onnx reference (`op_resize.py`, ...): the
//! tables reproduce its coordinate transforms, neighbour choice and coefficients in
//! `f64`.

use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::{Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, ParseCx, R, Types, fixed, normalize_axis};
use crate::lower::TypedCall;
use crate::tensor::{DType, Data, Scalar, Tensor};
use crate::{dispatch_data, impl_as_any};

/// Normalised, distinct axes.
fn axes_of(axes: &[i64], rank: usize) -> R<Vec<usize>> {
    let mut out = Vec::new();
    for &a in axes {
        let a = normalize_axis(a, rank)?;
        if out.contains(&a) {
            return Err(format!("axes {axes:?} repeat axis {a}"));
        }
        out.push(a);
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
    /// Upsample and Resize-10: floor when upsampling, ceil when downsampling.
    Legacy,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AspectPolicy {
    Stretch,
    NotLarger,
    NotSmaller,
}

/// Where the scales come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Inputs {
    /// Resize 11+: `(X, roi, scales, sizes)`.
    Modern,
    /// Resize-10 and Upsample-9: `(X, scales)`.
    ScalesInput,
    /// Upsample-7: the `scales` attribute.
    ScalesAttr(Vec<f32>),
}

/// Resize (opset 10+) and Upsample (7–9).
#[derive(Debug, Clone)]
pub struct Resize {
    pub upsample: bool,
    pub inputs: Inputs,
    pub mode: Mode,
    pub coord: Coord,
    pub nearest: NearestMode,
    pub cubic_a: f64,
    pub exclude_outside: bool,
    pub extrapolation: f32,
    pub antialias: bool,
    pub axes: Option<Vec<i64>>,
    pub policy: AspectPolicy,
}

/// One axis's table: `taps` entries per output position.
struct Table {
    taps: usize,
    idx: Vec<i64>,
    w: Vec<f64>,
}

/// Python's `math.isclose` with its defaults.
fn isclose(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

impl Resize {
    /// The per-axis scales, output shape and crop region (full rank).
    #[allow(clippy::type_complexity)]
    fn geometry(&self, cx: &InferCx) -> R<(Vec<f64>, Vec<usize>, Option<Vec<f64>>)> {
        let s = cx.shape(0)?;
        let r = s.len();
        let axes = match &self.axes {
            Some(a) => axes_of(a, r)?,
            None => (0..r).collect(),
        };
        let (scales, sizes): (Option<Vec<f64>>, Option<Vec<i64>>) = match &self.inputs {
            Inputs::ScalesAttr(v) => (Some(v.iter().map(|&x| x as f64).collect()), None),
            Inputs::ScalesInput => (Some(cx.constant(1, "scales")?.as_f64()), None),
            Inputs::Modern => {
                let present = |i: usize| {
                    cx.opt(i)
                        .is_some_and(|v| v.shape().iter().product::<usize>() > 0)
                };
                let scales = if present(2) {
                    Some(cx.constant(2, "scales")?.as_f64())
                } else {
                    None
                };
                let sizes = if present(3) {
                    Some(cx.constant(3, "sizes")?.as_i64())
                } else {
                    None
                };
                (scales, sizes)
            }
        };
        let n = axes.len();
        let mut scale = vec![1.0f64; r];
        let mut out: Vec<usize> = s.to_vec();
        match (scales, sizes) {
            (Some(_), Some(_)) => return Err("only one of scales and sizes may be given".into()),
            (None, None) => return Err("one of scales and sizes must be given".into()),
            (Some(sc), None) => {
                if sc.len() != n {
                    return Err(format!("scales {sc:?} must have {n} values (one per axis)"));
                }
                for (k, &a) in axes.iter().enumerate() {
                    if !(sc[k] > 0.0 && sc[k].is_finite()) {
                        return Err(format!("scales {sc:?} must be positive"));
                    }
                    scale[a] = sc[k];
                }
                for d in 0..r {
                    out[d] = (scale[d] * s[d] as f64) as usize;
                }
            }
            (None, Some(sz)) => {
                if sz.len() != n {
                    return Err(format!("sizes {sz:?} must have {n} values (one per axis)"));
                }
                for (k, &a) in axes.iter().enumerate() {
                    if sz[k] < 0 {
                        return Err(format!("sizes {sz:?} must not be negative"));
                    }
                    if s[a] == 0 {
                        return Err(format!("cannot resize axis {a} of size 0"));
                    }
                    out[a] = sz[k] as usize;
                    scale[a] = sz[k] as f64 / s[a] as f64;
                }
                if self.policy != AspectPolicy::Stretch {
                    let it = axes.iter().map(|&a| scale[a]);
                    let sc = if self.policy == AspectPolicy::NotLarger {
                        it.fold(f64::INFINITY, f64::min)
                    } else {
                        it.fold(f64::NEG_INFINITY, f64::max)
                    };
                    for &a in &axes {
                        scale[a] = sc;
                        out[a] = (sc * s[a] as f64 + 0.5) as usize;
                    }
                }
            }
        }
        let roi = if self.coord == Coord::TfCropAndResize {
            let v = cx.constant(1, "roi")?.as_f64();
            if v.len() != 2 * n {
                return Err(format!(
                    "roi {v:?} must have 2 values per axis ({n} axes) for tf_crop_and_resize"
                ));
            }
            let mut full = vec![0.0; r];
            full.extend(std::iter::repeat_n(1.0, r));
            for (k, &a) in axes.iter().enumerate() {
                full[a] = v[k];
                full[r + a] = v[n + k];
            }
            Some(full)
        } else {
            None
        };
        Ok((scale, out, roi))
    }

    fn coeffs(&self, ratio: f64, scale: f64) -> Vec<f64> {
        let a = self.cubic_a;
        match self.mode {
            Mode::Nearest => {
                if ratio == ratio.trunc() {
                    return vec![0.0, 1.0];
                }
                let up = match self.nearest {
                    NearestMode::RoundPreferFloor => ratio > 0.5,
                    NearestMode::RoundPreferCeil => ratio >= 0.5,
                    NearestMode::Floor => false,
                    NearestMode::Ceil => true,
                    NearestMode::Legacy => scale < 1.0,
                };
                if up { vec![0.0, 1.0] } else { vec![1.0, 0.0] }
            }
            Mode::Linear if self.antialias => {
                let scale = scale.min(1.0);
                let start = ((-1.0 / scale).floor() + 1.0) as i64;
                let footprint = 2 - 2 * start;
                let c: Vec<f64> = (start..start + footprint)
                    .map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0))
                    .collect();
                let sum: f64 = c.iter().sum();
                c.iter().map(|v| v / sum).collect()
            }
            Mode::Linear => vec![1.0 - ratio, ratio],
            Mode::Cubic if self.antialias => {
                let scale = scale.min(1.0);
                let coeff = |x: f64| {
                    let x = x.abs();
                    let (x2, x3) = (x * x, x * x * x);
                    if x <= 1.0 {
                        (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                    } else if x < 2.0 {
                        a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                    } else {
                        0.0
                    }
                };
                let i_start = ((-2.0 / scale).floor() + 1.0) as i64;
                let i_end = 2 - i_start;
                let c: Vec<f64> = (i_start..i_end)
                    .map(|i| coeff(scale * (i as f64 - ratio)))
                    .collect();
                let sum: f64 = c.iter().sum();
                c.iter().map(|v| v / sum).collect()
            }
            Mode::Cubic => {
                let r = ratio;
                let q = 1.0 - r;
                vec![
                    ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                    ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                    ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                    ((a * (q + 1.0) - 5.0 * a) * (q + 1.0) + 8.0 * a) * (q + 1.0) - 4.0 * a,
                ]
            }
        }
    }

    /// The reference's `_interpolate_1d_along_axis` as a table.
    fn table(&self, input: usize, out: usize, scale: f64, roi: Option<(f64, f64)>) -> R<Table> {
        let (inw, ow) = (input as f64, scale * input as f64);
        let mut t = Table {
            taps: 0,
            idx: Vec::new(),
            w: Vec::new(),
        };
        for y in 0..out {
            let y = y as f64;
            let mut outside = false;
            let x = match self.coord {
                Coord::AlignCorners => {
                    if ow == 1.0 {
                        0.0
                    } else {
                        y * (inw - 1.0) / (ow - 1.0)
                    }
                }
                Coord::Asymmetric => y / scale,
                Coord::TfCropAndResize => {
                    let (r0, r1) = roi.ok_or("tf_crop_and_resize needs roi")?;
                    let x = if ow == 1.0 {
                        (r1 - r0) * (inw - 1.0) / 2.0
                    } else {
                        y * (r1 - r0) * (inw - 1.0) / (ow - 1.0)
                    };
                    let x = x + r0 * (inw - 1.0);
                    outside = x < 0.0 || x > inw - 1.0;
                    x
                }
                Coord::PytorchHalfPixel => {
                    if ow == 1.0 {
                        -0.5
                    } else {
                        (y + 0.5) / scale - 0.5
                    }
                }
                Coord::HalfPixel => (y + 0.5) / scale - 0.5,
                Coord::HalfPixelSymmetric => {
                    let adjustment = out as f64 / ow;
                    let center = inw / 2.0;
                    let offset = center * (1.0 - adjustment);
                    offset + (y + 0.5) / scale - 0.5
                }
            };
            if !x.is_finite() {
                return Err(format!(
                    "resizing an axis of {input} to {out} gives the non-finite coordinate {x}"
                ));
            }
            let xf = x.floor();
            let ratio = if x == xf { 1.0 } else { x - xf };
            let mut c = self.coeffs(ratio, scale);
            let n = c.len();
            if t.taps == 0 {
                t.taps = n;
            } else if t.taps != n {
                return Err("resize: the kernel size changed along one axis (a Kiln bug)".into());
            }
            let pad = n.div_ceil(2) as f64;
            let xp = x + pad;
            let p = xp.floor();
            let frac = xp - p;
            let half = (n / 2) as i64;
            let off = if n.is_multiple_of(2) {
                if frac == 0.0 { -half } else { -half + 1 }
            } else {
                let base = -(((n - 1) / 2) as i64);
                if frac <= 0.5 { base } else { base + 1 }
            };
            let start = p as i64 + off - pad as i64;
            let nb: Vec<i64> = (0..n as i64).map(|k| start + k).collect();
            if self.exclude_outside {
                for (k, &i) in nb.iter().enumerate() {
                    if i < 0 || i >= input as i64 {
                        c[k] = 0.0;
                    }
                }
                let sum: f64 = c.iter().sum();
                let sum = if sum == 0.0 { 1.0 } else { sum };
                for v in &mut c {
                    *v /= sum;
                }
            }
            for k in 0..n {
                t.idx.push(if outside {
                    -1
                } else {
                    nb[k].clamp(0, input as i64 - 1)
                });
                t.w.push(c[k]);
            }
        }
        // One weight-1 tap per position (nearest): a copy.
        if t.taps > 1 {
            let rows = t.idx.chunks(t.taps).zip(t.w.chunks(t.taps));
            let single: Option<Vec<i64>> = rows
                .map(|(i, w)| {
                    if i[0] < 0 {
                        return Some(-1);
                    }
                    let nz: Vec<usize> = (0..w.len()).filter(|&k| w[k] != 0.0).collect();
                    (nz.len() == 1 && w[nz[0]] == 1.0).then(|| i[nz[0]])
                })
                .collect();
            if let Some(idx) = single {
                t.w = vec![1.0; idx.len()];
                t.idx = idx;
                t.taps = 1;
            }
        }
        if out == 0 {
            t.taps = 1;
        }
        Ok(t)
    }

    /// The kernel parameters, tap indices, tap weights and output shape.
    #[allow(clippy::type_complexity)]
    fn plan(&self, cx: &InferCx) -> R<(tp::Resize, Vec<i64>, Vec<f64>, Vec<usize>)> {
        let s = cx.shape(0)?;
        let r = s.len();
        if r > tp::RANK {
            return Err(format!("rank {r} exceeds {}", tp::RANK));
        }
        let (scale, out, roi) = self.geometry(cx)?;
        let axes = match &self.axes {
            Some(a) => axes_of(a, r)?,
            None => (0..r).collect(),
        };
        let mut p = tp::Resize {
            rank: r,
            in_shape: fixed(s, 1)?,
            out_shape: fixed(&out, 1)?,
            taps: [1; tp::RANK],
            offset: [0; tp::RANK],
            extrapolation: self.extrapolation,
        };
        let (mut idx, mut w) = (Vec::new(), Vec::new());
        for d in 0..r {
            let axis_roi = roi.as_ref().map(|v| (v[d], v[d + r]));
            let identity = !axes.contains(&d)
                || (isclose(scale[d], 1.0)
                    && out[d] == s[d]
                    && axis_roi.is_none_or(|(a, b)| isclose(a, 0.0) && isclose(b, 1.0)));
            p.offset[d] = idx.len();
            if identity {
                idx.extend(0..out[d] as i64);
                w.extend(std::iter::repeat_n(1.0, out[d]));
                continue;
            }
            let t = self.table(s[d], out[d], scale[d], axis_roi)?;
            p.taps[d] = t.taps;
            idx.extend(t.idx);
            w.extend(t.w);
        }
        if idx.is_empty() {
            idx.push(0);
            w.push(0.0);
        }
        Ok((p, idx, w, out))
    }
}

impl Operator for Resize {
    fn name(&self) -> &'static str {
        if self.upsample { "Upsample" } else { "Resize" }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Numeric)?;
        let (_, _, _, out) = self.plan(cx)?;
        Ok(vec![Fact::new(d, out)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "X")?;
        let (p, idx, w, _) = self.plan(cx)?;
        let n = outs[0].shape.iter().product();
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); n];
            typed::resize(&p, v, &idx, &w, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let (p, idx, w, _) = self.plan(&infer)?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        let name = cx.node.name.clone();
        let ti = cx.weight(
            &format!("{name}:resize_idx"),
            &Tensor::i64(vec![idx.len()], idx),
        );
        let tw = cx.weight(
            &format!("{name}:resize_w"),
            &Tensor::new(vec![w.len()], Data::F64(w)),
        );
        let call = TypedCall::new("resize", vec![d], &p).inputs(vec![d, DType::I64, DType::F64]);
        cx.typed(call, vec![x, ti, tw], 0)?;
        Ok(())
    }
    impl_as_any!();
}

fn parse_resize(cx: &ParseCx) -> R<super::Op> {
    let a = &cx.attrs;
    let mode = match a.string("mode")?.as_deref() {
        None | Some("nearest") => Mode::Nearest,
        Some("linear") | Some("bilinear") => Mode::Linear,
        Some("cubic") if cx.op_type == "Resize" && cx.opset >= 11 => Mode::Cubic,
        Some(m) => {
            return Err(format!(
                "unsupported mode `{m}` (expected nearest, linear{})",
                if cx.op_type == "Resize" && cx.opset >= 11 {
                    " or cubic"
                } else {
                    ""
                }
            ));
        }
    };
    let upsample = cx.op_type == "Upsample";
    let legacy = upsample || cx.opset < 11;
    if legacy {
        let inputs = if upsample && cx.opset < 9 {
            Inputs::ScalesAttr(
                a.floats("scales")?
                    .ok_or("attribute `scales` is required")?,
            )
        } else {
            Inputs::ScalesInput
        };
        return Ok(Arc::new(Resize {
            upsample,
            inputs,
            mode,
            coord: Coord::Asymmetric,
            nearest: NearestMode::Legacy,
            cubic_a: -0.75,
            exclude_outside: false,
            extrapolation: 0.0,
            antialias: false,
            axes: None,
            policy: AspectPolicy::Stretch,
        }));
    }
    let coord = match a.string("coordinate_transformation_mode")?.as_deref() {
        None | Some("half_pixel") => Coord::HalfPixel,
        Some("half_pixel_symmetric") => Coord::HalfPixelSymmetric,
        Some("pytorch_half_pixel") => Coord::PytorchHalfPixel,
        Some("align_corners") => Coord::AlignCorners,
        Some("asymmetric") => Coord::Asymmetric,
        Some("tf_crop_and_resize") => Coord::TfCropAndResize,
        Some(m) => {
            return Err(format!(
                "unsupported coordinate_transformation_mode `{m}` (expected half_pixel, \
                 half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric or \
                 tf_crop_and_resize)"
            ));
        }
    };
    let nearest = match a.string("nearest_mode")?.as_deref() {
        None | Some("round_prefer_floor") => NearestMode::RoundPreferFloor,
        Some("round_prefer_ceil") => NearestMode::RoundPreferCeil,
        Some("floor") => NearestMode::Floor,
        Some("ceil") => NearestMode::Ceil,
        Some(m) => {
            return Err(format!(
                "unsupported nearest_mode `{m}` (expected round_prefer_floor, \
                 round_prefer_ceil, floor or ceil)"
            ));
        }
    };
    let policy = match a.string("keep_aspect_ratio_policy")?.as_deref() {
        None | Some("stretch") => AspectPolicy::Stretch,
        Some("not_larger") => AspectPolicy::NotLarger,
        Some("not_smaller") => AspectPolicy::NotSmaller,
        Some(m) => {
            return Err(format!(
                "unsupported keep_aspect_ratio_policy `{m}` (expected stretch, not_larger \
                 or not_smaller)"
            ));
        }
    };
    let antialias = a.flag("antialias")?;
    if antialias && mode == Mode::Nearest {
        return Err("antialias is defined for linear and cubic modes only, not nearest".into());
    }
    Ok(Arc::new(Resize {
        upsample: false,
        inputs: Inputs::Modern,
        mode,
        coord,
        nearest,
        cubic_a: a.float_or("cubic_coeff_a", -0.75)? as f64,
        exclude_outside: a.flag("exclude_outside")?,
        extrapolation: a.float_or("extrapolation_value", 0.0)?,
        antialias,
        axes: a.ints("axes")?,
        policy,
    }))
}

/// GridSample (opset 16: 4-D input; 20: any number of spatial axes).
#[derive(Debug, Clone)]
pub struct GridSample {
    pub mode: tp::GridSampleMode,
    pub padding: tp::GridPadding,
    pub align_corners: bool,
}

impl GridSample {
    fn params(&self, cx: &InferCx) -> R<(tp::GridSample, Vec<usize>)> {
        let xs = cx.shape(0)?;
        let gs = cx.shape(1)?;
        let r = xs.len().saturating_sub(2);
        if xs.len() < 3 || xs.len() > tp::RANK {
            return Err(format!(
                "X has shape {xs:?}; expected [N, C, spatial..] with 1 to {} spatial axes",
                tp::RANK - 2
            ));
        }
        if gs.len() != r + 2 || gs[0] != xs[0] || gs[r + 1] != r {
            return Err(format!(
                "grid has shape {gs:?}; expected [{}, out.., {r}] for X {xs:?}",
                xs[0]
            ));
        }
        let mut shape = vec![xs[0], xs[1]];
        shape.extend_from_slice(&gs[1..=r]);
        let p = tp::GridSample {
            n: xs[0],
            c: xs[1],
            rank: r,
            in_dims: fixed(&xs[2..], 1)?,
            out_dims: fixed(&gs[1..=r], 1)?,
            mode: self.mode,
            padding: self.padding,
            align_corners: self.align_corners,
        };
        Ok((p, shape))
    }
}

impl Operator for GridSample {
    fn name(&self) -> &'static str {
        "GridSample"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        cx.check_type(1, Types::Float)?;
        Ok(vec![Fact::new(d, self.params(cx)?.1)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let (x, g) = (cx.constant(0, "X")?, cx.constant(1, "grid")?);
        let (p, _) = self.params(cx)?;
        let n = outs[0].shape.iter().product();
        // A float32 grid is read as the kernel reads it at run time; others in f64.
        let g64 = g.cast(DType::F64);
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); n];
            match g.values::<f32>() {
                Some(gv) => typed::grid_sample(&p, v, gv, &mut out),
                None => {
                    let gv = g64.values::<f64>().ok_or("grid as f64")?;
                    typed::grid_sample(&p, v, gv, &mut out)
                }
            }
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let (p, _) = self.params(&infer)?;
        let (d, dg) = (cx.dtype(0)?, cx.dtype(1)?);
        let inputs = vec![cx.operand(0)?, cx.operand(1)?];
        let call = TypedCall::new("grid_sample", vec![d, dg], &p).inputs(vec![d, dg]);
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

fn parse_grid_sample(cx: &ParseCx) -> R<super::Op> {
    let a = &cx.attrs;
    let mode = match a.string("mode")?.as_deref() {
        None | Some("linear") | Some("bilinear") => tp::GridSampleMode::Linear,
        Some("nearest") => tp::GridSampleMode::Nearest,
        Some("cubic") | Some("bicubic") => tp::GridSampleMode::Cubic,
        Some(m) => {
            return Err(format!(
                "unsupported mode `{m}` (expected linear, nearest or cubic)"
            ));
        }
    };
    let padding = match a.string("padding_mode")?.as_deref() {
        None | Some("zeros") => tp::GridPadding::Zeros,
        Some("border") => tp::GridPadding::Border,
        Some("reflection") => tp::GridPadding::Reflection,
        Some(m) => {
            return Err(format!(
                "unsupported padding_mode `{m}` (expected zeros, border or reflection)"
            ));
        }
    };
    Ok(Arc::new(GridSample {
        mode,
        padding,
        align_corners: a.flag("align_corners")?,
    }))
}

/// AffineGrid with a constant `size`.
#[derive(Debug, Clone)]
pub struct AffineGrid {
    pub align_corners: bool,
}

impl AffineGrid {
    fn params(&self, cx: &InferCx) -> R<(tp::AffineGrid, Vec<usize>)> {
        let ts = cx.shape(0)?;
        let size = cx.constant(1, "size")?.as_i64();
        let r = match size.len() {
            4 => 2,
            5 => 3,
            _ => {
                return Err(format!(
                    "size {size:?} must be [N, C, H, W] or [N, C, D, H, W]"
                ));
            }
        };
        if size.iter().any(|&v| v < 0) {
            return Err(format!("size {size:?} must not be negative"));
        }
        let size: Vec<usize> = size.iter().map(|&v| v as usize).collect();
        if ts != [size[0], r, r + 1] {
            return Err(format!(
                "theta has shape {ts:?}; expected [{}, {r}, {}] for size {size:?}",
                size[0],
                r + 1
            ));
        }
        let mut shape = vec![size[0]];
        shape.extend_from_slice(&size[2..]);
        shape.push(r);
        let p = tp::AffineGrid {
            n: size[0],
            rank: r,
            size: fixed(&size[2..], 1)?,
            align_corners: self.align_corners,
        };
        Ok((p, shape))
    }
}

impl Operator for AffineGrid {
    fn name(&self) -> &'static str {
        "AffineGrid"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        Ok(vec![Fact::new(d, self.params(cx)?.1)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let t = cx.constant(0, "theta")?;
        let (p, _) = self.params(cx)?;
        let n = outs[0].shape.iter().product();
        let data = dispatch_data!(&t.data, v: T => {
            let mut out = vec![T::default(); n];
            typed::affine_grid(&p, v, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let (p, _) = self.params(&infer)?;
        let d = cx.dtype(0)?;
        let t = cx.operand(0)?;
        cx.typed(TypedCall::new("affine_grid", vec![d], &p), vec![t], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// CenterCropPad: one `pad` (constant 0) whose negative begin crops.
#[derive(Debug, Clone)]
pub struct CenterCropPad {
    pub axes: Option<Vec<i64>>,
}

impl CenterCropPad {
    fn params(&self, cx: &InferCx) -> R<tp::Pad> {
        let s = cx.shape(0)?;
        let r = s.len();
        if r > tp::RANK {
            return Err(format!("rank {r} exceeds {}", tp::RANK));
        }
        let target = cx.constant(1, "shape")?.as_i64();
        let axes = match &self.axes {
            Some(a) => axes_of(a, r)?,
            None => (0..r).collect(),
        };
        if target.len() != axes.len() {
            return Err(format!(
                "shape {target:?} must have one value per axis ({} axes)",
                axes.len()
            ));
        }
        let mut p = tp::Pad {
            rank: r,
            in_shape: fixed(s, 1)?,
            out_shape: fixed(s, 1)?,
            begin: [0; tp::RANK],
            mode: tp::PadMode::Constant,
        };
        for (&a, &t) in axes.iter().zip(&target) {
            if t < 0 {
                return Err(format!("shape {target:?} must not be negative"));
            }
            let (t, dim) = (t as usize, s[a]);
            p.out_shape[a] = t;
            p.begin[a] = if t < dim {
                -(((dim - t) / 2) as isize)
            } else {
                ((t - dim) / 2) as isize
            };
        }
        Ok(p)
    }
}

impl Operator for CenterCropPad {
    fn name(&self) -> &'static str {
        "CenterCropPad"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let p = self.params(cx)?;
        Ok(vec![Fact::new(
            cx.dtype(0)?,
            p.out_shape[..p.rank].to_vec(),
        )])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "input_data")?;
        let p = self.params(cx)?;
        let n = outs[0].shape.iter().product();
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); n];
            typed::pad(&p, v, &[T::default()], &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let p = self.params(&infer)?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        let zero = Tensor::new(vec![1], Data::zeros(d, 1));
        let v = cx.weight(&format!("{}:pad_value", cx.node.name), &zero);
        cx.typed(TypedCall::new("pad", vec![d], &p), vec![x, v], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// Col2Im with constant `image_shape` and `block_shape`.
#[derive(Debug, Clone)]
pub struct Col2Im {
    pub dilations: Option<Vec<usize>>,
    pub pads: Option<Vec<usize>>,
    pub strides: Option<Vec<usize>>,
}

impl Col2Im {
    fn params(&self, cx: &InferCx) -> R<(tp::Col2Im, Vec<usize>)> {
        let xs = cx.shape(0)?;
        let image = cx.constant(1, "image_shape")?.as_i64();
        let block = cx.constant(2, "block_shape")?.as_i64();
        let r = image.len();
        if r == 0 || r > tp::RANK || block.len() != r {
            return Err(format!(
                "image_shape {image:?} and block_shape {block:?} must have the same length, \
                 1 to {}",
                tp::RANK
            ));
        }
        if image.iter().chain(&block).any(|&v| v < 1) {
            return Err(format!(
                "image_shape {image:?} and block_shape {block:?} must be positive"
            ));
        }
        let image: Vec<usize> = image.iter().map(|&v| v as usize).collect();
        let block: Vec<usize> = block.iter().map(|&v| v as usize).collect();
        let dil = self.dilations.clone().unwrap_or_else(|| vec![1; r]);
        let str_ = self.strides.clone().unwrap_or_else(|| vec![1; r]);
        let pads = self.pads.clone().unwrap_or_else(|| vec![0; 2 * r]);
        if dil.len() != r || str_.len() != r || pads.len() != 2 * r {
            return Err(format!(
                "dilations {dil:?}, strides {str_:?} and pads {pads:?} must have {r}, {r} and \
                 {} values",
                2 * r
            ));
        }
        if dil.iter().chain(&str_).any(|&v| v == 0) {
            return Err("dilations and strides must be positive".into());
        }
        let mut cols = Vec::new();
        for d in 0..r {
            let span = dil[d] * (block[d] - 1) + 1;
            let padded = image[d] + pads[d] + pads[d + r];
            if padded < span {
                return Err(format!(
                    "block {block:?} with dilations {dil:?} does not fit image {image:?} \
                     padded by {pads:?}"
                ));
            }
            cols.push((padded - span) / str_[d] + 1);
        }
        let k: usize = block.iter().product();
        let l: usize = cols.iter().product();
        if xs.len() != 3 || xs[1] % k != 0 || xs[2] != l {
            return Err(format!(
                "input has shape {xs:?}; expected [N, C·{k}, {l}] for image {image:?}, \
                 block {block:?}"
            ));
        }
        let c = xs[1] / k;
        let mut shape = vec![xs[0], c];
        shape.extend_from_slice(&image);
        let p = tp::Col2Im {
            n: xs[0],
            c,
            rank: r,
            image: fixed(&image, 1)?,
            block: fixed(&block, 1)?,
            cols: fixed(&cols, 1)?,
            strides: fixed(&str_, 1)?,
            dilations: fixed(&dil, 1)?,
            pads: fixed(&pads[..r], 0)?,
        };
        Ok((p, shape))
    }
}

impl Operator for Col2Im {
    fn name(&self) -> &'static str {
        "Col2Im"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Numeric)?;
        Ok(vec![Fact::new(d, self.params(cx)?.1)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "input")?;
        let (p, _) = self.params(cx)?;
        let n = outs[0].shape.iter().product();
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); n];
            typed::col2im(&p, v, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let (p, _) = self.params(&infer)?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        cx.typed(TypedCall::new("col2im", vec![d], &p), vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "Resize",
        since: 10,
        types: Types::Numeric,
        cuda: false,
        parse: parse_resize,
    },
    OpDef {
        name: "Upsample",
        since: 7,
        types: Types::Numeric,
        cuda: false,
        parse: parse_resize,
    },
    OpDef {
        name: "GridSample",
        since: 16,
        types: Types::Float,
        cuda: false,
        parse: parse_grid_sample,
    },
    OpDef {
        name: "AffineGrid",
        since: 20,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(AffineGrid {
                align_corners: cx.attrs.flag("align_corners")?,
            }))
        },
    },
    OpDef {
        name: "CenterCropPad",
        since: 18,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(CenterCropPad {
                axes: cx.attrs.ints("axes")?,
            }))
        },
    },
    OpDef {
        name: "Col2Im",
        since: 18,
        types: Types::Numeric,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Col2Im {
                dilations: cx.attrs.usizes("dilations")?,
                pads: cx.attrs.usizes("pads")?,
                strides: cx.attrs.usizes("strides")?,
            }))
        },
    },
];
