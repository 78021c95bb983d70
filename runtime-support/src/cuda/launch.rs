//! Plain data describing kernel launches; no CUDA dependency, so the compiler, the
//! device launcher and the CPU emulator all share it.

use crate::Error;

/// Scalar `int` arguments a kernel can take.
pub const MAX_INTS: usize = 24;
/// Scalar `float` arguments a kernel can take.
pub const MAX_FLOATS: usize = 8;
/// Tensor inputs a kernel can take (BatchNormalization has five).
pub const MAX_INPUTS: usize = 5;

/// One kernel launch, fixed at compile time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Launch {
    /// The `extern "C" __global__` function's name in the `.cu` sources.
    pub kernel: &'static str,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Dynamic shared memory in bytes (`extern __shared__`).
    pub shared_bytes: u32,
    /// Scalar arguments, meaning fixed per kernel (see its `.cu` source).
    pub ints: [i32; MAX_INTS],
    pub floats: [f32; MAX_FLOATS],
}

/// The launches of one step, in order (most steps have one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Launches {
    pub len: usize,
    pub list: [Launch; 3],
}

impl Launches {
    pub fn as_slice(&self) -> &[Launch] {
        &self.list[..self.len]
    }
}

/// Where a kernel's tensor lives, resolved by the launcher to an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ptr {
    Null,
    /// Byte offset into the context's arena.
    Arena(usize),
    /// Byte offset into the model's weights.
    Weights(usize),
    /// The model input with this index.
    Input(usize),
}

/// The tensors of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ptrs {
    pub out: Ptr,
    pub inputs: [Ptr; MAX_INPUTS],
    pub scratch: Ptr,
}

/// The one argument every kernel takes, by value. Mirrors `struct KArgs` in
/// `runtime-support/cuda/kiln.cuh`; addresses are device addresses on the GPU and host
/// addresses in the emulator.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelArgs {
    pub out: u64,
    pub inputs: [u64; MAX_INPUTS],
    pub scratch: u64,
    pub ints: [i32; MAX_INTS],
    pub floats: [f32; MAX_FLOATS],
}

/// Something that runs launches: the GPU stream or the CPU emulator.
pub trait Launcher {
    /// Runs (or enqueues) `launch` with its tensors at `ptrs`. `step` names the ONNX
    /// node for errors.
    fn launch(&mut self, step: &'static str, launch: &Launch, ptrs: &Ptrs) -> Result<(), Error>;

    /// Runs a Gemm step: its launches by default; the device launcher may call cuBLAS
    /// instead when asked to (see [`crate::cuda::cublas`]).
    fn gemm(
        &mut self,
        step: &'static str,
        p: &crate::params::Gemm,
        launches: &Launches,
        ptrs: &Ptrs,
    ) -> Result<(), Error> {
        let _ = p;
        self.launch_all(step, launches, ptrs)
    }

    /// Runs every launch of one step.
    fn launch_all(
        &mut self,
        step: &'static str,
        launches: &Launches,
        ptrs: &Ptrs,
    ) -> Result<(), Error> {
        for l in launches.as_slice() {
            self.launch(step, l, ptrs)?;
        }
        Ok(())
    }
}
