"""Speed figures for a chapter: measured now on a GPU, or read from a benchmark results file.

Each chapter with speed figures has a benchmark, ``benchmarks/<name>.py``,
whose ``measure()`` returns the figures and whose ``make bench`` run writes
them to ``benchmarks/results/<name>.json`` together with the GPU and date.
On a GPU the chapter calls ``measure()`` as it runs; on the CPU emulator,
which checks results but says nothing about speed, it shows the recorded
file, labelled with the GPU and date it was measured on; and when there is
no such file yet it says so instead of showing nothing.  The chapter names
the file, its groups and rows through the benchmark's constants (its
contract, :class:`benchmarks.common.Contract`)::

    from benchmarks import cuda_from_python as bench

    figures = SpeedFigures.load(bench.NAME, bench.measure)
    figures.note()                 # where the figures come from, as a visible box
    if figures.available:
        figures.row(bench.GRID_STRIDE_ADD)["gbs"]
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import now_utc, recorded_runs, results_path
from kernels.runtime import selection
from kernels.tools.roofline import Peaks


class SpeedFigures:
    """The figures of one benchmark: ``data`` is the results-file dictionary, or None."""

    def __init__(self, name: str, data: dict | None, live: bool, path: Path):
        self.name = name
        self.data = data
        self.live = live
        self.path = path

    @classmethod
    def load(cls, name: str, measure: Callable[..., dict], results_dir: Path | str | None = None,
             **measure_kwargs) -> "SpeedFigures":
        """Measure now with the benchmark's ``measure(**measure_kwargs)`` (GPU), or read the untagged
        ``<results_dir>/<name>.json`` (emulator), as :meth:`recorded` does."""
        try:
            live = selection.on_gpu()
        except Exception:  # no backend at all, so no GPU either
            live = False
        if live:
            data = measure(**measure_kwargs)
            data.setdefault("date", now_utc())
            data.setdefault("device", selection.current_backend().describe())
            return cls(name, data, True, results_path(name, None, results_dir))
        return cls.recorded(name, results_dir)

    @classmethod
    def recorded(cls, name: str, results_dir: Path | str | None = None, tag: str | None = None) -> "SpeedFigures":
        """The figures ``make bench`` recorded, never measured now: the untagged ``<results_dir>/<name>.json``
        (the run the chapters show), or another GPU's ``<name>_<tag>.json`` where ``tag`` names one."""
        path = results_path(name, tag, results_dir)
        data = json.loads(path.read_text()) if path.exists() else None
        return cls(name, data, False, path)

    @classmethod
    def every_run(cls, name: str, results_dir: Path | str | None = None) -> list["SpeedFigures"]:
        """Every recorded run of ``name`` (``<name>.json`` first, then other GPUs' tagged files)."""
        return [cls(name, json.loads(path.read_text()), False, path) for path in recorded_runs(name, results_dir)]

    # --- where the figures come from -------------------------------------------------------

    @property
    def available(self) -> bool:
        return self.data is not None

    @property
    def device_name(self) -> str:
        return str((self.data or {}).get("device", {}).get("name", "an unnamed GPU"))

    @property
    def date(self) -> str:
        return str((self.data or {}).get("date", "an unknown date"))[:10]

    @property
    def label(self) -> str:
        """Short caption for plots: the GPU, the date, and whether measured now or recorded."""
        return f"{self.device_name}, {'measured now' if self.live else 'recorded'} {self.date}"

    def source_text(self) -> str:
        """One sentence saying where the speed figures on the page come from."""
        if self.live:
            return f"The speed figures on this page were measured as it ran, on {self.device_name} ({self.date})."
        if self.data is not None:
            driver = self.data.get("device", {}).get("driver_version")
            return (
                f"This page ran its kernels on the CPU emulator, which checks results but says nothing about "
                f"speed. Its speed figures were measured by `make bench` on {self.device_name}"
                f"{f' (driver {driver})' if driver else ''} on {self.date} and are read from "
                f"`benchmarks/results/{self.path.name}`."
            )
        return (
            f"This page ran its kernels on the CPU emulator, which checks results but says nothing about speed, "
            f"and no GPU figures have been recorded yet: `benchmarks/results/{self.path.name}` does not exist. "
            f"Run `make bench` on a GPU machine to record them. Until then the speed tables and plots of this "
            f"page are replaced by notes like this one."
        )

    def note(self):
        """:meth:`source_text` as a visible box in a notebook."""
        return admonition(self.source_text(), "tip" if self.live else ("note" if self.data is not None else "warning"))

    def missing(self, what: str):
        """A visible box in place of a figure there are no numbers for (no results file, or none in it)."""
        if self.data is not None:
            return admonition(
                f"No {what} here: not recorded yet. `benchmarks/results/{self.path.name}` was measured on "
                f"{self.device_name} on {self.date}, before its benchmark measured this; `make bench` on a GPU "
                f"machine records it.",
                "warning",
            )
        return admonition(
            f"No {what} here: no GPU figures have been recorded yet (`benchmarks/results/{self.path.name}` "
            f"does not exist; `make bench` on a GPU machine writes it).",
            "warning",
        )

    # --- figures -----------------------------------------------------------------------------

    def rows(self, group: str | None = None, kind: str | None = None, layer: str | None = None) -> list[dict]:
        """The rows of ``results``, those of one group, kind ("kernel" or "peer") or layer if named."""
        rows = (self.data or {}).get("results", [])
        return [r for r in rows if (group is None or r["group"] == group) and (kind is None or r["kind"] == kind)
                and (layer is None or r.get("layer") == layer)]

    def layers(self, group: str) -> list[str]:
        """The layers a group's rows were measured on, in the order they were measured."""
        return list(dict.fromkeys(r["layer"] for r in self.rows(group) if "layer" in r))

    def summary(self) -> dict:
        """The results file's ``summary`` (what its benchmark concluded), empty if it has none."""
        return (self.data or {}).get("summary", {})

    def row(self, name: str) -> dict | None:
        return next((r for r in self.rows() if r["name"] == name), None)

    def timed(self, group: str, name: str) -> dict | None:
        """The row called ``name`` in ``group`` if it was timed (a row that says why it was not is None here)."""
        return next((r for r in self.rows(group) if r["name"] == name and r.get("median_ms")), None)

    def section(self, key: str):
        """Another part of the results (``"transfers"``, ``"block_sweep"``...), or None."""
        return (self.data or {}).get(key)

    def peaks(self):
        """The measured :class:`~kernels.tools.roofline.Peaks`, or None."""

        p = self.section("peaks")
        if not p:
            return None
        return Peaks(
            bandwidth_gbs=float(p["bandwidth_gbs"]), fp32_gflops=float(p["fp32_gflops"]),
            device=self.device_name, measured=self.date,
            source="measured now" if self.live else f"benchmarks/results/{self.path.name}",
        )


_BOX_COLORS = {"note": ("#1f6fb2", "#eef5fc"), "warning": ("#c77700", "#fff6e5"), "tip": ("#2e7d32", "#edf7ee")}


def admonition(text: str, kind: str = "note"):
    """A coloured box with ``text`` in a notebook (backticks become code); the text itself elsewhere."""
    import html
    import re

    try:
        from IPython.display import HTML
    except ImportError:
        return text
    title = {"note": "Note", "warning": "Warning", "tip": "Measured now"}.get(kind, kind.title())
    border, background = _BOX_COLORS.get(kind, _BOX_COLORS["note"])
    body = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))
    return HTML(
        f'<div class="admonition {kind}" style="border-left: 4px solid {border}; background: {background}; '
        f'padding: 0.4em 1em; margin: 0.5em 0;"><p class="admonition-title" style="font-weight: bold; margin: 0.2em 0;">'
        f"{title}</p><p>{body}</p></div>"
    )
