//! `kiln`: compile ONNX models into Rust modules, inspect their memory plans, run them.

// Unsafe code lives only in kiln-runtime (each block with a `SAFETY:` comment).
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kiln_compiler::{Error, Options, Target, WeightsMode, compile, parse_input_spec};

#[derive(Parser)]
#[command(
    name = "kiln",
    version,
    about = "Ahead-of-time compiler from ONNX models to plain Rust with a static memory plan",
    long_about = "Kiln reads an ONNX model, infers every shape, plans all working memory into one \
                  arena at compile time, and writes a Rust module that runs the model with no \
                  interpreter and no allocation per inference."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile MODEL into DIR/NAME.rs and DIR/NAME.weights.bin.
    Compile {
        #[command(flatten)]
        model: ModelArgs,
        /// Directory to write the module and its weights into.
        #[arg(short, long = "out-dir", value_name = "DIR")]
        out_dir: PathBuf,
        /// Module name (file names); defaults to the model file's stem.
        #[arg(long)]
        name: Option<String>,
        /// Load weights from the weights file at run time instead of embedding them.
        #[arg(long)]
        weights_at_runtime: bool,
        /// Path of the runtime crate in the generated code.
        #[arg(long, default_value = "::kiln_runtime", value_name = "PATH")]
        runtime_path: String,
        /// What the generated module runs on: `cpu` (calls into kiln_runtime's kernels)
        /// or `cuda` (kernel launches on an NVIDIA GPU through kiln_runtime::cuda).
        #[arg(long, value_enum, default_value_t = TargetArg::Cpu, value_name = "TARGET")]
        target: TargetArg,
    },
    /// Print the memory plan: every tensor's offset and lifetime, naive size, liveness
    /// lower bound, arena size and saving.
    Plan {
        #[command(flatten)]
        model: ModelArgs,
        /// Print JSON instead of the text report.
        #[arg(long)]
        json: bool,
        /// Also draw the arena (steps across, byte offsets up) as an SVG picture.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// With `--dim`: also the arena at this point of the ranges, e.g. `--at W=320`
        /// (several symbols: `--at N=1,W=320`).
        #[arg(long, value_name = "SYM=VALUE,..")]
        at: Vec<String>,
    },
    /// Compile MODEL, build it with cargo (cached), run it on .npy inputs and print
    /// its outputs and latency.
    Run(kiln_compiler::runner::RunArgs),
}

/// `--target`, as clap lists it.
#[derive(Clone, Copy, ValueEnum)]
enum TargetArg {
    Cpu,
    Cuda,
}

impl From<TargetArg> for Target {
    fn from(t: TargetArg) -> Self {
        match t {
            TargetArg::Cpu => Target::Cpu,
            TargetArg::Cuda => Target::Cuda,
        }
    }
}

/// Options every subcommand that compiles takes.
#[derive(Args)]
struct ModelArgs {
    /// The ONNX model file.
    #[arg(value_name = "MODEL.onnx")]
    model: PathBuf,
    /// Shape of an input, e.g. `--input data=1x3x224x224` (needed for symbolic dims);
    /// a dim may be a symbol, `--input x=1x3x48xW`, with its range from `--dim`.
    #[arg(short, long = "input", value_name = "NAME=DIMS")]
    inputs: Vec<String>,
    /// Declare a symbol's range, e.g. `--dim W=32..2048` or `--dim W=32..2048:32` (a
    /// step): a symbol of the model (`dim_param`) or of `--input x=1x3x48xW`.
    #[arg(long = "dim", value_name = "SYM=MIN..MAX[:STEP]")]
    dims: Vec<String>,
    /// With `--dim`: also build the module for one point of the ranges with every
    /// shape fixed, e.g. `--opt W=320` (a value for each declared symbol); `run` takes
    /// that constant-shape path when given exactly those dims.
    #[arg(long = "opt", value_name = "SYM=VALUE")]
    opt: Vec<String>,
    /// Bind an input to a value at compile time, e.g. `--constant axes=axes.npy`: it
    /// becomes a constant and leaves the generated `Inputs` (for inputs that set shapes).
    #[arg(long = "constant", value_name = "NAME=FILE.npy")]
    constants: Vec<String>,
    /// Arena offset alignment in bytes.
    #[arg(long, default_value_t = 256, value_name = "BYTES")]
    alignment: usize,
    /// Compute every convolution as a direct or im2col sum: no Winograd F(2×2) or F(4×4)
    /// for 3×3 stride-1 layers (whose sums it reorders).
    #[arg(long)]
    no_winograd: bool,
}

impl ModelArgs {
    fn options(&self) -> Result<Options, Error> {
        Ok(Options {
            input_dims: self
                .inputs
                .iter()
                .map(|s| parse_input_spec(s))
                .collect::<Result<_, _>>()?,
            symbol_ranges: self
                .dims
                .iter()
                .map(|s| kiln_compiler::parse_dim_spec(s))
                .collect::<Result<_, _>>()?,
            opt_dims: self
                .opt
                .iter()
                .map(|s| kiln_compiler::parse_opt_spec(s))
                .collect::<Result<_, _>>()?,
            constant_inputs: self
                .constants
                .iter()
                .map(|s| kiln_compiler::parse_constant_spec(s))
                .collect::<Result<_, _>>()?,
            alignment: self.alignment,
            winograd: !self.no_winograd,
            ..Options::default()
        })
    }
}

/// `kiln plan --dim ..`: the one plan for every shape in the ranges, its arena at the
/// largest point and at each `--at` point.
fn plan_over_ranges(
    model: &ModelArgs,
    json: bool,
    at: &[String],
) -> Result<(), Box<dyn std::error::Error>> {
    let bytes = std::fs::read(&model.model)
        .map_err(|e| format!("cannot read {}: {e}", model.model.display()))?;
    let source = model.model.display().to_string();
    let rp = kiln_compiler::dynamic::plan_over_ranges(&bytes, &source, &model.options()?)?;
    let mut points = Vec::new();
    for spec in at {
        let mut values = Vec::new();
        for part in spec.split(',') {
            let (name, v) = part
                .split_once('=')
                .and_then(|(n, v)| Some((n.trim().to_owned(), v.trim().parse::<i64>().ok()?)))
                .ok_or_else(|| format!("--at `{spec}` should look like W=320 or N=1,W=320"))?;
            values.push((name, v));
        }
        let refs: Vec<(&str, i64)> = values.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let evaluated = rp.at(&refs)?;
        points.push((spec.clone(), evaluated.arena_bytes));
    }
    let max = rp.plan.arena_bytes_max;
    let fixed = rp.at_max.plan.arena_bytes;
    let ranges: Vec<String> = rp.declared.iter().map(|r| r.to_string()).collect();
    if json {
        let v = serde_json::json!({
            "ranges": ranges,
            "arena_bytes_max": max,
            "static_arena_bytes_at_max": fixed,
            "buffers": rp.plan.buffers.len(),
            "buffers_held_at_max": rp.held,
            "arena_bytes_at": points
                .iter()
                .map(|(p, b)| serde_json::json!({ "at": p, "arena_bytes": b }))
                .collect::<Vec<_>>(),
        });
        emit(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
        return Ok(());
    }
    let human = kiln_compiler::plan::report::human;
    let mut text = format!(
        "one plan for {}\n  buffers: {} ({} held at their largest size)\n  \
         arena at the largest point: {} (ARENA_BYTES_MAX; the static plan there: {})\n",
        ranges.join(", "),
        rp.plan.buffers.len(),
        rp.held,
        human(max),
        human(fixed),
    );
    for (p, b) in &points {
        let ratio = if max == 0 {
            1.0
        } else {
            *b as f64 / max as f64
        };
        text.push_str(&format!(
            "  at {p}: {} ({ratio:.3} of the max)\n",
            human(*b)
        ));
    }
    emit(&text)?;
    Ok(())
}

/// Writes to stdout; a closed pipe (`kiln plan | head`) ends quietly instead of panicking.
fn emit(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        Command::Compile {
            model,
            out_dir,
            name,
            weights_at_runtime,
            runtime_path,
            target,
        } => {
            let mut opts = model.options()?;
            opts.name = name;
            opts.runtime_path = runtime_path;
            opts.target = target.into();
            if weights_at_runtime {
                opts.weights = WeightsMode::File;
            }
            let compiled = compile(&model.model, &opts)?;
            let path = compiled.write_to(&out_dir)?;
            let p = &compiled.plan;
            // Over declared ranges the plan is the largest point's: say it is a maximum.
            let arena = if p.strategy == "dynamic" {
                "arena at most"
            } else {
                "arena"
            };
            println!(
                "wrote {} and {} ({} steps, {arena} {} bytes, lower bound {} bytes, naive {} bytes, weights {} bytes)",
                path.display(),
                out_dir.join(compiled.weights_file_name()).display(),
                compiled.program.steps.len(),
                p.arena_bytes,
                p.lower_bound_bytes,
                p.naive_bytes,
                compiled.weights.len()
            );
        }
        Command::Plan {
            model,
            json,
            svg: _,
            at,
        } if !model.dims.is_empty() => plan_over_ranges(&model, json, &at)?,
        Command::Plan {
            model,
            json,
            svg,
            at,
        } => {
            if !at.is_empty() {
                return Err("--at needs the ranges --dim declares".into());
            }
            let compiled = compile(&model.model, &model.options()?)?;
            if let Some(path) = svg {
                let picture = kiln_compiler::plan::svg(&compiled.plan_input, &compiled.plan);
                std::fs::write(&path, picture)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            }
            if json {
                let v = compiled.json_report();
                emit(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
            } else {
                emit(&compiled.report())?;
            }
        }
        Command::Run(args) => kiln_compiler::runner::run(&args)?,
    }
    Ok(())
}
