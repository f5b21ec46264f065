"""The capsule prediction as a PyTorch op (``kernels/frameworks/torch_capsule.py``): ``dlk::capsule_predict``.

These need PyTorch, which the project's environment does not install (it is large): they run with the
GPU machine's python under ``make test-gpu`` (CUDA tensors, kernels on the GPU, on torch's stream), and
wherever torch is installed without a GPU on the CPU emulator (CPU tensors).  Without torch they skip,
except the first test, which checks what the module does then.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed here (the GPU machine's python3 has "
                                                       "it: make test-gpu)")

ROOT = Path(__file__).resolve().parent.parent

# (batch, in_caps, in_dim, out_caps, out_dim): DigitCaps' capsule sizes (the streaming kernel); odd sizes with a
# row that is no multiple of 4 (the register-blocked kernel); a row of 1040 > 1024 (the separate gradient kernels,
# since the fused one takes rows of at most 1024).
SHAPES = [(4, 16, 8, 10, 16), (3, 5, 3, 3, 5), (2, 3, 4, 65, 16)]
IDS = ["digitcaps_sizes", "odd_row", "row_over_1024"]


def test_the_module_imports_without_torch_and_says_what_is_missing():
    """The book shows the op's source where torch is missing: importing works, calling says what to install."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from kernels.frameworks import torch_capsule as tc\n"
            "try:\n    tc.capsule_predict(None, None)\nexcept ImportError as e:\n    print('ImportError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "ImportError: dlk::capsule_predict is a PyTorch op: it needs torch 2.4 or newer" in out.stdout


@pytest.fixture(scope="module")
def device(backend):
    from kernels.frameworks import torch_capsule as tc

    return tc.kernel_device()


def capsule_tensors(shape, device, seed=0, dtype=None):
    batch, in_caps, in_dim, out_caps, out_dim = shape
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(batch, in_caps, in_dim, generator=g)
    W = torch.randn(in_caps, out_caps, out_dim, in_dim, generator=g)
    G = torch.randn(batch, in_caps, out_caps, out_dim, generator=g)
    return tuple(t.to(device=device, dtype=dtype or torch.float32) for t in (u, W, G))


def einsum_64(u, W):
    return torch.einsum("bik,ijdk->bijd", u.double(), W.double())


def assert_close(got, expected, terms):
    """A float32 sum of ``terms`` products of unit normals: rounding grows with the sum's length."""
    assert got.shape == expected.shape and got.dtype == torch.float32, (got.shape, got.dtype)
    tol = 1e-5 * terms ** 0.5 * (expected.abs().max().item() + 1.0)
    err = (got.double() - expected).abs().max().item()
    assert err <= tol, f"max error {err:.3g} > {tol:.3g}"


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
@pytest.mark.backend
@needs_torch
def test_forward_equals_the_pure_pytorch_layer(device, shape):
    from kernels.frameworks.torch_capsule import capsule_predict

    u, W, _ = capsule_tensors(shape, device)
    u_hat = capsule_predict(u, W)
    assert u_hat.device == device and u_hat.is_contiguous()
    assert_close(u_hat, einsum_64(u, W), shape[2])


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
@pytest.mark.backend
@needs_torch
def test_gradients_equal_pure_pytorch_autograd_in_float64(device, shape):
    """Both gradients through autograd against autograd of the float64 einsum, for the same incoming gradient."""
    from kernels.frameworks.torch_capsule import capsule_predict

    u, W, G = capsule_tensors(shape, device, seed=1)
    u.requires_grad_(True)
    W.requires_grad_(True)
    du, dW = torch.autograd.grad(capsule_predict(u, W), (u, W), G)
    u64, W64 = (t.detach().double().requires_grad_(True) for t in (u, W))
    du_ref, dW_ref = torch.autograd.grad(einsum_64(u64, W64), (u64, W64), G.double())
    assert_close(du, du_ref, shape[3] * shape[4])  # du sums over a row
    assert_close(dW, dW_ref, shape[0])  # dW sums over the batch


@pytest.mark.backend
@needs_torch
def test_only_the_gradient_asked_for_comes_back(device):
    """W as a fixed tensor and u as the parameter, then the other way round: autograd gets None for the other."""
    from kernels.frameworks.torch_capsule import capsule_predict

    u, W, G = capsule_tensors(SHAPES[0], device, seed=2)
    (du,) = torch.autograd.grad(capsule_predict(u.requires_grad_(True), W), (u,), G)
    assert_close(du, torch.einsum("ijdk,bijd->bik", W.double(), G.double()), 160)
    u = u.detach()
    out = capsule_predict(u, W.requires_grad_(True))
    out.backward(G)
    assert u.grad is None and W.grad is not None
    assert_close(W.grad, torch.einsum("bijd,bik->ijdk", G.double(), u.double()), SHAPES[0][0])


@pytest.mark.backend
@pytest.mark.filterwarnings("ignore:Input #\\d requires gradient and is not a double")  # float32 on purpose
@needs_torch
def test_gradcheck_in_float32(device):
    """``torch.autograd.gradcheck`` on the float32 op.

    gradcheck compares the backward pass with central differences.  The op is linear in each input
    element, so a central difference has no truncation error whatever the step: its only error is
    float32 rounding of the outputs, about 1e-7 |u_hat| / eps, 2e-5 here with eps = 0.05.  A wrong
    gradient (a transposed index, a missing sum) is off by the size of the gradient itself, about 1,
    so atol 1e-3 and rtol 1e-3 leave room for rounding and none for a bug.  The float64 comparison
    above checks the same gradients to rounding.
    """
    from kernels.frameworks.torch_capsule import capsule_predict

    u, W, _ = capsule_tensors((2, 3, 8, 2, 4), device, seed=3)
    assert torch.autograd.gradcheck(capsule_predict, (u.requires_grad_(True), W.requires_grad_(True)),
                                    eps=5e-2, atol=1e-3, rtol=1e-3)


@pytest.mark.backend
@needs_torch
def test_opcheck_on_both_ops(device):
    """torch.library.opcheck: the schema, the autograd registration, the fake implementations against the real
    ones, and the op traced through AOTAutograd with static and dynamic shapes (what torch.compile does)."""
    from kernels.frameworks import torch_capsule  # noqa: F401 - registers the ops

    u, W, G = capsule_tensors((2, 3, 8, 2, 4), device, seed=4)
    torch.library.opcheck(torch.ops.dlk.capsule_predict.default, (u, W))
    torch.library.opcheck(torch.ops.dlk.capsule_predict.default, (u.requires_grad_(True), W.requires_grad_(True)))
    torch.library.opcheck(torch.ops.dlk.capsule_predict_backward.default, (G, u.detach(), W.detach()))


@pytest.mark.backend
@needs_torch
def test_torch_compile_traces_the_step_through_the_op_and_its_gradient(device):
    """One graph (fullgraph) through the op and its backward op: the fake implementations make it traceable."""
    from kernels.frameworks.torch_capsule import capsule_predict

    u, W, _ = capsule_tensors((3, 4, 8, 2, 4), device, seed=9)
    u.requires_grad_(True)
    W.requires_grad_(True)
    compiled = torch.compile(lambda u, W: (capsule_predict(u, W) ** 2).sum(), backend="aot_eager", fullgraph=True)
    compiled(u, W).backward()
    u64, W64 = (t.detach().double().requires_grad_(True) for t in (u, W))
    du_ref, dW_ref = torch.autograd.grad((einsum_64(u64, W64) ** 2).sum(), (u64, W64))
    assert_close(u.grad, du_ref, 8 * 8)
    assert_close(W.grad, dW_ref, 3 * 8)


@pytest.mark.backend
@needs_torch
def test_fake_tensors_give_the_shape_without_running_kernels():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernels.frameworks.torch_capsule import capsule_predict

    with FakeTensorMode():
        u_hat = capsule_predict(torch.empty(128, 1152, 8), torch.empty(1152, 10, 16, 8))
    assert tuple(u_hat.shape) == (128, 1152, 10, 16) and u_hat.dtype == torch.float32
    u_hat = capsule_predict(torch.empty(5, 3, 4, device="meta"), torch.empty(3, 2, 6, 4, device="meta"))
    assert u_hat.device.type == "meta" and tuple(u_hat.shape) == (5, 3, 2, 6)


@pytest.mark.backend
@needs_torch
def test_a_training_step_equals_the_pure_pytorch_layer(device):
    """Predictions, routing and the margin loss, forward and backward: the op's step and the einsum's agree."""
    from kernels.frameworks.torch_capsule_layer import PREDICTIONS, training_step

    u, W, _ = capsule_tensors((8, 32, 8, 10, 16), device, seed=5)
    u, W = 0.3 * u, 0.3 * W
    labels = torch.arange(8, device=device) % 10
    steps = {name: training_step(predict, u.clone().requires_grad_(True), W.clone().requires_grad_(True), labels)
             for name, predict in PREDICTIONS.items()}
    (loss, du, dW), (loss_ref, du_ref, dW_ref) = steps["dlk::capsule_predict"], steps["torch.einsum"]
    assert loss.item() == pytest.approx(loss_ref.item(), rel=1e-4)
    for got, ref in ((du, du_ref), (dW, dW_ref)):
        scale = ref.abs().max().item()
        assert scale > 0 and (got - ref).abs().max().item() <= 1e-3 * scale


@pytest.mark.backend
@needs_torch
def test_bad_operands_are_refused_naming_the_argument(device):
    from kernels.frameworks.torch_capsule import capsule_predict

    u, W, G = capsule_tensors((2, 2, 4, 3, 4), device, seed=6)
    with pytest.raises(TypeError, match=r"u must be float32 .* not torch.float64; convert it with u.float\(\)"):
        capsule_predict(u.double(), W)
    with pytest.raises(TypeError, match=r"W must be float32"):
        capsule_predict(u, W.half())
    with pytest.raises(ValueError, match=r"u is not contiguous .*pass u.contiguous\(\)"):
        capsule_predict(u.transpose(0, 1), W)
    with pytest.raises(ValueError, match=r"W is not contiguous"):
        capsule_predict(u, W.transpose(2, 3))  # out_dim = in_dim: the shape fits, the layout does not
    with pytest.raises(ValueError, match=r"W has shape \(2, 3, 4, 5\), but u \(2, 2, 4\) holds 2 capsules of 4: "
                                         r"W must be \(2, out_caps, out_dim, 4\)"):
        capsule_predict(u, torch.zeros(2, 3, 4, 5, device=device))
    with pytest.raises(ValueError, match=r"u must be \(batch, in_caps, in_dim\), 3 axes; got shape \(2, 8\)"):
        capsule_predict(u.reshape(2, 8), W)
    with pytest.raises(ValueError, match=r"grad_u_hat has shape \(2, 2, 3, 5\)"):
        torch.ops.dlk.capsule_predict_backward(torch.zeros(2, 2, 3, 5, device=device), u, W)
    with pytest.raises(TypeError, match=r"u must be a torch.Tensor \(batch, in_caps, in_dim\), not ndarray"):
        capsule_predict(u.cpu().numpy(), W)


@pytest.mark.gpu
@needs_torch
def test_tensors_on_the_wrong_device_are_refused_naming_the_argument(device):
    from kernels.frameworks.torch_capsule import capsule_predict

    u, W, _ = capsule_tensors((2, 2, 4, 3, 4), device, seed=7)
    with pytest.raises(ValueError, match=r"u is on cpu, but the book's kernels cannot read it there: the GPU "
                                         r"backend runs them on cuda:\d; move it with u.to\('cuda:\d'\)"):
        capsule_predict(u.cpu(), W.cpu())
    with pytest.raises(ValueError, match=r"u is on cuda:\d and W on cpu; both must be on one device"):
        capsule_predict(u, W.cpu())


@pytest.mark.gpu
@needs_torch
def test_the_op_runs_on_torchs_current_stream_without_waiting(device):
    """On a side stream, a producer writes u after a long sleep; the op and its backward are queued behind it.

    Nothing synchronises between the producer and the op: only the stream orders them.  Run on any other
    stream (the legacy default stream, which a side stream of torch does not wait for, or a stream of its
    own) the op would read u before the producer wrote it, and the results would be wrong.  The op must
    also return while the producer still sleeps: it queues its kernels and does not wait for the device.
    """
    from kernels.frameworks.torch_capsule import capsule_predict

    shape = (64, 32, 8, 10, 16)
    u_src, W, G = capsule_tensors(shape, device, seed=8)
    W.requires_grad_(True)
    # Compile the kernels and load them for launches on a side stream first: loading a module may wait for the
    # device, which would hide a kernel queued on the wrong stream.
    warm_stream = torch.cuda.Stream(device)
    with torch.cuda.stream(warm_stream):
        capsule_predict(u_src.requires_grad_(True), W).backward(G)
    torch.cuda.synchronize(device)

    side = torch.cuda.Stream(device)
    with torch.cuda.stream(side):
        u = torch.zeros_like(u_src).requires_grad_(True)
        torch.cuda._sleep(2_000_000_000)  # about a second of GPU clock cycles, on the side stream only
        with torch.no_grad():
            u.copy_(u_src)  # the producer: u is written only after the sleep
        u_hat = capsule_predict(u, W)
        u_hat.backward(G)  # autograd runs the backward op on the stream of the forward
        returned_while_producer_sleeps = not side.query()
    side.synchronize()
    assert returned_while_producer_sleeps, "the op waited for the device instead of queueing on the stream"
    assert_close(u_hat.detach(), einsum_64(u_src.detach(), W.detach()), shape[2])
    assert_close(u.grad, torch.einsum("ijdk,bijd->bik", W.detach().double(), G.double()), shape[3] * shape[4])
