"""The convolution kernels: direct convolution, its gradients and pooling (chapter "Convolutional
networks"), and the convolution as a matrix product, im2col and the GEMM convolutions (chapter
"Convolution as matrix multiplication")."""
