//! Graph rewrites between shape inference and lowering. Each pass has one entry
//! function, preserves the graph's meaning, and leaves shapes valid.

use std::sync::Arc;

use kiln_runtime::typed::params::{BinaryOp, UnaryOp};

use crate::error::Error;
use crate::ir::*;
use crate::lower::Choices;
use crate::ops::conv::{Conv, Pool};
use crate::ops::elementwise::{Binary, Clip, Unary, Variadic};
use crate::ops::linalg::Gemm;
use crate::ops::norm::{BatchNormalization, ChannelAffine};
use crate::ops::shape::View;

mod activations;
mod shuffle;
pub use activations::{gelu_patterns, hard_swish_patterns, swish_patterns};
pub use shuffle::fuse_channel_shuffles;

/// Runs every pass in order; `choices` says which fusions the target's kernels take.
pub fn run(graph: &mut Graph, choices: Choices) -> Result<(), Error> {
    drop_folded(graph);
    remove_identities(graph);
    fold_batchnorm_into_conv(graph);
    batchnorm_to_affine(graph);
    fold_channel_ops(graph);
    hard_swish_patterns(graph);
    swish_patterns(graph);
    gelu_patterns(graph);
    if choices.residual_adds {
        fuse_residual_adds(graph);
    }
    fuse_activations(graph);
    if choices.max_pools {
        fuse_max_pools(graph);
    }
    if choices.channel_shuffles {
        fuse_channel_shuffles(graph);
    }
    eliminate_dead_nodes(graph);
    Ok(())
}

/// Removes nodes whose outputs were all folded to constants by shape inference;
/// their consumers read the constants directly.
pub fn drop_folded(graph: &mut Graph) {
    let values = &graph.values;
    graph.nodes.retain(|n| {
        !n.outputs
            .iter()
            .all(|o| values[o.index()].constant.is_some())
    });
}

/// Identity and Dropout (inference) forward their input: consumers are rewired to it.
/// A node whose output is a graph output stays (lowering turns it into a copy).
pub fn remove_identities(graph: &mut Graph) {
    let mut i = 0;
    while i < graph.nodes.len() {
        let n = &graph.nodes[i];
        let forwards = matches!(
            n.op.downcast::<View>(),
            Some(View::Identity | View::Dropout)
        );
        let out = n.outputs[0];
        let extra_outputs_unused = n.outputs[1..].iter().all(|o| !is_read(graph, *o));
        match (
            forwards && extra_outputs_unused && !graph.is_output(out),
            n.input(0),
        ) {
            (true, Some(input)) => {
                graph.nodes.remove(i);
                graph.replace_uses(out, input);
            }
            _ => i += 1,
        }
    }
}

fn is_read(graph: &Graph, v: ValueId) -> bool {
    graph.is_output(v) || graph.nodes.iter().any(|n| n.inputs.contains(&Some(v)))
}

/// The node that writes `v`.
fn producer(graph: &Graph, v: ValueId) -> Option<usize> {
    graph.nodes.iter().position(|n| n.outputs.contains(&v))
}

/// The fixed shape of `v`, where it is present and inference fixed one.
fn fixed_shape(graph: &Graph, v: Option<ValueId>) -> Option<Vec<usize>> {
    graph.value(v?).shape.clone()
}

/// The only consumer of `v`, if it has exactly one and is not a graph output.
fn sole_consumer(graph: &Graph, v: ValueId) -> Option<usize> {
    if graph.is_output(v) {
        return None;
    }
    let mut found = None;
    for (i, n) in graph.nodes.iter().enumerate() {
        let uses = n.inputs.iter().filter(|&&x| x == Some(v)).count();
        if uses > 0 {
            if found.is_some() || uses > 1 {
                return None;
            }
            found = Some(i);
        }
    }
    found
}

/// A float32 constant's values (the folds below are float32 arithmetic).
fn constant(graph: &Graph, v: Option<ValueId>) -> Option<Vec<f32>> {
    let t = graph.value(v?).constant.as_ref()?;
    Some(t.values::<f32>()?.to_vec())
}

/// The Conv at `node` if it has no fused activation yet.
fn plain_conv(node: &Node) -> Option<&Conv> {
    node.op
        .downcast::<Conv>()
        .filter(|c| c.activation.is_none())
}

fn plain_affine(node: &Node) -> bool {
    node.op
        .downcast::<ChannelAffine>()
        .is_some_and(|a| a.activation.is_none())
}

/// `BatchNormalization(Conv(x, W, b))` → `Conv(x, W', b')` when the convolution's output
/// feeds only the normalisation and every parameter is constant:
/// `W'[o] = W[o]·s[o]/√(var[o]+ε)`, `b'[o] = (b[o]−mean[o])·s[o]/√(var[o]+ε) + β[o]`.
pub fn fold_batchnorm_into_conv(graph: &mut Graph) {
    let mut i = 0;
    while i < graph.nodes.len() {
        if let Some(bn) = try_fold_bn(graph, i) {
            graph.nodes.remove(bn);
            if bn < i {
                i -= 1;
            }
        }
        i += 1;
    }
}

fn try_fold_bn(graph: &mut Graph, conv_index: usize) -> Option<usize> {
    let conv = &graph.nodes[conv_index];
    plain_conv(conv)?;
    let y = conv.outputs[0];
    let bn_index = sole_consumer(graph, y)?;
    let bn = &graph.nodes[bn_index];
    let epsilon = bn.op.downcast::<BatchNormalization>()?.epsilon;
    if bn.input(0) != Some(y) {
        return None;
    }
    let w = graph.value(conv.input(1)?).constant.clone()?;
    w.values::<f32>()?;
    let c_out = w.shape[0];
    let bias = match conv.input(2) {
        Some(b) => constant(graph, Some(b))?,
        None => vec![0.0; c_out],
    };
    let [scale, beta, mean, var] = [1, 2, 3, 4].map(|k| constant(graph, bn.input(k)));
    let (scale, beta, mean, var) = (scale?, beta?, mean?, var?);
    let z = bn.outputs[0];

    let per_out = w.len() / c_out.max(1);
    let mut wv = w.as_f32();
    let mut new_bias = vec![0.0f32; c_out];
    for o in 0..c_out {
        let f = scale[o] / (var[o] + epsilon).sqrt();
        for x in &mut wv[o * per_out..(o + 1) * per_out] {
            *x *= f;
        }
        new_bias[o] = (bias[o] - mean[o]) * f + beta[o];
    }
    let conv_name = graph.nodes[conv_index].name.clone();
    let w_id = graph.add_value(Value::constant(
        format!("{conv_name}:folded_weight"),
        Tensor::f32(w.shape.clone(), wv),
    ));
    let b_id = graph.add_value(Value::constant(
        format!("{conv_name}:folded_bias"),
        Tensor::f32(vec![c_out], new_bias),
    ));
    let conv = &mut graph.nodes[conv_index];
    conv.inputs = vec![conv.inputs[0], Some(w_id), Some(b_id)];
    conv.outputs = vec![z];
    Some(bn_index)
}

/// Inference BatchNormalization with constant parameters (one not folded into a
/// convolution) becomes a [`ChannelAffine`]: `scale = s/√(var+ε)`,
/// `shift = β − mean·scale`, so the kernel does one multiply-add per element.
pub fn batchnorm_to_affine(graph: &mut Graph) {
    for i in 0..graph.nodes.len() {
        let n = &graph.nodes[i];
        let Some(&BatchNormalization { epsilon }) = n.op.downcast::<BatchNormalization>() else {
            continue;
        };
        let [s, beta, mean, var] = [1, 2, 3, 4].map(|k| constant(graph, n.input(k)));
        let (Some(s), Some(beta), Some(mean), Some(var)) = (s, beta, mean, var) else {
            continue;
        };
        let scale: Vec<f32> = s
            .iter()
            .zip(&var)
            .map(|(s, v)| s / (v + epsilon).sqrt())
            .collect();
        let shift: Vec<f32> = (0..scale.len())
            .map(|c| beta[c] - mean[c] * scale[c])
            .collect();
        let name = n.name.clone();
        let x = n.inputs[0];
        let sc = add_vector(graph, &name, "scale", scale);
        let sh = add_vector(graph, &name, "shift", shift);
        let n = &mut graph.nodes[i];
        n.op = Arc::new(ChannelAffine { activation: None });
        n.inputs = vec![x, Some(sc), Some(sh)];
    }
}

fn add_vector(graph: &mut Graph, node: &str, what: &str, v: Vec<f32>) -> ValueId {
    let len = v.len();
    graph.add_value(Value::constant(
        format!("{node}:{what}"),
        Tensor::f32(vec![len], v),
    ))
}

/// If `node` is `Mul` or `Add` of `y` (rank ≥ 2, channels on axis 1) and a constant
/// that varies at most along the channel axis, that constant per channel.
fn per_channel_operand(graph: &Graph, node: &Node, y: ValueId) -> Option<(BinaryOp, Vec<f32>)> {
    let op = node.op.downcast::<Binary>()?.op;
    if !matches!(op, BinaryOp::Mul | BinaryOp::Add) {
        return None;
    }
    let other = match (node.input(0), node.input(1)) {
        (Some(a), Some(b)) if a == y && b != y => b,
        (Some(a), Some(b)) if b == y && a != y => a,
        _ => return None,
    };
    let ys = graph.value(y).shape();
    let t = graph.value(other).constant.as_ref()?;
    t.values::<f32>()?;
    let c = *ys.get(1)?;
    if t.shape.len() > ys.len() || t.is_empty() {
        return None;
    }
    let offset = ys.len() - t.shape.len();
    let mut varies = false;
    for (i, &d) in t.shape.iter().enumerate() {
        match (i + offset, d) {
            (_, 1) => {}
            (1, d) if d == c => varies = true,
            _ => return None,
        }
    }
    let v = t.as_f32();
    Some((op, if varies { v } else { vec![v[0]; c] }))
}

/// Folds per-channel constant `Mul`/`Add` into the Conv or ChannelAffine that is their
/// only input: a Conv scales its weight rows and bias, an affine its scale and shift.
pub fn fold_channel_ops(graph: &mut Graph) {
    let mut i = 0;
    while i < graph.nodes.len() {
        let n = &graph.nodes[i];
        let foldable = plain_conv(n).is_some() || plain_affine(n);
        let y = n.outputs[0];
        let next = if foldable {
            sole_consumer(graph, y)
        } else {
            None
        };
        let folded = next.and_then(|next| {
            let (op, k) = per_channel_operand(graph, &graph.nodes[next], y)?;
            let z = graph.nodes[next].outputs[0];
            (graph.value(z).shape() == graph.value(y).shape() && fold_into(graph, i, op, &k))
                .then_some((next, z))
        });
        match folded {
            Some((next, z)) => {
                graph.nodes[i].outputs[0] = z;
                graph.nodes.remove(next);
                if next < i {
                    i -= 1;
                }
                // Stay on this node: another Mul/Add may follow.
            }
            None => i += 1,
        }
    }
}

fn fold_into(graph: &mut Graph, index: usize, op: BinaryOp, k: &[f32]) -> bool {
    let n = &graph.nodes[index];
    let name = n.name.clone();
    if n.op.downcast::<Conv>().is_some() {
        {
            let Some(w) = n.input(1).and_then(|w| graph.value(w).constant.clone()) else {
                return false;
            };
            if w.values::<f32>().is_none() {
                return false;
            }
            let c_out = w.shape[0];
            let bias = match n.input(2) {
                Some(b) => constant(graph, Some(b)),
                None => Some(vec![0.0; c_out]),
            };
            let Some(mut bias) = bias else {
                return false;
            };
            let mut wv = w.as_f32();
            let per = wv.len() / c_out.max(1);
            for o in 0..c_out {
                if op == BinaryOp::Mul {
                    wv[o * per..(o + 1) * per]
                        .iter_mut()
                        .for_each(|x| *x *= k[o]);
                    bias[o] *= k[o];
                } else {
                    bias[o] += k[o];
                }
            }
            let w_id = graph.add_value(Value::constant(
                format!("{name}:folded_weight"),
                Tensor::f32(w.shape.clone(), wv),
            ));
            let b_id = add_vector(graph, &name, "folded_bias", bias);
            let n = &mut graph.nodes[index];
            n.inputs = vec![n.inputs[0], Some(w_id), Some(b_id)];
            true
        }
    } else if n.op.downcast::<ChannelAffine>().is_some() {
        {
            let (Some(mut scale), Some(mut shift)) =
                (constant(graph, n.input(1)), constant(graph, n.input(2)))
            else {
                return false;
            };
            for c in 0..scale.len() {
                if op == BinaryOp::Mul {
                    scale[c] *= k[c];
                    shift[c] *= k[c];
                } else {
                    shift[c] += k[c];
                }
            }
            let sc = add_vector(graph, &name, "scale", scale);
            let sh = add_vector(graph, &name, "shift", shift);
            let n = &mut graph.nodes[index];
            n.inputs = vec![n.inputs[0], Some(sc), Some(sh)];
            true
        }
    } else {
        false
    }
}

/// `Add(Conv(x), r)` (or a two-input `Sum`) → one `Conv` with `r` as its residual
/// input (`Conv::residual`), so a following activation fuses too and ResNet's
/// `Conv → Sum → Relu` is one kernel call (ShuffleNet's grouped one too). Taken where
/// the convolution is float32, 1×1 (whose output stage adds the residual while each
/// row is in cache), has no activation yet and only the Add reads it, and `r` has
/// exactly its output's shape.
/// The fused node takes the Add's place in the order: `r` may be computed after the
/// convolution.
pub fn fuse_residual_adds(graph: &mut Graph) {
    let mut i = 0;
    while i < graph.nodes.len() {
        let Some((conv_index, residual)) = residual_add_at(graph, i) else {
            i += 1;
            continue;
        };
        let conv_node = graph.nodes.remove(conv_index);
        let add_index = i - 1;
        let conv = conv_node.op.downcast::<Conv>().expect("checked").clone();
        let mut inputs = conv_node.inputs.clone();
        inputs.resize(3, None);
        inputs.push(Some(residual));
        let add = &mut graph.nodes[add_index];
        add.op = Arc::new(Conv {
            residual: true,
            ..conv
        });
        add.inputs = inputs;
        add.name = conv_node.name;
        // The Add's output stays; the convolution's is no longer written.
    }
}

/// Whether node `add` adds the output of a convolution [`fuse_residual_adds`] takes
/// to a same-shaped tensor: the convolution's index and the other operand.
fn residual_add_at(graph: &Graph, add: usize) -> Option<(usize, ValueId)> {
    let node = &graph.nodes[add];
    let adds = node
        .op
        .downcast::<Binary>()
        .is_some_and(|b| b.op == BinaryOp::Add)
        || node
            .op
            .downcast::<Variadic>()
            .is_some_and(|v| v.op == BinaryOp::Add && !v.mean);
    if !adds || node.inputs.len() != 2 {
        return None;
    }
    let (a, b) = (node.input(0)?, node.input(1)?);
    for (c, r) in [(a, b), (b, a)] {
        let Some(p) = producer(graph, c) else {
            continue;
        };
        let conv = &graph.nodes[p];
        let Some(op) = plain_conv(conv).filter(|op| !op.residual) else {
            continue;
        };
        let (out, res) = (graph.value(c), graph.value(r));
        let one_by_one = conv
            .input(1)
            .and_then(|w| graph.value(w).shape.as_deref())
            .is_some_and(|w| w.len() == 4 && w[2..] == [1, 1]);
        let fits = out.dtype == DType::F32
            && res.dtype == DType::F32
            && out.shape.as_ref().is_some_and(|s| s.len() == 4)
            && out.shape == res.shape
            && graph.value(node.outputs[0]).shape == out.shape;
        if one_by_one && fits && conv.outputs.len() == 1 && sole_consumer(graph, c) == Some(add) {
            debug_assert!(p < add && op.activation.is_none());
            return Some((p, r));
        }
    }
    None
}

/// `MaxPool(Conv(x))` → one `Conv` with the pool's window (`Conv::max_pool`), where
/// the convolution runs on the direct kernel (`Conv2d::direct_applies`: the image
/// stems of SqueezeNet, ResNet, ShuffleNet and the Inceptions), whose output rows the
/// pool then takes while they are in cache: the convolution's output, the largest
/// tensor of such a model, is never written. Taken where the convolution is float32
/// NCHW with fixed shapes, has no residual, and only the pool reads it, and the pool
/// has no Indices output. Runs after [`fuse_activations`]: the convolution's
/// activation stays before the pool. The fused node takes the pool's place and
/// output, and the convolution's name.
pub fn fuse_max_pools(graph: &mut Graph) {
    let mut i = 0;
    while i < graph.nodes.len() {
        let Some(conv_index) = pooled_conv_at(graph, i) else {
            i += 1;
            continue;
        };
        let conv_node = graph.nodes.remove(conv_index);
        let pool_index = i - 1;
        let conv = conv_node.op.downcast::<Conv>().expect("checked").clone();
        let pool = &mut graph.nodes[pool_index];
        let window = pool.op.downcast::<Pool>().expect("checked").window.clone();
        pool.op = Arc::new(Conv {
            max_pool: Some(window),
            ..conv
        });
        pool.inputs = conv_node.inputs;
        pool.name = conv_node.name;
    }
}

/// Whether node `pool` is a max pool over the output of a convolution
/// [`fuse_max_pools`] takes: the convolution's index.
fn pooled_conv_at(graph: &Graph, pool: usize) -> Option<usize> {
    let node = &graph.nodes[pool];
    node.op.downcast::<Pool>().filter(|p| p.average.is_none())?;
    if node.outputs.len() != 1 {
        return None;
    }
    let c = node.input(0)?;
    let p = producer(graph, c)?;
    let conv_node = &graph.nodes[p];
    let conv = conv_node
        .op
        .downcast::<Conv>()
        .filter(|c| !c.residual && c.max_pool.is_none())?;
    let shape = |v| fixed_shape(graph, v);
    let (x, w, y) = (
        shape(conv_node.input(0))?,
        shape(conv_node.input(1))?,
        shape(Some(c))?,
    );
    let direct = x.len() == 4
        && y.len() == 4
        && graph.value(c).dtype == DType::F32
        && conv.conv2d(&x, &w).is_ok_and(|p| p.direct_applies());
    (direct && conv_node.outputs.len() == 1 && sole_consumer(graph, c) == Some(pool)).then_some(p)
}

/// Fuses an activation into the Conv, Gemm or ChannelAffine that is its only input.
pub fn fuse_activations(graph: &mut Graph) {
    let mut i = 0;
    while i < graph.nodes.len() {
        let node = &graph.nodes[i];
        let fusable = plain_conv(node).is_some()
            || plain_affine(node)
            || node
                .op
                .downcast::<Gemm>()
                .is_some_and(|g| g.activation.is_none());
        if fusable && let Some(act_index) = sole_consumer(graph, graph.nodes[i].outputs[0]) {
            let act_node = &graph.nodes[act_index];
            if let Some(act) = activation_of(graph, act_node) {
                let out = act_node.outputs[0];
                let op = &graph.nodes[i].op;
                let fused: Op = if let Some(c) = op.downcast::<Conv>() {
                    Arc::new(Conv {
                        activation: Some(act),
                        ..c.clone()
                    })
                } else if let Some(g) = op.downcast::<Gemm>() {
                    Arc::new(Gemm {
                        activation: Some(act),
                        ..g.clone()
                    })
                } else {
                    Arc::new(ChannelAffine {
                        activation: Some(act),
                    })
                };
                graph.nodes[i].op = fused;
                graph.nodes[i].outputs[0] = out;
                graph.nodes.remove(act_index);
                if act_index < i {
                    i -= 1;
                }
            }
        }
        i += 1;
    }
}

/// The activation node `n` computes, when it is one the producers can fuse (float32).
fn activation_of(graph: &Graph, n: &Node) -> Option<Activation> {
    if graph.value(n.outputs[0]).dtype != DType::F32 {
        return None;
    }
    if let Some(u) = n.op.downcast::<Unary>() {
        return match u.op {
            UnaryOp::Relu => Some(Activation::Relu),
            UnaryOp::LeakyRelu { alpha } => Some(Activation::LeakyRelu { alpha }),
            UnaryOp::Sigmoid => Some(Activation::Sigmoid),
            UnaryOp::HardSigmoid { alpha, beta } => Some(Activation::HardSigmoid { alpha, beta }),
            UnaryOp::HardSwish => Some(Activation::HardSwish),
            UnaryOp::Swish { alpha } => Some(Activation::Swish { alpha }),
            _ => None,
        };
    }
    let [min, max] = clip_bounds(graph, n)?;
    Some(Activation::Clip {
        min: min.map_or(f32::MIN, |v| v as f32),
        max: max.map_or(f32::MAX, |v| v as f32),
    })
}

/// A `Clip` node's bounds (`None` = unbounded), when they are constants.
fn clip_bounds(graph: &Graph, n: &Node) -> Option<[Option<f64>; 2]> {
    n.op.downcast::<Clip>()?
        .bounds(|k| match n.input(k) {
            None => Some(None),
            Some(v) => graph
                .value(v)
                .constant
                .as_ref()
                .and_then(|t| t.scalar_f64())
                .map(Some),
        })
        .ok()
}

/// Removes nodes none of whose outputs reach a graph output.
pub fn eliminate_dead_nodes(graph: &mut Graph) {
    let mut live = vec![false; graph.values.len()];
    for &o in &graph.outputs {
        live[o.index()] = true;
    }
    let mut keep = vec![false; graph.nodes.len()];
    for (i, n) in graph.nodes.iter().enumerate().rev() {
        if n.outputs.iter().any(|o| live[o.index()]) {
            keep[i] = true;
            for v in n.inputs.iter().flatten() {
                live[v.index()] = true;
            }
        }
    }
    let mut k = keep.into_iter();
    graph.nodes.retain(|_| k.next().unwrap_or(false));
}
