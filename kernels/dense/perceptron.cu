// kernels/dense/perceptron.cu -- one neuron (a perceptron) applied to, and trained on, a batch of samples.
//
// Data layout: x is an n-by-d matrix, one sample per row (row-major);
// params holds the d weights followed by the bias, params[d] = b.
// Gradients are kept in the same layout, so the update is one loop over d + 1 numbers.
//
// Versions, in teaching order:
//   1. perceptron_classify_sign    one thread per sample: z = w.x + b, y = sign(z) in {-1, 0, 1}.
//   2. perceptron_forward_sigmoid  same, with the smooth activation y = 1 / (1 + exp(-z)),
//                                  which has a derivative everywhere (sign has none worth using).
//   3. perceptron_sample_gradients one thread per sample writes its own gradient of E = (y - t)^2 / 2:
//                                  dE/dw = (y - t) y (1 - y) x and dE/db = (y - t) y (1 - y),
//                                  an n-by-(d + 1) matrix with one row per sample.
//   4. gradient_sum_atomic         sums the rows of that matrix (the minibatch gradient): each thread
//                                  atomicAdd's its row into the d + 1 totals.  Correct, but every
//                                  thread of the grid queues on the same d + 1 addresses.
//   5. gradient_sum_tree           each block first sums its rows in shared memory, halving the number
//                                  of active threads at every step (log2(block) steps), then adds one
//                                  number per parameter with atomicAdd: n / 256 atomics instead of n.
//   6. perceptron_update           params -= learning_rate * total / n, one thread per parameter:
//                                  a step down the mean gradient of the minibatch.
//   7. gradient_sum_columns        the sum of version 5, read as the matrix lies in memory.  The tree
//                                  reads column j with a stride of k floats (a warp touches 32 rows,
//                                  k times the bytes it uses); this version reads the n*k floats as
//                                  one flat array of float4s, fully coalesced, and keeps four register
//                                  sums per thread.  Because the loop's stride is a multiple of k,
//                                  each of a thread's four sums always belongs to the same column.

// 1. Classify each sample by the side of the line (plane) w.x + b = 0 it lies on.
__global__ void perceptron_classify_sign(const float* x, const float* params, float* y, int n, int d)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;                       // the last block may have more threads than samples
    float z = params[d];                      // start from the bias
    for (int j = 0; j < d; ++j)
        z += params[j] * x[i * d + j];
    y[i] = (float)((z > 0.0f) - (z < 0.0f));  // 1 above the line, -1 below, 0 on it
}

// 2. The same weighted sum through the logistic sigmoid: an output in (0, 1) that changes smoothly.
__global__ void perceptron_forward_sigmoid(const float* x, const float* params, float* y, int n, int d)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float z = params[d];
    for (int j = 0; j < d; ++j)
        z += params[j] * x[i * d + j];
    y[i] = 1.0f / (1.0f + expf(-z));
}

// 3. Per-sample gradient of E = (y - t)^2 / 2 by the chain rule:
//    dE/dy = y - t,  dy/dz = y (1 - y),  dz/dw_j = x_j,  dz/db = 1.
//    Row i of grads (d + 1 numbers) belongs to sample i alone, so no two threads write the same place.
__global__ void perceptron_sample_gradients(const float* x, const float* t, const float* params,
                                            float* grads, int n, int d)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float z = params[d];
    for (int j = 0; j < d; ++j)
        z += params[j] * x[i * d + j];
    float y = 1.0f / (1.0f + expf(-z));
    float delta = (y - t[i]) * y * (1.0f - y);   // dE/dz
    for (int j = 0; j < d; ++j)
        grads[i * (d + 1) + j] = delta * x[i * d + j];
    grads[i * (d + 1) + d] = delta;
}

// 4. total[j] += sum over rows i of grads[i][j], for an n-by-k matrix (k = d + 1).
//    total must hold zeros before the launch.  One thread per row; every thread adds to the same
//    k addresses, so the hardware serialises the additions to each address.
__global__ void gradient_sum_atomic(const float* grads, float* total, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (int j = 0; j < k; ++j)
        atomicAdd(&total[j], grads[i * k + j]);
}

// 5. The same sum as a tree in shared memory.  Launch with blockDim.x == GRADIENT_SUM_BLOCK
//    (a power of two) and gridDim.y == k: block (bx, j) sums column j over its GRADIENT_SUM_BLOCK
//    rows, then adds its partial sum to total[j] with one atomicAdd.  total must hold zeros.
#define GRADIENT_SUM_BLOCK 256
__global__ void gradient_sum_tree(const float* grads, float* total, int n, int k)
{
    __shared__ float partial[GRADIENT_SUM_BLOCK];
    int j = blockIdx.y;                                   // the parameter this block sums
    int i = blockIdx.x * blockDim.x + threadIdx.x;        // the row this thread loads
    partial[threadIdx.x] = (i < n) ? grads[i * k + j] : 0.0f;   // rows past n add nothing
    __syncthreads();
    // Halve the active threads each step: thread s adds the value `stride` places to its right.
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();                                  // every sum of this step is written before the next reads it
    }
    if (threadIdx.x == 0)
        atomicAdd(&total[j], partial[0]);
}

// 6. Gradient descent step on the mean gradient of a minibatch of n samples.
__global__ void perceptron_update(float* params, const float* total, float learning_rate, int n, int k)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= k) return;
    params[j] -= learning_rate * total[j] / (float)n;
}

// 7. Column sums from coalesced float4 loads.  total must hold zeros; launch with k floats of
//    dynamic shared memory and at least k threads in the grid.
//
//    Thread t reads the float4 at flat index e = 4t, then e + S, e + 2S, ... with S = 4 * active,
//    where `active` (the threads that load) is the largest multiple of k in the grid.  Element
//    e + j + m S lies in column (4t + j + m S) % k = (4t + j) % k: the same for every m, so
//    acc[j] is a sum over one column.  Lanes k apart in a warp hold the same four columns; the
//    shuffles fold them onto lanes 0 .. k-1, which add into the block's k shared sums, and each
//    block adds k numbers to total with atomicAdd.
__global__ void gradient_sum_columns(const float* __restrict__ grads, float* total, int n, int k)
{
    extern __shared__ float column_sums[];                // k floats
    for (int j = threadIdx.x; j < k; j += blockDim.x)
        column_sums[j] = 0.0f;
    __syncthreads();

    const long long elements = (long long)n * k;
    const int active = gridDim.x * blockDim.x / k * k;   // a multiple of k
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (t < active) {
        const long long stride = 4LL * active;            // a multiple of k
        const long long vec_end = elements / 4 * 4;       // the float4s that fit entirely
        long long e = 4LL * t;
        for (; e + stride < vec_end; e += 2 * stride) {   // two independent loads per step
            const float4 p = *reinterpret_cast<const float4*>(grads + e);
            const float4 q = *reinterpret_cast<const float4*>(grads + e + stride);
            acc[0] += p.x + q.x;
            acc[1] += p.y + q.y;
            acc[2] += p.z + q.z;
            acc[3] += p.w + q.w;
        }
        for (; e < vec_end; e += stride) {                // at most one float4 left
            const float4 p = *reinterpret_cast<const float4*>(grads + e);
            acc[0] += p.x;
            acc[1] += p.y;
            acc[2] += p.z;
            acc[3] += p.w;
        }
        // The one thread whose e lands exactly on vec_end adds the last n*k % 4 elements.
        for (int j = 0; j < 4 && e + j < elements; ++j)
            acc[j] += grads[e + j];
    }
    // Fold lanes lane + k, lane + 2k, ... onto lanes 0 .. k-1 (offsets are multiples of k).
    const int lane = threadIdx.x % 32;
    for (int s = 16; s >= 1; s /= 2) {
        const int offset = s * k;
        if (offset >= 32)
            continue;
        for (int j = 0; j < 4; ++j) {
            const float other = __shfl_down_sync(0xffffffffu, acc[j], offset);
            if (lane + offset < 32)
                acc[j] += other;
        }
    }
    if (lane < k) {
        for (int j = 0; j < 4; ++j)
            atomicAdd(&column_sums[(4 * t + j) % k], acc[j]);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < k; j += blockDim.x)
        atomicAdd(&total[j], column_sums[j]);
}
