//! Exporters' spellings of activations rewritten as the one operator they compute
//! (hard-swish, SiLU, GELU), so one pass replaces several and the producer of `x` can
//! fuse the activation. Each pattern is found at its last node by a matcher over
//! [`Pattern`]; [`rewrite_as_unary`] replaces it.

use std::sync::Arc;

use kiln_runtime::typed::params::{BinaryOp, UnaryOp};

use super::{clip_bounds, constant, producer, sole_consumer};
use crate::ir::*;
use crate::ops::elementwise::{Binary, Unary};

/// `x · Clip(x + 3, 0, 6) / 6` (exporters' hard-swish, as `Mul` then `Div`, or `Div`
/// then `Mul`) → `HardSwish(x)`. Float32 only; each intermediate value must feed only
/// the next node of the pattern.
pub fn hard_swish_patterns(graph: &mut Graph) {
    rewrite_as_unary(graph, "HardSwish", UnaryOp::HardSwish, hard_swish_at);
}

/// `x · Sigmoid(x)` (exporters' SiLU, YOLO's activation) → `Swish(x)` with alpha 1.
/// Float32 only; the Sigmoid's output must feed only the `Mul`.
pub fn swish_patterns(graph: &mut Graph) {
    rewrite_as_unary(graph, "Swish", UnaryOp::Swish { alpha: 1.0 }, swish_at);
}

/// `x · ½ · (1 + erf(x/√2))` as exporters write it (the feed-forward activation of
/// BERT-like encoders: a `Div` by √2 or a `Mul` by 1/√2, `Erf`, an `Add` of 1, and two
/// `Mul`s taking ½ and `x` in any order) → `Gelu(x)`: one pass over the tensor instead
/// of five. Float32 only; each intermediate value must feed only the next node.
pub fn gelu_patterns(graph: &mut Graph) {
    rewrite_as_unary(graph, "Gelu", UnaryOp::Gelu { tanh: false }, gelu_at);
}

/// Replaces each pattern `find` matches, ending at node `i`, by one `Unary` node at
/// `i` reading `x`, and removes the pattern's other nodes (`find` returns `x` and
/// their indices).
fn rewrite_as_unary(
    graph: &mut Graph,
    name: &'static str,
    op: UnaryOp,
    find: impl Fn(Pattern<'_>, usize) -> Option<(ValueId, Vec<usize>)>,
) {
    let mut i = 0;
    while i < graph.nodes.len() {
        let is_f32 = graph.value(graph.nodes[i].outputs[0]).dtype == DType::F32;
        if is_f32 && let Some((x, mut dead)) = find(Pattern { graph }, i) {
            graph.nodes[i].op = Arc::new(Unary {
                name,
                op,
                types: crate::ops::Types::Float,
            });
            graph.nodes[i].inputs = vec![Some(x)];
            let before = dead.iter().filter(|&&d| d < i).count();
            dead.sort_unstable_by(|a, b| b.cmp(a));
            for d in dead {
                graph.nodes.remove(d);
            }
            i -= before;
        }
        i += 1;
    }
}

/// What the matchers ask of the graph.
#[derive(Clone, Copy)]
struct Pattern<'g> {
    graph: &'g Graph,
}

impl Pattern<'_> {
    /// The node that writes `v`.
    fn producer(self, v: ValueId) -> Option<usize> {
        producer(self.graph, v)
    }

    /// Node `i`'s two operands, if it is the binary `op`.
    fn binary(self, i: usize, op: BinaryOp) -> Option<(ValueId, ValueId)> {
        let n = &self.graph.nodes[i];
        n.op.downcast::<Binary>().filter(|b| b.op == op)?;
        Some((n.input(0)?, n.input(1)?))
    }

    /// Whether node `i` is the unary `op` (compared without its parameters).
    fn is_unary(self, i: usize, op: UnaryOp) -> bool {
        let n = &self.graph.nodes[i];
        let same = |u: &Unary| std::mem::discriminant(&u.op) == std::mem::discriminant(&op);
        n.op.downcast::<Unary>().is_some_and(same)
    }

    /// The value of `v` where it is a constant of one element.
    fn scalar(self, v: ValueId) -> Option<f32> {
        constant(self.graph, Some(v))
            .filter(|c| c.len() == 1)
            .map(|c| c[0])
    }

    /// Whether `v` is a one-element constant within 1e-6 (relative) of `want`.
    fn near(self, v: ValueId, want: f64) -> bool {
        self.scalar(v)
            .is_some_and(|c| (c as f64 - want).abs() <= 1e-6 * want.abs())
    }

    /// Whether node `to` is the only reader of node `from`'s output.
    fn feeds(self, from: usize, to: usize) -> bool {
        sole_consumer(self.graph, self.graph.nodes[from].outputs[0]) == Some(to)
    }

    /// Of a binary node's operands `(a, b)`, the one that is not the scalar `want`,
    /// where exactly one is.
    fn other_than(self, (a, b): (ValueId, ValueId), want: f32) -> Option<ValueId> {
        match (self.scalar(a) == Some(want), self.scalar(b) == Some(want)) {
            (false, true) => Some(a),
            (true, false) => Some(b),
            _ => None,
        }
    }
}

/// The input `x` of a hard-swish pattern ending at node `end`, and the other nodes of
/// the pattern (to remove).
fn hard_swish_at(m: Pattern<'_>, end: usize) -> Option<(ValueId, Vec<usize>)> {
    // `Clip(x + 3, 0, 6)` at node `c`, feeding `next`: x and the Add's index.
    let clip_of = |c: usize, next: usize| -> Option<(ValueId, usize)> {
        if clip_bounds(m.graph, &m.graph.nodes[c])? != [Some(0.0), Some(6.0)] || !m.feeds(c, next) {
            return None;
        }
        let add = m.producer(m.graph.nodes[c].input(0)?)?;
        let x = m.other_than(m.binary(add, BinaryOp::Add)?, 3.0)?;
        m.feeds(add, c).then_some((x, add))
    };
    if let Some((product, six)) = m.binary(end, BinaryOp::Div) {
        // (x · Clip(x + 3, 0, 6)) / 6
        if m.scalar(six) != Some(6.0) {
            return None;
        }
        let mul = m.producer(product)?;
        let (a, b) = m.binary(mul, BinaryOp::Mul)?;
        for (x, other) in [(a, b), (b, a)] {
            if let Some(c) = m.producer(other)
                && let Some((cx, add)) = clip_of(c, mul)
                && cx == x
                && m.feeds(mul, end)
            {
                return Some((x, vec![add, c, mul]));
            }
        }
        return None;
    }
    // x · (Clip(x + 3, 0, 6) / 6)
    let (a, b) = m.binary(end, BinaryOp::Mul)?;
    for (x, other) in [(a, b), (b, a)] {
        let Some(div) = m.producer(other) else {
            continue;
        };
        let Some((d, six)) = m.binary(div, BinaryOp::Div) else {
            continue;
        };
        if m.scalar(six) != Some(6.0) || !m.feeds(div, end) {
            continue;
        }
        if let Some(c) = m.producer(d)
            && let Some((cx, add)) = clip_of(c, div)
            && cx == x
        {
            return Some((x, vec![add, c, div]));
        }
    }
    None
}

/// The input `x` of a `x · Sigmoid(x)` ending at the `Mul` node `end`, and the
/// Sigmoid's index.
fn swish_at(m: Pattern<'_>, end: usize) -> Option<(ValueId, Vec<usize>)> {
    let (a, b) = m.binary(end, BinaryOp::Mul)?;
    for (x, s) in [(a, b), (b, a)] {
        let Some(p) = m.producer(s) else {
            continue;
        };
        let sigmoid_of_x = m.is_unary(p, UnaryOp::Sigmoid) && m.graph.nodes[p].input(0) == Some(x);
        if sigmoid_of_x && m.feeds(p, end) {
            return Some((x, vec![p]));
        }
    }
    None
}

/// The input `x` of a GELU pattern ending at the `Mul` node `end`, and the pattern's
/// other nodes (to remove).
fn gelu_at(m: Pattern<'_>, end: usize) -> Option<(ValueId, Vec<usize>)> {
    // `1 + erf(x/√2)` as value `v`, read only by node `reader`: its nodes.
    let one_plus_erf = |v: ValueId, x: ValueId, reader: usize| -> Option<Vec<usize>> {
        let add = m.producer(v)?;
        let erf = m.producer(m.other_than(m.binary(add, BinaryOp::Add)?, 1.0)?)?;
        let scale = m.producer(m.graph.nodes[erf].input(0)?)?;
        let scaled = match m.binary(scale, BinaryOp::Div) {
            Some((a, s)) => a == x && m.near(s, std::f64::consts::SQRT_2),
            None => m.binary(scale, BinaryOp::Mul).is_some_and(|(a, b)| {
                let half_root = std::f64::consts::FRAC_1_SQRT_2;
                (a == x && m.near(b, half_root)) || (b == x && m.near(a, half_root))
            }),
        };
        let chain = m.is_unary(erf, UnaryOp::Erf)
            && scaled
            && m.feeds(add, reader)
            && m.feeds(erf, add)
            && m.feeds(scale, erf);
        chain.then(|| vec![add, erf, scale])
    };
    let (a, b) = m.binary(end, BinaryOp::Mul)?;
    for (product, other) in [(a, b), (b, a)] {
        let Some(inner) = m.producer(product) else {
            continue;
        };
        let Some((c, d)) = m.binary(inner, BinaryOp::Mul) else {
            continue;
        };
        if !m.feeds(inner, end) {
            continue;
        }
        // The three factors, each with the node that reads it: one is ½, one is
        // `1 + erf(x/√2)`, one is `x`.
        let factors = [(other, end), (c, inner), (d, inner)];
        for half in 0..3 {
            if m.scalar(factors[half].0) != Some(0.5) {
                continue;
            }
            for erf in (0..3).filter(|&i| i != half) {
                let x = factors[3 - half - erf].0;
                let (v, reader) = factors[erf];
                if let Some(mut nodes) = one_plus_erf(v, x, reader) {
                    nodes.push(inner);
                    return Some((x, nodes));
                }
            }
        }
    }
    None
}
