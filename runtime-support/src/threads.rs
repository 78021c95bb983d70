//! A context's worker threads: created once with the context, reused by every run.
//!
//! [`Threads::new(n)`](Threads::new) starts `n - 1` workers; the thread that calls
//! `run` is the n-th. [`Threads::install`] makes them the current pool while a run
//! executes, and kernels ask for them through `for_each`, which spreads a kernel's
//! independent parts (row blocks of a product, channel ranges of an unfolding) over
//! the pool and returns when all are done. Nothing is spawned or allocated per run:
//! a job is a borrowed closure published under a mutex, and workers spin briefly
//! before sleeping so that the back-to-back kernel calls of one run reach them awake.
//!
//! Not rayon: its `install` from outside the pool pushes onto an injector queue that
//! allocates a block every few dozen jobs, and its work stealing buys nothing for the
//! evenly sized parts the kernels make.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use crate::Error;

/// A fixed pool of worker threads owned by a context (none for a single thread).
#[derive(Default)]
pub struct Threads {
    pool: Option<Arc<Pool>>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Threads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Threads")
            .field("count", &self.count())
            .finish()
    }
}

/// What the calling thread and the workers share.
struct Pool {
    /// Number of threads taking part in a job: the workers and the caller.
    threads: usize,
    /// Floats of scratch each worker holds, for kernels whose parts need their own
    /// ([`for_each_with_scratch`]); the caller's part uses the arena's.
    scratch_len: usize,
    state: Mutex<State>,
    /// Workers wait here for a new job.
    wake: Condvar,
    /// The caller waits here for the workers to finish a job.
    done: Condvar,
    /// `state.epoch`, readable without the lock so that idle workers can spin on it.
    epoch: AtomicU64,
    /// `state.finished`, readable without the lock so that the caller can spin on it.
    finished: AtomicUsize,
}

struct State {
    /// Incremented once per job.
    epoch: u64,
    /// The current job while workers may still join it.
    job: Option<Job>,
    /// Workers that joined the current job before the caller closed it, and those of
    /// them that have finished: the caller waits for exactly these. A worker that
    /// wakes after the caller ran out of parts finds the job closed and skips it, so a
    /// small job never waits for a sleeping worker to be scheduled.
    joined: usize,
    finished: usize,
    /// The first panic a worker met in the current job, re-raised by the caller.
    panic: Option<Box<dyn Any + Send>>,
    /// Workers asleep on `wake`: a job needs a wake-up call only when there are some.
    sleepers: usize,
    /// The caller sleeps on `done`: the last worker to finish must wake it.
    caller_waiting: bool,
    shutdown: bool,
}

/// The current job, called once on every thread with that thread's scratch: a closure
/// borrowed from [`Pool::run`]'s caller, its lifetime erased.
type Job = &'static (dyn Fn(&mut [f32]) + Sync);

/// How many times an idle thread checks for a new job (a worker) or for the workers'
/// end (the caller) before it sleeps: long enough (tens of microseconds) to bridge
/// the gap between two kernels of one run.
const SPIN: u32 = 1 << 14;

thread_local! {
    /// The pool of the run executing on this thread, set by [`Threads::install`].
    static CURRENT: RefCell<Option<Arc<Pool>>> = const { RefCell::new(None) };
}

impl Threads {
    /// `threads` threads in all: `threads - 1` workers are started now, each holding
    /// `scratch_bytes` of kernel scratch, and the thread that runs the model is the
    /// last. `0` and `1` mean no workers.
    pub fn new(threads: usize, scratch_bytes: usize) -> Result<Self, Error> {
        if threads <= 1 {
            return Ok(Self::default());
        }
        let pool = Arc::new(Pool {
            threads,
            scratch_len: scratch_bytes.div_ceil(4),
            state: Mutex::new(State {
                epoch: 0,
                job: None,
                joined: 0,
                finished: 0,
                panic: None,
                sleepers: 0,
                caller_waiting: false,
                shutdown: false,
            }),
            wake: Condvar::new(),
            done: Condvar::new(),
            epoch: AtomicU64::new(0),
            finished: AtomicUsize::new(0),
        });
        let mut this = Threads {
            pool: Some(pool.clone()),
            workers: Vec::with_capacity(threads - 1),
        };
        for i in 1..threads {
            let pool = pool.clone();
            let worker = std::thread::Builder::new()
                .name(format!("kiln-worker-{i}"))
                .spawn(move || pool.work())
                .map_err(|e| Error::Threads {
                    threads,
                    message: e.to_string(),
                })?;
            this.workers.push(worker);
        }
        Ok(this)
    }

    /// Threads a run uses: the workers and the calling thread.
    pub fn count(&self) -> usize {
        self.pool.as_ref().map_or(1, |p| p.threads)
    }

    /// Runs `f` with these threads as the current pool of the calling thread, so that
    /// the kernels it calls spread their work over them.
    pub fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        let Some(pool) = &self.pool else {
            return f();
        };
        // Whether this thread or a worker takes a part that runs on faer varies from
        // run to run: set up faer's memory for this thread before the first run.
        crate::kernels::gemm::prepare_thread();
        let _restore = Restore(CURRENT.with(|c| c.replace(Some(pool.clone()))));
        f()
    }
}

/// Puts a pool back as the current one when dropped, a panic unwinding included.
struct Restore(Option<Arc<Pool>>);

impl Drop for Restore {
    fn drop(&mut self) {
        let pool = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = pool);
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            pool.lock().shutdown = true;
            pool.wake.notify_all();
        }
        for worker in self.workers.drain(..) {
            // A worker catches its jobs' panics, so it only ends by seeing `shutdown`.
            let _ = worker.join();
        }
    }
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock and their panics are caught: it is never poisoned
        // with inconsistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls `job` on this thread (with `scratch`) and on every worker that joins
    /// before this thread's call returns, and returns when all those calls have
    /// returned. A panic in any call is re-raised here.
    fn run(&self, scratch: &mut [f32], job: &(dyn Fn(&mut [f32]) + Sync)) {
        // SAFETY: a worker copies the closure out of `state.job` only while joining,
        // under the lock, and drops its copy before it reports `finished`; this
        // function withdraws the job, then neither returns nor unwinds (its own call is
        // caught) before every worker that joined has finished, so the borrow outlives
        // every use. `Fn + Sync` makes calls from several threads at once sound.
        let job: Job = unsafe { std::mem::transmute(job) };
        let sleepers = {
            let mut state = self.lock();
            state.job = Some(job);
            state.joined = 0;
            state.finished = 0;
            self.finished.store(0, Ordering::Relaxed);
            state.epoch += 1;
            self.epoch.store(state.epoch, Ordering::Release);
            state.sleepers
        };
        if sleepers > 0 {
            self.wake.notify_all();
        }
        let own = panic::catch_unwind(AssertUnwindSafe(|| job(scratch)));
        // This thread found no part left: close the job to workers not yet in it.
        let joined = {
            let mut state = self.lock();
            state.job = None;
            state.joined
        };
        let mut spins = 0;
        while self.finished.load(Ordering::Acquire) < joined && spins < SPIN {
            std::hint::spin_loop();
            spins += 1;
        }
        let mut state = self.lock();
        state.caller_waiting = true;
        while state.finished < joined {
            state = self
                .done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.caller_waiting = false;
        let worker_panic = state.panic.take();
        drop(state);
        if let Err(payload) = own {
            panic::resume_unwind(payload);
        }
        if let Some(payload) = worker_panic {
            panic::resume_unwind(payload);
        }
    }

    /// A worker's life: wait for a job, join it unless it is closed, run it on its own
    /// scratch, report, until shutdown. The scratch is allocated once, here, and so is
    /// faer's packing memory ([`crate::kernels::gemm::prepare_thread`]).
    fn work(&self) {
        let mut scratch = vec![0.0f32; self.scratch_len];
        crate::kernels::gemm::prepare_thread();
        let mut seen = 0;
        loop {
            for _ in 0..SPIN {
                if self.epoch.load(Ordering::Acquire) != seen {
                    break;
                }
                std::hint::spin_loop();
            }
            let mut state = self.lock();
            while state.epoch == seen && !state.shutdown {
                state.sleepers += 1;
                state = self
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                state.sleepers -= 1;
            }
            if state.shutdown {
                return;
            }
            seen = state.epoch;
            let Some(job) = state.job else {
                continue; // closed before this worker woke
            };
            state.joined += 1;
            drop(state);
            let result = panic::catch_unwind(AssertUnwindSafe(|| job(&mut scratch)));
            let mut state = self.lock();
            if let Err(payload) = result {
                state.panic.get_or_insert(payload);
            }
            state.finished += 1;
            self.finished.store(state.finished, Ordering::Release);
            if state.caller_waiting && state.finished == state.joined {
                self.done.notify_one();
            }
        }
    }
}

/// Threads the current run may use (1 outside [`Threads::install`]).
pub(crate) fn current() -> usize {
    CURRENT.with_borrow(|pool| pool.as_ref().map_or(1, |p| p.threads))
}

/// Work (multiply-adds, or element operations of like cost) from which a kernel call
/// is worth sharing among threads: below it, the hand-off (a few microseconds) costs
/// more than the share it saves.
pub(crate) const MIN_WORK: usize = 1 << 18;

/// A product's multiply-adds that one operation of a kernel outside the products'
/// micro-kernel weighs against [`MIN_WORK`]: a depthwise multiply-add runs at about
/// 12 GMAC/s on one Zen 4 core against a product's 50, and Winograd's input
/// transform, counted as one, fell under the bound where sharing it paid.
pub(crate) const SLOW_OP_MACS: usize = 4;

/// Calls `f` on every item, the items shared out among the current run's threads as
/// each becomes free when the call's `work` is at least [`MIN_WORK`]; otherwise on
/// this thread, in order. Items are the disjoint parts of a kernel's output (row
/// blocks, planes), so `f` needs no synchronisation.
pub(crate) fn for_each<I>(items: I, work: usize, f: impl Fn(I::Item) + Sync)
where
    I: Iterator + Send,
    I::Item: Send,
{
    for_each_with_scratch(items, work, &mut [], |item, _| f(item));
}

/// [`for_each`] where each part needs working memory: `f` gets `scratch` (the
/// kernel's planned scratch) on the calling thread and as much of a worker's own on a
/// worker. Runs on one thread when the workers hold less than `scratch.len()`.
pub(crate) fn for_each_with_scratch<I>(
    items: I,
    work: usize,
    scratch: &mut [f32],
    f: impl Fn(I::Item, &mut [f32]) + Sync,
) where
    I: Iterator + Send,
    I::Item: Send,
{
    // Taken while the job runs: a kernel called from `f` on this thread runs alone
    // instead of publishing a second job to workers busy with this one.
    let restore = Restore(CURRENT.with(|c| c.borrow_mut().take()));
    let len = scratch.len();
    match &restore.0 {
        Some(pool) if pool.scratch_len >= len && work >= MIN_WORK => {
            let items = Mutex::new(items);
            let next = || items.lock().unwrap_or_else(PoisonError::into_inner).next();
            pool.run(scratch, &|scratch| {
                let scratch = &mut scratch[..len];
                while let Some(item) = next() {
                    f(item, scratch);
                }
            });
        }
        _ => items.for_each(|item| f(item, scratch)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_once_on_several_threads() {
        let threads = Threads::new(3, 0).unwrap();
        assert_eq!(threads.count(), 3);
        let mut data = vec![0u32; 1000];
        let seen = Mutex::new(std::collections::HashSet::new());
        for round in 1..=50 {
            threads.install(|| {
                assert_eq!(current(), 3);
                for_each(data.chunks_mut(7), MIN_WORK, |chunk| {
                    seen.lock().unwrap().insert(std::thread::current().id());
                    chunk.iter_mut().for_each(|x| *x += 1);
                });
            });
            assert!(data.iter().all(|&x| x == round));
        }
        assert_eq!(current(), 1, "install restores the calling thread's pool");
    }

    #[test]
    fn workers_take_parts_of_a_long_job() {
        let threads = Threads::new(2, 0).unwrap();
        let seen = Mutex::new(std::collections::HashSet::new());
        // Alone, this thread would take 20 ms: a worker woken at the start joins
        // long before (a worker that never did would mean the pool does not work).
        threads.install(|| {
            for_each(0..40, MIN_WORK, |_| {
                seen.lock().unwrap().insert(std::thread::current().id());
                std::thread::sleep(std::time::Duration::from_micros(500));
            })
        });
        assert_eq!(seen.lock().unwrap().len(), 2);
    }

    #[test]
    fn a_short_job_does_not_wait_for_a_sleeping_worker() {
        let threads = Threads::new(2, 0).unwrap();
        // Let the worker fall asleep, then run jobs the caller finishes alone at once:
        // each must return whether or not the worker has woken (it skips closed jobs).
        std::thread::sleep(std::time::Duration::from_millis(50));
        let count = AtomicUsize::new(0);
        for _ in 0..100 {
            threads.install(|| {
                for_each(0..1, MIN_WORK, |_| {
                    count.fetch_add(1, Ordering::Relaxed);
                })
            });
        }
        assert_eq!(count.load(Ordering::Relaxed), 100);
    }

    #[test]
    fn a_nested_for_each_runs_on_its_own_thread() {
        let threads = Threads::new(2, 0).unwrap();
        let sum = Mutex::new(0);
        threads.install(|| {
            for_each(0..8, MIN_WORK, |_| {
                assert_eq!(current(), 1);
                for_each(0..4, MIN_WORK, |i| *sum.lock().unwrap() += i);
            });
            assert_eq!(current(), 2);
        });
        assert_eq!(*sum.lock().unwrap(), 8 * 6);
    }

    #[test]
    fn a_worker_panic_reaches_the_caller_and_the_pool_survives() {
        let threads = Threads::new(2, 0).unwrap();
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            threads.install(|| {
                for_each(0..64, MIN_WORK, |i| {
                    if i % 2 == 1 {
                        panic!("item {i}");
                    }
                })
            })
        }));
        assert!(caught.is_err());
        assert_eq!(current(), 1);
        let mut sum = 0u64;
        let total = Mutex::new(&mut sum);
        threads.install(|| for_each(0..100u64, MIN_WORK, |i| **total.lock().unwrap() += i));
        assert_eq!(sum, 4950);
    }

    #[test]
    fn each_part_gets_scratch_of_its_own() {
        let threads = Threads::new(2, 4 * 16).unwrap();
        let mut out = vec![0u32; 64];
        let mut scratch = vec![0.0f32; 16];
        threads.install(|| {
            for_each_with_scratch(
                out.chunks_mut(4),
                MIN_WORK,
                &mut scratch,
                |part, scratch| {
                    assert_eq!(scratch.len(), 16);
                    // Another thread writing the same scratch would break this.
                    scratch.fill(part.as_ptr() as usize as f32);
                    std::thread::yield_now();
                    let mark = part.as_ptr() as usize as f32;
                    assert!(scratch.iter().all(|&x| x == mark));
                    part.fill(1);
                },
            )
        });
        assert!(out.iter().all(|&x| x == 1));
        // More scratch than the workers hold: the parts run on the calling thread.
        let mut big = vec![0.0f32; 17];
        let caller = std::thread::current().id();
        threads.install(|| {
            for_each_with_scratch(0..32, MIN_WORK, &mut big, |_, scratch| {
                assert_eq!(scratch.len(), 17);
                assert_eq!(std::thread::current().id(), caller);
            })
        });
    }

    #[test]
    fn small_work_stays_on_the_calling_thread() {
        let threads = Threads::new(2, 0).unwrap();
        let caller = std::thread::current().id();
        threads.install(|| {
            for_each(0..64, MIN_WORK - 1, |_| {
                assert_eq!(std::thread::current().id(), caller)
            })
        });
    }

    #[test]
    fn one_thread_means_no_workers() {
        let threads = Threads::new(1, 0).unwrap();
        assert_eq!(threads.count(), 1);
        assert!(threads.workers.is_empty());
        let order = Mutex::new(Vec::new());
        threads.install(|| for_each(0..5, MIN_WORK, |i| order.lock().unwrap().push(i)));
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
    }
}
