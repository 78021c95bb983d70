//! Attention (opsets 23–25): scaled dot-product attention with 3-D or 4-D inputs,
//! grouped-query heads, a bool or additive mask, causal and sliding-window masking,
//! a key/value cache, `nonpad_kv_seqlen`, softcap and the optional `qk_matmul_output`,
//! on one typed kernel (`kiln_runtime::typed::attention`).

use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::{Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, R, Types};
use crate::lower::TypedCall;
use crate::tensor::{DType, Data, Scalar, Tensor};
use crate::{dispatch_data, impl_as_any};

/// Input positions.
const Q: usize = 0;
const K: usize = 1;
const V: usize = 2;
const MASK: usize = 3;
const PAST_KEY: usize = 4;
const PAST_VALUE: usize = 5;
const NONPAD: usize = 6;

#[derive(Debug, Clone)]
pub struct Attention {
    pub opset: i64,
    pub scale: Option<f32>,
    pub is_causal: bool,
    pub q_num_heads: Option<i64>,
    pub kv_num_heads: Option<i64>,
    pub softcap: f32,
    pub qk_matmul_output_mode: i64,
    /// ONNX data type code.
    pub softmax_precision: Option<i64>,
    pub left_window: i64,
    pub right_window: i64,
}

/// The resolved geometry: kernel parameters and output shapes.
struct Plan {
    p: tp::Attention,
    y: Vec<usize>,
    present_key: Vec<usize>,
    present_value: Vec<usize>,
    qk: Vec<usize>,
    q: DType,
    v: DType,
}

fn precision(d: DType) -> Option<tp::SoftmaxPrecision> {
    Some(match d {
        DType::F64 => tp::SoftmaxPrecision::F64,
        DType::F32 => tp::SoftmaxPrecision::F32,
        DType::F16 => tp::SoftmaxPrecision::F16,
        DType::BF16 => tp::SoftmaxPrecision::Bf16,
        _ => return None,
    })
}

fn heads(attr: Option<i64>, name: &str) -> R<usize> {
    match attr {
        Some(h) if h > 0 => Ok(h as usize),
        Some(h) => Err(format!(
            "{name} is {h}, expected a positive number of heads"
        )),
        None => Err(format!("3-D inputs need the `{name}` attribute")),
    }
}

/// `hidden / heads`, which must divide.
fn per_head(hidden: usize, heads: usize, what: &str) -> R<usize> {
    if heads == 0 || !hidden.is_multiple_of(heads) {
        return Err(format!(
            "{what} hidden size {hidden} is not a multiple of its {heads} heads"
        ));
    }
    Ok(hidden / heads)
}

impl Attention {
    fn plan(&self, cx: &InferCx) -> R<Plan> {
        let qt = cx.check_type(Q, Types::Float)?;
        let kt = cx.dtype(K)?;
        if kt != qt {
            return Err(format!("K has element type {kt}, expected Q's {qt}"));
        }
        let vt = cx.check_type(V, Types::Float)?;
        let (qs, ks, vs) = (cx.shape(Q)?, cx.shape(K)?, cx.shape(V)?);
        let rank = qs.len();
        if rank != 3 && rank != 4 || ks.len() != rank || vs.len() != rank {
            return Err(format!(
                "Q, K and V must all be 3-D or all 4-D, got {qs:?}, {ks:?}, {vs:?}"
            ));
        }
        let batch = qs[0];
        if ks[0] != batch || vs[0] != batch {
            return Err(format!(
                "Q, K and V have batch sizes {}, {}, {}; expected equal",
                batch, ks[0], vs[0]
            ));
        }
        let (q_heads, kv_heads, q_len, kv_len, d, dk, dv);
        if rank == 3 {
            q_heads = heads(self.q_num_heads, "q_num_heads")?;
            kv_heads = heads(self.kv_num_heads, "kv_num_heads")?;
            (q_len, kv_len) = (qs[1], ks[1]);
            d = per_head(qs[2], q_heads, "Q")?;
            dk = per_head(ks[2], kv_heads, "K")?;
            dv = per_head(vs[2], kv_heads, "V")?;
        } else {
            if self.opset >= 25 && (self.q_num_heads.is_some() || self.kv_num_heads.is_some()) {
                return Err(
                    "q_num_heads and kv_num_heads must not be given with 4-D inputs".into(),
                );
            }
            (q_heads, kv_heads) = (qs[1], ks[1]);
            for (name, attr, have) in [
                ("q_num_heads", self.q_num_heads, q_heads),
                ("kv_num_heads", self.kv_num_heads, kv_heads),
            ] {
                if attr.is_some_and(|a| a != have as i64) {
                    return Err(format!(
                        "{name} is {attr:?} but the 4-D input has {have} heads"
                    ));
                }
            }
            if vs[1] != kv_heads {
                return Err(format!("V has {} heads, expected K's {kv_heads}", vs[1]));
            }
            (q_len, kv_len) = (qs[2], ks[2]);
            (d, dk, dv) = (qs[3], ks[3], vs[3]);
        }
        if dk != d {
            return Err(format!("K's head size {dk} differs from Q's {d}"));
        }
        let v_len = if rank == 3 { vs[1] } else { vs[2] };
        if v_len != kv_len {
            return Err(format!("V has {v_len} positions, expected K's {kv_len}"));
        }
        if kv_heads == 0 || q_heads % kv_heads != 0 {
            return Err(format!(
                "{q_heads} query heads are not a multiple of {kv_heads} key/value heads"
            ));
        }

        // The cache.
        let past = match (cx.opt(PAST_KEY), cx.opt(PAST_VALUE)) {
            (None, None) => 0,
            (Some(pk), Some(pv)) => {
                if pk.dtype != qt || pv.dtype != vt {
                    return Err(format!(
                        "past_key/past_value have element types {}/{}, expected {qt}/{vt}",
                        pk.dtype, pv.dtype
                    ));
                }
                let (pks, pvs) = (pk.shape(), pv.shape());
                if pks.len() != 4 || pks[0] != batch || pks[1] != kv_heads || pks[3] != d {
                    return Err(format!(
                        "past_key has shape {pks:?}, expected [{batch}, {kv_heads}, past, {d}]"
                    ));
                }
                if pvs != [batch, kv_heads, pks[2], dv] {
                    return Err(format!(
                        "past_value has shape {pvs:?}, expected [{batch}, {kv_heads}, {}, {dv}]",
                        pks[2]
                    ));
                }
                pks[2]
            }
            _ => return Err("past_key and past_value must be given together".into()),
        };
        let total = past + kv_len;

        let nonpad = match cx.opt(NONPAD) {
            None => false,
            Some(n) => {
                if n.dtype != DType::I64 || n.shape() != [batch] {
                    return Err(format!(
                        "nonpad_kv_seqlen is {} {:?}, expected int64 [{batch}]",
                        n.dtype,
                        n.shape()
                    ));
                }
                if cx.opt(PAST_KEY).is_some() {
                    return Err(
                        "nonpad_kv_seqlen cannot be combined with past_key/past_value".into(),
                    );
                }
                true
            }
        };

        // The mask, broadcast right-aligned over (batch, q heads, q positions, keys).
        let (mask, mask_strides, mask_len) = match cx.opt(MASK) {
            None => (tp::AttentionMask::None, [0; 3], 0),
            Some(m) => {
                let ms = m.shape();
                if ms.is_empty() || ms.len() > 4 {
                    return Err(format!("attn_mask has rank {}, expected 1 to 4", ms.len()));
                }
                let mask_len = ms[ms.len() - 1];
                if mask_len > total {
                    return Err(format!(
                        "attn_mask's last dimension {mask_len} exceeds the {total} keys"
                    ));
                }
                let full = [batch, q_heads, q_len];
                let lead = &ms[..ms.len() - 1];
                let mut strides = [0; 3];
                let mut stride = mask_len;
                for (i, &dim) in lead.iter().enumerate().rev() {
                    let axis = 3 - lead.len() + i;
                    if dim != 1 && dim != full[axis] {
                        return Err(format!(
                            "attn_mask of shape {ms:?} does not broadcast to [{batch}, {q_heads}, {q_len}, {total}]"
                        ));
                    }
                    strides[axis] = if dim == 1 { 0 } else { stride };
                    stride *= dim;
                }
                let kind = if m.dtype == DType::Bool {
                    tp::AttentionMask::Bool
                } else {
                    tp::AttentionMask::Add
                };
                (kind, strides, mask_len)
            }
        };

        let qk_output = match self.qk_matmul_output_mode {
            _ if cx.n_outputs() < 4 => tp::QkOutput::None,
            0 | 1 => tp::QkOutput::Scores,
            2 => tp::QkOutput::WithBias,
            3 => tp::QkOutput::Softmax,
            m => {
                return Err(format!(
                    "qk_matmul_output_mode {m} is not one of 0, 1, 2, 3"
                ));
            }
        };
        let softmax = match self.softmax_precision {
            None => precision(qt),
            Some(code) => DType::from_onnx(code as i32).and_then(precision),
        }
        .ok_or_else(|| {
            format!(
                "softmax_precision {:?} is not a float type (float, double, float16, bfloat16)",
                self.softmax_precision
            )
        })?;
        let scale = match self.scale {
            Some(s) => s as f64,
            None => 1.0 / (d as f64).sqrt(),
        };

        let (q_strides, k_strides, v_strides, y_strides, y) = if rank == 3 {
            (
                [q_len * q_heads * d, d, q_heads * d],
                [kv_len * kv_heads * d, d, kv_heads * d],
                [kv_len * kv_heads * dv, dv, kv_heads * dv],
                [q_len * q_heads * dv, dv, q_heads * dv],
                vec![batch, q_len, q_heads * dv],
            )
        } else {
            (
                [q_heads * q_len * d, q_len * d, d],
                [kv_heads * kv_len * d, kv_len * d, d],
                [kv_heads * kv_len * dv, kv_len * dv, dv],
                [q_heads * q_len * dv, q_len * dv, dv],
                vec![batch, q_heads, q_len, dv],
            )
        };
        let p = tp::Attention {
            batch,
            q_heads,
            kv_heads,
            q_len,
            kv_len,
            past_len: past,
            head_size: d,
            v_head_size: dv,
            q_strides,
            k_strides,
            v_strides,
            y_strides,
            mask,
            mask_strides,
            mask_len,
            scale_sqrt: scale.sqrt(),
            softcap: self.softcap as f64,
            is_causal: self.is_causal,
            left_window: self.left_window,
            right_window: self.right_window,
            nonpad,
            softmax,
            qk_output,
            present: cx.n_outputs() > 1,
        };
        Ok(Plan {
            p,
            y,
            present_key: vec![batch, kv_heads, total, d],
            present_value: vec![batch, kv_heads, total, dv],
            qk: vec![batch, q_heads, q_len, total],
            q: qt,
            v: vt,
        })
    }
}

fn dummy(dtype: DType) -> Tensor {
    Tensor::new(vec![1], Data::zeros(dtype, 1))
}

impl Operator for Attention {
    fn name(&self) -> &'static str {
        "Attention"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let pl = self.plan(cx)?;
        let facts = [
            Fact::new(pl.q, pl.y),
            Fact::new(pl.q, pl.present_key),
            Fact::new(pl.v, pl.present_value),
            Fact::new(pl.q, pl.qk),
        ];
        if cx.n_outputs() > 4 {
            return Err(format!("{} outputs named, at most 4", cx.n_outputs()));
        }
        Ok(facts.into_iter().take(cx.n_outputs()).collect())
    }
    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let Some(_) = cx.constants() else {
            return Ok(None);
        };
        let pl = self.plan(cx)?;
        let p = pl.p;
        let (q, k) = (cx.constant(Q, "query")?, cx.constant(K, "key")?);
        // V and the value cache computed in Q's type, the mask as f64 (its kind is in
        // the parameters).
        let v = cx.constant(V, "value")?.cast(pl.q);
        let mask = cx
            .opt_constant(MASK)
            .map(|m| m.as_f64())
            .unwrap_or_default();
        let empty = Tensor::new(vec![0], Data::zeros(pl.q, 0));
        let pk = cx.opt_constant(PAST_KEY).unwrap_or(&empty);
        let pv = cx
            .opt_constant(PAST_VALUE)
            .map_or_else(|| empty.clone(), |t| t.cast(pl.q));
        let nonpad = cx
            .opt_constant(NONPAD)
            .map(|t| t.as_i64())
            .unwrap_or_default();
        let mut scratch = vec![0.0f64; p.scratch_len()];
        let (yn, kn, vn, qn) = (
            p.y_len(),
            p.present_len(p.head_size),
            p.present_len(p.v_head_size),
            p.qk_len(),
        );
        let results: [Data; 4] = dispatch_data!(&q.data, qv: T => {
            let get = |t: &Tensor| T::unwrap(&t.data).map(<[T]>::to_vec).unwrap_or_default();
            let (kv, vv, pkv, pvv) = (get(k), get(&v), get(pk), get(&pv));
            let (mut y, mut ok, mut ov, mut oq) =
                (vec![T::default(); yn], vec![T::default(); kn], vec![T::default(); vn], vec![T::default(); qn]);
            typed::attention::<T, T, f64>(
                &p, qv, &kv, &vv, &mask, &pkv, &pvv, &nonpad, &mut y, &mut ok, &mut ov, &mut oq,
                &mut scratch,
            );
            [T::wrap(y), T::wrap(ok), T::wrap(ov), T::wrap(oq)]
        });
        let mut tensors = Vec::new();
        for (j, (data, fact)) in results.into_iter().zip(outs).enumerate() {
            let t = Tensor::new(fact.shape.clone(), data);
            tensors.push(if j == 2 { t.cast(pl.v) } else { t });
        }
        Ok(Some(tensors))
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let pl = self.plan(&infer)?;
        let mut p = pl.p;
        let named = |j: usize| {
            cx.node
                .outputs
                .get(j)
                .is_some_and(|&v| !cx.graph().value(v).name.contains(":unused"))
        };
        p.present = named(1) || named(2);
        if !named(3) {
            p.qk_output = tp::QkOutput::None;
        }
        let mask_type = cx.opt(MASK).map_or(pl.q, |m| m.dtype);
        let mut inputs = Vec::new();
        let types = [pl.q, pl.q, pl.v, mask_type, pl.q, pl.v, DType::I64];
        for (i, &t) in types.iter().enumerate() {
            inputs.push(if cx.opt(i).is_some() {
                cx.operand(i)?
            } else {
                let name = format!("{}:absent{i}", cx.node.name);
                cx.weight(&name, &dummy(t))
            });
        }
        let size = |on: bool, n: usize| if on { n } else { 1 };
        let outs = [
            (0, pl.q, p.y_len()),
            (1, pl.q, size(p.present, p.present_len(p.head_size))),
            (2, pl.v, size(p.present, p.present_len(p.v_head_size))),
            (3, pl.q, size(p.qk_output != tp::QkOutput::None, p.qk_len())),
            // The kernel's f64 scratch: an extra output no node output names.
            (usize::MAX, DType::F64, p.scratch_len()),
        ];
        let call =
            TypedCall::new("attention", vec![pl.q, pl.v, mask_type], &p).inputs(types.to_vec());
        cx.typed_multi(call, inputs, &outs)
    }
    impl_as_any!();
}

fn parse(cx: &super::ParseCx) -> R<super::Op> {
    let a = &cx.attrs;
    Ok(Arc::new(Attention {
        opset: cx.opset,
        scale: a.float("scale")?,
        is_causal: a.flag("is_causal")?,
        q_num_heads: a.int("q_num_heads")?,
        kv_num_heads: a.int("kv_num_heads")?,
        softcap: a.float_or("softcap", 0.0)?,
        qk_matmul_output_mode: a.int_or("qk_matmul_output_mode", 0)?,
        softmax_precision: a.int("softmax_precision")?,
        left_window: check_window(a.int_or("left_window_size", -1)?, "left_window_size")?,
        right_window: check_window(a.int_or("right_window_size", -1)?, "right_window_size")?,
    }))
}

fn check_window(w: i64, name: &str) -> R<i64> {
    if w < -1 {
        Err(format!("{name} is {w}, expected -1 or a non-negative size"))
    } else {
        Ok(w)
    }
}

pub const OPS: &[OpDef] = &[OpDef {
    name: "Attention",
    since: 23,
    types: Types::Float,
    cuda: false,
    parse,
}];
