"""Fused attention as a PyTorch op (``kernels/frameworks/torch_attention.py``): ``dlk::attention``.

These need PyTorch, which the project's environment does not install: they run with the GPU machine's python under
``make test-gpu`` (CUDA tensors, kernels on the GPU on torch's stream) and, where torch is installed without a GPU,
on the CPU emulator (CPU tensors, small shapes).  Without torch they skip, except the first test.
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
# (batch, heads, N, d): a short sequence of one partial tile, and one of several tiles
SHAPES = [(1, 2, 37, 16), (2, 1, 130, 64)]
IDS = ["37x16", "130x64"]


def test_the_module_imports_without_torch_and_says_what_is_missing():
    code = ("import sys; sys.modules['torch'] = None\n"
            "from kernels.frameworks import torch_attention as ta, torch_transformer_block\n"
            "try:\n    ta.attention(None, None, None)\nexcept ImportError as e:\n    print('ImportError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "ImportError: dlk::attention is a PyTorch op: it needs torch 2.4 or newer" in out.stdout


@pytest.fixture(scope="module")
def device(backend):
    from kernels.frameworks import torch_attention as ta

    return ta.kernel_device()


def qkv(shape, device, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=g).to(device=device, dtype=dtype) for _ in range(4))


def reference(q, k, v, causal):
    """The three products in float64."""
    q, k, v = (t.double() for t in (q, k, v))
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def assert_close(got, expected, dtype):
    tol = 1.5e-2 if dtype == torch.bfloat16 else 2e-5
    err = (got.double() - expected).abs().max().item()
    assert err <= tol * max(1.0, expected.abs().max().item()), f"max error {err:.3g}"


@pytest.mark.backend
@needs_torch
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_forward_and_gradients_equal_float64(device, shape, dtype, causal):
    from kernels.frameworks.torch_attention import attention

    dtype = getattr(torch, dtype)
    q, k, v, grad = qkv(shape, device, dtype, seed=1)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    out = attention(q, k, v, causal)
    assert out.dtype == dtype and out.device == device
    grads = torch.autograd.grad(out, (q, k, v), grad)
    q64, k64, v64 = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    expected = reference(q64, k64, v64, causal)
    assert_close(out, expected, dtype)
    for got, ref in zip(grads, torch.autograd.grad(expected, (q64, k64, v64), grad.double())):
        assert_close(got, ref, dtype)


@pytest.mark.backend
@needs_torch
def test_opcheck_on_both_ops(device):
    """torch.library.opcheck: schemas, the autograd registration, the fake implementations against the real ones,
    and tracing through AOTAutograd."""
    from kernels.frameworks import torch_attention  # noqa: F401 - registers the ops

    q, k, v, grad = qkv((1, 2, 20, 16), device, torch.float32, seed=2)
    torch.library.opcheck(torch.ops.dlk.attention.default, (q, k, v, True, 0.0))
    torch.library.opcheck(torch.ops.dlk.attention.default, (q.requires_grad_(True), k, v.requires_grad_(True), False, 0.3))
    out, lse = torch.ops.dlk.attention(q.detach(), k, v.detach(), True, 0.0)
    torch.library.opcheck(torch.ops.dlk.attention_backward.default, (grad, q.detach(), k, v.detach(), out, lse, True, 0.0))


@pytest.mark.backend
@needs_torch
def test_torch_compile_traces_through_the_op_and_its_gradient(device):
    from kernels.frameworks.torch_attention import attention

    q, k, v, _ = qkv((1, 2, 24, 16), device, torch.float32, seed=3)
    q.requires_grad_(True)
    compiled = torch.compile(lambda q: (attention(q, k, v, True) ** 2).sum(), backend="aot_eager", fullgraph=True)
    compiled(q).backward()
    q64 = q.detach().double().requires_grad_(True)
    (expected,) = torch.autograd.grad((reference(q64, k, v, True) ** 2).sum(), (q64,))
    assert_close(q.grad, expected, torch.float32)


@pytest.mark.backend
@needs_torch
def test_fake_tensors_give_the_shapes_without_running_kernels():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernels.frameworks.torch_attention import attention

    with FakeTensorMode():
        out = attention(*(torch.empty(4, 16, 4096, 128, dtype=torch.bfloat16) for _ in range(3)))
    assert tuple(out.shape) == (4, 16, 4096, 128) and out.dtype == torch.bfloat16
    out, lse = torch.ops.dlk.attention(*(torch.empty(2, 3, 5, 64, device="meta") for _ in range(3)), False, 0.0)
    assert out.device.type == "meta" and tuple(lse.shape) == (2, 3, 5) and lse.dtype == torch.float32


@pytest.mark.backend
@needs_torch
def test_bad_operands_are_refused_naming_the_argument(device):
    from kernels.frameworks.torch_attention import attention

    q, k, v, _ = qkv((1, 2, 8, 16), device, torch.float32)
    with pytest.raises(TypeError, match=r"q, k and v must be bfloat16 .* or float32, not torch.float64"):
        attention(q.double(), k.double(), v.double())
    with pytest.raises(TypeError, match=r"k is torch.bfloat16 and q is torch.float32"):
        attention(q, k.bfloat16(), v)
    with pytest.raises(ValueError, match=r"v is not contiguous .*pass v.contiguous\(\)"):
        attention(q, k, v.transpose(1, 2).contiguous().transpose(1, 2))  # (batch, N, heads, d) memory seen as (batch, heads, N, d)
    with pytest.raises(ValueError, match=r"head dimension 24 is not one the kernels are built for"):
        attention(*(torch.zeros(1, 1, 8, 24, device=device) for _ in range(3)))
    with pytest.raises(ValueError, match=r"k has shape \(1, 2, 9, 16\) and q \(1, 2, 8, 16\)"):
        attention(q, torch.zeros(1, 2, 9, 16, device=device), v)
    with pytest.raises(ValueError, match=r"q must be \(batch, heads, N, d\), 4 axes; got shape \(2, 8, 16\)"):
        attention(q[0], k[0], v[0])


@pytest.mark.gpu
@needs_torch
def test_a_transformer_blocks_training_step_equals_the_step_with_sdpa(device):
    """The same block and weights, attention by the op or by SDPA's flash backend: the same loss, and after one SGD
    step the same weights (BF16, so to BF16's precision)."""
    from kernels.frameworks import torch_transformer_block as tb

    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 256, 256, generator=g).to(device=device, dtype=torch.bfloat16)
    target = torch.randn(2, 256, 256, generator=g).to(device=device)
    weights = {name: tb.make_weights(256, 1024, device=device, dtype=torch.bfloat16, seed=5)
               for name in tb.ATTENTIONS}
    losses = {name: tb.training_step(weights[name], x, target, 4, attention).item()
              for name, attention in tb.ATTENTIONS.items()}
    ours, peer = losses["dlk::attention"], losses["torch sdpa (flash)"]
    assert ours == pytest.approx(peer, rel=1e-2)
    for key in weights["dlk::attention"]:
        a, b = weights["dlk::attention"][key].float(), weights["torch sdpa (flash)"][key].float()
        assert (a - b).abs().max().item() <= 2e-2 * b.abs().max().item(), key


@pytest.mark.gpu
@needs_torch
def test_the_op_runs_on_torchs_current_stream_without_waiting(device):
    """A producer on a side stream writes q after a long sleep; the op and its backward queue behind it on that
    stream.  Launched on another stream they would read q too early; waiting for the device they would return late."""
    from kernels.frameworks.torch_attention import attention

    q_src, k, v, grad = qkv((2, 4, 1000, 64), device, torch.bfloat16, seed=6)
    k.requires_grad_(True)
    warm = torch.cuda.Stream(device)
    with torch.cuda.stream(warm):
        attention(q_src.requires_grad_(True), k, v, True).backward(grad)
    torch.cuda.synchronize(device)
    side = torch.cuda.Stream(device)
    with torch.cuda.stream(side):
        q = torch.zeros_like(q_src).requires_grad_(True)
        torch.cuda._sleep(2_000_000_000)
        with torch.no_grad():
            q.copy_(q_src)
        out = attention(q, k, v, True)
        out.backward(grad)
        returned_while_producer_sleeps = not side.query()
    side.synchronize()
    assert returned_while_producer_sleeps, "the op waited for the device instead of queueing on the stream"
    assert_close(out.detach(), reference(q_src.detach(), k.detach(), v, True), torch.bfloat16)
