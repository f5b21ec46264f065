"""Check a backward pass against its forward pass: central differences in float64 and the adjoint test.

A backward kernel computes a vector-Jacobian product: given ``w = dE/dy`` it
returns ``J^T w = dE/dx`` for each input ``x`` of ``y = f(x)``.  Two checks,
both needing only ``f`` and the backward (``vjp``):

* **central differences.**  With the scalar ``E(x) = <w, f(x)>`` for a random
  ``w``, every component of ``dE/dx`` is compared with
  ``(E(x + eps e_i) - E(x - eps e_i)) / (2 eps)``, whose error is O(eps^2).
  This needs ``f`` in float64 (float32 rounding divided by a small ``eps`` is
  noise) and two evaluations per input element, so use small shapes.
* **the adjoint identity** ``<J v, w> = <v, J^T w>`` for random ``v`` and
  ``w``: one number per trial, cheap at any size.  ``J v`` comes from
  ``jvp`` when given (exact for linear maps), otherwise from a central
  difference along ``v``.

Typical use: ``f`` is the float64 NumPy reference of a layer, ``vjp`` calls
the backward kernels::

    report = check_gradients(
        lambda X, W, b: fully_connected.forward_reference(X, W, b),
        lambda X, W, b, dY: (fully_connected.backward_input(dY, W),
                             fully_connected.backward_weight(dY, X),
                             fully_connected.backward_bias(dY)),
        [X, W, b], names=["X", "W", "b"], rtol=1e-4)
    print(report)
    report.raise_if_failed()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["GradientCheckError", "InputCheck", "AdjointCheck", "GradcheckReport", "check_gradients"]


class GradientCheckError(AssertionError):
    """A backward pass disagrees with its forward pass."""


@dataclass
class InputCheck:
    """Central differences against the backward pass for one input."""

    name: str
    shape: tuple[int, ...]
    passed: bool
    max_abs_error: float
    max_scaled_error: float  # max of |got - expected| / (atol + rtol |expected|); <= 1 passes
    worst_index: tuple[int, ...]
    expected: float  # central difference at worst_index
    got: float  # backward pass at worst_index
    hint: str = ""

    def describe(self) -> str:
        status = "ok  " if self.passed else "FAIL"
        line = (f"{status} d/d{self.name} {self.shape}: max |error| {self.max_abs_error:.3g} "
                f"({self.max_scaled_error:.3g} x tolerance)")
        if not self.passed:
            line += (f"\n     worst at {self.name}{list(self.worst_index)}: backward gives {self.got:.6g}, "
                     f"central differences give {self.expected:.6g}")
            if self.hint:
                line += f"\n     {self.hint}"
        return line


@dataclass
class AdjointCheck:
    """One trial of <J v, w> = <v, J^T w> for one input."""

    name: str
    jv_w: float  # <J v, w>
    v_jtw: float  # <v, J^T w>
    relative_error: float
    passed: bool

    def describe(self) -> str:
        status = "ok  " if self.passed else "FAIL"
        return (f"{status} adjoint {self.name}: <J v, w> = {self.jv_w:.10g}, <v, J^T w> = {self.v_jtw:.10g} "
                f"(relative difference {self.relative_error:.3g})")


@dataclass
class GradcheckReport:
    """What :func:`check_gradients` found; ``ok`` is True when every check passed."""

    inputs: list[InputCheck] = field(default_factory=list)
    adjoints: list[AdjointCheck] = field(default_factory=list)
    eps: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0

    @property
    def ok(self) -> bool:
        return all(c.passed for c in self.inputs) and all(c.passed for c in self.adjoints)

    @property
    def failures(self) -> list[str]:
        return [c.describe() for c in [*self.inputs, *self.adjoints] if not c.passed]

    def __str__(self) -> str:
        head = (f"gradient check: {'passed' if self.ok else 'FAILED'} "
                f"(eps={self.eps:g}, rtol={self.rtol:g}, atol={self.atol:g})")
        return "\n".join([head, *(c.describe() for c in self.inputs), *(c.describe() for c in self.adjoints)])

    def raise_if_failed(self) -> None:
        if not self.ok:
            raise GradientCheckError(str(self))


def _as_tuple(grads, count: int, what: str) -> tuple:
    if count == 1 and not isinstance(grads, (tuple, list)):
        grads = (grads,)
    grads = tuple(grads)
    if len(grads) != count:
        raise GradientCheckError(f"{what} returned {len(grads)} gradients for {count} inputs")
    return grads


def _diagnose(got: np.ndarray, expected: np.ndarray) -> str:
    """A guess at the pattern of a wrong gradient, to say where to look."""
    scale = np.abs(expected).max()
    if scale == 0:
        return ""
    if np.abs(got).max() <= 1e-12 * scale:
        return "the backward pass returned all zeros (an output never written, or a missing accumulation?)"
    if not np.all(np.isfinite(got)):
        return "the backward pass returned NaN or Inf (uninitialised memory, or an overflow?)"
    if np.allclose(got, -expected, rtol=1e-3, atol=1e-6 * scale):
        return "the backward pass has the wrong sign everywhere"
    ratio = np.sum(got * expected) / np.sum(expected * expected)
    if abs(ratio) > 1e-6 and np.allclose(got, ratio * expected, rtol=1e-3, atol=1e-6 * scale):
        return f"the backward pass is {ratio:.4g} times the right gradient (a missing or extra factor, e.g. 1/n?)"
    if got.ndim == 2 and got.shape[0] == got.shape[1] and np.allclose(got, expected.T, rtol=1e-3, atol=1e-6 * scale):
        return "the backward pass is the transpose of the right gradient (rows and columns swapped)"
    wrong = ~np.isclose(got, expected, rtol=1e-3, atol=1e-6 * scale)
    if got.ndim >= 1 and wrong.any():
        fraction = wrong.mean()
        if got.ndim == 2:
            rows = np.flatnonzero(wrong.any(axis=1))
            cols = np.flatnonzero(wrong.any(axis=0))
            if len(rows) < got.shape[0] and len(rows) <= 3:
                return f"only rows {rows.tolist()} are wrong ({fraction:.0%} of the elements): an edge or bounds problem?"
            if len(cols) < got.shape[1] and len(cols) <= 3:
                return f"only columns {cols.tolist()} are wrong ({fraction:.0%} of the elements): an edge or bounds problem?"
        return f"{fraction:.0%} of the elements are wrong"
    return ""


def check_gradients(
    f: Callable[..., np.ndarray],
    vjp: Callable[..., object],
    inputs: Sequence,
    *,
    names: Sequence[str] | None = None,
    wrt: Sequence[int] | None = None,
    jvp: Callable[..., np.ndarray] | None = None,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-8,
    adjoint_trials: int = 3,
    adjoint_rtol: float | None = None,
    max_elements: int = 4096,
    seed: int = 0,
) -> GradcheckReport:
    """Check ``vjp`` against ``f`` by central differences and the adjoint identity.

    ``f(*inputs)`` returns the output array ``y``; ``vjp(*inputs, w)`` returns
    ``dE/dx`` for ``E = <w, y>``: one gradient per input (a tuple, or a single
    array when there is one input; ``None`` for an input not differentiated,
    such as integer labels).  ``wrt`` lists the indices of the inputs to check
    (default: every floating-point input).  ``jvp(*inputs, v_list)``, if given,
    returns ``J v`` for a tangent ``v`` of every checked input (a list aligned
    with ``wrt``); otherwise ``J v`` is a central difference.

    The backward pass may run in float32 (a kernel): its result is compared in
    float64 with tolerance ``atol + rtol |expected|`` element by element, and
    adjoint trials pass when the relative difference is at most
    ``adjoint_rtol`` (default ``rtol``).  Returns a :class:`GradcheckReport`;
    call ``raise_if_failed()`` on it in a test.
    """
    inputs = [np.array(x, dtype=np.float64) if np.issubdtype(np.asarray(x).dtype, np.floating) else np.asarray(x)
              for x in inputs]
    names = list(names) if names is not None else [f"x{i}" for i in range(len(inputs))]
    if len(names) != len(inputs):
        raise ValueError(f"{len(names)} names for {len(inputs)} inputs")
    if wrt is None:
        wrt = [i for i, x in enumerate(inputs) if np.issubdtype(x.dtype, np.floating)]
    for i in wrt:
        if not np.issubdtype(inputs[i].dtype, np.floating):
            raise ValueError(f"input {names[i]} has dtype {inputs[i].dtype}; only floating-point inputs have gradients")
        if inputs[i].size > max_elements:
            raise ValueError(
                f"input {names[i]} has {inputs[i].size} elements; central differences evaluate f twice per element, "
                f"so keep checked inputs under max_elements={max_elements} (use small shapes)"
            )
    adjoint_rtol = rtol if adjoint_rtol is None else adjoint_rtol
    rng = np.random.default_rng(seed)

    def evaluate(args) -> np.ndarray:
        y = np.asarray(f(*args))
        if y.dtype != np.float64:
            raise GradientCheckError(
                f"f returned {y.dtype}; central differences need f computed in float64 (pass the float64 "
                f"NumPy reference of the forward pass, and the kernel as the vjp)"
            )
        return y

    y0 = evaluate(inputs)
    # A random upstream gradient with a non-zero mean, so that a gradient that ignores w is caught too.
    w = rng.standard_normal(y0.shape) + 0.5
    grads = _as_tuple(vjp(*inputs, w), len(inputs), "vjp")
    report = GradcheckReport(eps=eps, rtol=rtol, atol=atol)

    for i in wrt:
        x = inputs[i]
        got = grads[i]
        if got is None:
            raise GradientCheckError(f"vjp returned None for {names[i]}, which is being checked")
        got = np.asarray(got, np.float64)
        if got.shape != x.shape:
            if got.size == x.size:
                got = got.reshape(x.shape)
            else:
                raise GradientCheckError(
                    f"d/d{names[i]}: the backward pass returned shape {got.shape}, the input has shape {x.shape}"
                )
        expected = np.empty_like(x)
        flat = x.reshape(-1)
        for k in range(flat.size):
            keep = flat[k]
            flat[k] = keep + eps
            plus = np.sum(w * evaluate(inputs))
            flat[k] = keep - eps
            minus = np.sum(w * evaluate(inputs))
            flat[k] = keep
            expected.reshape(-1)[k] = (plus - minus) / (2 * eps)
        error = np.abs(got - expected)
        error = np.where(np.isnan(error), np.inf, error)
        scaled = error / (atol + rtol * np.abs(expected))
        worst = np.unravel_index(int(np.argmax(scaled)), x.shape) if x.size else ()
        passed = bool(np.all(scaled <= 1.0))
        report.inputs.append(InputCheck(
            name=names[i], shape=tuple(x.shape), passed=passed,
            max_abs_error=float(error.max()) if x.size else 0.0,
            max_scaled_error=float(scaled.max()) if x.size else 0.0,
            worst_index=tuple(int(j) for j in worst),
            expected=float(expected[worst]) if x.size else 0.0,
            got=float(got[worst]) if x.size else 0.0,
            hint="" if passed else _diagnose(got, expected),
        ))

    for _ in range(adjoint_trials):
        wt = rng.standard_normal(y0.shape)
        back = _as_tuple(vjp(*inputs, wt), len(inputs), "vjp")
        for i in wrt:
            # One adjoint number per input: the tangent is v in input i and zero in the others.
            v = rng.standard_normal(inputs[i].shape)
            if jvp is not None:
                jv = np.asarray(jvp(*inputs, [v if j == i else np.zeros_like(inputs[j]) for j in wrt]), np.float64)
            else:
                plus = list(inputs)
                minus = list(inputs)
                plus[i] = inputs[i] + eps * v
                minus[i] = inputs[i] - eps * v
                jv = (evaluate(plus) - evaluate(minus)) / (2 * eps)
            lhs = float(np.sum(jv * wt))
            rhs = float(np.sum(v * np.asarray(back[i], np.float64).reshape(v.shape)))
            rel = abs(lhs - rhs) / max(abs(lhs), abs(rhs), 1e-300)
            report.adjoints.append(AdjointCheck(names[i], lhs, rhs, rel, bool(np.isfinite(rel) and rel <= adjoint_rtol)))
    return report
