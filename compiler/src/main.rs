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
    /// Bind an input to a value at compile time, e.g. `--constant axes=axes.npy`: it
    /// becomes a constant and leaves the generated `Inputs` (for inputs that set shapes).
    #[arg(long = "constant", value_name = "NAME=FILE.npy")]
    constants: Vec<String>,
    /// Arena offset alignment in bytes.
    #[arg(long, default_value_t = 256, value_name = "BYTES")]
    alignment: usize,
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
            constant_inputs: self
                .constants
                .iter()
                .map(|s| kiln_compiler::parse_constant_spec(s))
                .collect::<Result<_, _>>()?,
            alignment: self.alignment,
            ..Options::default()
        })
    }
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
            println!(
                "wrote {} and {} ({} steps, arena {} bytes, lower bound {} bytes, naive {} bytes, weights {} bytes)",
                path.display(),
                out_dir.join(compiled.weights_file_name()).display(),
                compiled.program.steps.len(),
                p.arena_bytes,
                p.lower_bound_bytes,
                p.naive_bytes,
                compiled.weights.len()
            );
        }
        Command::Plan { model, json, svg } => {
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
