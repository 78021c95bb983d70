//! The one entry point every front door (CLI, build.rs builder, `include_model!`)
//! goes through: load → infer → passes → lower → plan → emit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::codegen::{self, CodegenOptions, WeightsMode};
use crate::dim::{Dim, SymbolRange};
use crate::error::Error;
use crate::lower::{self, Kernel, Operand, Program, Step};
use crate::plan::{self, BufferId, BufferRequest, MemoryPlan, PlanInput, PlaneOrder};
use crate::schedule::{self, Schedule, ScheduleChoice};
use crate::tensor::Tensor;
use crate::{infer, load, passes};

/// The code generation target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Target {
    /// Straight-line calls into `kiln_runtime::kernels` (the default).
    #[default]
    Cpu,
    /// Straight-line CUDA kernel launches through `kiln_runtime::cuda` (a GPU at run
    /// time, with the runtime's `cuda` feature).
    Cuda,
}

impl Target {
    /// The name the CLI and `include_model!` use: `cpu` or `cuda`.
    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Cuda => "cuda",
        }
    }
}

impl std::str::FromStr for Target {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "cpu" => Ok(Target::Cpu),
            "cuda" => Ok(Target::Cuda),
            _ => Err(Error::Options(format!(
                "unknown target `{s}`; expected `cpu` or `cuda`"
            ))),
        }
    }
}

/// Everything a compile can be told.
#[derive(Debug, Clone)]
pub struct Options {
    /// Module name; file names are `NAME.rs` and `NAME.weights.bin`. Defaults to the
    /// model file's stem.
    pub name: Option<String>,
    /// Full shapes for graph inputs, required for inputs with symbolic dims. A dim may
    /// be a symbol (`[1, 3, 48, W]`) whose range `symbol_ranges` declares.
    pub input_dims: Vec<(String, Vec<Dim>)>,
    /// Declared ranges of symbols (`--dim W=32..2048:8`): the model's own `dim_param`
    /// names or those `input_dims` introduces. Inference uses them to simplify
    /// (`min(512, S)` is `S` for `S=1..512`; a step makes floors exact).
    pub symbol_ranges: Vec<SymbolRange>,
    /// One value for every declared symbol (`--opt W=320`): the module also carries a
    /// constant-shape build for these dims alone (its own plan, constants folded at
    /// them), which `run` takes when it is given exactly these dims.
    pub opt_dims: Vec<(String, u64)>,
    /// Arena offset alignment in bytes (a power of two, at most 256).
    pub alignment: usize,
    pub target: Target,
    /// Run 3×3 stride-1 convolutions with at least 64 input and 32 output channels as
    /// Winograd F(2×2, 3×3), or F(4×4, 3×3) on planes of at least 16 of its tiles, on
    /// the CPU target (default on): 2.25 or 4 times fewer multiply-adds, sums in
    /// another order (outputs differ from the direct sum by a few ulps of their terms,
    /// about 1e-5 of their scale with F(4×4)). Off, every convolution is a direct or
    /// im2col sum.
    pub winograd: bool,
    pub weights: WeightsMode,
    /// Path of the runtime crate in generated code.
    pub runtime_path: String,
    /// Where the generated code's `include_bytes!` finds the weights. `None` (the
    /// default): `NAME.weights.bin` beside the generated `.rs` file, as
    /// [`Compiled::write_to`] writes it. `Some(dir)` (an absolute directory): the file is
    /// `dir/NAME-HASH.weights.bin`, named by a hash of its content and included by
    /// absolute path. `include_model!` needs this: a macro expansion has no file beside
    /// it, and a content-addressed name lets parallel builds share one file and never
    /// overwrite a blob another build is reading. The caller writes the file
    /// ([`Compiled::weights`] to `dir.join(`[`Compiled::weights_file_name`]`())`).
    pub weights_dir: Option<PathBuf>,
    /// Graph inputs bound to values at compile time: they become constants (and fold
    /// with everything computed from them) and leave the generated `Inputs`. For inputs
    /// that set shapes (a Reshape target, Reduce axes, TopK's k) until dynamic shapes
    /// exist; the value's type and shape must match the model's declaration.
    pub constant_inputs: Vec<(String, Tensor)>,
    /// Values computed at run time even when their inputs are constants: a build over
    /// declared ranges ([`crate::dynamic`]) sets this for the values whose contents
    /// depend on the dims (MiniLM's position indices), which a weight could hold only
    /// for one shape.
    #[doc(hidden)]
    pub unfolded: std::collections::BTreeSet<String>,
    /// Data-dependent extents bound to values ([`crate::ir::Graph::extents`]): a build
    /// of a model with NonZero, Unique, ... sets them at each point it lowers the model.
    #[doc(hidden)]
    pub extents: Vec<(String, usize)>,
    /// Set by a build over declared ranges on the options of every point it lowers the
    /// model at: one set of weights must serve every shape, so lowering makes no choice
    /// of weights by shape (Winograd stays F(2×2, 3×3)).
    #[doc(hidden)]
    pub over_ranges: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            name: None,
            input_dims: Vec::new(),
            symbol_ranges: Vec::new(),
            opt_dims: Vec::new(),
            alignment: 256,
            target: Target::Cpu,
            winograd: true,
            weights: WeightsMode::Embed,
            runtime_path: "::kiln_runtime".into(),
            weights_dir: None,
            constant_inputs: Vec::new(),
            unfolded: Default::default(),
            extents: Vec::new(),
            over_ranges: false,
        }
    }
}

/// The result of a compile: the generated module, its weights, and the plan behind it.
#[derive(Debug)]
pub struct Compiled {
    pub name: String,
    /// Generated Rust source.
    pub code: String,
    /// The weights file's bytes (little-endian `f32`).
    pub weights: Vec<u8>,
    /// The weights file's name: `NAME.weights.bin`, or `NAME-HASH.weights.bin` with
    /// [`Options::weights_dir`].
    pub weights_file: String,
    pub program: Program,
    pub plan_input: PlanInput,
    pub plan: MemoryPlan,
    /// The step order `program` has: file order or memory-aware, and both arenas.
    pub schedule: ScheduleChoice,
    /// The module runs at shapes given at run time ([`crate::dynamic`]: declared
    /// ranges, or an extent the data decides): `run` takes dims, `run_bytes` shapes.
    pub shapes_vary: bool,
}

impl Compiled {
    pub fn code_file_name(&self) -> String {
        format!("{}.rs", self.name)
    }

    pub fn weights_file_name(&self) -> String {
        self.weights_file.clone()
    }

    /// Writes `NAME.rs` and `NAME.weights.bin` into `dir`, each only if its content
    /// changed (so cargo's fingerprints stay stable). Returns the `.rs` path.
    pub fn write_to(&self, dir: &Path) -> Result<PathBuf, Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_owned(),
            source,
        })?;
        let code = dir.join(self.code_file_name());
        write_if_changed(&code, self.code.as_bytes())?;
        write_if_changed(&dir.join(self.weights_file_name()), &self.weights)?;
        Ok(code)
    }

    /// The plan report as text (seed 000's report), with what lies outside the arena.
    pub fn report(&self) -> String {
        let mut r = plan::report::text_report(&self.plan_input, &self.plan);
        r.push_str(&format!("\n{}\n", self.schedule));
        r.push_str(&format!(
            "\nOutside the arena: weights {} B (read-only, shared by every context); the GEMM \
             crate's packing buffer, allocated once per thread on its first large product \
             (faer sizes it from the cache, about 2 x L3) and reused by every later call.\n",
            self.weights.len()
        ));
        r
    }

    /// The plan report as JSON ([`plan::json_report`]) with a `schedule` object: the
    /// order kept and the arena of each order planned.
    pub fn json_report(&self) -> serde_json::Value {
        let mut v = plan::json_report(&self.plan_input, &self.plan);
        v["schedule"] = serde_json::json!({
            "kept": self.schedule.kept.name(),
            "file_order_arena_bytes": self.schedule.file_order_arena,
            "memory_aware_arena_bytes": self.schedule.memory_aware_arena,
        });
        v
    }
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

/// Compiles the model at `path`.
pub fn compile(path: &Path, opts: &Options) -> Result<Compiled, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    let source = path
        .file_name()
        .map_or_else(|| stem.clone(), |f| f.to_string_lossy().into_owned());
    compile_bytes(&bytes, &source, &stem, opts).map_err(|e| match e {
        Error::Parse { message, .. } => Error::Parse {
            path: path.to_owned(),
            message,
        },
        e => e,
    })
}

/// Loads `model`, binds constant inputs and infers every value's type and dims; an `If`
/// whose condition turns out constant is replaced by its taken branch and the model
/// loaded again (nested `If`s one level per round).
fn load_and_infer(
    model: &mut onnx_protobuf::ModelProto,
    opts: &Options,
    symbols: infer::Symbols,
) -> Result<crate::ir::Graph, Error> {
    let dims: HashMap<String, Vec<Dim>> = opts
        .input_dims
        .iter()
        .filter(|(n, _)| !opts.constant_inputs.iter().any(|(b, _)| b == n))
        .cloned()
        .collect();
    loop {
        let mut graph = load::load_proto(model)?;
        bind_constant_inputs(&mut graph, &opts.constant_inputs)?;
        match infer::infer(
            &mut graph,
            &dims,
            &opts.symbol_ranges,
            symbols,
            &opts.unfolded,
            &opts.extents,
        ) {
            Ok(()) => return Ok(graph),
            Err(Error::InlineBranch { node_index, then }) => {
                load::inline_branch(model, node_index, then)?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Shape inference alone, with the dims `opts.input_dims` leaves open kept as symbols:
/// the loaded graph with every value's element type and dims (`[N, 1000]`).
pub fn infer_shapes(bytes: &[u8], opts: &Options) -> Result<crate::ir::Graph, Error> {
    let mut model = load::parse_model(bytes)?;
    load_and_infer(&mut model, opts, infer::Symbols::Keep)
}

/// Compiles a serialized model. `source` names it in comments; `default_name` is the
/// module name when `opts.name` is unset.
pub fn compile_bytes(
    bytes: &[u8],
    source: &str,
    default_name: &str,
    opts: &Options,
) -> Result<Compiled, Error> {
    if !opts.alignment.is_power_of_two()
        || opts.alignment < 4
        || opts.alignment > kiln_runtime::arena::ARENA_ALIGN
    {
        return Err(Error::Options(format!(
            "alignment must be a power of two between 4 and {}, got {}",
            kiln_runtime::arena::ARENA_ALIGN,
            opts.alignment
        )));
    }
    let name = opts
        .name
        .clone()
        .unwrap_or_else(|| sanitize_name(default_name));
    if name.is_empty()
        || name.starts_with(|c: char| c.is_ascii_digit())
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(Error::Options(format!(
            "name `{name}` must be a Rust identifier: letters, digits and `_`, not starting with a digit"
        )));
    }
    // Comments in generated code name the source: keep it on one line.
    let source: String = source
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    let source = source.as_str();
    if !opts.symbol_ranges.is_empty() {
        return crate::dynamic::compile_over_ranges(bytes, source, &name, opts);
    }
    if let Some((symbol, _)) = opts.opt_dims.first() {
        return Err(Error::Options(format!(
            "--opt {symbol}=..: --opt picks a point of the ranges --dim declares, and none is declared"
        )));
    }
    compile_fixed(bytes, source, &name, opts, true)
}

/// The pipeline with every dim fixed; `emit: false` stops before code generation (a
/// build over ranges plans its largest point this way and emits its own module).
/// A model with a data-dependent extent ([`crate::ir::Graph::extents`]) goes to
/// [`crate::dynamic::compile_over_ranges`]: its run binds the extent.
pub(crate) fn compile_fixed(
    bytes: &[u8],
    source: &str,
    name: &str,
    opts: &Options,
    emit: bool,
) -> Result<Compiled, Error> {
    let mut model = load::parse_model(bytes).map_err(|e| match e {
        Error::Parse { message, .. } => Error::Parse {
            path: source.into(),
            message,
        },
        e => e,
    })?;
    let mut graph = load_and_infer(&mut model, opts, infer::Symbols::Require)?;
    if !graph.extents.is_empty() {
        return crate::dynamic::compile_over_ranges(bytes, source, name, opts);
    }
    passes::run(&mut graph, lower_choices(opts))?;
    let mut program = lower::lower(&graph, &opts.unfolded, lower_choices(opts))?;
    if opts.target == Target::Cuda {
        check_cuda_kernels(&program, graph.opset)?;
        for_cuda(&mut program);
    }
    let (plan_input, plan, schedule) = schedule_and_plan(&mut program, |p| {
        let input = plan_input(p, opts.alignment);
        let plan = plan::plan(&input)?;
        Ok((input, plan))
    })?;
    let weights: Vec<u8> = program.weights.clone();
    let (weights_file, cg) = codegen_options(name, &weights, source, opts)?;
    let code = match (emit, opts.target) {
        (false, _) => String::new(),
        (true, Target::Cpu) => codegen::cpu::emit(&program, &plan, &cg)?,
        (true, Target::Cuda) => codegen::cuda::emit(&program, &plan, &cg)?,
    };
    Ok(Compiled {
        name: name.to_owned(),
        code,
        weights,
        weights_file,
        program,
        plan_input,
        plan,
        schedule,
        shapes_vary: false,
    })
}

/// The weights file's name and the emitters' settings for module `name`.
pub(crate) fn codegen_options(
    name: &str,
    weights: &[u8],
    source: &str,
    opts: &Options,
) -> Result<(String, CodegenOptions), Error> {
    let (weights_file, weights_include) = match &opts.weights_dir {
        None => {
            let file = format!("{name}.weights.bin");
            (file.clone(), file)
        }
        Some(dir) => {
            let file = format!("{name}-{:016x}.weights.bin", content_hash(weights));
            let path = dir.join(&file);
            if !path.is_absolute() {
                return Err(Error::Options(format!(
                    "weights directory {} must be an absolute path",
                    dir.display()
                )));
            }
            let include = path.to_str().map(str::to_owned).ok_or_else(|| {
                Error::Options(format!(
                    "weights directory {} is not valid UTF-8, so include_bytes! cannot name it",
                    dir.display()
                ))
            })?;
            (file, include)
        }
    };
    let cg = CodegenOptions {
        runtime_path: opts.runtime_path.clone(),
        weights: opts.weights,
        weights_file: weights_include,
        source: source.to_owned(),
        steps_per_fn: 128,
    };
    Ok((weights_file, cg))
}

/// Parses, infers, optimises and lowers a model with every dim fixed: the pipeline up
/// to planning, for builds that sample several shapes ([`crate::dynamic`]).
pub(crate) fn lower_program(bytes: &[u8], opts: &Options) -> Result<Program, Error> {
    let mut model = load::parse_model(bytes)?;
    let mut graph = load_and_infer(&mut model, opts, infer::Symbols::Require)?;
    passes::run(&mut graph, lower_choices(opts))?;
    lower::lower(&graph, &opts.unfolded, lower_choices(opts))
}

/// The kernels lowering may choose for `opts`' target.
fn lower_choices(opts: &Options) -> lower::Choices {
    lower::Choices {
        winograd: opts.winograd && opts.target == Target::Cpu,
        winograd_by_shape: !opts.over_ranges,
        packed_weights: opts.target == Target::Cpu,
        residual_adds: opts.target == Target::Cpu,
        max_pools: opts.target == Target::Cpu,
        channel_shuffles: opts.target == Target::Cpu,
    }
}

/// Turns the graph inputs named in `bound` into constants of the given values.
fn bind_constant_inputs(
    graph: &mut crate::ir::Graph,
    bound: &[(String, Tensor)],
) -> Result<(), Error> {
    for (name, t) in bound {
        let err = |message: String| Error::Input {
            input: name.clone(),
            message,
        };
        let pos = graph
            .inputs
            .iter()
            .position(|i| graph.value(i.value).name == *name)
            .ok_or_else(|| err("the model has no such input to bind to a constant".into()))?;
        let input = graph.inputs.remove(pos);
        let v = graph.value_mut(input.value);
        if v.dtype != t.dtype {
            return Err(err(format!(
                "is declared {}, the bound value is {}",
                v.dtype, t.dtype
            )));
        }
        let fits = input.dims.len() == t.shape.len()
            && input
                .dims
                .iter()
                .zip(&t.shape)
                .all(|(d, &s)| d.known().is_none_or(|f| f == s as i64));
        if !fits && !input.dims.is_empty() {
            return Err(err(format!(
                "the bound value has shape {:?}, which the declared dims do not allow",
                t.shape
            )));
        }
        v.set_dims(crate::dim::dims_of(&t.shape));
        v.constant = Some(t.clone());
    }
    Ok(())
}

/// Plans `program` in file order and, where it differs, in the memory-aware order
/// ([`schedule::memory_aware`]); leaves `program` in the memory-aware order only when
/// that arena is strictly smaller (a greedy order can also be worse).
fn schedule_and_plan(
    program: &mut Program,
    plan_of: impl Fn(&Program) -> Result<(PlanInput, MemoryPlan), Error>,
) -> Result<(PlanInput, MemoryPlan, ScheduleChoice), Error> {
    let (input, plan) = plan_of(program)?;
    let mut choice = ScheduleChoice {
        kept: Schedule::FileOrder,
        file_order_arena: plan.arena_bytes,
        memory_aware_arena: None,
    };
    let order = schedule::memory_aware(program);
    if order.iter().enumerate().all(|(k, &i)| k == i) {
        return Ok((input, plan, choice));
    }
    let file_steps = program.steps.clone();
    schedule::reorder(program, &order);
    let (aware_input, aware_plan) = plan_of(program)?;
    choice.memory_aware_arena = Some(aware_plan.arena_bytes);
    if aware_plan.arena_bytes < plan.arena_bytes {
        choice.kept = Schedule::MemoryAware;
        Ok((aware_input, aware_plan, choice))
    } else {
        program.steps = file_steps;
        Ok((input, plan, choice))
    }
}

/// Fails with one error listing every operator whose steps have no CUDA kernel (the
/// typed kernels are CPU-only for now).
fn check_cuda_kernels(program: &Program, opset: i64) -> Result<(), Error> {
    let mut missing: Vec<crate::UnsupportedOp> = Vec::new();
    for s in &program.steps {
        if !matches!(s.kernel, Kernel::Typed(_)) {
            continue;
        }
        match missing.iter_mut().find(|m| m.op_type == s.op_type) {
            Some(m) => {
                m.count += 1;
                if m.nodes.len() < 3 && !m.nodes.contains(&s.node) {
                    m.nodes.push(s.node.clone());
                }
            }
            None => missing.push(crate::UnsupportedOp {
                op_type: s.op_type.to_owned(),
                domain: String::new(),
                opset,
                count: 1,
                nodes: vec![s.node.clone()],
            }),
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::NoCudaKernel(missing))
    }
}

/// Adapts a lowered program to the CUDA kernels: they need no scratch (convolution is
/// an implicit GEMM), and they run all planes of a pooling at once, so no output may
/// overlap its input.
fn for_cuda(program: &mut Program) {
    for step in &mut program.steps {
        step.overlap = None;
    }
    drop_scratch(program);
}

/// Removes every step's kernel scratch buffer, renumbering the other buffers.
fn drop_scratch(program: &mut Program) {
    let mut map: Vec<Option<BufferId>> = Vec::with_capacity(program.buffers.len());
    let mut kept = 0;
    for b in &program.buffers {
        map.push((!b.scratch).then(|| {
            kept += 1;
            BufferId(kept - 1)
        }));
    }
    let new = |b: BufferId| map[b.index()].expect("a scratch buffer only as scratch");
    program.buffers.retain(|b| !b.scratch);
    for step in &mut program.steps {
        // Exhaustive, so a new buffer-bearing field cannot be missed here.
        let Step {
            node: _,
            op_type: _,
            kernel: _,
            inputs,
            output,
            extra_outputs,
            scratch,
            in_place: _, // positions in `inputs`, unchanged
            overlap: _,  // about operand 0 and the output, unchanged
        } = step;
        *output = new(*output);
        for b in extra_outputs {
            *b = new(*b);
        }
        *scratch = None;
        for op in inputs {
            if let Operand::Buffer(b) = op {
                *b = new(*b);
            }
        }
    }
    for (_, b) in &mut program.outputs {
        *b = new(*b);
    }
}

/// A 64-bit hash naming a content-addressed weights file: a multiply-xorshift over
/// 8-byte words with murmur3's finaliser. Written out here so a name does not change
/// with the toolchain (std's `DefaultHasher` may), and cheap enough for 100 MB in an
/// unoptimised proc macro. Not collision-resistant against an adversary; nothing
/// here needs that.
fn content_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |h: u64, w: u64| {
        let h = (h ^ w).wrapping_mul(K);
        h ^ (h >> 32)
    };
    let mut h = bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        h = mix(h, u64::from_le_bytes(w.try_into().expect("chunks of 8")));
    }
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    h = mix(h, u64::from_le_bytes(tail));
    // murmur3's fmix64: every input bit reaches every output bit.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The module name a compile of the model at `path` gets when `Options::name` is unset:
/// the file stem, made an identifier. `include_model!` names its error stub with it.
pub fn default_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    sanitize_name(&stem)
}

fn sanitize_name(s: &str) -> String {
    let s = if s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("m{s}")
    } else {
        s.to_owned()
    };
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The planner's view of a program: one request per buffer, with the steps that write
/// and read it. A buffer written again by a later step (in-place accumulation) counts
/// that step as a use. The step that first writes a buffer names the inputs it could
/// write it over ([`crate::lower::Step::in_place`]).
pub fn plan_input(program: &Program, alignment: usize) -> PlanInput {
    let mut input = PlanInput::new(program.steps.len());
    input.alignment = alignment;
    input.views = program.views.clone();
    input.step_names = program
        .steps
        .iter()
        .map(|s| format!("{} ({})", s.node, s.op_type))
        .collect();
    let mut def: Vec<Option<usize>> = vec![None; program.buffers.len()];
    let mut uses: Vec<Vec<usize>> = vec![Vec::new(); program.buffers.len()];
    let mut in_place_of: Vec<Vec<BufferId>> = vec![Vec::new(); program.buffers.len()];
    let mut slice_of: Vec<Option<(BufferId, usize)>> = vec![None; program.buffers.len()];
    let mut overlap_of: Vec<Option<(BufferId, PlaneOrder)>> = vec![None; program.buffers.len()];
    for (i, s) in program.steps.iter().enumerate() {
        for b in std::iter::once(s.output)
            .chain(s.extra_outputs.iter().copied())
            .chain(s.scratch)
        {
            match def[b.index()] {
                None => def[b.index()] = Some(i),
                Some(_) => uses[b.index()].push(i),
            }
        }
        if def[s.output.index()] == Some(i)
            && let (Some(order), Some(&Operand::Buffer(x))) = (s.overlap, s.inputs.first())
        {
            overlap_of[s.output.index()] = Some((x, order));
        }
        if def[s.output.index()] == Some(i) {
            in_place_of[s.output.index()] = s
                .in_place
                .iter()
                .filter_map(|&k| match s.inputs.get(k) {
                    Some(&Operand::Buffer(b)) => Some(b),
                    _ => None,
                })
                .collect();
        }
        for op in &s.inputs {
            if let Operand::Buffer(b) = op {
                uses[b.index()].push(i);
            }
        }
        // A Concat of contiguous parts (outer 1) copies each input unchanged to its
        // range of the output: the planner may place an input there instead. A later
        // Concat of the same input replaces the candidate (only the last reader can).
        if let Kernel::Concat(p) = &s.kernel
            && p.outer == 1
            && def[s.output.index()] == Some(i)
        {
            let mut at = 0;
            for op in &s.inputs {
                if let Operand::Buffer(b) = *op
                    && s.inputs.iter().filter(|&&o| o == *op).count() == 1
                    && !program.buffers[b.index()].scratch
                {
                    slice_of[b.index()] = Some((s.output, at * 4));
                }
                at += operand_len(program, op);
            }
        }
    }
    let outputs: Vec<_> = program.outputs.iter().map(|(_, b)| *b).collect();
    for (i, b) in program.buffers.iter().enumerate() {
        let d = def[i].unwrap_or(0);
        let size = b.len * 4;
        let req = if b.scratch {
            BufferRequest::scratch(b.name.clone(), size, d)
        } else if outputs.iter().any(|o| o.index() == i) {
            let mut r = BufferRequest::output(b.name.clone(), size, d);
            r.uses = std::mem::take(&mut uses[i]);
            r
        } else {
            BufferRequest::new(b.name.clone(), size, d, std::mem::take(&mut uses[i]))
        };
        input.push(BufferRequest {
            in_place_of: std::mem::take(&mut in_place_of[i]),
            slice_of: slice_of[i],
            overlap_of: overlap_of[i],
            ..req
        });
    }
    input
}

/// Elements of a step's operand.
fn operand_len(program: &Program, op: &Operand) -> usize {
    match *op {
        Operand::Input(i) => program.inputs[i].shape.iter().product(),
        Operand::Weight { len, .. } => len,
        Operand::Buffer(b) => program.buffers[b.index()].len,
    }
}

#[cfg(test)]
mod tests {
    use super::content_hash;

    /// The hash names weights files that builds share: it must be a pure function of the
    /// bytes (pinned here, so a change is deliberate) and see every byte and the length.
    #[test]
    fn content_hash_is_pinned_and_sees_every_byte() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let h = content_hash(&bytes);
        assert_eq!(h, 0x70bd_a0af_9ec0_70ea);
        for i in [0, 7, 8, 500, 998, 999] {
            let mut b = bytes.clone();
            b[i] ^= 1;
            assert_ne!(content_hash(&b), h, "flipping a bit of byte {i}");
        }
        assert_ne!(content_hash(&bytes[..999]), h);
        assert_ne!(content_hash(&[0; 8]), content_hash(&[0; 9]));
    }
}
