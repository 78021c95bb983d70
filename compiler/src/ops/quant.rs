//! Quantization: QuantizeLinear, DequantizeLinear (per tensor, per axis, blocked),
//! DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv, on
//! the typed kernels of `kiln_runtime::typed::conv`. Quantized types are uint8, int8,
//! uint16, int16, uint4, int4, uint2 and int2 (and int32 where ONNX allows it);
//! DequantizeLinear also reads float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) and float4.

#[allow(unused_imports)]
use kiln_runtime::typed::Elem as _;
use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::conv_nd;
use super::linalg::matmul_shape;
use super::{
    Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, R, Types, broadcast, normalize_axis,
};
use crate::dim::{Dim, dims_of, fmt_dims};
use crate::impl_as_any;
use crate::ir::Window;
use crate::lower::{Operand, TypedCall, broadcast_strides};
use crate::tensor::{DType, Data, Scalar, Tensor};

/// The quantized types: uint8, int8, uint16, int16, uint4, int4, uint2, int2, float8
/// (not E8M0) and float4.
fn check_quantized(d: DType, what: &str) -> R<()> {
    use DType::*;
    match d {
        U8 | I8 | U16 | I16 | U4 | I4 | U2 | I2 => Ok(()),
        F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F4E2M1 => Ok(()),
        _ => Err(format!(
            "{what} is {d}; quantized types are uint8, int8, uint16, int16, uint4, int4, \
             uint2, int2, float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz) and float4"
        )),
    }
}

/// The ONNX `output_dtype` attribute as a Kiln dtype (0 = unset).
fn output_dtype(code: i64) -> R<Option<DType>> {
    if code == 0 {
        return Ok(None);
    }
    let c = i32::try_from(code).map_err(|_| format!("output_dtype {code} is not a type"))?;
    DType::from_onnx(c)
        .map(Some)
        .ok_or_else(|| format!("output_dtype {} is not supported", DType::onnx_code_name(c)))
}

/// The float type NumPy computes `x / scale` in.
fn promote(a: DType, b: DType) -> tp::Precision {
    use DType::*;
    match (a, b) {
        (F64, _) | (_, F64) => tp::Precision::F64,
        (F16, F16) => tp::Precision::F16,
        (BF16, BF16) => tp::Precision::BF16,
        (F32 | F16 | BF16, F32 | F16 | BF16) => tp::Precision::F32,
        // An integer with a float: float64 (int32 / float32 in NumPy).
        _ => tp::Precision::F64,
    }
}

fn precision_of(d: DType) -> R<tp::Precision> {
    Ok(match d {
        DType::F32 => tp::Precision::F32,
        DType::F16 => tp::Precision::F16,
        DType::BF16 => tp::Precision::BF16,
        DType::F64 => tp::Precision::F64,
        d => return Err(format!("precision must be a float type, got {d}")),
    })
}

/// The `[outer, len, inner]` view of `xs` around `axis` and where each element's scale
/// comes from, for a scale of shape `ss`.
fn quant_geometry(
    xs: &[usize],
    ss: &[usize],
    axis: i64,
    block: usize,
) -> R<(usize, usize, usize, tp::QuantMode)> {
    let n: usize = ss.iter().product();
    if n == 1 && ss.len() <= 1 {
        let len = xs.iter().product();
        return Ok((1, len, 1, tp::QuantMode::Tensor));
    }
    let a = normalize_axis(axis, xs.len())?;
    let (outer, len, inner) = (
        xs[..a].iter().product(),
        xs[a],
        xs[a + 1..].iter().product(),
    );
    if block == 0 {
        if ss != [xs[a]] {
            return Err(format!(
                "the scale has shape {ss:?}; per-axis quantization along axis {a} of {xs:?} \
                 needs [{}] (or one value)",
                xs[a]
            ));
        }
        return Ok((outer, len, inner, tp::QuantMode::Axis));
    }
    let mut want = xs.to_vec();
    want[a] = xs[a].div_ceil(block);
    if ss != want.as_slice() {
        return Err(format!(
            "the scale has shape {ss:?}; blocks of {block} along axis {a} of {xs:?} need {want:?}"
        ));
    }
    Ok((outer, len, inner, tp::QuantMode::Block { size: block }))
}

/// A zero-filled constant of `dtype` standing for an absent zero point.
fn zeros(cx: &mut LowerCx, dtype: DType, shape: &[usize]) -> Operand {
    let n: usize = shape.iter().product();
    let name = format!("{}:zero_point", cx.node.name);
    cx.weight(&name, &Tensor::new(shape.to_vec(), Data::zeros(dtype, n)))
}

/// Operand `i`, or zeros of `dtype` and `shape` when the node leaves it out.
fn operand_or_zeros(cx: &mut LowerCx, i: usize, dtype: DType, shape: &[usize]) -> R<Operand> {
    if cx.opt(i).is_some() {
        cx.operand(i)
    } else {
        Ok(zeros(cx, dtype, shape))
    }
}

/// The zero point QuantizeLinear's kernel adds for a float8 output, whose zero point
/// ONNX's reference ignores: `-0`, which leaves every quotient as it is, `-0`
/// included (`+0` would turn `-0` into `+0`; the FNUZ types have no `-0` anyway).
/// `None` for the other output types.
fn float8_zero_point(q: DType, n: usize) -> Option<Data> {
    (q.is_float() && q != DType::F4E2M1)
        .then(|| crate::dispatch_dtype!(q, Q => Q::wrap(vec![Q::from_f64(-0.0); n])))
}

/// `f64` values of a constant (exact for every quantization type).
fn f64s(t: &Tensor) -> Vec<f64> {
    crate::dispatch_data!(&t.data, v: _T => v.iter().map(|x| x.to_f64()).collect())
}

/// ONNX QuantizeLinear.
#[derive(Debug, Clone)]
pub struct QuantizeLinear {
    pub axis: i64,
    pub block_size: usize,
    pub output_dtype: Option<DType>,
    pub precision: Option<DType>,
    /// Float8 outputs: clamp to the largest finite value (opset 19; default 1).
    pub saturate: bool,
}

impl QuantizeLinear {
    fn out_type(&self, cx: &InferCx) -> R<DType> {
        let q = match cx.opt(2) {
            Some(z) => {
                if let Some(o) = self.output_dtype
                    && o != z.dtype
                {
                    return Err(format!(
                        "output_dtype {o} differs from the zero point's {}",
                        z.dtype
                    ));
                }
                z.dtype
            }
            None => self.output_dtype.unwrap_or(DType::U8),
        };
        check_quantized(q, "the output type")?;
        if q.is_float() {
            // The kernel casts with saturation (float4 always saturates).
            if !self.saturate && q != DType::F4E2M1 {
                return Err(format!(
                    "saturate=0 with a {q} output is not supported (only the saturating \
                     conversion)"
                ));
            }
            // ONNX's reference ignores a float8 zero point (see `float8_zero_point`)
            // and adds a float4 one; Kiln takes a float8 one that is 0.
            if q != DType::F4E2M1 && cx.opt(2).is_some() {
                let z = cx.constant(2, "zero point")?;
                if z.as_f64().iter().any(|&v| v != 0.0) {
                    return Err(format!("the {q} zero point must be 0"));
                }
            }
        }
        Ok(q)
    }

    fn params(&self, cx: &InferCx) -> R<tp::Quantize> {
        let (xs, ss) = (cx.shape(0)?, cx.shape(1)?);
        if let Some(z) = cx.opt(2)
            && !zero_point_fits(z.dims(), &dims_of(ss))
        {
            return Err(format!(
                "the zero point has shape {:?}, the scale {ss:?}",
                z.shape()
            ));
        }
        let (outer, len, inner, mode) = quant_geometry(xs, ss, self.axis, self.block_size)?;
        let precision = match self.precision {
            Some(p) => precision_of(p)?,
            None => promote(cx.dtype(0)?, cx.dtype(1)?),
        };
        Ok(tp::Quantize {
            outer,
            len,
            inner,
            mode,
            precision,
        })
    }
}

impl Operator for QuantizeLinear {
    fn name(&self) -> &'static str {
        "QuantizeLinear"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.dtype(0)?;
        if !((d.is_float() && !d.is_small()) || d == DType::I32) {
            return Err(format!("x is {d}; QuantizeLinear takes floats or int32"));
        }
        let s = cx.dtype(1)?;
        if !((s.is_float() && !s.is_small()) || s == DType::I32) {
            return Err(format!("the scale is {s}; expected a float type or int32"));
        }
        let q = self.out_type(cx)?;
        if let Some(p) = self.precision {
            precision_of(p)?;
        }
        check_quant_dims(cx, self.axis, self.block_size)?;
        Ok(vec![Fact::new(q, cx.dims(0)?.to_vec())])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let (x, s) = (cx.constant(0, "x")?, cx.constant(1, "scale")?);
        let p = self.params(cx)?;
        let q = outs[0].dtype;
        let (xv, sv) = (f64s(x), f64s(s));
        let data = crate::dispatch_dtype!(q, Q => {
            let zp: Vec<Q> = match (float8_zero_point(q, sv.len()), cx.opt(2)) {
                (Some(z), _) => Q::unwrap(&z).ok_or("zero point type")?.to_vec(),
                (None, Some(_)) => cx.constant(2, "zero point")?.values::<Q>().ok_or("zero point type")?.to_vec(),
                (None, None) => vec![Q::default(); sv.len()],
            };
            let mut out = vec![Q::default(); xv.len()];
            typed::quantize_linear::<f64, f64, Q>(&p, &xv, &sv, &zp, &mut out);
            Q::wrap(out)
        });
        Ok(Some(vec![Tensor::new(x.shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let icx = cx.infer_cx();
        let p = self.params(&icx)?;
        let q = self.out_type(&icx)?;
        let (xd, sd) = (cx.dtype(0)?, cx.dtype(1)?);
        let ss = cx.shape(1)?.to_vec();
        let x = cx.operand(0)?;
        let s = cx.operand(1)?;
        let z = match float8_zero_point(q, ss.iter().product()) {
            Some(z) => {
                let name = format!("{}:zero_point", cx.node.name);
                cx.weight(&name, &Tensor::new(ss.clone(), z))
            }
            None => operand_or_zeros(cx, 2, q, &ss)?,
        };
        let call = TypedCall::new("quantize_linear", vec![xd, sd, q], &p).inputs(vec![xd, sd, q]);
        cx.typed(call, vec![x, s, z], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// ONNX DequantizeLinear.
#[derive(Debug, Clone)]
pub struct DequantizeLinear {
    pub axis: i64,
    pub block_size: usize,
    pub output_dtype: Option<DType>,
}

impl DequantizeLinear {
    fn params(&self, cx: &InferCx) -> R<tp::Quantize> {
        let (xs, ss) = (cx.shape(0)?, cx.shape(1)?);
        if let Some(z) = cx.opt(2) {
            if !zero_point_fits(z.dims(), &dims_of(ss)) {
                return Err(format!(
                    "the zero point has shape {:?}, the scale {ss:?}",
                    z.shape()
                ));
            }
            if z.dtype != cx.dtype(0)? {
                return Err(format!(
                    "the zero point is {}, x is {}",
                    z.dtype,
                    cx.dtype(0)?
                ));
            }
        }
        let (outer, len, inner, mode) = quant_geometry(xs, ss, self.axis, self.block_size)?;
        Ok(tp::Quantize {
            outer,
            len,
            inner,
            mode,
            precision: tp::Precision::F32,
        })
    }

    fn out_type(&self, cx: &InferCx) -> R<DType> {
        let y = self.output_dtype.unwrap_or(cx.dtype(1)?);
        if !y.is_float() || y.is_small() {
            return Err(format!(
                "the output type is {y}; expected float32, float16, bfloat16 or float64"
            ));
        }
        Ok(y)
    }
}

impl Operator for DequantizeLinear {
    fn name(&self) -> &'static str {
        "DequantizeLinear"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.dtype(0)?;
        if d != DType::I32 {
            check_quantized(d, "x")?;
        }
        let s = cx.dtype(1)?;
        if !s.is_float() || s.is_small() {
            return Err(format!("the scale is {s}; expected a float type"));
        }
        if let Some(z) = cx.opt(2)
            && z.dtype != d
        {
            return Err(format!("the zero point is {}, x is {d}", z.dtype));
        }
        check_quant_dims(cx, self.axis, self.block_size)?;
        Ok(vec![Fact::new(self.out_type(cx)?, cx.dims(0)?.to_vec())])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let (x, s) = (cx.constant(0, "x")?, cx.constant(1, "scale")?);
        let p = self.params(cx)?;
        // Every scale type Kiln has converts to f32 exactly except f64, which the
        // kernel also narrows to f32.
        let sv: Vec<f32> = f64s(s).iter().map(|&v| v as f32).collect();
        let y = outs[0].dtype;
        let data = crate::dispatch_data!(&x.data, xv: Q => {
            let zp: Vec<Q> = match cx.opt(2) {
                Some(_) => cx.constant(2, "zero point")?.values::<Q>().ok_or("zero point type")?.to_vec(),
                None => vec![Q::default(); sv.len()],
            };
            crate::dispatch_dtype!(y, Y => {
                let mut out = vec![Y::default(); xv.len()];
                typed::dequantize_linear::<Q, f32, Y>(&p, xv, &sv, &zp, &mut out);
                Y::wrap(out)
            })
        });
        Ok(Some(vec![Tensor::new(x.shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let icx = cx.infer_cx();
        let p = self.params(&icx)?;
        let y = self.out_type(&icx)?;
        let (xd, sd) = (cx.dtype(0)?, cx.dtype(1)?);
        let ss = cx.shape(1)?.to_vec();
        let x = cx.operand(0)?;
        let s = cx.operand(1)?;
        let z = operand_or_zeros(cx, 2, xd, &ss)?;
        let call =
            TypedCall::new("dequantize_linear", vec![xd, sd, y], &p).inputs(vec![xd, sd, xd]);
        cx.typed(call, vec![x, s, z], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// ONNX DynamicQuantizeLinear (float32 to uint8).
#[derive(Debug, Clone)]
pub struct DynamicQuantizeLinear;

impl Operator for DynamicQuantizeLinear {
    fn name(&self) -> &'static str {
        "DynamicQuantizeLinear"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::F32)?;
        let xs = cx.dims(0)?.to_vec();
        Ok(vec![
            Fact::new(DType::U8, xs),
            Fact::new(d, Vec::<usize>::new()),
            Fact::new(DType::U8, Vec::<usize>::new()),
        ])
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "x")?;
        let xv = x.values::<f32>().ok_or("x must be float32")?;
        let (mut y, mut s, mut z) = (vec![0u8; xv.len()], [0f32], [0u8]);
        typed::dynamic_quantize_linear(xv, &mut y, &mut s, &mut z);
        Ok(Some(vec![
            Tensor::from_vec(x.shape.clone(), y),
            Tensor::from_vec(vec![], s.to_vec()),
            Tensor::from_vec(vec![], z.to_vec()),
        ]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let len: usize = cx.shape(0)?.iter().product();
        let x = cx.operand(0)?;
        let call = TypedCall::bare("dynamic_quantize_linear", vec![d]);
        cx.typed_multi(
            call,
            vec![x],
            &[(0, DType::U8, len), (1, d, 1), (2, DType::U8, 1)],
        )
    }
    impl_as_any!();
}

fn matmul_params(a: &[usize], b: &[usize]) -> R<tp::MatMul> {
    let (a2, b2) = super::linalg::matmul_operands(a, b);
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 1]);
    let batch = broadcast(&[&a2[..a2.len() - 2], &b2[..b2.len() - 2]])?;
    if batch.len() > tp::RANK {
        return Err(format!("batch rank {} exceeds {}", batch.len(), tp::RANK));
    }
    let sa = broadcast_strides(&a2[..a2.len() - 2], &batch);
    let sb = broadcast_strides(&b2[..b2.len() - 2], &batch);
    let mut p = tp::MatMul {
        m,
        n,
        k,
        batch_rank: batch.len(),
        batch_shape: [1; tp::RANK],
        a_batch_strides: [0; tp::RANK],
        b_batch_strides: [0; tp::RANK],
    };
    p.batch_shape[..batch.len()].copy_from_slice(&batch);
    p.a_batch_strides[..batch.len()].copy_from_slice(&sa);
    p.b_batch_strides[..batch.len()].copy_from_slice(&sb);
    Ok(p)
}

/// Whether a quantization parameter of shape `s` is one value (false) or one per row /
/// column (`count` entries, true).
fn per_slice(s: &[usize], count: usize, what: &str) -> R<bool> {
    let n: usize = s.iter().product();
    if n == 1 {
        Ok(false)
    } else if s.len() == 1 && s[0] == count {
        Ok(true)
    } else {
        Err(format!(
            "{what} has shape {s:?}; expected one value or [{count}]"
        ))
    }
}

fn check_8bit(cx: &InferCx, i: usize, what: &str) -> R<DType> {
    let d = cx.dtype(i)?;
    match d {
        DType::U8 | DType::I8 => Ok(d),
        _ => Err(format!("{what} is {d}; expected uint8 or int8")),
    }
}

/// The QMatMul parameters of a (QLinear)MatMul(Integer) node: `a_scale`, `a_zp`,
/// `b_scale`, `b_zp` are the input positions (None when the operator has none).
fn qmatmul_params(
    cx: &InferCx,
    a: usize,
    b: usize,
    [a_scale, a_zp, b_scale, b_zp]: [Option<usize>; 4],
) -> R<tp::QMatMul> {
    let (as_, bs) = (cx.shape(a)?, cx.shape(b)?);
    matmul_shape(&dims_of(as_), &dims_of(bs))?;
    let mm = matmul_params(as_, bs)?;
    let flag = |i: Option<usize>, count: usize, what: &str| -> R<bool> {
        match i.and_then(|i| cx.opt(i)) {
            None => Ok(false),
            Some(v) => per_slice(v.shape(), count, what),
        }
    };
    Ok(tp::QMatMul {
        mm,
        a_scale_rows: flag(a_scale, mm.m, "a_scale")?,
        a_zp_rows: flag(a_zp, mm.m, "a_zero_point")?,
        b_scale_cols: flag(b_scale, mm.n, "b_scale")?,
        b_zp_cols: flag(b_zp, mm.n, "b_zero_point")?,
    })
}

/// ONNX MatMulInteger.
#[derive(Debug, Clone)]
pub struct MatMulInteger;

impl Operator for MatMulInteger {
    fn name(&self) -> &'static str {
        "MatMulInteger"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let ad = check_8bit(cx, 0, "A")?;
        let bd = check_8bit(cx, 1, "B")?;
        for (i, d) in [(2, ad), (3, bd)] {
            if let Some(z) = cx.opt(i)
                && z.dtype != d
            {
                return Err(format!("zero point {i} is {}, its operand {d}", z.dtype));
            }
        }
        check_qmatmul_dims(cx, 0, 1, [None, Some(2), None, Some(3)])?;
        Ok(vec![Fact::new(
            DType::I32,
            matmul_shape(cx.dims(0)?, cx.dims(1)?)?,
        )])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let icx = cx.infer_cx();
        let p = qmatmul_params(&icx, 0, 1, [None, Some(2), None, Some(3)])?;
        let (ad, bd) = (cx.dtype(0)?, cx.dtype(1)?);
        let a = cx.operand(0)?;
        let b = cx.operand(1)?;
        let az = operand_or_zeros(cx, 2, ad, &[1])?;
        let bz = operand_or_zeros(cx, 3, bd, &[1])?;
        let call = TypedCall::new("matmul_integer", vec![ad, bd], &p).inputs(vec![ad, bd, ad, bd]);
        cx.typed(call, vec![a, b, az, bz], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// ONNX QLinearMatMul.
#[derive(Debug, Clone)]
pub struct QLinearMatMul;

impl Operator for QLinearMatMul {
    fn name(&self) -> &'static str {
        "QLinearMatMul"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let ad = check_8bit(cx, 0, "a")?;
        let bd = check_8bit(cx, 3, "b")?;
        let yd = check_8bit(cx, 7, "y_zero_point")?;
        let sd = cx.dtype(1)?;
        if !sd.is_float() || cx.dtype(4)? != sd || cx.dtype(6)? != sd {
            return Err(format!(
                "the scales are {sd}, {}, {}; expected one float type",
                cx.dtype(4)?,
                cx.dtype(6)?
            ));
        }
        if cx.dtype(2)? != ad || cx.dtype(5)? != bd {
            return Err("each zero point must have its operand's type".into());
        }
        for i in [6, 7] {
            if cx.dims(i)?.iter().product::<crate::dim::Dim>() != 1usize {
                return Err(format!(
                    "input {i} (y's scale / zero point) must be one value"
                ));
            }
        }
        check_qmatmul_dims(cx, 0, 3, [Some(1), Some(2), Some(4), Some(5)])?;
        Ok(vec![Fact::new(yd, matmul_shape(cx.dims(0)?, cx.dims(3)?)?)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let icx = cx.infer_cx();
        let p = qmatmul_params(&icx, 0, 3, [Some(1), Some(2), Some(4), Some(5)])?;
        let (ad, sd, bd, yd) = (cx.dtype(0)?, cx.dtype(1)?, cx.dtype(3)?, cx.dtype(7)?);
        let inputs = cx.operands()?;
        let call = TypedCall::new("qlinear_matmul", vec![ad, bd, sd, yd], &p)
            .inputs(vec![ad, sd, ad, bd, sd, bd, sd, yd]);
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// ONNX ConvInteger.
#[derive(Debug, Clone)]
pub struct ConvInteger {
    pub window: Window,
    pub group: usize,
}

impl ConvInteger {
    fn params(&self, cx: &InferCx) -> R<(Vec<usize>, tp::ConvInteger)> {
        let xd = check_8bit(cx, 0, "x")?;
        let wd = check_8bit(cx, 1, "w")?;
        let (xs, ws) = (cx.shape(0)?, cx.shape(1)?);
        conv_nd::check_conv(xs, ws, self.group)?;
        if let Some(z) = cx.opt(2)
            && (z.dtype != xd || z.shape().iter().product::<usize>() != 1)
        {
            return Err(format!(
                "x_zero_point is {} {:?}; expected one {xd}",
                z.dtype,
                z.shape()
            ));
        }
        let per = match cx.opt(3) {
            None => false,
            Some(z) if z.dtype != wd => {
                return Err(format!("w_zero_point is {}, w {wd}", z.dtype));
            }
            Some(z) => per_slice(z.shape(), ws[0], "w_zero_point")?,
        };
        let (out, sp) = conv_nd::conv_window(&self.window, xs, ws)?;
        Ok((
            out,
            tp::ConvInteger {
                geom: conv_nd::geom(xs, ws[0], self.group, &sp),
                w_zp_per_channel: per,
            },
        ))
    }
}

impl Operator for ConvInteger {
    fn name(&self) -> &'static str {
        "ConvInteger"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let out = conv_integer_dims(cx, &self.window, self.group)?;
        Ok(vec![Fact::new(DType::I32, out)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let icx = cx.infer_cx();
        let (_, p) = self.params(&icx)?;
        let (xd, wd) = (cx.dtype(0)?, cx.dtype(1)?);
        let x = cx.operand(0)?;
        let w = cx.operand(1)?;
        let xz = operand_or_zeros(cx, 2, xd, &[1])?;
        let wz = operand_or_zeros(cx, 3, wd, &[1])?;
        let call = TypedCall::new("conv_integer", vec![xd, wd], &p).inputs(vec![xd, wd, xd, wd]);
        cx.typed(call, vec![x, w, xz, wz], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// ONNX QLinearConv.
#[derive(Debug, Clone)]
pub struct QLinearConv {
    pub window: Window,
    pub group: usize,
}

impl QLinearConv {
    fn params(&self, cx: &InferCx) -> R<(Vec<usize>, tp::QLinearConv)> {
        let xd = check_8bit(cx, 0, "x")?;
        let wd = check_8bit(cx, 3, "w")?;
        let yd = check_8bit(cx, 7, "y_zero_point")?;
        for (i, what) in [(1, "x_scale"), (4, "w_scale"), (6, "y_scale")] {
            if cx.dtype(i)? != DType::F32 {
                return Err(format!("{what} is {}; expected float32", cx.dtype(i)?));
            }
        }
        if cx.dtype(2)? != xd || cx.dtype(5)? != wd {
            return Err("each zero point must have its operand's type".into());
        }
        let (xs, ws) = (cx.shape(0)?, cx.shape(3)?);
        conv_nd::check_conv(xs, ws, self.group)?;
        for i in [1, 2, 6, 7] {
            if cx.shape(i)?.iter().product::<usize>() != 1 {
                return Err(format!("input {i} must be one value"));
            }
        }
        let w_scale = per_slice(cx.shape(4)?, ws[0], "w_scale")?;
        let w_zp = per_slice(cx.shape(5)?, ws[0], "w_zero_point")?;
        if let Some(b) = cx.opt(8)
            && (b.dtype != DType::I32 || b.shape() != [ws[0]])
        {
            return Err(format!(
                "B is {} {:?}; expected int32 [{}]",
                b.dtype,
                b.shape(),
                ws[0]
            ));
        }
        let (mut out, sp) = conv_nd::conv_window(&self.window, xs, ws)?;
        out[1] = ws[0];
        let _ = yd;
        Ok((
            out,
            tp::QLinearConv {
                geom: conv_nd::geom(xs, ws[0], self.group, &sp),
                w_scale_per_channel: w_scale,
                w_zp_per_channel: w_zp,
            },
        ))
    }
}

impl Operator for QLinearConv {
    fn name(&self) -> &'static str {
        "QLinearConv"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let out = qlinear_conv_dims(cx, &self.window, self.group)?;
        Ok(vec![Fact::new(cx.dtype(7)?, out)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let icx = cx.infer_cx();
        let (_, p) = self.params(&icx)?;
        let (xd, wd, yd) = (cx.dtype(0)?, cx.dtype(3)?, cx.dtype(7)?);
        let mut inputs = Vec::new();
        for i in 0..8 {
            inputs.push(cx.operand(i)?);
        }
        inputs.push(conv_nd::bias_or_zeros(cx, 8, DType::I32, p.geom.c_out)?);
        let f = DType::F32;
        let call = TypedCall::new("qlinear_conv", vec![xd, wd, yd], &p).inputs(vec![
            xd,
            f,
            xd,
            wd,
            f,
            wd,
            f,
            yd,
            DType::I32,
        ]);
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "QuantizeLinear",
        since: 10,
        types: Types::Numeric,
        cuda: false,
        parse: |cx| {
            let a = &cx.attrs;
            let block = a.int_or("block_size", 0)?;
            Ok(Arc::new(QuantizeLinear {
                axis: a.int_or("axis", 1)?,
                block_size: usize::try_from(block)
                    .map_err(|_| format!("block_size must be ≥ 0, got {block}"))?,
                output_dtype: output_dtype(a.int_or("output_dtype", 0)?)?,
                precision: output_dtype(a.int_or("precision", 0)?)?,
                saturate: a.int_or("saturate", 1)? != 0,
            }))
        },
    },
    OpDef {
        name: "DequantizeLinear",
        since: 10,
        types: Types::Int,
        cuda: false,
        parse: |cx| {
            let a = &cx.attrs;
            let block = a.int_or("block_size", 0)?;
            Ok(Arc::new(DequantizeLinear {
                axis: a.int_or("axis", 1)?,
                block_size: usize::try_from(block)
                    .map_err(|_| format!("block_size must be ≥ 0, got {block}"))?,
                output_dtype: output_dtype(a.int_or("output_dtype", 0)?)?,
            }))
        },
    },
    OpDef {
        name: "DynamicQuantizeLinear",
        since: 11,
        types: Types::F32,
        cuda: false,
        parse: |_| Ok(Arc::new(DynamicQuantizeLinear)),
    },
    OpDef {
        name: "MatMulInteger",
        since: 10,
        types: Types::Int,
        cuda: false,
        parse: |_| Ok(Arc::new(MatMulInteger)),
    },
    OpDef {
        name: "QLinearMatMul",
        since: 10,
        types: Types::Int,
        cuda: false,
        parse: |_| Ok(Arc::new(QLinearMatMul)),
    },
    OpDef {
        name: "ConvInteger",
        since: 10,
        types: Types::Int,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(ConvInteger {
                window: cx.attrs.window()?,
                group: cx.attrs.positive("group", Some(1))?,
            }))
        },
    },
    OpDef {
        name: "QLinearConv",
        since: 10,
        types: Types::Int,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(QLinearConv {
                window: cx.attrs.window()?,
                group: cx.attrs.positive("group", Some(1))?,
            }))
        },
    },
];

// ---------------------------------------------------------------------------------
// Inference over dims: the shape checks of the parameter functions above (which
// lowering uses on fixed shapes), over symbolic dims.

/// Whether a zero point of dims `z` goes with a scale of dims `s`: the same dims, or
/// one value each (a per-tensor `[1]` beside a scalar, as ONNX's own tests write).
fn zero_point_fits(z: &[Dim], s: &[Dim]) -> bool {
    let one = |d: &[Dim]| d.iter().all(|x| x.is(1));
    z == s || (one(z) && one(s))
}

/// [`quant_geometry`]'s checks: the zero point has the scale's dims; the scale is one
/// value, one per entry of `x` along `axis`, or one per block of `block` entries.
fn check_quant_dims(cx: &InferCx, axis: i64, block: usize) -> R<()> {
    let (xs, ss) = (cx.dims(0)?, cx.dims(1)?);
    if let Some(z) = cx.opt(2)
        && !zero_point_fits(z.dims(), ss)
    {
        return Err(format!(
            "the zero point has shape {}, the scale {}",
            fmt_dims(z.dims()),
            fmt_dims(ss)
        ));
    }
    if ss.len() <= 1 && ss.iter().product::<Dim>().is(1) {
        return Ok(());
    }
    let a = normalize_axis(axis, xs.len())?;
    if block == 0 {
        if ss != std::slice::from_ref(&xs[a]) {
            return Err(format!(
                "the scale has shape {}; per-axis quantization along axis {a} of {} needs \
                 [{}] (or one value)",
                fmt_dims(ss),
                fmt_dims(xs),
                xs[a]
            ));
        }
        return Ok(());
    }
    let mut want = xs.to_vec();
    want[a] = xs[a].div_ceil(block as u64);
    if ss != want.as_slice() {
        return Err(format!(
            "the scale has shape {}; blocks of {block} along axis {a} of {} need {}",
            fmt_dims(ss),
            fmt_dims(xs),
            fmt_dims(&want)
        ));
    }
    Ok(())
}

/// [`per_slice`] over dims: one value, or `[count]`.
fn per_slice_dims(s: &[Dim], count: &Dim, what: &str) -> R<()> {
    if s.iter().product::<Dim>().is(1) || s == std::slice::from_ref(count) {
        Ok(())
    } else {
        Err(format!(
            "{what} has shape {}; expected one value or [{count}]",
            fmt_dims(s)
        ))
    }
}

/// [`qmatmul_params`]'s checks over dims: operands that multiply, a batch rank the
/// kernel takes, and each scale / zero point one value or one per row of A / column of
/// B.
fn check_qmatmul_dims(
    cx: &InferCx,
    a: usize,
    b: usize,
    [a_scale, a_zp, b_scale, b_zp]: [Option<usize>; 4],
) -> R<()> {
    let (ad, bd) = (cx.dims(a)?, cx.dims(b)?);
    matmul_shape(ad, bd)?;
    // Rank-1 operands are promoted to matrices (`matmul_operands`).
    let batch_rank = ad.len().max(2).max(bd.len().max(2)) - 2;
    if batch_rank > tp::RANK {
        return Err(format!("batch rank {batch_rank} exceeds {}", tp::RANK));
    }
    let one = Dim::from(1usize);
    let m = if ad.len() == 1 {
        &one
    } else {
        &ad[ad.len() - 2]
    };
    let n = if bd.len() == 1 {
        &one
    } else {
        &bd[bd.len() - 1]
    };
    for (i, count, what) in [
        (a_scale, m, "a_scale"),
        (a_zp, m, "a_zero_point"),
        (b_scale, n, "b_scale"),
        (b_zp, n, "b_zero_point"),
    ] {
        if let Some(v) = i.and_then(|i| cx.opt(i)) {
            per_slice_dims(v.dims(), count, what)?;
        }
    }
    Ok(())
}

/// ConvInteger's checks and output dims (`ConvInteger::params` over dims).
fn conv_integer_dims(cx: &InferCx, window: &Window, group: usize) -> R<Vec<Dim>> {
    let xd = check_8bit(cx, 0, "x")?;
    let wd = check_8bit(cx, 1, "w")?;
    let (xs, ws) = (cx.dims(0)?, cx.dims(1)?);
    let out = conv_nd::conv_out_dims(window, xs, ws, group)?;
    if let Some(z) = cx.opt(2)
        && (z.dtype != xd || !z.dims().iter().product::<Dim>().is(1))
    {
        return Err(format!(
            "x_zero_point is {} {}; expected one {xd}",
            z.dtype,
            fmt_dims(z.dims())
        ));
    }
    match cx.opt(3) {
        Some(z) if z.dtype != wd => Err(format!("w_zero_point is {}, w {wd}", z.dtype)),
        Some(z) => per_slice_dims(z.dims(), &ws[0], "w_zero_point"),
        None => Ok(()),
    }?;
    Ok(out)
}

/// QLinearConv's checks and output dims (`QLinearConv::params` over dims).
fn qlinear_conv_dims(cx: &InferCx, window: &Window, group: usize) -> R<Vec<Dim>> {
    let xd = check_8bit(cx, 0, "x")?;
    let wd = check_8bit(cx, 3, "w")?;
    check_8bit(cx, 7, "y_zero_point")?;
    for (i, what) in [(1, "x_scale"), (4, "w_scale"), (6, "y_scale")] {
        if cx.dtype(i)? != DType::F32 {
            return Err(format!("{what} is {}; expected float32", cx.dtype(i)?));
        }
    }
    if cx.dtype(2)? != xd || cx.dtype(5)? != wd {
        return Err("each zero point must have its operand's type".into());
    }
    let (xs, ws) = (cx.dims(0)?, cx.dims(3)?);
    let out = conv_nd::conv_out_dims(window, xs, ws, group)?;
    for i in [1, 2, 6, 7] {
        if !cx.dims(i)?.iter().product::<Dim>().is(1) {
            return Err(format!("input {i} must be one value"));
        }
    }
    per_slice_dims(cx.dims(4)?, &ws[0], "w_scale")?;
    per_slice_dims(cx.dims(5)?, &ws[0], "w_zero_point")?;
    if let Some(b) = cx.opt(8)
        && (b.dtype != DType::I32 || b.dims() != std::slice::from_ref(&ws[0]))
    {
        return Err(format!(
            "B is {} {}; expected int32 [{}]",
            b.dtype,
            fmt_dims(b.dims()),
            ws[0]
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod dims_tests {
    use super::*;
    use crate::ops::index::dims_tests::{In, dims, err, infer, infer_op, one, x};
    use onnx_protobuf::AttributeProto;
    use onnx_protobuf::attribute_proto::AttributeType;

    /// The registry's operator `name` with integer attributes.
    fn parsed(name: &str, ints: &[(&str, i64)]) -> crate::ops::Op {
        let attrs: Vec<AttributeProto> = ints
            .iter()
            .map(|&(n, v)| AttributeProto {
                name: n.into(),
                i: v,
                type_: AttributeType::INT.into(),
                ..Default::default()
            })
            .collect();
        let def = crate::ops::find(name).expect("registered");
        (def.parse)(&crate::ops::ParseCx {
            attrs: crate::ops::Attrs(&attrs),
            opset: 21,
            op_type: name,
            n_inputs: 3,
            node_index: 0,
        })
        .expect("parses")
    }

    fn scale(n: usize) -> In {
        In::Const(Tensor::from_vec(vec![n], vec![0.5f32; n]))
    }

    #[test]
    fn quantize_and_dequantize_keep_the_input_dims() {
        let q = || parsed("QuantizeLinear", &[("axis", 1)]);
        let per_axis = vec![x(DType::F32, "N,3,H,W"), scale(3)];
        assert_eq!(one(infer_op(q(), per_axis, 1)), dims("N,3,H,W"));
        let per_tensor = vec![
            x(DType::F32, "N,C"),
            In::Const(Tensor::from_vec(vec![], vec![0.5f32])),
        ];
        assert_eq!(one(infer_op(q(), per_tensor, 1)), dims("N,C"));
        // Per axis, the scale needs one value per entry along the axis: C is not 3.
        let e = err(infer_op(q(), vec![x(DType::F32, "N,C"), scale(3)], 1));
        assert!(
            e.contains("per-axis quantization along axis 1 of [N, C] needs [C]"),
            "{e}"
        );
        // Blocks of 2 along axis 0 of [N, 4]: the scale has ceil(N / 2) rows.
        let dq = parsed("DequantizeLinear", &[("axis", 0), ("block_size", 2)]);
        let want_rows = Dim::sym("N").div_ceil(2);
        let ins = vec![
            x(DType::I8, "N,4"),
            In::Dims(DType::F32, vec![want_rows, 4usize.into()]),
        ];
        assert_eq!(one(infer_op(dq.clone(), ins, 1)), dims("N,4"));
        let ins = vec![x(DType::I8, "N,4"), x(DType::F32, "N,4")];
        let e = err(infer_op(dq, ins, 1));
        assert!(
            e.contains("blocks of 2 along axis 0 of [N, 4] need [(N + 1)/2, 4]"),
            "{e}"
        );
    }

    #[test]
    fn integer_matmuls_and_convolutions_over_symbols() {
        let ins = vec![
            x(DType::U8, "B,S,8"),
            x(DType::I8, "8,16"),
            x(DType::U8, ""),
            x(DType::I8, "16"),
        ];
        assert_eq!(one(infer(MatMulInteger, ins, 1)), dims("B,S,16"));
        // A per-row zero point has A's rows.
        let zp = |spec: &str| {
            vec![
                x(DType::U8, "B,S,8"),
                x(DType::I8, "8,16"),
                x(DType::U8, spec),
            ]
        };
        assert_eq!(one(infer(MatMulInteger, zp("S"), 1)), dims("B,S,16"));
        let e = err(infer(MatMulInteger, zp("T"), 1));
        assert!(
            e.contains("a_zero_point has shape [T]; expected one value or [S]"),
            "{e}"
        );

        let f = |spec: &str| x(DType::F32, spec);
        let ins = vec![
            x(DType::U8, "M,4"),
            f(""),
            x(DType::U8, ""),
            x(DType::U8, "4,N"),
            f("N"),
            x(DType::U8, "N"),
            f(""),
            x(DType::U8, ""),
        ];
        assert_eq!(one(infer(QLinearMatMul, ins, 1)), dims("M,N"));

        let window = Window {
            kernel_shape: None,
            strides: Some(vec![2, 2]),
            dilations: None,
            pads: Some(vec![1, 1, 1, 1]),
            auto_pad: crate::ir::AutoPad::NotSet,
            ceil_mode: false,
        };
        let ci = ConvInteger {
            window: window.clone(),
            group: 1,
        };
        let ins = vec![
            x(DType::U8, "N,3,H,W"),
            x(DType::U8, "8,3,3,3"),
            x(DType::U8, ""),
            x(DType::U8, "8"),
        ];
        let out = one(infer(ci.clone(), ins, 1));
        let sp = |s: &str| (Dim::sym(s) + 2usize - 3usize).div_floor(2) + 1;
        assert_eq!(out, vec![Dim::sym("N"), 8usize.into(), sp("H"), sp("W")]);
        let ins = vec![
            x(DType::U8, "N,3,H,W"),
            x(DType::U8, "8,3,3,3"),
            x(DType::U8, ""),
            x(DType::U8, "4"),
        ];
        assert!(
            err(infer(ci, ins, 1))
                .contains("w_zero_point has shape [4]; expected one value or [8]")
        );

        let qc = QLinearConv { window, group: 1 };
        let ins = vec![
            x(DType::U8, "N,3,H,W"),
            f(""),
            x(DType::U8, ""),
            x(DType::I8, "8,3,3,3"),
            f("8"),
            x(DType::I8, "8"),
            f(""),
            x(DType::U8, ""),
            x(DType::I32, "8"),
        ];
        let out = one(infer(qc.clone(), ins, 1));
        assert_eq!(out, vec![Dim::sym("N"), 8usize.into(), sp("H"), sp("W")]);
        let ins = vec![
            x(DType::U8, "N,3,H,W"),
            f(""),
            x(DType::U8, ""),
            x(DType::I8, "8,3,3,3"),
            f("8"),
            x(DType::I8, "8"),
            f(""),
            x(DType::U8, ""),
            x(DType::I32, "C"),
        ];
        assert!(err(infer(qc, ins, 1)).contains("B is int32 [C]; expected int32 [8]"));
    }
}
