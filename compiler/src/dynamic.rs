//! Dynamic shapes, planning: one memory plan for every shape in the declared ranges.
//!
//! Shape inference runs once with the symbols kept (each value's dims are expressions
//! in them) and once with every symbol at the largest value of its range, where the
//! usual pipeline lowers the model to a [`Program`]. Each of that program's buffers is
//! then sized as an expression: its ONNX value's element count in the symbols, in the
//! planner's units; a buffer whose expression does not give its size at the largest
//! point (kernel scratch, a buffer no value names) keeps that size at every point,
//! which is never too small as long as the kernel's need grows with the shape (it does
//! for every kernel Kiln has). [`crate::plan::dynamic`] packs them once.
//!
//! What is still to come: code generation over these offsets (`run` reading the dims
//! from its inputs and passing them to the kernels). [`plan_over_ranges`] is what
//! `kiln plan --dim` reports today.

use std::collections::HashMap;

use crate::compile::{Compiled, Options, compile_bytes};
use crate::dim::{self, Dim, SymbolRange};
use crate::error::Error;
use crate::ir::Graph;
use crate::lower::{Kernel, Operand, Program};
use crate::plan::BufferRequest;
use crate::plan::dynamic::{DynamicInput, DynamicPlan, EvaluatedPlan, plan_dynamic};

/// A model planned over its declared ranges.
pub struct RangePlan {
    /// The ranges as declared (`--dim`).
    pub declared: Vec<SymbolRange>,
    /// Those and the quotient symbols of the stepped ones ([`SymbolRange::quotient`]).
    pub ranges: Vec<SymbolRange>,
    /// The build at the largest point (every symbol at its range's largest value).
    pub at_max: Compiled,
    pub input: DynamicInput,
    pub plan: DynamicPlan,
    /// Buffers whose size could not be written in the symbols and is held at its
    /// largest-point size (scratch included).
    pub held: usize,
}

impl RangePlan {
    /// The plan at `values` (`[("W", 320)]`): every declared symbol needs a value of
    /// its range.
    pub fn at(&self, values: &[(&str, i64)]) -> Result<EvaluatedPlan, Error> {
        for r in &self.declared {
            match values.iter().find(|(n, _)| *n == &*r.name) {
                None => return Err(Error::Options(format!("--at: no value for `{}`", r.name))),
                Some(&(_, v)) if !u64::try_from(v).is_ok_and(|v| r.admits(v)) => {
                    return Err(Error::Options(format!(
                        "--at: {}={v} is not a value of --dim {r}",
                        r.name
                    )));
                }
                Some(_) => {}
            }
        }
        let bind = dim::bind(&self.ranges, values);
        self.plan
            .eval(&bind)
            .map_err(|e| Error::Options(format!("--at: {e}")))
    }
}

/// Plans the model in `bytes` once for every shape `opts.symbol_ranges` allows.
pub fn plan_over_ranges(bytes: &[u8], source: &str, opts: &Options) -> Result<RangePlan, Error> {
    let symbolic = crate::compile::infer_shapes(bytes, opts)?;
    let mut ranges = opts.symbol_ranges.clone();
    ranges.extend(
        opts.symbol_ranges
            .iter()
            .filter_map(|r| r.quotient().map(|(q, _)| q)),
    );
    let largest: Vec<(&str, i64)> = opts
        .symbol_ranges
        .iter()
        .map(|r| (&*r.name, r.largest() as i64))
        .collect();
    let bind = dim::bind(&ranges, &largest);
    // The graph inputs at the largest point, for the fixed build.
    let mut fixed = opts.clone();
    fixed.symbol_ranges.clear();
    fixed.input_dims = Vec::new();
    for i in &symbolic.inputs {
        let v = symbolic.value(i.value);
        let dims = v
            .dims()
            .iter()
            .map(|d| {
                d.eval(&bind)
                    .map(|x| Dim::from(x.max(0) as usize))
                    .ok_or_else(|| Error::Input {
                        input: v.name.clone(),
                        message: format!(
                            "dim `{d}` uses a symbol without a range; declare it with --dim"
                        ),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        fixed.input_dims.push((v.name.clone(), dims));
    }
    let at_max = compile_bytes(bytes, source, "model", &fixed)?;
    let (input, held) = sized_input(&at_max, &symbolic, &ranges, &bind);
    let plan = plan_dynamic(&input).map_err(|e| Error::Options(e.to_string()))?;
    drop(bind);
    Ok(RangePlan {
        declared: opts.symbol_ranges.clone(),
        ranges,
        at_max,
        input,
        plan,
        held,
    })
}

/// The static plan input of `compiled` with each buffer's size (and each Concat
/// slice's place) as an expression in the symbols where one is known; the count of
/// buffers held at their largest-point size.
fn sized_input(
    compiled: &Compiled,
    symbolic: &Graph,
    ranges: &[SymbolRange],
    largest: &dyn Fn(&str) -> Option<i64>,
) -> (DynamicInput, usize) {
    let program = &compiled.program;
    let by_name: HashMap<&str, &[Dim]> = symbolic
        .values
        .iter()
        .filter(|v| v.dims.is_some())
        .map(|v| (v.name.as_str(), v.dims()))
        .collect();
    let mut held = 0;
    let sizes: Vec<Dim> = program
        .buffers
        .iter()
        .map(|b| {
            let fixed = Dim::from(b.len * 4);
            let symbolic = by_name
                .get(b.name.as_str())
                .filter(|_| !b.scratch)
                .map(|dims| {
                    let elems: Dim = dims.iter().product();
                    (elems * b.dtype.size()).div_ceil(4) * 4
                });
            // Only an expression that gives the buffer's size at the largest point.
            match symbolic {
                Some(s) if s.eval(largest) == Some(b.len as i64 * 4) => s,
                _ => {
                    held += usize::from(!fixed.is(0));
                    fixed
                }
            }
        })
        .collect();
    let deltas = slice_deltas(program, &compiled.plan_input.buffers, &sizes, symbolic);
    let mut input = DynamicInput::new(compiled.plan_input.steps, ranges.to_vec());
    input.input.alignment = compiled.plan_input.alignment;
    input.input.step_names = compiled.plan_input.step_names.clone();
    for (i, req) in compiled.plan_input.buffers.iter().enumerate() {
        let req = BufferRequest {
            overlap_of: None,
            ..req.clone()
        };
        match (req.slice_of, &deltas[i]) {
            (Some((parent, _)), Some(delta)) => {
                input.push_slice(req, sizes[i].clone(), parent, delta.clone());
            }
            _ => {
                input.push(
                    BufferRequest {
                        slice_of: None,
                        ..req
                    },
                    sizes[i].clone(),
                );
            }
        }
    }
    (input, held)
}

/// Per buffer placed as a Concat slice: its byte offset in the Concat's output as an
/// expression (the sizes of the Concat's operands before it), where all are known.
fn slice_deltas(
    program: &Program,
    requests: &[BufferRequest],
    sizes: &[Dim],
    symbolic: &Graph,
) -> Vec<Option<Dim>> {
    let mut deltas = vec![None; requests.len()];
    let input_bytes = |i: usize| -> Option<Dim> {
        let io = program.inputs.get(i)?;
        let v = symbolic.values.iter().find(|v| v.name == io.name)?;
        let elems: Dim = v.dims().iter().product();
        Some((elems * io.dtype.size()).div_ceil(4) * 4)
    };
    for s in &program.steps {
        if !matches!(&s.kernel, Kernel::Concat(p) if p.outer == 1) {
            continue;
        }
        let mut at = Some(Dim::from(0usize));
        for op in &s.inputs {
            if let (Operand::Buffer(b), Some(a)) = (op, &at)
                && requests
                    .get(b.index())
                    .and_then(|r| r.slice_of)
                    .is_some_and(|(p, _)| p == s.output)
            {
                deltas[b.index()] = Some(a.clone());
            }
            let len = match *op {
                Operand::Buffer(b) => sizes.get(b.index()).cloned(),
                Operand::Input(i) => input_bytes(i),
                Operand::Weight { len, .. } => Some(Dim::from(len * 4)),
            };
            at = at.zip(len).map(|(a, l)| a + l);
        }
    }
    deltas
}
