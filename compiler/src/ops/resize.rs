//! Resampling: Resize and Upsample (per-axis tap tables, one generic kernel),
//! GridSample, AffineGrid, CenterCropPad (the `pad` kernel: a negative begin crops)
//! and Col2Im. Semantics follow the onnx reference (`op_resize.py`, ...). Resize's
//! tables come from `kiln_runtime::typed::resize_tables`: built here and embedded for
//! a fixed shape, or built by the kernel on each run where a build over declared
//! ranges makes them follow the shape.

use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::{
    Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, ParseCx, R, Types, checkable_shape, fixed,
    normalize_axis,
};
use crate::dim::{Dim, dims_of, fmt_dims};
use crate::lower::TypedCall;
use crate::tensor::{DType, Data, Scalar, Tensor};
use crate::{dispatch_data, impl_as_any};

use tp::{NearestRounding as NearestMode, ResizeCoord as Coord, ResizeMode as Mode};

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

/// What sets Resize's output size (constants: their values are output dims).
enum Target {
    /// A scale per dim, full rank (1 on the axes not resized).
    Scales(Vec<f64>),
    /// A size per resized axis.
    Sizes(Vec<i64>),
}

/// `floor(scale * d)` as the kernels' tables compute it (`(scale * d as f64) as usize`),
/// over a symbolic `d` when `scale` is `m / 2^k` (then the product is exact in `f64`);
/// another scale of a symbolic dim needs its value.
fn scaled_dim(d: &Dim, scale: f64, axis: usize) -> R<Dim> {
    if let Some(v) = d.to_usize() {
        return Ok(Dim::from((scale * v as f64) as usize));
    }
    for k in 0..=20u32 {
        let m = scale * f64::from(1u32 << k);
        if m.fract() == 0.0 && m > 0.0 && m < f64::from(1u32 << 30) {
            return Ok((d.clone() * m as usize).div_floor(1u64 << k));
        }
    }
    Err(format!(
        "scale {scale} of axis {axis} is not a fraction m/2^k, so the output size needs dim {d} known at compile time"
    ))
}

impl Resize {
    /// The resized axes and what sets their size, checked.
    fn target(&self, cx: &InferCx, r: usize) -> R<(Vec<usize>, Target)> {
        let axes = match &self.axes {
            Some(a) => axes_of(a, r)?,
            None => (0..r).collect(),
        };
        let (scales, sizes): (Option<Vec<f64>>, Option<Vec<i64>>) = match &self.inputs {
            Inputs::ScalesAttr(v) => (Some(v.iter().map(|&x| x as f64).collect()), None),
            Inputs::ScalesInput => (Some(cx.constant(1, "scales")?.as_f64()), None),
            Inputs::Modern => {
                // An empty tensor stands for an absent input.
                let present = |i: usize| {
                    cx.opt(i)
                        .is_some_and(|v| !v.dims().iter().product::<Dim>().is(0))
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
        let target = match (scales, sizes) {
            (Some(_), Some(_)) => return Err("only one of scales and sizes may be given".into()),
            (None, None) => return Err("one of scales and sizes must be given".into()),
            (Some(sc), None) => {
                if sc.len() != n {
                    return Err(format!("scales {sc:?} must have {n} values (one per axis)"));
                }
                let mut scale = vec![1.0f64; r];
                for (k, &a) in axes.iter().enumerate() {
                    if !(sc[k] > 0.0 && sc[k].is_finite()) {
                        return Err(format!("scales {sc:?} must be positive"));
                    }
                    scale[a] = sc[k];
                }
                Target::Scales(scale)
            }
            (None, Some(sz)) => {
                if sz.len() != n {
                    return Err(format!("sizes {sz:?} must have {n} values (one per axis)"));
                }
                if sz.iter().any(|&v| v < 0) {
                    return Err(format!("sizes {sz:?} must not be negative"));
                }
                Target::Sizes(sz)
            }
        };
        Ok((axes, target))
    }

    /// For sizes: each resized axis's scale and output size, from its input size
    /// (`s_axes`, one per axis), with the aspect policy applied.
    fn sized(&self, axes: &[usize], s_axes: &[usize], sz: &[i64]) -> R<(Vec<f64>, Vec<usize>)> {
        let mut scale = Vec::with_capacity(axes.len());
        let mut out = Vec::with_capacity(axes.len());
        for ((&a, &s), &t) in axes.iter().zip(s_axes).zip(sz) {
            if s == 0 {
                return Err(format!("cannot resize axis {a} of size 0"));
            }
            out.push(t as usize);
            scale.push(t as f64 / s as f64);
        }
        if self.policy != AspectPolicy::Stretch {
            let it = scale.iter().copied();
            let sc = if self.policy == AspectPolicy::NotLarger {
                it.fold(f64::INFINITY, f64::min)
            } else {
                it.fold(f64::NEG_INFINITY, f64::max)
            };
            for (k, &s) in s_axes.iter().enumerate() {
                scale[k] = sc;
                out[k] = (sc * s as f64 + 0.5) as usize;
            }
        }
        Ok((scale, out))
    }

    /// The crop region for `tf_crop_and_resize` (full rank: begins, then ends).
    fn roi(&self, cx: &InferCx, r: usize, axes: &[usize]) -> R<Option<Vec<f64>>> {
        if self.coord != Coord::TfCropAndResize {
            return Ok(None);
        }
        let n = axes.len();
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
        Ok(Some(full))
    }

    /// The output dims over the input's (symbolic where they are, and the scale allows).
    fn out_dims(&self, cx: &InferCx) -> R<Vec<Dim>> {
        let s = cx.dims(0)?;
        let r = s.len();
        if r > tp::RANK {
            return Err(format!("rank {r} exceeds {}", tp::RANK));
        }
        let (axes, target) = self.target(cx, r)?;
        self.roi(cx, r, &axes)?;
        match target {
            Target::Scales(scale) => (0..r).map(|d| scaled_dim(&s[d], scale[d], d)).collect(),
            Target::Sizes(sz) => {
                let mut out = s.to_vec();
                if self.policy == AspectPolicy::Stretch {
                    for (&a, &t) in axes.iter().zip(&sz) {
                        if s[a].is(0) {
                            return Err(format!("cannot resize axis {a} of size 0"));
                        }
                        out[a] = Dim::from(t);
                    }
                } else {
                    // The common scale is a ratio of the input sizes: they must be known.
                    let known = checkable_shape(s, &axes)?;
                    let s_axes: Vec<usize> = axes.iter().map(|&a| known[a]).collect();
                    let (_, sized) = self.sized(&axes, &s_axes, &sz)?;
                    for (&a, v) in axes.iter().zip(sized) {
                        out[a] = Dim::from(v);
                    }
                }
                Ok(out)
            }
        }
    }

    /// The per-axis scales, output shape and crop region (full rank) of a fixed input.
    #[allow(clippy::type_complexity)]
    fn geometry(&self, cx: &InferCx) -> R<(Vec<f64>, Vec<usize>, Option<Vec<f64>>)> {
        let s = cx.shape(0)?;
        let r = s.len();
        let (axes, target) = self.target(cx, r)?;
        let mut out: Vec<usize> = s.to_vec();
        let scale = match target {
            Target::Scales(scale) => {
                for d in 0..r {
                    out[d] = (scale[d] * s[d] as f64) as usize;
                }
                scale
            }
            Target::Sizes(sz) => {
                let s_axes: Vec<usize> = axes.iter().map(|&a| s[a]).collect();
                let (sc, sized) = self.sized(&axes, &s_axes, &sz)?;
                let mut scale = vec![1.0f64; r];
                for (k, &a) in axes.iter().enumerate() {
                    scale[a] = sc[k];
                    out[a] = sized[k];
                }
                scale
            }
        };
        let roi = self.roi(cx, r, &axes)?;
        Ok((scale, out, roi))
    }

    /// The kernel's shapes (tables not yet built) and how it samples, for a fixed input.
    fn sampled(&self, cx: &InferCx) -> R<(tp::Resize, tp::ResizeSampling)> {
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
        let mut sampling = tp::ResizeSampling {
            mode: self.mode,
            coord: self.coord,
            nearest: self.nearest,
            cubic_a: self.cubic_a,
            exclude_outside: self.exclude_outside,
            antialias: self.antialias,
            resized: [false; tp::RANK],
            scale: [1.0; tp::RANK],
            roi_begin: [0.0; tp::RANK],
            roi_end: [1.0; tp::RANK],
        };
        sampling.scale[..r].copy_from_slice(&scale);
        if let Some(roi) = roi {
            sampling.roi_begin[..r].copy_from_slice(&roi[..r]);
            sampling.roi_end[..r].copy_from_slice(&roi[r..]);
        }
        for &a in &axes {
            sampling.resized[a] = true;
            // An antialiased kernel widens as the scale shrinks.
            let taps = sampling.kernel_taps(a);
            if taps > MAX_TAPS {
                return Err(format!(
                    "scale {} of axis {a} needs an antialiasing kernel of {taps} taps, more than {MAX_TAPS}",
                    scale[a]
                ));
            }
        }
        let p = tp::Resize {
            rank: r,
            in_shape: fixed(s, 1)?,
            out_shape: fixed(&out, 1)?,
            taps: [1; tp::RANK],
            offset: [0; tp::RANK],
            extrapolation: self.extrapolation,
        };
        Ok((p, sampling))
    }

    /// The kernel parameters and its tap tables (indices, weights) for a fixed input.
    fn plan(&self, cx: &InferCx) -> R<(tp::Resize, Vec<i64>, Vec<f64>)> {
        let (mut p, sampling) = self.sampled(cx)?;
        let n = sampling.table_bound(&p);
        let (mut idx, mut w) = (vec![0; n], vec![0.0; n]);
        let len =
            typed::resize_tables(&mut p, &sampling, &mut idx, &mut w).map_err(|e| e.to_string())?;
        idx.truncate(len.max(1));
        w.truncate(len.max(1));
        Ok((p, idx, w))
    }
}

/// The widest antialiasing kernel accepted (a scale of about 1/32,000).
const MAX_TAPS: usize = 1 << 16;

impl Operator for Resize {
    fn name(&self) -> &'static str {
        if self.upsample { "Upsample" } else { "Resize" }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Numeric)?;
        Ok(vec![Fact::new(d, self.out_dims(cx)?)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "X")?;
        let (p, idx, w) = self.plan(cx)?;
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
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        if cx.shapes_vary() {
            // The tables follow the run's shapes: built by the kernel, into scratch.
            let (mut resize, sampling) = self.sampled(&infer)?;
            let scratch = 2 * sampling.table_bound(&resize);
            (resize.taps, resize.offset) = ([0; tp::RANK], [0; tp::RANK]);
            let p = tp::ResizeSampled { resize, sampling };
            let call = TypedCall::new("resize_sampled", vec![d], &p);
            let n = cx.out(0)?.len();
            return cx.typed_with_scratch(call, vec![x], &[(0, d, n)], (DType::F64, scratch));
        }
        let (p, idx, w) = self.plan(&infer)?;
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

/// GridSample's output dims `[N, C, out..]` for input `xs` (`[N, C, in..]`) and grid
/// `gs` (`[N, out.., r]`).
fn grid_sample_dims(xs: &[Dim], gs: &[Dim]) -> R<Vec<Dim>> {
    let r = xs.len().saturating_sub(2);
    if xs.len() < 3 || xs.len() > tp::RANK {
        return Err(format!(
            "X has shape {}; expected [N, C, spatial..] with 1 to {} spatial axes",
            fmt_dims(xs),
            tp::RANK - 2
        ));
    }
    if gs.len() != r + 2 || gs[0] != xs[0] || gs[r + 1] != r {
        return Err(format!(
            "grid has shape {}; expected [{}, out.., {r}] for X {}",
            fmt_dims(gs),
            xs[0],
            fmt_dims(xs)
        ));
    }
    let mut out = xs[..2].to_vec();
    out.extend_from_slice(&gs[1..=r]);
    Ok(out)
}

impl GridSample {
    fn params(&self, cx: &InferCx) -> R<tp::GridSample> {
        let xs = cx.shape(0)?;
        let gs = cx.shape(1)?;
        grid_sample_dims(&dims_of(xs), &dims_of(gs))?;
        let r = xs.len() - 2;
        Ok(tp::GridSample {
            n: xs[0],
            c: xs[1],
            rank: r,
            in_dims: fixed(&xs[2..], 1)?,
            out_dims: fixed(&gs[1..=r], 1)?,
            mode: self.mode,
            padding: self.padding,
            align_corners: self.align_corners,
        })
    }
}

impl Operator for GridSample {
    fn name(&self) -> &'static str {
        "GridSample"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        cx.check_type(1, Types::Float)?;
        Ok(vec![Fact::new(
            d,
            grid_sample_dims(cx.dims(0)?, cx.dims(1)?)?,
        )])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let (x, g) = (cx.constant(0, "X")?, cx.constant(1, "grid")?);
        let p = self.params(cx)?;
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
        let p = self.params(&cx.infer_cx())?;
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
    /// The parameters and output shape, both from the constant `size`.
    fn params(&self, cx: &InferCx) -> R<(tp::AffineGrid, Vec<usize>)> {
        let ts = cx.dims(0)?;
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
        if ts != dims_of(&[size[0], r, r + 1]).as_slice() {
            return Err(format!(
                "theta has shape {}; expected [{}, {r}, {}] for size {size:?}",
                fmt_dims(ts),
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
    /// Each cropped or padded axis with its target size (the constant `shape`), checked
    /// against rank `r`.
    fn targets(&self, cx: &InferCx, r: usize) -> R<Vec<(usize, usize)>> {
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
        if target.iter().any(|&t| t < 0) {
            return Err(format!("shape {target:?} must not be negative"));
        }
        Ok(axes
            .into_iter()
            .zip(target.iter().map(|&t| t as usize))
            .collect())
    }

    /// The output dims: the input's with each target size on its axis.
    fn out_dims(&self, cx: &InferCx) -> R<Vec<Dim>> {
        let mut out = cx.dims(0)?.to_vec();
        for (a, t) in self.targets(cx, out.len())? {
            out[a] = Dim::from(t);
        }
        Ok(out)
    }

    fn params(&self, cx: &InferCx) -> R<tp::Pad> {
        let s = cx.shape(0)?;
        let r = s.len();
        let targets = self.targets(cx, r)?;
        let mut p = tp::Pad {
            rank: r,
            in_shape: fixed(s, 1)?,
            out_shape: fixed(s, 1)?,
            begin: [0; tp::RANK],
            mode: tp::PadMode::Constant,
        };
        for (a, t) in targets {
            let dim = s[a];
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
        Ok(vec![Fact::new(cx.dtype(0)?, self.out_dims(cx)?)])
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

/// Col2Im's geometry, from its constant inputs and attributes.
struct Col2ImGeometry {
    image: Vec<usize>,
    block: Vec<usize>,
    cols: Vec<usize>,
    dilations: Vec<usize>,
    strides: Vec<usize>,
    pads: Vec<usize>,
}

impl Col2ImGeometry {
    /// The output dims for input `xs` (`[N, C·block elements, blocks]`). The channel
    /// count must divide by the block's elements, checked when known (a symbolic one is
    /// divided term by term where it can be, `(4*C)/4 = C`, or floored).
    fn out_dims(&self, xs: &[Dim]) -> R<Vec<Dim>> {
        let k: usize = self.block.iter().product();
        let l: usize = self.cols.iter().product();
        let divides = xs
            .get(1)
            .is_some_and(|c| c.known().is_none_or(|c| c % k as i64 == 0));
        if xs.len() != 3 || !divides || xs[2] != l {
            return Err(format!(
                "input has shape {}; expected [N, C·{k}, {l}] for image {:?}, block {:?}",
                fmt_dims(xs),
                self.image,
                self.block
            ));
        }
        let kd = Dim::from(k);
        let c = xs[1]
            .div_exact(&kd)
            .unwrap_or_else(|| xs[1].div_floor(k as u64));
        let mut out = vec![xs[0].clone(), c];
        out.extend(dims_of(&self.image));
        Ok(out)
    }
}

impl Col2Im {
    fn geometry(&self, cx: &InferCx) -> R<Col2ImGeometry> {
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
        Ok(Col2ImGeometry {
            image,
            block,
            cols,
            dilations: dil,
            strides: str_,
            pads,
        })
    }

    fn params(&self, cx: &InferCx) -> R<tp::Col2Im> {
        let xs = cx.shape(0)?;
        let g = self.geometry(cx)?;
        g.out_dims(&dims_of(xs))?;
        let r = g.image.len();
        let k: usize = g.block.iter().product();
        Ok(tp::Col2Im {
            n: xs[0],
            c: xs[1] / k,
            rank: r,
            image: fixed(&g.image, 1)?,
            block: fixed(&g.block, 1)?,
            cols: fixed(&g.cols, 1)?,
            strides: fixed(&g.strides, 1)?,
            dilations: fixed(&g.dilations, 1)?,
            pads: fixed(&g.pads[..r], 0)?,
        })
    }
}

impl Operator for Col2Im {
    fn name(&self) -> &'static str {
        "Col2Im"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Numeric)?;
        Ok(vec![Fact::new(
            d,
            self.geometry(cx)?.out_dims(cx.dims(0)?)?,
        )])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "input")?;
        let p = self.params(cx)?;
        let n = outs[0].shape.iter().product();
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); n];
            typed::col2im(&p, v, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(outs[0].shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
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

#[cfg(test)]
mod dims_tests {
    use super::*;
    use crate::ops::index::dims_tests::{In, dims, err, f32s, infer, int_const, one};

    fn resize(axes: Option<Vec<i64>>, policy: AspectPolicy) -> Resize {
        Resize {
            upsample: false,
            inputs: Inputs::Modern,
            mode: Mode::Linear,
            coord: Coord::HalfPixel,
            nearest: NearestMode::RoundPreferFloor,
            cubic_a: -0.75,
            exclude_outside: false,
            extrapolation: 0.0,
            antialias: false,
            axes,
            policy,
        }
    }

    fn scales(v: &[f32]) -> In {
        In::Const(Tensor::from_vec(vec![v.len()], v.to_vec()))
    }

    #[test]
    fn scales_that_are_binary_fractions_keep_symbols() {
        let op = resize(None, AspectPolicy::Stretch);
        let ins = vec![f32s("N,C,H,W"), In::Absent, scales(&[1.0, 1.0, 2.0, 0.5])];
        let out = one(infer(op.clone(), ins, 1));
        let (h, w) = (Dim::sym("H"), Dim::sym("W"));
        assert_eq!(
            out,
            vec![Dim::sym("N"), Dim::sym("C"), h * 2, w.div_floor(2)]
        );
        // 1.5 = 3/2: floor(3W / 2), as the tables compute (1.5 * W) for every W.
        let ins = vec![f32s("N,W"), In::Absent, scales(&[1.0, 1.5])];
        let out = one(infer(op.clone(), ins, 1));
        let got = &out[1];
        for v in [1i64, 2, 3, 7, 100, 1001] {
            let want = (1.5f64 * v as f64) as i64;
            assert_eq!(
                got.eval(&|s| (s == "W").then_some(v)),
                Some(want),
                "W = {v}"
            );
        }
        // 1/3 is no binary fraction: a symbolic dim cannot be scaled by it exactly.
        let third = 1.0f32 / 3.0;
        let ins = vec![f32s("N,W"), In::Absent, scales(&[1.0, third])];
        let e = err(infer(op.clone(), ins, 1));
        assert!(e.contains("needs dim W known"), "{e}");
        let ins = vec![f32s("N,9"), In::Absent, scales(&[1.0, third])];
        assert_eq!(one(infer(op, ins, 1)), dims("N,3"));
    }

    #[test]
    fn sizes_set_resized_axes() {
        let op = resize(Some(vec![2, 3]), AspectPolicy::Stretch);
        let sizes = || int_const(vec![2], vec![64, 48]);
        let ins = vec![f32s("N,C,H,W"), In::Absent, In::Absent, sizes()];
        assert_eq!(one(infer(op, ins, 1)), dims("N,C,64,48"));
        // Keeping the aspect ratio reads the input sizes.
        let op = resize(Some(vec![2, 3]), AspectPolicy::NotLarger);
        let ins = vec![f32s("N,C,H,W"), In::Absent, In::Absent, sizes()];
        assert!(err(infer(op.clone(), ins, 1)).contains("must be known at compile time"));
        let ins = vec![f32s("N,C,32,32"), In::Absent, In::Absent, sizes()];
        assert_eq!(one(infer(op, ins, 1)), dims("N,C,48,48"));
    }

    #[test]
    fn out_dims_match_the_tables_on_fixed_shapes() {
        // The tables' output shape (lowering) against inference's, for every policy.
        for policy in [
            AspectPolicy::Stretch,
            AspectPolicy::NotLarger,
            AspectPolicy::NotSmaller,
        ] {
            let op = resize(Some(vec![1, 2]), policy);
            let ins = vec![
                f32s("2,5,7"),
                In::Absent,
                In::Absent,
                int_const(vec![2], vec![3, 11]),
            ];
            let inferred = one(infer(op.clone(), ins, 1));
            let mut g = crate::ir::Graph::default();
            let mut x = crate::ir::Value::unknown("x".into(), DType::F32);
            x.set_dims(dims("2,5,7"));
            let x = g.add_value(x);
            let sizes = g.add_value(crate::ir::Value::constant(
                "sizes".into(),
                Tensor::i64(vec![2], vec![3, 11]),
            ));
            let node = crate::ir::Node {
                name: "n".into(),
                op: Arc::new(op.clone()),
                inputs: vec![Some(x), None, None, Some(sizes)],
                outputs: vec![],
            };
            let cx = InferCx {
                graph: &g,
                node: &node,
            };
            let (p, _, _) = op.plan(&cx).unwrap();
            assert_eq!(inferred, dims_of(&p.out_shape[..3]), "{policy:?}");
        }
    }

    #[test]
    fn grid_sample_affine_grid_center_crop_col2im() {
        let gs = GridSample {
            mode: tp::GridSampleMode::Linear,
            padding: tp::GridPadding::Zeros,
            align_corners: false,
        };
        let out = one(infer(gs.clone(), vec![f32s("N,C,H,W"), f32s("N,P,Q,2")], 1));
        assert_eq!(out, dims("N,C,P,Q"));
        let e = err(infer(gs, vec![f32s("N,C,H,W"), f32s("M,P,Q,2")], 1));
        assert!(e.contains("expected [N, out.., 2]"), "{e}");

        let ag = AffineGrid {
            align_corners: false,
        };
        let size = || int_const(vec![4], vec![2, 3, 8, 6]);
        assert_eq!(
            one(infer(ag.clone(), vec![f32s("2,2,3"), size()], 1)),
            dims("2,8,6,2")
        );
        let e = err(infer(ag, vec![f32s("N,2,3"), size()], 1));
        assert!(
            e.contains("theta has shape [N, 2, 3]; expected [2, 2, 3]"),
            "{e}"
        );

        let ccp = CenterCropPad {
            axes: Some(vec![-2, -1]),
        };
        let target = int_const(vec![2], vec![10, 12]);
        assert_eq!(
            one(infer(ccp, vec![f32s("N,H,W,3"), target], 1)),
            dims("N,H,10,12")
        );

        let c2i = Col2Im {
            dilations: None,
            pads: None,
            strides: None,
        };
        // Image 4x5, block 2x2: 3x4 = 12 blocks of 4 elements.
        let consts = || {
            vec![
                int_const(vec![2], vec![4, 5]),
                int_const(vec![2], vec![2, 2]),
            ]
        };
        let mut ins = vec![x4("N", "12")];
        ins.extend(consts());
        let out = one(infer(c2i.clone(), ins, 1));
        assert_eq!(
            out,
            vec![Dim::sym("N"), Dim::sym("C"), 4usize.into(), 5usize.into()]
        );
        let mut ins = vec![f32s("N,6,12")];
        ins.extend(consts());
        assert!(err(infer(c2i.clone(), ins, 1)).contains("expected [N, C·4, 12]"));
        let mut ins = vec![f32s("N,8,L")];
        ins.extend(consts());
        assert!(err(infer(c2i, ins, 1)).contains("input has shape [N, 8, L]"));
    }

    /// `[n, 4*C, blocks]`.
    fn x4(n: &str, blocks: &str) -> In {
        let mut d = dims(n);
        d.push(Dim::sym("C") * 4);
        d.extend(dims(blocks));
        In::Dims(DType::F32, d)
    }
}
