"""Shared by the benchmark scripts: device facts, one row per timed kernel, the results file.

A results file (``benchmarks/results/<name>.json``) holds the device it was
measured on, the date, software versions, the measured peaks, ``results``: one
row per kernel or library peer (:func:`timed_row`: name, group, kind, bytes,
flops, median time, bandwidth, % of peak, and what only that benchmark records),
and optionally a ``summary`` and sections of their own (a sweep, a training
history).  The book reads these files, through ``book/speed_figures.py``, when
it is built without a GPU.

A run on a second kind of GPU is kept beside the first: with ``DLK_RESULTS_TAG=h200``
(``make bench TAG=h200``) a benchmark writes ``<name>_h200.json``, which still names
its benchmark ``<name>``; the chapters show ``<name>.json`` and the scoreboard shows
every GPU's file (:func:`recorded_runs`).  :func:`results_path` is where a file of either
kind is: the tag is its parameter, so that what writes (this run's tag, :func:`results_tag`)
and what reads (the untagged file, or a tag it names) each say which file they mean.

What the book reads in a results file (its groups, the rows it looks up, the values of a
field it filters on, the parts besides ``results``) is a benchmark's :class:`Contract`: the
benchmark module declares it beside the constants it writes its rows with, the book names
rows through the same constants, and ``tests/test_benchmark_contracts.py`` checks every
contract against every recorded file of its benchmark, tagged ones included.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kernels.runtime import selection
from kernels.runtime.loader import load_topic
from kernels.runtime.timing import time_kernel

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def require_gpu_backend():
    """The GPU backend, or exit with a message saying why there is none."""
    try:
        backend = selection.current_backend()
    except Exception as exc:  # noqa: BLE001 - any failure means: no GPU here
        sys.exit(f"benchmarks need a GPU: could not start a backend ({exc})")
    if backend.name != "gpu":
        sys.exit("benchmarks need a GPU: the current backend is the CPU emulator (run with DLK_BACKEND=gpu on a GPU machine)")
    return backend


def now_utc() -> str:
    """The date and time a results file records: UTC, to the second."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def software_versions() -> dict:
    versions = {"python": platform.python_version()}
    for module in ("numpy", "pycuda", "torch", "cupy"):
        try:
            versions[module] = __import__(module).__version__
        except Exception:  # noqa: BLE001 - absent peers are simply not recorded
            pass
    try:
        import torch

        versions["torch_cuda"] = torch.version.cuda
    except Exception:  # noqa: BLE001
        pass
    return versions


def row(name: str, group: str, kind: str, timing, nbytes: float, flops: float, peaks, **extra) -> dict:
    """One result: ``kind`` is "kernel" (ours) or "peer" (a library doing the same job)."""
    return timed_row(name, group, kind, timing.median_ms, nbytes, flops, peaks.bandwidth_gbs,
                     min_ms=timing.min_ms, samples=len(timing.samples_ms), **extra)


def timed_row(name: str, group: str, kind: str, median_ms: float, nbytes: float | None, flops: float | None,
              bandwidth_gbs: float | None, min_ms: float | None = None, samples: int | None = None, **extra) -> dict:
    """A row of the results file from a median time: the one layout every benchmark writes.

    ``name``, ``group`` (which figure or layer it belongs to) and ``kind`` come first, then
    the bytes and flops of one run, the times, and the rates they give; ``extra`` holds what
    only this benchmark records (sizes, errors, configurations).  ``nbytes`` or ``flops`` is
    None where the job has no meaningful count, and the rates it gives are left out.
    ``bandwidth_gbs`` is the measured copy bandwidth the percentage is of (None: not measured, no percentage).
    """
    seconds = median_ms / 1e3
    entry = {"name": name, "group": group, "kind": kind}
    if nbytes is not None:
        entry["bytes"] = int(nbytes)
    if flops is not None:
        entry["flops"] = int(flops)
    entry["median_ms"] = median_ms
    if min_ms is not None:
        entry["min_ms"] = min_ms
    if samples is not None:
        entry["samples"] = samples
    if nbytes is not None:
        entry["gbs"] = nbytes / seconds / 1e9
    if flops is not None:
        entry["gflops"] = flops / seconds / 1e9
    if nbytes is not None and bandwidth_gbs:
        entry["percent_of_peak_bandwidth"] = 100 * entry["gbs"] / bandwidth_gbs
    entry.update(extra)
    return entry


def untimed_row(name: str, group: str, kind: str, **extra) -> dict:
    """A row for a version that was not timed, with why (``skipped=...`` or ``error=...``)."""
    assert "skipped" in extra or "error" in extra, f"{name}: an untimed row says why (skipped or error)"
    return {"name": name, "group": group, "kind": kind, **extra}


def time_version(version, shape: dict, args, group: str, peaks, sizes: dict | None = None, **extra) -> dict:
    """Time one kernel version as its record launches it, and make its row from the record's bytes and flops.

    ``args`` are the kernel's arguments (device buffers and scalars); ``sizes``
    (default: the shape) go into the row beside ``extra``.
    """
    config = version.launch(shape)
    kernel = load_topic(version.topic, dict(version.defines) or None).function(version.kernel)
    ready = kernel.prepare(args, config.grid, config.block, config.shared)  # copies once; the timed call only enqueues
    timing = time_kernel(lambda: kernel.launch_prepared(ready, sync=False))
    return row(version.kernel, group, "kernel", timing, version.bytes(shape), version.flops(shape), peaks,
               **(shape if sizes is None else sizes), **extra)


#: The environment variable that tags a results file with the GPU it was measured on (see the module's doc).
RESULTS_TAG_VARIABLE = "DLK_RESULTS_TAG"


def results_tag() -> str | None:
    """The tag of this run's results files (``$DLK_RESULTS_TAG``: lowercase letters and digits), or None."""
    tag = os.environ.get(RESULTS_TAG_VARIABLE, "").strip()
    if not tag:
        return None
    if not re.fullmatch(r"[a-z0-9]+", tag):
        sys.exit(f"{RESULTS_TAG_VARIABLE}={tag!r}: a tag is lowercase letters and digits, such as h200")
    return tag


def results_path(name: str, tag: str | None = None, results_dir: Path | str | None = None) -> Path:
    """The results file of benchmark ``name``: ``<name>.json``, or ``<name>_<tag>.json`` for a run tagged ``tag``
    (another kind of GPU), in ``results_dir`` (default: benchmarks/results)."""
    folder = Path(results_dir) if results_dir is not None else RESULTS_DIR
    return folder / (f"{name}_{tag}.json" if tag else f"{name}.json")


def recorded_runs(name: str, results_dir: Path | str | None = None) -> list[Path]:
    """Every results file of benchmark ``name``: ``<name>.json`` first, then its tagged files (other GPUs)."""
    untagged = results_path(name, None, results_dir)
    found = [untagged] if untagged.exists() else []
    for path in sorted(untagged.parent.glob(f"{name}_*.json")):
        # cnn_backward.json is a benchmark of its own, not a tagged cnn.json: the file says whose it is.
        if re.fullmatch(r"[a-z0-9]+", path.stem[len(name) + 1:]) and json.loads(path.read_text()).get("benchmark") == name:
            found.append(path)
    return found


@dataclass(frozen=True)
class Contract:
    """What the book reads in ``benchmarks/results/<results>.json`` and its tagged files, each of which holds all of it.

    ``groups``: the groups it reads; ``rows``: per group, the rows it looks up by their ``row_field`` (a row's
    ``name``; the profiler names its rows by ``step``); ``prefixes``: per group, the starts of names it picks
    rows by (a method tried in several configurations); ``values``: per field, the values it filters rows on
    (a ``layer``, a ``gradient``); ``sections``: the parts of the file besides ``results`` it reads; ``entries``:
    per section, the strings it finds entries there by (an entry of a list the section is or holds, by its
    ``label``, ``name``, ``step``, ``goal`` or ``group``).  The benchmark writes its rows through the same constants the contract is
    made of.
    """

    results: str
    groups: tuple[str, ...] = ()
    rows: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    prefixes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sections: tuple[str, ...] = ()
    entries: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    row_field: str = "name"

    def __post_init__(self):
        # A bare string would be read as its letters ("forward" as "f", "o", ...): every entry is a tuple.
        for what, entries in (("groups", self.groups), ("sections", self.sections),
                              *((f"{kind}[{key!r}]", names) for kind in ("rows", "prefixes", "values", "entries")
                                for key, names in getattr(self, kind).items())):
            if isinstance(entries, str) or not all(isinstance(e, str) for e in entries):
                raise TypeError(f"contract of {self.results}.json: {what} must be a tuple of strings, not {entries!r}")
        unknown = (set(self.rows) | set(self.prefixes)) - set(self.groups)
        if unknown:
            raise ValueError(f"contract of {self.results}.json: rows of groups it does not list: {sorted(unknown)}")
        if set(self.entries) - set(self.sections):
            raise ValueError(f"contract of {self.results}.json: entries of sections it does not list: "
                             f"{sorted(set(self.entries) - set(self.sections))}")

    def strings(self) -> set[str]:
        """Every name the contract promises: the file's, its groups', rows', prefixes', values', sections', entries'."""
        return {self.results, *self.groups, *self.sections,
                *(name for kind in (self.rows, self.prefixes, self.values, self.entries)
                  for names in kind.values() for name in names)}

    def broken_by(self, data: dict) -> list[str]:
        """What the contract promises that the results file ``data`` does not hold, one line each (empty: it holds all)."""
        rows = [r for r in data.get("results", []) if isinstance(r, dict)]
        found = {group: [r for r in rows if r.get("group") == group] for group in self.groups}
        broken = [f"no group {group!r}" for group, here in found.items() if not here]
        broken += [f"no row {name!r} in group {group!r}" for group, names in self.rows.items() for name in names
                   if not any(r.get(self.row_field) == name for r in found[group])]
        broken += [f"no row starting {start!r} in group {group!r}" for group, starts in self.prefixes.items()
                   for start in starts if not any(str(r.get(self.row_field, "")).startswith(start) for r in found[group])]
        broken += [f"no row whose {key} is {value!r}" for key, values in self.values.items() for value in values
                   if not any(r.get(key) == value for r in rows)]
        broken += [f"no section {section!r}" for section in self.sections if section not in data]
        for section, names in self.entries.items():
            part = data.get(section) or []
            lists = [part] if isinstance(part, list) else [v for v in part.values() if isinstance(v, list)]
            named = {e.get(key) for entries in lists for e in entries if isinstance(e, dict)
                     for key in ("label", "name", "step", "goal", "group")}
            broken += [f"no entry {name!r} in section {section!r}" for name in names if name not in named]
        return broken


def time_training_steps(step, X, labels, batches: list, timed: int) -> tuple[list[float], float]:
    """A whole training step's wall time, host minibatch in, loss and predictions back on the host:
    ``step(X[batch], labels[batch]) -> (loss, predictions)`` over ``batches``, the last ``timed`` of them
    timed (the ones before warm up).  Returns the timed steps' milliseconds and the first step's loss."""
    import time

    times, first_loss = [], None
    for i, batch in enumerate(batches):
        t0 = time.perf_counter()
        loss, _ = step(X[batch], labels[batch])  # it ends on the host: the step is over
        times.append((time.perf_counter() - t0) * 1e3)
        if i == 0:
            first_loss = loss
    return times[-timed:], first_loss


def losses_agree(ours: float, peer: float) -> bool:
    """Whether two first training steps from the same weights on the same minibatch gave the same loss
    (to float32 rounding): the check that a timed step and its peer's do the same work."""
    return bool(abs(ours - peer) <= 1e-4 * max(1.0, abs(peer)))


def torch_sgd_step(torch, params: list, loss, learning_rate: float) -> None:
    """PyTorch's side of a training step's end: autograd's gradients of ``loss``, then plain SGD in place."""
    grads = torch.autograd.grad(loss, params)
    with torch.no_grad():
        for p, g in zip(params, grads):
            p.sub_(learning_rate * g)


def write_results(name: str, payload: dict) -> Path:
    """Write ``benchmarks/results/<name>.json`` (``<name>_<tag>.json`` under this run's tag, :func:`results_tag`)
    with the date and device facts added."""
    path = results_path(name, results_tag())
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "benchmark": name,
        "date": now_utc(),
        "device": selection.current_backend().describe(),
        "software": software_versions(),
    }
    data.update(payload)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path


def print_table(rows: list[dict], title: str = "") -> None:
    if title:
        print(title)
    print(f"{'name':<44} {'kind':<6} {'median µs':>11} {'GB/s':>9} {'% peak BW':>10}")
    for r in rows:
        print(f"{r['name']:<44} {r['kind']:<6} {r['median_ms'] * 1e3:>11.1f} {r['gbs']:>9.0f} {r['percent_of_peak_bandwidth']:>10.1f}")
