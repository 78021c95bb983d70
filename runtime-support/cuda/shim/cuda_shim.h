// The CUDA subset Kiln's kernels use, for compiling them as C++ on the CPU (the
// emulator behind the `cuda-emulator` feature of kiln-runtime). Included by kiln.cuh
// when KILN_EMULATOR is defined; never seen by NVRTC.
//
// Model: a launch runs its blocks one after another; the threads of a block are
// fibers (ucontext) on the calling OS thread. A fiber runs until it reaches
// __syncthreads() or returns; once every fiber has reached the same barrier they are
// released, and the next stretch runs them in the launch's order (forward, reverse or
// a seeded shuffle, drawn anew for every stretch). A fiber that returns while others
// wait at a barrier, or fibers waiting at different barriers, fail the launch.
// Shared memory (static, in the `kiln_shared` section, and dynamic) is filled with a
// poison pattern before every block, so reading what no thread of this block wrote
// gives garbage rather than last block's values.
#ifndef KILN_CUDA_SHIM_H
#define KILN_CUDA_SHIM_H

#include <math.h>
#include <stddef.h>
#include <string.h>

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
};

// Set by the scheduler before it resumes a fiber (launches are serialised, and a
// fiber's own registers hold whatever it cached, so both views agree).
extern "C" uint3 threadIdx;
extern "C" uint3 blockIdx;
extern "C" dim3 blockDim;
extern "C" dim3 gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
// Every __shared__ variable lands in one section, which the emulator poisons before
// each block; the linker provides __start_kiln_shared / __stop_kiln_shared.
#define __shared__ __attribute__((section("kiln_shared"))) static

// `extern __shared__ T name[];` is written KILN_DYNAMIC_SHARED(T, name).
#define KILN_DYNAMIC_SHARED(T, name) T* name = (T*)kiln_emu_dynamic_shared()

// `file` and `line` name the barrier in the source, so that copies the optimiser
// makes of one barrier (unrolling, tail duplication) still count as the same one.
extern "C" void kiln_emu_syncthreads(const char* file, int line);
extern "C" void* kiln_emu_dynamic_shared(void);

// A call the compiler cannot see through, plus a compiler barrier: shared memory is
// reloaded after it, as on the GPU.
#define __syncthreads()                                 \
    do {                                                \
        kiln_emu_syncthreads(__FILE__, __LINE__);       \
        __asm__ __volatile__("" ::: "memory");          \
    } while (0)

static inline float __int_as_float(unsigned bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
static inline unsigned __float_as_uint(float f) {
    unsigned bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}
// (glibc's math.h already declares __expf and __logf, with the same meaning.)
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
template <class T>
static inline T __ldg(const T* p) {
    return *p;
}
// One fiber runs at a time, so a plain read-modify-write is atomic.
static inline float atomicAdd(float* p, float v) {
    float old = *p;
    *p = old + v;
    return old;
}

// --- The launcher (runtime.cpp) ---------------------------------------------------

struct KArgs;
typedef void (*KilnKernel)(KArgs);

// Mirrors `emulator::ffi::Config` in runtime-support/src/cuda/emulator.rs.
struct KilnEmuConfig {
    unsigned grid[3];
    unsigned block[3];
    unsigned shared_bytes;
    // 0 forward, 1 reverse, 2 shuffle with `seed`.
    unsigned order;
    unsigned long long seed;
};

// Runs `kernel` over the grid; 0 on success, otherwise 1 with a message in `err`.
extern "C" int kiln_emu_run(KilnKernel kernel, const KilnEmuConfig* config, const KArgs* args,
                            char* err, size_t err_len);

// The host entry of one kernel: `kiln_emu_<name>`, called from Rust by name.
#define KILN_EMU_ENTRY(name)                                                             \
    extern "C" void name(KArgs);                                                         \
    extern "C" int kiln_emu_##name(const KilnEmuConfig* config, const KArgs* args,       \
                                   char* err, size_t err_len) {                          \
        return kiln_emu_run(name, config, args, err, err_len);                           \
    }

#endif
