"""Comparing a kernel's output with the float64 reference, and the error that ends a case.

Used by the correctness cases (:mod:`autograder.checker`) and by the
re-validation of every timed call (:mod:`autograder.timing_policy`).
"""

from __future__ import annotations

import numpy as np

from kernels.runtime.host_chunks import over_chunks


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
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # an error past float64's range: inf
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


def count_wrong(got: np.ndarray, expected: np.ndarray, scale, rtol: float, atol: float) -> dict:
    """What :func:`compare` says of the elements (``n_bad``, the first wrong one, the largest errors), without
    its element-wise arrays, in chunks on several threads: for timing-size outputs of tens of millions."""
    shape = np.shape(expected)
    got = np.asarray(got).reshape(-1)
    expected = np.asarray(expected).reshape(-1)
    scale = np.asarray(scale)
    one_scale = scale.size == 1  # one scale for every element (compare broadcasts it)
    if one_scale:
        scale = scale.reshape(())
    else:  # per element, or one per row or column (a copy, as compare makes one)
        scale = np.broadcast_to(scale, shape).reshape(-1)

    def chunk(start: int, stop: int) -> dict:
        part = compare(got[start:stop], expected[start:stop], scale if one_scale else scale[start:stop], rtol, atol)
        if part["n_bad"]:
            part["first_bad_index"] = [start + part["first_bad_index"][0]]
        return {k: v for k, v in part.items() if k not in ("bad", "err", "tol")}

    parts = over_chunks(got.size, chunk)
    out = {"n_bad": sum(p["n_bad"] for p in parts),
           "max_abs_err": max(p["max_abs_err"] for p in parts),
           "max_rel_err": max(p["max_rel_err"] for p in parts)}
    first = next((p for p in parts if p["n_bad"]), None)
    if first is not None:
        out.update(first_bad_index=first["first_bad_index"], expected=first["expected"], got=first["got"])
    return out


class CaseError(Exception):
    """A case could not run to the end; ``status`` is the exercise status it implies."""

    def __init__(self, status: str, message: str, hint: str = ""):
        super().__init__(message)
        self.status = status
        self.hint = hint
