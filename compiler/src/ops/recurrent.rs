//! Recurrent layers: LSTM, GRU and RNN on the typed kernels
//! (`kiln_runtime::typed::recurrent`). `sequence_lens` must be absent or a constant
//! whose every entry is the full sequence length; the kernels' scratch (states, and an
//! LSTM's input products) is planned as the step's scratch.

use std::sync::Arc;

use kiln_runtime::typed::{self, params as tp};
use tp::{RnnActivation as Act, RnnDirection};

use super::{Fact, FixedFact, InferCx, LowerCx, OpDef, Operator, ParseCx, R, Types};
use crate::dim::{Dim, fmt_dims};
use crate::impl_as_any;
use crate::lower::{Operand, TypedCall};
use crate::tensor::{DType, Data, Scalar, Tensor};

/// Which of the three operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    Lstm,
    Gru,
    Rnn,
}

impl Cell {
    fn name(self) -> &'static str {
        match self {
            Cell::Lstm => "LSTM",
            Cell::Gru => "GRU",
            Cell::Rnn => "RNN",
        }
    }

    /// Gates per hidden unit (rows of `W` per direction, in units of `hidden`).
    fn gates(self) -> usize {
        match self {
            Cell::Lstm => 4,
            Cell::Gru => 3,
            Cell::Rnn => 1,
        }
    }

    /// Activations per direction and their defaults.
    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Rnn => &["Tanh"],
        }
    }

    /// Outputs: `Y`, `Y_h` (and `Y_c` for LSTM).
    fn outputs(self) -> usize {
        if self == Cell::Lstm { 3 } else { 2 }
    }
}

/// One recurrent node with its attributes resolved.
#[derive(Debug, Clone)]
pub struct Recurrent {
    pub cell: Cell,
    pub hidden_size: Option<usize>,
    pub direction: RnnDirection,
    pub layout: u8,
    /// Per direction, forward first (`dirs × per-direction count`).
    pub activations: Vec<Act>,
    pub clip: Option<f32>,
    pub input_forget: bool,
    pub linear_before_reset: bool,
}

/// The dimensions of one node, symbolic where its inputs' are.
#[derive(Debug, Clone, PartialEq)]
struct SymDims {
    seq: Dim,
    batch: Dim,
    input: Dim,
    hidden: Dim,
    dirs: usize,
}

/// The dimensions of one node, as the kernels take them.
#[derive(Debug, Clone, Copy)]
struct Dims {
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
}

/// Resolves `activations` / `activation_alpha` / `activation_beta`: alphas and betas
/// are consumed in order by the activations that take them, defaults otherwise
/// (those of the ONNX operators of the same name).
fn activations(cx: &ParseCx, cell: Cell, dirs: usize) -> R<Vec<Act>> {
    let names: Vec<String> = match cx.attrs.strings("activations")? {
        Some(v) => v,
        None => cell
            .default_activations()
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    let per = cell.default_activations().len();
    let names = if names.len() == per * dirs {
        names
    } else if names.len() == per {
        (0..dirs).flat_map(|_| names.iter().cloned()).collect()
    } else {
        return Err(format!(
            "attribute `activations` has {} entries, expected {} ({} per direction)",
            names.len(),
            per * dirs,
            per
        ));
    };
    let alphas = cx.attrs.floats("activation_alpha")?.unwrap_or_default();
    let betas = cx.attrs.floats("activation_beta")?.unwrap_or_default();
    let (mut ai, mut bi) = (0, 0);
    let mut alpha = |default: f32| {
        let v = alphas.get(ai).copied().unwrap_or(default);
        ai += 1;
        v
    };
    let mut beta = |default: f32| {
        let v = betas.get(bi).copied().unwrap_or(default);
        bi += 1;
        v
    };
    names
        .iter()
        .map(|n| {
            Ok(match n.to_ascii_lowercase().as_str() {
                "sigmoid" => Act::Sigmoid,
                "tanh" => Act::Tanh,
                "relu" => Act::Relu,
                "affine" => Act::Affine {
                    alpha: alpha(1.0),
                    beta: beta(0.0),
                },
                "leakyrelu" => Act::LeakyRelu { alpha: alpha(0.01) },
                "thresholdedrelu" => Act::ThresholdedRelu { alpha: alpha(1.0) },
                "scaledtanh" => Act::ScaledTanh {
                    alpha: alpha(1.0),
                    beta: beta(1.0),
                },
                "hardsigmoid" => Act::HardSigmoid {
                    alpha: alpha(0.2),
                    beta: beta(0.5),
                },
                "elu" => Act::Elu { alpha: alpha(1.0) },
                "softsign" => Act::Softsign,
                "softplus" => Act::Softplus,
                other => {
                    return Err(format!(
                        "unknown activation `{other}`, expected one of Sigmoid, Tanh, Relu, \
                         Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, \
                         Softsign, Softplus"
                    ));
                }
            })
        })
        .collect()
}

fn parse(cx: &ParseCx, cell: Cell) -> R<super::Op> {
    let direction = match cx.attrs.string("direction")?.as_deref() {
        None | Some("forward") => RnnDirection::Forward,
        Some("reverse") => RnnDirection::Reverse,
        Some("bidirectional") => RnnDirection::Bidirectional,
        Some(d) => {
            return Err(format!(
                "direction `{d}`, expected forward, reverse or bidirectional"
            ));
        }
    };
    let dirs = if direction == RnnDirection::Bidirectional {
        2
    } else {
        1
    };
    let layout = match cx.attrs.int_or("layout", 0)? {
        l @ (0 | 1) => l as u8,
        l => return Err(format!("layout {l}, expected 0 or 1")),
    };
    if cx.attrs.int("output_sequence")?.is_some_and(|v| v != 0) && cx.opset < 7 {
        return Err("attribute `output_sequence` (opset 1) is not supported".into());
    }
    let clip = cx.attrs.float("clip")?;
    if clip.is_some_and(|c| c.is_nan() || c < 0.0) {
        return Err(format!("clip {clip:?} must be non-negative"));
    }
    Ok(Arc::new(Recurrent {
        cell,
        hidden_size: match cx.attrs.int("hidden_size")? {
            None => None,
            Some(h) if h >= 1 => Some(h as usize),
            Some(h) => return Err(format!("hidden_size {h} must be positive")),
        },
        direction,
        layout,
        activations: activations(cx, cell, dirs)?,
        clip,
        input_forget: cx.attrs.flag("input_forget")?,
        linear_before_reset: cx.attrs.flag("linear_before_reset")?,
    }))
}

impl Recurrent {
    /// The node's dimensions over its inputs' dims, after checking every operand.
    fn sym_dims(&self, cx: &InferCx) -> R<SymDims> {
        let name = self.cell.name();
        let xs = cx.dims(0)?;
        let ws = cx.dims(1)?;
        let rs = cx.dims(2)?;
        if xs.len() != 3 || ws.len() != 3 || rs.len() != 3 {
            return Err(format!(
                "{name}: X {}, W {}, R {} must all have rank 3",
                fmt_dims(xs),
                fmt_dims(ws),
                fmt_dims(rs)
            ));
        }
        let (seq, batch) = if self.layout == 0 {
            (xs[0].clone(), xs[1].clone())
        } else {
            (xs[1].clone(), xs[0].clone())
        };
        let dirs = if self.direction == RnnDirection::Bidirectional {
            2
        } else {
            1
        };
        let g = self.cell.gates();
        let hidden = match self.hidden_size {
            Some(h) => Dim::from(h),
            None => rs[2].clone(),
        };
        let input = xs[2].clone();
        let d = Dim::from(dirs);
        let want_w = vec![d.clone(), hidden.clone() * g, input.clone()];
        let want_r = vec![d.clone(), hidden.clone() * g, hidden.clone()];
        if ws != want_w.as_slice() || rs != want_r.as_slice() {
            return Err(format!(
                "{name}: W {} and R {}, expected {} and {}",
                fmt_dims(ws),
                fmt_dims(rs),
                fmt_dims(&want_w),
                fmt_dims(&want_r)
            ));
        }
        let state = if self.layout == 0 {
            [d.clone(), batch.clone(), hidden.clone()]
        } else {
            [batch.clone(), d.clone(), hidden.clone()]
        };
        let check = |i: usize, what: &str, want: &[Dim]| -> R<()> {
            match cx.opt(i) {
                Some(v) if v.dims() != want => Err(format!(
                    "{name}: {what} has shape {}, expected {}",
                    fmt_dims(v.dims()),
                    fmt_dims(want)
                )),
                _ => Ok(()),
            }
        };
        check(3, "B", &[d.clone(), hidden.clone() * (2 * g)])?;
        check(5, "initial_h", &state)?;
        if self.cell == Cell::Lstm {
            check(6, "initial_c", &state)?;
            check(7, "P", &[d, hidden.clone() * 3])?;
        }
        // sequence_lens: absent, or constant and full. Comparing its values with the
        // sequence length and batch needs both known.
        if cx.opt(4).is_some() {
            let lens = cx.constant(4, "sequence lengths")?.as_i64();
            let (Some(seq_n), Some(batch_n)) = (seq.known(), batch.to_usize()) else {
                return Err(format!(
                    "{name}: sequence_lens is given, so the sequence length ({seq}) and batch \
                     ({batch}) must be known at compile time (only full lengths are supported)"
                ));
            };
            if lens.len() != batch_n || lens.iter().any(|&l| l != seq_n) {
                return Err(format!(
                    "{name}: sequence_lens {lens:?}: only full lengths ({seq} for each of the \
                     {batch} batch entries) are supported"
                ));
            }
        }
        Ok(SymDims {
            seq,
            batch,
            input,
            hidden,
            dirs,
        })
    }

    /// The kernels' dimensions (every input's shape is fixed where they are used).
    fn dims(&self, cx: &InferCx) -> R<Dims> {
        let s = self.sym_dims(cx)?;
        let known = |d: &Dim, what: &str| {
            d.to_usize()
                .ok_or_else(|| format!("{}: the {what} {d} must be known", self.cell.name()))
        };
        Ok(Dims {
            seq: known(&s.seq, "sequence length")?,
            batch: known(&s.batch, "batch")?,
            input: known(&s.input, "input size")?,
            hidden: known(&s.hidden, "hidden size")?,
            dirs: s.dirs,
        })
    }

    /// The dims of `Y` and of `Y_h` / `Y_c`.
    fn shapes(&self, d: &SymDims) -> (Vec<Dim>, Vec<Dim>) {
        let dirs = Dim::from(d.dirs);
        let (seq, batch, hidden) = (d.seq.clone(), d.batch.clone(), d.hidden.clone());
        if self.layout == 0 {
            (
                vec![seq, dirs.clone(), batch.clone(), hidden.clone()],
                vec![dirs, batch, hidden],
            )
        } else {
            (
                vec![batch.clone(), seq, dirs.clone(), hidden.clone()],
                vec![batch, dirs, hidden],
            )
        }
    }

    fn clip(&self) -> (bool, f32) {
        (self.clip.is_some(), self.clip.unwrap_or(0.0))
    }

    fn lstm(&self, d: &Dims) -> tp::Lstm {
        let (has_clip, clip) = self.clip();
        let mut a = [Act::Sigmoid, Act::Tanh, Act::Tanh].repeat(2);
        a[..self.activations.len()].copy_from_slice(&self.activations);
        tp::Lstm {
            seq_len: d.seq,
            batch: d.batch,
            input_size: d.input,
            hidden: d.hidden,
            direction: self.direction,
            layout: self.layout,
            activations: [a[0], a[1], a[2], a[3], a[4], a[5]],
            has_clip,
            clip,
            input_forget: self.input_forget,
        }
    }

    fn gru(&self, d: &Dims) -> tp::Gru {
        let (has_clip, clip) = self.clip();
        let mut a = [Act::Sigmoid, Act::Tanh].repeat(2);
        a[..self.activations.len()].copy_from_slice(&self.activations);
        tp::Gru {
            seq_len: d.seq,
            batch: d.batch,
            input_size: d.input,
            hidden: d.hidden,
            direction: self.direction,
            layout: self.layout,
            activations: [a[0], a[1], a[2], a[3]],
            has_clip,
            clip,
            linear_before_reset: self.linear_before_reset,
        }
    }

    fn rnn(&self, d: &Dims) -> tp::Rnn {
        let (has_clip, clip) = self.clip();
        let mut a = [Act::Tanh; 2];
        a[..self.activations.len()].copy_from_slice(&self.activations);
        tp::Rnn {
            seq_len: d.seq,
            batch: d.batch,
            input_size: d.input,
            hidden: d.hidden,
            direction: self.direction,
            layout: self.layout,
            activations: a,
            has_clip,
            clip,
        }
    }

    /// The call and its scratch length, in elements of the node's type.
    fn call(&self, d: &Dims, dtype: DType) -> (TypedCall, usize) {
        match self.cell {
            Cell::Lstm => {
                let p = self.lstm(d);
                (TypedCall::new("lstm", vec![dtype], &p), p.scratch_len())
            }
            Cell::Gru => {
                let p = self.gru(d);
                (TypedCall::new("gru", vec![dtype], &p), p.scratch_len())
            }
            Cell::Rnn => {
                let p = self.rnn(d);
                (TypedCall::new("rnn", vec![dtype], &p), p.scratch_len())
            }
        }
    }

    /// The kernel's operands in order: X, W, R, B, initial_h (, initial_c, P).
    fn operand_indices(&self) -> &'static [usize] {
        match self.cell {
            Cell::Lstm => &[0, 1, 2, 3, 5, 6, 7],
            _ => &[0, 1, 2, 3, 5],
        }
    }
}

/// Runs the kernel at compile time on slices of `T`.
fn eval_typed<T: Scalar>(
    op: &Recurrent,
    d: &Dims,
    ins: &[&[T]],
    y: usize,
    s: usize,
) -> Vec<Vec<T>> {
    let mut outs = vec![
        vec![T::default(); y],
        vec![T::default(); s],
        vec![T::default(); s],
    ];
    let [oy, oh, oc] = &mut outs[..] else {
        unreachable!()
    };
    match op.cell {
        Cell::Lstm => {
            let p = op.lstm(d);
            let mut scratch = vec![T::default(); p.scratch_len()];
            typed::lstm(
                &p,
                ins[0],
                ins[1],
                ins[2],
                ins[3],
                ins[4],
                ins[5],
                ins[6],
                oy,
                oh,
                oc,
                &mut scratch,
            );
        }
        Cell::Gru => {
            let p = op.gru(d);
            let mut scratch = vec![T::default(); p.scratch_len()];
            typed::gru(
                &p,
                ins[0],
                ins[1],
                ins[2],
                ins[3],
                ins[4],
                oy,
                oh,
                &mut scratch,
            );
        }
        Cell::Rnn => {
            let p = op.rnn(d);
            let mut scratch = vec![T::default(); p.scratch_len()];
            typed::rnn(
                &p,
                ins[0],
                ins[1],
                ins[2],
                ins[3],
                ins[4],
                oy,
                oh,
                &mut scratch,
            );
        }
    }
    outs
}

impl Operator for Recurrent {
    fn name(&self) -> &'static str {
        self.cell.name()
    }

    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        let dt = cx.check_type(0, Types::Float)?;
        for i in [1, 2, 3, 5, 6, 7] {
            if let Some(v) = cx.opt(i)
                && v.dtype != dt
                && (i < 6 || self.cell == Cell::Lstm)
            {
                return Err(format!(
                    "{}: input {i} has element type {}, expected {dt} like X",
                    self.cell.name(),
                    v.dtype
                ));
            }
        }
        let d = self.sym_dims(cx)?;
        let (y, h) = self.shapes(&d);
        let mut facts = vec![Fact::new(dt, y), Fact::new(dt, h.clone())];
        if self.cell == Cell::Lstm {
            facts.push(Fact::new(dt, h));
        }
        Ok(facts)
    }

    fn eval(&self, cx: &InferCx, outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        let d = self.dims(cx)?;
        let dt = outs[0].dtype;
        let empty = Tensor::new(vec![0], Data::zeros(dt, 0));
        let ins: Vec<&Tensor> = self
            .operand_indices()
            .iter()
            .map(|&i| cx.opt_constant(i).unwrap_or(&empty))
            .collect();
        let ylen: usize = outs[0].shape.iter().product();
        let slen: usize = outs[1].shape.iter().product();
        let data: Vec<Data> = crate::dispatch_dtype!(dt, T => {
            let slices: Vec<&[T]> = ins
                .iter()
                .map(|t| T::unwrap(&t.data).ok_or_else(|| "constant of the wrong element type".to_string()))
                .collect::<R<_>>()?;
            eval_typed::<T>(self, &d, &slices, ylen, slen)
                .into_iter()
                .map(T::wrap)
                .collect()
        });
        Ok(Some(
            data.into_iter()
                .zip(outs)
                .map(|(data, f)| Tensor::new(f.shape.clone(), data))
                .collect(),
        ))
    }

    fn lower(&self, cx: &mut LowerCx) -> R<()> {
        let infer = cx.infer_cx();
        let d = self.dims(&infer)?;
        let dt = cx.dtype(0)?;
        let (call, scratch) = self.call(&d, dt);
        let mut inputs: Vec<Operand> = Vec::new();
        for &i in self.operand_indices() {
            inputs.push(if cx.opt(i).is_some() {
                cx.operand(i)?
            } else {
                let name = format!("{}:absent{i}", cx.node.name);
                cx.weight(&name, &Tensor::new(vec![0], Data::zeros(dt, 0)))
            });
        }
        let ylen = d.seq * d.dirs * d.batch * d.hidden;
        let slen = d.dirs * d.batch * d.hidden;
        let mut outs = vec![(0, dt, ylen), (1, dt, slen)];
        if self.cell == Cell::Lstm {
            outs.push((2, dt, slen));
        }
        debug_assert_eq!(outs.len(), self.cell.outputs());
        // The states (and an LSTM's input products, whose need is capped: a build
        // over ranges lends the largest).
        cx.typed_with_scratch(call, inputs, &outs, (dt, scratch))
    }

    impl_as_any!();
}

pub const OPS: &[OpDef] = &[
    OpDef {
        name: "LSTM",
        since: 7,
        types: Types::Float,
        cuda: false,
        parse: |cx| parse(cx, Cell::Lstm),
    },
    OpDef {
        name: "GRU",
        since: 7,
        types: Types::Float,
        cuda: false,
        parse: |cx| parse(cx, Cell::Gru),
    },
    OpDef {
        name: "RNN",
        since: 7,
        types: Types::Float,
        cuda: false,
        parse: |cx| parse(cx, Cell::Rnn),
    },
];

#[cfg(test)]
mod dims_tests {
    use super::*;
    use crate::ops::index::dims_tests::{In, dims, err, f32s, infer, int_const, shapes};

    fn op(cell: Cell, direction: RnnDirection, layout: u8) -> Recurrent {
        Recurrent {
            cell,
            hidden_size: None,
            direction,
            layout,
            activations: cell
                .default_activations()
                .iter()
                .map(|_| Act::Tanh)
                .collect(),
            clip: None,
            input_forget: false,
            linear_before_reset: false,
        }
    }

    #[test]
    fn sequence_and_batch_stay_symbolic() {
        // LSTM, forward, hidden 5 (from R), input 3.
        let ins = vec![f32s("T,N,3"), f32s("1,20,3"), f32s("1,20,5"), f32s("1,40")];
        let facts = infer(op(Cell::Lstm, RnnDirection::Forward, 0), ins, 3).unwrap();
        assert_eq!(
            shapes(&facts),
            vec![dims("T,1,N,5"), dims("1,N,5"), dims("1,N,5")]
        );
        // GRU, bidirectional, batch first.
        let ins = vec![
            f32s("N,T,4"),
            f32s("2,6,4"),
            f32s("2,6,2"),
            In::Absent,
            In::Absent,
            f32s("N,2,2"),
        ];
        let facts = infer(op(Cell::Gru, RnnDirection::Bidirectional, 1), ins, 2).unwrap();
        assert_eq!(shapes(&facts), vec![dims("N,T,2,2"), dims("N,2,2")]);
    }

    #[test]
    fn operand_shapes_are_checked_over_dims() {
        let rnn = || op(Cell::Rnn, RnnDirection::Forward, 0);
        let ins = vec![
            f32s("T,N,3"),
            f32s("1,4,3"),
            f32s("1,4,4"),
            In::Absent,
            In::Absent,
            f32s("1,M,4"),
        ];
        let e = err(infer(rnn(), ins, 2));
        assert!(
            e.contains("initial_h has shape [1, M, 4], expected [1, N, 4]"),
            "{e}"
        );
        let ins = vec![f32s("T,N,I"), f32s("1,4,3"), f32s("1,4,4")];
        let e = err(infer(rnn(), ins, 2));
        assert!(e.contains("expected [1, 4, I] and [1, 4, 4]"), "{e}");
        // Full sequence lengths can only be checked against known dims.
        let lens = || int_const(vec![2], vec![7, 7]);
        let ins = vec![
            f32s("T,2,3"),
            f32s("1,4,3"),
            f32s("1,4,4"),
            In::Absent,
            lens(),
        ];
        assert!(err(infer(rnn(), ins, 2)).contains("must be known at compile time"));
        let ins = vec![
            f32s("7,2,3"),
            f32s("1,4,3"),
            f32s("1,4,4"),
            In::Absent,
            lens(),
        ];
        assert_eq!(shapes(&infer(rnn(), ins, 2).unwrap())[0], dims("7,1,2,4"));
    }
}
