// kernels/dense/activations.cu -- elementwise activation functions and their derivatives.
//
// Every kernel treats its arrays as flat vectors of `count` numbers, one thread per element.
// The forward kernels compute y = f(z); the backward kernels turn dY = dE/dy into
// dZ = dE/dz = dY * f'(z) by the chain rule, using whichever of z or y gives f' most cheaply.
//
// Kernels, in the order the chapter introduces them:
//   1. sigmoid_forward / sigmoid_backward   y = 1 / (1 + e^-z),  f'(z) = y (1 - y)      (from y)
//   2. tanh_forward / tanh_backward         y = tanh z,          f'(z) = 1 - y^2        (from y)
//   3. relu_forward / relu_backward         y = max(z, 0),       f'(z) = 1 if z > 0 else 0 (from z)
//      ReLU's derivative never shrinks the gradient it passes on (sigmoid's is at most 1/4),
//      which is why deep networks train with it.

__global__ void sigmoid_forward(const float* z, float* y, int count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) y[i] = 1.0f / (1.0f + expf(-z[i]));
}

__global__ void sigmoid_backward(const float* y, const float* dY, float* dZ, int count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) dZ[i] = dY[i] * y[i] * (1.0f - y[i]);
}

__global__ void tanh_forward(const float* z, float* y, int count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) y[i] = tanhf(z[i]);
}

__global__ void tanh_backward(const float* y, const float* dY, float* dZ, int count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) dZ[i] = dY[i] * (1.0f - y[i] * y[i]);
}

__global__ void relu_forward(const float* z, float* y, int count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) y[i] = fmaxf(z[i], 0.0f);
}

__global__ void relu_backward(const float* z, const float* dY, float* dZ, int count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) dZ[i] = (z[i] > 0.0f) ? dY[i] : 0.0f;
}
