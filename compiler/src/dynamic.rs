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
//! [`compile_over_ranges`] then builds one module for every shape: the model is also
//! lowered at a few other points of the ranges, each step's code emitted at every
//! point and merged ([`crate::codegen::fit`]), so that kernel parameters become
//! expressions in the symbols; [`plan_over_ranges`] alone is what `kiln plan --dim`
//! reports.

mod opt;

use std::collections::HashMap;

pub use opt::OptBuild;

use crate::codegen::dynamic::{DeclaredSymbol, DynamicModule};
use crate::codegen::fit::Fitter;
use crate::compile::{Compiled, Options, Target, codegen_options, compile_fixed, lower_program};
use crate::dim::{self, Dim, SymbolRange};
use crate::error::Error;
use crate::ir::{Extent, Graph};
use crate::lower::{Kernel, Operand, Program};
use crate::plan::BufferRequest;
use crate::plan::dynamic::{DynamicInput, DynamicPlan, EvaluatedPlan, plan_dynamic};

/// A model planned over its declared ranges.
pub struct RangePlan {
    /// The ranges as declared (`--dim`).
    pub declared: Vec<SymbolRange>,
    /// Those, the quotient symbols of the stepped ones ([`SymbolRange::quotient`]) and
    /// the data-dependent extents' (`0..=` their bound at the largest point, at least
    /// [`EXTENT_RANGE_MIN_TOP`]).
    pub ranges: Vec<SymbolRange>,
    /// The data-dependent extents ([`crate::ir::Graph::extents`]), in node order.
    pub extents: Vec<Extent>,
    /// The build at the largest point (every symbol at its range's largest value).
    pub at_max: Compiled,
    /// The model inferred with the symbols kept.
    pub symbolic: Graph,
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
        let values = with_extents(&self.ranges, &self.extents, values);
        let values: Vec<(&str, i64)> = values.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let bind = dim::bind(&self.ranges, &values);
        self.plan
            .eval(&bind)
            .map_err(|e| Error::Options(format!("--at: {e}")))
    }
}

/// The top of a data-dependent extent's range is at least this: the model is lowered
/// at two values of it from 2 on (where no axis is a unit axis lowering drops), so the
/// code fitted to them also serves 0 and 1. A tensor's bound of 1 then reserves 4.
pub const EXTENT_RANGE_MIN_TOP: u64 = 4;

/// `values` (the declared symbols) and each extent at its bound there: where the run
/// starts (each extent's buffers sized for its largest value), before the nodes bind
/// them.
fn with_extents(
    ranges: &[SymbolRange],
    extents: &[Extent],
    values: &[(&str, i64)],
) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = values.iter().map(|&(n, v)| (n.to_owned(), v)).collect();
    for e in extents {
        let refs: Vec<(&str, i64)> = out.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let v = e.bound.eval(&dim::bind(ranges, &refs)).unwrap_or(0).max(0);
        out.push((e.symbol.clone(), v));
    }
    out
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
    let extents = symbolic.extents.clone();
    ranges.extend(extent_ranges(&ranges, &extents)?);
    let largest: Vec<(&str, i64)> = opts
        .symbol_ranges
        .iter()
        .chain(&ranges[ranges.len() - extents.len()..])
        .map(|r| (&*r.name, r.largest() as i64))
        .collect();
    let bind = dim::bind(&ranges, &largest);
    let fixed = fixed_options(opts, &symbolic, &bind)?;
    let at_max = compile_fixed(bytes, source, "model", &fixed, false)?;
    let (input, held) = sized_input(&at_max, &symbolic, &ranges, &bind);
    let plan = plan_dynamic(&input).map_err(|e| Error::Options(e.to_string()))?;
    drop(bind);
    Ok(RangePlan {
        declared: opts.symbol_ranges.clone(),
        ranges,
        extents,
        at_max,
        symbolic,
        input,
        plan,
        held,
    })
}

/// Each extent's range: `0..=` its bound's largest value over `ranges` (and the
/// extents before it), at least [`EXTENT_RANGE_MIN_TOP`].
fn extent_ranges(ranges: &[SymbolRange], extents: &[Extent]) -> Result<Vec<SymbolRange>, Error> {
    let mut all = ranges.to_vec();
    for e in extents {
        let top = e
            .bound
            .upper_bound(&all)
            .and_then(|t| u64::try_from(t).ok())
            .ok_or_else(|| Error::Dynamic {
                node: e.node.clone(),
                op: e.op.into(),
                message: format!(
                    "the data decides its output extent `{}`, and Kiln finds no upper bound of it \
                     (`{}`) over the declared ranges",
                    e.symbol, e.bound
                ),
            })?;
        all.push(SymbolRange::new(
            &e.symbol,
            0,
            top.max(EXTENT_RANGE_MIN_TOP),
        ));
    }
    Ok(all.split_off(ranges.len()))
}

/// `opts` with every graph input's dims fixed at the point `bind` gives and no ranges.
fn fixed_options(
    opts: &Options,
    symbolic: &Graph,
    bind: &dyn Fn(&str) -> Option<i64>,
) -> Result<Options, Error> {
    let mut fixed = opts.clone();
    fixed.symbol_ranges.clear();
    fixed.input_dims = Vec::new();
    for i in &symbolic.inputs {
        let v = symbolic.value(i.value);
        let dims = v
            .dims()
            .iter()
            .map(|d| {
                d.eval(bind)
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
    fixed.extents = symbolic
        .extents
        .iter()
        .map(|e| {
            (
                e.symbol.clone(),
                bind(&e.symbol).unwrap_or(0).max(0) as usize,
            )
        })
        .collect();
    Ok(fixed)
}

/// Compiles the model in `bytes` into one module named `name` that runs every shape
/// `opts.symbol_ranges` allows (the CPU target).
pub fn compile_over_ranges(
    bytes: &[u8],
    source: &str,
    name: &str,
    opts: &Options,
) -> Result<Compiled, Error> {
    if opts.target != Target::Cpu {
        let symbolic = crate::compile::infer_shapes(bytes, opts)?;
        return Err(match symbolic.extents.first() {
            Some(e) => Error::Dynamic {
                node: e.node.clone(),
                op: e.op.into(),
                message: format!(
                    "its output extent `{}` depends on the data, and such models build for the \
                     CPU target only, for now",
                    e.symbol
                ),
            },
            None => Error::Options(
                "dims declared with --dim build for the CPU target only, for now; fix every dim \
                 with --input for --target cuda"
                    .into(),
            ),
        });
    }
    let mut named = opts.clone();
    named.name = Some(name.to_owned());
    named.over_ranges = true;
    let mut rp = plan_over_ranges(bytes, source, &named)?;
    // The extents only the data decides (the last ranges) are sampled like declared
    // symbols.
    let sampled: Vec<SymbolRange> = opts
        .symbol_ranges
        .iter()
        .chain(&rp.ranges[rp.ranges.len() - rp.extents.len()..])
        .cloned()
        .collect();
    let points = sample_points(&sampled, opts.symbol_ranges.len());
    // A constant folded from the dims (an index table built with Range) would be a
    // weight right for one shape only: each such weight, and what it is computed from,
    // is left to run time and the model planned again.
    let programs = loop {
        let at_max = &rp.at_max.program;
        let mut programs = Vec::with_capacity(points.len());
        let mut again = false;
        for pt in points.iter().skip(1) {
            let bind = dim::bind(&rp.ranges, pt);
            let fixed = fixed_options(&named, &rp.symbolic, &bind)?;
            let program = lower_program(bytes, &fixed).map_err(|e| at_point(pt, e))?;
            if let Some(weight) = differing_weight(at_max, &program) {
                let before = named.unfolded.len();
                named
                    .unfolded
                    .extend(computed_from_dims(&rp.symbolic, &weight));
                if named.unfolded.len() > before {
                    again = true;
                    break;
                }
            }
            programs.push(in_order_of(at_max, program, pt)?);
        }
        if !again {
            break programs;
        }
        rp = plan_over_ranges(bytes, source, &named)?;
    };
    let opt = opt::build(bytes, source, &named, &mut rp)?;
    let binds: Vec<_> = points.iter().map(|pt| dim::bind(&rp.ranges, pt)).collect();
    let at_max = &rp.at_max.program;
    let mut plans = Vec::with_capacity(points.len());
    let mut plan_input_at_max = None;
    for (pt, bind) in points.iter().zip(&binds) {
        let (input, plan) = rp
            .plan
            .at(&rp.input, bind)
            .map_err(|e| Error::Options(format!("at {}: {e}", show(pt))))?;
        plan_input_at_max.get_or_insert(input);
        plans.push(plan);
    }
    let fitter = Fitter::new(candidates(&rp), |d| {
        binds.iter().map(|b| d.eval(b)).collect()
    });
    let by_name: HashMap<&str, &[Dim]> = rp
        .symbolic
        .values
        .iter()
        .filter(|v| v.dims.is_some())
        .map(|v| (v.name.as_str(), v.dims()))
        .collect();
    let dims_of = |name: &str| -> Result<Vec<Dim>, Error> {
        by_name
            .get(name)
            .map(|d| d.to_vec())
            .ok_or_else(|| Error::Input {
                input: name.to_owned(),
                message: "has no symbolic shape".into(),
            })
    };
    let input_dims = at_max
        .inputs
        .iter()
        .map(|io| dims_of(&io.name))
        .collect::<Result<Vec<_>, _>>()?;
    let output_dims = at_max
        .outputs
        .iter()
        .map(|(io, _)| dims_of(&io.name))
        .collect::<Result<Vec<_>, _>>()?;
    let declared = declared_symbols(&rp, &input_dims, at_max)?;
    let (weights_file, cg) = codegen_options(name, &at_max.weights, source, opts)?;
    let module = DynamicModule {
        points: std::iter::once(at_max)
            .chain(&programs)
            .zip(plans.iter().cloned())
            .collect(),
        fitter: &fitter,
        plan: &rp.plan,
        declared,
        ranges: &rp.ranges,
        extents: &rp.extents,
        input_dims,
        output_dims,
        opt: opt.as_ref(),
    };
    let code = crate::codegen::dynamic::emit(&module, &cg)?;
    drop(module);
    let plan = plans.swap_remove(0);
    let plan_input = plan_input_at_max
        .ok_or_else(|| Error::Codegen("no point of the ranges was planned".into()))?;
    let at_max = rp.at_max;
    Ok(Compiled {
        name: name.to_owned(),
        code,
        weights: at_max.weights,
        weights_file,
        program: at_max.program,
        plan_input,
        plan,
        schedule: at_max.schedule,
        shapes_vary: true,
    })
}

/// The points the model is lowered at: every symbol at its largest value first, then
/// each symbol at its smallest and at a few values between (the others at their
/// largest), then all at their smallest and all in the middle. Only values of the
/// ranges (on their steps).
/// `declared[n_declared..]` are data-dependent extents: sampled from 2 on.
fn sample_points(declared: &[SymbolRange], n_declared: usize) -> Vec<Vec<(&str, i64)>> {
    // A dim of 1 is where lowering simplifies (a broadcast drops the axis, a copy
    // merges it), so the code for the other values would not merge with it. A range's
    // smallest value is where a dim reaches 1 (N=1; W/32 at W=32 after five stride-2
    // layers), so the points start at its second value where the range has three: the
    // code made for them serves the smallest too (kernels take any extent, a stride
    // over a dim of 1 is never followed).
    let at = |r: &SymbolRange, frac: f64| -> i64 {
        let step = r.step.max(1);
        let is_extent = declared[n_declared..].iter().any(|e| e.name == r.name);
        let first = if is_extent {
            r.min + 2
        } else if r.largest() > r.min + step {
            r.min + step
        } else {
            r.min
        };
        let steps = (r.largest() - first) / step;
        (first + step * (steps as f64 * frac).round() as u64) as i64
    };
    let largest: Vec<(&str, i64)> = declared
        .iter()
        .map(|r| (&*r.name, r.largest() as i64))
        .collect();
    let mut points = vec![largest.clone()];
    for (k, r) in declared.iter().enumerate() {
        for frac in [0.0, 0.13, 0.37, 0.71] {
            let mut p = largest.clone();
            p[k].1 = at(r, frac);
            points.push(p);
        }
    }
    points.push(declared.iter().map(|r| (&*r.name, at(r, 0.0))).collect());
    points.push(declared.iter().map(|r| (&*r.name, at(r, 0.55))).collect());
    let mut seen = std::collections::HashSet::new();
    points.retain(|p| seen.insert(p.clone()));
    points
}

fn show(point: &[(&str, i64)]) -> String {
    let parts: Vec<String> = point.iter().map(|(n, v)| format!("{n}={v}")).collect();
    parts.join(", ")
}

fn at_point(point: &[(&str, i64)], e: Error) -> Error {
    Error::Dynamic {
        node: String::new(),
        op: "model".into(),
        message: format!("at {}, inside the declared ranges: {e}", show(point)),
    }
}

/// `program`'s steps in the order `reference` has them (the schedule chosen at the
/// largest point), after checking it lowered to the same steps, buffers and weights.
fn in_order_of(
    reference: &Program,
    mut program: Program,
    point: &[(&str, i64)],
) -> Result<Program, Error> {
    let differs = |what: String| Error::Dynamic {
        node: String::new(),
        op: "model".into(),
        message: format!(
            "at {} the model lowers differently than at the largest dims: {what}; Kiln cannot yet \
             build it once for every shape: narrow the ranges or fix the dims",
            show(point)
        ),
    };
    if program.steps.len() != reference.steps.len() {
        return Err(differs(format!(
            "{} steps against {}",
            program.steps.len(),
            reference.steps.len()
        )));
    }
    let names = |p: &Program| p.buffers.iter().map(|b| b.name.clone()).collect::<Vec<_>>();
    if names(&program) != names(reference) {
        return Err(differs("other buffers".into()));
    }
    if let Some(entry) = differing_weight(reference, &program) {
        return Err(differs(format!(
            "the constant `{entry}` (computed from the dims) has other values"
        )));
    }
    let position: HashMap<_, usize> = step_keys(&program.steps)
        .into_iter()
        .enumerate()
        .map(|(i, k)| (k, i))
        .collect();
    let mut steps: Vec<Option<crate::lower::Step>> = std::mem::take(&mut program.steps)
        .into_iter()
        .map(Some)
        .collect();
    let mut ordered = Vec::with_capacity(steps.len());
    for k in step_keys(&reference.steps) {
        let step = position
            .get(&k)
            .and_then(|&i| steps[i].take())
            .ok_or_else(|| differs(format!("no step for node `{}` ({})", k.0, k.1)))?;
        ordered.push(step);
    }
    program.steps = ordered;
    Ok(program)
}

/// Each step's node, operator, and how many steps of that node and operator come
/// before it and itself: what identifies a step across builds of one model.
fn step_keys(steps: &[crate::lower::Step]) -> Vec<(String, &'static str, usize)> {
    let mut seen: HashMap<(&str, &'static str), usize> = HashMap::new();
    steps
        .iter()
        .map(|s| {
            let k = seen.entry((&s.node, s.op_type)).or_insert(0);
            *k += 1;
            (s.node.clone(), s.op_type, *k)
        })
        .collect()
}

/// The first weight of `program` that differs from `reference`'s, by name.
fn differing_weight(reference: &Program, program: &Program) -> Option<String> {
    if program.weights == reference.weights {
        return None;
    }
    let bytes = |p: &Program, e: &crate::lower::WeightEntry| {
        p.weights
            .get(e.offset * 4..(e.offset + e.len) * 4)
            .map(<[u8]>::to_vec)
    };
    let differs = program
        .weight_entries
        .iter()
        .zip(&reference.weight_entries)
        .find(|(a, b)| a.name != b.name || bytes(program, a) != bytes(reference, b));
    Some(differs.map_or_else(
        || "(the weights' layout)".to_owned(),
        |(a, _)| a.name.clone(),
    ))
}

/// `name` and the values it is computed from whose shapes depend on the symbols
/// (walking up while they do; shape values, read at compile time, stay constants).
/// A table lowering derived for node `NODE` (`NODE:resize_idx`) names the node's
/// outputs instead: the node then builds it on each run ([`crate::ops::LowerCx::shapes_vary`]).
fn computed_from_dims(symbolic: &Graph, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![name.to_owned()];
    while let Some(n) = todo.pop() {
        let Some(id) = symbolic.values.iter().position(|v| v.name == n) else {
            let table_of = n.rsplit_once(':').map(|(node, _)| node);
            if let Some(node) = symbolic
                .nodes
                .iter()
                .find(|x| Some(x.name.as_str()) == table_of)
            {
                out.extend(node.outputs.iter().map(|&o| symbolic.value(o).name.clone()));
            }
            continue;
        };
        let v = &symbolic.values[id];
        let symbolic_dims = v.dims.is_some() && v.dims().iter().any(|d| !d.is_known());
        if !symbolic_dims || v.sym.is_some() || out.contains(&n) {
            continue;
        }
        out.push(n);
        if let Some(node) = symbolic
            .nodes
            .iter()
            .find(|node| node.outputs.iter().any(|o| o.index() == id))
        {
            todo.extend(
                node.inputs
                    .iter()
                    .flatten()
                    .map(|&i| symbolic.value(i).name.clone()),
            );
        }
    }
    out
}

/// The expressions a varying literal may be a multiple of: the product of any run of
/// consecutive dims of any value (sizes, strides, row counts), the symbols, every
/// buffer's size and every slice's offset (in bytes and in f32 units).
fn candidates(rp: &RangePlan) -> Vec<Dim> {
    let mut set = std::collections::HashSet::new();
    for v in rp.symbolic.values.iter().filter(|v| v.dims.is_some()) {
        let dims = v.dims();
        for i in 0..dims.len() {
            let mut p = Dim::from(1usize);
            for d in &dims[i..] {
                p = p * d.clone();
                set.insert(p.clone());
            }
        }
    }
    for r in &rp.ranges {
        set.insert(Dim::sym(&r.name));
        set.insert(r.as_dim());
    }
    // A run of dims times a symbol it is not next to (a stride over a batch).
    let runs: Vec<Dim> = set.iter().cloned().collect();
    let extents = rp.extents.iter().map(|e| Dim::sym(&e.symbol));
    for r in rp.declared.iter().map(SymbolRange::as_dim).chain(extents) {
        for c in &runs {
            set.insert(c.clone() * r.clone());
        }
    }
    let bytes = rp
        .input
        .sizes
        .iter()
        .chain(rp.input.slice_deltas.iter().flatten());
    for b in bytes {
        set.insert(b.clone());
        set.insert(b.div_floor(4));
    }
    let mut v: Vec<Dim> = set.into_iter().collect();
    // Deterministic: the fitter keeps the first of equally simple candidates.
    v.sort_by_cached_key(|d| d.to_string());
    v
}

/// Each declared symbol with the input axis it is read from: the first whose dim is
/// the symbol itself (or, on a step, `step*(W/step) + r`).
fn declared_symbols(
    rp: &RangePlan,
    input_dims: &[Vec<Dim>],
    program: &Program,
) -> Result<Vec<DeclaredSymbol>, Error> {
    rp.declared
        .iter()
        .map(|r| {
            let (plain, stepped) = (Dim::sym(&r.name), r.as_dim());
            input_dims
                .iter()
                .enumerate()
                .find_map(|(i, dims)| {
                    let axis = dims.iter().position(|d| *d == plain || *d == stepped)?;
                    Some(DeclaredSymbol {
                        range: r.clone(),
                        input: i,
                        axis,
                    })
                })
                .ok_or_else(|| {
                    let inputs: Vec<&str> =
                        program.inputs.iter().map(|io| io.name.as_str()).collect();
                    Error::Options(format!(
                        "--dim {r}: no input of the model ({}) has `{}` as a dim of its own, so \
                         its value cannot be read from the input shapes",
                        inputs.join(", "),
                        r.name
                    ))
                })
        })
        .collect()
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
    let mut deltas = slice_deltas(program, &compiled.plan_input.buffers, &sizes, symbolic);
    // A slice's place follows the extents before it, but offsets are laid out before
    // a node binds its extent: such a part is copied, not a slice.
    for d in &mut deltas {
        let binds_later = d.as_ref().is_some_and(|d| {
            d.symbols()
                .iter()
                .any(|s| symbolic.extents.iter().any(|e| *e.symbol == **s))
        });
        if binds_later {
            *d = None;
        }
    }
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
