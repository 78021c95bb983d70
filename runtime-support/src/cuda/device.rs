//! The device launcher: weights resident on the GPU, one arena and stream per context.
//!
//! With the `cuda` feature this is cudarc; without it every constructor returns
//! [`Error::Cuda`], so a generated CUDA module still compiles everywhere and fails
//! cleanly at run time. Either way a machine with no driver gets an `Err`, never a
//! panic: cudarc panics inside `cuInit` when `libcuda` is missing, so presence is
//! checked first.

use super::Launcher;
use crate::Error;

/// The launches of a whole model, as generated code provides them (a `launch_dyn`
/// that calls its generic `launch_all`).
pub type LaunchFn = fn(&mut dyn Launcher) -> Result<(), Error>;

#[cfg(feature = "cuda")]
#[path = "device_cudarc.rs"]
mod imp;

#[cfg(not(feature = "cuda"))]
mod imp {
    use super::LaunchFn;
    use crate::{Error, TensorInfo};

    fn disabled() -> Error {
        Error::Cuda("kiln-runtime was built without its `cuda` feature".into())
    }

    /// Weights uploaded once into one device allocation, and the compiled kernels.
    pub struct DeviceModel {
        _private: (),
    }

    /// One device arena, input staging and a stream; optionally a captured graph.
    pub struct DeviceContext {
        _private: (),
    }

    impl DeviceModel {
        /// Always an error: the `cuda` feature is off.
        pub fn new(
            ordinal: usize,
            weights: &[f32],
            kernels: &[&'static str],
        ) -> Result<Self, Error> {
            let _ = (ordinal, weights, kernels);
            Err(disabled())
        }
    }

    impl DeviceContext {
        /// Always an error: the `cuda` feature is off.
        pub fn new(
            model: &DeviceModel,
            arena_bytes: usize,
            inputs: &'static [TensorInfo],
        ) -> Result<Self, Error> {
            let _ = (model, arena_bytes, inputs);
            Err(disabled())
        }

        /// No effect: there is no context to run.
        pub fn use_graph(&mut self, on: bool) {
            let _ = on;
        }

        /// Always an error: the `cuda` feature is off.
        pub fn use_cublas(&mut self, on: bool) -> Result<(), Error> {
            let _ = on;
            Err(disabled())
        }

        /// Always an error: the `cuda` feature is off.
        pub fn run_host(
            &mut self,
            model: &DeviceModel,
            inputs: &[&[f32]],
            outputs: &mut [&mut [f32]],
            output_regions: &[(usize, usize)],
            launches: LaunchFn,
        ) -> Result<(), Error> {
            let _ = (model, inputs, outputs, output_regions, launches);
            Err(disabled())
        }
    }
}

pub use imp::{DeviceContext, DeviceModel};

// A model is shared between threads; a context moves to the thread that runs it.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    fn sendable<T: Send>() {}
    shared::<DeviceModel>();
    sendable::<DeviceContext>();
};
