//! A context with worker threads allocates nothing per run either, on any thread: a
//! counting global allocator watches every thread of this process (a test binary of
//! its own, so no other test's allocations are seen) during whole inferences at two
//! threads, after one warm-up run.
//!
//! The warm-up matters: faer sets up its thread-local packing buffer on each thread's
//! first product, which the pool now makes happen when a worker starts and when it is
//! installed on the calling thread (`gemm::prepare_thread`): which thread takes a part
//! that runs on faer varies from run to run, and before that about one run in seven
//! allocated here. The workers' kernel scratch is allocated when they start, in
//! `Context::with_threads`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use kiln_tests::zoo;

struct Counting;

static WATCHING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

fn count() {
    if WATCHING.load(Ordering::Relaxed) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Allocations made by any thread while running `f`.
fn allocations_in(f: impl FnOnce()) -> usize {
    ALLOCATIONS.store(0, Ordering::SeqCst);
    WATCHING.store(true, Ordering::SeqCst);
    f();
    WATCHING.store(false, Ordering::SeqCst);
    ALLOCATIONS.load(Ordering::SeqCst)
}

// SAFETY: forwards every call to the system allocator unchanged; only counts, in atomics.
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

/// One test: the counter is global, so nothing may run beside it.
#[test]
fn runs_at_two_threads_allocate_nothing() {
    kiln_tests::require_testdata();
    macro_rules! check {
        ($($module:ident),*) => {$({
            let m = kiln_tests::find(stringify!($module));
            let model = zoo::$module::Model::load(m.weights).unwrap();
            let mut ctx = zoo::$module::Context::with_threads(2).unwrap();
            let x = vec![0.5f32; zoo::$module::INPUTS[0].len()];
            let bytes = kiln_tests::bytes(&x);
            model.run_bytes(&mut ctx, &[bytes]).unwrap();
            let during = allocations_in(|| {
                for _ in 0..2 {
                    model.run_bytes(&mut ctx, &[bytes]).unwrap();
                }
            });
            assert_eq!(during, 0, "{} allocated {during} times in two runs at two threads", stringify!($module));
        })*};
    }
    check!(squeezenet_random, resnet50_random, inception_v1_random);

    // The counter sees other threads' allocations.
    let n = allocations_in(|| {
        std::thread::scope(|s| {
            s.spawn(|| std::hint::black_box(vec![1u8; 64]));
        })
    });
    assert!(n >= 1);
}
