"""The kernels of the chapter "Capsule networks": the prediction vectors, their gradients, and
squash and routing by agreement."""
