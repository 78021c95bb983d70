//! Matrix products: Gemm and MatMul. float32 goes to the tuned faer kernels (and has
//! CUDA kernels); other numeric types to the typed naive product.

#[allow(unused_imports)]
use kiln_runtime::typed::Elem as _;
use std::sync::Arc;

use kiln_runtime::params;
use kiln_runtime::typed::{self, params as tp};

use super::{Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, R, Types, broadcast_dims};
use crate::dim::{Dim, fmt_dims};
use crate::ir::Activation;
use crate::lower::{Kernel, TypedCall, activation_param, broadcast_strides};
use crate::tensor::{DType, Scalar, Tensor};
use crate::{dispatch_data, impl_as_any};

/// `Y = alpha·op(A)·op(B) + beta·C`, with an activation the fusion pass may add.
#[derive(Debug, Clone, PartialEq)]
pub struct Gemm {
    pub alpha: f32,
    pub beta: f32,
    pub trans_a: bool,
    pub trans_b: bool,
    pub activation: Option<Activation>,
}

impl Operator for Gemm {
    fn name(&self) -> &'static str {
        "Gemm"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::F32)?;
        let (a, b) = (cx.dims(0)?, cx.dims(1)?);
        if a.len() != 2 || b.len() != 2 {
            return Err(format!(
                "A and B must be matrices, got {} and {}",
                fmt_dims(a),
                fmt_dims(b)
            ));
        }
        let (m, ka) = if self.trans_a {
            (&a[1], &a[0])
        } else {
            (&a[0], &a[1])
        };
        let (kb, n) = if self.trans_b {
            (&b[1], &b[0])
        } else {
            (&b[0], &b[1])
        };
        if ka != kb {
            return Err(format!(
                "inner dimensions differ: A {}, B {}",
                fmt_dims(a),
                fmt_dims(b)
            ));
        }
        let (m, n) = (m.clone(), n.clone());
        let mn = [m.clone(), n.clone()];
        if let Some(c) = cx.opt(2) {
            let cs = c.dims();
            if cs.len() > 2 || broadcast_dims(&[cs, &mn]).ok().as_deref() != Some(&mn[..]) {
                return Err(format!(
                    "C has shape {}, which does not broadcast to [{m}, {n}]",
                    fmt_dims(cs)
                ));
            }
        }
        Ok(vec![Fact::new(d, vec![m, n])])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let x_shape = cx.shape(0)?;
        let y_shape = cx.out(0)?.shape();
        let k = if self.trans_a { x_shape[0] } else { x_shape[1] };
        let (m, n) = (y_shape[0], y_shape[1]);
        let c_strides = match cx.opt(2) {
            None => [0, 0],
            Some(c) => {
                let cs = c.shape();
                let full: Vec<usize> = std::iter::repeat_n(1, 2 - cs.len().min(2))
                    .chain(cs.iter().copied())
                    .collect();
                [
                    if full[0] == 1 { 0 } else { full[1] },
                    if full[1] == 1 { 0 } else { 1 },
                ]
            }
        };
        let p = params::Gemm {
            m,
            n,
            k,
            trans_a: self.trans_a,
            trans_b: self.trans_b,
            alpha: self.alpha,
            beta: self.beta,
            c_strides,
            activation: activation_param(self.activation),
        };
        let inputs = cx.operands()?;
        let out = cx.output(0)?;
        cx.step(Kernel::Gemm(p), inputs, out);
        Ok(())
    }
    impl_as_any!();
}

/// MatMul's operands with NumPy's 1-D promotion: a vector `a` becomes a row `[1, k]`,
/// a vector `b` a column `[k, 1]`.
pub fn matmul_operands(a: &[usize], b: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let a2 = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let b2 = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    (a2, b2)
}

/// MatMul's output dims (NumPy `matmul`: 1-D operands promoted, batch dims broadcast).
pub(crate) fn matmul_shape(a: &[Dim], b: &[Dim]) -> R<Vec<Dim>> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul operands must have rank ≥ 1".into());
    }
    let one = Dim::from(1usize);
    let a2: Vec<Dim> = if a.len() == 1 {
        vec![one.clone(), a[0].clone()]
    } else {
        a.to_vec()
    };
    let b2: Vec<Dim> = if b.len() == 1 {
        vec![b[0].clone(), one]
    } else {
        b.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2].clone(), &a2[a2.len() - 1]);
    let (k2, n) = (&b2[b2.len() - 2], b2[b2.len() - 1].clone());
    if k != k2 {
        return Err(format!(
            "inner dimensions differ: {} × {}",
            fmt_dims(a),
            fmt_dims(b)
        ));
    }
    let mut out = broadcast_dims(&[&a2[..a2.len() - 2], &b2[..b2.len() - 2]])?;
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(out)
}

/// The batch geometry of a MatMul: `(m, k, n, batch shape, A's and B's batch strides)`.
type Batch = (usize, usize, usize, Vec<usize>, Vec<usize>, Vec<usize>);

fn batch_geometry(a: &[usize], b: &[usize], y: &[usize]) -> Batch {
    let (a2, b2) = matmul_operands(a, b);
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 1]);
    let batch_rank = a2.len().max(b2.len()) - 2;
    let batch: Vec<usize> = y[..y.len() - (a.len() > 1) as usize - (b.len() > 1) as usize].to_vec();
    let batch = if batch.len() == batch_rank {
        batch
    } else {
        vec![1; batch_rank]
    };
    let sa = broadcast_strides(&a2[..a2.len() - 2], &batch);
    let sb = broadcast_strides(&b2[..b2.len() - 2], &batch);
    (m, k, n, batch, sa, sb)
}

/// The tuned kernel's parameters.
pub(crate) fn matmul_params(a: &[usize], b: &[usize], y: &[usize]) -> R<params::MatMul> {
    let (m, k, n, batch, sa, sb) = batch_geometry(a, b, y);
    if batch.len() > params::MAX_RANK {
        return Err(format!(
            "batch rank {} exceeds the supported {}",
            batch.len(),
            params::MAX_RANK
        ));
    }
    let mut p = params::MatMul {
        m,
        n,
        k,
        batch_rank: batch.len(),
        batch_shape: [1; params::MAX_RANK],
        a_batch_strides: [0; params::MAX_RANK],
        b_batch_strides: [0; params::MAX_RANK],
    };
    p.batch_shape[..batch.len()].copy_from_slice(&batch);
    p.a_batch_strides[..batch.len()].copy_from_slice(&sa);
    p.b_batch_strides[..batch.len()].copy_from_slice(&sb);
    Ok(p)
}

fn typed_matmul_params(a: &[usize], b: &[usize], y: &[usize]) -> R<tp::MatMul> {
    let (m, k, n, batch, sa, sb) = batch_geometry(a, b, y);
    if batch.len() > tp::RANK {
        return Err(format!("batch rank {} exceeds {}", batch.len(), tp::RANK));
    }
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

/// A float32 MatMul by a constant matrix `B` (`[k, n]`, a linear layer's weights) as
/// one product of every row of A, with B packed (`NODE:packed`) where the lowering's
/// [`crate::lower::Choices`] allow it. The original B stays out of the blob unless
/// another step reads it.
fn packed_weights(
    cx: &mut LowerCx,
    a: &[usize],
    b: &[usize],
) -> Option<(params::PackedMatMul, crate::lower::Operand)> {
    if !cx.choices().packed_weights || b.len() != 2 {
        return None;
    }
    let (k, n) = (b[0], b[1]);
    let rows = a[..a.len() - 1].iter().product();
    let w = cx.opt_constant(1)?.as_f32();
    let packed = kiln_runtime::kernels::pack_b(k, n, &w);
    let p = params::PackedMatMul { m: rows, n, k };
    Some((p, cx.derived_weight("packed", vec![packed.len()], packed)))
}

#[derive(Debug, Clone)]
pub struct MatMul;

impl Operator for MatMul {
    fn name(&self) -> &'static str {
        "MatMul"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = cx.check_type(0, Types::Numeric)?;
        if cx.dtype(1)? != d {
            return Err(format!("B is {}, A is {d}", cx.dtype(1)?));
        }
        Ok(vec![Fact::new(d, matmul_shape(cx.dims(0)?, cx.dims(1)?)?)])
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let (a, b) = (cx.constant(0, "A")?, cx.constant(1, "B")?);
        let y = &outs[0].shape;
        let p = typed_matmul_params(&a.shape, &b.shape, y)?;
        let data = dispatch_data!(&a.data, av: T => {
            let bv = b.values::<T>().ok_or("operand types differ")?;
            let mut out = vec![T::default(); y.iter().product()];
            typed::matmul(&p, av, bv, &mut out);
            T::wrap(out)
        });
        Ok(Some(vec![Tensor::new(y.clone(), data)]))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let d = cx.dtype(0)?;
        let (a, b) = (cx.shape(0)?, cx.shape(1)?);
        let y = cx.out(0)?.shape();
        if d == DType::F32
            && let Some((p, packed)) = packed_weights(cx, a, b)
        {
            let inputs = vec![cx.operand(0)?, packed];
            let out = cx.output(0)?;
            cx.step(Kernel::PackedMatMul(p), inputs, out);
            return Ok(());
        }
        let inputs = cx.operands()?;
        if d == DType::F32
            && let Ok(p) = matmul_params(a, b, y)
        {
            let out = cx.output(0)?;
            cx.step(Kernel::MatMul(p), inputs, out);
            return Ok(());
        }
        let call = TypedCall::new("matmul", vec![d], &typed_matmul_params(a, b, y)?);
        cx.typed(call, inputs, 0)?;
        Ok(())
    }
    impl_as_any!();
}

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "Gemm",
        since: 7,
        types: Types::F32,
        cuda: true,
        parse: |cx| {
            let a = &cx.attrs;
            Ok(Arc::new(Gemm {
                alpha: a.float_or("alpha", 1.0)?,
                beta: a.float_or("beta", 1.0)?,
                trans_a: a.flag("transA")?,
                trans_b: a.flag("transB")?,
                activation: None,
            }))
        },
    },
    OpDef {
        name: "MatMul",
        since: 1,
        types: Types::Numeric,
        cuda: true,
        parse: |_| Ok(Arc::new(MatMul)),
    },
];
