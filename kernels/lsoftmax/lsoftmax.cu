// kernels/lsoftmax/lsoftmax.cu -- large-margin softmax (L-Softmax, Liu et al., ICML 2016): the margin, its gradient,
// and the softmax cross-entropy after it.
//
// Arrays (row-major float32): features X [N][D], class weights W [C][D] (one row W_j per class, as
// torch.nn.Linear), logits F = X W^T [N][C], labels y [N] (int32, 0 <= y_i < C).  For sample i with
// a = |W_{y_i}|, b = |x_i| and c = cos(theta) = F[i][y_i] / (a b), the label's logit is replaced by
//
//     F'[i][y_i] = (lambda * F[i][y_i] + a b psi(c)) / (1 + lambda),    psi = (-1)^k cos(m theta) - 2k
//
// for theta in [k pi/m, (k+1) pi/m]; every other logit is left as it is.  cos(m theta) is a polynomial
// in c (the Chebyshev polynomial T_m), and k is found by comparing c with the thresholds cos(j pi/m):
// no acos anywhere, so nothing is undefined at c = +-1.
//
// Versions, in teaching order (a launcher for each in kernels/lsoftmax/lsoftmax.py):
//   1. The Caffe layer's design: the fully connected layer by GEMM (kernels/gemm/sgemm.cu), then three small
//      grid-stride kernels, one thread per sample:
//        lsoftmax_copy_label_score   copies F[i][y_i] out and computes |x_i|, |W_{y_i}| and cos(theta)
//        lsoftmax_cos_mtheta         cos(m theta) by the binomial (multiple-angle) expansion, and k
//        lsoftmax_blend_label_score  writes the blended value back into F[i][y_i]
//      and then the softmax cross-entropy of kernels/dense/softmax.cu.  (lsoftmax_patch_logits and
//      lsoftmax_margin_grad_input are the one-kernel answers to the chapter's exercises.)  Its backward, as Caffe writes it:
//        lsoftmax_backward_input_naive / lsoftmax_backward_weight_naive: one thread per element of dX or
//        dW, a loop over all C classes (or N samples) with a branch per term.  O(N C D) like a GEMM, but
//        without any of a GEMM's data reuse.
//   2. The backward pass factored: dX = G~ W + diag(beta) X and dW = G~^T X + diag(gamma) W, where G~ is
//      dE/dF' with the label column rescaled.  Two ordinary GEMMs (kernels/gemm/sgemm.cu) plus the rank-1
//      corrections: lsoftmax_class_sums (gamma per class, deterministic), lsoftmax_add_scaled_rows
//      (dX += beta X) and lsoftmax_transpose_add_scaled_rows (dW = (dW^T)^T + gamma W in one pass); the
//      weight gradient's GEMM X^T G~ reads X as its transposed operand (GEMM chapter, version 8).
//   3. Fused: lsoftmax_fused_forward does the margin, the softmax and the cross-entropy of one row in one
//      block and one read of the row (an online max and sum); lsoftmax_fused_backward reads the row once
//      more and writes G~ together with beta and the per-sample part of gamma.  lsoftmax_mean_loss adds
//      the losses in a fixed order.
//   4. The margin in the GEMM's epilogue (forward): lsoftmax_label_targets computes each sample's blended
//      label logit from X and W before the GEMM (one warp per sample); lsoftmax_gemm_margin_forward is the
//      GEMM chapter's tile (sgemm_warptile_tile, unchanged) followed, in the same kernel, by an epilogue
//      that re-reads the tile it has just stored (64 KB, from L2), writes the label's blended logit into
//      it and leaves each row's partial (max, sum) for its 128 columns; lsoftmax_combine_partials merges
//      them per row into the loss.  The forward pass no longer reads F back from memory; the backward
//      (lsoftmax_fused_backward with patched = 1) is version 3's.
//
// Napkin math at N = 4096, D = 512, C = 10000: F is 164 MB; each GEMM is 43 GFLOP (three per step); the
// part after the GEMM must at least read F (forward), read F and write G~ (backward): 492 MB.

#include "gemm/sgemm.cu"   // the GEMM chapter's warp-tiled tile function, for version 4

#ifndef LSM_EPS
#define LSM_EPS 1e-12f   // smallest norm used in a division: an all-zero row gives cos(theta) = 0, not NaN
#endif
#ifndef LSM_THREADS
#define LSM_THREADS 256  // threads per block of the fused kernels (a multiple of 32, at most 1024)
#endif

// ------------------------------------------------------------------------------------------------
// Helpers: the margin function psi(c) and its derivative, and block reductions.

// k: the number of thresholds cos(j pi/m), j = 1..m-1, that c lies below (theta > j pi/m for each).
__device__ __forceinline__ int lsoftmax_k(float c, int m)
{
    int k = 0;
    for (int j = 1; j < m; ++j) k += (c < cospif((float)j / (float)m)) ? 1 : 0;
    return k;
}

// psi(c) = (-1)^k T_m(c) - 2k and dpsi/dc = (-1)^k m U_{m-1}(c), with the Chebyshev polynomials from
// their three-term recurrences (T_{n+1} = 2c T_n - T_{n-1}, the same for U): stable for any m, exact at
// c = +-1, where the derivative through acos would be 0/0.  c is clamped to [-1, 1] first: rounding in
// F / (a b) can put it just outside.
__device__ __forceinline__ void lsoftmax_psi(float c, int m, float* psi, float* dpsi)
{
    c = fminf(1.0f, fmaxf(-1.0f, c));
    float t0 = 1.0f, t1 = c;      // T_0, T_1
    float u0 = 0.0f, u1 = 1.0f;   // U_{-1}, U_0
    for (int n = 1; n < m; ++n) {
        float t2 = 2.0f * c * t1 - t0;
        t0 = t1; t1 = t2;
        float u2 = 2.0f * c * u1 - u0;
        u0 = u1; u1 = u2;
    }
    int k = lsoftmax_k(c, m);
    float sign = (k & 1) ? -1.0f : 1.0f;
    *psi = sign * t1 - 2.0f * (float)k;
    *dpsi = sign * (float)m * u1;
}

// psi and psi' of n values of c, exactly as the kernels below compute them (for tests and figures).
__global__ void lsoftmax_psi_values(const float* __restrict__ c, float* psi, float* dpsi, int n, int m)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        lsoftmax_psi(c[i], m, psi + i, dpsi + i);
}

// Sum over the block (every thread must call it; blockDim.x a multiple of 32).  Fixed order: the same
// inputs give the same bits.
__device__ __forceinline__ float lsoftmax_block_sum(float v, float* scratch)
{
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads();                           // scratch may still be read by a previous reduction
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.0f;
    if (warp == 0)
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (threadIdx.x == 0) scratch[32] = v;
    __syncthreads();
    return scratch[32];
}

// Online softmax state: a running maximum mx and the sum s of exp(v - mx).  Combining two states
// rescales the smaller one's sum, so one pass over a row gives both.
__device__ __forceinline__ void lsoftmax_online_add(float& mx, float& s, float v)
{
    if (v > mx) { s = s * expf(mx - v) + 1.0f; mx = v; }
    else s += expf(v - mx);
}

__device__ __forceinline__ void lsoftmax_online_merge(float& mx, float& s, float mx2, float s2)
{
    if (mx2 == -INFINITY) return;
    if (mx2 > mx) { s = s * expf(mx - mx2) + s2; mx = mx2; }
    else s += s2 * expf(mx2 - mx);
}

// The block's (max, sum) from every thread's (max, sum): a tree with a fixed shape.
__device__ __forceinline__ void lsoftmax_block_online(float& mx, float& s, float* scratch)
{
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, mx, off);
        float s2 = __shfl_xor_sync(0xffffffffu, s, off);
        lsoftmax_online_merge(mx, s, m2, s2);
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) { scratch[warp] = mx; scratch[32 + warp] = s; }
    __syncthreads();
    mx = lane < warps ? scratch[lane] : -INFINITY;
    s = lane < warps ? scratch[32 + lane] : 0.0f;
    if (warp == 0) {
        for (int off = 16; off > 0; off >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, mx, off);
            float s2 = __shfl_xor_sync(0xffffffffu, s, off);
            lsoftmax_online_merge(mx, s, m2, s2);
        }
    }
    if (threadIdx.x == 0) { scratch[64] = mx; scratch[65] = s; }
    __syncthreads();
    mx = scratch[64];
    s = scratch[65];
}

// ------------------------------------------------------------------------------------------------
// 1. The Caffe layer: three grid-stride kernels after the GEMM, one thread per sample.

// 1a. Copy the label's score F[i][y_i] out, with the two norms and cos(theta).  Each thread walks a row
//     of X and a row of W by itself: uncoalesced, but only 2 N D loads.
__global__ void lsoftmax_copy_label_score(const float* __restrict__ F, const int* __restrict__ labels,
                                          const float* __restrict__ X, const float* __restrict__ W,
                                          float* label_score, float* x_norm, float* w_norm, float* cos_theta,
                                          int N, int C, int D)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x) {
        int y = labels[i];
        const float* x = X + (size_t)i * D;
        const float* w = W + (size_t)y * D;
        float xx = 0.0f, ww = 0.0f;
        for (int d = 0; d < D; ++d) { xx += x[d] * x[d]; ww += w[d] * w[d]; }
        float b = sqrtf(xx), a = sqrtf(ww);
        float f = F[(size_t)i * C + y];
        label_score[i] = f;
        x_norm[i] = b;
        w_norm[i] = a;
        cos_theta[i] = f / (fmaxf(a, LSM_EPS) * fmaxf(b, LSM_EPS));
    }
}

// 1b. cos(m theta) = sum_n (-1)^n C(m, 2n) c^(m-2n) (1 - c^2)^n (the binomial expansion of
//     Re (c + i s)^m with s^2 = 1 - c^2), and k from the thresholds.  As in the published layer; the
//     chapter shows where this form loses accuracy (large m, c near +-1) and kernel 3 avoids it.
__global__ void lsoftmax_cos_mtheta(const float* __restrict__ cos_theta, float* cos_mtheta, int* k_out, int N, int m)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x) {
        float c = fminf(1.0f, fmaxf(-1.0f, cos_theta[i]));
        float s2 = 1.0f - c * c;
        float sum = 0.0f, binom = 1.0f, sign = 1.0f, s2n = 1.0f;   // C(m, 0), (-1)^0, s^0
        for (int n = 0; 2 * n <= m; ++n) {
            float cpow = 1.0f;
            for (int p = 0; p < m - 2 * n; ++p) cpow *= c;
            sum += sign * binom * cpow * s2n;
            // C(m, 2n+2) = C(m, 2n) (m-2n)(m-2n-1) / ((2n+1)(2n+2))
            binom = binom * (float)((m - 2 * n) * (m - 2 * n - 1)) / (float)((2 * n + 1) * (2 * n + 2));
            sign = -sign;
            s2n *= s2;
        }
        cos_mtheta[i] = sum;
        k_out[i] = lsoftmax_k(c, m);
    }
}

// 1c. Write (lambda f + a b psi) / (1 + lambda) back into the label's logit; no other logit changes.
__global__ void lsoftmax_blend_label_score(float* F, const int* __restrict__ labels,
                                           const float* __restrict__ label_score, const float* __restrict__ x_norm,
                                           const float* __restrict__ w_norm, const float* __restrict__ cos_mtheta,
                                           const int* __restrict__ k_in, int N, int C, float lambda)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x) {
        int k = k_in[i];
        float psi = ((k & 1) ? -cos_mtheta[i] : cos_mtheta[i]) - 2.0f * (float)k;
        float target = w_norm[i] * x_norm[i] * psi;
        F[(size_t)i * C + labels[i]] = (lambda * label_score[i] + target) / (1.0f + lambda);
    }
}

// One warp per sample: x . w, |x|^2 and |w|^2 of a feature row x and its label's weight row w, the
// lanes striding over the row and a shuffle tree summing each, so that every lane holds the three sums.
__device__ __forceinline__ void lsoftmax_warp_label_dots(const float* x, const float* w, int dim, int lane,
                                                         float* xw, float* xx, float* ww)
{
    float sxw = 0.0f, sxx = 0.0f, sww = 0.0f;
    for (int d = lane; d < dim; d += 32) { sxw += x[d] * w[d]; sxx += x[d] * x[d]; sww += w[d] * w[d]; }
    for (int off = 16; off > 0; off >>= 1) {
        sxw += __shfl_xor_sync(0xffffffffu, sxw, off);
        sxx += __shfl_xor_sync(0xffffffffu, sxx, off);
        sww += __shfl_xor_sync(0xffffffffu, sww, off);
    }
    *xw = sxw;
    *xx = sxx;
    *ww = sww;
}

// The derivative of the blended label logit L = (lambda f + a b psi(c)) / (1 + lambda), c = f / (a b):
//     dL/dx = coef_w W_y + coef_x x,    dL/dW_y = coef_w x + coef_ww W_y,  with
//     coef_w = (lambda + psi'(c)) / (1 + lambda),  r = (psi - c psi') / (1 + lambda),
//     coef_x = (a / b) r,  coef_ww = (b / a) r.
__device__ __forceinline__ void lsoftmax_label_coefs(float c, float a, float b, int m, float lambda,
                                                     float* coef_w, float* coef_x, float* coef_ww)
{
    float psi, dpsi;
    lsoftmax_psi(c, m, &psi, &dpsi);
    c = fminf(1.0f, fmaxf(-1.0f, c));
    float r = (psi - c * dpsi) / (1.0f + lambda);
    *coef_w = (lambda + dpsi) / (1.0f + lambda);
    *coef_x = a / fmaxf(b, LSM_EPS) * r;
    *coef_ww = b / fmaxf(a, LSM_EPS) * r;
}

// 1d. Version 1's three kernels as one out-of-place pass (the graded exercise's reference): out = F with
//     the label's logit blended, for norms given per sample (x_norm) and per class (w_norm).  One thread
//     per element of F, grid-stride; only the label's element computes the margin.
__global__ void lsoftmax_patch_logits(const float* __restrict__ logits, const int* __restrict__ labels,
                                      const float* __restrict__ x_norm, const float* __restrict__ w_norm,
                                      float* out, int batch, int classes, int m, float lam)
{
    long long total = (long long)batch * classes;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)blockDim.x * gridDim.x) {
        int i = (int)(e / classes), j = (int)(e % classes);
        float f = logits[e];
        if (j == labels[i]) {
            float a = w_norm[j], b = x_norm[i];
            float psi, dpsi;
            lsoftmax_psi(f / (fmaxf(a, LSM_EPS) * fmaxf(b, LSM_EPS)), m, &psi, &dpsi);
            f = (lam * f + a * b * psi) / (1.0f + lam);
        }
        out[e] = f;
    }
}

// 1e. The margin term's gradient with respect to the features (the graded exercise's reference):
//     grad_x[i] = grad_target[i] (coef_w W_{y_i} + coef_x x_i).  One warp per sample: the lanes share
//     the dot product and the two norms (a shuffle tree), then write the row together (coalesced).
__global__ void lsoftmax_margin_grad_input(const float* __restrict__ grad_target, const float* __restrict__ X,
                                           const float* __restrict__ W, const int* __restrict__ labels,
                                           float* grad_x, int batch, int dim, int classes, int m, float lam)
{
    int lane = threadIdx.x % 32;
    int warps = (blockDim.x / 32) * gridDim.x;
    for (int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; i < batch; i += warps) {
        const float* x = X + (size_t)i * dim;
        const float* w = W + (size_t)labels[i] * dim;
        float xw, xx, ww;
        lsoftmax_warp_label_dots(x, w, dim, lane, &xw, &xx, &ww);
        float a = sqrtf(ww), b = sqrtf(xx);
        float coef_w, coef_x, coef_ww;
        lsoftmax_label_coefs(xw / (fmaxf(a, LSM_EPS) * fmaxf(b, LSM_EPS)), a, b, m, lam, &coef_w, &coef_x, &coef_ww);
        float g = grad_target[i];
        for (int d = lane; d < dim; d += 32) grad_x[(size_t)i * dim + d] = g * (coef_w * w[d] + coef_x * x[d]);
    }
}

// 1f. dX as the Caffe layer computes it: dX[i][d] = sum_j G[i][j] dF'[i][j]/dx_i[d], one thread per
//     element, with a branch for the label's column.  G = dE/dF' (N x C).
__global__ void lsoftmax_backward_input_naive(const float* __restrict__ G, const float* __restrict__ X,
                                              const float* __restrict__ W, const int* __restrict__ labels,
                                              const float* __restrict__ x_norm, const float* __restrict__ w_norm,
                                              const float* __restrict__ cos_theta, float* dX,
                                              int N, int C, int D, int m, float lambda)
{
    long long total = (long long)N * D;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)blockDim.x * gridDim.x) {
        int i = (int)(e / D), d = (int)(e % D);
        int y = labels[i];
        float coef_w, coef_x, coef_ww;
        lsoftmax_label_coefs(cos_theta[i], w_norm[i], x_norm[i], m, lambda, &coef_w, &coef_x, &coef_ww);
        float sum = 0.0f;
        for (int j = 0; j < C; ++j) {
            float g = G[(size_t)i * C + j];
            if (j == y) sum += g * (coef_w * W[(size_t)j * D + d] + coef_x * X[e]);
            else sum += g * W[(size_t)j * D + d];
        }
        dX[e] = sum;
    }
}

// 1g. dW the same way: dW[j][d] = sum_i G[i][j] dF'[i][j]/dW_j[d], a loop over the whole batch.
__global__ void lsoftmax_backward_weight_naive(const float* __restrict__ G, const float* __restrict__ X,
                                               const float* __restrict__ W, const int* __restrict__ labels,
                                               const float* __restrict__ x_norm, const float* __restrict__ w_norm,
                                               const float* __restrict__ cos_theta, float* dW,
                                               int N, int C, int D, int m, float lambda)
{
    long long total = (long long)C * D;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)blockDim.x * gridDim.x) {
        int j = (int)(e / D), d = (int)(e % D);
        float sum = 0.0f;
        for (int i = 0; i < N; ++i) {
            float g = G[(size_t)i * C + j];
            float x = X[(size_t)i * D + d];
            if (labels[i] == j) {
                float coef_w, coef_x, coef_ww;
                lsoftmax_label_coefs(cos_theta[i], w_norm[i], x_norm[i], m, lambda, &coef_w, &coef_x, &coef_ww);
                sum += g * (coef_w * x + coef_ww * W[e]);
            } else {
                sum += g * x;
            }
        }
        dW[e] = sum;
    }
}

// ------------------------------------------------------------------------------------------------
// 2. The factored backward: GEMMs (kernels/gemm/sgemm.cu, launched from kernels/lsoftmax/lsoftmax.py) plus these.

// G~ from G = dE/dF' (any upstream gradient): a copy with the label's column times coef_w, and the
// per-sample coefficients beta[i] = g coef_x and delta[i] = g coef_ww of the rank-1 corrections
// (g = G[i][y_i]).  Rows over blockIdx.y, columns over the x threads (no division per element); the
// thread that meets the label's column also writes beta and delta.
__global__ void lsoftmax_rescale_label_column(const float* __restrict__ G, const int* __restrict__ labels,
                                              const float* __restrict__ x_norm, const float* __restrict__ w_norm,
                                              const float* __restrict__ cos_theta, float* Gt, float* beta,
                                              float* delta, int N, int C, int m, float lambda)
{
    for (int i = blockIdx.y; i < N; i += gridDim.y) {
        int y = labels[i];
        const float* g_row = G + (size_t)i * C;
        float* out = Gt + (size_t)i * C;
        for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < C; j += blockDim.x * gridDim.x) {
            float g = g_row[j];
            if (j == y) {
                float coef_w, coef_x, coef_ww;
                lsoftmax_label_coefs(cos_theta[i], w_norm[i], x_norm[i], m, lambda, &coef_w, &coef_x, &coef_ww);
                out[j] = g * coef_w;
                beta[i] = g * coef_x;
                delta[i] = g * coef_ww;
            } else {
                out[j] = g;
            }
        }
    }
}

// gamma[j] = sum over the samples i of class j of delta[i]: one block per class, each thread a fixed
// stride of the batch, then the block's fixed tree.  The same order every time (no atomics), so dW is
// reproducible to the bit.  (One warp per class left 10 classes to 10 warps on the whole GPU, each
// walking 128 strides of a 4096-sample batch: tens of microseconds of latency for 32 KB of data.)
__global__ void lsoftmax_class_sums(const int* __restrict__ labels, const float* __restrict__ delta,
                                    float* gamma, int N, int C)
{
    __shared__ float scratch[66];
    for (int j = blockIdx.x; j < C; j += gridDim.x) {
        float s = 0.0f;
        for (int i = threadIdx.x; i < N; i += blockDim.x) s += labels[i] == j ? delta[i] : 0.0f;
        s = lsoftmax_block_sum(s, scratch);
        if (threadIdx.x == 0) gamma[j] = s;
    }
}

// out[r][d] += scale[r] * rows[r][d]: the rank-1 correction diag(beta) X of dX.  Rows over blockIdx.y,
// columns over the x threads.
__global__ void lsoftmax_add_scaled_rows(float* out, const float* __restrict__ rows, const float* __restrict__ scale,
                                         int R, int D)
{
    for (int r = blockIdx.y; r < R; r += gridDim.y) {
        float a = scale[r];
        for (int d = blockIdx.x * blockDim.x + threadIdx.x; d < D; d += blockDim.x * gridDim.x)
            out[(size_t)r * D + d] += a * rows[(size_t)r * D + d];
    }
}

// A plain transpose is the GEMM chapter's (matrix_transpose in kernels/gemm/sgemm.cu); this one also adds the
// rank-1 correction, in the same tiles.
#define LSM_TILE 32
#define LSM_TILE_ROWS 8   // the block is 32 x 8 threads; each thread moves 4 elements of the tile

// dW[j][d] = dWt[d][j] + gamma[j] W[j][d]: the transpose of the GEMM's D x C result and the rank-1
// correction diag(gamma) W in the same pass.
__global__ void lsoftmax_transpose_add_scaled_rows(const float* __restrict__ dWt, const float* __restrict__ W,
                                                   const float* __restrict__ gamma, float* dW, int C, int D)
{
    __shared__ float tile[LSM_TILE][LSM_TILE + 1];
    int j0 = blockIdx.x * LSM_TILE, d0 = blockIdx.y * LSM_TILE;   // dWt is D rows x C columns
    for (int dy = threadIdx.y; dy < LSM_TILE; dy += LSM_TILE_ROWS) {
        int d = d0 + dy, j = j0 + threadIdx.x;
        tile[dy][threadIdx.x] = (d < D && j < C) ? dWt[(size_t)d * C + j] : 0.0f;
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < LSM_TILE; dy += LSM_TILE_ROWS) {
        int j = j0 + dy, d = d0 + threadIdx.x;
        if (j < C && d < D) dW[(size_t)j * D + d] = tile[threadIdx.x][dy] + gamma[j] * W[(size_t)j * D + d];
    }
}

// ------------------------------------------------------------------------------------------------
// 3. Fused: one block per sample (grid-stride over rows).

// Forward.  stats[i] = (logsumexp of the row with the blended label logit, |x_i|, |W_{y_i}|, cos theta)
// for the backward pass; loss[i] = logsumexp - F'[i][y_i], which stays exact when the label's
// probability underflows (no log of a probability).  One read of F, vectorised when C % 4 == 0.
__global__ void __launch_bounds__(LSM_THREADS)
lsoftmax_fused_forward(const float* __restrict__ F, const int* __restrict__ labels, const float* __restrict__ X,
                       const float* __restrict__ W, float* loss, float* stats, int N, int C, int D, int m, float lambda)
{
    __shared__ float scratch[66];
    for (int i = blockIdx.x; i < N; i += gridDim.x) {
        int y = labels[i];
        const float* x = X + (size_t)i * D;
        const float* w = W + (size_t)y * D;
        float xx = 0.0f, ww = 0.0f;
        for (int d = threadIdx.x; d < D; d += blockDim.x) { xx += x[d] * x[d]; ww += w[d] * w[d]; }
        float b = sqrtf(lsoftmax_block_sum(xx, scratch));
        float a = sqrtf(lsoftmax_block_sum(ww, scratch));
        const float* row = F + (size_t)i * C;
        float f = row[y];
        float c = f / (fmaxf(a, LSM_EPS) * fmaxf(b, LSM_EPS));
        float psi, dpsi;
        lsoftmax_psi(c, m, &psi, &dpsi);
        float target = (lambda * f + a * b * psi) / (1.0f + lambda);

        float mx = -INFINITY, s = 0.0f;
        if ((C & 3) == 0) {
            const float4* row4 = reinterpret_cast<const float4*>(row);
            for (int q = threadIdx.x; q < C / 4; q += blockDim.x) {
                float4 v = row4[q];
                int j = 4 * q;
                lsoftmax_online_add(mx, s, j + 0 == y ? target : v.x);
                lsoftmax_online_add(mx, s, j + 1 == y ? target : v.y);
                lsoftmax_online_add(mx, s, j + 2 == y ? target : v.z);
                lsoftmax_online_add(mx, s, j + 3 == y ? target : v.w);
            }
        } else {
            for (int j = threadIdx.x; j < C; j += blockDim.x) lsoftmax_online_add(mx, s, j == y ? target : row[j]);
        }
        lsoftmax_block_online(mx, s, scratch);
        if (threadIdx.x == 0) {
            float lse = mx + logf(s);
            loss[i] = lse - target;
            float* st = stats + 4 * (size_t)i;
            st[0] = lse; st[1] = b; st[2] = a; st[3] = c;
        }
    }
}

// Backward.  With p = softmax of the blended row and scale = grad_loss[i] = dE/dloss[i] (1/N for the mean):
//   G~[i][j] = scale p_j                            (j != y_i: the logit is F itself)
//   g        = scale (p_y - 1)                      (dE/dF'[i][y_i])
//   G~[i][y] = g coef_w,  beta[i] = g coef_x,  delta[i] = g coef_ww
// (lsoftmax_label_coefs); gamma[j], the sum of delta over the samples of class j, is lsoftmax_class_sums.
__global__ void __launch_bounds__(LSM_THREADS)
lsoftmax_fused_backward(const float* __restrict__ F, const int* __restrict__ labels, const float* __restrict__ stats,
                        const float* __restrict__ grad_loss, float* Gt, float* beta, float* delta, int N, int C, int m,
                        float lambda, int patched)
{
    for (int i = blockIdx.x; i < N; i += gridDim.x) {
        int y = labels[i];
        float scale = grad_loss[i];
        const float* st = stats + 4 * (size_t)i;
        float lse = st[0], b = st[1], a = st[2], c = st[3];
        const float* row = F + (size_t)i * C;
        float* out = Gt + (size_t)i * C;
        float coef_w, coef_x, coef_ww;
        lsoftmax_label_coefs(c, a, b, m, lambda, &coef_w, &coef_x, &coef_ww);
        float psi, dpsi;
        lsoftmax_psi(c, m, &psi, &dpsi);
        // With patched = 1 (version 4) the GEMM's epilogue has already written the blended logit into F.
        float target = patched ? row[y] : (lambda * row[y] + a * b * psi) / (1.0f + lambda);
        float g = scale * (expf(target - lse) - 1.0f);
        if ((C & 3) == 0) {
            const float4* row4 = reinterpret_cast<const float4*>(row);
            float4* out4 = reinterpret_cast<float4*>(out);
            for (int q = threadIdx.x; q < C / 4; q += blockDim.x) {
                float4 v = row4[q];
                int j = 4 * q;
                float4 o;
                o.x = j + 0 == y ? g * coef_w : scale * expf(v.x - lse);
                o.y = j + 1 == y ? g * coef_w : scale * expf(v.y - lse);
                o.z = j + 2 == y ? g * coef_w : scale * expf(v.z - lse);
                o.w = j + 3 == y ? g * coef_w : scale * expf(v.w - lse);
                out4[q] = o;
            }
        } else {
            for (int j = threadIdx.x; j < C; j += blockDim.x)
                out[j] = j == y ? g * coef_w : scale * expf(row[j] - lse);
        }
        if (threadIdx.x == 0) {
            beta[i] = g * coef_x;
            delta[i] = g * coef_ww;
        }
    }
}

// The mean of the N losses: one block, each thread a fixed stride, then a fixed tree.
__global__ void lsoftmax_mean_loss(const float* __restrict__ loss, float* mean, int N)
{
    __shared__ float scratch[66];
    float s = 0.0f;
    for (int i = threadIdx.x; i < N; i += blockDim.x) s += loss[i];
    s = lsoftmax_block_sum(s, scratch);
    if (threadIdx.x == 0) mean[0] = s / (float)N;
}

// ------------------------------------------------------------------------------------------------
// 4. The margin in the GEMM's epilogue.

// Before the GEMM: each sample's blended label logit target[i] = (lambda f + a b psi(c)) / (1 + lambda),
// with f = x_i . W_{y_i} computed here (one warp per sample: the dot product and both norms share the
// loads), and stats[i] = (-, |x_i|, |W_{y_i}|, cos theta); the combine kernel fills in stats[i][0].
__global__ void lsoftmax_label_targets(const float* __restrict__ X, const float* __restrict__ W,
                                       const int* __restrict__ labels, float* target, float* stats,
                                       int N, int D, int m, float lambda)
{
    int lane = threadIdx.x % 32;
    int warps = (blockDim.x / 32) * gridDim.x;
    for (int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; i < N; i += warps) {
        const float* x = X + (size_t)i * D;
        const float* w = W + (size_t)labels[i] * D;
        float xw, xx, ww;
        lsoftmax_warp_label_dots(x, w, D, lane, &xw, &xx, &ww);
        if (lane == 0) {
            float a = sqrtf(ww), b = sqrtf(xx);
            float c = xw / (fmaxf(a, LSM_EPS) * fmaxf(b, LSM_EPS));
            float psi, dpsi;
            lsoftmax_psi(c, m, &psi, &dpsi);
            target[i] = (lambda * xw + a * b * psi) / (1.0f + lambda);
            float* st = stats + 4 * (size_t)i;
            st[1] = b; st[2] = a; st[3] = c;
        }
    }
}

// F = X Wt by the GEMM chapter's tile, then the epilogue on the tile this block owns: each warp takes
// rows of the tile, substitutes (and stores) the blended label logit where the label's column falls in
// the tile, and leaves the row's online-softmax pair for these columns in partial[i][tile column].
// __syncthreads() makes the tile's global stores visible to every thread of the block.
__global__ void __launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)
lsoftmax_gemm_margin_forward(const float* __restrict__ X, const float* __restrict__ Wt, float* F,
                             const int* __restrict__ labels, const float* __restrict__ target, float* partial,
                             int N, int C, int D)
{
    int tile_i = blockIdx.y * WT_BM, tile_j = blockIdx.x * WT_BN;
    sgemm_warptile_tile(N, C, D, X, Wt, F, tile_i, tile_j);
    __syncthreads();
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int r = warp; r < WT_BM; r += WT_THREADS / 32) {
        int i = tile_i + r;
        if (i >= N) break;                       // the same for the whole warp
        int y = labels[i];
        float mx = -INFINITY, s = 0.0f;
        for (int jj = lane; jj < WT_BN && tile_j + jj < C; jj += 32) {
            int j = tile_j + jj;
            float v;
            if (j == y) { v = target[i]; F[(size_t)i * C + j] = v; }
            else v = F[(size_t)i * C + j];
            lsoftmax_online_add(mx, s, v);
        }
        for (int off = 16; off > 0; off >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, mx, off);
            float s2 = __shfl_xor_sync(0xffffffffu, s, off);
            lsoftmax_online_merge(mx, s, m2, s2);
        }
        if (lane == 0) {
            float* p = partial + 2 * ((size_t)i * gridDim.x + blockIdx.x);
            p[0] = mx; p[1] = s;
        }
    }
}

// loss[i] = logsumexp - target[i], the logsumexp merged from the row's partial pairs in tile order;
// stats[i][0] = logsumexp.  One thread per row.
__global__ void lsoftmax_combine_partials(const float* __restrict__ partial, const float* __restrict__ target,
                                          float* loss, float* stats, int N, int tiles)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x) {
        const float* p = partial + 2 * (size_t)i * tiles;
        float mx = -INFINITY, s = 0.0f;
        for (int t = 0; t < tiles; ++t) lsoftmax_online_merge(mx, s, p[2 * t], p[2 * t + 1]);
        float lse = mx + logf(s);
        loss[i] = lse - target[i];
        stats[4 * (size_t)i] = lse;
    }
}
