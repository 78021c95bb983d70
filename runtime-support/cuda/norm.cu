// Normalisations and reductions: per-channel affine (folded BatchNorm), inference
// BatchNorm, LRN, (Log)Softmax and the mean over the innermost axis.
#include "kiln.cuh"

// y = act(x * scale[c] + shift[c]), c = (i / inner) % C. May run in place.
// ints: 0 length, 1 C, 2 inner, 3 activation; floats: 0-1 activation parameters.
// inputs: X, scale, shift.
extern "C" __global__ void kiln_channel_affine(const KArgs a) {
    const long long len = a.ints[0];
    const int c = a.ints[1], inner = a.ints[2], act = a.ints[3];
    const float* x = kiln_in(a, 0);
    const float* scale = kiln_in(a, 1);
    const float* shift = kiln_in(a, 2);
    float* y = kiln_out(a);
    for (long long i = kiln_first(); i < len; i += kiln_stride()) {
        const int ch = ((int)i / inner) % c;
        const float v = x[i];
        y[i] = kiln_unary_op(act, v * scale[ch] + shift[ch], a.floats[0], a.floats[1]);
    }
}

// y = x * s + t with s = scale / sqrt(var + eps), t = bias - mean * s, per channel.
// May run in place. ints: 0 length, 1 C, 2 inner; floats: 0 epsilon.
// inputs: X, scale, bias, mean, var.
extern "C" __global__ void kiln_batch_norm(const KArgs a) {
    const long long len = a.ints[0];
    const int c = a.ints[1], inner = a.ints[2];
    const float eps = a.floats[0];
    const float* x = kiln_in(a, 0);
    const float* scale = kiln_in(a, 1);
    const float* bias = kiln_in(a, 2);
    const float* mean = kiln_in(a, 3);
    const float* var = kiln_in(a, 4);
    float* y = kiln_out(a);
    for (long long i = kiln_first(); i < len; i += kiln_stride()) {
        const int ch = ((int)i / inner) % c;
        const float s = scale[ch] / sqrtf(var[ch] + eps);
        const float t = bias[ch] - mean[ch] * s;
        const float v = x[i];
        y[i] = v * s + t;
    }
}

// ONNX LRN across channels: y = x / (bias + k * sum of x^2 over channels
// c - before ..= c + after)^beta, k = alpha / size. One thread per (image, position)
// walks the channels in order with the window of input values in registers (win[t]
// is channel ch - before + t, 0 outside the image): channel ch + after + 1 is loaded
// before channel ch is written, so every value is read before it is overwritten and
// the kernel may run in place when size <= KILN_LRN_MAX (the CPU's
// LRN_INPLACE_MAX_SIZE, the compiler's limit for in place). A larger window reads its
// neighbours from X and must not run in place.
// ints: 0 N, 1 C, 2 inner, 3 before, 4 after; floats: 0 k, 1 beta, 2 bias.
// inputs: X. Grid over N * inner.
#define KILN_LRN_MAX 16
extern "C" __global__ void kiln_lrn(const KArgs a) {
    const int c = a.ints[1], inner = a.ints[2], before = a.ints[3], after = a.ints[4];
    const int size = before + after + 1;
    const float k = a.floats[0], beta = a.floats[1], bias = a.floats[2];
    const long long items = (long long)a.ints[0] * inner;
    for (long long i = kiln_first(); i < items; i += kiln_stride()) {
        const long long n = i / inner;
        const long long base = n * c * inner + (i - n * inner);
        const float* x = kiln_in(a, 0) + base;  // channel 0 of this image and position
        float* y = kiln_out(a) + base;
        if (size > KILN_LRN_MAX) {
            for (int ch = 0; ch < c; ++ch) {
                const int lo = kiln_max(ch - before, 0), hi = kiln_min(ch + after + 1, c);
                float sum = 0.0f;
                for (int cc = lo; cc < hi; ++cc) {
                    const float v = x[cc * inner];
                    sum += v * v;
                }
                y[ch * inner] = x[ch * inner] / powf(bias + k * sum, beta);
            }
            continue;
        }
        float win[KILN_LRN_MAX];
        KILN_UNROLL
        for (int t = 0; t < KILN_LRN_MAX; ++t) {
            const int cc = t - before;
            win[t] = t < size && cc >= 0 && cc < c ? x[cc * inner] : 0.0f;
        }
        for (int ch = 0; ch < c; ++ch) {
            float sum = 0.0f, v = 0.0f;
            KILN_UNROLL
            for (int t = 0; t < KILN_LRN_MAX; ++t) {
                if (t < size) sum += win[t] * win[t];
                if (t == before) v = win[t];
            }
            const int next = ch + after + 1;
            const float nv = next < c ? x[next * inner] : 0.0f;
            KILN_UNROLL
            for (int t = 0; t < KILN_LRN_MAX - 1; ++t) win[t] = t + 1 < size ? win[t + 1] : nv;
            win[KILN_LRN_MAX - 1] = nv;
            y[ch * inner] = v / powf(bias + k * sum, beta);
        }
    }
}

// (Log)Softmax along an axis of `len` elements `inner` apart: one block per row
// (rows = outer * inner), block size a power of two up to 256. The whole row is read
// (max, then sum of exponentials) before any of it is written, and each thread writes
// only the elements it read, so it may run in place.
// ints: 0 rows, 1 len, 2 inner, 3 log. inputs: X. grid min(rows, 65535).
extern "C" __global__ void kiln_softmax(const KArgs a) {
    __shared__ float red[KILN_THREADS];
    const int rows = a.ints[0], len = a.ints[1], inner = a.ints[2];
    const bool log = a.ints[3] != 0;
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const int o = row / inner, i = row - o * inner;
        const float* x = kiln_in(a, 0) + o * len * inner + i;
        float* y = kiln_out(a) + o * len * inner + i;
        float m = kiln_neg_inf();
        for (int j = threadIdx.x; j < len; j += blockDim.x) m = fmaxf(m, x[j * inner]);
        m = kiln_block_max(red, m);
        float s = 0.0f;
        for (int j = threadIdx.x; j < len; j += blockDim.x) s += expf(x[j * inner] - m);
        s = kiln_block_sum(red, s);
        if (log) {
            const float shift = m + logf(s);
            for (int j = threadIdx.x; j < len; j += blockDim.x) {
                const float v = x[j * inner];
                y[j * inner] = v - shift;
            }
        } else {
            const float r = 1.0f / s;
            for (int j = threadIdx.x; j < len; j += blockDim.x) {
                const float v = x[j * inner];
                y[j * inner] = expf(v - m) * r;
            }
        }
    }
}

// y[o] = mean of x[o * inner .. (o + 1) * inner] (NaN when inner is 0): one block per
// row, block size a power of two up to 256.
// ints: 0 outer, 1 inner; floats: 0 1/inner. inputs: X. grid min(outer, 65535).
extern "C" __global__ void kiln_reduce_mean(const KArgs a) {
    __shared__ float red[KILN_THREADS];
    const int outer = a.ints[0], inner = a.ints[1];
    const float* x = kiln_in(a, 0);
    float* y = kiln_out(a);
    for (int row = blockIdx.x; row < outer; row += gridDim.x) {
        float s = 0.0f;
        for (int j = threadIdx.x; j < inner; j += blockDim.x) s += x[row * inner + j];
        s = kiln_block_sum(red, s);
        if (threadIdx.x == 0) y[row] = inner == 0 ? kiln_nan() : s * a.floats[0];
    }
}
