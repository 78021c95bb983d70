//! The CUDA target's host side.
//!
//! Generated CUDA modules are straight-line sequences of [`Launcher::launch`] calls.
//! Each call names a [`Launch`] — kernel, grid, block, shared memory and scalar
//! arguments — computed at compile time by the `const fn`s in [`geometry`] from the
//! same parameter structs the CPU kernels take, and a [`Ptrs`] naming where its
//! tensors live (arena or weights byte offsets, or a model input).
//!
//! Two launchers exist: the device one (cudarc, feature `cuda`), and the CPU emulator
//! (feature `cuda-emulator`), which runs the very same `.cu` sources compiled as C++
//! under a shim, with the same grid, block and [`KernelArgs`]. Because both call the
//! same geometry functions, the emulator checks what the GPU will receive.
//!
//! Every kernel takes one argument, [`KernelArgs`] by value, so one launcher serves
//! all kernels. Kernels must be correct when `out` is the same pointer as an input
//! (the planner aliases elementwise and row-wise steps in place): no `__restrict__` on
//! pointers that may alias, and each element read before it is written by the same
//! thread (row-wise kernels: the whole row read before any of it is written).
//!
//! The kernels' CUDA C sources are in [`sources`] (embedded for NVRTC, re-exported by
//! [`geometry`] beside the kernel names).

pub mod cublas;
pub mod device;
#[cfg(feature = "cuda-emulator")]
pub mod emulator;
pub mod geometry;
pub mod launch;
#[cfg(feature = "cuda")]
pub mod nvrtc;
pub mod sources;

pub use device::{DeviceContext, DeviceModel, LaunchFn};
pub use launch::{
    KernelArgs, Launch, Launcher, Launches, MAX_FLOATS, MAX_INPUTS, MAX_INTS, Ptr, Ptrs,
};
