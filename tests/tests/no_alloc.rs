//! `run` allocates nothing on the heap: a counting global allocator watches whole
//! inferences of real models (convolutions through im2col and GEMM, pooling, concat,
//! transpose, softmax, Sum) after one warm-up run.
//!
//! The warm-up matters: the GEMM crate (faer) sets up a thread-local workspace on its
//! first call, once per thread; that memory is not per inference.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use kiln_tests::zoo;

struct Counting;

thread_local! {
    // Per thread, so tests running in parallel (and the harness) are not counted.
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    if WATCHING.with(Cell::get) {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
    }
}

/// Allocations made by this thread while running `f`.
fn allocations_in(f: impl FnOnce()) -> usize {
    ALLOCATIONS.with(|a| a.set(0));
    WATCHING.with(|w| w.set(true));
    f();
    WATCHING.with(|w| w.set(false));
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

macro_rules! no_alloc_test {
    ($test:ident, $module:ident) => {
        #[test]
        fn $test() {
            kiln_tests::require_testdata();
            let m = kiln_tests::find(stringify!($module));
            let model = zoo::$module::Model::load(m.weights).unwrap();
            let mut ctx = zoo::$module::Context::new();
            let x = vec![0.5f32; zoo::$module::INPUTS[0].len()];
            let bytes = kiln_tests::bytes(&x);
            model.run_bytes(&mut ctx, &[bytes]).unwrap();

            let during = allocations_in(|| {
                for _ in 0..2 {
                    model.run_bytes(&mut ctx, &[bytes]).unwrap();
                }
            });
            assert_eq!(
                during,
                0,
                "{} allocated {during} times in two runs",
                stringify!($module)
            );
        }
    };
}

no_alloc_test!(squeezenet_run_allocates_nothing, squeezenet_random);
no_alloc_test!(shufflenet_run_allocates_nothing, shufflenet_random);
no_alloc_test!(resnet50_run_allocates_nothing, resnet50_random);
no_alloc_test!(inception_v1_run_allocates_nothing, inception_v1_random);

/// The counter itself works: a plain `Vec` is seen.
#[test]
fn counter_sees_allocations() {
    let n = allocations_in(|| {
        let v = vec![1u8; 64];
        std::hint::black_box(v);
    });
    assert_eq!(n, 1);
}
