// Shared definitions of Kiln's CUDA kernels.
//
// Every kernel is `extern "C" __global__ void kiln_xxx(const KArgs a)`: one argument,
// the mirror of `kiln_runtime::cuda::KernelArgs`. The meaning of `a.ints` and
// `a.floats` is fixed per kernel (see the comment above each kernel and the `const fn`
// that fills them in `runtime-support/src/cuda/geometry.rs`).
//
// Integer arguments are 32-bit: the compiler rejects, for the CUDA target, tensors of
// more than i32::MAX elements, so every element index fits in an `int`. Loop counters
// of grid-stride loops are `long long` (index + stride may pass i32::MAX).
//
// `out` may be the same pointer as an input for the elementwise and row-wise kernels:
// no `__restrict__` anywhere, and every thread reads an element before it writes it.
//
// The file compiles with NVRTC (no includes: only what NVRTC provides) and, under
// `-DKILN_EMULATOR`, as C++ on the CPU with the shim in `shim/cuda_shim.h`.
#ifndef KILN_CUH
#define KILN_CUH

#ifdef KILN_EMULATOR
#include "shim/cuda_shim.h"
#define KILN_UNROLL
#else
#define KILN_UNROLL _Pragma("unroll")
#endif

struct KArgs {
    unsigned long long out;
    unsigned long long inputs[5];
    unsigned long long scratch;
    int ints[24];
    float floats[8];
};

// Threads per block of the one-thread-per-element kernels and of the GEMM tile.
#define KILN_THREADS 256

__device__ __forceinline__ const float* kiln_in(const KArgs& a, int i) {
    return (const float*)a.inputs[i];
}

__device__ __forceinline__ float* kiln_out(const KArgs& a) { return (float*)a.out; }

__device__ __forceinline__ int kiln_min(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int kiln_max(int a, int b) { return a > b ? a : b; }

__device__ __forceinline__ float kiln_neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float kiln_nan() { return __int_as_float(0x7fc00000); }

// First index and stride of a grid-stride loop over a 1-D grid of 1-D blocks.
__device__ __forceinline__ long long kiln_first() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long kiln_stride() {
    return (long long)gridDim.x * blockDim.x;
}

// Unary operators and fused activations share one code (kiln_runtime::cuda::geometry
// `unary_code`, `activation_code`): 0 is the identity (no activation).
#define KILN_OP_NONE 0
#define KILN_OP_RELU 1
#define KILN_OP_LEAKY_RELU 2  // f0 = alpha
#define KILN_OP_SIGMOID 3
#define KILN_OP_TANH 4
#define KILN_OP_CLIP 5        // f0 = min, f1 = max
#define KILN_OP_EXP 6
#define KILN_OP_NEG 7
#define KILN_OP_ABS 8
#define KILN_OP_SQRT 9
#define KILN_OP_ERF 10
#define KILN_OP_HARD_SIGMOID 11  // f0 = alpha, f1 = beta
#define KILN_OP_HARD_SWISH 12
#define KILN_OP_SWISH 13      // f0 = alpha
#define KILN_OP_GELU 14
#define KILN_OP_GELU_TANH 15

__device__ __forceinline__ float kiln_unary_op(int op, float x, float f0, float f1) {
    switch (op) {
    case KILN_OP_RELU: return fmaxf(x, 0.0f);
    case KILN_OP_LEAKY_RELU: return x < 0.0f ? f0 * x : x;
    case KILN_OP_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case KILN_OP_TANH: return tanhf(x);
    case KILN_OP_CLIP: return fminf(fmaxf(x, f0), f1);
    case KILN_OP_EXP: return expf(x);
    case KILN_OP_NEG: return -x;
    case KILN_OP_ABS: return fabsf(x);
    case KILN_OP_SQRT: return sqrtf(x);
    case KILN_OP_ERF: return erff(x);
    case KILN_OP_HARD_SIGMOID: {
        float v = f0 * x + f1;  // NaN stays NaN (fmaxf would drop it), as on the CPU
        return v != v ? v : fminf(fmaxf(v, 0.0f), 1.0f);
    }
    case KILN_OP_HARD_SWISH: return x * fminf(fmaxf(x / 6.0f + 0.5f, 0.0f), 1.0f);
    case KILN_OP_SWISH: return x / (1.0f + expf(-f0 * x));
    case KILN_OP_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678f));
    case KILN_OP_GELU_TANH:
        return 0.5f * x * (1.0f + tanhf(0.7978846f * (x + 0.044715f * x * x * x)));
    default: return x;
    }
}

// Binary operators (kiln_runtime::cuda::geometry `binary_code`).
#define KILN_BIN_ADD 0
#define KILN_BIN_SUB 1
#define KILN_BIN_MUL 2
#define KILN_BIN_DIV 3
#define KILN_BIN_MAX 4
#define KILN_BIN_MIN 5

__device__ __forceinline__ float kiln_binary_op(int op, float a, float b) {
    switch (op) {
    case KILN_BIN_ADD: return a + b;
    case KILN_BIN_SUB: return a - b;
    case KILN_BIN_MUL: return a * b;
    case KILN_BIN_DIV: return a / b;
    case KILN_BIN_MAX: return fmaxf(a, b);
    default: return fminf(a, b);
    }
}

// Block-wide reductions for blocks whose size is a power of two up to KILN_THREADS.
// `red` is a __shared__ array of KILN_THREADS floats. Every thread of the block must
// call them (they contain barriers); all get the result. The last barrier lets the
// caller reuse `red` at once.
__device__ __forceinline__ float kiln_block_sum(float* red, float v) {
    const int t = threadIdx.x;
    red[t] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        __syncthreads();
    }
    const float r = red[0];
    __syncthreads();
    return r;
}

__device__ __forceinline__ float kiln_block_max(float* red, float v) {
    const int t = threadIdx.x;
    red[t] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) red[t] = fmaxf(red[t], red[t + s]);
        __syncthreads();
    }
    const float r = red[0];
    __syncthreads();
    return r;
}

#endif
