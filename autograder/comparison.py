"""Comparing a kernel's output with the float64 reference, and the error that ends a case.

Used by the correctness cases (:mod:`autograder.checker`) and by the
re-validation of every timed call (:mod:`autograder.timing_policy`).
"""

from __future__ import annotations

import numpy as np


def compare(got: np.ndarray, expected: np.ndarray, scale, rtol: float, atol: float) -> dict:
    """Every element: |got - expected| <= atol + rtol * scale, and no NaN/Inf where expected is finite."""
    got64 = got.astype(np.float64)
    expected = np.asarray(expected, dtype=np.float64).reshape(got.shape)
    scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), got.shape)
    err = np.abs(got64 - expected)
    tol = atol + rtol * scale
    with np.errstate(invalid="ignore"):
        bad = ~(err <= tol)
    bad |= ~np.isfinite(got64) & np.isfinite(expected)
    finite_err = np.where(np.isfinite(err), err, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = finite_err / np.maximum(np.abs(expected), np.finfo(np.float64).tiny)
    out = {
        "bad": bad,
        "n_bad": int(bad.sum()),
        "max_abs_err": float(finite_err.max()) if finite_err.size else 0.0,
        "max_rel_err": float(rel.max()) if rel.size else 0.0,
        "err": err,
        "tol": tol,
    }
    if out["n_bad"]:
        flat = int(np.flatnonzero(bad.ravel())[0])
        idx = np.unravel_index(flat, got.shape)
        out["first_bad_index"] = [int(i) for i in idx]
        out["expected"] = float(expected.ravel()[flat])
        out["got"] = float(got64.ravel()[flat])
    return out


class CaseError(Exception):
    """A case could not run to the end; ``status`` is the exercise status it implies."""

    def __init__(self, status: str, message: str, hint: str = ""):
        super().__init__(message)
        self.status = status
        self.hint = hint
