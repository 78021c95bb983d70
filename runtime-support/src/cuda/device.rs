//! The device launcher: weights resident on the GPU, one arena and stream per context.
//! Without the `cuda` feature every constructor returns [`Error::Cuda`], so a generated
//! CUDA module still compiles (and fails cleanly at run time).
//!
//! PLACEHOLDER API (the lead implements it with cudarc); generated code may rely on
//! exactly these signatures.

use super::Launcher;
use crate::{Error, TensorInfo};

/// The launches of a whole model, as generated code provides them.
pub type LaunchFn = fn(&mut dyn Launcher) -> Result<(), Error>;

/// Weights uploaded once into one device allocation, and the compiled kernels.
pub struct DeviceModel {
    _private: (),
}

/// One device arena, an input staging area and a stream; optionally a captured graph.
pub struct DeviceContext {
    _private: (),
}

impl DeviceModel {
    /// Uploads `weights` to device `ordinal` and compiles/loads `kernels` (names of
    /// `extern "C"` kernels in the `.cu` sources).
    pub fn new(ordinal: usize, weights: &[f32], kernels: &[&'static str]) -> Result<Self, Error> {
        let _ = (ordinal, weights, kernels);
        Err(Error::Cuda("not implemented yet".into()))
    }
}

impl DeviceContext {
    /// Allocates the arena (`arena_bytes`) and staging for `inputs` on `model`'s device.
    pub fn new(model: &DeviceModel, arena_bytes: usize, inputs: &'static [TensorInfo]) -> Result<Self, Error> {
        let _ = (model, arena_bytes, inputs);
        Err(Error::Cuda("not implemented yet".into()))
    }

    /// Replays the launches as one captured CUDA graph (captured on the first run).
    pub fn use_graph(&mut self, on: bool) {
        let _ = on;
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
        let _ = (model, inputs, outputs, output_regions, launches);
        Err(Error::Cuda("not implemented yet".into()))
    }
}
