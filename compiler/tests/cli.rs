//! The `kiln` binary: help text, exit codes, error output, `plan --json` and
//! `compile`'s output files.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{TempDir, tiny_classifier};

fn kiln(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .output()
        .expect("running kiln")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes the tiny classifier (batch symbolic when `symbolic`) to `dir/tiny.onnx`.
fn write_model(dir: &Path, symbolic: bool) -> PathBuf {
    let path = dir.join("tiny.onnx");
    std::fs::write(&path, tiny_classifier(symbolic).bytes()).unwrap();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// `kiln --help` succeeds and lists the subcommands.
#[test]
fn help() {
    let o = kiln(&["--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for word in ["compile", "plan", "run"] {
        assert!(out.contains(word), "`{word}` missing from:\n{out}");
    }
}

/// `kiln compile --help` succeeds and documents `--input` and `--out-dir`.
#[test]
fn compile_help() {
    let o = kiln(&["compile", "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("--input"), "{out}");
    assert!(out.contains("--out-dir"), "{out}");
    assert!(out.contains("NAME=DIMS"), "{out}");
}

/// Compiling a file that does not exist exits non-zero with `error:` naming the file.
#[test]
fn compile_missing_file() {
    let dir = TempDir::new("cli-missing");
    let model = dir.join("absent.onnx");
    let o = kiln(&["compile", s(&model), "--out-dir", s(dir.path())]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!("error: reading {}: ", model.display())),
        "{err}"
    );
    assert!(stdout(&o).is_empty());
}

/// A file that is not ONNX exits non-zero with a parse error naming the file.
#[test]
fn compile_text_file() {
    let dir = TempDir::new("cli-text");
    let model = dir.join("readme.onnx");
    std::fs::write(&model, "hello, I am text\n").unwrap();
    let o = kiln(&["plan", s(&model)]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!(
            "error: {} is not a readable ONNX model: ",
            model.display()
        )),
        "{err}"
    );
}

/// `kiln plan MODEL --json` prints the plan as JSON: sizes, and every tensor's name,
/// offset, size and lifetime; offsets plus sizes fit in the arena.
#[test]
fn plan_json() {
    let dir = TempDir::new("cli-plan");
    let model = write_model(dir.path(), false);
    let o = kiln(&["plan", s(&model), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("plan --json is JSON");
    let num = |key: &str| {
        v[key]
            .as_u64()
            .unwrap_or_else(|| panic!("`{key}` missing from {v}"))
    };
    let (arena, naive, lower) = (
        num("arena_bytes"),
        num("naive_bytes"),
        num("lower_bound_bytes"),
    );
    assert!(lower <= arena && arena <= naive, "{arena} {naive} {lower}");
    let tensors = v["tensors"].as_array().expect("tensors[]");
    assert!(!tensors.is_empty());
    for t in tensors {
        assert!(t["name"].is_string(), "{t}");
        let (offset, size) = (t["offset"].as_u64().unwrap(), t["size"].as_u64().unwrap());
        let (first, last) = (t["first"].as_u64().unwrap(), t["last"].as_u64().unwrap());
        assert!(offset + size <= arena, "{t} overflows the arena of {arena}");
        assert!(first <= last, "{t}");
    }
    assert!(
        tensors.iter().any(|t| t["name"] == "prob"),
        "the output tensor is planned"
    );
    assert_eq!(v["schedule"]["kept"], "file order", "a chain has one order");
    assert_eq!(v["schedule"]["file_order_arena_bytes"], arena);
}

/// `kiln plan MODEL` without `--json` prints a text report.
#[test]
fn plan_text() {
    let dir = TempDir::new("cli-plan-text");
    let model = write_model(dir.path(), false);
    let o = kiln(&["plan", s(&model)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("prob"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("Schedule: file order"),
        "{}",
        stdout(&o)
    );
}

/// `kiln compile MODEL --out-dir DIR --name tiny` writes `DIR/tiny.rs` and
/// `DIR/tiny.weights.bin` and says so.
#[test]
fn compile_writes_module_and_weights() {
    let dir = TempDir::new("cli-compile");
    let model = write_model(dir.path(), false);
    let out = dir.join("out");
    let o = kiln(&["compile", s(&model), "--out-dir", s(&out), "--name", "tiny"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let code = std::fs::read_to_string(out.join("tiny.rs")).expect("tiny.rs written");
    syn::parse_file(&code).expect("tiny.rs parses");
    assert!(
        code.contains("include_bytes!(\"tiny.weights.bin\")"),
        "{code}"
    );
    let weights = std::fs::read(out.join("tiny.weights.bin")).expect("weights written");
    assert!(!weights.is_empty());
    let msg = stdout(&o);
    assert!(
        msg.starts_with(&format!("wrote {}", out.join("tiny.rs").display())),
        "{msg}"
    );
    assert!(msg.contains("tiny.weights.bin"), "{msg}");
}

/// `--weights-at-runtime` writes a module that embeds nothing.
#[test]
fn compile_weights_at_runtime() {
    let dir = TempDir::new("cli-runtime-weights");
    let model = write_model(dir.path(), false);
    let o = kiln(&[
        "compile",
        s(&model),
        "--out-dir",
        s(dir.path()),
        "--weights-at-runtime",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The module name defaults to the model file's stem.
    let code = std::fs::read_to_string(dir.join("tiny.rs")).unwrap();
    assert!(!code.contains("include_bytes!"));
    assert!(dir.join("tiny.weights.bin").exists());
}

/// `--target cuda` writes the CUDA module (kernel launches); an unknown target is a
/// usage error listing the known ones.
#[test]
fn compile_target_cuda() {
    let dir = TempDir::new("cli-cuda");
    let model = write_model(dir.path(), false);
    let o = kiln(&[
        "compile",
        s(&model),
        "--out-dir",
        s(dir.path()),
        "--target",
        "cuda",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let code = std::fs::read_to_string(dir.join("tiny.rs")).unwrap();
    syn::parse_file(&code).expect("tiny.rs parses");
    assert!(code.contains("for the CUDA target"), "{code}");
    assert!(code.contains("pub fn launch_all<"), "{code}");
    assert!(code.contains("include_bytes!(\"tiny.weights.bin\")"));

    let o = kiln(&[
        "compile",
        s(&model),
        "--out-dir",
        s(dir.path()),
        "--target",
        "tpu",
    ]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    let err = stderr(&o);
    assert!(err.contains("invalid value 'tpu'"), "{err}");
    assert!(err.contains("[possible values: cpu, cuda]"), "{err}");

    let help = stdout(&kiln(&["compile", "--help"]));
    assert!(help.contains("--target <TARGET>"), "{help}");
}

/// A model with a symbolic dim fails without `--input` (naming the input, the dim and
/// the flag) and compiles with `--input x=2x3x8x8`.
#[test]
fn symbolic_input_needs_input_flag() {
    let dir = TempDir::new("cli-input");
    let model = write_model(dir.path(), true);
    let o = kiln(&["plan", s(&model), "--json"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.starts_with("error: input `x`: dim 0 is symbolic (`batch`)"),
        "{err}"
    );
    assert!(err.contains("--input x="), "{err}");

    let o = kiln(&[
        "compile",
        s(&model),
        "--out-dir",
        s(dir.path()),
        "--input",
        "x=2x3x8x8",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("tiny.rs").exists());
}

/// A malformed `--input` and a bad `--alignment` are reported as invalid options.
#[test]
fn bad_options() {
    let dir = TempDir::new("cli-options");
    let model = write_model(dir.path(), true);
    let o = kiln(&["plan", s(&model), "--input", "x:2x3x8x8"]);
    assert!(!o.status.success());
    assert_eq!(
        stderr(&o).trim_end(),
        "error: invalid option: `x:2x3x8x8` should look like NAME=1x3x224x224"
    );
    let o = kiln(&[
        "plan",
        s(&model),
        "--input",
        "x=2x3x8x8",
        "--alignment",
        "3",
    ]);
    assert!(!o.status.success());
    assert_eq!(
        stderr(&o).trim_end(),
        "error: invalid option: alignment must be a power of two between 4 and 256, got 3"
    );
}

/// Unknown subcommands and missing arguments are usage errors (clap's exit code 2).
#[test]
fn usage_errors() {
    let o = kiln(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("error:"));
    let o = kiln(&["compile"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("MODEL.onnx"), "{}", stderr(&o));
}

/// `kiln run` compiles the model into a cached crate, builds it with cargo, runs it on
/// `.npy` data and writes each output as `.npy`; a second call with the same model and
/// options reuses the build (the executable is not rebuilt).
#[test]
fn run_builds_runs_and_reuses_the_build() {
    let dir = TempDir::new("run");
    let model = write_model(dir.path(), true);
    let _cache_lock = lock_run_cache();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kiln-run-cache");
    let input: Vec<f32> = (0..2 * 3 * 8 * 8)
        .map(|i| (i % 17) as f32 / 17.0 - 0.5)
        .collect();
    let data = dir.join("x.npy");
    std::fs::write(
        &data,
        kiln_compiler::npy::to_bytes(&kiln_compiler::tensor::Tensor::f32(
            vec![2, 3, 8, 8],
            input.clone(),
        )),
    )
    .unwrap();
    let out = dir.join("out");
    let data_arg = format!("x={}", s(&data));
    let args = [
        "run",
        s(&model),
        "--input",
        "x=2x3x8x8",
        "--data",
        &data_arg,
        "--out",
        s(&out),
        "--runs",
        "3",
    ];
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(args)
            .env("KILN_CACHE_DIR", &cache)
            .output()
            .expect("running kiln")
    };
    let first = run();
    assert!(
        first.status.success(),
        "{}{}",
        stdout(&first),
        stderr(&first)
    );
    let text = stdout(&first);
    assert!(text.contains("output prob [2, "), "{text}");
    assert!(text.contains("latency: median"), "{text}");
    let prob = kiln_compiler::npy::read(&out.join("prob.npy")).unwrap();
    assert_eq!(prob.shape[0], 2);
    // Softmax rows sum to one: the run really computed something.
    for row in prob.values::<f32>().unwrap().chunks(prob.shape[1]) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
    }

    let exe = std::fs::read_dir(cache.join("target/release"))
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| {
            e.file_name().to_string_lossy().starts_with("kiln-run-")
                && e.path().extension().is_none()
        })
        .expect("the built driver")
        .path();
    let built = std::fs::metadata(&exe).unwrap().modified().unwrap();
    let second = run();
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(
        std::fs::metadata(&exe).unwrap().modified().unwrap(),
        built,
        "rebuilt"
    );
    let again = kiln_compiler::npy::read(&out.join("prob.npy")).unwrap();
    assert_eq!(again, prob, "same inputs, same outputs");
}

/// `kiln run --dim`: one build over the declared range, run on `.npy` data of two
/// shapes; the second shape reuses the build, and each output has its run's shape.
#[test]
fn run_with_declared_dims_serves_every_shape_from_one_build() {
    let dir = TempDir::new("run-dims");
    let model = write_model(dir.path(), true);
    let _cache_lock = lock_run_cache();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kiln-run-cache");
    let input: Vec<f32> = (0..3 * 3 * 8 * 8)
        .map(|i| (i % 13) as f32 / 13.0 - 0.5)
        .collect();
    let run = |n: usize| {
        let data = dir.join(format!("x{n}.npy"));
        let t = kiln_compiler::tensor::Tensor::f32(vec![n, 3, 8, 8], input[..n * 192].to_vec());
        std::fs::write(&data, kiln_compiler::npy::to_bytes(&t)).unwrap();
        let out = dir.join(format!("out{n}"));
        let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["run", s(&model), "--input", "x=Nx3x8x8", "--dim", "N=1..4"])
            .args([
                "--data",
                &format!("x={}", s(&data)),
                "--out",
                s(&out),
                "--runs",
                "1",
            ])
            .env("KILN_CACHE_DIR", &cache)
            .output()
            .expect("running kiln");
        assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
        assert!(
            stdout(&o).contains(&format!("output prob [{n}, ")),
            "{}",
            stdout(&o)
        );
        kiln_compiler::npy::read(&out.join("prob.npy")).unwrap()
    };
    let two = run(2);
    let built = |cache: &Path| -> Vec<(PathBuf, std::time::SystemTime)> {
        let mut v: Vec<_> = std::fs::read_dir(cache.join("target/release"))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name().to_string_lossy().starts_with("kiln-run-")
                    && e.path().extension().is_none()
            })
            .map(|e| (e.path(), e.metadata().unwrap().modified().unwrap()))
            .collect();
        v.sort();
        v
    };
    let before = built(&cache);
    let three = run(3);
    assert_eq!(built(&cache), before, "a second shape rebuilt the driver");
    assert_eq!((two.shape[0], three.shape[0]), (2, 3));
    // The batch items are independent: the first two rows agree.
    let (a, b) = (two.values::<f32>().unwrap(), three.values::<f32>().unwrap());
    for (p, q) in a.iter().zip(b) {
        assert!((p - q).abs() < 1e-6, "{p} vs {q}");
    }
}

/// The `kiln run` tests share one build cache (its dependencies build once) and check
/// which drivers it rebuilt: they take turns, or one sees the other's build.
fn lock_run_cache() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
