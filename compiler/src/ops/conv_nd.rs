//! Convolution and pooling beyond the tuned rank-4 float32 kernels: any number of
//! spatial dimensions and any element type the operator allows, on the typed direct
//! kernels of `kiln_runtime::typed::conv`. [`super::conv`] calls these when its fast
//! path does not apply, and declares the operators that only exist here
//! (ConvTranspose, LpPool, MaxUnpool).

use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::{Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, R, Types, checkable_shape};
use crate::dim::{Dim, fixed_shape, fmt_dims};
use crate::ir::{Activation, AutoPad, Window};
use crate::lower::TypedCall;
use crate::tensor::{DType, Data, Scalar, Tensor};
use crate::window::{self, Spatial};
use crate::{dispatch_data, impl_as_any};

/// Checks that a rank-`len` tensor fits the typed kernels' index space.
fn check_rank(what: &str, shape: &[usize]) -> R<()> {
    if shape.len() < 3 || shape.len() > tp::RANK {
        return Err(format!(
            "{what} must have rank 3 to {} ([N, C, spatial..]), got {shape:?}",
            tp::RANK
        ));
    }
    Ok(())
}

/// The geometry of a convolution of `xs` by a weight with `c_out` output channels.
pub(crate) fn geom(xs: &[usize], c_out: usize, group: usize, sp: &Spatial) -> tp::ConvGeom {
    let d = xs.len() - 2;
    let mut g = tp::ConvGeom {
        n: xs[0],
        c_in: xs[1],
        c_out,
        group,
        dims: d,
        in_shape: [1; tp::RANK],
        out_shape: [1; tp::RANK],
        kernel: [1; tp::RANK],
        strides: [1; tp::RANK],
        dilations: [1; tp::RANK],
        pads: [0; tp::RANK],
    };
    g.in_shape[..d].copy_from_slice(&xs[2..]);
    g.out_shape[..d].copy_from_slice(&sp.out);
    g.kernel[..d].copy_from_slice(&sp.kernel);
    g.strides[..d].copy_from_slice(&sp.strides);
    g.dilations[..d].copy_from_slice(&sp.dilations);
    for j in 0..d {
        g.pads[j] = sp.pads_begin[j] as isize;
    }
    g
}

/// Channel and group checks shared by Conv, ConvInteger and QLinearConv: input `xs`,
/// weight `ws` (`[c_out, c_in / group, kernel..]`).
pub(crate) fn check_conv(xs: &[usize], ws: &[usize], group: usize) -> R<()> {
    check_rank("the input", xs)?;
    if ws.len() != xs.len() {
        return Err(format!(
            "the weight {ws:?} must have the input's rank {} (input {xs:?})",
            xs.len()
        ));
    }
    if group > xs[1].max(1) {
        return Err(format!(
            "group {group} exceeds the input's {} channels",
            xs[1]
        ));
    }
    if ws[1].checked_mul(group) != Some(xs[1]) {
        return Err(format!(
            "input has {} channels, weight {ws:?} with group {group} expects {}",
            xs[1],
            ws[1].saturating_mul(group)
        ));
    }
    if !ws[0].is_multiple_of(group) {
        return Err(format!(
            "weight {ws:?} has {} output channels, not a multiple of group {group}",
            ws[0]
        ));
    }
    Ok(())
}

/// The output shape `[N, c_out, spatial..]` of a convolution and its window.
pub(crate) fn conv_window(w: &Window, xs: &[usize], ws: &[usize]) -> R<(Vec<usize>, Spatial)> {
    let sp = window::resolve(w, &xs[2..], Some(&ws[2..]), false)?;
    let mut out = vec![xs[0], ws[0]];
    out.extend_from_slice(&sp.out);
    Ok((out, sp))
}

fn activation(a: Option<Activation>) -> tp::ConvActivation {
    match a {
        None => tp::ConvActivation::None,
        Some(Activation::Relu) => tp::ConvActivation::Relu,
        Some(Activation::LeakyRelu { alpha }) => tp::ConvActivation::LeakyRelu { alpha },
        Some(Activation::Clip { min, max }) => tp::ConvActivation::Clip { min, max },
        Some(Activation::Sigmoid) => tp::ConvActivation::Sigmoid,
        Some(Activation::HardSigmoid { alpha, beta }) => {
            tp::ConvActivation::HardSigmoid { alpha, beta }
        }
        Some(Activation::HardSwish) => tp::ConvActivation::HardSwish,
        Some(Activation::Swish { alpha }) => tp::ConvActivation::Swish { alpha },
    }
}

/// Conv's inference for what the tuned path does not take: 1-D to 6-D, float types.
pub(super) fn infer_conv(w: &Window, group: usize, cx: &InferCx) -> R<Vec<Fact>> {
    let d = cx.check_type(0, Types::Float)?;
    if cx.dtype(1)? != d {
        return Err(format!("the weight is {}, the input {d}", cx.dtype(1)?));
    }
    let (xs, ws) = (cx.dims(0)?, cx.dims(1)?);
    let out = conv_out_dims(w, xs, ws, group)?;
    check_bias(cx, 2, &ws[0])?;
    if let Some(b) = cx.opt(2)
        && b.dtype != d
    {
        return Err(format!("the bias is {}, the input {d}", b.dtype));
    }
    Ok(vec![Fact::new(d, out)])
}

/// Checks that the optional bias operand `i` has shape `[c_out]`.
pub(crate) fn check_bias(cx: &InferCx, i: usize, c_out: &Dim) -> R<()> {
    match cx.opt(i) {
        Some(b) if b.dims() != std::slice::from_ref(c_out) => Err(format!(
            "bias has shape {}, expected [{c_out}]",
            fmt_dims(b.dims())
        )),
        _ => Ok(()),
    }
}

/// [`check_conv`] and the output dims `[N, c_out, spatial..]` over symbolic shapes: the
/// channels and the weight must be known; batch and spatial dims may be symbols.
pub(crate) fn conv_out_dims(w: &Window, xs: &[Dim], ws: &[Dim], group: usize) -> R<Vec<Dim>> {
    let wf = fixed_shape(ws)
        .ok_or_else(|| format!("the weight's shape {} must be known", fmt_dims(ws)))?;
    check_conv(&checkable_shape(xs, &[1])?, &wf, group)?;
    let mut out = vec![xs[0].clone(), ws[0].clone()];
    out.extend(window::out_dims(w, &xs[2..], Some(&ws[2..]), false)?);
    Ok(out)
}

/// Pooling's output dims `[N, C, spatial..]` over symbolic shapes.
pub(crate) fn pool_out_dims(w: &Window, xs: &[Dim]) -> R<Vec<Dim>> {
    check_rank("the input", &checkable_shape(xs, &[1])?)?;
    let mut out = xs[..2].to_vec();
    out.extend(window::out_dims(w, &xs[2..], None, true)?);
    Ok(out)
}

/// The bias operand `i` of a convolution, or zeros of `dtype` when absent.
pub(crate) fn bias_or_zeros(
    cx: &mut LowerCx,
    i: usize,
    dtype: DType,
    c_out: usize,
) -> R<crate::lower::Operand> {
    if cx.opt(i).is_some() {
        cx.operand(i)
    } else {
        let name = format!("{}:zero_bias", cx.node.name);
        Ok(cx.weight(&name, &Tensor::new(vec![c_out], Data::zeros(dtype, c_out))))
    }
}

fn conv_params(
    w: &Window,
    group: usize,
    act: Option<Activation>,
    xs: &[usize],
    ws: &[usize],
) -> R<tp::ConvNd> {
    let (_, sp) = conv_window(w, xs, ws)?;
    Ok(tp::ConvNd {
        geom: geom(xs, ws[0], group, &sp),
        activation: activation(act),
    })
}

pub(super) fn lower_conv(
    w: &Window,
    group: usize,
    act: Option<Activation>,
    cx: &mut LowerCx,
) -> R<()> {
    let d = cx.dtype(0)?;
    let (xs, ws) = (cx.shape(0)?, cx.shape(1)?);
    let p = conv_params(w, group, act, xs, ws)?;
    let x = cx.operand(0)?;
    let wt = cx.operand(1)?;
    let b = bias_or_zeros(cx, 2, d, ws[0])?;
    cx.typed(TypedCall::new("conv_nd", vec![d], &p), vec![x, wt, b], 0)?;
    Ok(())
}

pub(super) fn eval_conv(
    w: &Window,
    group: usize,
    act: Option<Activation>,
    cx: &InferCx,
    outs: &[FixedFact],
) -> R<Option<Vec<Tensor>>> {
    let (x, wt) = (cx.constant(0, "input")?, cx.constant(1, "weight")?);
    let y = &outs[0].shape;
    if !super::foldable(y) {
        return Ok(None);
    }
    let p = conv_params(w, group, act, &x.shape, &wt.shape)?;
    let data = dispatch_data!(&x.data, xv: T => {
        let wv = wt.values::<T>().ok_or("operand types differ")?;
        let zeros = vec![T::default(); wt.shape[0]];
        let bv = match cx.opt(2) {
            Some(_) => cx.constant(2, "bias")?.values::<T>().ok_or("operand types differ")?,
            None => &zeros[..],
        };
        let mut out = vec![T::default(); y.iter().product()];
        typed::conv_nd(&p, xv, wv, bv, &mut out);
        T::wrap(out)
    });
    Ok(Some(vec![Tensor::new(y.clone(), data)]))
}

/// The pooling parameters of `op` over input `xs`.
fn pool_params(
    w: &Window,
    op: tp::PoolOp,
    column_major: bool,
    xs: &[usize],
) -> R<(tp::PoolNd, Vec<usize>)> {
    check_rank("the input", xs)?;
    let sp = window::resolve(w, &xs[2..], None, true)?;
    let d = xs.len() - 2;
    let mut p = tp::PoolNd {
        op,
        planes: xs[0] * xs[1],
        dims: d,
        in_shape: [1; tp::RANK],
        out_shape: [1; tp::RANK],
        kernel: [1; tp::RANK],
        strides: [1; tp::RANK],
        dilations: [1; tp::RANK],
        pads_begin: [0; tp::RANK],
        pads_end: [0; tp::RANK],
        column_major,
    };
    p.in_shape[..d].copy_from_slice(&xs[2..]);
    p.out_shape[..d].copy_from_slice(&sp.out);
    p.kernel[..d].copy_from_slice(&sp.kernel);
    p.strides[..d].copy_from_slice(&sp.strides);
    p.dilations[..d].copy_from_slice(&sp.dilations);
    p.pads_begin[..d].copy_from_slice(&sp.pads_begin);
    p.pads_end[..d].copy_from_slice(&sp.pads_end);
    let mut out = xs[..2].to_vec();
    out.extend_from_slice(&sp.out);
    Ok((p, out))
}

fn pool_op(average: Option<bool>) -> tp::PoolOp {
    match average {
        Some(count_include_pad) => tp::PoolOp::Average { count_include_pad },
        None => tp::PoolOp::Max,
    }
}

/// MaxPool / AveragePool inference off the tuned path: any rank, MaxPool over every
/// numeric type (with its Indices output), AveragePool over floats.
pub(super) fn infer_pool(w: &Window, average: Option<bool>, cx: &InferCx) -> R<Vec<Fact>> {
    let d = cx.check_type(
        0,
        if average.is_some() {
            Types::Float
        } else {
            Types::Numeric
        },
    )?;
    let out = pool_out_dims(w, cx.dims(0)?)?;
    let mut facts = vec![Fact::new(d, out.clone())];
    if cx.n_outputs() > 1 {
        if average.is_some() {
            return Err("AveragePool has one output".into());
        }
        facts.push(Fact::new(DType::I64, out));
    }
    Ok(facts)
}

pub(super) fn lower_pool(
    w: &Window,
    average: Option<bool>,
    column_major: bool,
    cx: &mut LowerCx,
) -> R<()> {
    let d = cx.dtype(0)?;
    let (p, out) = pool_params(w, pool_op(average), column_major, cx.shape(0)?)?;
    let x = cx.operand(0)?;
    let len: usize = out.iter().product();
    if average.is_none() && wants_indices(cx) {
        let call = TypedCall::new("max_pool_indices", vec![d], &p);
        cx.typed_multi(call, vec![x], &[(0, d, len), (1, DType::I64, len)])
    } else {
        cx.typed(TypedCall::new("pool", vec![d], &p), vec![x], 0)
            .map(|_| ())
    }
}

/// Whether the node names MaxPool's second output (Indices).
pub(super) fn wants_indices(cx: &LowerCx) -> bool {
    cx.node
        .outputs
        .get(1)
        .is_some_and(|&v| !cx.graph().value(v).name.contains(":unused"))
}

/// ONNX ConvTranspose over 1 to 6 spatial dimensions.
#[derive(Debug, Clone)]
pub struct ConvTranspose {
    pub window: Window,
    pub group: usize,
    pub output_padding: Option<Vec<usize>>,
    pub output_shape: Option<Vec<usize>>,
}

impl ConvTranspose {
    /// `(output shape, geometry)` for input `xs` and weight `ws`, as the ONNX reference
    /// resolves pads: explicit `pads` (zeros when absent unless `auto_pad` is SAME_*),
    /// an `output_shape` overriding the size (with pads 0 at the start unless SAME_*).
    fn resolve(&self, xs: &[usize], ws: &[usize]) -> R<(Vec<usize>, tp::ConvGeom)> {
        check_rank("the input", xs)?;
        if ws.len() != xs.len() {
            return Err(format!(
                "the weight {ws:?} must have the input's rank {} (input {xs:?})",
                xs.len()
            ));
        }
        let n = xs.len() - 2;
        let group = self.group;
        if ws[0] != xs[1] {
            return Err(format!(
                "weight {ws:?} must have the input's {} channels first",
                xs[1]
            ));
        }
        if !xs[1].is_multiple_of(group) {
            return Err(format!(
                "input channels {} are not a multiple of group {group}",
                xs[1]
            ));
        }
        let w = &self.window;
        let kernel = match &w.kernel_shape {
            Some(k) if k.as_slice() != &ws[2..] => {
                return Err(format!(
                    "kernel_shape {k:?} disagrees with the weight's {:?}",
                    &ws[2..]
                ));
            }
            _ => ws[2..].to_vec(),
        };
        let vec_or = |v: &Option<Vec<usize>>, what: &str, default: usize| -> R<Vec<usize>> {
            match v {
                None => Ok(vec![default; n]),
                Some(v) if v.len() == n => Ok(v.clone()),
                Some(v) => Err(format!(
                    "`{what}` has {} values for {n} spatial dims",
                    v.len()
                )),
            }
        };
        let strides = vec_or(&w.strides, "strides", 1)?;
        let dilations = vec_or(&w.dilations, "dilations", 1)?;
        let output_padding = vec_or(&self.output_padding, "output_padding", 0)?;
        if strides.contains(&0) || dilations.contains(&0) {
            return Err(format!(
                "strides {strides:?} and dilations {dilations:?} must be positive"
            ));
        }
        let output_shape = match &self.output_shape {
            None => None,
            Some(s) if s.len() == n => Some(s.clone()),
            Some(s) if s.len() == n + 2 => Some(s[2..].to_vec()),
            Some(s) => {
                return Err(format!(
                    "`output_shape` has {} values for {n} spatial dims",
                    s.len()
                ));
            }
        };
        let ext: Vec<i64> = (0..n)
            .map(|i| (kernel[i] as i64 - 1) * dilations[i] as i64 + 1)
            .collect();
        let full: Vec<i64> = (0..n)
            .map(|i| strides[i] as i64 * (xs[i + 2] as i64 - 1) + output_padding[i] as i64 + ext[i])
            .collect();
        let same = matches!(w.auto_pad, AutoPad::SameUpper | AutoPad::SameLower);
        let (pads_begin, out): (Vec<i64>, Vec<i64>) = if same && w.pads.is_none() {
            let out: Vec<i64> = match &output_shape {
                Some(s) => s.iter().map(|&v| v as i64).collect(),
                None => (0..n).map(|i| (xs[i + 2] * strides[i]) as i64).collect(),
            };
            let begin = (0..n)
                .map(|i| {
                    let total = full[i] - out[i];
                    if w.auto_pad == AutoPad::SameUpper {
                        total.div_euclid(2)
                    } else {
                        total - total.div_euclid(2)
                    }
                })
                .collect();
            (begin, out)
        } else {
            let pads: Vec<usize> = match (&w.pads, w.auto_pad) {
                (Some(p), AutoPad::NotSet)
                | (Some(p), AutoPad::SameUpper)
                | (Some(p), AutoPad::SameLower) => {
                    if p.len() != 2 * n {
                        return Err(format!(
                            "`pads` has {} values for {n} spatial dims",
                            p.len()
                        ));
                    }
                    p.clone()
                }
                _ => vec![0; 2 * n],
            };
            let out = match &output_shape {
                Some(s) => s.iter().map(|&v| v as i64).collect(),
                None => (0..n)
                    .map(|i| full[i] - pads[i] as i64 - pads[i + n] as i64)
                    .collect(),
            };
            (pads[..n].iter().map(|&v| v as i64).collect(), out)
        };
        if let Some(i) = out.iter().position(|&o| o < 0) {
            return Err(format!(
                "output spatial dim {i} would have negative size {}",
                out[i]
            ));
        }
        let c_out = ws[1]
            .checked_mul(group)
            .ok_or("output channel count overflows")?;
        let mut shape = vec![xs[0], c_out];
        shape.extend(out.iter().map(|&v| v as usize));
        let mut g = tp::ConvGeom {
            n: xs[0],
            c_in: xs[1],
            c_out,
            group,
            dims: n,
            in_shape: [1; tp::RANK],
            out_shape: [1; tp::RANK],
            kernel: [1; tp::RANK],
            strides: [1; tp::RANK],
            dilations: [1; tp::RANK],
            pads: [0; tp::RANK],
        };
        g.in_shape[..n].copy_from_slice(&xs[2..]);
        g.out_shape[..n].copy_from_slice(&shape[2..]);
        g.kernel[..n].copy_from_slice(&kernel);
        g.strides[..n].copy_from_slice(&strides);
        g.dilations[..n].copy_from_slice(&dilations);
        for (p, &b) in g.pads.iter_mut().zip(&pads_begin) {
            *p = b as isize;
        }
        Ok((shape, g))
    }
}

impl Operator for ConvTranspose {
    fn name(&self) -> &'static str {
        "ConvTranspose"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        if cx.dtype(1)? != d {
            return Err(format!("the weight is {}, the input {d}", cx.dtype(1)?));
        }
        // Each output size is linear in its input size (`stride * (x - 1) + ..`), or
        // fixed by `output_shape`: resolve at a stand-in size, then shift by the stride.
        const STAND_IN: usize = 1 << 20;
        let xs = cx.dims(0)?;
        let stand_in: Vec<usize> = checkable_shape(xs, &[1])?
            .iter()
            .zip(xs)
            .enumerate()
            .map(|(i, (&v, d))| if i >= 2 && !d.is_known() { STAND_IN } else { v })
            .collect();
        let (fixed, g) = self.resolve(&stand_in, cx.shape(1)?)?;
        let mut shape = vec![xs[0].clone(), Dim::from(g.c_out)];
        for (i, x) in xs[2..].iter().enumerate() {
            shape.push(if x.is_known() || self.output_shape.is_some() {
                Dim::from(fixed[i + 2])
            } else {
                Dim::from(fixed[i + 2]) + (x.clone() - STAND_IN) * g.strides[i]
            });
        }
        if let Some(b) = cx.opt(2)
            && (b.shape() != [g.c_out] || b.dtype != d)
        {
            return Err(format!(
                "bias is {} {:?}, expected {d} [{}]",
                b.dtype,
                b.shape(),
                g.c_out
            ));
        }
        Ok(vec![Fact::new(d, shape)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let (_, g) = self.resolve(cx.shape(0)?, cx.shape(1)?)?;
        let x = cx.operand(0)?;
        let w = cx.operand(1)?;
        let b = bias_or_zeros(cx, 2, d, g.c_out)?;
        let p = tp::ConvTransposeNd { geom: g };
        if d == DType::F32 && g.dims == 2 {
            // Row by row over matrix products (`kiln_runtime::kernels::conv_transpose`).
            let call = TypedCall::new("conv_transpose_rows", vec![], &p);
            let n = cx.out(0)?.len();
            let scratch = (DType::F32, p.rows_scratch_len());
            return cx.typed_with_scratch(call, vec![x, w, b], &[(0, d, n)], scratch);
        }
        let call = TypedCall::new("conv_transpose", vec![d], &p);
        cx.typed(call, vec![x, w, b], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// ONNX LpPool (`p` an integer power).
#[derive(Debug, Clone)]
pub struct LpPool {
    pub window: Window,
    pub p: i32,
}

impl Operator for LpPool {
    fn name(&self) -> &'static str {
        "LpPool"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        Ok(vec![Fact::new(
            d,
            pool_out_dims(&self.window, cx.dims(0)?)?,
        )])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let (p, _) = pool_params(
            &self.window,
            tp::PoolOp::Lp { p: self.p },
            false,
            cx.shape(0)?,
        )?;
        let x = cx.operand(0)?;
        cx.typed(TypedCall::new("pool", vec![d], &p), vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// ONNX MaxUnpool: values scattered to the positions MaxPool's indices name.
#[derive(Debug, Clone)]
pub struct MaxUnpool {
    pub kernel_shape: Vec<usize>,
    pub strides: Option<Vec<usize>>,
    pub pads: Option<Vec<usize>>,
}

impl MaxUnpool {
    fn shapes(&self, cx: &InferCx) -> R<(Vec<usize>, Vec<usize>)> {
        let xs = cx.shape(0)?;
        check_rank("the input", xs)?;
        if cx.shape(1)? != xs {
            return Err(format!(
                "indices have shape {:?}, the input {xs:?}",
                cx.shape(1)?
            ));
        }
        if cx.dtype(1)? != DType::I64 {
            return Err(format!("indices must be int64, got {}", cx.dtype(1)?));
        }
        let n = xs.len() - 2;
        if self.kernel_shape.len() != n {
            return Err(format!(
                "`kernel_shape` has {} values for {n} spatial dims",
                self.kernel_shape.len()
            ));
        }
        let strides = self.strides.clone().unwrap_or_else(|| vec![1; n]);
        let pads = self.pads.clone().unwrap_or_else(|| vec![0; 2 * n]);
        if strides.len() != n || pads.len() != 2 * n {
            return Err(format!(
                "strides {strides:?} / pads {pads:?} do not fit {n} spatial dims"
            ));
        }
        let mut inferred = xs[..2].to_vec();
        for i in 0..n {
            let v = (xs[i + 2] as i64 - 1) * strides[i] as i64 - (pads[i] + pads[i + n]) as i64
                + self.kernel_shape[i] as i64;
            if v < 0 {
                return Err(format!("output spatial dim {i} would be negative ({v})"));
            }
            inferred.push(v as usize);
        }
        let out = match cx.opt(2) {
            None => inferred.clone(),
            Some(_) => {
                let t = cx.constant(2, "output_shape")?;
                let v = t.as_i64();
                if v.len() != xs.len() || v.iter().any(|&d| d < 0) {
                    return Err(format!(
                        "output_shape {v:?} must give {} non-negative dims",
                        xs.len()
                    ));
                }
                v.iter().map(|&d| d as usize).collect()
            }
        };
        Ok((inferred, out))
    }
}

impl Operator for MaxUnpool {
    fn name(&self) -> &'static str {
        "MaxUnpool"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Numeric)?;
        let (_, out) = self.shapes(cx)?;
        Ok(vec![Fact::new(d, out)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let icx = cx.infer_cx();
        let (inferred, out) = self.shapes(&icx)?;
        let mut p = tp::MaxUnpool {
            rank: out.len(),
            inferred: [1; tp::RANK],
            out_shape: [1; tp::RANK],
        };
        p.inferred[..out.len()].copy_from_slice(&inferred);
        p.out_shape[..out.len()].copy_from_slice(&out);
        let inputs = vec![cx.operand(0)?, cx.operand(1)?];
        let call = TypedCall::new("max_unpool", vec![d], &p)
            .fallible()
            .inputs(vec![d, DType::I64]);
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// GlobalAveragePool for the types the tuned float32 kernel does not take.
pub(super) fn lower_global_average(cx: &mut LowerCx) -> R<()> {
    let d = cx.dtype(0)?;
    let xs = cx.shape(0)?;
    check_rank("the input", xs)?;
    let mut p = tp::Reduce {
        op: tp::ReduceOp::Mean,
        rank: xs.len(),
        in_shape: [1; tp::RANK],
        reduced: [false; tp::RANK],
    };
    p.in_shape[..xs.len()].copy_from_slice(xs);
    for r in &mut p.reduced[2..xs.len()] {
        *r = true;
    }
    let x = cx.operand(0)?;
    cx.typed(TypedCall::new("reduce", vec![d], &p), vec![x], 0)?;
    Ok(())
}

/// ONNX DeformConv over 2-D inputs.
#[derive(Debug, Clone)]
pub struct DeformConv {
    pub window: Window,
    pub group: usize,
    pub offset_group: usize,
}

impl DeformConv {
    fn params(&self, cx: &InferCx) -> R<(Vec<usize>, tp::DeformConv)> {
        let (xs, ws, os) = (cx.shape(0)?, cx.shape(1)?, cx.shape(2)?);
        if xs.len() != 4 {
            return Err(format!(
                "only 2-D DeformConv (rank-4 input) is supported, got {xs:?}"
            ));
        }
        check_conv(xs, ws, self.group)?;
        let og = self.offset_group;
        if !xs[1].is_multiple_of(og) {
            return Err(format!(
                "input channels {} are not a multiple of offset_group {og}",
                xs[1]
            ));
        }
        let (out, sp) = conv_window(&self.window, xs, ws)?;
        let taps = sp.kernel[0] * sp.kernel[1];
        let want = [xs[0], og * 2 * taps, out[2], out[3]];
        if os != want {
            return Err(format!("offset has shape {os:?}, expected {want:?}"));
        }
        if let Some(b) = cx.opt(3)
            && b.shape() != [ws[0]]
        {
            return Err(format!("B has shape {:?}, expected [{}]", b.shape(), ws[0]));
        }
        if let Some(m) = cx.opt(4) {
            let want = [xs[0], og * taps, out[2], out[3]];
            if m.shape() != want {
                return Err(format!("mask has shape {:?}, expected {want:?}", m.shape()));
            }
        }
        let d = cx.dtype(0)?;
        for i in 1..5 {
            if let Some(v) = cx.opt(i)
                && v.dtype != d
            {
                return Err(format!("input {i} is {}, X is {d}", v.dtype));
            }
        }
        Ok((
            out.clone(),
            tp::DeformConv {
                n: xs[0],
                c_in: xs[1],
                c_out: ws[0],
                group: self.group,
                offset_group: og,
                in_hw: [xs[2], xs[3]],
                out_hw: [out[2], out[3]],
                kernel: [sp.kernel[0], sp.kernel[1]],
                strides: [sp.strides[0], sp.strides[1]],
                dilations: [sp.dilations[0], sp.dilations[1]],
                pads: [sp.pads_begin[0], sp.pads_begin[1]],
                has_mask: cx.opt(4).is_some(),
            },
        ))
    }
}

impl Operator for DeformConv {
    fn name(&self) -> &'static str {
        "DeformConv"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        let (out, _) = self.params(cx)?;
        Ok(vec![Fact::new(d, out)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let icx = cx.infer_cx();
        let (_, p) = self.params(&icx)?;
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        let w = cx.operand(1)?;
        let off = cx.operand(2)?;
        let b = bias_or_zeros(cx, 3, d, p.c_out)?;
        // Without a mask the kernel ignores its mask argument: pass the offsets.
        let mask = if p.has_mask { cx.operand(4)? } else { off };
        cx.typed(
            TypedCall::new("deform_conv", vec![d], &p),
            vec![x, w, off, b, mask],
            0,
        )?;
        Ok(())
    }
    impl_as_any!();
}

/// Operators only the typed kernels implement.
pub const OPS: &[OpDef] = &[
    OpDef {
        name: "ConvTranspose",
        since: 1,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            let a = &cx.attrs;
            Ok(Arc::new(ConvTranspose {
                window: a.window()?,
                group: a.positive("group", Some(1))?,
                output_padding: a.usizes("output_padding")?,
                output_shape: a.usizes("output_shape")?,
            }))
        },
    },
    OpDef {
        name: "DeformConv",
        since: 19,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(DeformConv {
                window: cx.attrs.window()?,
                group: cx.attrs.positive("group", Some(1))?,
                offset_group: cx.attrs.positive("offset_group", Some(1))?,
            }))
        },
    },
    OpDef {
        name: "LpPool",
        since: 1,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            let p = cx.attrs.positive("p", Some(2))?;
            Ok(Arc::new(LpPool {
                window: cx.attrs.window()?,
                p: i32::try_from(p).map_err(|_| format!("attribute `p` {p} is too large"))?,
            }))
        },
    },
    OpDef {
        name: "MaxUnpool",
        since: 9,
        types: Types::Numeric,
        cuda: false,
        parse: |cx| {
            let a = &cx.attrs;
            Ok(Arc::new(MaxUnpool {
                kernel_shape: a
                    .usizes("kernel_shape")?
                    .ok_or("attribute `kernel_shape` is required")?,
                strides: a.usizes("strides")?,
                pads: a.usizes("pads")?,
            }))
        },
    },
];
