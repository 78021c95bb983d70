// The emulator's launcher: runs a kernel over its grid on the calling OS thread, the
// threads of each block as ucontext fibers (see cuda_shim.h for the model).
#include "../kiln.cuh"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define KILN_ASAN 1
#include <sanitizer/common_interface_defs.h>
#else
#define KILN_ASAN 0
#endif

extern "C" {
uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;
}

// The static __shared__ variables of every kernel (weak: absent if none exist).
extern "C" char __start_kiln_shared[] __attribute__((weak));
extern "C" char __stop_kiln_shared[] __attribute__((weak));

namespace {

const unsigned kMaxThreads = 1024;
// Dynamic shared memory a block may ask for without opting in (48 KiB, as on the GPU).
const unsigned kMaxDynamicShared = 48 * 1024;
#if KILN_ASAN
const size_t kStackBytes = 512 * 1024;
#else
const size_t kStackBytes = 128 * 1024;
#endif

enum State { kRunnable, kAtBarrier, kDone };

struct Fiber {
    ucontext_t context;
    State state;
    // Where the fiber waits: the source position of its __syncthreads call.
    const char* barrier_file;
    int barrier_line;
    uint3 index;
    char* stack;
};

pthread_mutex_t g_launch_lock = PTHREAD_MUTEX_INITIALIZER;

// Everything below is only touched with g_launch_lock held.
ucontext_t g_scheduler;
Fiber g_fibers[kMaxThreads];
unsigned g_current;
KilnKernel g_kernel;
KArgs g_args;
char* g_stacks;  // kMaxThreads stacks, each above a guard page
unsigned char g_dynamic_shared[kMaxDynamicShared];

#if KILN_ASAN
// The scheduler's own stack, as ASan reports it when a fiber switches back.
const void* g_scheduler_stack_bottom;
size_t g_scheduler_stack_size;
#endif

void set_error(char* err, size_t err_len, const char* format, ...) {
    if (err_len == 0) return;
    va_list args;
    va_start(args, format);
    vsnprintf(err, err_len, format, args);
    va_end(args);
}

bool ensure_stacks() {
    if (g_stacks) return true;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t each = kStackBytes + page;
    void* p = mmap(nullptr, each * kMaxThreads, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    char* base = (char*)p;
    for (unsigned i = 0; i < kMaxThreads; ++i) {
        // Stacks grow down: the guard page sits below each one.
        mprotect(base + i * each, page, PROT_NONE);
        g_fibers[i].stack = base + i * each + page;
    }
    g_stacks = base;
    return true;
}

// Switches from the scheduler into fiber `f`, and returns when it yields.
void resume(Fiber& f) {
#if KILN_ASAN
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(&fake_stack, f.stack, kStackBytes);
    swapcontext(&g_scheduler, &f.context);
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
    swapcontext(&g_scheduler, &f.context);
#endif
}

// Switches from the running fiber back to the scheduler; `done` when it will never
// be resumed.
void yield_to_scheduler(Fiber& f, bool done) {
#if KILN_ASAN
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(done ? nullptr : &fake_stack, g_scheduler_stack_bottom,
                                   g_scheduler_stack_size);
    swapcontext(&f.context, &g_scheduler);
    __sanitizer_finish_switch_fiber(fake_stack, &g_scheduler_stack_bottom,
                                    &g_scheduler_stack_size);
#else
    (void)done;
    swapcontext(&f.context, &g_scheduler);
#endif
}

void fiber_main() {
    Fiber& f = g_fibers[g_current];
#if KILN_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &g_scheduler_stack_bottom, &g_scheduler_stack_size);
#endif
    g_kernel(g_args);
    f.state = kDone;
    yield_to_scheduler(f, true);
    abort();  // a finished fiber is never resumed
}

uint64_t splitmix(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// The order in which the fibers run during one stretch between barriers.
void fill_order(unsigned* order, unsigned n, const KilnEmuConfig& c, uint64_t block,
                uint64_t stretch) {
    for (unsigned i = 0; i < n; ++i) order[i] = c.order == 1 ? n - 1 - i : i;
    if (c.order != 2) return;
    uint64_t state = c.seed ^ (block * 0xd1b54a32d192ed03ull) ^ (stretch * 0x8cb92ba72f3d8dd7ull);
    for (unsigned i = n; i > 1; --i) {
        unsigned j = (unsigned)(splitmix(state) % i);
        unsigned t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

// Prepares `f` to run the kernel from its start. Out of line: getcontext returns twice
// in general (never here, as the context is replaced by makecontext at once), and
// keeping it away from the caller's loop keeps the caller's variables in registers.
__attribute__((noinline)) void init_fiber(Fiber& f, uint3 index) {
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_main, 0);
    f.state = kRunnable;
    f.barrier_file = nullptr;
    f.barrier_line = 0;
    f.index = index;
}

unsigned char poison_byte(const KilnEmuConfig& c) {
    // NaN, a huge positive and a huge negative float, so that neither a max nor a
    // sum hides a read of memory no thread wrote.
    return c.order == 0 ? 0xff : c.order == 1 ? 0x7f : 0xfe;
}

// Runs one block; false with a message on a barrier error.
bool run_block(const KilnEmuConfig& c, uint64_t block, char* err, size_t err_len) {
    const unsigned bx = c.block[0], by = c.block[1];
    const unsigned n = c.block[0] * c.block[1] * c.block[2];
    const uintptr_t shared_start = (uintptr_t)__start_kiln_shared;
    const uintptr_t shared_stop = (uintptr_t)__stop_kiln_shared;
    if (shared_start != 0 && shared_stop > shared_start)
        memset((void*)shared_start, poison_byte(c), shared_stop - shared_start);
    memset(g_dynamic_shared, poison_byte(c), c.shared_bytes);
    for (unsigned t = 0; t < n; ++t) init_fiber(g_fibers[t], uint3{t % bx, (t / bx) % by, t / (bx * by)});
    static unsigned order[kMaxThreads];
    for (uint64_t stretch = 0;; ++stretch) {
        fill_order(order, n, c, block, stretch);
        for (unsigned i = 0; i < n; ++i) {
            Fiber& f = g_fibers[order[i]];
            if (f.state != kRunnable) continue;
            g_current = order[i];
            threadIdx = f.index;
            resume(f);
        }
        unsigned waiting = 0, done = 0;
        const Fiber* first = nullptr;
        for (unsigned t = 0; t < n; ++t) {
            if (g_fibers[t].state == kDone) {
                ++done;
                continue;
            }
            const Fiber& f = g_fibers[t];
            if (!first) {
                first = &f;
            } else if (f.barrier_line != first->barrier_line ||
                       strcmp(f.barrier_file, first->barrier_file) != 0) {
                set_error(err, err_len,
                          "block %llu: threads wait at different __syncthreads() calls "
                          "(%s:%d and %s:%d) after %llu barriers",
                          (unsigned long long)block, first->barrier_file, first->barrier_line,
                          f.barrier_file, f.barrier_line, (unsigned long long)stretch);
                return false;
            }
            ++waiting;
        }
        if (done == n) return true;
        if (done > 0) {
            set_error(err, err_len,
                      "block %llu: %u of %u threads returned while the others wait at "
                      "__syncthreads() (barrier %llu): divergent barrier",
                      (unsigned long long)block, done, n, (unsigned long long)stretch);
            return false;
        }
        for (unsigned t = 0; t < n; ++t) g_fibers[t].state = kRunnable;
    }
}

}  // namespace

extern "C" __attribute__((noinline)) void kiln_emu_syncthreads(const char* file, int line) {
    Fiber& f = g_fibers[g_current];
    f.barrier_file = file;
    f.barrier_line = line;
    f.state = kAtBarrier;
    yield_to_scheduler(f, false);
}

extern "C" void* kiln_emu_dynamic_shared(void) { return g_dynamic_shared; }

extern "C" int kiln_emu_run(KilnKernel kernel, const KilnEmuConfig* config, const KArgs* args,
                            char* err, size_t err_len) {
    const KilnEmuConfig c = *config;
    const unsigned long long threads =
        (unsigned long long)c.block[0] * c.block[1] * c.block[2];
    if (c.grid[0] == 0 || c.grid[1] == 0 || c.grid[2] == 0 || threads == 0) {
        set_error(err, err_len, "empty grid %ux%ux%u or block %ux%ux%u", c.grid[0], c.grid[1],
                  c.grid[2], c.block[0], c.block[1], c.block[2]);
        return 1;
    }
    if (c.grid[0] > 0x7fffffffu || c.grid[1] > 65535 || c.grid[2] > 65535) {
        set_error(err, err_len, "grid %ux%ux%u over the limits 2^31-1 x 65535 x 65535", c.grid[0],
                  c.grid[1], c.grid[2]);
        return 1;
    }
    if (threads > kMaxThreads || c.block[0] > 1024 || c.block[1] > 1024 || c.block[2] > 64) {
        set_error(err, err_len, "block %ux%ux%u over the limits (1024 threads, z <= 64)",
                  c.block[0], c.block[1], c.block[2]);
        return 1;
    }
    if (c.shared_bytes > kMaxDynamicShared) {
        set_error(err, err_len, "%u bytes of dynamic shared memory, over 48 KiB", c.shared_bytes);
        return 1;
    }
    if (c.order > 2) {
        set_error(err, err_len, "unknown thread order %u", c.order);
        return 1;
    }
    pthread_mutex_lock(&g_launch_lock);
    int status = 0;
    if (!ensure_stacks()) {
        set_error(err, err_len, "could not map the fiber stacks");
        status = 1;
    } else {
        g_kernel = kernel;
        g_args = *args;
        gridDim = dim3{c.grid[0], c.grid[1], c.grid[2]};
        blockDim = dim3{c.block[0], c.block[1], c.block[2]};
        uint64_t block = 0;
        for (unsigned z = 0; z < c.grid[2] && status == 0; ++z)
            for (unsigned y = 0; y < c.grid[1] && status == 0; ++y)
                for (unsigned x = 0; x < c.grid[0] && status == 0; ++x, ++block) {
                    blockIdx = uint3{x, y, z};
                    if (!run_block(c, block, err, err_len)) status = 1;
                }
    }
    pthread_mutex_unlock(&g_launch_lock);
    return status;
}
