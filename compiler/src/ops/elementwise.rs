//! Elementwise operators: unary math and activations, broadcasting binary arithmetic,
//! comparisons and logic, Where, Cast/CastLike, Clip, and the variadic Sum/Max/Min/Mean.
//!
//! A new unary or binary operator is one line in [`UNARY`] or [`BINARY`]: its ONNX
//! name, first opset, element types, whether the CUDA target has it, and the typed
//! kernel's op built from its attributes. float32 operators with a tuned kernel (and a
//! CUDA kernel) lower to it, so they stay in-place candidates; every other type goes
//! to `kiln_runtime::typed`, which also evaluates constants at compile time.

use std::sync::Arc;

use kiln_runtime::params as legacy;
use kiln_runtime::typed::{self, Bool, Elem, params as tp};

use super::{
    Fact, FixedFact, InferCx, LowerCx, Op, OpDef, Operator, ParseCx, R, Types, broadcast,
    broadcast_dims,
};
use crate::dim::Dim;
use crate::lower::{Kernel, Operand, TypedCall, broadcast_params};
use crate::tensor::{DType, Scalar, Tensor};
use crate::{dispatch_data, dispatch_dtype, impl_as_any};

/// A typed broadcast over `operands` into `out` (contiguous), size-1 dims dropped and
/// contiguous runs merged so the kernel sees the lowest rank.
pub fn typed_broadcast(out: &[usize], operands: &[&[usize]]) -> R<tp::Broadcast> {
    let strides: Vec<Vec<usize>> = operands
        .iter()
        .map(|s| crate::lower::broadcast_strides(s, out))
        .collect();
    let mut dims: Vec<(usize, [usize; 3])> = Vec::new();
    for d in 0..out.len() {
        if out[d] == 1 {
            continue;
        }
        let mut st = [0; 3];
        for (k, s) in strides.iter().enumerate() {
            st[k] = s[d];
        }
        if let Some(last) = dims.last_mut()
            && (0..3).all(|k| last.1[k] == st[k] * out[d])
        {
            last.0 *= out[d];
            last.1 = st;
            continue;
        }
        dims.push((out[d], st));
    }
    if dims.len() > tp::RANK {
        return Err(format!(
            "broadcast of rank {} exceeds the supported {}",
            dims.len(),
            tp::RANK
        ));
    }
    let mut p = tp::Broadcast {
        rank: dims.len(),
        shape: [1; tp::RANK],
        strides: [[0; tp::RANK]; 3],
    };
    for (i, (n, st)) in dims.into_iter().enumerate() {
        p.shape[i] = n;
        for (operand, &stride) in p.strides.iter_mut().zip(&st) {
            operand[i] = stride;
        }
    }
    Ok(p)
}

// ---------------------------------------------------------------------------------
// Unary

/// A one-input, same-shape operator.
#[derive(Debug, Clone)]
pub struct Unary {
    pub name: &'static str,
    pub op: tp::UnaryOp,
    pub types: Types,
}

/// The tuned float32 kernel of a unary op, where there is one.
fn legacy_unary(op: tp::UnaryOp) -> Option<legacy::Unary> {
    Some(match op {
        tp::UnaryOp::Relu => legacy::Unary::Relu,
        tp::UnaryOp::LeakyRelu { alpha } => legacy::Unary::LeakyRelu { alpha },
        tp::UnaryOp::Sigmoid => legacy::Unary::Sigmoid,
        tp::UnaryOp::Tanh => legacy::Unary::Tanh,
        tp::UnaryOp::Exp => legacy::Unary::Exp,
        tp::UnaryOp::Neg => legacy::Unary::Neg,
        tp::UnaryOp::Abs => legacy::Unary::Abs,
        tp::UnaryOp::Sqrt => legacy::Unary::Sqrt,
        tp::UnaryOp::Erf => legacy::Unary::Erf,
        tp::UnaryOp::HardSigmoid { alpha, beta } => legacy::Unary::HardSigmoid { alpha, beta },
        tp::UnaryOp::HardSwish => legacy::Unary::HardSwish,
        tp::UnaryOp::Swish { alpha } => legacy::Unary::Swish { alpha },
        tp::UnaryOp::Gelu { tanh } => legacy::Unary::Gelu { tanh },
        _ => return None,
    })
}

impl Operator for Unary {
    fn name(&self) -> &'static str {
        self.name
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, self.types)?;
        Ok(vec![Fact::new(d, cx.dims(0)?.to_vec())])
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "input")?;
        let p = tp::Unary { op: self.op };
        let data = dispatch_data!(&x.data, v: T => {
            let mut out = vec![T::default(); v.len()];
            typed::unary(&p, v, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(x.shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        match legacy_unary(self.op) {
            Some(u) if d == DType::F32 => {
                let out = cx.output(0)?;
                cx.step(Kernel::Unary(u), vec![x], out);
            }
            _ => {
                let call = TypedCall::new("unary", vec![d], &tp::Unary { op: self.op });
                cx.typed(call, vec![x], 0)?;
            }
        }
        Ok(())
    }
    impl_as_any!();
}

/// Declares unary operators: `"Name" since Types cuda => |attrs| typed op;`.
macro_rules! unary_ops {
    ($($name:literal $since:literal $types:ident $cuda:literal => |$a:ident| $op:expr;)*) => {
        /// Unary operators, one line each.
        pub const UNARY: &[OpDef] = &[$(OpDef {
            name: $name,
            since: $since,
            types: Types::$types,
            cuda: $cuda,
            parse: |cx: &ParseCx| -> R<Op> {
                #[allow(unused_variables)]
                let $a = &cx.attrs;
                Ok(Arc::new(Unary { name: $name, op: $op, types: Types::$types }))
            },
        }),*];
    };
}

use tp::UnaryOp as U;

unary_ops! {
    "Abs" 6 Numeric true => |a| U::Abs;
    "Neg" 6 Signed true => |a| U::Neg;
    "Sign" 9 Numeric false => |a| U::Sign;
    "Ceil" 6 Float false => |a| U::Ceil;
    "Floor" 6 Float false => |a| U::Floor;
    "Round" 11 Float false => |a| U::Round;
    "Sqrt" 6 Float true => |a| U::Sqrt;
    "Reciprocal" 6 Float false => |a| U::Reciprocal;
    "Exp" 6 Float true => |a| U::Exp;
    "Log" 6 Float false => |a| U::Log;
    "Sin" 7 Float false => |a| U::Sin;
    "Cos" 7 Float false => |a| U::Cos;
    "Tan" 7 Float false => |a| U::Tan;
    "Asin" 7 Float false => |a| U::Asin;
    "Acos" 7 Float false => |a| U::Acos;
    "Atan" 7 Float false => |a| U::Atan;
    "Sinh" 9 Float false => |a| U::Sinh;
    "Cosh" 9 Float false => |a| U::Cosh;
    "Asinh" 9 Float false => |a| U::Asinh;
    "Acosh" 9 Float false => |a| U::Acosh;
    "Atanh" 9 Float false => |a| U::Atanh;
    "Tanh" 6 Float true => |a| U::Tanh;
    "Sigmoid" 6 Float true => |a| U::Sigmoid;
    "Erf" 9 Float true => |a| U::Erf;
    "Relu" 6 Signed true => |a| U::Relu;
    "LeakyRelu" 6 Float true => |a| U::LeakyRelu { alpha: a.float_or("alpha", 0.01)? };
    "Elu" 6 Float false => |a| U::Elu { alpha: a.float_or("alpha", 1.0)? };
    "Selu" 6 Float false => |a| U::Selu {
        alpha: a.float_or("alpha", 1.673_263_2)?,
        gamma: a.float_or("gamma", 1.050_701)?,
    };
    "Celu" 12 Float false => |a| U::Celu { alpha: a.float_or("alpha", 1.0)? };
    "HardSigmoid" 6 Float true => |a| U::HardSigmoid {
        alpha: a.float_or("alpha", 0.2)?,
        beta: a.float_or("beta", 0.5)?,
    };
    "HardSwish" 14 Float true => |a| U::HardSwish;
    "Softplus" 1 Float false => |a| U::Softplus;
    "Softsign" 1 Float false => |a| U::Softsign;
    "Mish" 18 Float false => |a| U::Mish;
    "Gelu" 20 Float true => |a| U::Gelu {
        tanh: match a.string("approximate")?.as_deref() {
            None | Some("none") => false,
            Some("tanh") => true,
            Some(o) => return Err(format!("unknown approximate `{o}`")),
        },
    };
    "ThresholdedRelu" 10 Float false => |a| U::ThresholdedRelu { alpha: a.float_or("alpha", 1.0)? };
    "Shrink" 9 Numeric false => |a| U::Shrink {
        bias: a.float_or("bias", 0.0)?,
        lambd: a.float_or("lambd", 0.5)?,
    };
    "Not" 1 Bool false => |a| U::Not;
    "BitwiseNot" 18 Int false => |a| U::BitwiseNot;
}

// ---------------------------------------------------------------------------------
// Binary

/// A broadcasting two-input operator with the inputs' type as output type.
#[derive(Debug, Clone)]
pub struct Binary {
    pub name: &'static str,
    pub op: tp::BinaryOp,
    pub types: Types,
}

impl Binary {
    /// The tuned float32 kernel's op, where there is one.
    pub fn legacy(&self) -> Option<legacy::Binary> {
        Some(match self.op {
            tp::BinaryOp::Add => legacy::Binary::Add,
            tp::BinaryOp::Sub => legacy::Binary::Sub,
            tp::BinaryOp::Mul => legacy::Binary::Mul,
            tp::BinaryOp::Div => legacy::Binary::Div,
            tp::BinaryOp::Max => legacy::Binary::Max,
            tp::BinaryOp::Min => legacy::Binary::Min,
            _ => return None,
        })
    }
}

fn same_types(cx: &InferCx, n: usize, types: Types) -> R<DType> {
    let d = cx.check_type(0, types)?;
    for i in 1..n {
        if let Some(v) = cx.opt(i)
            && v.dtype != d
        {
            return Err(format!(
                "input {i} has element type {}, input 0 has {d}; they must match",
                v.dtype
            ));
        }
    }
    Ok(d)
}

/// Output dims of a broadcasting node over its present inputs.
fn broadcast_shape(cx: &InferCx) -> R<Vec<Dim>> {
    let inputs = cx.inputs();
    let shapes: Vec<&[Dim]> = inputs.iter().map(|v| v.dims()).collect();
    broadcast_dims(&shapes)
}

impl Binary {
    /// Integer arithmetic on shape values (`Shape(x)[1] * 2`, `S / 12`): the result
    /// as dims, when both operands are known as dims (one may be a single value) and
    /// the operation stays a size expression; `None` leaves the value unknown.
    fn on_dims(&self, cx: &InferCx) -> R<Option<Vec<Dim>>> {
        let (Some(a), Some(b)) = (cx.dims_value(0), cx.dims_value(1)) else {
            return Ok(None);
        };
        let n = a.len().max(b.len());
        if !(a.len() == n || a.len() == 1) || !(b.len() == n || b.len() == 1) {
            return Err(format!(
                "operands of {} and {} values do not broadcast",
                a.len(),
                b.len()
            ));
        }
        let at = |v: &[Dim], i: usize| v[if v.len() == 1 { 0 } else { i }].clone();
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let (x, y) = (at(&a, i), at(&b, i));
            out.push(match self.op {
                tp::BinaryOp::Add => x + y,
                tp::BinaryOp::Sub => x - y,
                tp::BinaryOp::Mul => x * y,
                tp::BinaryOp::Max => x.max(&y),
                tp::BinaryOp::Min => x.min(&y),
                // Sizes are not negative, so truncation is floor.
                tp::BinaryOp::Div => match y.known() {
                    Some(k) if k > 0 => x.div_floor(k as u64),
                    _ => return Ok(None),
                },
                _ => return Ok(None),
            });
        }
        Ok(Some(out))
    }
}

/// `op` over two constant tensors broadcast to `shape`, by the run-time kernel.
fn eval_binary(op: tp::BinaryOp, a: &Tensor, b: &Tensor, shape: &[usize]) -> R<Tensor> {
    let bc = typed_broadcast(shape, &[&a.shape, &b.shape])?;
    let p = tp::Binary { op, bc };
    let n = shape.iter().product();
    let data = dispatch_data!(&a.data, av: T => {
        let bv = b.values::<T>().ok_or("operand types differ")?;
        let mut out = vec![T::default(); n];
        typed::binary(&p, av, bv, &mut out);
        T::wrap(out)
    });
    Ok(Tensor::new(shape.to_vec(), data))
}

impl Operator for Binary {
    fn name(&self) -> &'static str {
        self.name
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = same_types(cx, 2, self.types)?;
        cx.input(1)?;
        let shape = broadcast_shape(cx)?;
        if d.is_int()
            && shape.len() <= 1
            && (cx.input(0)?.sym.is_some() || cx.input(1)?.sym.is_some())
            && let Some(values) = self.on_dims(cx)?
        {
            return Ok(vec![Fact::int_value(d, values, shape.is_empty())]);
        }
        Ok(vec![Fact::new(d, shape)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let (a, b) = (cx.constant(0, "A")?, cx.constant(1, "B")?);
        Ok(Some(vec![eval_binary(self.op, a, b, &outs[0].shape)?]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let y = cx.out(0)?.shape().to_vec();
        let (sa, sb) = (cx.shape(0)?.to_vec(), cx.shape(1)?.to_vec());
        let inputs = vec![cx.operand(0)?, cx.operand(1)?];
        if let (Some(op), DType::F32) = (self.legacy(), d)
            && let Ok(bc) = broadcast_params(&y, &sa, &sb)
        {
            let out = cx.output(0)?;
            cx.step(Kernel::Binary(op, bc), inputs, out);
            return Ok(());
        }
        let bc = typed_broadcast(&y, &[&sa, &sb])?;
        let call = TypedCall::new("binary", vec![d], &tp::Binary { op: self.op, bc });
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

macro_rules! binary_ops {
    ($($name:literal $since:literal $types:ident $cuda:literal => |$a:ident| $op:expr;)*) => {
        /// Broadcasting binary operators, one line each.
        pub const BINARY: &[OpDef] = &[$(OpDef {
            name: $name,
            since: $since,
            types: Types::$types,
            cuda: $cuda,
            parse: |cx: &ParseCx| -> R<Op> {
                #[allow(unused_variables)]
                let $a = &cx.attrs;
                Ok(Arc::new(Binary { name: $name, op: $op, types: Types::$types }))
            },
        }),*];
    };
}

use tp::BinaryOp as B;

binary_ops! {
    "Add" 7 Numeric true => |a| B::Add;
    "Sub" 7 Numeric true => |a| B::Sub;
    "Mul" 7 Numeric true => |a| B::Mul;
    "Div" 7 Numeric true => |a| B::Div;
    "Mod" 10 Numeric false => |a| B::Mod { fmod: a.flag("fmod")? };
    "And" 7 Bool false => |a| B::And;
    "Or" 7 Bool false => |a| B::Or;
    "Xor" 7 Bool false => |a| B::Xor;
    "BitShift" 11 Int false => |a| match a.string("direction")?.as_deref() {
        Some("LEFT") => B::BitShiftLeft,
        Some("RIGHT") => B::BitShiftRight,
        d => return Err(format!("attribute `direction` must be LEFT or RIGHT, got {d:?}")),
    };
    "BitwiseAnd" 18 Int false => |a| B::BitwiseAnd;
    "BitwiseOr" 18 Int false => |a| B::BitwiseOr;
    "BitwiseXor" 18 Int false => |a| B::BitwiseXor;
    "PRelu" 7 Numeric false => |a| B::PRelu;
}

// ---------------------------------------------------------------------------------
// Comparisons, Pow, Where, IsNaN/IsInf, Cast, Clip, variadic

/// `Equal`, `Less`, ...: broadcasting, output bool.
#[derive(Debug, Clone)]
pub struct Compare {
    pub name: &'static str,
    pub op: tp::CompareOp,
}

impl Operator for Compare {
    fn name(&self) -> &'static str {
        self.name
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        same_types(cx, 2, Types::All)?;
        cx.input(1)?;
        Ok(vec![Fact::new(DType::Bool, broadcast_shape(cx)?)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let (a, b) = (cx.constant(0, "A")?, cx.constant(1, "B")?);
        let shape = &outs[0].shape;
        let bc = typed_broadcast(shape, &[&a.shape, &b.shape])?;
        let p = tp::Compare { op: self.op, bc };
        let mut out = vec![Bool::default(); shape.iter().product()];
        dispatch_data!(&a.data, av: T => {
            let bv = b.values::<T>().ok_or("operand types differ")?;
            typed::compare(&p, av, bv, &mut out);
        });
        Ok(Some(vec![Tensor::from_vec(shape.clone(), out)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let y = cx.out(0)?.shape().to_vec();
        let bc = typed_broadcast(&y, &[cx.shape(0)?, cx.shape(1)?])?;
        let inputs = vec![cx.operand(0)?, cx.operand(1)?];
        let call = TypedCall::new("compare", vec![d], &tp::Compare { op: self.op, bc });
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// `Pow(X, Y)`: the exponent may have another numeric type.
#[derive(Debug, Clone)]
pub struct Pow;

impl Operator for Pow {
    fn name(&self) -> &'static str {
        "Pow"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Numeric)?;
        cx.check_type(1, Types::Numeric)?;
        Ok(vec![Fact::new(d, broadcast_shape(cx)?)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let (a, b) = (cx.constant(0, "X")?, cx.constant(1, "Y")?);
        let shape = &outs[0].shape;
        let bc = typed_broadcast(shape, &[&a.shape, &b.shape])?;
        let n = shape.iter().product();
        let data = dispatch_data!(&a.data, av: A => dispatch_data!(&b.data, bv: _B => {
            let mut out = vec![A::default(); n];
            typed::pow(&bc, av, bv, &mut out);
            A::wrap(out)
        }));
        Ok(Some(vec![Tensor::new(shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let (da, db) = (cx.dtype(0)?, cx.dtype(1)?);
        let y = cx.out(0)?.shape().to_vec();
        // A float32 square (a spectrum's power, a variance) on the tuned multiply: the
        // f32 product rounds the exact square once, as `powf(x, 2)` in f64 then to f32
        // does, so the bits are the same.
        let squares = cx
            .opt_constant(1)
            .is_some_and(|e| e.as_f64().iter().all(|&v| v == 2.0));
        if da == DType::F32 && squares && cx.shape(0)? == y.as_slice() {
            let bc = broadcast_params(&y, &y, &y)?;
            let x = cx.operand(0)?;
            let out = cx.output(0)?;
            cx.step(Kernel::Binary(legacy::Binary::Mul, bc), vec![x, x], out);
            return Ok(());
        }
        let bc = typed_broadcast(&y, &[cx.shape(0)?, cx.shape(1)?])?;
        let inputs = vec![cx.operand(0)?, cx.operand(1)?];
        let call = TypedCall::new("pow", vec![da, db], &bc).inputs(vec![da, db]);
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// `Where(condition, X, Y)`.
#[derive(Debug, Clone)]
pub struct Where;

impl Operator for Where {
    fn name(&self) -> &'static str {
        "Where"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        if cx.dtype(0)? != DType::Bool {
            return Err(format!(
                "condition has element type {}, expected bool",
                cx.dtype(0)?
            ));
        }
        let d = cx.dtype(1)?;
        if cx.dtype(2)? != d {
            return Err(format!("X is {d} but Y is {}", cx.dtype(2)?));
        }
        Ok(vec![Fact::new(d, broadcast_shape(cx)?)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let c = cx.constant(0, "condition")?;
        let (x, y) = (cx.constant(1, "X")?, cx.constant(2, "Y")?);
        let shape = &outs[0].shape;
        let bc = typed_broadcast(shape, &[&c.shape, &x.shape, &y.shape])?;
        let cv = c.values::<Bool>().ok_or("condition is not bool")?;
        let n = shape.iter().product();
        let data = dispatch_data!(&x.data, xv: T => {
            let yv = y.values::<T>().ok_or("X and Y types differ")?;
            let mut out = vec![T::default(); n];
            typed::where_(&bc, cv, xv, yv, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(shape.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(1)?;
        let y = cx.out(0)?.shape().to_vec();
        let bc = typed_broadcast(&y, &[cx.shape(0)?, cx.shape(1)?, cx.shape(2)?])?;
        let inputs = cx.operands()?;
        let call = TypedCall::new("where_", vec![d], &bc).inputs(vec![DType::Bool, d, d]);
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// `IsNaN`, `IsInf`: float in, bool out.
#[derive(Debug, Clone)]
pub struct FloatClass {
    /// `None` for IsNaN.
    pub inf: Option<tp::IsInf>,
}

impl Operator for FloatClass {
    fn name(&self) -> &'static str {
        if self.inf.is_some() { "IsInf" } else { "IsNaN" }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        cx.check_type(0, Types::Float)?;
        Ok(vec![Fact::new(DType::Bool, cx.dims(0)?.to_vec())])
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "X")?;
        let mut out = vec![Bool::default(); x.len()];
        dispatch_data!(&x.data, v: _T => match &self.inf {
            Some(p) => typed::is_inf(p, v, &mut out),
            None => typed::is_nan(v, &mut out),
        });
        Ok(Some(vec![Tensor::from_vec(x.shape.clone(), out)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let x = cx.operand(0)?;
        let call = match &self.inf {
            Some(p) => TypedCall::new("is_inf", vec![d], p),
            None => TypedCall::bare("is_nan", vec![d]),
        };
        cx.typed(call.inputs(vec![d]), vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// `Cast(to)`, and `CastLike` (the type of input 1).
#[derive(Debug, Clone)]
pub struct Cast {
    /// `None` for CastLike.
    pub to: Option<DType>,
    /// `saturate` (float8 targets) and `round_mode` (float8 E8M0).
    pub mode: tp::CastMode,
}

impl Cast {
    /// `saturate` (opset 19; default 1) and `round_mode` (opset 24; default `up`).
    fn parse(cx: &ParseCx, to: Option<DType>) -> R<Op> {
        let round_mode = match cx.attrs.string("round_mode")?.as_deref() {
            None | Some("up") => tp::RoundMode::Up,
            Some("down") => tp::RoundMode::Down,
            Some("nearest") => tp::RoundMode::Nearest,
            Some(m) => {
                return Err(format!(
                    "round_mode `{m}` is not one of `up`, `down`, `nearest`"
                ));
            }
        };
        let mode = tp::CastMode {
            saturate: cx.attrs.int_or("saturate", 1)? != 0,
            round_mode,
        };
        Ok(Arc::new(Cast { to, mode }))
    }

    fn target(&self, cx: &InferCx) -> R<DType> {
        match self.to {
            Some(d) => Ok(d),
            None => cx.dtype(1),
        }
    }
}

impl Operator for Cast {
    fn name(&self) -> &'static str {
        if self.to.is_some() {
            "Cast"
        } else {
            "CastLike"
        }
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let to = self.target(cx)?;
        // CastLike reads only the type of its second input: a constant first input
        // folds even when the second is computed at run time.
        if let Some(x) = cx.opt_constant(0) {
            return Ok(vec![Fact::constant(x.cast_with(to, &self.mode))]);
        }
        // A shape value keeps its dims cast to another integer type, or to float32/64
        // (exact for dims below 2^24; what detectors' anchor grids do before Range).
        if let Some(sym) = &cx.input(0)?.sym
            && (to.is_int() || matches!(to, DType::F32 | DType::F64))
            && cx.dtype(0)?.is_int()
        {
            return Ok(vec![Fact {
                sym: Some(sym.clone()),
                ..Fact::new(to, cx.dims(0)?.to_vec())
            }]);
        }
        Ok(vec![Fact::new(to, cx.dims(0)?.to_vec())])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        // CastLike's second input is only its type: fold even when it is not constant.
        let x = cx.constant(0, "input")?;
        Ok(Some(vec![x.cast_with(outs[0].dtype, &self.mode)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let from = cx.dtype(0)?;
        let to = cx.out(0)?.dtype;
        let x = cx.operand(0)?;
        if from == to {
            let out = cx.output(0)?;
            cx.step(crate::lower::copy_kernel(to), vec![x], out);
            return Ok(());
        }
        let call = TypedCall::new("cast_with", vec![from, to], &self.mode).inputs(vec![from]);
        cx.typed(call, vec![x], 0)?;
        Ok(())
    }
    impl_as_any!();
}

/// `Clip`: bounds from attributes before opset 11, from optional constant inputs after.
#[derive(Debug, Clone)]
pub struct Clip {
    pub min: Option<f32>,
    pub max: Option<f32>,
}

impl Clip {
    /// The bounds as `f64` (`None` = unbounded), from attributes or constant inputs.
    pub fn bounds(&self, constant: impl Fn(usize) -> Option<Option<f64>>) -> R<[Option<f64>; 2]> {
        let one = |attr: Option<f32>, k: usize| -> R<Option<f64>> {
            match attr {
                Some(v) => Ok(Some(v as f64)),
                None => constant(k).ok_or_else(|| format!("Clip bound {k} must be a constant")),
            }
        };
        Ok([one(self.min, 1)?, one(self.max, 2)?])
    }
}

impl Operator for Clip {
    fn name(&self) -> &'static str {
        "Clip"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Numeric)?;
        Ok(vec![Fact::new(d, cx.dims(0)?.to_vec())])
    }
    fn eval(&self, cx: &InferCx, _: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let x = cx.constant(0, "input")?;
        let mut t = x.clone();
        for (k, op) in [(1, B::Max), (2, B::Min)] {
            if let Some(b) = cx.opt_constant(k) {
                t = eval_binary(op, &t, b, &x.shape)?;
            }
        }
        Ok(Some(vec![t]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let bound = |cx: &LowerCx, k: usize| -> Option<Option<f64>> {
            match cx.opt(k) {
                None => Some(None),
                Some(v) => v.constant.as_ref().and_then(|t| t.scalar_f64()).map(Some),
            }
        };
        // Bounds computed at run time (inputs, not constants) are read by the kernel.
        let runtime = |cx: &LowerCx, k: usize| {
            self.min.is_none() && cx.opt(k).is_some_and(|v| v.constant.is_none())
        };
        let dynamic = [runtime(cx, 1), runtime(cx, 2)];
        let [lo, hi] = if dynamic.iter().any(|&d| d) {
            [None, None]
        } else {
            self.bounds(|k| bound(cx, k))?
        };
        let x = cx.operand(0)?;
        if d == DType::F32 && !dynamic.iter().any(|&d| d) {
            let p = legacy::Unary::Clip {
                min: lo.map_or(f32::MIN, |v| v as f32),
                max: hi.map_or(f32::MAX, |v| v as f32),
            };
            let out = cx.output(0)?;
            cx.step(Kernel::Unary(p), vec![x], out);
            return Ok(());
        }
        // Otherwise: max with the lower bound, then min with the upper, each a
        // broadcast against a scalar (a weight, or the bound input itself).
        let shape = cx.shape(0)?.to_vec();
        let bc = typed_broadcast(&shape, &[&shape, &[]])?;
        let mut cur = x;
        let mut steps: Vec<(tp::BinaryOp, Operand)> = Vec::new();
        for (k, op, b) in [(1, B::Max, lo), (2, B::Min, hi)] {
            if dynamic[k - 1] {
                if cx.input(k)?.len() != 1 {
                    return Err(format!("Clip bound {k} must hold one value"));
                }
                steps.push((op, cx.operand(k)?));
            } else if let Some(v) = b {
                let t = dispatch_dtype!(d, T => Tensor::from_vec(vec![], vec![T::from_f64(v)]));
                steps.push((op, cx.weight(&format!("{}:clip_bound", cx.node.name), &t)));
            } else if let Some(t) = cx.opt_constant(k) {
                steps.push((op, cx.weight(&format!("{}:clip_bound", cx.node.name), t)));
            }
        }
        if steps.is_empty() {
            let out = cx.output(0)?;
            cx.step(crate::lower::copy_kernel(d), vec![x], out);
            return Ok(());
        }
        let last = steps.len() - 1;
        for (i, (op, w)) in steps.into_iter().enumerate() {
            let out = if i == last {
                cx.output(0)?
            } else {
                cx.temp(d, shape.iter().product())
            };
            let call = TypedCall::new("binary", vec![d], &tp::Binary { op, bc });
            cx.step(Kernel::Typed(call), vec![cur, w], out);
            cur = Operand::Buffer(out);
        }
        Ok(())
    }
    impl_as_any!();
}

/// `Sum`, `Max`, `Min`, `Mean` over any number of broadcasting inputs.
#[derive(Debug, Clone)]
pub struct Variadic {
    pub name: &'static str,
    pub op: tp::BinaryOp,
    pub mean: bool,
}

impl Variadic {
    pub fn legacy(&self) -> Option<legacy::Binary> {
        Binary {
            name: self.name,
            op: self.op,
            types: Types::All,
        }
        .legacy()
        .filter(|_| !self.mean)
    }
}

impl Operator for Variadic {
    fn name(&self) -> &'static str {
        self.name
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        if cx.inputs().is_empty() {
            return Err("needs at least one input".into());
        }
        let d = same_types(cx, cx.node.inputs.len(), Types::Numeric)?;
        Ok(vec![Fact::new(d, broadcast_shape(cx)?)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let shape = &outs[0].shape;
        let ins = cx.constants().ok_or("inputs are not constant")?;
        let mut acc = ins[0].clone();
        for t in &ins[1..] {
            let s = broadcast(&[&acc.shape, &t.shape])?;
            acc = eval_binary(self.op, &acc, t, &s)?;
        }
        if self.mean {
            let n = dispatch_dtype!(acc.dtype, T => Tensor::from_vec(vec![], vec![T::from_f64(ins.len() as f64)]));
            acc = eval_binary(B::Div, &acc, &n, shape)?;
        }
        Ok(Some(vec![acc]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let y = cx.out(0)?.shape().to_vec();
        let shapes: Vec<Vec<usize>> = cx.inputs_shapes();
        let operands = cx.operands()?;
        let out = cx.output(0)?;
        if operands.len() == 1 {
            cx.step(crate::lower::copy_kernel(d), operands, out);
            return Ok(());
        }
        let legacy = self.legacy().filter(|_| d == DType::F32);
        // y = op(a, b); y = op(y, c); ...
        match legacy.and_then(|op| Some((op, broadcast_params(&y, &shapes[0], &shapes[1]).ok()?))) {
            Some((op, bc)) => cx.step(Kernel::Binary(op, bc), operands[..2].to_vec(), out),
            None => {
                let bc = typed_broadcast(&y, &[&shapes[0], &shapes[1]])?;
                let call = TypedCall::new("binary", vec![d], &tp::Binary { op: self.op, bc });
                cx.step(Kernel::Typed(call), operands[..2].to_vec(), out);
            }
        }
        for (k, o) in operands.iter().enumerate().skip(2) {
            match legacy.and_then(|op| Some((op, broadcast_params(&y, &y, &shapes[k]).ok()?))) {
                Some((op, bc)) => cx.step(Kernel::BinaryInPlace(op, bc), vec![*o], out),
                None => {
                    let bc = typed_broadcast(&y, &[&y, &shapes[k]])?;
                    let call =
                        TypedCall::new("binary_acc", vec![d], &tp::Binary { op: self.op, bc });
                    cx.step(Kernel::Typed(call), vec![*o], out);
                }
            }
        }
        if self.mean {
            let n = dispatch_dtype!(d, T => Tensor::from_vec(vec![], vec![T::from_f64(operands.len() as f64)]));
            let w = cx.weight(&format!("{}:count", cx.node.name), &n);
            let bc = typed_broadcast(&y, &[&y, &[]])?;
            let call = TypedCall::new("binary_acc", vec![d], &tp::Binary { op: B::Div, bc });
            cx.step(Kernel::Typed(call), vec![w], out);
        }
        Ok(())
    }
    impl_as_any!();
}

/// Comparisons, Pow, Where, IsNaN/IsInf, Cast/CastLike, Clip and the variadic ops.
pub const OTHER: &[OpDef] = &[
    OpDef {
        name: "Equal",
        since: 7,
        types: Types::All,
        cuda: false,
        parse: |_| {
            Ok(Arc::new(Compare {
                name: "Equal",
                op: tp::CompareOp::Equal,
            }))
        },
    },
    OpDef {
        name: "Less",
        since: 7,
        types: Types::Numeric,
        cuda: false,
        parse: |_| {
            Ok(Arc::new(Compare {
                name: "Less",
                op: tp::CompareOp::Less,
            }))
        },
    },
    OpDef {
        name: "LessOrEqual",
        since: 12,
        types: Types::Numeric,
        cuda: false,
        parse: |_| {
            Ok(Arc::new(Compare {
                name: "LessOrEqual",
                op: tp::CompareOp::LessOrEqual,
            }))
        },
    },
    OpDef {
        name: "Greater",
        since: 7,
        types: Types::Numeric,
        cuda: false,
        parse: |_| {
            Ok(Arc::new(Compare {
                name: "Greater",
                op: tp::CompareOp::Greater,
            }))
        },
    },
    OpDef {
        name: "GreaterOrEqual",
        since: 12,
        types: Types::Numeric,
        cuda: false,
        parse: |_| {
            Ok(Arc::new(Compare {
                name: "GreaterOrEqual",
                op: tp::CompareOp::GreaterOrEqual,
            }))
        },
    },
    OpDef {
        name: "Pow",
        since: 7,
        types: Types::Numeric,
        cuda: false,
        parse: |_| Ok(Arc::new(Pow)),
    },
    OpDef {
        name: "Where",
        since: 9,
        types: Types::All,
        cuda: false,
        parse: |_| Ok(Arc::new(Where)),
    },
    OpDef {
        name: "IsNaN",
        since: 9,
        types: Types::Float,
        cuda: false,
        parse: |_| Ok(Arc::new(FloatClass { inf: None })),
    },
    OpDef {
        name: "IsInf",
        since: 10,
        types: Types::Float,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(FloatClass {
                inf: Some(tp::IsInf {
                    detect_negative: cx.attrs.int_or("detect_negative", 1)? != 0,
                    detect_positive: cx.attrs.int_or("detect_positive", 1)? != 0,
                }),
            }))
        },
    },
    OpDef {
        name: "Cast",
        since: 6,
        types: Types::All,
        cuda: false,
        parse: |cx| {
            let to = cx.attrs.int("to")?.ok_or("attribute `to` is required")?;
            let to = DType::from_onnx(to as i32).ok_or_else(|| {
                format!(
                    "casts to {}, which Kiln does not support",
                    DType::onnx_code_name(to as i32)
                )
            })?;
            Cast::parse(cx, Some(to))
        },
    },
    OpDef {
        name: "CastLike",
        since: 15,
        types: Types::All,
        cuda: false,
        parse: |cx| Cast::parse(cx, None),
    },
    OpDef {
        name: "Clip",
        since: 6,
        types: Types::Numeric,
        cuda: true,
        parse: |cx| {
            Ok(Arc::new(if cx.opset < 11 {
                Clip {
                    min: Some(cx.attrs.float_or("min", f32::MIN)?),
                    max: Some(cx.attrs.float_or("max", f32::MAX)?),
                }
            } else {
                Clip {
                    min: None,
                    max: None,
                }
            }))
        },
    },
    OpDef {
        name: "Sum",
        since: 8,
        types: Types::Numeric,
        cuda: true,
        parse: |_| {
            Ok(Arc::new(Variadic {
                name: "Sum",
                op: B::Add,
                mean: false,
            }))
        },
    },
    OpDef {
        name: "Mean",
        since: 8,
        types: Types::Float,
        cuda: false,
        parse: |_| {
            Ok(Arc::new(Variadic {
                name: "Mean",
                op: B::Add,
                mean: true,
            }))
        },
    },
    OpDef {
        name: "Max",
        since: 8,
        types: Types::Numeric,
        cuda: true,
        parse: |_| {
            Ok(Arc::new(Variadic {
                name: "Max",
                op: B::Max,
                mean: false,
            }))
        },
    },
    OpDef {
        name: "Min",
        since: 8,
        types: Types::Numeric,
        cuda: true,
        parse: |_| {
            Ok(Arc::new(Variadic {
                name: "Min",
                op: B::Min,
                mean: false,
            }))
        },
    },
];
