//! Shape inference with constant propagation, in one forward pass.
//!
//! Every value gets a static shape and element type. A node whose inputs are all
//! constant and whose operator is cheap to evaluate (shape arithmetic: `Shape`,
//! `Gather`, `Concat`, `Unsqueeze`, `ConstantOfShape`, ...) is evaluated here, so its
//! outputs become constants and later passes see fixed `Reshape` targets and weights.

use std::collections::HashMap;

use crate::error::Error;
use crate::ir::*;
use crate::window;

/// The most elements one tensor may have (64 GiB of float32). Larger shapes only come
/// from malformed models or `--input` typos, and would overflow size arithmetic later.
pub const MAX_ELEMENTS: usize = 1 << 34;

/// The most elements shape inference computes when folding a node to a constant (the
/// model zoo builds weights of up to 10^8 elements with `ConstantOfShape`).
const MAX_FOLDED_ELEMENTS: usize = 1 << 30;

/// The element count of `shape`, checked so that every product of its dims (zero dims
/// counted as one) is at most [`MAX_ELEMENTS`].
pub fn check_elements(shape: &[usize]) -> Result<usize, String> {
    let bound = shape.iter().try_fold(1usize, |a, &d| {
        a.checked_mul(d.max(1)).filter(|&n| n <= MAX_ELEMENTS)
    });
    match bound {
        Some(_) => Ok(shape.iter().product()),
        None => Err(format!(
            "shape {shape:?} is too large: Kiln supports at most {MAX_ELEMENTS} elements per tensor"
        )),
    }
}

/// Whether a constant of `shape` is small enough to compute at compile time.
fn foldable(shape: &[usize]) -> bool {
    check_elements(shape).is_ok_and(|n| n <= MAX_FOLDED_ELEMENTS)
}

/// Runs inference over the whole graph. `input_dims` gives full shapes for graph inputs
/// (required for every input with a symbolic dimension).
pub fn infer(graph: &mut Graph, input_dims: &HashMap<String, Vec<usize>>) -> Result<(), Error> {
    for name in input_dims.keys() {
        if !graph
            .inputs
            .iter()
            .any(|i| graph.value(i.value).name == *name)
        {
            let known: Vec<_> = graph
                .inputs
                .iter()
                .map(|i| graph.value(i.value).name.as_str())
                .collect();
            return Err(Error::Input {
                input: name.clone(),
                message: format!("the model has no such input (inputs: {})", known.join(", ")),
            });
        }
    }
    for input in graph.inputs.clone() {
        let name = graph.value(input.value).name.clone();
        let shape = resolve_input(&name, &input.dims, input_dims.get(&name))?;
        check_elements(&shape).map_err(|message| Error::Input {
            input: name.clone(),
            message,
        })?;
        graph.value_mut(input.value).shape = Some(shape);
    }
    for index in 0..graph.nodes.len() {
        infer_node(graph, index).map_err(|message| {
            let node = &graph.nodes[index];
            Error::Node {
                node: node.name.clone(),
                op: node.op.onnx_name().into(),
                opset: graph.opset,
                message,
            }
        })?;
    }
    Ok(())
}

fn resolve_input(
    name: &str,
    dims: &[Dim],
    given: Option<&Vec<usize>>,
) -> Result<Vec<usize>, Error> {
    let err = |message| Error::Input {
        input: name.to_owned(),
        message,
    };
    match given {
        Some(given) => {
            if given.len() != dims.len() && !dims.is_empty() {
                return Err(err(format!(
                    "the model declares rank {} ({}), --input gave rank {}",
                    dims.len(),
                    fmt_dims(dims),
                    given.len()
                )));
            }
            for (i, (d, &g)) in dims.iter().zip(given).enumerate() {
                if let Dim::Fixed(f) = d
                    && *f != g
                {
                    return Err(err(format!("dim {i} is fixed to {f} by the model, --input gave {g}")));
                }
            }
            Ok(given.clone())
        }
        None => dims
            .iter()
            .enumerate()
            .map(|(i, d)| match d {
                Dim::Fixed(f) => Ok(*f),
                Dim::Symbolic(s) => Err(err(format!(
                    "dim {i} is symbolic (`{s}`) in {}; give it with --input {name}=DIMS (for example {})",
                    fmt_dims(dims),
                    example_dims(dims)
                ))),
            })
            .collect(),
    }
}

fn fmt_dims(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(f) => f.to_string(),
            Dim::Symbolic(s) => s.clone(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

fn example_dims(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(f) => f.to_string(),
            Dim::Symbolic(_) => "1".into(),
        })
        .collect();
    parts.join("x")
}

type R<T> = Result<T, String>;

/// What inference learned about one output.
struct Out {
    dtype: DType,
    shape: Vec<usize>,
    constant: Option<Tensor>,
}

impl Out {
    fn like(dtype: DType, shape: Vec<usize>) -> Out {
        Out {
            dtype,
            shape,
            constant: None,
        }
    }
    fn constant(t: Tensor) -> Out {
        Out {
            dtype: t.dtype,
            shape: t.shape.clone(),
            constant: Some(t),
        }
    }
}

fn infer_node(graph: &mut Graph, index: usize) -> R<()> {
    let node = &graph.nodes[index];
    for (i, v) in node.inputs.iter().enumerate() {
        if let Some(v) = v
            && graph.value(*v).shape.is_none()
        {
            return Err(format!(
                "input {i} (`{}`) has no known shape",
                graph.value(*v).name
            ));
        }
    }
    let outs = infer_outputs(graph, node)?;
    for (i, &id) in node.outputs.iter().enumerate().skip(outs.len()) {
        if graph.is_output(id) || graph.nodes.iter().any(|n| n.inputs.contains(&Some(id))) {
            return Err(format!(
                "output {i} (`{}`) is used, but the operator produces only {} output{}",
                graph.value(id).name,
                outs.len(),
                if outs.len() == 1 { "" } else { "s" }
            ));
        }
    }
    for (out, id) in outs.iter().zip(&node.outputs) {
        check_elements(&out.shape)
            .map_err(|m| format!("output `{}`: {m}", graph.value(*id).name))?;
    }
    let node = &graph.nodes[index];
    let outputs = node.outputs.clone();
    for (i, out) in outs.into_iter().enumerate() {
        let Some(&id) = outputs.get(i) else { break };
        let v = graph.value_mut(id);
        v.dtype = out.dtype;
        v.shape = Some(out.shape);
        v.constant = out.constant;
    }
    Ok(())
}

/// Reads operand `i`, which must be present.
fn operand<'g>(g: &'g Graph, node: &Node, i: usize) -> R<&'g Value> {
    node.input(i)
        .map(|v| g.value(v))
        .ok_or_else(|| format!("input {i} is missing"))
}

fn const_operand<'g>(g: &'g Graph, node: &Node, i: usize, what: &str) -> R<&'g Tensor> {
    let v = operand(g, node, i)?;
    v.constant.as_ref().ok_or_else(|| {
        format!(
            "input {i} (`{}`, the {what}) must be a constant once input shapes are fixed",
            v.name
        )
    })
}

fn infer_outputs(g: &Graph, node: &Node) -> R<Vec<Out>> {
    let x = || operand(g, node, 0);
    let all_const = node
        .inputs
        .iter()
        .flatten()
        .all(|&v| g.value(v).constant.is_some());
    Ok(match &node.op {
        Op::Conv { window, group, .. } => {
            let (x, w) = (x()?, operand(g, node, 1)?);
            let (xs, ws) = (x.shape(), w.shape());
            if xs.len() != 4 || ws.len() != 4 {
                return Err(format!(
                    "only 2-D convolution (rank-4 input and weight) is supported; input {:?}, weight {:?}",
                    xs, ws
                ));
            }
            if *group > xs[1].max(1) {
                return Err(format!(
                    "group {group} exceeds the input's {} channels",
                    xs[1]
                ));
            }
            if ws[1].checked_mul(*group) != Some(xs[1]) {
                return Err(format!(
                    "input has {} channels, weight {:?} with group {group} expects {}",
                    xs[1],
                    ws,
                    ws[1].saturating_mul(*group)
                ));
            }
            if ws[0] % group != 0 {
                return Err(format!(
                    "weight {ws:?} has {} output channels, not a multiple of group {group}",
                    ws[0]
                ));
            }
            if let Some(b) = node.input(2)
                && g.value(b).shape() != [ws[0]]
            {
                return Err(format!(
                    "bias has shape {:?}, expected [{}]",
                    g.value(b).shape(),
                    ws[0]
                ));
            }
            let sp = window::resolve(window, &xs[2..], Some(&ws[2..]), false)?;
            vec![Out::like(x.dtype, vec![xs[0], ws[0], sp.out[0], sp.out[1]])]
        }
        Op::Gemm {
            trans_a, trans_b, ..
        } => {
            let (a, b) = (x()?.shape(), operand(g, node, 1)?.shape());
            if a.len() != 2 || b.len() != 2 {
                return Err(format!("A and B must be matrices, got {a:?} and {b:?}"));
            }
            let (m, ka) = if *trans_a { (a[1], a[0]) } else { (a[0], a[1]) };
            let (kb, n) = if *trans_b { (b[1], b[0]) } else { (b[0], b[1]) };
            if ka != kb {
                return Err(format!("inner dimensions differ: A {a:?}, B {b:?}"));
            }
            if let Some(c) = node.input(2) {
                let cs = g.value(c).shape();
                if cs.len() > 2 || broadcast(&[cs, &[m, n]]).ok().as_deref() != Some(&[m, n]) {
                    return Err(format!(
                        "C has shape {cs:?}, which does not broadcast to [{m}, {n}]"
                    ));
                }
            }
            vec![Out::like(x()?.dtype, vec![m, n])]
        }
        Op::MatMul => {
            let (a, b) = (x()?.shape(), operand(g, node, 1)?.shape());
            vec![Out::like(x()?.dtype, matmul_shape(a, b)?)]
        }
        Op::BatchNormalization { .. } => {
            let xs = x()?.shape();
            if xs.len() < 2 {
                return Err(format!("input must have rank ≥ 2, got {xs:?}"));
            }
            for i in 1..5 {
                let p = operand(g, node, i)?;
                if p.shape() != [xs[1]] {
                    return Err(format!(
                        "parameter {i} has shape {:?}, expected [{}]",
                        p.shape(),
                        xs[1]
                    ));
                }
            }
            if node.outputs.len() > 1 {
                return Err("training-mode outputs (running mean/var) are not supported".into());
            }
            vec![Out::like(x()?.dtype, xs.to_vec())]
        }
        Op::Unary(_)
        | Op::Clip { .. }
        | Op::Lrn { .. }
        | Op::Identity
        | Op::ChannelAffine { .. } => {
            vec![Out::like(x()?.dtype, x()?.shape().to_vec())]
        }
        Op::Dropout => vec![
            Out::like(x()?.dtype, x()?.shape().to_vec()),
            Out::like(DType::Bool, x()?.shape().to_vec()),
        ],
        Op::Softmax { axis, .. } => {
            normalize_axis(*axis, x()?.shape().len())?;
            vec![Out::like(x()?.dtype, x()?.shape().to_vec())]
        }
        Op::Binary(op) => {
            let (a, b) = (x()?, operand(g, node, 1)?);
            let shape = broadcast(&[a.shape(), b.shape()])?;
            // Larger constant results are computed at run time instead.
            if all_const && foldable(&shape) {
                let t = eval_binary(
                    *op,
                    a.constant.as_ref().unwrap(),
                    b.constant.as_ref().unwrap(),
                    &shape,
                );
                vec![Out::constant(t)]
            } else {
                vec![Out::like(a.dtype, shape)]
            }
        }
        Op::Variadic(_) => {
            let shapes: Vec<&[usize]> = node
                .inputs
                .iter()
                .flatten()
                .map(|&v| g.value(v).shape())
                .collect();
            if shapes.is_empty() {
                return Err("needs at least one input".into());
            }
            vec![Out::like(x()?.dtype, broadcast(&shapes)?)]
        }
        Op::MaxPool(w) | Op::AveragePool { window: w, .. } => {
            let xs = x()?.shape();
            if xs.len() != 4 {
                return Err(format!(
                    "only 2-D pooling (rank-4 input) is supported, got {xs:?}"
                ));
            }
            let sp = window::resolve(w, &xs[2..], None, true)?;
            if node.outputs.len() > 1 && matches!(node.op, Op::MaxPool(_)) {
                return Err("the Indices output of MaxPool is not supported".into());
            }
            vec![Out::like(
                x()?.dtype,
                vec![xs[0], xs[1], sp.out[0], sp.out[1]],
            )]
        }
        Op::GlobalAveragePool => {
            let xs = x()?.shape();
            if xs.len() < 3 {
                return Err(format!("input must have rank ≥ 3, got {xs:?}"));
            }
            let mut s = xs[..2].to_vec();
            s.extend(std::iter::repeat_n(1, xs.len() - 2));
            vec![Out::like(x()?.dtype, s)]
        }
        Op::Concat { axis } => {
            let ins: Vec<&Value> = node.inputs.iter().flatten().map(|&v| g.value(v)).collect();
            let first = ins.first().ok_or("needs at least one input")?;
            let rank = first.shape().len();
            let axis = normalize_axis(*axis, rank)?;
            let mut shape = first.shape().to_vec();
            shape[axis] = 0;
            for v in &ins {
                let s = v.shape();
                if s.len() != rank || (0..rank).any(|d| d != axis && s[d] != shape[d]) {
                    return Err(format!(
                        "input `{}` has shape {:?}, incompatible with {:?} along axis {axis}",
                        v.name,
                        s,
                        first.shape()
                    ));
                }
                shape[axis] += s[axis];
            }
            if all_const {
                let outer: usize = shape[..axis].iter().product();
                let mut out = Vec::new();
                let dtype = first.dtype;
                for o in 0..outer {
                    for v in &ins {
                        let t = v.constant.as_ref().unwrap();
                        let chunk = t.len().checked_div(outer).unwrap_or(0);
                        out.extend_from_slice(&t.as_f32()[o * chunk..(o + 1) * chunk]);
                    }
                }
                vec![Out::constant(Tensor::f32(shape, out).cast(dtype))]
            } else {
                vec![Out::like(first.dtype, shape)]
            }
        }
        Op::Transpose { perm } => {
            let s = x()?.shape();
            let perm = perm.clone().unwrap_or_else(|| (0..s.len()).rev().collect());
            let mut seen = vec![false; s.len()];
            if perm.len() != s.len()
                || perm
                    .iter()
                    .any(|&p| p >= s.len() || std::mem::replace(&mut seen[p], true))
            {
                return Err(format!(
                    "perm {perm:?} is not a permutation of rank {}",
                    s.len()
                ));
            }
            vec![Out::like(x()?.dtype, perm.iter().map(|&p| s[p]).collect())]
        }
        Op::Reshape { allow_zero } => {
            let target = const_operand(g, node, 1, "target shape")?.as_i64();
            let shape = reshape_shape(x()?.shape(), &target, *allow_zero)?;
            view_out(x()?, shape)
        }
        Op::Flatten { axis } => {
            let s = x()?.shape();
            let a = if *axis < 0 {
                *axis + s.len() as i64
            } else {
                *axis
            };
            if a < 0 || a as usize > s.len() {
                return Err(format!("axis {axis} is out of range for rank {}", s.len()));
            }
            let a = a as usize;
            view_out(x()?, vec![s[..a].iter().product(), s[a..].iter().product()])
        }
        Op::Squeeze { axes } => {
            let s = x()?.shape();
            let axes = match axes {
                Some(a) => Some(a.clone()),
                None if node.input(1).is_some() => {
                    Some(const_operand(g, node, 1, "axes")?.as_i64())
                }
                None => None,
            };
            let shape = match axes {
                None => s.iter().copied().filter(|&d| d != 1).collect(),
                Some(axes) => {
                    let axes = axes
                        .iter()
                        .map(|&a| normalize_axis(a, s.len()))
                        .collect::<R<Vec<_>>>()?;
                    if let Some(&a) = axes.iter().find(|&&a| s[a] != 1) {
                        return Err(format!("cannot squeeze axis {a} of size {}", s[a]));
                    }
                    (0..s.len())
                        .filter(|d| !axes.contains(d))
                        .map(|d| s[d])
                        .collect()
                }
            };
            view_out(x()?, shape)
        }
        Op::Unsqueeze { axes } => {
            let s = x()?.shape();
            let axes = match axes {
                Some(a) => a.clone(),
                None => const_operand(g, node, 1, "axes")?.as_i64(),
            };
            let rank = s.len() + axes.len();
            let axes = axes
                .iter()
                .map(|&a| normalize_axis(a, rank))
                .collect::<R<Vec<_>>>()?;
            let mut it = s.iter();
            let mut shape = Vec::with_capacity(rank);
            for d in 0..rank {
                shape.push(if axes.contains(&d) {
                    1
                } else {
                    *it.next().ok_or("repeated axes")?
                });
            }
            view_out(x()?, shape)
        }
        Op::Constant(t) => vec![Out::constant(t.clone())],
        Op::ConstantOfShape(value) => {
            let shape = const_operand(g, node, 0, "shape")?.as_i64();
            let shape = shape
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
                .collect::<R<Vec<_>>>()?;
            if !foldable(&shape) {
                return Err(format!(
                    "the constant of shape {shape:?} is too large to compute at compile time"
                ));
            }
            let len: usize = shape.iter().product();
            let t = match &value.data {
                Data::F32(v) => Tensor::f32(shape, vec![*v.first().unwrap_or(&0.0); len]),
                Data::I64(v) => Tensor::i64(shape, vec![*v.first().unwrap_or(&0); len]),
            };
            vec![Out::constant(t.cast(value.dtype))]
        }
        Op::Shape { start, end } => {
            let s = x()?.shape();
            let r = s.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let (a, b) = (clamp(*start), clamp(end.unwrap_or(r)));
            let dims: Vec<i64> = s[a..b.max(a)].iter().map(|&d| d as i64).collect();
            vec![Out::constant(Tensor::i64(vec![dims.len()], dims))]
        }
        Op::Gather { axis } => {
            let (data, idx) = (x()?, operand(g, node, 1)?);
            let ds = data.shape();
            let axis = normalize_axis(*axis, ds.len())?;
            let mut shape = ds[..axis].to_vec();
            shape.extend_from_slice(idx.shape());
            shape.extend_from_slice(&ds[axis + 1..]);
            match (&data.constant, &idx.constant) {
                (Some(_), Some(_)) if !foldable(&shape) => {
                    return Err(format!(
                        "the result of shape {shape:?} is too large to compute at compile time"
                    ));
                }
                (Some(d), Some(i)) => {
                    vec![Out::constant(eval_gather(d, &i.as_i64(), axis, shape)?)]
                }
                _ => {
                    return Err(
                        "Gather is only supported on constant data (shape arithmetic)".into(),
                    );
                }
            }
        }
        Op::Cast { to } => match &x()?.constant {
            Some(t) => vec![Out::constant(t.cast(*to))],
            None => vec![Out::like(*to, x()?.shape().to_vec())],
        },
    })
}

/// The output of a view op: same bytes, new shape; folded when the input is constant.
fn view_out(x: &Value, shape: Vec<usize>) -> Vec<Out> {
    match &x.constant {
        Some(t) => vec![Out::constant(Tensor {
            dtype: t.dtype,
            shape,
            data: t.data.clone(),
        })],
        None => vec![Out::like(x.dtype, shape)],
    }
}

pub fn normalize_axis(axis: i64, rank: usize) -> R<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a >= rank as i64 {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    } else {
        Ok(a as usize)
    }
}

/// NumPy broadcasting of several shapes.
pub fn broadcast(shapes: &[&[usize]]) -> R<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(format!("shapes {shapes:?} do not broadcast"));
            }
        }
    }
    Ok(out)
}

/// MatMul's operands with NumPy's 1-D promotion: a vector `a` becomes a row `[1, k]`,
/// a vector `b` a column `[k, 1]`. Inference and lowering both use it.
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

fn matmul_shape(a: &[usize], b: &[usize]) -> R<Vec<usize>> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul operands must have rank ≥ 1".into());
    }
    let (a2, b2) = matmul_operands(a, b);
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != k2 {
        return Err(format!("inner dimensions differ: {a:?} × {b:?}"));
    }
    let mut out = broadcast(&[&a2[..a2.len() - 2], &b2[..b2.len() - 2]])?;
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(out)
}

fn reshape_shape(input: &[usize], target: &[i64], allow_zero: bool) -> R<Vec<usize>> {
    let total: usize = input.iter().product();
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            -1 if infer_at.is_none() => {
                infer_at = Some(i);
                out.push(1);
            }
            0 if !allow_zero => out.push(
                *input
                    .get(i)
                    .ok_or_else(|| format!("0 at position {i} copies a missing dim"))?,
            ),
            t if t >= 0 => out.push(t as usize),
            _ => return Err(format!("invalid target shape {target:?}")),
        }
    }
    let known = out
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("cannot reshape {input:?} ({total} elements) to {target:?}"))?;
    if let Some(i) = infer_at {
        if known == 0 || !total.is_multiple_of(known) {
            return Err(format!(
                "cannot reshape {input:?} ({total} elements) to {target:?}"
            ));
        }
        out[i] = total / known;
    } else if known != total {
        return Err(format!(
            "cannot reshape {input:?} ({total} elements) to {target:?}"
        ));
    }
    Ok(out)
}

fn eval_binary(op: BinaryOp, a: &Tensor, b: &Tensor, shape: &[usize]) -> Tensor {
    let len: usize = shape.iter().product();
    let index = |t: &Tensor, flat: usize| -> usize {
        // Map an output index to the operand's index under broadcasting.
        let (mut rem, mut idx, mut stride) = (flat, 0, 1);
        let off = shape.len() - t.shape.len();
        for d in (0..shape.len()).rev() {
            let coord = rem % shape[d];
            rem /= shape[d];
            if d >= off {
                let td = t.shape[d - off];
                if td != 1 {
                    idx += coord * stride;
                }
                stride *= td;
            }
        }
        idx
    };
    let int = a.dtype != DType::F32 && b.dtype != DType::F32;
    if int {
        let (av, bv) = (a.as_i64(), b.as_i64());
        let f = |x: i64, y: i64| match op {
            BinaryOp::Add => x.wrapping_add(y),
            BinaryOp::Sub => x.wrapping_sub(y),
            BinaryOp::Mul => x.wrapping_mul(y),
            BinaryOp::Div => x.checked_div(y).unwrap_or(0),
            BinaryOp::Max => x.max(y),
            BinaryOp::Min => x.min(y),
        };
        let v = (0..len)
            .map(|i| f(av[index(a, i)], bv[index(b, i)]))
            .collect();
        Tensor::i64(shape.to_vec(), v).cast(a.dtype)
    } else {
        let (av, bv) = (a.as_f32(), b.as_f32());
        let f = |x: f32, y: f32| match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Max => x.max(y),
            BinaryOp::Min => x.min(y),
        };
        let v = (0..len)
            .map(|i| f(av[index(a, i)], bv[index(b, i)]))
            .collect();
        Tensor::f32(shape.to_vec(), v)
    }
}

fn eval_gather(data: &Tensor, indices: &[i64], axis: usize, shape: Vec<usize>) -> R<Tensor> {
    let ds = &data.shape;
    let outer: usize = ds[..axis].iter().product();
    let inner: usize = ds[axis + 1..].iter().product();
    let n = ds[axis] as i64;
    let mut idx = Vec::with_capacity(indices.len());
    for &i in indices {
        let j = if i < 0 { i + n } else { i };
        if j < 0 || j >= n {
            return Err(format!("index {i} is out of range for axis of size {n}"));
        }
        idx.push(j as usize);
    }
    let src = data.as_f32();
    let mut out = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for &j in &idx {
            let start = (o * ds[axis] + j) * inner;
            out.extend_from_slice(&src[start..start + inner]);
        }
    }
    Ok(Tensor::f32(shape, out).cast(data.dtype))
}
