"""The kernels of the chapter "Perceptrons and multilayer perceptrons": the perceptron, the fully
connected layer, activations, softmax and cross-entropy, and the gradient descent step."""
