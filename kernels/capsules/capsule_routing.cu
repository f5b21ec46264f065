// The rest of a capsule layer: squash and routing by agreement.
//
// Given the predictions u_hat [batch, in_caps, out_caps, out_dim] (from
// capsule_prediction.cu), dynamic routing (Sabour et al., 2017) repeats, with
// logits b [batch, in_caps, out_caps] starting at zero:
//
//   c[b, i, :]  = softmax over the output capsules of logits[b, i, :]     routing_softmax
//   s[b, j, :]  = sum_i c[b, i, j] u_hat[b, i, j, :]                        routing_weighted_sum
//   v[b, j, :]  = squash(s[b, j, :])                                        squash_forward
//   logits[b, i, j] += <u_hat[b, i, j, :], v[b, j, :]>   (not after the last iteration)  routing_agreement
//
// squash(s) = |s|^2 / (1 + |s|^2) * s / |s| keeps the direction of s and maps
// its length into [0, 1): the length of an output capsule is the probability
// that its entity is present.
//
// Kernels, in the order one routing iteration runs them, then the backward
// pass used to train a layer (the coupling coefficients c of the last
// iteration are treated as constants, so the gradient reaches u_hat through
// s = sum_i c u_hat and the squash):
//   1. routing_softmax                  one thread per (b, i): a numerically safe softmax over out_caps logits.
//   2. routing_weighted_sum             one thread per (b, j, d): a loop over the input capsules; consecutive
//                                       threads (consecutive d) read consecutive u_hat, so the loads coalesce.
//   3. squash_forward                   one thread per capsule vector.
//   4. routing_agreement                one thread per (b, i, j): a dot product of out_dim numbers.
//   5. squash_backward                  one thread per capsule: the vector-Jacobian product of the squash.
//   6. routing_weighted_sum_backward    one thread per element of u_hat: dE/du_hat = c[b, i, j] dE/ds[b, j, :].

#define SQUASH_EPS 1e-7f  // keeps 1 / |s| finite for a zero vector

#include "cuda_helpers.cuh"  // CUDA_1D_KERNEL_LOOP_INT64

// 1. c = softmax(logits) over the last axis, rows of out_caps numbers.
__global__ void routing_softmax(const float* __restrict__ logits, float* __restrict__ c, long long rows,
                                int out_caps) {
    CUDA_1D_KERNEL_LOOP_INT64(r, rows) {
        const float* x = logits + r * out_caps;
        float m = x[0];
        for (int j = 1; j < out_caps; ++j) m = fmaxf(m, x[j]);  // subtract the max: exp never overflows
        float total = 0.0f;
        for (int j = 0; j < out_caps; ++j) total += expf(x[j] - m);
        const float inv = 1.0f / total;
        for (int j = 0; j < out_caps; ++j) c[r * out_caps + j] = expf(x[j] - m) * inv;
    }
}

// 2. s[b, j, d] = sum_i c[b, i, j] u_hat[b, i, j, d].
__global__ void routing_weighted_sum(const float* __restrict__ c, const float* __restrict__ u_hat,
                                     float* __restrict__ s, long long batch, long long in_caps, long long out_caps,
                                     long long out_dim) {
    const long long row = out_caps * out_dim;
    CUDA_1D_KERNEL_LOOP_INT64(index, batch * row) {
        const long long b = index / row;
        const long long jd = index % row;  // j * out_dim + d
        const long long j = jd / out_dim;
        float sum = 0.0f;
        for (long long i = 0; i < in_caps; ++i) {
            sum += __ldg(c + (b * in_caps + i) * out_caps + j) * __ldg(u_hat + (b * in_caps + i) * row + jd);
        }
        s[index] = sum;
    }
}

// 3. v = squash(s) for n_caps vectors of dim numbers.
__global__ void squash_forward(const float* __restrict__ s, float* __restrict__ v, long long n_caps, int dim) {
    CUDA_1D_KERNEL_LOOP_INT64(n, n_caps) {
        const float* x = s + n * dim;
        float norm2 = 0.0f;
        for (int d = 0; d < dim; ++d) norm2 += x[d] * x[d];
        const float scale = norm2 / ((1.0f + norm2) * sqrtf(norm2 + SQUASH_EPS));
        for (int d = 0; d < dim; ++d) v[n * dim + d] = scale * x[d];
    }
}

// 4. logits[b, i, j] += <u_hat[b, i, j, :], v[b, j, :]>.
__global__ void routing_agreement(const float* __restrict__ u_hat, const float* __restrict__ v,
                                  float* __restrict__ logits, long long batch, long long in_caps, long long out_caps,
                                  long long out_dim) {
    CUDA_1D_KERNEL_LOOP_INT64(index, batch * in_caps * out_caps) {
        const long long b = index / (in_caps * out_caps);
        const long long j = index % out_caps;
        const float* p = u_hat + index * out_dim;  // u_hat[b, i, j, :]
        const float* q = v + (b * out_caps + j) * out_dim;
        float dot = 0.0f;
        for (long long d = 0; d < out_dim; ++d) dot += __ldg(p + d) * __ldg(q + d);
        logits[index] += dot;
    }
}

// 5. grad_s = (dv/ds)^T grad_v.  With x = |s|^2 and v = f(x) s,
//    f(x) = x / ((1 + x) sqrt(x + eps)), dv/ds = f I + 2 f'(x) s s^T (symmetric), so
//    grad_s = f grad_v + 2 f'(x) <s, grad_v> s, and
//    f'(x) = 1 / ((1 + x) sqrt(x + eps)) - f / (1 + x) - f / (2 (x + eps)).
__global__ void squash_backward(const float* __restrict__ s, const float* __restrict__ grad_v,
                                float* __restrict__ grad_s, long long n_caps, int dim) {
    CUDA_1D_KERNEL_LOOP_INT64(n, n_caps) {
        const float* x = s + n * dim;
        const float* g = grad_v + n * dim;
        float norm2 = 0.0f, dot = 0.0f;
        for (int d = 0; d < dim; ++d) {
            norm2 += x[d] * x[d];
            dot += x[d] * g[d];
        }
        const float root = sqrtf(norm2 + SQUASH_EPS);
        const float f = norm2 / ((1.0f + norm2) * root);
        const float df = 1.0f / ((1.0f + norm2) * root) - f / (1.0f + norm2) - 0.5f * f / (norm2 + SQUASH_EPS);
        for (int d = 0; d < dim; ++d) grad_s[n * dim + d] = f * g[d] + 2.0f * df * dot * x[d];
    }
}

// 6. grad_u_hat[b, i, j, d] = c[b, i, j] grad_s[b, j, d].
__global__ void routing_weighted_sum_backward(const float* __restrict__ c, const float* __restrict__ grad_s,
                                              float* __restrict__ grad_u_hat, long long batch, long long in_caps,
                                              long long out_caps, long long out_dim) {
    CUDA_1D_KERNEL_LOOP_INT64(index, batch * in_caps * out_caps * out_dim) {
        const long long bij = index / out_dim;  // (b * in_caps + i) * out_caps + j
        const long long b = bij / (in_caps * out_caps);
        const long long j = bij % out_caps;
        const long long d = index % out_dim;
        grad_u_hat[index] = __ldg(c + bij) * __ldg(grad_s + (b * out_caps + j) * out_dim + d);
    }
}
