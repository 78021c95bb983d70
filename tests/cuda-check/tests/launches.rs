//! What every generated CUDA module launches, recorded without running anything: the
//! nine zoo models and the four in-memory models. That they compile at all is this
//! crate's build.

use kiln_cuda_check::{CudaModel, Recorder, SMALL, ZOO, require_testdata, small};
use kiln_runtime::Error;
use kiln_runtime::cuda::cublas::sgemm_args;
use kiln_runtime::cuda::geometry::{KERNEL_NAMES, extents};
use kiln_runtime::cuda::{Launch, Launcher, Launches, Ptr, Ptrs};
use kiln_runtime::params::Gemm;

/// All nine zoo models were compiled for CUDA (so this crate's build checked them).
#[test]
fn nine_zoo_modules_compiled() {
    require_testdata();
    let names: Vec<&str> = ZOO.iter().map(|m| m.name).collect();
    assert_eq!(
        names,
        [
            "alexnet",
            "densenet121",
            "inception_v1",
            "inception_v2",
            "resnet50",
            "shufflenet",
            "squeezenet",
            "vgg19",
            "zfnet512"
        ]
    );
}

/// For each model: the launches cover the steps in order, use exactly the kernels in
/// `KERNELS`, have sane geometry, and point every tensor inside its buffer, by the
/// extents the emulator and the device launcher check (`geometry::extents`).
fn check(m: &CudaModel) {
    let mut rec = Recorder::default();
    (m.launch_all)(&mut rec).unwrap_or_else(|e| panic!("{}: {e}", m.name));

    // Steps in order: the launches' step names, runs merged, are STEPS' node names,
    // runs merged (a variadic Sum is several steps of one node; a Concat one step of
    // several launches), except Concats whose inputs the plan placed in their output
    // (slices), which launch nothing.
    let merge = |names: Vec<(&'static str, &'static str)>| {
        let mut v = names;
        v.dedup_by_key(|(node, _)| *node);
        v
    };
    let launched = merge(rec.launches.iter().map(|(s, _, _)| (*s, "")).collect());
    let steps = merge(m.steps.to_vec());
    let mut next = launched.iter().peekable();
    for &(node, op) in &steps {
        if next.peek().is_some_and(|(s, _)| *s == node) {
            next.next();
        } else {
            assert_eq!(op, "Concat", "{}: step {node} launches nothing", m.name);
        }
    }
    assert_eq!(next.next(), None, "{}: launches out of step order", m.name);

    // KERNELS: each launched kernel once, and nothing else.
    let mut used: Vec<&str> = Vec::new();
    for (_, l, _) in &rec.launches {
        if !used.contains(&l.kernel) {
            used.push(l.kernel);
        }
    }
    assert_eq!(m.kernels, used.as_slice(), "{}: KERNELS", m.name);
    for k in m.kernels {
        assert!(KERNEL_NAMES.contains(k), "{}: unknown kernel {k}", m.name);
    }

    for (step, l, p) in &rec.launches {
        let at = format!("{} step {step} ({})", m.name, l.kernel);
        check_geometry(&at, l);
        check_ptrs(&at, m, l, p);
    }

    for (i, &(offset, len)) in m.output_regions.iter().enumerate() {
        assert_eq!(len, m.outputs[i].len(), "{}: output {i}", m.name);
        assert!(
            offset % 4 == 0 && offset + 4 * len <= m.arena_bytes,
            "{}: output {i}",
            m.name
        );
    }
}

fn check_geometry(at: &str, l: &Launch) {
    let threads: u32 = l.block.iter().product();
    assert!((1..=1024).contains(&threads), "{at}: block {:?}", l.block);
    assert!(l.block[2] <= 64, "{at}: block {:?}", l.block);
    assert!(
        l.grid[0] >= 1 && (1..=65535).contains(&l.grid[1]) && (1..=65535).contains(&l.grid[2]),
        "{at}: grid {:?}",
        l.grid
    );
    assert!(
        l.shared_bytes <= 48 * 1024,
        "{at}: {} shared bytes",
        l.shared_bytes
    );
}

/// Each pointer names a region inside its buffer for the elements the kernel spans.
fn check_ptrs(at: &str, m: &CudaModel, l: &Launch, p: &Ptrs) {
    let e = extents(l).unwrap_or_else(|| panic!("{at}: no extents for {:?}", l.ints));
    let inside = |what: &str, ptr: Ptr, elems: usize, optional: bool| match ptr {
        Ptr::Null => assert!(elems == 0 || optional, "{at}: {what} is null"),
        Ptr::Arena(o) => assert!(
            o % 4 == 0 && o + 4 * elems <= m.arena_bytes,
            "{at}: {what} arena {o}+{elems} elements past {}",
            m.arena_bytes
        ),
        Ptr::Weights(o) => assert!(
            o % 64 == 0 && o + 4 * elems <= m.weights_bytes,
            "{at}: {what} weights {o}+{elems} elements past {}",
            m.weights_bytes
        ),
        Ptr::Input(i) => assert!(
            i < m.inputs.len() && elems <= m.inputs[i].len(),
            "{at}: {what} input {i} for {elems} elements"
        ),
    };
    assert!(matches!(p.out, Ptr::Arena(_)), "{at}: output {:?}", p.out);
    inside("output", p.out, e.out, false);
    for i in 0..p.inputs.len() {
        inside(
            &format!("input {i}"),
            p.inputs[i],
            e.inputs[i],
            e.optional[i],
        );
    }
    assert_eq!(p.scratch, Ptr::Null, "{at}: CUDA kernels take no scratch");
}

#[test]
fn zoo_launches() {
    require_testdata();
    for m in ZOO {
        check(m);
    }
}

#[test]
fn small_model_launches() {
    assert_eq!(SMALL.len(), 5);
    for m in SMALL {
        check(m);
    }
}

/// Records each Gemm step's parameters as the device launcher receives them.
#[derive(Default)]
struct GemmRecorder {
    gemms: Vec<(&'static str, Option<kiln_runtime::cuda::cublas::SgemmArgs>)>,
}

impl Launcher for GemmRecorder {
    fn launch(&mut self, _: &'static str, _: &Launch, _: &Ptrs) -> Result<(), Error> {
        Ok(())
    }

    fn gemm(
        &mut self,
        step: &'static str,
        p: &Gemm,
        _: &Launches,
        ptrs: &Ptrs,
    ) -> Result<(), Error> {
        let has_c = ptrs.inputs[2] != Ptr::Null;
        self.gemms.push((step, sgemm_args(p, has_c)));
        Ok(())
    }
}

/// `gemms_cuda`'s two steps are ones cuBLAS takes alone, so the device test's cuBLAS
/// mode really runs `cublasSgemm`; the tiny classifier's Gemm (a bias vector) is not.
#[test]
fn cublas_takes_the_gemms_model() {
    let record = |name| {
        let mut rec = GemmRecorder::default();
        (small(name).launch_all)(&mut rec).unwrap_or_else(|e| panic!("{name}: {e}"));
        rec.gemms
    };
    let gemms = record("gemms_cuda");
    assert_eq!(
        gemms.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        ["plain", "scaled"]
    );
    let scaled = gemms[1].1.expect("cuBLAS expresses the scaled Gemm");
    assert_eq!((scaled.alpha, scaled.beta), (0.5, 2.0));
    assert!(gemms[0].1.is_some(), "cuBLAS expresses the plain Gemm");
    let tiny = record("tiny_cuda");
    assert_eq!(tiny.len(), 1);
    assert!(tiny[0].1.is_none(), "a bias vector is not cuBLAS's C");
}
