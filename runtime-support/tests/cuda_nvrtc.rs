//! Every CUDA kernel compiles with NVRTC for the four data-centre/desktop
//! architectures Kiln targets, with register spills as errors, and stays inside a
//! per-kernel register and shared-memory budget read from ptxas's report. Runs with no
//! GPU: NVRTC is a library (the `nvidia-cuda-nvrtc-cu12` wheel; `scripts/test.sh`
//! sets `KILN_NVRTC_LIB`).
//!
//! `cargo test --release -p kiln-runtime --features cuda --test cuda_nvrtc -- --nocapture`
//! prints the resource table.

use kiln_runtime::cuda::{geometry, nvrtc};

const ARCHS: [&str; 4] = ["sm_80", "sm_86", "sm_89", "sm_90"];
/// 256-thread blocks at two blocks per SM need at most 128 registers per thread.
const MAX_REGISTERS: u32 = 128;
/// Static shared memory per block; the default limit without opting in is 48 KiB.
const MAX_SHARED_BYTES: u32 = 48 * 1024;

#[derive(Debug, Default, Clone)]
struct Resources {
    registers: u32,
    shared: u32,
    spill_bytes: u32,
    stack: u32,
}

fn options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "-Xptxas=-v".into(),
        "-Xptxas=--warn-on-spills".into(),
        "-Xptxas=--warning-as-error".into(),
    ]
}

fn number_before(line: &str, unit: &str) -> Option<u32> {
    let at = line.find(unit)?;
    line[..at].split_whitespace().last()?.parse().ok()
}

/// Per-kernel resources from a ptxas `-v` log.
fn parse(log: &str) -> Vec<(String, Resources)> {
    let mut out: Vec<(String, Resources)> = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            out.push((rest.trim().to_string(), Resources::default()));
        } else if let Some((_, r)) = out.last_mut() {
            if line.contains("bytes stack frame") {
                r.stack = number_before(line, "bytes stack frame").unwrap_or(0);
                r.spill_bytes = number_before(line, "bytes spill stores").unwrap_or(0)
                    + number_before(line, "bytes spill loads").unwrap_or(0);
            } else if line.contains("Used ") && line.contains("registers") {
                r.registers = number_before(line, "registers").unwrap_or(0);
                r.shared = number_before(line, "bytes smem").unwrap_or(0);
            }
        }
    }
    out
}

#[test]
fn every_kernel_compiles_for_every_arch_within_budget() {
    let mut table = Vec::new();
    for arch in ARCHS {
        let mut seen = Vec::new();
        for (file, src) in geometry::SOURCES {
            if !file.ends_with(".cu") {
                continue;
            }
            let compiled = nvrtc::compile(&nvrtc::self_contained(src), file, &options(arch))
                .unwrap_or_else(|e| panic!("{file} for {arch}: {e}"));
            assert!(!compiled.ptx.is_empty(), "{file} for {arch}: no PTX");
            for (kernel, r) in parse(&compiled.log) {
                assert_eq!(r.spill_bytes, 0, "{kernel} on {arch} spills: {r:?}");
                assert!(r.registers <= MAX_REGISTERS, "{kernel} on {arch}: {r:?}");
                assert!(r.shared <= MAX_SHARED_BYTES, "{kernel} on {arch}: {r:?}");
                table.push((arch, kernel.clone(), r));
                seen.push(kernel);
            }
        }
        for k in geometry::KERNEL_NAMES {
            assert!(
                seen.iter().any(|s| s == k),
                "{k} missing from the ptxas report for {arch}"
            );
        }
    }
    println!(
        "{:<6} {:<32} {:>5} {:>7} {:>6}",
        "arch", "kernel", "regs", "smem B", "stack"
    );
    for (arch, k, r) in &table {
        println!(
            "{arch:<6} {k:<32} {:>5} {:>7} {:>6}",
            r.registers, r.shared, r.stack
        );
    }
}

/// The budget check is live: register pressure squeezed below what a kernel needs
/// spills, and the spill is a compile error.
#[test]
fn a_spill_fails_the_compile() {
    let src = r#"
extern "C" __global__ void pressure(float* out, const float* in) {
    float acc[64];
    for (int i = 0; i < 64; ++i) acc[i] = in[i * blockDim.x + threadIdx.x];
    for (int r = 0; r < 64; ++r)
        for (int i = 0; i < 64; ++i) acc[i] = acc[i] * acc[(i + r) & 63] + 1.0f;
    float s = 0.0f;
    for (int i = 0; i < 64; ++i) s += acc[i];
    out[threadIdx.x] = s;
}
"#;
    let mut opts = options("sm_80");
    opts.push("--maxrregcount=24".into());
    let err = nvrtc::compile(src, "pressure.cu", &opts)
        .expect_err("64 live floats in 24 registers must spill");
    assert!(err.to_string().contains("spill"), "{err}");
    let ok = nvrtc::compile(src, "pressure.cu", &options("sm_80"))
        .expect("compiles with registers to spare");
    assert!(
        parse(&ok.log)
            .iter()
            .any(|(k, r)| k == "pressure" && r.registers > 24)
    );
}
