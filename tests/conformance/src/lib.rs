//! ONNX's backend node tests compiled by Kiln: the `CASES` table `build.rs` generates,
//! `.npy` reading, output comparison, and the expectations file the test checks against.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Runs a compiled case once on its inputs (graph order, each 8-byte aligned) and
/// returns its outputs' bytes and Kiln's shape of each (graph order; an extent the data
/// decides as the run found it).
pub type RunFn = fn(&[&[u8]]) -> Result<Vec<(Vec<u8>, Vec<usize>)>, kiln_runtime::Error>;

/// What became of a case at build time.
pub enum Status {
    /// Out of scope (`excluded` in index.json), with the reason.
    Excluded(&'static str),
    /// Kiln did not compile it; the compile error on one line.
    Unsupported(&'static str),
    /// Compiled: the runner.
    Compiled { run: RunFn },
}

/// One node test case.
pub struct Case {
    pub name: &'static str,
    /// The ONNX operator it tests (for `_expanded` cases, the one the function expands).
    pub operator: &'static str,
    /// The model is the operator's function body, not the operator itself.
    pub expanded: bool,
    /// Number of graph inputs.
    pub inputs: usize,
    /// Each graph output's ONNX element type (`FLOAT`, `BFLOAT16`, ...) or kind.
    pub outputs: &'static [&'static str],
    pub status: Status,
}

#[allow(clippy::all, unused, non_snake_case, non_upper_case_globals)]
mod generated {
    use super::{Case, Status};
    include!(concat!(env!("OUT_DIR"), "/cases.rs"));
}

pub use generated::{CASES, NODE_DIR};

/// Fails with instructions when the node tests were never generated.
pub fn require_testdata() {
    let missing = env!("KILN_TESTDATA_MISSING");
    assert!(
        missing.is_empty(),
        "no node tests: {missing} is missing. Run `.venv/bin/python scripts/make_node_tests.py` \
         (after scripts/setup-python.sh), or `bash .ci/run`, then rebuild"
    );
}

/// Element types as stored in the `.npy` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    F16,
    Bf16,
    F32,
    F64,
    /// Signed integer of this many bytes.
    Int(usize),
    /// Unsigned integer (or raw bits of a float8/float4 type) of this many bytes.
    Uint(usize),
    Bool,
}

impl Elem {
    pub fn size(self) -> usize {
        match self {
            Elem::F16 | Elem::Bf16 => 2,
            Elem::F32 => 4,
            Elem::F64 => 8,
            Elem::Int(n) | Elem::Uint(n) => n,
            Elem::Bool => 1,
        }
    }
}

/// A tensor read from an `.npy` file: little-endian bytes in an 8-byte-aligned buffer.
pub struct Tensor {
    pub elem: Elem,
    pub shape: Vec<usize>,
    words: Vec<u64>,
    len: usize,
}

impl Tensor {
    /// The raw bytes, aligned for every element type (as `run_bytes` requires).
    pub fn bytes(&self) -> &[u8] {
        let all: &[u8] = bytemuck::cast_slice(&self.words);
        &all[..self.len]
    }
}

/// Reads a C-order, little-endian `.npy` of a numeric or bool dtype.
pub fn read_npy(path: &Path) -> Result<Tensor, String> {
    use npyz::{DType, Endianness, TypeChar};
    let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(|e| fail(&e))?;
    let mut reader = std::io::BufReader::new(file);
    let header = npyz::NpyHeader::from_reader(&mut reader).map_err(|e| fail(&e))?;
    let DType::Plain(ty) = header.dtype() else {
        return Err(fail(&"not a plain dtype"));
    };
    let size = ty.size_field() as usize;
    let elem = match (ty.type_char(), size) {
        (TypeChar::Float, 2) => Elem::F16,
        (TypeChar::Float, 4) => Elem::F32,
        (TypeChar::Float, 8) => Elem::F64,
        (TypeChar::Int, n) => Elem::Int(n),
        (TypeChar::Uint, n) => Elem::Uint(n),
        (TypeChar::Bool, 1) => Elem::Bool,
        _ => return Err(fail(&format!("unsupported dtype {ty}"))),
    };
    if size > 1 && ty.endianness() == Endianness::Big {
        return Err(fail(&"big-endian data"));
    }
    if header.order() != npyz::Order::C && header.shape().len() > 1 {
        return Err(fail(&"Fortran order"));
    }
    let shape: Vec<usize> = header.shape().iter().map(|&d| d as usize).collect();
    let len = shape.iter().product::<usize>() * size;
    let mut bytes = Vec::with_capacity(len);
    std::io::Read::read_to_end(&mut reader, &mut bytes).map_err(|e| fail(&e))?;
    if bytes.len() != len {
        return Err(fail(&format!("{} data bytes, expected {len}", bytes.len())));
    }
    let mut words = vec![0u64; len.div_ceil(8)];
    bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..len].copy_from_slice(&bytes);
    Ok(Tensor {
        elem,
        shape,
        words,
        len,
    })
}

/// Float tolerance: `|got - expected| <= atol + rtol * |expected|`.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

/// Compares one output with its expected tensor: floats within `tol` (NaN equals NaN,
/// same-sign infinities are equal), integers and bool exactly, and the shape and length.
/// `onnx_type` tells bfloat16 (stored as uint16 bits) from uint16. The float8 and
/// float4 types are stored as their uint8 bits and int4/int2 as int8 values, one per
/// byte as Kiln holds them, and compared exactly: the reference rounds once from the
/// exact value to a format of 8 bits or fewer, so the same rounding gives the same
/// bits and any other is at least one code off (ONNX's test data are bits, not values
/// with a tolerance).
pub fn compare(
    got: &[u8],
    got_shape: &[usize],
    want: &Tensor,
    onnx_type: &str,
    tol: Tolerance,
) -> Result<(), String> {
    let elem = match (want.elem, onnx_type) {
        (Elem::Uint(2), "BFLOAT16") => Elem::Bf16,
        (e, _) => e,
    };
    // ONNX's generator stores a NumPy scalar result (a rank-0 output) as shape [1].
    let scalar_as_one = got_shape.is_empty() && want.shape == [1];
    if got_shape != want.shape.as_slice() && !scalar_as_one {
        return Err(format!("shape {got_shape:?}, expected {:?}", want.shape));
    }
    // Half-precision results are compared at their own precision: a value rounded to
    // bfloat16 (8 significant bits) or float16 (11) at a different point of the
    // computation than the reference differs by one unit in the last place, which is
    // 2^-8 (3.9e-3) and 2^-11 (4.9e-4) relative, above the default rtol of 1e-3; an
    // expanded graph rounds after every node, so bfloat16 gets two units (2^-6).
    let tol = match elem {
        Elem::Bf16 => Tolerance {
            rtol: tol.rtol.max(1.0 / 64.0),
            atol: tol.atol,
        },
        Elem::F16 => Tolerance {
            rtol: tol.rtol.max(1.0 / 512.0),
            atol: tol.atol,
        },
        _ => tol,
    };
    let want_bytes = want.bytes();
    if got.len() != want_bytes.len() {
        return Err(format!(
            "{} bytes, expected {} ({onnx_type} {:?})",
            got.len(),
            want_bytes.len(),
            want.shape
        ));
    }
    let n = want_bytes.len() / elem.size().max(1);
    let value = |b: &[u8], i: usize| -> f64 { decode(elem, &b[i * elem.size()..][..elem.size()]) };
    let float = matches!(elem, Elem::F16 | Elem::Bf16 | Elem::F32 | Elem::F64);
    let (mut bad, mut worst) = (0usize, None::<(f64, usize)>);
    for i in 0..n {
        let (g, w) = (value(got, i), value(want_bytes, i));
        let ok = if !float {
            got[i * elem.size()..][..elem.size()] == want_bytes[i * elem.size()..][..elem.size()]
        } else if w.is_nan() || g.is_nan() {
            w.is_nan() && g.is_nan()
        } else if w.is_infinite() || g.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= tol.atol + tol.rtol * w.abs()
        };
        if !ok {
            bad += 1;
            let d = if (g - w).is_nan() {
                f64::INFINITY
            } else {
                (g - w).abs()
            };
            if worst.is_none_or(|(m, _)| d > m) {
                worst = Some((d, i));
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((d, i)) => Err(format!(
            "{bad} of {n} elements differ; max |diff| {d:.3e} at flat index {i} (got {}, expected {})",
            value(got, i),
            value(want_bytes, i)
        )),
    }
}

/// One element as `f64` (exact for every type but 64-bit integers beyond 2^53, which
/// are compared by their bytes anyway).
fn decode(elem: Elem, b: &[u8]) -> f64 {
    let u = b
        .iter()
        .rev()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
    match elem {
        Elem::F16 => f16_to_f64(u as u16),
        Elem::Bf16 => f64::from(f32::from_bits((u as u32) << 16)),
        Elem::F32 => f64::from(f32::from_bits(u as u32)),
        Elem::F64 => f64::from_bits(u),
        Elem::Int(n) => {
            let shift = 64 - 8 * n as u32;
            ((u << shift) as i64 >> shift) as f64
        }
        Elem::Uint(_) | Elem::Bool => u as f64,
    }
}

fn f16_to_f64(h: u16) -> f64 {
    let sign = if h >> 15 == 1 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// A case's outcome when run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed(String),
    Unsupported(String),
    Excluded(String),
}

impl Outcome {
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed(_) => "failed",
            Outcome::Unsupported(_) => "unsupported",
            Outcome::Excluded(_) => "excluded",
        }
    }

    /// The expectations-file line of a case that does not pass.
    pub fn line(&self, case: &str) -> Option<String> {
        let reason = match self {
            Outcome::Passed => return None,
            Outcome::Failed(r) | Outcome::Unsupported(r) | Outcome::Excluded(r) => r,
        };
        let reason: String = reason
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        Some(format!("{case} {}: {}", self.status(), reason.trim()))
    }
}

/// The per-operator table and the total line.
pub fn report(results: &[(&Case, Outcome)]) -> String {
    let mut per_op: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    let mut total = [0usize; 4];
    for (case, outcome) in results {
        let k = match outcome {
            Outcome::Passed => 0,
            Outcome::Failed(_) => 1,
            Outcome::Unsupported(_) => 2,
            Outcome::Excluded(_) => 3,
        };
        per_op.entry(case.operator).or_default()[k] += 1;
        total[k] += 1;
    }
    let mut s = format!(
        "{:<36} {:>6} {:>6} {:>11} {:>8}\n",
        "operator", "passed", "failed", "unsupported", "excluded"
    );
    for (op, c) in &per_op {
        writeln!(
            s,
            "{op:<36} {:>6} {:>6} {:>11} {:>8}",
            c[0], c[1], c[2], c[3]
        )
        .unwrap();
    }
    let n = results.len();
    writeln!(
        s,
        "node tests: {} passed of {n} cases ({:.1} %); {} failed, {} unsupported, {} excluded",
        total[0],
        100.0 * total[0] as f64 / n.max(1) as f64,
        total[1],
        total[2],
        total[3]
    )
    .unwrap();
    s
}

/// Differences between the expectations file's lines and today's: `(remove, add)`.
/// A line whose case and status match is kept whatever its reason says (reasons carry
/// error texts and error figures that change without anything getting better or worse).
pub fn diff_expectations(file: &[String], now: &[String]) -> (Vec<String>, Vec<String>) {
    let key = |l: &String| {
        let (case, rest) = l.split_once(' ').unwrap_or((l, ""));
        let status = rest.split(':').next().unwrap_or("");
        (case.to_owned(), status.to_owned())
    };
    let file_keys: std::collections::HashSet<_> = file.iter().map(key).collect();
    let now_keys: std::collections::HashSet<_> = now.iter().map(key).collect();
    let remove = file
        .iter()
        .filter(|l| !now_keys.contains(&key(l)))
        .cloned()
        .collect();
    let add = now
        .iter()
        .filter(|l| !file_keys.contains(&key(l)))
        .cloned()
        .collect();
    (remove, add)
}
