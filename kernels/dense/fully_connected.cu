// kernels/dense/fully_connected.cu -- a fully connected (dense, linear) layer y = W x + b and its backward pass.
//
// Layout (row-major, as PyTorch's nn.Linear): W is out_features-by-in_features, one row per output
// neuron; a minibatch X is n-by-in_features, one sample per row; so Y = X W^T + b is n-by-out_features.
// With E the loss and dY = dE/dY (n-by-out) coming from the layer above, the backward pass is
//   dX = dY W        (n-by-in):  for one sample, dE/dx = W^T dE/dy
//   dW = dY^T X      (out-by-in): the outer products dE/dy x^T summed over the minibatch
//   db = column sums of dY
//
// Versions, in teaching order:
//   1. fc_forward_matvec    one sample: y = W x + b, one thread per output neuron (a dot product each).
//   2. fc_forward_naive     a minibatch: one thread per (sample, output) element of Y, a 2-D grid;
//                           threadIdx.x runs along the outputs so neighbouring threads read
//                           neighbouring rows of W and the same row of X (a broadcast).
//   3. fc_forward_tiled     the same product through shared-memory tiles of X and W (FC_TILE x FC_TILE):
//                           each value loaded from global memory is used FC_TILE times.
//   4. fc_backward_input    dX = dY W, one thread per element of dX.
//   5. fc_backward_weight   dW = dY^T X, one thread per weight, summing its outer-product term over the
//                           minibatch (no atomics: each thread owns its weight).
//   6. fc_backward_bias     db = sum over the minibatch of dY, one thread per output neuron.

// 1. y[j] = b[j] + sum_k W[j][k] x[k] for a single sample.
__global__ void fc_forward_matvec(const float* W, const float* b, const float* x, float* y,
                                  int in_features, int out_features)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= out_features) return;
    float acc = b[j];
    for (int k = 0; k < in_features; ++k)
        acc += W[j * in_features + k] * x[k];
    y[j] = acc;
}

// 2. Y[i][j] = b[j] + sum_k X[i][k] W[j][k]: the matrix-vector product for every sample at once.
__global__ void fc_forward_naive(const float* X, const float* W, const float* b, float* Y,
                                 int n, int in_features, int out_features)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;   // output neuron
    int i = blockIdx.y * blockDim.y + threadIdx.y;   // sample
    if (i >= n || j >= out_features) return;
    float acc = b[j];
    for (int k = 0; k < in_features; ++k)
        acc += X[i * in_features + k] * W[j * in_features + k];
    Y[i * out_features + j] = acc;
}

// 3. The same with FC_TILE x FC_TILE tiles.  Launch with block (FC_TILE, FC_TILE).
//    Block (bx, by) computes the tile of Y with samples by*FC_TILE.. and outputs bx*FC_TILE..;
//    at each step it loads a tile of X (its samples, FC_TILE inputs) and of W (its outputs, the same
//    inputs), and every thread takes FC_TILE products from shared memory.
#define FC_TILE 16
__global__ void fc_forward_tiled(const float* X, const float* W, const float* b, float* Y,
                                 int n, int in_features, int out_features)
{
    __shared__ float Xs[FC_TILE][FC_TILE];       // Xs[sample][input]
    __shared__ float Ws[FC_TILE][FC_TILE + 1];   // Ws[output][input]; +1 column avoids bank conflicts
    int tx = threadIdx.x, ty = threadIdx.y;
    int j = blockIdx.x * FC_TILE + tx;           // output neuron of this thread
    int i = blockIdx.y * FC_TILE + ty;           // sample of this thread
    float acc = 0.0f;
    for (int k0 = 0; k0 < in_features; k0 += FC_TILE) {
        // Each thread loads one element of each tile; zeros outside the matrices keep the sum exact.
        int wrow = blockIdx.x * FC_TILE + ty;    // W row (output) loaded by this thread
        Xs[ty][tx] = (i < n && k0 + tx < in_features) ? X[i * in_features + k0 + tx] : 0.0f;
        Ws[ty][tx] = (wrow < out_features && k0 + tx < in_features) ? W[wrow * in_features + k0 + tx] : 0.0f;
        __syncthreads();                         // both tiles complete before anyone reads them
        for (int kk = 0; kk < FC_TILE; ++kk)
            acc += Xs[ty][kk] * Ws[tx][kk];
        __syncthreads();                         // everyone done reading before the next load overwrites
    }
    if (i < n && j < out_features)
        Y[i * out_features + j] = acc + b[j];
}

// 4. dX[i][k] = sum_j dY[i][j] W[j][k]   (for one sample: dE/dx = W^T dE/dy).
__global__ void fc_backward_input(const float* dY, const float* W, float* dX,
                                  int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;   // input feature
    int i = blockIdx.y * blockDim.y + threadIdx.y;   // sample
    if (i >= n || k >= in_features) return;
    float acc = 0.0f;
    for (int j = 0; j < out_features; ++j)
        acc += dY[i * out_features + j] * W[j * in_features + k];
    dX[i * in_features + k] = acc;
}

// 5. dW[j][k] = sum_i dY[i][j] X[i][k]: the outer product dE/dy x^T of every sample, summed.
__global__ void fc_backward_weight(const float* dY, const float* X, float* dW,
                                   int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;   // input feature
    int j = blockIdx.y * blockDim.y + threadIdx.y;   // output neuron
    if (j >= out_features || k >= in_features) return;
    float acc = 0.0f;
    for (int i = 0; i < n; ++i)
        acc += dY[i * out_features + j] * X[i * in_features + k];
    dW[j * in_features + k] = acc;
}

// 6. db[j] = sum_i dY[i][j]: the bias is added to every sample, so its gradient sums over them.
__global__ void fc_backward_bias(const float* dY, float* db, int n, int out_features)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= out_features) return;
    float acc = 0.0f;
    for (int i = 0; i < n; ++i)
        acc += dY[i * out_features + j];
    db[j] = acc;
}
