//! The CPU emulator of the CUDA target (feature `cuda-emulator`): the kernels of
//! `runtime-support/cuda/`, compiled as C++ under `cuda/shim/cuda_shim.h` by this
//! crate's build script, run with the same grid, block and [`KernelArgs`] the GPU
//! would get.
//!
//! The threads of a block are fibers that run until they reach `__syncthreads()`;
//! between barriers they run in the order chosen by [`set_thread_order`] (forward,
//! reverse or a seeded shuffle), and shared memory is poisoned before every block, so a
//! missing barrier changes the result. A thread returning while others wait at a
//! barrier, or threads waiting at different barriers, fail the launch. Launches are
//! serialised process-wide (shared memory is one static area). Slow: tens of MFLOP/s.
//!
//! Every pointer a launch passes is checked against the extent its kernel reads or
//! writes ([`geometry::extents`]): the output must lie inside the arena, inputs inside
//! the arena, the weights or a model input. So a wrong offset in generated code is an
//! [`Error::Launch`], not memory corruption. Kernels themselves are trusted to stay
//! inside those extents; `tests/cuda_emulator.rs` checks them, also under
//! AddressSanitizer (`scripts/cuda-emu-asan.sh`).

use std::cell::Cell;

use super::geometry::{self, Extents};
use super::{KernelArgs, Launch, Launcher, MAX_INPUTS, Ptr, Ptrs};
use crate::Error;

mod ffi {
    use super::KernelArgs;

    /// Mirrors `KilnEmuConfig` in `cuda/shim/cuda_shim.h`.
    #[repr(C)]
    pub struct Config {
        pub grid: [u32; 3],
        pub block: [u32; 3],
        pub shared_bytes: u32,
        /// 0 forward, 1 reverse, 2 shuffle.
        pub order: u32,
        pub seed: u64,
    }

    /// `kiln_emu_<kernel>(config, args, err, err_len)`: 0, or 1 with a message.
    pub type Entry = unsafe extern "C" fn(*const Config, *const KernelArgs, *mut u8, usize) -> i32;

    include!(concat!(env!("OUT_DIR"), "/emulated_kernels.rs"));
}

pub use ffi::TEST_KERNELS;

/// Names of every kernel the emulator can run: [`geometry::KERNEL_NAMES`] and
/// [`TEST_KERNELS`].
pub fn emulated_kernels() -> impl Iterator<Item = &'static str> {
    ffi::ENTRIES.iter().map(|(name, _)| *name)
}

/// The order in which the threads of a block run between two barriers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadOrder {
    /// Thread 0 first.
    Forward,
    /// The last thread first.
    Reverse,
    /// A shuffle drawn anew for every block and every stretch between barriers, from
    /// this seed and a per-thread launch counter (deterministic for a given sequence
    /// of launches).
    Shuffle(u64),
}

impl ThreadOrder {
    /// The three orders the tests run every kernel in.
    pub const ALL: [ThreadOrder; 3] = [
        ThreadOrder::Forward,
        ThreadOrder::Reverse,
        ThreadOrder::Shuffle(0x6b69_6c6e),
    ];
}

thread_local! {
    static ORDER: Cell<ThreadOrder> = const { Cell::new(ThreadOrder::Forward) };
    static LAUNCHES: Cell<u64> = const { Cell::new(0) };
}

/// Sets the thread order of the launches this OS thread makes from now on (per
/// thread, so that tests running in parallel do not change each other's order).
pub fn set_thread_order(order: ThreadOrder) {
    ORDER.with(|o| o.set(order));
}

/// The thread order of launches made by this OS thread.
pub fn thread_order() -> ThreadOrder {
    ORDER.with(|o| o.get())
}

/// Extents of the kernels in `cuda/test/`: `ints[0]` elements out and in.
fn test_extents(l: &Launch) -> Option<Extents> {
    let n = usize::try_from(l.ints[0]).ok()?;
    let mut inputs = [0; MAX_INPUTS];
    inputs[0] = n;
    Some(Extents {
        out: n,
        inputs,
        optional: [false; MAX_INPUTS],
    })
}

/// A [`Launcher`] that runs kernels on the CPU over host memory: the arena, the
/// model's weights, and the model inputs (`Ptr::Input(i)` is `inputs[i]`).
pub struct Emulator<'a> {
    arena: &'a mut [u8],
    weights: &'a [f32],
    inputs: &'a [&'a [f32]],
}

impl<'a> Emulator<'a> {
    pub fn new(arena: &'a mut [u8], weights: &'a [f32], inputs: &'a [&'a [f32]]) -> Self {
        Emulator {
            arena,
            weights,
            inputs,
        }
    }

    /// The address of `elems` elements at `ptr`, after checking they lie inside
    /// their buffer (and in the arena when `write`). `arena` is the one base pointer
    /// every arena address of a launch derives from.
    fn resolve(
        &self,
        arena: *mut u8,
        ptr: Ptr,
        elems: usize,
        optional: bool,
        write: bool,
    ) -> Result<u64, String> {
        const F32: usize = std::mem::size_of::<f32>();
        let bytes = elems.checked_mul(F32).ok_or("extent overflows")?;
        match ptr {
            Ptr::Null if elems == 0 || optional => Ok(0),
            Ptr::Null => Err(format!("null, but the kernel accesses {elems} elements")),
            Ptr::Arena(offset) => {
                let end = offset.checked_add(bytes).ok_or("offset overflows")?;
                if end > self.arena.len() {
                    return Err(format!(
                        "arena bytes {offset}..{end} past the arena's {} bytes",
                        self.arena.len()
                    ));
                }
                let address = arena.wrapping_add(offset);
                if !address.cast::<f32>().is_aligned() {
                    return Err(format!("arena offset {offset} is not aligned for f32"));
                }
                Ok(address as u64)
            }
            _ if write => Err(format!("{ptr:?} is read-only; outputs go to the arena")),
            Ptr::Weights(offset) => {
                let start = offset / F32;
                if offset % F32 != 0 || start + elems > self.weights.len() {
                    return Err(format!(
                        "weights bytes {offset}..{} outside the {} weight bytes, or unaligned",
                        offset + bytes,
                        self.weights.len() * F32
                    ));
                }
                Ok(self.weights[start..].as_ptr() as u64)
            }
            Ptr::Input(i) => match self.inputs.get(i) {
                Some(x) if elems <= x.len() => Ok(x.as_ptr() as u64),
                Some(x) => Err(format!(
                    "input {i} holds {} elements, the kernel reads {elems}",
                    x.len()
                )),
                None => Err(format!("input {i} of {}", self.inputs.len())),
            },
        }
    }
}

impl Launcher for Emulator<'_> {
    fn launch(&mut self, step: &'static str, launch: &Launch, ptrs: &Ptrs) -> Result<(), Error> {
        let fail = |message: String| Error::Launch {
            step,
            kernel: launch.kernel,
            message: format!("emulator: {message}"),
        };
        let entry = ffi::ENTRIES
            .iter()
            .find(|(name, _)| *name == launch.kernel)
            .map(|(_, entry)| *entry)
            .ok_or_else(|| fail("no such kernel".into()))?;
        let extents = if TEST_KERNELS.contains(&launch.kernel) {
            test_extents(launch)
        } else {
            geometry::extents(launch)
        };
        let extents = extents
            .ok_or_else(|| fail(format!("arguments no builder produces: {:?}", launch.ints)))?;
        let arena = self.arena.as_mut_ptr();
        let mut args = KernelArgs {
            out: self
                .resolve(arena, ptrs.out, extents.out, false, true)
                .map_err(|m| fail(format!("output: {m}")))?,
            inputs: [0; MAX_INPUTS],
            scratch: self
                .resolve(arena, ptrs.scratch, 0, true, true)
                .map_err(|m| fail(format!("scratch: {m}")))?,
            ints: launch.ints,
            floats: launch.floats,
        };
        for (i, slot) in args.inputs.iter_mut().enumerate() {
            *slot = self
                .resolve(
                    arena,
                    ptrs.inputs[i],
                    extents.inputs[i],
                    extents.optional[i],
                    false,
                )
                .map_err(|m| fail(format!("input {i}: {m}")))?;
        }
        let order = thread_order();
        let count = LAUNCHES.with(|c| {
            c.set(c.get().wrapping_add(1));
            c.get()
        });
        let (order, seed) = match order {
            ThreadOrder::Forward => (0, 0),
            ThreadOrder::Reverse => (1, 0),
            ThreadOrder::Shuffle(seed) => (2, seed ^ count.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        };
        let config = ffi::Config {
            grid: launch.grid,
            block: launch.block,
            shared_bytes: launch.shared_bytes,
            order,
            seed,
        };
        let mut err = [0u8; 512];
        // SAFETY: `entry` is the host entry build.rs generated for this kernel, with
        // the signature declared in `ffi`; `config`, `args` and `err` outlive the call,
        // and `err` is writable for `err.len()` bytes. Every address in `args` was
        // checked above to lie, with the extent its kernel accesses
        // (`geometry::extents`), inside a buffer borrowed for the lifetime of `self`:
        // the output inside the arena, which `self` borrows exclusively and which every
        // arena address derives from through the one pointer `arena`; inputs inside the
        // arena, the weights or a model input, which the kernels only read. The C side
        // validates grid and block, and serialises launches with a mutex because
        // shared memory is static.
        let status = unsafe { entry(&config, &args, err.as_mut_ptr(), err.len()) };
        if status != 0 {
            let end = err.iter().position(|&b| b == 0).unwrap_or(err.len());
            return Err(fail(String::from_utf8_lossy(&err[..end]).into_owned()));
        }
        Ok(())
    }
}
