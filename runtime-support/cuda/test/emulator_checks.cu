// Kernels that exist only to test the emulator itself (compiled into the emulator,
// never into SOURCES): correct and deliberately wrong uses of __syncthreads.
// All: one block; ints: 0 n (= blockDim.x); inputs: X[n]; out: Y[n].
#include "../kiln.cuh"

// y[t] = x[n-1-t] through shared memory, correctly.
extern "C" __global__ void kiln_test_reverse(const KArgs a) {
    __shared__ float s[1024];
    const int t = threadIdx.x, n = a.ints[0];
    s[t] = kiln_in(a, 0)[t];
    __syncthreads();
    kiln_out(a)[t] = s[n - 1 - t];
}

// The same without the barrier: a race in every order.
extern "C" __global__ void kiln_test_reverse_racy(const KArgs a) {
    __shared__ float s[1024];
    const int t = threadIdx.x, n = a.ints[0];
    s[t] = kiln_in(a, 0)[t];
    kiln_out(a)[t] = s[n - 1 - t];
}

// y[t] = x[t-1] (y[0] = 0) without a barrier: right when threads run forward, wrong
// in reverse. Shows that one order is not enough.
extern "C" __global__ void kiln_test_shift_racy(const KArgs a) {
    __shared__ float s[1024];
    const int t = threadIdx.x;
    s[t] = kiln_in(a, 0)[t];
    kiln_out(a)[t] = t == 0 ? 0.0f : s[t - 1];
}

// Reverse through dynamic shared memory (launched with n * 4 bytes of it).
extern "C" __global__ void kiln_test_reverse_dynamic(const KArgs a) {
    KILN_DYNAMIC_SHARED(float, s);
    const int t = threadIdx.x, n = a.ints[0];
    s[t] = kiln_in(a, 0)[t];
    __syncthreads();
    kiln_out(a)[t] = s[n - 1 - t];
}

// Thread 0 returns before a barrier the others wait at.
extern "C" __global__ void kiln_test_early_return(const KArgs a) {
    __shared__ float s[1024];
    const int t = threadIdx.x, n = a.ints[0];
    if (t == 0) return;
    s[t] = kiln_in(a, 0)[t];
    __syncthreads();
    kiln_out(a)[t] = s[n - t];
}

// Even and odd threads wait at different barriers.
extern "C" __global__ void kiln_test_split_barrier(const KArgs a) {
    const int t = threadIdx.x;
    if (t % 2 == 0) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    kiln_out(a)[t] = kiln_in(a, 0)[t];
}

// Reads one element past its input: only launched by the ignored test that
// scripts/cuda-emu-asan.sh runs to show AddressSanitizer is live.
extern "C" __global__ void kiln_test_out_of_bounds(const KArgs a) {
    const int t = threadIdx.x, n = a.ints[0];
    kiln_out(a)[t] = kiln_in(a, 0)[t + (t == n - 1 ? 1 : 0)];
}
