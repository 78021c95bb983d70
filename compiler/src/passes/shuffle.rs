//! ShuffleNet's channel shuffle fused into the grouped convolution before it.
//!
//! The shuffle (`Reshape` to `[N, g, C/g, H, W]`, `Transpose(0, 2, 1, 3, 4)`,
//! `Reshape` back to `[N, C, H, W]`) moves channel `a` of group `b` to channel
//! `a·g + b`. Run as a step, it copies the whole tensor (ShuffleNet v1: 16 steps, 12 %
//! of its time at 2 threads). When the tensor comes from a convolution of `g` groups,
//! each group's product can write its rows `g` planes apart instead
//! (`kiln_runtime::kernels::conv2d_shuffled`), and the shuffle costs nothing.

use std::sync::Arc;

use super::{fixed_shape, producer, sole_consumer};
use crate::ir::*;
use crate::ops::conv::Conv;
use crate::ops::shape::{Transpose, View};

/// `Reshape(Transpose(Reshape(Conv(x))))` spelling a channel shuffle over the
/// convolution's `g` groups → one `Conv` with `shuffle` set. Taken where the
/// convolution is float32 NCHW with fixed shapes, grouped but not depthwise (the
/// kernels that write a group's rows apart), with no residual or pool fused in, and
/// each intermediate value feeds only the next node. Runs after the activation
/// fusion: the activation stays before the shuffle, which only moves values. The
/// fused node takes the last `Reshape`'s place and output, and the convolution's name.
pub fn fuse_channel_shuffles(graph: &mut Graph) {
    let mut i = 0;
    while i < graph.nodes.len() {
        let Some([conv_index, split, t]) = shuffle_at(graph, i) else {
            i += 1;
            continue;
        };
        // Producers come before their consumers: removed last first, the indices
        // before stay valid.
        graph.nodes.remove(t);
        graph.nodes.remove(split);
        let conv_node = graph.nodes.remove(conv_index);
        let at = i - 3;
        let conv = conv_node.op.downcast::<Conv>().expect("checked");
        let reshape = &mut graph.nodes[at];
        reshape.op = Arc::new(Conv {
            shuffle: true,
            ..conv.clone()
        });
        reshape.inputs = conv_node.inputs;
        reshape.name = conv_node.name;
        i = at + 1;
    }
}

/// Whether node `last` is the final `Reshape` of a channel shuffle over the output of
/// a convolution [`fuse_channel_shuffles`] takes: the indices of the pattern's other
/// nodes, in order (the convolution, the first `Reshape`, the `Transpose`).
fn shuffle_at(graph: &Graph, last: usize) -> Option<[usize; 3]> {
    let shape = |v| fixed_shape(graph, v);
    let is_reshape = |n: &Node| matches!(n.op.downcast::<View>(), Some(View::Reshape { .. }));
    // Each node's only output feeds only the next node of the pattern.
    let single = |n: usize, next: usize| {
        let node = &graph.nodes[n];
        node.outputs.len() == 1 && sole_consumer(graph, node.outputs[0]) == Some(next)
    };
    let back = &graph.nodes[last];
    if !is_reshape(back) || back.outputs.len() != 1 {
        return None;
    }
    let t = producer(graph, back.input(0)?)?;
    let perm = graph.nodes[t].op.downcast::<Transpose>()?.perm.as_deref()?;
    if perm != [0, 2, 1, 3, 4] || !single(t, last) {
        return None;
    }
    let split = producer(graph, graph.nodes[t].input(0)?)?;
    if !is_reshape(&graph.nodes[split]) || !single(split, t) {
        return None;
    }
    let conv_index = producer(graph, graph.nodes[split].input(0)?)?;
    let conv_node = &graph.nodes[conv_index];
    let conv = conv_node
        .op
        .downcast::<Conv>()
        .filter(|c| !c.residual && c.max_pool.is_none() && !c.shuffle && c.group > 1)?;
    if !single(conv_index, split) {
        return None;
    }
    let y = conv_node.outputs[0];
    let (x, w, y_shape) = (
        shape(conv_node.input(0))?,
        shape(conv_node.input(1))?,
        shape(Some(y))?,
    );
    let grouped = x.len() == 4
        && graph.value(y).dtype == DType::F32
        && conv.conv2d(&x, &w).is_ok_and(|p| !p.is_depthwise());
    let &[n, c, h, wd] = y_shape.as_slice() else {
        return None;
    };
    let g = conv.group;
    let spells_shuffle = c % g == 0
        && shape(graph.nodes[split].outputs.first().copied())? == [n, g, c / g, h, wd]
        && shape(back.outputs.first().copied())? == y_shape;
    (grouped && spells_shuffle).then_some([conv_index, split, t])
}
