// Elementwise kernels: unary maps and broadcasting binary ops. One thread per output
// element, grid-stride, so any grid size is correct. `out` may alias an input: each
// thread reads its own elements before writing them.
#include "kiln.cuh"

// y = op(x).
// ints: 0 length, 1 op (KILN_OP_*); floats: 0-1 op parameters. inputs: X.
extern "C" __global__ void kiln_unary(const KArgs a) {
    const long long len = a.ints[0];
    const int op = a.ints[1];
    const float f0 = a.floats[0], f1 = a.floats[1];
    const float* x = kiln_in(a, 0);
    float* y = kiln_out(a);
    for (long long i = kiln_first(); i < len; i += kiln_stride()) {
        const float v = x[i];
        y[i] = kiln_unary_op(op, v, f0, f1);
    }
}

// y = op(a, b) with NumPy broadcasting, the output contiguous.
// ints: 0 op (KILN_BIN_*), 1 rank r (<= 6, 0 for a scalar), 2-7 output shape,
//       8-13 A element strides, 14-19 B element strides (0 where broadcast), 20 length
// inputs: A, B.
extern "C" __global__ void kiln_binary(const KArgs a) {
    const int op = a.ints[0], rank = a.ints[1];
    const long long len = a.ints[20];
    const float* x = kiln_in(a, 0);
    const float* z = kiln_in(a, 1);
    float* y = kiln_out(a);
    for (long long i = kiln_first(); i < len; i += kiln_stride()) {
        int rest = (int)i, oa = 0, ob = 0;
        for (int d = rank - 1; d >= 0; --d) {
            const int n = a.ints[2 + d];
            const int j = rest % n;
            rest /= n;
            oa += j * a.ints[8 + d];
            ob += j * a.ints[14 + d];
        }
        const float va = x[oa], vb = z[ob];
        y[i] = kiln_binary_op(op, va, vb);
    }
}
