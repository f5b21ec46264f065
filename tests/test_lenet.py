"""LeNet-5 from the book's kernels (kernels/models/lenet.py) against its NumPy twin."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.models import lenet


@pytest.fixture(scope="module")
def digits():
    return lenet.load_digits_32()


def test_upscaled_digits(digits):
    X_train, X_test, y_train, y_test = digits
    assert X_train.shape[1:] == (1, 32, 32) and X_train.dtype == np.float32
    assert len(X_train) + len(X_test) == 1797
    # Nearest-neighbour upscaling: every 4 x 4 block is one original pixel.
    block = X_train[0, 0, 8:12, 12:16]
    assert (block == block[0, 0]).all()
    assert 0.0 <= X_train.min() and X_train.max() <= 1.0


def test_parameter_count():
    # C1 156, C3 2416, C5 48120, F6 10164, output 850.
    assert lenet.parameter_count() == 156 + 2416 + 48120 + 10164 + 850
    params = lenet.init_params()
    assert sum(W.size + b.size for W, b in params.values()) == lenet.parameter_count()


@pytest.mark.backend
@pytest.mark.parametrize("activation, pooling_kind, kernels", [
    ("relu", "max", {"weight_grad": "naive"}), ("tanh", "avg", {"weight_grad": "naive"}),
    ("relu", "max", lenet.FASTEST)], ids=["relu-max", "tanh-avg", "relu-max-fastest"])
def test_kernel_gradients_match_the_numpy_twin(backend, digits, activation, pooling_kind, kernels):
    X_train, _, y_train, _ = digits
    params = lenet.init_params(seed=1)
    rng = np.random.default_rng(0)
    for W, b in params.values():  # non-zero biases, so that a bias gradient or a bias term cannot hide
        b += rng.uniform(-0.1, 0.1, b.shape).astype(np.float32)
    kernel = lenet.KernelLeNet(params, activation, pooling_kind, **kernels)
    twin = lenet.NumpyLeNet(params, activation, pooling_kind)
    X, y = X_train[:6], y_train[:6]
    loss_n, logits, grads = twin.gradients(X, y)
    for _ in range(2):  # the second time on the scratch the first left (the split versions' counters back at zero)
        loss_k, probs = kernel.gradients(X, y)
        assert abs(loss_k - loss_n) <= 1e-4 * abs(loss_n)
        for name in lenet.LAYER_NAMES:
            dW, db = grads[name]
            for got, expected in ((kernel.weight_grads[name].get(), dW), (kernel.bias_grads[name].get(), db)):
                scale = np.abs(expected).max()
                assert scale > 0, name
                np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4 * scale, err_msg=name)


@pytest.mark.backend
@pytest.mark.parametrize("kernels", [{"weight_grad": "naive"}, lenet.FASTEST], ids=["teaching", "fastest"])
def test_a_step_allocates_only_its_minibatch(backend, digits, monkeypatch, kernels):
    """Device memory is allocated by the first step; later ones copy in the minibatch and allocate nothing else:
    freeing a buffer waits for the device, which would undo the step's queued launches."""
    X_train, _, y_train, _ = digits
    model = lenet.KernelLeNet(lenet.init_params(seed=0), **kernels)
    model.train_step(X_train[:4], y_train[:4], 0.05)
    made = []
    allocate = backend.empty  # what every allocation goes through (to_device too)
    monkeypatch.setattr(backend, "empty", lambda shape, dtype: (made.append(tuple(shape)), allocate(shape, dtype))[1])
    model.train_step(X_train[4:8], y_train[4:8], 0.05)
    assert made == [(4, 1, 32, 32), (4,)]  # the images and the labels


@pytest.mark.backend
def test_training_steps_lower_the_loss(backend, digits):
    X_train, _, y_train, _ = digits
    model = lenet.KernelLeNet(lenet.init_params(seed=0), weight_grad="naive")
    X, y = X_train[:16], y_train[:16]
    first, _ = model.train_step(X, y, 0.05)
    for _ in range(4):
        last, _ = model.train_step(X, y, 0.05)
    assert last < 0.7 * first


@pytest.mark.backend
def test_fused_inference_matches_the_layer_by_layer_forward(backend, digits):
    _, X_test, _, _ = digits
    params = lenet.init_params(seed=2)
    for W, b in params.values():
        b += 0.05
    model = lenet.KernelLeNet(params)
    X = X_test[:5]
    np.testing.assert_allclose(model.logits_fused(X), model.logits(X), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(model.logits(X), lenet.NumpyLeNet(params).logits(X), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("kernels", [{"conv": "naive"}, {"conv": "tiled_multimap"}, lenet.FASTEST],
                         ids=["naive", "tiled_multimap", "fastest"])
def test_lenet_reaches_95_percent_on_the_digits(digits, kernels):
    X_train, X_test, y_train, y_test = digits
    model = lenet.KernelLeNet(lenet.init_params(seed=0), **kernels)
    history = lenet.train(model, X_train, y_train, X_test, y_test, epochs=15, batch_size=64, learning_rate=0.05)
    assert history.test_accuracy[-1] > 0.95, history.test_accuracy


@pytest.mark.parametrize("option, value", [("conv", "fft"), ("weight_grad", "atomic"), ("input_grad", "gemm"),
                                           ("dense", "gemm")])
def test_an_unknown_kernel_choice_is_named_with_the_known_ones(option, value):
    with pytest.raises(ValueError, match=f"unknown .*{value!r}; known: "):
        lenet.KernelLeNet(lenet.init_params(seed=0), **{option: value})


@pytest.mark.backend
@pytest.mark.parametrize("kernels, launches", [({"weight_grad": "naive"}, 43), (lenet.FASTEST, 40)],
                         ids=["teaching", "fastest"])
def test_a_step_makes_the_launches_it_counts(backend, digits, monkeypatch, kernels, launches):
    """The count the chapter divides the step's time by; version 5 gives a layer's filter and bias gradients in
    one launch, so the fastest step makes three fewer."""
    from kernels.runtime.module import Kernel

    made = []
    launch_prepared = Kernel.launch_prepared
    monkeypatch.setattr(Kernel, "launch_prepared", lambda self, *a, **k: (made.append(self.name),
                                                                          launch_prepared(self, *a, **k)))
    X_train, _, y_train, _ = digits
    model = lenet.KernelLeNet(lenet.init_params(seed=0), **kernels)
    model.train_step(X_train[:2], y_train[:2], 0.05)
    assert len(made) == model.launches_per_training_step() == launches
