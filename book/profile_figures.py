"""The profiler's figures of a group of kernels, as a chapter shows them.

``benchmarks/profiles.py`` records them with Nsight Compute on a GPU machine
(``benchmarks/results/profiles.json``); a chapter reads the recorded file, never
profiles as it runs (a profiler replays each kernel many times, with the caches
flushed, and needs a process of its own).
"""

from __future__ import annotations

import html

from benchmarks import profiles
from book.speed_figures import SpeedFigures

_whole = "{:.0f}".format  # how a percentage, a count of registers or of warps is written
#: Columns both tables have: the profiled time, occupancy and registers.
_DURATION = ("duration_us", "µs (profiled)", "{:,.1f}".format)
_OCCUPANCY_AND_REGISTERS = (("achieved_occupancy_percent", "achieved occupancy, %", _whole),
                            ("registers_per_thread", "registers per thread", _whole))

#: The columns of the table: the row's key, the heading, and how a value is written.
COLUMNS = (
    ("step", "step", str), _DURATION,
    ("dram_percent", "DRAM, % of peak", _whole),
    ("sm_percent", "SM throughput, % of peak", _whole),
    ("sectors_per_load_request", "sectors per global load", "{:.1f}".format),
    ("sectors_per_store_request", "sectors per global store", "{:.1f}".format),
    ("shared_bank_conflicts", "shared-memory bank conflicts", "{:,.0f}".format),
    *_OCCUPANCY_AND_REGISTERS,
)

#: The columns of the table of what limits the fastest SGEMMs ("limits"): how busy each pipe is.
LIMIT_COLUMNS = (
    ("step", "kernel", str), _DURATION,
    ("fma_pipe_percent", "FMA pipe busy, % of cycles", _whole),
    ("tensor_pipe_percent", "tensor pipe busy, % of cycles", _whole),
    ("issue_slots_percent", "issue slots used, %", _whole),
    ("barrier_stall_percent", "warps waiting at a barrier, %", _whole),
    ("l2_percent", "L2 throughput, % of peak", _whole),
    *_OCCUPANCY_AND_REGISTERS,
)


def recorded() -> SpeedFigures:
    """The profiler's recorded figures (the untagged file: the GPU the chapters show)."""
    return SpeedFigures.recorded(profiles.NAME)


def table_html(rows: list[dict], columns=COLUMNS) -> str:
    """An HTML table of ``rows`` (a text table is wider than the page's column); a figure the profiler did
    not give is a dash, a kernel it could not profile says why."""
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title, _ in columns)
    body = []
    for r in rows:
        if "error" in r:
            cells = f"<td>{html.escape(r['step'])}</td><td colspan='{len(columns) - 1}'>not profiled: {html.escape(r['error'][:200])}</td>"
        else:
            cells = "".join(f"<td>{html.escape(fmt(r[key])) if key in r else '–'}</td>" for key, _, fmt in columns)
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def show(group: str, what: str, columns=COLUMNS):
    """The group's table (a group of ``benchmarks/profiles.py``: ``profiles.SGEMM``, ...) with where it comes
    from, or a box saying it has not been recorded."""
    from IPython.display import HTML, display

    figures = recorded()
    rows = figures.rows(group)
    if not rows:
        display(figures.missing(f"profiler figures of the {what} (`benchmarks/profiles.py`, which needs Nsight "
                                f"Compute's `ncu`)"))
        return
    display(HTML(f"<p>Nsight Compute, {html.escape(figures.label)}:</p>" + table_html(rows, columns)))

