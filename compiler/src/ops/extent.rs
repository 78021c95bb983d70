//! Operators whose output extent only the data decides: NonZero, Compress, Unique and
//! NonMaxSuppression (TopK with a run-time `k` lives with TopK, in `index`).
//!
//! Inference gives the extent a symbol (`OUT[axis]`, [`InferCx::extent`]) with an upper
//! bound in the input dims. The kernel writes its outputs densely into buffers planned
//! for the bound and returns the extent, which the run binds for the steps after it
//! ([`crate::dynamic`]). With constant inputs the node folds like any other.

use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};

use super::{Fact, InferCx, LowerCx, OpDef, Operator, R, Types, fixed, normalize_axis};
use crate::dim::Dim;
use crate::lower::TypedCall;
use crate::tensor::{DType, Data, Scalar, Tensor};
use crate::{dispatch_data, impl_as_any};

/// The element type of input `i`, any type a kernel computes on.
fn data_type(cx: &InferCx, i: usize) -> R<DType> {
    cx.check_type(i, Types::Dense)
}

/// Every input constant and small enough to compute at compile time.
fn all_constant<'g>(cx: &InferCx<'g>) -> Option<Vec<&'g Tensor>> {
    let c = cx.constants()?;
    c.iter().all(|t| super::foldable(&t.shape)).then_some(c)
}

/// `(outer, len, inner)` around `axis` of `s`, or the whole tensor as one axis.
fn around(s: &[usize], axis: Option<usize>) -> (usize, usize, usize) {
    match axis {
        Some(a) => (s[..a].iter().product(), s[a], s[a + 1..].iter().product()),
        None => (1, s.iter().product(), 1),
    }
}

/// `NonZero(X)`: the `[rank, n]` indices of the elements that are not zero.
#[derive(Debug, Clone)]
pub struct NonZero;

impl NonZero {
    fn params(shape: &[usize]) -> R<tp::NonZero> {
        Ok(tp::NonZero {
            rank: shape.len(),
            shape: fixed(shape, 1)?,
        })
    }
}

impl Operator for NonZero {
    fn name(&self) -> &'static str {
        "NonZero"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        data_type(cx, 0)?;
        let xs = cx.dims(0)?;
        if let Some(c) = all_constant(cx) {
            let p = Self::params(&c[0].shape)?;
            let mut out = vec![0i64; c[0].len() * xs.len()];
            let n = dispatch_data!(&c[0].data, v: T => typed::non_zero::<T>(&p, v, &mut out))
                .map_err(|e| e.to_string())?;
            out.truncate(n * xs.len());
            return Ok(vec![Fact::constant(Tensor::i64(vec![xs.len(), n], out))]);
        }
        let n = cx.extent(1);
        let bound: Dim = xs.iter().product();
        Ok(vec![
            Fact::new(DType::I64, vec![Dim::from(xs.len()), n.clone()]).with_extent(n, bound),
        ])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let s = cx.shape(0)?;
        let p = Self::params(s)?;
        let d = cx.dtype(0)?;
        let out = cx.out(0)?.len();
        let x = cx.operand(0)?;
        let call = TypedCall::new("non_zero", vec![d], &p).binds(cx.infer_cx().extent(1));
        cx.typed_multi(call, vec![x], &[(0, DType::I64, out)])
    }
    impl_as_any!();
}

/// `Compress(input, condition)`: the slices along `axis` (or the elements of the
/// flattened input) whose condition is true.
#[derive(Debug, Clone)]
pub struct Compress {
    pub axis: Option<i64>,
}

impl Compress {
    fn axis(&self, rank: usize) -> R<Option<usize>> {
        self.axis.map(|a| normalize_axis(a, rank)).transpose()
    }
}

impl Operator for Compress {
    fn name(&self) -> &'static str {
        "Compress"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = data_type(cx, 0)?;
        if cx.dtype(1)? != DType::Bool {
            return Err(format!(
                "the condition has element type {}, expected bool",
                cx.dtype(1)?
            ));
        }
        if cx.dims(1)?.len() != 1 {
            return Err(format!(
                "the condition must have rank 1, got dims {}",
                crate::dim::fmt_dims(cx.dims(1)?)
            ));
        }
        let xs = cx.dims(0)?;
        let axis = self.axis(xs.len())?;
        if let Some(c) = all_constant(cx) {
            let (outer, len, inner) = around(&c[0].shape, axis);
            let p = tp::Compress { outer, len, inner };
            let Data::Bool(cond) = &c[1].data else {
                return Err("the condition is not bool".into());
            };
            let (data, n) = dispatch_data!(&c[0].data, v: T => {
                let mut out = vec![T::default(); v.len()];
                let n = typed::compress::<T>(&p, v, cond, &mut out).map_err(|e| e.to_string())?;
                out.truncate(outer * n * inner);
                (T::wrap(out), n)
            });
            let mut shape = c[0].shape.clone();
            match axis {
                Some(a) => shape[a] = n,
                None => shape = vec![n],
            }
            return Ok(vec![Fact::constant(Tensor::new(shape, data))]);
        }
        let (out, bound) = match axis {
            Some(a) => {
                let n = cx.extent(a);
                let mut out = xs.to_vec();
                out[a] = n;
                (out, xs[a].clone())
            }
            None => (vec![cx.extent(0)], xs.iter().product()),
        };
        let symbol = out[axis.unwrap_or(0)].clone();
        Ok(vec![Fact::new(d, out).with_extent(symbol, bound)])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let s = cx.shape(0)?;
        let axis = self.axis(s.len())?;
        let (outer, len, inner) = around(s, axis);
        let p = tp::Compress { outer, len, inner };
        let d = cx.dtype(0)?;
        let out = cx.out(0)?.len();
        let inputs = vec![cx.operand(0)?, cx.operand(1)?];
        let call = TypedCall::new("compress", vec![d], &p)
            .inputs(vec![d, DType::Bool])
            .binds(cx.infer_cx().extent(axis.unwrap_or(0)));
        cx.typed_multi(call, inputs, &[(0, d, out)])
    }
    impl_as_any!();
}

/// `Unique(X)`: the distinct elements (or slices along `axis`), with the index of each
/// one's first occurrence, each element's position among them, and their counts.
#[derive(Debug, Clone)]
pub struct Unique {
    pub axis: Option<i64>,
    pub sorted: bool,
}

impl Unique {
    fn params(&self, s: &[usize]) -> R<(tp::Unique, Option<usize>)> {
        let axis = self.axis.map(|a| normalize_axis(a, s.len())).transpose()?;
        let (outer, len, inner) = around(s, axis);
        Ok((
            tp::Unique {
                outer,
                len,
                inner,
                sorted: self.sorted,
            },
            axis,
        ))
    }
}

impl Operator for Unique {
    fn name(&self) -> &'static str {
        "Unique"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let d = data_type(cx, 0)?;
        let xs = cx.dims(0)?;
        let axis = self.axis.map(|a| normalize_axis(a, xs.len())).transpose()?;
        if let Some(c) = all_constant(cx) {
            let (p, _) = self.params(&c[0].shape)?;
            let len = p.len;
            let mut idx = vec![0i64; len];
            let mut inverse = vec![0i64; len];
            let mut counts = vec![0i64; len];
            let mut scratch = vec![0i64; typed::unique_scratch_len(len)];
            let (y, n) = dispatch_data!(&c[0].data, v: T => {
                let mut y = vec![T::default(); v.len()];
                let n = typed::unique::<T>(&p, v, &mut y, &mut idx, &mut inverse, &mut counts, &mut scratch)
                    .map_err(|e| e.to_string())?;
                y.truncate(p.outer * n * p.inner);
                (T::wrap(y), n)
            });
            let mut shape = c[0].shape.clone();
            match axis {
                Some(a) => shape[a] = n,
                None => shape = vec![n],
            }
            idx.truncate(n);
            counts.truncate(n);
            return Ok(vec![
                Fact::constant(Tensor::new(shape, y)),
                Fact::constant(Tensor::i64(vec![n], idx)),
                Fact::constant(Tensor::i64(vec![len], inverse)),
                Fact::constant(Tensor::i64(vec![n], counts)),
            ]);
        }
        let n = cx.extent(axis.unwrap_or(0));
        let (y, len) = match axis {
            Some(a) => {
                let mut y = xs.to_vec();
                y[a] = n.clone();
                (y, xs[a].clone())
            }
            None => (vec![n.clone()], xs.iter().product()),
        };
        Ok(vec![
            Fact::new(d, y).with_extent(n.clone(), len.clone()),
            Fact::new(DType::I64, vec![n.clone()]),
            Fact::new(DType::I64, vec![len]),
            Fact::new(DType::I64, vec![n]),
        ])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let s = cx.shape(0)?;
        let (p, axis) = self.params(s)?;
        let d = cx.dtype(0)?;
        let y = cx.out(0)?;
        let n = y.shape()[axis.unwrap_or(0)];
        let x = cx.operand(0)?;
        let call =
            TypedCall::new("unique", vec![d], &p).binds(cx.infer_cx().extent(axis.unwrap_or(0)));
        cx.typed_with_scratch(
            call,
            vec![x],
            &[
                (0, d, y.len()),
                (1, DType::I64, n),
                (2, DType::I64, p.len),
                (3, DType::I64, n),
            ],
            (DType::I64, typed::unique_scratch_len(p.len)),
        )
    }
    impl_as_any!();
}

/// `NonMaxSuppression(boxes, scores, max_output_boxes_per_class, iou_threshold,
/// score_threshold)`: the `[n, 3]` (batch, class, box) triples greedy suppression keeps.
#[derive(Debug, Clone)]
pub struct NonMaxSuppression {
    pub center_point_box: bool,
}

impl NonMaxSuppression {
    /// Batches, classes and boxes, after checking the inputs' types and dims.
    fn dims(cx: &InferCx) -> R<(Dim, Dim, Dim)> {
        for i in 0..2 {
            if cx.dtype(i)? != DType::F32 {
                return Err(format!(
                    "input {i} has element type {}, expected float32",
                    cx.dtype(i)?
                ));
            }
        }
        for (i, want) in [(2, DType::I64), (3, DType::F32), (4, DType::F32)] {
            if let Some(v) = cx.opt(i) {
                if v.dtype != want {
                    return Err(format!(
                        "input {i} has element type {}, expected {want}",
                        v.dtype
                    ));
                }
                if v.dims().iter().any(|d| !d.is(1)) {
                    return Err(format!(
                        "input {i} must hold one value, got dims {}",
                        crate::dim::fmt_dims(v.dims())
                    ));
                }
            }
        }
        let (b, s) = (cx.dims(0)?, cx.dims(1)?);
        if b.len() != 3 || s.len() != 3 || !b[2].is(4) {
            return Err(format!(
                "boxes must be [batches, boxes, 4] and scores [batches, classes, boxes], got {} and {}",
                crate::dim::fmt_dims(b),
                crate::dim::fmt_dims(s)
            ));
        }
        if b[0] != s[0] || b[1] != s[2] {
            return Err(format!(
                "boxes {} and scores {} disagree on batches or boxes",
                crate::dim::fmt_dims(b),
                crate::dim::fmt_dims(s)
            ));
        }
        Ok((b[0].clone(), s[1].clone(), b[1].clone()))
    }

    fn params(&self, cx: &InferCx) -> R<tp::NonMaxSuppression> {
        let (b, s) = (cx.shape(0)?, cx.shape(1)?);
        Ok(tp::NonMaxSuppression {
            batches: b[0],
            classes: s[1],
            boxes: b[1],
            center_point_box: self.center_point_box,
            has_score_threshold: cx.opt(4).is_some(),
        })
    }

    /// The optional scalar inputs, with the defaults for absent ones.
    fn scalars(cx: &InferCx) -> [Tensor; 3] {
        let get = |i: usize, default: Tensor| cx.opt_constant(i).cloned().unwrap_or(default);
        [
            get(2, Tensor::i64(vec![1], vec![0])),
            get(3, Tensor::f32(vec![1], vec![0.0])),
            get(4, Tensor::f32(vec![1], vec![0.0])),
        ]
    }
}

impl Operator for NonMaxSuppression {
    fn name(&self) -> &'static str {
        "NonMaxSuppression"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let (batches, classes, boxes) = Self::dims(cx)?;
        let all_const = (0..5).all(|i| cx.opt(i).is_none_or(|v| v.constant.is_some()));
        if all_const && let (Some(b), Some(s)) = (cx.opt_constant(0), cx.opt_constant(1)) {
            let p = self.params(cx)?;
            let [max, iou, score] = Self::scalars(cx);
            let mut out = vec![0i64; 3 * p.batches * p.classes * p.boxes];
            let mut scratch = vec![0i64; typed::nms_scratch_len(p.boxes)];
            let n = typed::non_max_suppression(
                &p,
                &b.as_f32(),
                &s.as_f32(),
                &max.as_i64(),
                &iou.as_f32(),
                &score.as_f32(),
                &mut out,
                &mut scratch,
            )
            .map_err(|e| e.to_string())?;
            out.truncate(3 * n);
            return Ok(vec![Fact::constant(Tensor::i64(vec![n, 3], out))]);
        }
        // At most every box of every class, or the constant limit per class.
        let per_class = match cx.opt_constant(2).and_then(|t| t.as_i64().first().copied()) {
            Some(m) if boxes.known().is_some_and(|s| m < s) => Dim::from(m.max(0)),
            _ => boxes,
        };
        let n = cx.extent(0);
        Ok(vec![
            Fact::new(DType::I64, vec![n.clone(), Dim::from(3usize)])
                .with_extent(n, batches * classes * per_class),
        ])
    }
    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let p = self.params(&cx.infer_cx())?;
        let out = cx.out(0)?.len();
        let [max, iou, score] = Self::scalars(&cx.infer_cx());
        let mut inputs = vec![cx.operand(0)?, cx.operand(1)?];
        let defaults = [
            ("max_output_boxes_per_class", max),
            ("iou_threshold", iou),
            ("score_threshold", score),
        ];
        for (k, (what, default)) in defaults.iter().enumerate() {
            inputs.push(match cx.opt(k + 2) {
                Some(_) => cx.operand(k + 2)?,
                None => cx.weight(&format!("{}:{what}", cx.node.name), default),
            });
        }
        let call = TypedCall::new("non_max_suppression", vec![], &p)
            .inputs(vec![
                DType::F32,
                DType::F32,
                DType::I64,
                DType::F32,
                DType::F32,
            ])
            .binds(cx.infer_cx().extent(0));
        cx.typed_with_scratch(
            call,
            inputs,
            &[(0, DType::I64, out)],
            (DType::I64, typed::nms_scratch_len(p.boxes)),
        )
    }
    impl_as_any!();
}

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "NonZero",
        since: 9,
        types: Types::Dense,
        cuda: false,
        parse: |_| Ok(Arc::new(NonZero)),
    },
    OpDef {
        name: "Compress",
        since: 9,
        types: Types::Dense,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Compress {
                axis: cx.attrs.int("axis")?,
            }))
        },
    },
    OpDef {
        name: "Unique",
        since: 11,
        types: Types::Dense,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(Unique {
                axis: cx.attrs.int("axis")?,
                sorted: cx.attrs.int_or("sorted", 1)? != 0,
            }))
        },
    },
    OpDef {
        name: "NonMaxSuppression",
        since: 10,
        types: Types::F32,
        cuda: false,
        parse: |cx| {
            Ok(Arc::new(NonMaxSuppression {
                center_point_box: cx.attrs.int_or("center_point_box", 0)? != 0,
            }))
        },
    },
];
