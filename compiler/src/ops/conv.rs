//! Convolution, pooling and LRN over NCHW float32 (1-D windows as 2-D ones one row
//! high), on the tuned kernels (each has a
//! CUDA kernel). Windows are resolved once by [`crate::window::resolve`] for inference
//! and lowering. Every other rank and element type (and MaxPool's Indices output) goes
//! to the typed N-d kernels through [`super::conv_nd`].

use std::sync::Arc;

use kiln_runtime::params;

use super::conv_nd;
use super::{Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, R, Types};
use crate::dim::Dim;
use crate::impl_as_any;
use crate::ir::{Activation, Window};
use crate::lower::{Kernel, Window2d, activation_param};
use crate::tensor::{DType, Tensor};
use crate::window;

/// 2-D convolution with an optional fused activation (added by the fusion pass).
#[derive(Debug, Clone, PartialEq)]
pub struct Conv {
    pub window: Window,
    pub group: usize,
    pub activation: Option<Activation>,
    /// The `Add` after the convolution fused in (`passes::fuse_residual_adds`): input 3
    /// is a tensor of the output's shape, added before the activation.
    pub residual: bool,
    /// The `MaxPool` after the convolution fused in (`passes::fuse_max_pools`): the
    /// pool's window, and the node's output is the pooled one.
    pub max_pool: Option<Window>,
    /// The channel shuffle after a grouped convolution fused in
    /// (`passes::fuse_channel_shuffles`): the output channels are written in the
    /// order the shuffle gives them, and the node's output is the shuffled tensor.
    pub shuffle: bool,
}

impl Operator for Conv {
    fn name(&self) -> &'static str {
        "Conv"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        if !tuned(cx.dtype(0)?, cx.dims(0)?.len()) {
            return conv_nd::infer_conv(&self.window, self.group, cx);
        }
        let d = cx.check_type(0, Types::F32)?;
        let (xs, ws) = (cx.dims(0)?, cx.dims(1)?);
        let mut out = conv_nd::conv_out_dims(&self.window, xs, ws, self.group)?;
        conv_nd::check_bias(cx, 2, &ws[0])?;
        if let Some(pool) = &self.max_pool {
            out = conv_nd::pool_out_dims(pool, &out)?;
        }
        Ok(vec![Fact::new(d, out)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        if self.residual
            || self.max_pool.is_some()
            || self.shuffle
            || tuned(cx.dtype(0)?, cx.dims(0)?.len())
            || cx.constants().is_none()
        {
            return Ok(None);
        }
        conv_nd::eval_conv(&self.window, self.group, self.activation, cx, outs)
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let tuned = tuned(cx.dtype(0)?, cx.dims(0)?.len());
        if (self.residual || self.max_pool.is_some() || self.shuffle) && !tuned {
            return Err(
                "a fused residual, pool or channel shuffle needs float32 NCHW (the fusion \
                 pass checks)"
                    .into(),
            );
        }
        if !tuned {
            return conv_nd::lower_conv(&self.window, self.group, self.activation, cx);
        }
        let (x_shape, w_shape) = (cx.shape(0)?, cx.shape(1)?);
        let p = self.conv2d(x_shape, w_shape)?;
        if let Some(pool) = &self.max_pool {
            let pool = pool2d(pool, None, &[p.n, p.c_out, p.h_out, p.w_out])?;
            let inputs = cx.operands()?;
            let out = cx.output(0)?;
            let scratch = p.max_pool_scratch_len(&pool);
            cx.step_with_scratch(Kernel::Conv2dMaxPool(p, pool), inputs, out, scratch);
            return Ok(());
        }
        if self.residual {
            // Operands: X, W, the residual, then the bias if there is one.
            let mut inputs = vec![cx.operand(0)?, cx.operand(1)?, cx.operand(3)?];
            if cx.opt(2).is_some() {
                inputs.push(cx.operand(2)?);
            }
            let out = cx.output(0)?;
            cx.step_with_scratch(Kernel::ResidualConv2d(p), inputs, out, p.scratch_len());
            return Ok(());
        }
        if self.shuffle {
            let inputs = cx.operands()?;
            let out = cx.output(0)?;
            cx.step_with_scratch(Kernel::ShuffledConv2d(p), inputs, out, p.scratch_len());
            return Ok(());
        }
        if let Some((v, u)) = winograd_weights(cx, &p) {
            let mut inputs = vec![cx.operand(0)?, u];
            // The raw weights too, where the direct kernel may take the layer at run
            // time (the codegen passes them by the same rule).
            if p.direct_rivals_winograd() {
                inputs.push(cx.operand(1)?);
            }
            if cx.opt(2).is_some() {
                inputs.push(cx.operand(2)?);
            }
            let out = cx.output(0)?;
            let scratch = p.winograd_scratch_len(v);
            cx.step_with_scratch(Kernel::Winograd(p, v), inputs, out, scratch);
            return Ok(());
        }
        let inputs = cx.operands()?;
        let out = cx.output(0)?;
        cx.step_with_scratch(Kernel::Conv2d(p), inputs, out, p.scratch_len());
        Ok(())
    }
    impl_as_any!();
}

impl Conv {
    /// The tuned kernels' parameters for input and weight shapes (4-D, or 3-D as one
    /// row), the output's from the window.
    pub(crate) fn conv2d(&self, x_shape: &[usize], w_shape: &[usize]) -> R<params::Conv2d> {
        let sp = window::resolve(&self.window, &x_shape[2..], Some(&w_shape[2..]), false)?;
        let mut y_shape = vec![x_shape[0], w_shape[0]];
        y_shape.extend(&sp.out);
        let win = window_2d(sp);
        let (x_shape, y_shape) = (as_2d(x_shape), as_2d(&y_shape));
        Ok(params::Conv2d {
            n: x_shape[0],
            c_in: x_shape[1],
            h_in: x_shape[2],
            w_in: x_shape[3],
            c_out: y_shape[1],
            h_out: y_shape[2],
            w_out: y_shape[3],
            kernel: win.kernel,
            stride: win.stride,
            dilation: win.dilation,
            pads: win.pads,
            group: self.group,
            activation: activation_param(self.activation),
        })
    }
}

/// The tuned kernel's parameters of a max pool (`average: None`) or average pool over
/// an input of `x_shape` (4-D, or 3-D as one row).
pub(crate) fn pool2d(
    window: &Window,
    average: Option<bool>,
    x_shape: &[usize],
) -> R<params::Pool2d> {
    let sp = window::resolve(window, &x_shape[2..], None, true)?;
    let mut y_shape = x_shape[..2].to_vec();
    y_shape.extend(&sp.out);
    let win = window_2d(sp);
    let (x_shape, y_shape) = (as_2d(x_shape), as_2d(&y_shape));
    let kind = match average {
        Some(count_include_pad) => params::PoolKind::Average { count_include_pad },
        None => params::PoolKind::Max,
    };
    Ok(params::Pool2d {
        kind,
        n: x_shape[0],
        c: x_shape[1],
        h_in: x_shape[2],
        w_in: x_shape[3],
        h_out: y_shape[2],
        w_out: y_shape[3],
        kernel: win.kernel,
        stride: win.stride,
        dilation: win.dilation,
        pads: win.pads,
    })
}

/// The Winograd variant and transformed weights (`NODE:winograd`, `[P², c_out, c_in]`)
/// of a layer that runs as Winograd ([`params::Conv2d::winograd_variant`], by its
/// shape where the lowering's [`crate::lower::Choices`] allow, else F(2×2) by its
/// channels: a build over ranges has one set of weights for every size), with
/// constant weights, where the choices allow Winograd at all. The original weights stay out of
/// the blob unless another step reads them.
fn winograd_weights(
    cx: &mut LowerCx,
    p: &params::Conv2d,
) -> Option<(params::Winograd, crate::lower::Operand)> {
    if !cx.choices().winograd {
        return None;
    }
    let v = p.winograd_variant(cx.choices().winograd_by_shape)?;
    let w = cx.opt_constant(1)?.as_f32();
    let u = kiln_runtime::kernels::winograd_weights(v, p.c_out, p.c_in, &w);
    let dims = vec![v.products(), p.c_out, p.c_in];
    Some((v, cx.derived_weight("winograd", dims, u)))
}

/// Whether the tuned NCHW float32 kernels take an input of `dtype` and `rank`: 2-D
/// windows, and 1-D ones as 2-D windows of height 1 (the same bytes).
fn tuned(dtype: DType, rank: usize) -> bool {
    dtype == DType::F32 && (rank == 4 || rank == 3)
}

/// An `[N, C, L]` shape as `[N, C, 1, L]`; a 4-D shape as it is.
fn as_2d(shape: &[usize]) -> Vec<usize> {
    let mut s = shape.to_vec();
    if s.len() == 3 {
        s.insert(2, 1);
    }
    s
}

/// A resolved window as the 2-D kernels take it (a 1-D window one row high).
fn window_2d(mut sp: window::Spatial) -> Window2d {
    if sp.kernel.len() == 1 {
        for v in [
            &mut sp.kernel,
            &mut sp.strides,
            &mut sp.dilations,
            &mut sp.out,
        ] {
            v.insert(0, 1);
        }
        sp.pads_begin.insert(0, 0);
        sp.pads_end.insert(0, 0);
    }
    Window2d::from(&sp)
}

/// MaxPool and AveragePool over 2-D windows.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub window: Window,
    /// `None` for MaxPool.
    pub average: Option<bool>,
    /// MaxPool's `storage_order = 1`: Indices count column-major.
    pub column_major: bool,
}

impl Operator for Pool {
    fn name(&self) -> &'static str {
        if self.average.is_some() {
            "AveragePool"
        } else {
            "MaxPool"
        }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        if !tuned(cx.dtype(0)?, cx.dims(0)?.len()) || cx.n_outputs() > 1 {
            return conv_nd::infer_pool(&self.window, self.average, cx);
        }
        let d = cx.check_type(0, Types::F32)?;
        Ok(vec![Fact::new(
            d,
            conv_nd::pool_out_dims(&self.window, cx.dims(0)?)?,
        )])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        if !tuned(cx.dtype(0)?, cx.dims(0)?.len()) || conv_nd::wants_indices(cx) {
            return conv_nd::lower_pool(&self.window, self.average, self.column_major, cx);
        }
        let p = pool2d(&self.window, self.average, cx.shape(0)?)?;
        let x = cx.operand(0)?;
        let out = cx.output(0)?;
        // An average over each whole plane, no padding (ResNet's, DenseNet's and the
        // Inceptions' heads), is a mean per plane: one pass of the reduction kernel
        // instead of a window pooled through interleaved blocks (2048 × 7²: 0.11 ms
        // as a pool). Not where the shapes vary over a build's ranges, where the
        // window would not cover every size's plane.
        let whole_plane = p.kernel == [p.h_in, p.w_in]
            && p.pads == [0; 4]
            && p.dilation == [1, 1]
            && (p.h_out, p.w_out) == (1, 1);
        if self.average.is_some() && whole_plane && !cx.shapes_vary() {
            let mean = params::ReduceMean {
                outer: p.n * p.c,
                inner: p.h_in * p.w_in,
            };
            cx.step(Kernel::ReduceMean(mean), vec![x], out);
            return Ok(());
        }
        cx.step(Kernel::Pool2d(p), vec![x], out);
        Ok(())
    }
    impl_as_any!();
}

/// GlobalAveragePool: the mean over every spatial position.
#[derive(Debug, Clone)]
pub struct GlobalAveragePool;

impl Operator for GlobalAveragePool {
    fn name(&self) -> &'static str {
        "GlobalAveragePool"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Float)?;
        let xs = cx.dims(0)?;
        if xs.len() < 3 {
            return Err(format!("input must have rank ≥ 3, got {xs:?}"));
        }
        let mut s = xs[..2].to_vec();
        s.extend(std::iter::repeat_n(Dim::from(1usize), xs.len() - 2));
        Ok(vec![Fact::new(d, s)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        if cx.dtype(0)? != DType::F32 {
            return conv_nd::lower_global_average(cx);
        }
        let xs = cx.shape(0)?;
        let p = params::ReduceMean {
            outer: xs[0] * xs[1],
            inner: xs[2..].iter().product(),
        };
        let x = cx.operand(0)?;
        let out = cx.output(0)?;
        cx.step(Kernel::ReduceMean(p), vec![x], out);
        Ok(())
    }
    impl_as_any!();
}

/// Local response normalisation across channels.
#[derive(Debug, Clone)]
pub struct Lrn {
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub bias: f32,
}

impl Operator for Lrn {
    fn name(&self) -> &'static str {
        "LRN"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::F32)?;
        let xs = cx.dims(0)?;
        if xs.len() < 2 {
            return Err(format!("input must have rank ≥ 2, got {xs:?}"));
        }
        Ok(vec![Fact::new(d, xs.to_vec())])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let xs = cx.shape(0)?;
        let p = params::Lrn {
            n: xs[0],
            c: xs[1],
            inner: xs[2..].iter().product(),
            size: self.size,
            alpha: self.alpha,
            beta: self.beta,
            bias: self.bias,
        };
        let x = cx.operand(0)?;
        let out = cx.output(0)?;
        cx.step(Kernel::Lrn(p), vec![x], out);
        Ok(())
    }
    impl_as_any!();
}

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "Conv",
        since: 1,
        types: Types::Float,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(Conv {
                window: cx.attrs.window()?,
                group: cx.attrs.positive("group", Some(1))?,
                activation: None,
                residual: false,
                max_pool: None,
                shuffle: false,
            }))
        },
    },
    OpDef {
        name: "MaxPool",
        since: 1,
        types: Types::Numeric,
        cuda: true,
        parse: |cx| {
            let column_major = match cx.attrs.int_or("storage_order", 0)? {
                0 => false,
                1 => true,
                v => return Err(format!("storage_order must be 0 or 1, got {v}")),
            };
            Ok(Arc::new(Pool {
                window: cx.attrs.window()?,
                average: None,
                column_major,
            }))
        },
    },
    OpDef {
        name: "AveragePool",
        since: 1,
        types: Types::Float,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(Pool {
                window: cx.attrs.window()?,
                average: Some(cx.attrs.flag("count_include_pad")?),
                column_major: false,
            }))
        },
    },
    OpDef {
        name: "GlobalAveragePool",
        since: 1,
        types: Types::Float,
        cuda: true,
        parse: |_| Ok(Arc::new(GlobalAveragePool)),
    },
    OpDef {
        name: "LRN",
        since: 1,
        types: Types::F32,
        cuda: true,
        parse: |cx| {
            let a = &cx.attrs;
            Ok(Arc::new(Lrn {
                size: a.positive("size", None)?,
                alpha: a.float_or("alpha", 1e-4)?,
                beta: a.float_or("beta", 0.75)?,
                bias: a.float_or("bias", 1.0)?,
            }))
        },
    },
];
