//! Shape inference with constant propagation, in one forward pass.
//!
//! Every value gets a static shape and element type from its operator's
//! [`crate::ops::Operator::infer`]. A node whose inputs are all constant is evaluated
//! here by its operator's `eval` (in the values' own types, with the run-time typed
//! kernels), so shape arithmetic folds away and later passes see fixed `Reshape`
//! targets and weights.

use std::collections::HashMap;

use crate::dim::{SymbolRange, fixed_shape, fmt_dims};
use crate::error::Error;
use crate::ir::*;
use crate::ops::{FixedFact, InferCx, foldable};

/// The most elements one tensor may have (64 GiB of float32). Larger shapes only come
/// from malformed models or `--input` typos, and would overflow size arithmetic later.
pub const MAX_ELEMENTS: usize = 1 << 34;

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

/// An `If` whose condition is now constant: the error that asks compile to inline it.
fn constant_if(graph: &Graph, index: usize) -> Option<Error> {
    let node = &graph.nodes[index];
    let op = node.op.downcast::<crate::ops::control::If>()?;
    let cx = InferCx { graph, node };
    let then = op.branch(&cx).ok()?;
    Some(Error::InlineBranch {
        node_index: op.node_index,
        then,
    })
}

/// What inference does with a graph input's symbolic dim that `input_dims` leaves open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symbols {
    /// An error naming the input and the axis (compiling needs every dim fixed).
    Require,
    /// Inference carries the symbol through: shapes become expressions in it.
    Keep,
}

/// Runs inference over the whole graph. `input_dims` gives full shapes for graph inputs;
/// `symbols` says whether a dim left symbolic is an error; `extents` binds
/// data-dependent extents ([`Graph::extents`]) to values (a build's sampled point), and
/// the others are recorded in `graph.extents`.
pub fn infer(
    graph: &mut Graph,
    input_dims: &HashMap<String, Vec<Dim>>,
    ranges: &[SymbolRange],
    symbols: Symbols,
    unfolded: &std::collections::BTreeSet<String>,
    extents: &[(String, usize)],
) -> Result<(), Error> {
    for r in ranges {
        crate::dim::check_range(r).map_err(|m| Error::Options(format!("--dim {r}: {m}")))?;
        if ranges.iter().filter(|o| o.name == r.name).count() > 1 {
            return Err(Error::Options(format!("--dim {}: declared twice", r.name)));
        }
    }
    // Inference sees a symbol on a step as `step*quotient + rest`, so floors of it
    // simplify; the quotients' own ranges join the declared ones.
    let mut all_ranges = ranges.to_vec();
    all_ranges.extend(ranges.iter().filter_map(|r| r.quotient().map(|(q, _)| q)));
    let stepped: Vec<&SymbolRange> = ranges.iter().filter(|r| r.step > 1).collect();
    let declare = |d: &Dim| {
        stepped
            .iter()
            .fold(d.clone(), |d, r| d.subst(&r.name, &r.as_dim()))
    };
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
        let dims = resolve_input(&name, &input.dims, input_dims.get(&name), ranges, symbols)?;
        let dims: Vec<Dim> = dims.iter().map(declare).collect();
        if let Some(shape) = fixed_shape(&dims) {
            check_elements(&shape).map_err(|message| Error::Input {
                input: name.clone(),
                message,
            })?;
        }
        graph.value_mut(input.value).set_dims(dims);
    }
    for index in 0..graph.nodes.len() {
        if let Some(cond) = constant_if(graph, index) {
            return Err(cond);
        }
        infer_node(graph, index, &all_ranges, unfolded, extents).map_err(|message| {
            let node = &graph.nodes[index];
            Error::Node {
                node: node.name.clone(),
                op: node.op.name().into(),
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
    given: Option<&Vec<Dim>>,
    ranges: &[SymbolRange],
    symbols: Symbols,
) -> Result<Vec<Dim>, Error> {
    let err = |message| Error::Input {
        input: name.to_owned(),
        message,
    };
    let dims = match given {
        Some(given) => {
            if given.len() != dims.len() && !dims.is_empty() {
                return Err(err(format!(
                    "the model declares rank {} ({}), --input gave rank {}",
                    dims.len(),
                    fmt_dims(dims),
                    given.len()
                )));
            }
            for (i, (d, g)) in dims.iter().zip(given).enumerate() {
                if let Some(f) = d.known()
                    && !g.is(f)
                {
                    return Err(err(format!(
                        "dim {i} is fixed to {f} by the model, --input gave {g}"
                    )));
                }
            }
            if let Some(shape) = fixed_shape(given) {
                check_elements(&shape).map_err(err)?;
            }
            given.clone()
        }
        None => dims.to_vec(),
    };
    for (i, d) in dims.iter().enumerate() {
        if d.is_known() {
            continue;
        }
        let declared = |s: &str| ranges.iter().any(|r| &*r.name == s);
        let undeclared: Vec<String> = d
            .symbols()
            .iter()
            .filter(|s| !declared(s))
            .map(|s| s.to_string())
            .collect();
        match symbols {
            Symbols::Keep => {}
            Symbols::Require if undeclared.is_empty() => {
                return Err(err(format!(
                    "dim {i} is `{d}`, declared with --dim, but Kiln cannot yet generate \
                     code for dims that vary at run time; fix it with --input {name}=DIMS \
                     (for example {})",
                    example_dims(&dims, ranges)
                )));
            }
            Symbols::Require => {
                return Err(err(format!(
                    "dim {i} is symbolic (`{d}`) in {}; give it with --input {name}=DIMS (for example {})",
                    fmt_dims(&dims),
                    example_dims(&dims, ranges)
                )));
            }
        }
    }
    Ok(dims)
}

/// `1x3x224x224` for a message: known dims as they are, a declared symbol at the
/// smallest value of its range, anything else 1.
fn example_dims(dims: &[Dim], ranges: &[SymbolRange]) -> String {
    let at_min = |s: &str| ranges.iter().find(|r| &*r.name == s).map(|r| r.min as i64);
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d.to_usize() {
            Some(f) => f.to_string(),
            None => d.eval(&at_min).unwrap_or(1).to_string(),
        })
        .collect();
    parts.join("x")
}

type R<T> = Result<T, String>;

/// The data-dependent extent a node's facts introduce: substituted where `extents`
/// binds it (or where its bound is 0), else returned to be recorded.
fn bind_extent(
    outs: &mut [crate::ops::Fact],
    extents: &[(String, usize)],
    node: &Node,
) -> Option<crate::ir::Extent> {
    let (symbol, bound) = outs.iter_mut().find_map(|o| o.extent.take())?;
    let name = symbol.symbols().into_iter().next()?.to_string();
    let value = extents
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, v)| v)
        .or_else(|| bound.is(0).then_some(0));
    match value {
        Some(v) => {
            let by = Dim::from(v);
            for o in outs.iter_mut() {
                for d in o.shape.iter_mut().chain(o.sym.iter_mut().flatten()) {
                    *d = d.subst(&name, &by);
                }
            }
            None
        }
        None => Some(crate::ir::Extent {
            symbol: name,
            bound,
            node: node.name.clone(),
            op: node.op.name(),
        }),
    }
}

fn infer_node(
    graph: &mut Graph,
    index: usize,
    ranges: &[SymbolRange],
    unfolded: &std::collections::BTreeSet<String>,
    extents: &[(String, usize)],
) -> R<()> {
    let node = &graph.nodes[index];
    for (i, v) in node.inputs.iter().enumerate() {
        if let Some(v) = v
            && graph.value(*v).dims.is_none()
        {
            return Err(format!(
                "input {i} (`{}`) has no known shape",
                graph.value(*v).name
            ));
        }
    }
    let cx = InferCx { graph, node };
    let mut outs = node.op.infer(&cx)?;
    if !ranges.is_empty() {
        for o in &mut outs {
            for d in o.shape.iter_mut().chain(o.sym.iter_mut().flatten()) {
                *d = d.simplify(ranges);
            }
        }
    }
    let extent = bind_extent(&mut outs, extents, node);
    // Sizes are checked where they are known (symbolic ones at their range's bounds,
    // by the dynamic-shapes planner).
    let fixed: Option<Vec<FixedFact>> = outs
        .iter()
        .map(|o| {
            Some(FixedFact {
                dtype: o.dtype,
                shape: fixed_shape(&o.shape)?,
            })
        })
        .collect();
    for (out, id) in outs.iter().zip(&node.outputs) {
        if let Some(shape) = fixed_shape(&out.shape) {
            check_elements(&shape)
                .map_err(|m| format!("output `{}`: {m}", graph.value(*id).name))?;
        }
    }
    // Fold: every input constant and every result small enough to compute now.
    let all_const = node
        .inputs
        .iter()
        .flatten()
        .all(|&v| graph.value(v).constant.is_some());
    let run_time = node
        .outputs
        .iter()
        .any(|&v| unfolded.contains(&graph.value(v).name));
    if run_time {
        // Rules that know their value from shapes alone (Range, the views of a
        // constant) give it too: left to run time, it is computed there.
        for o in &mut outs {
            o.constant = None;
        }
    }
    if all_const
        && !run_time
        && outs.iter().any(|o| o.constant.is_none())
        && let Some(fixed) = fixed
        && fixed.iter().all(|o| foldable(&o.shape))
        && let Some(values) = node.op.eval(&cx, &fixed)?
    {
        for ((o, f), t) in outs.iter_mut().zip(&fixed).zip(values) {
            if t.shape != f.shape || t.dtype != o.dtype {
                return Err(format!(
                    "constant evaluation gave {} {:?}, inference {} {:?} (a Kiln bug)",
                    t.dtype, t.shape, o.dtype, f.shape
                ));
            }
            o.constant = Some(t);
        }
    }
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
    graph.extents.extend(extent);
    let outputs = graph.nodes[index].outputs.clone();
    for (out, id) in outs.into_iter().zip(outputs) {
        let v = graph.value_mut(id);
        v.dtype = out.dtype;
        v.set_dims(out.shape);
        v.sym = if out.constant.is_some() {
            None
        } else {
            out.sym
        };
        v.constant = out.constant;
    }
    Ok(())
}
