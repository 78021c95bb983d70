//! cudarc implementation of [`DeviceModel`] and [`DeviceContext`].
//!
//! Addresses go to kernels as plain `u64`s inside [`KernelArgs`]: the arena, the
//! weights and the input staging buffers are allocated before the first launch and
//! never move, so a captured CUDA graph replays with the same addresses. One stream per
//! context orders everything that context does; the weights are uploaded and the
//! model's stream synchronised before `DeviceModel::new` returns.
//!
//! The arena's and the weights' addresses are read once, when they are allocated, and
//! never through `device_ptr` while launching: cudarc's event tracking makes that call
//! wait on the allocation's event, and waiting on an event recorded before a graph
//! capture began invalidates the capture (seen on an H100: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED).

use std::sync::Arc;

use cudarc::cublas::{CudaBlas, result as blas, sys as blas_sys};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaGraph, CudaSlice, CudaStream, CudaView, DevicePtr, DeviceRepr,
    LaunchConfig, PushKernelArg, sys,
};

use super::LaunchFn;
use crate::cuda::cublas::{SgemmArgs, sgemm_args};
use crate::cuda::{KernelArgs, Launch, Launcher, Launches, Ptr, Ptrs, geometry, nvrtc};
use crate::params::Gemm;
use crate::{Error, TensorInfo};

// SAFETY: `KernelArgs` is `#[repr(C)]` plain data (u64 addresses, i32 and f32 arrays)
// with the same layout as `struct KArgs` in kiln.cuh, so passing it by value as the
// single kernel parameter is what the kernels expect.
unsafe impl DeviceRepr for KernelArgs {}

fn driver(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Cuda(format!("{what}: {e:?}"))
}

/// Weights uploaded once into one device allocation, and the compiled kernels.
pub struct DeviceModel {
    ctx: Arc<CudaContext>,
    weights: CudaSlice<f32>,
    /// `weights`' device address, read once after the upload.
    weights_addr: u64,
    /// Loaded kernels by name; a model uses a few dozen, so a linear scan is cheap.
    functions: Vec<(&'static str, CudaFunction)>,
}

impl DeviceModel {
    /// Uploads `weights` to device `ordinal` and compiles (NVRTC, for the device's
    /// compute capability) and loads the sources holding `kernels`.
    pub fn new(ordinal: usize, weights: &[f32], kernels: &[&'static str]) -> Result<Self, Error> {
        // SAFETY: only tries to dlopen libcuda by its usual names.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::Cuda(
                "no CUDA driver: libcuda.so could not be loaded on this machine".into(),
            ));
        }
        nvrtc::ensure_loaded()?;
        let ctx = CudaContext::new(ordinal).map_err(|e| driver("creating the context", e))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| driver("reading the compute capability", e))?;
        let arch = format!("--gpu-architecture=compute_{major}{minor}");
        let mut functions = Vec::with_capacity(kernels.len());
        for (file, src) in geometry::SOURCES {
            let wanted: Vec<&'static str> = kernels
                .iter()
                .copied()
                .filter(|k| geometry::source_of(k).is_some_and(|s| std::ptr::eq(s, *src)))
                .collect();
            if wanted.is_empty() {
                continue;
            }
            let compiled = nvrtc::compile(
                &nvrtc::self_contained(src),
                file,
                std::slice::from_ref(&arch),
            )?;
            let module = ctx
                .load_module(cudarc::nvrtc::Ptx::from_src(compiled.ptx))
                .map_err(|e| driver(&format!("loading {file}"), e))?;
            for k in wanted {
                let f = module
                    .load_function(k)
                    .map_err(|e| driver(&format!("loading kernel {k}"), e))?;
                functions.push((k, f));
            }
        }
        if let Some(missing) = kernels
            .iter()
            .find(|k| !functions.iter().any(|(n, _)| n == *k))
        {
            return Err(Error::Cuda(format!(
                "no CUDA source defines kernel `{missing}`"
            )));
        }
        let stream = ctx.default_stream();
        let weights = stream
            .clone_htod(weights)
            .map_err(|e| driver("uploading the weights", e))?;
        let weights_addr = weights.device_ptr(&stream).0;
        stream
            .synchronize()
            .map_err(|e| driver("uploading the weights", e))?;
        Ok(DeviceModel {
            ctx,
            weights,
            weights_addr,
            functions,
        })
    }

    fn function(&self, name: &str) -> Option<&CudaFunction> {
        self.functions
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| f)
    }
}

/// One device arena, input staging and a stream; optionally a captured graph.
pub struct DeviceContext {
    stream: Arc<CudaStream>,
    arena: CudaSlice<f32>,
    /// `arena`'s device address, read once at creation.
    arena_addr: u64,
    inputs: Vec<CudaSlice<f32>>,
    /// (address, bytes) of each staging buffer, fixed at creation.
    staging: Vec<(u64, usize)>,
    /// (address, bytes) of the inputs the next launches read: the staging buffers or
    /// the caller's device buffers. Preallocated; overwritten in place per run.
    current: Vec<(u64, usize)>,
    graph: Option<Graph>,
    /// The input addresses baked into `graph`; a run with others captures anew.
    graph_inputs: Vec<(u64, usize)>,
    use_graph: bool,
    /// Present when Gemm steps go to cuBLAS instead of the tiled kernel.
    blas: Option<CudaBlas>,
}

impl DeviceContext {
    /// Allocates the arena (`arena_bytes`) and staging for `inputs` on `model`'s device.
    pub fn new(
        model: &DeviceModel,
        arena_bytes: usize,
        inputs: &'static [TensorInfo],
    ) -> Result<Self, Error> {
        let stream = model
            .ctx
            .new_stream()
            .map_err(|e| driver("creating a stream", e))?;
        let arena = stream
            .alloc_zeros::<f32>(arena_bytes.div_ceil(4).max(1))
            .map_err(|e| driver("allocating the arena", e))?;
        let arena_addr = arena.device_ptr(&stream).0;
        let inputs = inputs
            .iter()
            .map(|info| stream.alloc_zeros::<f32>(info.len().max(1)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| driver("allocating input buffers", e))?;
        let staging: Vec<(u64, usize)> = inputs
            .iter()
            .map(|s| (s.device_ptr(&stream).0, s.len() * 4))
            .collect();
        Ok(DeviceContext {
            current: staging.clone(),
            graph_inputs: staging.clone(),
            staging,
            stream,
            arena,
            arena_addr,
            inputs,
            graph: None,
            use_graph: false,
            blas: None,
        })
    }

    /// Replays the launches as one CUDA graph, captured on the next run.
    pub fn use_graph(&mut self, on: bool) {
        self.use_graph = on;
        if !on {
            self.graph = None;
        }
    }

    /// Sends Gemm steps that cuBLAS can express alone to `cublasSgemm` (on this
    /// context's stream) instead of the tiled kernel. Fails without a GPU.
    pub fn use_cublas(&mut self, on: bool) -> Result<(), Error> {
        self.graph = None;
        self.blas = match on {
            true => Some(
                CudaBlas::new(self.stream.clone())
                    .map_err(|e| driver("creating a cuBLAS handle", e))?,
            ),
            false => None,
        };
        Ok(())
    }

    /// Copies host `inputs` in, runs `launches`, and copies each output region
    /// `(byte offset, elements)` of the arena into `outputs`.
    pub fn run_host(
        &mut self,
        model: &DeviceModel,
        inputs: &[&[f32]],
        outputs: &mut [&mut [f32]],
        output_regions: &[(usize, usize)],
        launches: LaunchFn,
    ) -> Result<(), Error> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::InputCount {
                expected: self.inputs.len(),
                got: inputs.len(),
            });
        }
        if outputs.len() != output_regions.len() {
            return Err(Error::Cuda(format!(
                "expected {} output buffers, got {}",
                output_regions.len(),
                outputs.len()
            )));
        }
        self.current.copy_from_slice(&self.staging);
        for (host, dev) in inputs.iter().zip(&mut self.inputs) {
            if host.len() != dev.len() {
                return Err(Error::Cuda(format!(
                    "input of {} elements given for a {}-element input",
                    host.len(),
                    dev.len()
                )));
            }
            self.stream
                .memcpy_htod(*host, dev)
                .map_err(|e| driver("copying an input to the device", e))?;
        }
        self.launch(model, launches)?;
        for (out, &(offset, len)) in outputs.iter_mut().zip(output_regions) {
            let start = offset / 4;
            if out.len() != len || offset % 4 != 0 || start + len > self.arena.len() {
                return Err(Error::Cuda(format!(
                    "output region {offset}+{len} elements does not match a {}-element buffer",
                    out.len()
                )));
            }
            let view = self.arena.slice(start..start + len);
            self.stream
                .memcpy_dtoh(&view, &mut **out)
                .map_err(|e| driver("copying an output to the host", e))?;
        }
        self.stream
            .synchronize()
            .map_err(|e| driver("running the model", e))
    }

    /// Runs on inputs already on the device, in [`Self::stream`]'s order, without
    /// copying them; the outputs stay in the arena ([`Self::output`]). Returns once
    /// the work is enqueued.
    pub fn run_device(
        &mut self,
        model: &DeviceModel,
        inputs: &[&CudaSlice<f32>],
        launches: LaunchFn,
    ) -> Result<(), Error> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::InputCount {
                expected: self.inputs.len(),
                got: inputs.len(),
            });
        }
        for ((slot, given), staging) in self.current.iter_mut().zip(inputs).zip(&self.staging) {
            if given.len() * 4 != staging.1 {
                return Err(Error::Cuda(format!(
                    "device input of {} elements given for a {}-element input",
                    given.len(),
                    staging.1 / 4
                )));
            }
            *slot = (given.device_ptr(&self.stream).0, staging.1);
        }
        self.launch(model, launches)
    }

    /// An output region `(byte offset, elements)` of the arena, on the device.
    pub fn output(&self, region: (usize, usize)) -> Result<CudaView<'_, f32>, Error> {
        let (offset, len) = region;
        let start = offset / 4;
        if offset % 4 != 0 || start + len > self.arena.len() {
            return Err(Error::Cuda(format!(
                "output region {offset}+{len} lies outside the arena"
            )));
        }
        Ok(self.arena.slice(start..start + len))
    }

    /// The stream this context enqueues everything on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Enqueues the launches, through the captured graph when enabled.
    fn launch(&mut self, model: &DeviceModel, launches: LaunchFn) -> Result<(), Error> {
        if self.use_graph && (self.graph.is_none() || self.graph_inputs != self.current) {
            self.graph = None;
            self.graph_inputs.copy_from_slice(&self.current);
            self.stream
                .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                .map_err(|e| driver("beginning graph capture", e))?;
            let run = launches(&mut self.launcher(model));
            let graph = self
                .stream
                .end_capture(sys::CUgraphInstantiate_flags(0))
                .map_err(|e| driver("ending graph capture", e))?;
            run?;
            self.graph = graph.map(Graph);
        }
        match &self.graph {
            Some(g) if self.use_graph => g.0.launch().map_err(|e| driver("launching the graph", e)),
            _ => launches(&mut self.launcher(model)),
        }
    }

    fn launcher<'a>(&'a self, model: &'a DeviceModel) -> DeviceLauncher<'a> {
        DeviceLauncher {
            model,
            blas: self.blas.as_ref(),
            stream: &self.stream,
            arena: (self.arena_addr, self.arena.len() * 4),
            weights: (model.weights_addr, model.weights.len() * 4),
            inputs: &self.current,
        }
    }
}

/// A captured graph that may move between threads with its context.
struct Graph(CudaGraph);

// SAFETY: cudarc leaves `CudaGraph` !Send only because it holds raw driver handles.
// CUDA graph and graph-exec handles are not bound to the thread that created them
// (`CudaGraph::launch` binds the context to the calling thread first); the graph is
// reached only through `&mut DeviceContext`, so one thread uses it at a time.
unsafe impl Send for Graph {}

/// Resolves [`Ptr`]s to device addresses and enqueues launches on one stream.
struct DeviceLauncher<'a> {
    model: &'a DeviceModel,
    blas: Option<&'a CudaBlas>,
    stream: &'a Arc<CudaStream>,
    /// (base address, bytes) of each region kind.
    arena: (u64, usize),
    weights: (u64, usize),
    inputs: &'a [(u64, usize)],
}

impl DeviceLauncher<'_> {
    /// The device address of `p`, checked to hold `elements` f32 inside its buffer
    /// (a null pointer is allowed only where `optional`).
    fn address(
        &self,
        step: &'static str,
        kernel: &'static str,
        p: Ptr,
        elements: usize,
        optional: bool,
    ) -> Result<u64, Error> {
        let (base, len, offset) = match p {
            Ptr::Null if optional || elements == 0 => return Ok(0),
            Ptr::Null => {
                return Err(launch_error(
                    step,
                    kernel,
                    "a required tensor is missing".into(),
                ));
            }
            Ptr::Arena(o) => (self.arena.0, self.arena.1, o),
            Ptr::Weights(o) => (self.weights.0, self.weights.1, o),
            Ptr::Input(i) => match self.inputs.get(i) {
                Some(&(b, l)) => (b, l, 0),
                None => return Err(launch_error(step, kernel, format!("no input {i}"))),
            },
        };
        let end = elements.checked_mul(4).and_then(|b| b.checked_add(offset));
        if end.is_none_or(|end| end > len) {
            return Err(launch_error(
                step,
                kernel,
                format!("{p:?} with {elements} elements lies outside its {len}-byte buffer"),
            ));
        }
        Ok(base + offset as u64)
    }
}

fn launch_error(step: &'static str, kernel: &'static str, message: String) -> Error {
    Error::Launch {
        step,
        kernel,
        message,
    }
}

impl DeviceLauncher<'_> {
    /// One Gemm step through cuBLAS: a dense `C` is copied into the output first,
    /// because cuBLAS accumulates into its `C` in place.
    fn cublas_gemm(
        &self,
        blas: &CudaBlas,
        step: &'static str,
        g: &SgemmArgs,
        p: &Gemm,
        ptrs: &Ptrs,
    ) -> Result<(), Error> {
        const KERNEL: &str = "cublasSgemm";
        let err = |m: String| launch_error(step, KERNEL, m);
        let int = |v: usize| i32::try_from(v).map_err(|_| err(format!("{v} exceeds cuBLAS's int")));
        let a = self.address(step, KERNEL, ptrs.inputs[0], p.m * p.k, false)?;
        let b = self.address(step, KERNEL, ptrs.inputs[1], p.k * p.n, false)?;
        let y = self.address(step, KERNEL, ptrs.out, p.m * p.n, false)?;
        if g.beta != 0.0 {
            let c = self.address(step, KERNEL, ptrs.inputs[2], p.m * p.n, false)?;
            // SAFETY: both regions hold m·n f32 (the compiler planned the output with
            // that length and a dense C has those strides), on this context's stream.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    y,
                    c,
                    p.m * p.n * 4,
                    self.stream.cu_stream(),
                )
            }
            .map_err(|e| err(format!("copying C: {e:?}")))?;
        }
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        // cuBLAS's A is the ONNX B (see cuda::cublas).
        let (ca, cb) = if g.swapped { (b, a) } else { (a, b) };
        // SAFETY: the handle is bound to this context's stream; the addresses are
        // device allocations of this context and model holding the matrices with the
        // leading dimensions `sgemm_args` derived from the planned shapes; alpha and
        // beta are host scalars (the handle's default pointer mode).
        unsafe {
            blas::sgemm(
                *blas.handle(),
                op(g.trans_a),
                op(g.trans_b),
                int(g.m)?,
                int(g.n)?,
                int(g.k)?,
                &g.alpha,
                ca as *const f32,
                int(g.lda)?,
                cb as *const f32,
                int(g.ldb)?,
                &g.beta,
                y as *mut f32,
                int(g.ldc)?,
            )
        }
        .map_err(|e| err(format!("{e:?}")))
    }
}

impl Launcher for DeviceLauncher<'_> {
    fn gemm(
        &mut self,
        step: &'static str,
        p: &Gemm,
        launches: &Launches,
        ptrs: &Ptrs,
    ) -> Result<(), Error> {
        let has_c = ptrs.inputs[2] != Ptr::Null;
        match (self.blas, sgemm_args(p, has_c)) {
            (Some(blas), Some(g)) => self.cublas_gemm(blas, step, &g, p, ptrs),
            _ => self.launch_all(step, launches, ptrs),
        }
    }

    fn launch(&mut self, step: &'static str, l: &Launch, ptrs: &Ptrs) -> Result<(), Error> {
        let f = self
            .model
            .function(l.kernel)
            .ok_or_else(|| launch_error(step, l.kernel, "kernel not loaded".into()))?;
        // Every pointer is checked against what the kernel may touch through it, so a
        // wrong offset is an error here rather than a stray device write.
        let ext = geometry::extents(l).ok_or_else(|| {
            launch_error(
                step,
                l.kernel,
                "arguments no geometry builder produces".into(),
            )
        })?;
        let mut inputs = [0u64; crate::cuda::MAX_INPUTS];
        for (i, (a, p)) in inputs.iter_mut().zip(ptrs.inputs).enumerate() {
            *a = self.address(step, l.kernel, p, ext.inputs[i], ext.optional[i])?;
        }
        let args = KernelArgs {
            out: self.address(step, l.kernel, ptrs.out, ext.out, false)?,
            inputs,
            scratch: self.address(step, l.kernel, ptrs.scratch, 0, true)?,
            ints: l.ints,
            floats: l.floats,
        };
        let cfg = LaunchConfig {
            grid_dim: (l.grid[0], l.grid[1], l.grid[2]),
            block_dim: (l.block[0], l.block[1], l.block[2]),
            shared_mem_bytes: l.shared_bytes,
        };
        let mut b = self.stream.launch_builder(f);
        b.arg(&args);
        // SAFETY: the kernel takes exactly one `KArgs` by value (see the DeviceRepr
        // impl above); every address in it points into an allocation this context or
        // its model owns and keeps alive until the stream is synchronised, and was
        // checked to start inside that allocation. The geometry functions keep each
        // kernel's accesses within the extents the compiler planned.
        unsafe { b.launch(cfg) }
            .map(|_| ())
            .map_err(|e| launch_error(step, l.kernel, format!("{e:?}")))
    }
}
