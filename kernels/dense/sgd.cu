// kernels/dense/sgd.cu -- the plain stochastic gradient descent step, param -= learning_rate * grad.
//
// One version: one thread per parameter.  The gradient is already the minibatch mean
// (softmax_cross_entropy_backward divides by n), so the step needs no further scaling.

__global__ void sgd_update(float* param, const float* grad, float learning_rate, int count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) param[i] -= learning_rate * grad[i];
}
