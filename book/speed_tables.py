"""A chapter's speed figures as an HTML table: a row per kernel or peer, the columns the chapter chooses.

One function makes every such table; a chapter picks its columns from those below (or makes one
of its own) and names the rows through its benchmark's constants::

    from book.speed_tables import BANDWIDTH_COLUMNS, speed_table

    rows = [r for group in bench.ELEMENTWISE for r in figures.rows(group)]
    display(speed_table(rows, BANDWIDTH_COLUMNS, caption=figures.label))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from IPython.display import HTML


@dataclass(frozen=True)
class Column:
    title: str
    text: Callable[[dict], str]  # the cell's text, from the row
    code: bool = False  # set as code: a kernel's name


NAME = Column("version", lambda r: r["name"], code=True)
KIND = Column("", lambda r: "ours" if r["kind"] == "kernel" else "peer")
TIME_US = Column("time (µs)", lambda r: f"{r['median_ms'] * 1e3:,.1f}")
GBS = Column("GB/s", lambda r: f"{r['gbs']:,.0f}")
GFLOPS = Column("GFLOP/s", lambda r: f"{r['gflops']:,.1f}")

#: A memory-bound job: its time, bandwidth, and the share of the measured copy bandwidth.
BANDWIDTH_COLUMNS = (NAME, KIND, TIME_US, GBS,
                     Column("% of our copy's bandwidth", lambda r: f"{r['percent_of_peak_bandwidth']:.0f} %"))
#: A job with a floor of its own (the time its bytes take at the copy bandwidth, ``floor_us`` in the caption).
FLOOR_COLUMNS = (NAME, TIME_US, GBS, Column("× the floor", lambda r: f"{r['times_floor']:.2f}"))


def fp32_columns(peak_gflops: float) -> tuple[Column, ...]:
    """A dense layer's products: the layer's size, the kernel, its time, its rate and the share of the FP32 peak."""
    return (Column("size (n x in -> out)", lambda r: f"{r['n']} x {r['in']} -> {r['out']}"), NAME, KIND, TIME_US,
            GFLOPS, Column("% of the FP32 peak", lambda r: f"{100 * r['gflops'] / peak_gflops:.2f} %"))


def speed_table(rows: Sequence[dict], columns: Sequence[Column], caption: str = "") -> HTML:
    """``rows`` (rows of a results file) as an HTML table of ``columns``, under ``caption``."""
    head = "".join(f"<th>{escape(c.title, quote=False)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(c, r) for c in columns) + "</tr>" for r in rows)
    return HTML(f"<table><caption>{escape(caption, quote=False)}</caption><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table>")


def _cell(column: Column, row: dict) -> str:
    text = escape(column.text(row), quote=False)
    return f"<td><code>{text}</code></td>" if column.code else f"<td>{text}</td>"
