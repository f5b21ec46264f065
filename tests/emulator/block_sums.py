"""A block's shared-memory tree sum, the body several emulator tests build their kernels around."""

#: Each thread loads ``x[i]`` (0 past ``n``) into the shared array ``partial``, which the kernel
#: declares, and the block adds it up in a tree: afterwards ``partial[0]`` is the block's sum.
BLOCK_TREE_SUM = r"""
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
"""
