//! `--opt W=320`: beside the code for every shape in the ranges, a build for one point
//! of them with every shape fixed.
//!
//! That build is the ordinary fixed pipeline at the point: its own schedule and plan
//! (usually a smaller arena than the general layout there, since it need not hold for
//! other dims), its constants folded at those dims (Resize tables, position indices),
//! and constant kernel parameters. The module's `run` takes it when given exactly
//! these dims. Its weights go into the one blob the module already has: an entry whose
//! bytes the general build holds is shared, only the others are appended.

use std::collections::HashMap;

use super::{RangePlan, fixed_options, show, step_keys};
use crate::compile::{Options, compile_fixed};
use crate::dim;
use crate::error::Error;
use crate::lower::{Operand, Program, WeightEntry};
use crate::plan::MemoryPlan;

/// The constant-shape build at `--opt`'s dims.
pub struct OptBuild {
    /// Every declared symbol's value, in declaration order.
    pub point: Vec<(String, i64)>,
    /// Its weight operands address the general build's blob.
    pub program: Program,
    pub plan: MemoryPlan,
    /// For each of its steps, the general build's step its profile time is added to:
    /// the one of the same node, or the one before (a step only this build has).
    pub profile_slots: Vec<usize>,
}

/// The build at `opts.opt_dims`, if given, after checking it names one value of its
/// range for every declared symbol. Its weights the general build (`rp.at_max`) does
/// not hold are appended to that build's blob, the module's one blob.
pub(super) fn build(
    bytes: &[u8],
    source: &str,
    opts: &Options,
    rp: &mut RangePlan,
) -> Result<Option<OptBuild>, Error> {
    if opts.opt_dims.is_empty() {
        return Ok(None);
    }
    if let Some(e) = rp.extents.first() {
        return Err(Error::Dynamic {
            node: e.node.clone(),
            op: e.op.into(),
            message: format!(
                "--opt builds the model with every shape fixed, and the data decides its output \
                 extent `{}`",
                e.symbol
            ),
        });
    }
    let point = opt_point(&opts.opt_dims, &rp.declared)?;
    let refs: Vec<(&str, i64)> = point.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    let bind = dim::bind(&rp.ranges, &refs);
    let mut fixed = fixed_options(opts, &rp.symbolic, &bind)?;
    fixed.unfolded.clear();
    fixed.opt_dims.clear();
    let shown = show(&refs);
    drop(bind);
    drop(refs);
    let compiled =
        compile_fixed(bytes, source, "opt", &fixed, false).map_err(|e| Error::Dynamic {
            node: String::new(),
            op: "model".into(),
            message: format!("--opt {shown}: {e}"),
        })?;
    let general = &mut rp.at_max;
    let mut program = compiled.program;
    general.program.weights = share_weights(&general.program, &mut program);
    general.weights.clone_from(&general.program.weights);
    let profile_slots = profile_slots(&general.program, &program);
    Ok(Some(OptBuild {
        point,
        program,
        plan: compiled.plan,
        profile_slots,
    }))
}

/// `--opt`'s values in the order of the declared symbols, each checked against its
/// range and step.
fn opt_point(
    values: &[(String, u64)],
    declared: &[dim::SymbolRange],
) -> Result<Vec<(String, i64)>, Error> {
    let names: Vec<&str> = declared.iter().map(|r| &*r.name).collect();
    for (i, (name, _)) in values.iter().enumerate() {
        if !names.contains(&name.as_str()) {
            return Err(Error::Options(format!(
                "--opt {name}=..: `{name}` is not a symbol --dim declares (declared: {})",
                names.join(", ")
            )));
        }
        if values[..i].iter().any(|(n, _)| n == name) {
            return Err(Error::Options(format!(
                "--opt {name}=..: `{name}` is given twice"
            )));
        }
    }
    declared
        .iter()
        .map(|r| {
            let &(_, v) = values.iter().find(|(n, _)| *n == *r.name).ok_or_else(|| {
                Error::Options(format!(
                    "--opt needs a value for every declared symbol, and `{}` (--dim {r}) has none",
                    r.name
                ))
            })?;
            if !r.admits(v) {
                return Err(Error::Options(format!(
                    "--opt {}={v} is not a value of --dim {r}",
                    r.name
                )));
            }
            Ok((r.name.to_string(), v as i64))
        })
        .collect()
}

/// Points `program`'s weight operands into one blob: `general`'s weights, then those
/// of `program`'s entries whose bytes it does not hold (each once). Returns the blob.
fn share_weights(general: &Program, program: &mut Program) -> Vec<u8> {
    fn bytes_of<'a>(blob: &'a [u8], e: &WeightEntry) -> &'a [u8] {
        &blob[e.offset * 4..(e.offset + e.len) * 4]
    }
    let mut blob = general.weights.clone();
    let mut held: HashMap<&[u8], usize> = general
        .weight_entries
        .iter()
        .map(|e| (bytes_of(&general.weights, e), e.offset))
        .collect();
    let mut moved: HashMap<usize, usize> = HashMap::new();
    for e in &program.weight_entries {
        let at = *held
            .entry(bytes_of(&program.weights, e))
            .or_insert_with_key(|bytes| {
                let at = blob.len().next_multiple_of(crate::lower::WEIGHT_ALIGN);
                blob.resize(at, 0);
                blob.extend_from_slice(bytes);
                blob.resize(blob.len().next_multiple_of(8), 0);
                at / 4
            });
        moved.insert(e.offset, at);
    }
    drop(held);
    for e in &mut program.weight_entries {
        e.offset = moved[&e.offset];
    }
    for step in &mut program.steps {
        for op in &mut step.inputs {
            if let Operand::Weight { offset, .. } = op
                && let Some(&at) = moved.get(offset)
            {
                *offset = at;
            }
        }
    }
    program.weights = Vec::new();
    blob
}

/// For each step of `program`, the step of `general` with the same node and operator
/// (counting repeats), or the slot of the step before it when `general` has none.
fn profile_slots(general: &Program, program: &Program) -> Vec<usize> {
    let index: HashMap<_, usize> = step_keys(&general.steps)
        .into_iter()
        .enumerate()
        .map(|(i, k)| (k, i))
        .collect();
    let mut last = 0;
    step_keys(&program.steps)
        .iter()
        .map(|k| {
            last = index.get(k).copied().unwrap_or(last);
            last
        })
        .collect()
}
