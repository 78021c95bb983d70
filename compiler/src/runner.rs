//! `kiln run`: compile a model into a small cached crate, build it in release mode with
//! cargo, run it on `.npy` inputs, and report outputs and latency, in one step (like
//! `tvmc run` or `iree-run-module`).
//!
//! The cached crate lives in `$KILN_CACHE_DIR` (default `target/kiln-run` under the
//! current directory), one folder per model and options, all sharing one cargo target
//! directory so the runtime crate is built once. Files are rewritten only when their
//! content changes, so a second call reuses the build.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::codegen::WeightsMode;
use crate::error::Error;
use crate::tensor::Tensor;
use crate::{Options, compile, npy, parse_input_spec};

/// `kiln run`'s arguments. The clap derive (the CLI's parsing) exists only with the
/// `cli` feature; library users build the struct themselves.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct RunArgs {
    /// The ONNX model file.
    #[cfg_attr(feature = "cli", arg(value_name = "MODEL.onnx"))]
    pub model: PathBuf,
    /// Shape of an input, e.g. `--input data=1x3x224x224` (needed for symbolic dims).
    #[cfg_attr(feature = "cli", arg(short, long = "input", value_name = "NAME=DIMS"))]
    pub inputs: Vec<String>,
    /// Data for an input as a .npy file; inputs without one get seeded random values.
    #[cfg_attr(
        feature = "cli",
        arg(short, long = "data", value_name = "NAME=FILE.npy")
    )]
    pub data: Vec<String>,
    /// Write each output as DIR/OUTPUT_NAME.npy.
    #[cfg_attr(feature = "cli", arg(short, long, value_name = "DIR"))]
    pub out: Option<PathBuf>,
    /// Timed runs after one warm-up run; the median is reported.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 10))]
    pub runs: usize,
    /// Declare a symbol's range (`W=32..2048`, `W=32..2048:32` for a step): one build
    /// runs every shape in it, and the `--data` files' shapes give the dims of a run; a
    /// second call with other shapes reuses the build.
    #[cfg_attr(
        feature = "cli",
        arg(long = "dim", value_name = "SYMBOL=MIN..MAX[:STEP]")
    )]
    pub dims: Vec<String>,
    /// With `--dim`: also build the constant-shape path at these dims (`W=320`; see
    /// `kiln compile`), which a run at exactly them takes.
    #[cfg_attr(feature = "cli", arg(long = "opt", value_name = "SYMBOL=VALUE"))]
    pub opt: Vec<String>,
    /// Bind an input to a value at compile time (`NAME=FILE.npy`; see `kiln compile`).
    #[cfg_attr(feature = "cli", arg(long = "constant", value_name = "NAME=FILE.npy"))]
    pub constants: Vec<String>,
    /// Arena offset alignment in bytes.
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value_t = 256, value_name = "BYTES")
    )]
    pub alignment: usize,
    /// Compute every convolution as a direct or im2col sum (no Winograd; see `kiln
    /// compile`).
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_winograd: bool,
    /// Also time every step and print the slowest nodes and the time per operator.
    #[cfg_attr(feature = "cli", arg(long))]
    pub profile: bool,
    /// How many of the slowest steps `--profile` prints.
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value_t = 10, value_name = "N", requires = "profile")
    )]
    pub profile_steps: usize,
    /// Threads a run uses (`Context::set_threads`): large products are shared among them.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1, value_name = "N"))]
    pub threads: usize,
}

/// Path of the runtime crate's sources, for the generated crate's dependency.
fn runtime_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime-support")
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

pub fn run(args: &RunArgs) -> Result<(), Error> {
    let opts = Options {
        name: Some("model".into()),
        input_dims: args
            .inputs
            .iter()
            .map(|s| parse_input_spec(s))
            .collect::<Result<_, _>>()?,
        constant_inputs: args
            .constants
            .iter()
            .map(|s| crate::parse_constant_spec(s))
            .collect::<Result<_, _>>()?,
        symbol_ranges: args
            .dims
            .iter()
            .map(|s| crate::parse_dim_spec(s))
            .collect::<Result<_, _>>()?,
        opt_dims: args
            .opt
            .iter()
            .map(|s| crate::parse_opt_spec(s))
            .collect::<Result<_, _>>()?,
        alignment: args.alignment,
        winograd: !args.no_winograd,
        weights: WeightsMode::File,
        ..Options::default()
    };
    let model_bytes = std::fs::read(&args.model).map_err(io_err(&args.model))?;
    let compiled = compile(&args.model, &opts)?;
    // Declared ranges, or an extent the data decides: the module takes input shapes.
    let dynamic = compiled.shapes_vary;
    let p = &compiled.plan;
    println!(
        "compiled {}: {} steps; arena {} bytes (naive {}, liveness lower bound {}, saving {:.1}% vs naive); weights {} bytes",
        args.model.display(),
        compiled.program.steps.len(),
        p.arena_bytes,
        p.naive_bytes,
        p.lower_bound_bytes,
        100.0 * (1.0 - p.arena_bytes as f64 / p.naive_bytes.max(1) as f64),
        compiled.weights.len()
    );

    let mut h = DefaultHasher::new();
    (
        env!("CARGO_PKG_VERSION"),
        &model_bytes,
        &args.inputs,
        &args.dims,
        args.alignment,
    )
        .hash(&mut h);
    let cache = std::env::var_os("KILN_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/kiln-run"));
    let cache = std::path::absolute(&cache).map_err(io_err(&cache))?;
    let crate_dir = cache.join(format!("{:016x}", h.finish()));
    let src = crate_dir.join("src");
    std::fs::create_dir_all(&src).map_err(io_err(&src))?;
    compiled.write_to(&src)?;
    write_if_changed(
        &crate_dir.join("Cargo.toml"),
        &cargo_toml(&format!("{:016x}", h.finish()))?,
    )?;
    let driver = if dynamic {
        let run = DRIVER.replace("(&mut ctx, &views", "(&mut ctx, &views, &shapes");
        format!("{run}{DYNAMIC_SHAPES}")
    } else {
        format!("{DRIVER}{FIXED_SHAPES}")
    };
    write_if_changed(&src.join("main.rs"), driver.as_bytes())?;

    // Inputs: .npy data or seeded random values, handed over as raw little-endian bytes.
    let data: Vec<(String, PathBuf)> = args
        .data
        .iter()
        .map(|s| {
            s.split_once('=')
                .map(|(n, f)| (n.to_owned(), PathBuf::from(f)))
                .ok_or_else(|| Error::Options(format!("`{s}` should look like NAME=FILE.npy")))
        })
        .collect::<Result<_, _>>()?;
    for (name, _) in &data {
        if !compiled.program.inputs.iter().any(|io| &io.name == name) {
            return Err(Error::Input {
                input: name.clone(),
                message: "the model has no such input".into(),
            });
        }
    }
    let work = crate_dir.join("io");
    std::fs::create_dir_all(&work).map_err(io_err(&work))?;
    let mut input_files = Vec::new();
    for (i, io) in compiled.program.inputs.iter().enumerate() {
        let values = match data.iter().find(|(n, _)| n == &io.name) {
            Some((_, file)) => {
                let t = npy::read(file)?;
                // Over declared ranges the module itself checks the shape it is given.
                let shape_ok = if dynamic {
                    t.shape.len() == io.shape.len()
                } else {
                    t.shape == io.shape
                };
                if !shape_ok || t.dtype != io.dtype {
                    return Err(Error::Input {
                        input: io.name.clone(),
                        message: format!(
                            "{} holds {} {:?}, the model expects {} {:?}",
                            file.display(),
                            t.dtype,
                            t.shape,
                            io.dtype,
                            io.shape
                        ),
                    });
                }
                t
            }
            None => {
                println!(
                    "input {}: seeded random values in [0, 1), shape {:?}",
                    io.name, io.shape
                );
                let v = seeded_random(io.shape.iter().product(), i as u64);
                Tensor::f32(io.shape.clone(), v).cast(io.dtype)
            }
        };
        let f = work.join(format!("input{i}.bin"));
        std::fs::write(&f, values.data.bytes()).map_err(io_err(&f))?;
        let dims: Vec<String> = values.shape.iter().map(usize::to_string).collect();
        // The driver reads `FILE:SHAPE`; `x` for a scalar's empty shape.
        input_files.push(format!("{}:x{}", f.display(), dims.join("x")));
    }

    let target_dir = cache.join("target");
    println!("building {} (release) ...", crate_dir.display());
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(crate_dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target_dir)
        .status()
        .map_err(|e| Error::Options(format!("could not start cargo: {e}")))?;
    if !status.success() {
        return Err(Error::Codegen(format!(
            "cargo build of the generated crate in {} failed",
            crate_dir.display()
        )));
    }
    let exe = target_dir
        .join("release")
        .join(format!("kiln-run-{:016x}", h.finish()));
    let out_dir = work.join("out");
    std::fs::create_dir_all(&out_dir).map_err(io_err(&out_dir))?;
    let output = Command::new(&exe)
        .arg(src.join(compiled.weights_file_name()))
        .arg(args.runs.to_string())
        .arg(&out_dir)
        .args(&input_files)
        .env("KILN_PROFILE", if args.profile { "1" } else { "" })
        .env("KILN_THREADS", args.threads.to_string())
        .output()
        .map_err(|e| Error::Options(format!("could not start {}: {e}", exe.display())))?;
    if !output.status.success() {
        return Err(Error::Codegen(format!(
            "the compiled model failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut times: Vec<f64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("run_ms "))
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    times.sort_by(f64::total_cmp);

    for (i, (io, _)) in compiled.program.outputs.iter().enumerate() {
        let f = out_dir.join(format!("output{i}.bin"));
        let bytes = std::fs::read(&f).map_err(io_err(&f))?;
        // Over declared ranges, the shape the driver reported for this run.
        let shape: Vec<usize> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("output_shape {i} ")))
            .next()
            .map(|s| s.split('x').filter_map(|d| d.parse().ok()).collect())
            .unwrap_or_else(|| io.shape.clone());
        let t = crate::dispatch_dtype!(io.dtype, T => {
            let mut v = vec![T::default(); shape.iter().product()];
            let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut v);
            if dst.len() != bytes.len() {
                return Err(Error::Codegen(format!("output {} has {} bytes, expected {}", io.name, bytes.len(), dst.len())));
            }
            dst.copy_from_slice(&bytes);
            Tensor::from_vec(shape.clone(), v)
        });
        let values: Vec<f64> = t.as_f64();
        let first: Vec<String> = values.iter().take(8).map(|v| format!("{v:.6}")).collect();
        let (argmax, max) = values
            .iter()
            .enumerate()
            .fold(
                (0, f64::NEG_INFINITY),
                |a, (i, &v)| if v > a.1 { (i, v) } else { a },
            );
        println!(
            "output {} {:?}: [{}{}] (max {max:.6} at {argmax})",
            io.name,
            shape,
            first.join(", "),
            if values.len() > 8 { ", ..." } else { "" }
        );
        if let Some(dir) = &args.out {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
            let file_name: String = io
                .name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let path = dir.join(format!("{file_name}.npy"));
            std::fs::write(&path, npy::to_bytes(&t)).map_err(io_err(&path))?;
            println!("  wrote {}", path.display());
        }
    }
    if args.profile {
        print_profile(&stdout, &compiled, args.runs.max(1), args.profile_steps);
    }
    if let Some(median) = times.get(times.len() / 2) {
        println!(
            "latency: median {median:.3} ms over {} runs (min {:.3} ms), {}",
            times.len(),
            times[0],
            match args.threads {
                0 | 1 => "single thread".to_string(),
                n => format!("{n} threads"),
            }
        );
    }
    Ok(())
}

/// Prints the slowest steps and the time per operator type from the driver's
/// `step_s INDEX SECONDS` lines (sums over all timed runs).
fn print_profile(stdout: &str, compiled: &crate::Compiled, runs: usize, shown: usize) {
    let steps = &compiled.program.steps;
    let mut per_step = vec![0.0f64; steps.len()];
    for line in stdout.lines() {
        let mut it = line.split_whitespace();
        if it.next() != Some("step_s") {
            continue;
        }
        if let (Some(Ok(i)), Some(Ok(t))) = (
            it.next().map(str::parse::<usize>),
            it.next().map(str::parse::<f64>),
        ) && i < per_step.len()
        {
            per_step[i] = t;
        }
    }
    let total: f64 = per_step.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    let ms = |t: f64| t * 1e3 / runs as f64;
    let mut by_op: Vec<(&str, f64, usize)> = Vec::new();
    for (s, &t) in steps.iter().zip(&per_step) {
        match by_op.iter_mut().find(|(op, ..)| *op == s.op_type) {
            Some(e) => {
                e.1 += t;
                e.2 += 1;
            }
            None => by_op.push((s.op_type, t, 1)),
        }
    }
    by_op.sort_by(|a, b| b.1.total_cmp(&a.1));
    println!("time per operator (ms per run):");
    for (op, t, n) in &by_op {
        println!(
            "  {op:<20} {:>9.3} ms  {:>5.1}%  {n} steps",
            ms(*t),
            100.0 * t / total
        );
    }
    let mut order: Vec<usize> = (0..steps.len()).collect();
    order.sort_by(|&a, &b| per_step[b].total_cmp(&per_step[a]));
    println!("slowest steps (ms per run):");
    for &i in order.iter().take(shown) {
        println!(
            "  {:>4}  {:<32} {:<18} {:>9.3} ms",
            i,
            steps[i].node,
            steps[i].op_type,
            ms(per_step[i])
        );
    }
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).map_err(io_err(path))
}

fn cargo_toml(hash: &str) -> Result<Vec<u8>, Error> {
    let rt = runtime_dir();
    if !rt.join("Cargo.toml").exists() {
        return Err(Error::Options(format!(
            "kiln run needs the kiln-runtime sources at {}, which this kiln binary was built from",
            rt.display()
        )));
    }
    let rt = std::path::absolute(&rt).map_err(io_err(&rt))?;
    Ok(format!(
        r#"# @generated by kiln run
[package]
name = "kiln-run-driver"
version = "0.0.0"
edition = "2024"
publish = false

[[bin]]
name = "kiln-run-{hash}"
path = "src/main.rs"

[dependencies]
kiln-runtime = {{ path = {:?} }}

[workspace]

[profile.release]
codegen-units = 4
"#,
        rt.display().to_string(),
        hash = hash,
    )
    .into_bytes())
}

/// xorshift64*: reproducible inputs without a dependency.
fn seeded_random(n: usize, seed: u64) -> Vec<f32> {
    let mut s =
        0x9E37_79B9_7F4A_7C15u64 ^ (seed.wrapping_add(1)).wrapping_mul(0xD1B5_4A32_D192_ED03);
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            ((s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32) / (1u64 << 24) as f32
        })
        .collect()
}

/// The driver program of the cached crate.
const DRIVER: &str = r#"// @generated by kiln run
#[allow(dead_code)]
mod model {
    include!("model.rs");
}

use std::time::Instant;

fn main() {
    if let Err(e) = run() {
        eprintln!("{e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (weights, runs, out_dir, input_files) = (&args[1], args[2].parse::<usize>()?, &args[3], &args[4..]);
    let model = model::Model::load(weights)?;
    // Each argument is FILE:xD0xD1... (the input's shape).
    let (files, shapes): (Vec<&str>, Vec<Vec<usize>>) = input_files
        .iter()
        .map(|a| {
            let (f, s) = a.rsplit_once(':').unwrap_or((a, "x"));
            (f, s.split('x').filter(|d| !d.is_empty()).map(|d| d.parse().unwrap_or(0)).collect())
        })
        .unzip();
    let shapes: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let _ = &shapes;
    let inputs: Vec<(Vec<u64>, usize)> = files
        .iter()
        .map(|f| std::fs::read(f).map(|b| (kiln_runtime::io::aligned_words(&b), b.len())))
        .collect::<Result<_, _>>()?;
    let views: Vec<&[u8]> = inputs.iter().map(|(w, n)| kiln_runtime::io::words_as_bytes(w, *n)).collect();
    let mut ctx = model::Context::new();
    ctx.set_threads(std::env::var("KILN_THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(1))?;
    model.run_bytes(&mut ctx, &views)?;
    for _ in 0..runs {
        let t = Instant::now();
        model.run_bytes(&mut ctx, &views)?;
        println!("run_ms {}", t.elapsed().as_secs_f64() * 1e3);
    }
    if std::env::var("KILN_PROFILE").is_ok_and(|v| v == "1") {
        let mut times = [0.0f64; model::N_STEPS];
        for _ in 0..runs {
            model.run_bytes_profiled(&mut ctx, &views, &mut times)?;
        }
        for (i, t) in times.iter().enumerate() {
            println!("step_s {i} {t}");
        }
    }
    let outputs = model.run_bytes(&mut ctx, &views)?;
    for (i, o) in outputs.iter().enumerate() {
        std::fs::write(format!("{out_dir}/output{i}.bin"), o)?;
    }
    print_output_shapes(&ctx)?;
    Ok(())
}
"#;

/// The driver's end for a fixed-shape module: the outputs' shapes are `OUTPUTS`'.
const FIXED_SHAPES: &str = r#"
fn print_output_shapes(_: &model::Context) -> Result<(), kiln_runtime::Error> {
    Ok(())
}
"#;

/// The driver's end for a module whose shapes vary: the shapes of the last run.
const DYNAMIC_SHAPES: &str = r#"
fn print_output_shapes(ctx: &model::Context) -> Result<(), kiln_runtime::Error> {
    for i in 0..model::N_OUTPUTS {
        let s: Vec<String> = ctx.output_shape(i).unwrap_or_default().iter().map(usize::to_string).collect();
        println!("output_shape {i} {}", s.join("x"));
    }
    Ok(())
}
"#;
