// Data movement: transpose, one input of a concatenation, plain copies. One thread
// per element, grid-stride. Not in place (except copy onto itself, which is a no-op).
#include "kiln.cuh"

// y = x.transpose(perm), walked in output order.
// ints: 0 length, 1 rank r (<= 6), 2-7 output shape, 8-13 the input strides of the
// output axes (in elements). inputs: X.
extern "C" __global__ void kiln_transpose(const KArgs a) {
    const long long len = a.ints[0];
    const int rank = a.ints[1];
    const float* x = kiln_in(a, 0);
    float* y = kiln_out(a);
    for (long long i = kiln_first(); i < len; i += kiln_stride()) {
        int rest = (int)i, src = 0;
        for (int d = rank - 1; d >= 0; --d) {
            const int n = a.ints[2 + d];
            src += (rest % n) * a.ints[8 + d];
            rest /= n;
        }
        y[i] = x[src];
    }
}

// Input i of a concatenation: `outer` chunks of `chunk` elements, chunk o going to
// element `at` of output chunk o (output chunks are `out_chunk` elements).
// ints: 0 outer, 1 chunk, 2 out_chunk, 3 at. inputs: X_i.
extern "C" __global__ void kiln_concat_part(const KArgs a) {
    const int chunk = a.ints[1], out_chunk = a.ints[2], at = a.ints[3];
    const long long len = (long long)a.ints[0] * chunk;
    const float* x = kiln_in(a, 0);
    float* y = kiln_out(a);
    for (long long i = kiln_first(); i < len; i += kiln_stride()) {
        const int idx = (int)i;
        const int o = idx / chunk, r = idx - o * chunk;
        y[o * out_chunk + at + r] = x[idx];
    }
}

// y = x. ints: 0 length. inputs: X.
extern "C" __global__ void kiln_copy(const KArgs a) {
    const long long len = a.ints[0];
    const float* x = kiln_in(a, 0);
    float* y = kiln_out(a);
    for (long long i = kiln_first(); i < len; i += kiln_stride()) y[i] = x[i];
}
