//! Attention (opsets 23–25): scaled dot-product attention with 3-D or 4-D inputs,
//! grouped-query heads, a bool or additive mask, causal and sliding-window masking,
//! a key/value cache, `nonpad_kv_seqlen`, softcap and the optional `qk_matmul_output`,
//! on one typed kernel (`kiln_runtime::typed::attention`).

use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::{Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, R, Types};
use crate::dim::{Dim, fmt_dims};
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

/// The kernel parameters and the element types of Q and V.
struct Plan {
    p: tp::Attention,
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

/// The geometry of one node over its inputs' dims (symbolic where they are).
#[derive(Debug, Clone)]
struct Geometry {
    batch: Dim,
    q_heads: Dim,
    kv_heads: Dim,
    q_len: Dim,
    kv_len: Dim,
    past: Dim,
    /// Head sizes of Q/K and of V.
    d: Dim,
    dv: Dim,
    rank: usize,
}

impl Geometry {
    fn total(&self) -> Dim {
        self.past.clone() + self.kv_len.clone()
    }

    /// The dims of `Y`, `present_key`, `present_value` and `qk_matmul_output`.
    fn out_dims(&self) -> [Vec<Dim>; 4] {
        let g = self.clone();
        let total = self.total();
        let y = if self.rank == 3 {
            vec![
                g.batch.clone(),
                g.q_len.clone(),
                g.q_heads.clone() * g.dv.clone(),
            ]
        } else {
            vec![
                g.batch.clone(),
                g.q_heads.clone(),
                g.q_len.clone(),
                g.dv.clone(),
            ]
        };
        [
            y,
            vec![g.batch.clone(), g.kv_heads.clone(), total.clone(), g.d],
            vec![g.batch.clone(), g.kv_heads, total.clone(), g.dv],
            vec![g.batch, g.q_heads, g.q_len, total],
        ]
    }
}

/// `hidden / heads`, which must divide (a symbolic hidden size must be a known multiple
/// term by term, `3*E / 3 = E`).
fn per_head_dims(hidden: &Dim, heads: usize, what: &str) -> R<Dim> {
    hidden.div_exact(&Dim::from(heads)).ok_or_else(|| {
        format!("{what} hidden size {hidden} is not a multiple of its {heads} heads")
    })
}

impl Attention {
    /// Element types of Q and V, and the geometry, after checking every operand's type
    /// and dims (equal dims compared as expressions; sizes that must divide or bound
    /// each other checked where known).
    fn geometry(&self, cx: &InferCx) -> R<(DType, DType, Geometry)> {
        let qt = cx.check_type(Q, Types::Float)?;
        let kt = cx.dtype(K)?;
        if kt != qt {
            return Err(format!("K has element type {kt}, expected Q's {qt}"));
        }
        let vt = cx.check_type(V, Types::Float)?;
        let (qs, ks, vs) = (cx.dims(Q)?, cx.dims(K)?, cx.dims(V)?);
        let rank = qs.len();
        if rank != 3 && rank != 4 || ks.len() != rank || vs.len() != rank {
            return Err(format!(
                "Q, K and V must all be 3-D or all 4-D, got {}, {}, {}",
                fmt_dims(qs),
                fmt_dims(ks),
                fmt_dims(vs)
            ));
        }
        let batch = qs[0].clone();
        if ks[0] != batch || vs[0] != batch {
            return Err(format!(
                "Q, K and V have batch sizes {}, {}, {}; expected equal",
                batch, ks[0], vs[0]
            ));
        }
        let (q_heads, kv_heads, q_len, kv_len, d, dk, dv);
        if rank == 3 {
            let (qh, kvh) = (
                heads(self.q_num_heads, "q_num_heads")?,
                heads(self.kv_num_heads, "kv_num_heads")?,
            );
            (q_heads, kv_heads) = (Dim::from(qh), Dim::from(kvh));
            (q_len, kv_len) = (qs[1].clone(), ks[1].clone());
            d = per_head_dims(&qs[2], qh, "Q")?;
            dk = per_head_dims(&ks[2], kvh, "K")?;
            dv = per_head_dims(&vs[2], kvh, "V")?;
        } else {
            if self.opset >= 25 && (self.q_num_heads.is_some() || self.kv_num_heads.is_some()) {
                return Err(
                    "q_num_heads and kv_num_heads must not be given with 4-D inputs".into(),
                );
            }
            (q_heads, kv_heads) = (qs[1].clone(), ks[1].clone());
            for (name, attr, have) in [
                ("q_num_heads", self.q_num_heads, &q_heads),
                ("kv_num_heads", self.kv_num_heads, &kv_heads),
            ] {
                if let Some(a) = attr
                    && !have.is(a)
                {
                    return Err(format!("{name} is {a} but the 4-D input has {have} heads"));
                }
            }
            if vs[1] != kv_heads {
                return Err(format!("V has {} heads, expected K's {kv_heads}", vs[1]));
            }
            (q_len, kv_len) = (qs[2].clone(), ks[2].clone());
            (d, dk, dv) = (qs[3].clone(), ks[3].clone(), vs[3].clone());
        }
        if dk != d {
            return Err(format!("K's head size {dk} differs from Q's {d}"));
        }
        let v_len = if rank == 3 { &vs[1] } else { &vs[2] };
        if *v_len != kv_len {
            return Err(format!("V has {v_len} positions, expected K's {kv_len}"));
        }
        if kv_heads.is(0)
            || matches!((q_heads.known(), kv_heads.known()), (Some(q), Some(k)) if q % k != 0)
        {
            return Err(format!(
                "{q_heads} query heads are not a multiple of {kv_heads} key/value heads"
            ));
        }

        // The cache.
        let past = match (cx.opt(PAST_KEY), cx.opt(PAST_VALUE)) {
            (None, None) => Dim::from(0usize),
            (Some(pk), Some(pv)) => {
                if pk.dtype != qt || pv.dtype != vt {
                    return Err(format!(
                        "past_key/past_value have element types {}/{}, expected {qt}/{vt}",
                        pk.dtype, pv.dtype
                    ));
                }
                let (pks, pvs) = (pk.dims(), pv.dims());
                if pks.len() != 4 || pks[0] != batch || pks[1] != kv_heads || pks[3] != d {
                    return Err(format!(
                        "past_key has shape {}, expected [{batch}, {kv_heads}, past, {d}]",
                        fmt_dims(pks)
                    ));
                }
                let want = [batch.clone(), kv_heads.clone(), pks[2].clone(), dv.clone()];
                if pvs != want {
                    return Err(format!(
                        "past_value has shape {}, expected {}",
                        fmt_dims(pvs),
                        fmt_dims(&want)
                    ));
                }
                pks[2].clone()
            }
            _ => return Err("past_key and past_value must be given together".into()),
        };
        let total = past.clone() + kv_len.clone();

        if let Some(n) = cx.opt(NONPAD) {
            if n.dtype != DType::I64 || n.dims() != std::slice::from_ref(&batch) {
                return Err(format!(
                    "nonpad_kv_seqlen is {} {}, expected int64 [{batch}]",
                    n.dtype,
                    fmt_dims(n.dims())
                ));
            }
            if cx.opt(PAST_KEY).is_some() {
                return Err("nonpad_kv_seqlen cannot be combined with past_key/past_value".into());
            }
        }

        // The mask, broadcast right-aligned over (batch, q heads, q positions, keys).
        if let Some(m) = cx.opt(MASK) {
            let ms = m.dims();
            if ms.is_empty() || ms.len() > 4 {
                return Err(format!("attn_mask has rank {}, expected 1 to 4", ms.len()));
            }
            let mask_len = &ms[ms.len() - 1];
            if matches!((mask_len.known(), total.known()), (Some(m), Some(t)) if m > t) {
                return Err(format!(
                    "attn_mask's last dimension {mask_len} exceeds the {total} keys"
                ));
            }
            let full = [&batch, &q_heads, &q_len];
            let lead = &ms[..ms.len() - 1];
            for (i, dim) in lead.iter().enumerate() {
                let axis = 3 - lead.len() + i;
                if !dim.is(1) && dim != full[axis] {
                    return Err(format!(
                        "attn_mask of shape {} does not broadcast to [{batch}, {q_heads}, {q_len}, {total}]",
                        fmt_dims(ms)
                    ));
                }
            }
        }
        let g = Geometry {
            batch,
            q_heads,
            kv_heads,
            q_len,
            kv_len,
            past,
            d,
            dv,
            rank,
        };
        Ok((qt, vt, g))
    }

    fn qk_output(&self, n_outputs: usize) -> R<tp::QkOutput> {
        Ok(match self.qk_matmul_output_mode {
            _ if n_outputs < 4 => tp::QkOutput::None,
            0 | 1 => tp::QkOutput::Scores,
            2 => tp::QkOutput::WithBias,
            3 => tp::QkOutput::Softmax,
            m => {
                return Err(format!(
                    "qk_matmul_output_mode {m} is not one of 0, 1, 2, 3"
                ));
            }
        })
    }

    fn softmax(&self, qt: DType) -> R<tp::SoftmaxPrecision> {
        match self.softmax_precision {
            None => precision(qt),
            Some(code) => DType::from_onnx(code as i32).and_then(precision),
        }
        .ok_or_else(|| {
            format!(
                "softmax_precision {:?} is not a float type (float, double, float16, bfloat16)",
                self.softmax_precision
            )
        })
    }

    /// The kernel's parameters (every input's shape is fixed where they are used).
    fn plan(&self, cx: &InferCx) -> R<Plan> {
        let (qt, vt, g) = self.geometry(cx)?;
        let known = |d: &Dim| {
            d.to_usize()
                .ok_or_else(|| format!("Attention: the size {d} must be known"))
        };
        let (batch, q_heads, kv_heads) =
            (known(&g.batch)?, known(&g.q_heads)?, known(&g.kv_heads)?);
        let (q_len, kv_len, past) = (known(&g.q_len)?, known(&g.kv_len)?, known(&g.past)?);
        let (d, dv, rank) = (known(&g.d)?, known(&g.dv)?, g.rank);
        let nonpad = cx.opt(NONPAD).is_some();

        // The mask's strides over (batch, q heads, q positions); its shape was checked.
        let (mask, mask_strides, mask_len) = match cx.opt(MASK) {
            None => (tp::AttentionMask::None, [0; 3], 0),
            Some(m) => {
                let ms = cx.shape(MASK)?;
                let mask_len = ms[ms.len() - 1];
                let lead = &ms[..ms.len() - 1];
                let mut strides = [0; 3];
                let mut stride = mask_len;
                for (i, &dim) in lead.iter().enumerate().rev() {
                    let axis = 3 - lead.len() + i;
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

        let qk_output = self.qk_output(cx.n_outputs())?;
        let softmax = self.softmax(qt)?;
        let scale = match self.scale {
            Some(s) => s as f64,
            None => 1.0 / (d as f64).sqrt(),
        };

        let (q_strides, k_strides, v_strides, y_strides) = if rank == 3 {
            (
                [q_len * q_heads * d, d, q_heads * d],
                [kv_len * kv_heads * d, d, kv_heads * d],
                [kv_len * kv_heads * dv, dv, kv_heads * dv],
                [q_len * q_heads * dv, dv, q_heads * dv],
            )
        } else {
            (
                [q_heads * q_len * d, q_len * d, d],
                [kv_heads * kv_len * d, kv_len * d, d],
                [kv_heads * kv_len * dv, kv_len * dv, dv],
                [q_heads * q_len * dv, q_len * dv, dv],
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
        Ok(Plan { p, q: qt, v: vt })
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
        let (qt, vt, g) = self.geometry(cx)?;
        self.qk_output(cx.n_outputs())?;
        self.softmax(qt)?;
        let [y, present_key, present_value, qk] = g.out_dims();
        let facts = [
            Fact::new(qt, y),
            Fact::new(qt, present_key),
            Fact::new(vt, present_value),
            Fact::new(qt, qk),
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

#[cfg(test)]
mod dims_tests {
    use super::*;
    use crate::ops::index::dims_tests::{In, dims, err, f32s, i64s, infer, x};

    fn attention(heads: Option<(i64, i64)>) -> Attention {
        Attention {
            opset: 23,
            scale: None,
            is_causal: false,
            q_num_heads: heads.map(|h| h.0),
            kv_num_heads: heads.map(|h| h.1),
            softcap: 0.0,
            qk_matmul_output_mode: 0,
            softmax_precision: None,
            left_window: -1,
            right_window: -1,
        }
    }

    #[test]
    fn four_d_with_a_cache_keeps_sequence_symbols() {
        let ins = vec![
            f32s("B,8,S,64"),
            f32s("B,2,S,64"),
            f32s("B,2,S,32"),
            x(DType::Bool, "S,L"),
            f32s("B,2,P,64"),
            f32s("B,2,P,32"),
        ];
        let facts = infer(attention(None), ins, 4).unwrap();
        assert_eq!(facts.len(), 4);
        // Keys seen: the cache's and the new ones.
        let total = Dim::sym("P") + Dim::sym("S");
        assert_eq!(facts[0].shape, dims("B,8,S,32"));
        assert_eq!(
            facts[1].shape,
            [dims("B,2"), vec![total.clone()], dims("64")].concat()
        );
        assert_eq!(
            facts[2].shape,
            [dims("B,2"), vec![total.clone()], dims("32")].concat()
        );
        assert_eq!(facts[3].shape, [dims("B,8,S"), vec![total]].concat());
    }

    #[test]
    fn three_d_splits_hidden_sizes_by_heads() {
        let ins = vec![f32s("N,S,512"), f32s("N,T,128"), f32s("N,T,256")];
        let facts = infer(attention(Some((8, 2))), ins, 1).unwrap();
        // Head sizes 64 (Q, K) and 128 (V): Y is [N, S, 8 heads × 128].
        assert_eq!(facts[0].shape, dims("N,S,1024"));
        let ins = vec![f32s("N,S,E"), f32s("N,T,128"), f32s("N,T,256")];
        let e = err(infer(attention(Some((8, 2))), ins, 1));
        assert!(
            e.contains("Q hidden size E is not a multiple of its 8 heads"),
            "{e}"
        );
    }

    #[test]
    fn mismatches_are_reported_over_dims() {
        let a = || attention(None);
        let e = err(infer(
            a(),
            vec![f32s("B,4,S,8"), f32s("C,4,T,8"), f32s("B,4,T,8")],
            1,
        ));
        assert!(e.contains("batch sizes B, C, B"), "{e}");
        let e = err(infer(
            a(),
            vec![f32s("B,4,S,8"), f32s("B,4,T,8"), f32s("B,4,U,8")],
            1,
        ));
        assert!(e.contains("V has U positions, expected K's T"), "{e}");
        let e = err(infer(
            a(),
            vec![f32s("B,6,S,8"), f32s("B,4,T,8"), f32s("B,4,T,8")],
            1,
        ));
        assert!(e.contains("not a multiple of 4"), "{e}");
        let mask = x(DType::Bool, "B,1,S,9");
        let ins = vec![f32s("B,4,S,8"), f32s("B,4,5,8"), f32s("B,4,5,8"), mask];
        assert!(err(infer(a(), ins, 1)).contains("exceeds the 5 keys"));
        let mask = x(DType::Bool, "2,S,T");
        let ins = vec![f32s("B,4,S,8"), f32s("B,4,T,8"), f32s("B,4,T,8"), mask];
        let e = err(infer(a(), ins, 1));
        assert!(e.contains("does not broadcast to [B, 4, S, T]"), "{e}");
        let ins = vec![
            f32s("B,4,S,8"),
            f32s("B,4,T,8"),
            f32s("B,4,T,8"),
            In::Absent,
            In::Absent,
            In::Absent,
            i64s("N"),
        ];
        assert!(err(infer(a(), ins, 1)).contains("expected int64 [B]"));
    }
}
