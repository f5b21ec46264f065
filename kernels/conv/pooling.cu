// kernels/conv/pooling.cu -- pooling (subsampling) layers and their backward passes.
//
// A pooling layer shrinks each feature map by `pool` in both directions: output pixel (i, j) of
// map c summarises the pool x pool window X[n][c][i*pool .. i*pool + pool)[j*pool .. j*pool + pool)
// (windows side by side, stride = pool).  X is N x C x H x W, Y is N x C x (H / pool) x (W / pool),
// rounded down: the last rows or columns of a map that do not fill a window are dropped.
// Every kernel here uses one thread per element of the array it writes, a flat index
// over it, and a one-dimensional grid that covers it.
//
// Versions, in teaching order:
//   1. avg_pool_forward                 the mean of each window (LeNet's subsampling, without its
//                                       trainable coefficient).
//   2. subsample_bias_sigmoid_forward   LeNet-5's subsampling layer in one kernel: the mean of the
//                                       window, plus a bias per map, through a sigmoid.
//   3. max_pool_forward                 the largest value of each window.
//   4. avg_pool_backward                dX: every pixel of a window receives dY / pool^2; pixels in
//                                       dropped rows and columns receive 0.
//   5. max_pool_backward                dX: the pixel that was the maximum of its window receives dY,
//                                       the others 0.  One thread per *input* pixel recomputes its
//                                       window's maximum (the first one, in row-major order, on a tie)
//                                       so that no index needs storing and no two threads write the
//                                       same element: dX needs no zeroing before the launch.

// 1. Y[n][c][i][j] = mean of the window.
__global__ void avg_pool_forward(const float* X, float* Y, int N, int C, int H, int W, int pool)
{
    int H_out = H / pool, W_out = W / pool;
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= N * C * H_out * W_out) return;
    int j = index % W_out;
    int i = (index / W_out) % H_out;
    int plane = index / (W_out * H_out);              // n * C + c
    const float* x = X + (size_t)plane * H * W + (i * pool) * W + j * pool;
    float sum = 0.0f;
    for (int p = 0; p < pool; ++p)
        for (int q = 0; q < pool; ++q)
            sum += x[p * W + q];
    Y[index] = sum / (float)(pool * pool);
}

// 2. Y[n][c][i][j] = sigmoid(mean of the window + b[c]).
__global__ void subsample_bias_sigmoid_forward(const float* X, const float* b, float* Y,
                                               int N, int C, int H, int W, int pool)
{
    int H_out = H / pool, W_out = W / pool;
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= N * C * H_out * W_out) return;
    int j = index % W_out;
    int i = (index / W_out) % H_out;
    int plane = index / (W_out * H_out);
    int c = plane % C;
    const float* x = X + (size_t)plane * H * W + (i * pool) * W + j * pool;
    float sum = 0.0f;
    for (int p = 0; p < pool; ++p)
        for (int q = 0; q < pool; ++q)
            sum += x[p * W + q];
    float z = sum / (float)(pool * pool) + b[c];
    Y[index] = 1.0f / (1.0f + expf(-z));
}

// 3. Y[n][c][i][j] = max of the window.
__global__ void max_pool_forward(const float* X, float* Y, int N, int C, int H, int W, int pool)
{
    int H_out = H / pool, W_out = W / pool;
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= N * C * H_out * W_out) return;
    int j = index % W_out;
    int i = (index / W_out) % H_out;
    int plane = index / (W_out * H_out);
    const float* x = X + (size_t)plane * H * W + (i * pool) * W + j * pool;
    float best = x[0];
    for (int p = 0; p < pool; ++p)
        for (int q = 0; q < pool; ++q)
            best = fmaxf(best, x[p * W + q]);
    Y[index] = best;
}

// 4. dX[n][c][h][w] = dY[n][c][h / pool][w / pool] / pool^2 inside the pooled area, 0 outside.
__global__ void avg_pool_backward(const float* dY, float* dX, int N, int C, int H, int W, int pool)
{
    int H_out = H / pool, W_out = W / pool;
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= N * C * H * W) return;
    int w = index % W;
    int h = (index / W) % H;
    int plane = index / (W * H);
    int i = h / pool, j = w / pool;
    dX[index] = (i < H_out && j < W_out)
        ? dY[((size_t)plane * H_out + i) * W_out + j] / (float)(pool * pool)
        : 0.0f;
}

// 5. dX[n][c][h][w] = dY of its window if X[n][c][h][w] is that window's (first) maximum, else 0.
__global__ void max_pool_backward(const float* X, const float* dY, float* dX,
                                  int N, int C, int H, int W, int pool)
{
    int H_out = H / pool, W_out = W / pool;
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= N * C * H * W) return;
    int w = index % W;
    int h = (index / W) % H;
    int plane = index / (W * H);
    int i = h / pool, j = w / pool;
    float grad = 0.0f;
    if (i < H_out && j < W_out) {
        const float* x = X + (size_t)plane * H * W + (i * pool) * W + j * pool;
        int best_p = 0, best_q = 0;
        float best = x[0];
        for (int p = 0; p < pool; ++p)
            for (int q = 0; q < pool; ++q)
                if (x[p * W + q] > best) { best = x[p * W + q]; best_p = p; best_q = q; }
        if (i * pool + best_p == h && j * pool + best_q == w)
            grad = dY[((size_t)plane * H_out + i) * W_out + j];
    }
    dX[index] = grad;
}
