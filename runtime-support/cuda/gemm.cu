// Matrix products: one shared-memory tiled SGEMM core behind Gemm, MatMul and
// convolution (as an implicit GEMM: the im2col matrix is never built, its elements are
// read from the input where the tile loader needs them), plus a direct depthwise
// convolution.
//
// Tile: a block of 256 threads computes a 64x64 tile of C, stepping through K 16 at a
// time; each thread holds a 4x4 micro-tile (rows ty + 16i, columns tx + 16j, so
// neighbouring threads write neighbouring columns). Shared memory: two 16x68 float
// arrays, 8.5 KiB. Bias, alpha/beta and the activation are applied in the epilogue.
// No __launch_bounds__(256): with it ptxas aims at 64 registers and spills in
// kiln_conv2d on sm_80-89; without it the three tiled kernels use 62-80 registers and
// never spill (NVRTC 12.9, sm_80/86/89/90, with and without --use_fast_math).
#include "kiln.cuh"

#define KILN_BM 64
#define KILN_BN 64
#define KILN_BK 16
#define KILN_PAD 4

typedef float KilnTileA[KILN_BM + KILN_PAD];
typedef float KilnTileB[KILN_BN + KILN_PAD];

// C[row0.., col0..] += A[row0.., :] * B[:, col0..] over all of K, then `store(m, n, v)`
// for each element of the tile inside M x N. `A::k_fast`: consecutive k are adjacent
// in memory (else consecutive m are); `B::n_fast` likewise for n (else k). The loaders
// follow it so that neighbouring threads read neighbouring addresses.
// Every thread of the block must call this (it has barriers).
template <class A, class B, class Store>
__device__ __forceinline__ void kiln_gemm_tile(KilnTileA* As, KilnTileB* Bs, const A& a,
                                               const B& b, const Store& store, int M, int N,
                                               int K, int row0, int col0) {
    const int t = threadIdx.x;
    const int tx = t % 16, ty = t / 16;
    float acc[4][4];
    KILN_UNROLL
    for (int i = 0; i < 4; ++i)
        KILN_UNROLL
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += KILN_BK) {
        KILN_UNROLL
        for (int r = 0; r < 4; ++r) {
            const int e = t + KILN_THREADS * r;
            const int mm = a.k_fast ? e / KILN_BK : e % KILN_BM;
            const int kk = a.k_fast ? e % KILN_BK : e / KILN_BM;
            const int m = row0 + mm, k = k0 + kk;
            As[kk][mm] = (m < M && k < K) ? a(m, k) : 0.0f;
        }
        KILN_UNROLL
        for (int r = 0; r < 4; ++r) {
            const int e = t + KILN_THREADS * r;
            const int nn = b.n_fast ? e % KILN_BN : e / KILN_BK;
            const int kk = b.n_fast ? e / KILN_BN : e % KILN_BK;
            const int n = col0 + nn, k = k0 + kk;
            Bs[kk][nn] = (n < N && k < K) ? b(k, n) : 0.0f;
        }
        __syncthreads();
        KILN_UNROLL
        for (int kk = 0; kk < KILN_BK; ++kk) {
            float av[4], bv[4];
            KILN_UNROLL
            for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];
            KILN_UNROLL
            for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];
            KILN_UNROLL
            for (int i = 0; i < 4; ++i)
                KILN_UNROLL
                for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();
    }
    KILN_UNROLL
    for (int i = 0; i < 4; ++i) {
        const int m = row0 + ty + 16 * i;
        KILN_UNROLL
        for (int j = 0; j < 4; ++j) {
            const int n = col0 + tx + 16 * j;
            if (m < M && n < N) store(m, n, acc[i][j]);
        }
    }
}

// A row-major matrix with rows `ld` apart, used as stored or transposed.
struct KilnMatA {
    const float* p;
    int ld;
    bool k_fast;  // = !trans
    __device__ __forceinline__ float operator()(int m, int k) const {
        return k_fast ? p[m * ld + k] : p[k * ld + m];
    }
};

struct KilnMatB {
    const float* p;
    int ld;
    bool n_fast;  // = !trans
    __device__ __forceinline__ float operator()(int k, int n) const {
        return n_fast ? p[k * ld + n] : p[n * ld + k];
    }
};

struct KilnGemmStore {
    float* y;
    const float* c;  // null when C is absent or beta == 0
    int ldy, c_row, c_col, act;
    float alpha, beta, f0, f1;
    __device__ __forceinline__ void operator()(int m, int n, float v) const {
        float r = alpha * v;
        if (c) r += beta * c[m * c_row + n * c_col];
        y[m * ldy + n] = kiln_unary_op(act, r, f0, f1);
    }
};

// ONNX Gemm: Y = act(alpha * op(A) * op(B) + beta * C), C broadcast through strides.
// ints: 0 M, 1 N, 2 K, 3 trans_a, 4 trans_b, 5 has C, 6 C row stride,
//       7 C column stride, 8 activation
// floats: 0 alpha, 1 beta, 2-3 activation parameters
// inputs: A, B, C (or null); grid (ceil(N/64), min(ceil(M/64), 65535)), block 256.
extern "C" __global__ void kiln_gemm(const KArgs a) {
    __shared__ KilnTileA As[KILN_BK];
    __shared__ KilnTileB Bs[KILN_BK];
    const int M = a.ints[0], N = a.ints[1], K = a.ints[2];
    const bool trans_a = a.ints[3] != 0, trans_b = a.ints[4] != 0;
    const KilnMatA A = {kiln_in(a, 0), trans_a ? M : K, !trans_a};
    const KilnMatB B = {kiln_in(a, 1), trans_b ? K : N, !trans_b};
    const bool use_c = a.ints[5] != 0 && a.floats[1] != 0.0f;
    const KilnGemmStore store = {kiln_out(a), use_c ? kiln_in(a, 2) : 0, N, a.ints[6],
                                 a.ints[7], a.ints[8], a.floats[0], a.floats[1],
                                 a.floats[2], a.floats[3]};
    const int tiles_m = (M + KILN_BM - 1) / KILN_BM;
    for (int by = blockIdx.y; by < tiles_m; by += gridDim.y)
        kiln_gemm_tile(As, Bs, A, B, store, M, N, K, by * KILN_BM, blockIdx.x * KILN_BN);
}

struct KilnPlainStore {
    float* y;
    int ldy;
    __device__ __forceinline__ void operator()(int m, int n, float v) const { y[m * ldy + n] = v; }
};

// Batched MatMul with broadcasting over the batch dimensions.
// ints: 0 M, 1 N, 2 K, 3 batch rank r (<= 6), 4-9 batch shape, 10-15 A batch strides,
//       16-21 B batch strides (in whole matrices, 0 where broadcast), 22 batches
// inputs: A, B; grid (ceil(N/64), min(ceil(M/64), 65535), min(batches, 65535)),
// block 256.
extern "C" __global__ void kiln_matmul(const KArgs a) {
    __shared__ KilnTileA As[KILN_BK];
    __shared__ KilnTileB Bs[KILN_BK];
    const int M = a.ints[0], N = a.ints[1], K = a.ints[2];
    const int rank = a.ints[3], batches = a.ints[22];
    const int tiles_m = (M + KILN_BM - 1) / KILN_BM;
    for (int z = blockIdx.z; z < batches; z += gridDim.z) {
        int rest = z, a_mat = 0, b_mat = 0;
        for (int d = rank - 1; d >= 0; --d) {
            const int i = rest % a.ints[4 + d];
            rest /= a.ints[4 + d];
            a_mat += i * a.ints[10 + d];
            b_mat += i * a.ints[16 + d];
        }
        const KilnMatA A = {kiln_in(a, 0) + a_mat * M * K, K, true};
        const KilnMatB B = {kiln_in(a, 1) + b_mat * K * N, N, true};
        const KilnPlainStore store = {kiln_out(a) + z * M * N, N};
        for (int by = blockIdx.y; by < tiles_m; by += gridDim.y)
            kiln_gemm_tile(As, Bs, A, B, store, M, N, K, by * KILN_BM, blockIdx.x * KILN_BN);
    }
}

// The im2col matrix of one image and group, read in place: row k = (ci, ki, kj),
// column p = (oh, ow); zero in the padding.
struct KilnIm2col {
    const float* x;  // the group's first input channel of the image
    int h_in, w_in, w_out, kh, kw, sh, sw, dh, dw, pt, pl;
    bool pointwise;
    bool n_fast;
    __device__ __forceinline__ float operator()(int k, int p) const {
        if (pointwise) return x[k * h_in * w_in + p];
        const int taps = kh * kw;
        const int ci = k / taps, r = k - ci * taps;
        const int ki = r / kw, kj = r - ki * kw;
        const int oh = p / w_out, ow = p - oh * w_out;
        const int ih = oh * sh - pt + ki * dh, iw = ow * sw - pl + kj * dw;
        if (ih < 0 || ih >= h_in || iw < 0 || iw >= w_in) return 0.0f;
        return x[(ci * h_in + ih) * w_in + iw];
    }
};

struct KilnConvStore {
    float* y;  // the group's first output channel of the image
    const float* bias;  // the group's first bias, or null
    int plane, act;
    float f0, f1;
    __device__ __forceinline__ void operator()(int m, int p, float v) const {
        if (bias) v += bias[m];
        y[m * plane + p] = kiln_unary_op(act, v, f0, f1);
    }
};

// 2-D convolution, NCHW input, OIHW weights, as an implicit GEMM per image and group:
// Y_g[c_out/g, H_out*W_out] = W_g[c_out/g, c_in/g*kh*kw] * im2col(X_g).
// ints (kiln_conv2d and kiln_conv2d_depthwise): 0 N, 1 C_in, 2 H_in, 3 W_in, 4 C_out,
//   5 H_out, 6 W_out, 7 kh, 8 kw, 9 stride h, 10 stride w, 11 dilation h,
//   12 dilation w, 13 pad top, 14 pad left, 15 group, 16 activation,
//   17 pointwise (1x1, unit stride, no pads)
// floats: 0-1 activation parameters
// inputs: X, W, bias (none when null); grid (ceil(H_out*W_out/64),
// min(ceil(C_out/g/64), 65535), min(N*g, 65535)), block 256.
extern "C" __global__ void kiln_conv2d(const KArgs a) {
    __shared__ KilnTileA As[KILN_BK];
    __shared__ KilnTileB Bs[KILN_BK];
    const int n = a.ints[0], c_in = a.ints[1], h_in = a.ints[2], w_in = a.ints[3];
    const int c_out = a.ints[4], h_out = a.ints[5], w_out = a.ints[6];
    const int kh = a.ints[7], kw = a.ints[8], group = a.ints[15];
    const int c_in_g = c_in / group, c_out_g = c_out / group;
    const int M = c_out_g, N = h_out * w_out, K = c_in_g * kh * kw;
    const int tiles_m = (M + KILN_BM - 1) / KILN_BM;
    const float* bias = kiln_in(a, 2);
    for (int z = blockIdx.z; z < n * group; z += gridDim.z) {
        const int img = z / group, g = z - img * group;
        const KilnMatA W = {kiln_in(a, 1) + g * c_out_g * K, K, true};
        const KilnIm2col X = {kiln_in(a, 0) + (img * c_in + g * c_in_g) * h_in * w_in,
                              h_in, w_in, w_out, kh, kw, a.ints[9], a.ints[10],
                              a.ints[11], a.ints[12], a.ints[13], a.ints[14],
                              a.ints[17] != 0, true};
        const KilnConvStore store = {kiln_out(a) + (img * c_out + g * c_out_g) * N,
                                     bias ? bias + g * c_out_g : 0, N, a.ints[16],
                                     a.floats[0], a.floats[1]};
        for (int by = blockIdx.y; by < tiles_m; by += gridDim.y)
            kiln_gemm_tile(As, Bs, W, X, store, M, N, K, by * KILN_BM, blockIdx.x * KILN_BN);
    }
}

// Depthwise convolution (group = C_in = C_out), direct: one thread per output.
// ints and floats as kiln_conv2d; inputs X, W [C, 1, kh, kw], bias (none when null);
// grid-stride over N*C*H_out*W_out, block 256.
extern "C" __global__ void kiln_conv2d_depthwise(const KArgs a) {
    const int c = a.ints[1], h_in = a.ints[2], w_in = a.ints[3];
    const int h_out = a.ints[5], w_out = a.ints[6], kh = a.ints[7], kw = a.ints[8];
    const int sh = a.ints[9], sw = a.ints[10], dh = a.ints[11], dw = a.ints[12];
    const int pt = a.ints[13], pl = a.ints[14], act = a.ints[16];
    const float* x = kiln_in(a, 0);
    const float* w = kiln_in(a, 1);
    const float* bias = kiln_in(a, 2);
    float* y = kiln_out(a);
    const long long len = (long long)a.ints[0] * c * h_out * w_out;
    for (long long i = kiln_first(); i < len; i += kiln_stride()) {
        const int idx = (int)i;
        const int ow = idx % w_out, oh = (idx / w_out) % h_out;
        const int plane = idx / (w_out * h_out), ch = plane % c;
        const float* xp = x + plane * h_in * w_in;
        const float* wp = w + ch * kh * kw;
        float acc = 0.0f;
        for (int ki = 0; ki < kh; ++ki) {
            const int ih = oh * sh - pt + ki * dh;
            if (ih < 0 || ih >= h_in) continue;
            for (int kj = 0; kj < kw; ++kj) {
                const int iw = ow * sw - pl + kj * dw;
                if (iw < 0 || iw >= w_in) continue;
                acc += xp[ih * w_in + iw] * wp[ki * kw + kj];
            }
        }
        if (bias) acc += bias[ch];
        y[idx] = kiln_unary_op(act, acc, a.floats[0], a.floats[1]);
    }
}
