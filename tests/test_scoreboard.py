"""The scoreboard page (book/scoreboard.md, book/scoreboard.py) shows what the results files hold.

Every comparison resolves against the recorded files to rows of one run; a comparison whose
file, part or rows are missing stays on the board as "not measured"; nothing is invented.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.common import RESULTS_DIR
from book import scoreboard
from book.scoreboard import COMPARISONS, Comparison, resolve
from book.speed_figures import SpeedFigures

ROOT = Path(__file__).resolve().parent.parent


def _run_of(c: Comparison) -> tuple[list[dict], str, str]:
    """The rows, GPU and date of the run a comparison reads, straight from its file."""
    data = SpeedFigures.recorded(c.results).data
    assert data is not None, f"{c.results}.json is not recorded"
    if c.section is None:
        return data["results"], data["device"]["name"], data["date"][:10]
    section = data[c.section]
    return scoreboard.SECTIONS[c.section](section), section["device"]["name"], section["date"][:10]


@pytest.mark.parametrize("c", COMPARISONS, ids=lambda c: f"{c.chapter}: {c.label}")
def test_every_comparison_resolves_against_the_recorded_files(c):
    score = resolve(c)
    assert score.measured, score.missing
    assert score.kernel_ms > 0 and score.peer_ms > 0
    assert score.ratio == pytest.approx(score.peer_ms / score.kernel_ms)
    rows, gpu, date = _run_of(c)
    assert score.gpu == gpu and score.date == date and gpu and date[:4].isdigit()
    assert "{" not in score.what, f"shape left unformatted: {score.what}"
    # Both rows are of this run and of this comparison's group and layer.
    here = [r for r in rows if r["group"] in c.groups and (c.layer is None or r.get("layer") == c.layer)]
    ours = [r for r in here if r["kind"] == "kernel" and r["name"] == score.kernel and r.get("median_ms") == score.kernel_ms]
    peer = [r for r in here if r["kind"] == "peer" and r["name"] == score.peer and r.get("median_ms") == score.peer_ms]
    assert ours and peer, f"{score.kernel!r} or {score.peer!r} is not a row of {c.source}"
    if c.largest:  # a sweep: both at its largest size
        top = max(r[c.largest] for r in here)
        assert ours[0][c.largest] == top and peer[0][c.largest] == top
    assert ours[0].get("correct") is not False
    # No correct kernel of the comparison is faster than the one chosen.
    faster = [r for r in here if r["kind"] == "kernel" and r.get("median_ms") and r["median_ms"] < score.kernel_ms
              and r.get("correct") is not False and r.get("within_tolerance") is not False
              and all(r.get(k) in (v if isinstance(v, tuple) else (v,)) for k, v in c.kernels.items())
              and (c.largest is None or r[c.largest] == max(x[c.largest] for x in here))]
    assert faster == [], f"faster kernels left out: {[r['name'] for r in faster]}"


def test_the_fraction_of_the_limit_is_the_files_own_or_from_its_peaks_never_invented():
    scores = {(s.chapter, s.label): s for s in scoreboard.scoreboard()}
    by_label = {c.label: c for c in COMPARISONS}
    for (_, label), s in scores.items():
        c = by_label[label]
        data = SpeedFigures.recorded(c.results).data
        part = data[c.section] if c.section else data
        row = next(r for r in _run_of(c)[0] if r["name"] == s.kernel and r.get("median_ms") == s.kernel_ms)
        if "percent_of_limit" in row:
            assert s.percent_of_limit == pytest.approx(row["percent_of_limit"])
        elif not part.get("peaks") and "percent_of_peak_bandwidth" not in row:
            assert s.percent_of_limit is None, f"{label}: a fraction of the limit with no peaks to take it from"
    # The index-notation file records no peaks: its rows say nothing of the limit.
    assert all(s.percent_of_limit is None for s in scores.values() if s.chapter.startswith("7."))


def test_limit_takes_the_roof_that_bounds_the_kernel():
    peaks = {"bandwidth_gbs": 2000.0, "fp32_gflops": 50000.0}
    # 1 GB in 1 ms: 1000 GB/s, half the bandwidth; 1 GFLOP in it is far under the FP32 roof.
    assert scoreboard.limit({"bytes": 1e9, "flops": 1e9, "median_ms": 1.0}, peaks) == (pytest.approx(50.0), "bandwidth")
    # 25 GFLOP on 1 MB in 1 ms: compute-bound, half of 50 TFLOP/s.
    assert scoreboard.limit({"bytes": 1e6, "flops": 25e9, "median_ms": 1.0}, peaks) == (pytest.approx(50.0), "FP32")
    assert scoreboard.limit({"bytes": 1e9, "flops": 1e9, "median_ms": 1.0}, None) == (None, None)
    assert scoreboard.limit({"median_ms": 1.0, "percent_of_limit": 12.5, "bound": "compute"}, None) == (12.5, "FP32")


@pytest.fixture
def results_copy(tmp_path) -> Path:
    for path in RESULTS_DIR.glob("*.json"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def _edit(folder: Path, name: str, change) -> None:
    path = folder / f"{name}.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _scores(folder: Path) -> dict[str, scoreboard.Score]:
    return {s.label: s for s in scoreboard.scoreboard(folder)}


def test_a_comparison_missing_from_its_file_is_not_measured_and_stays_on_the_board(results_copy):
    _edit(results_copy, "capsules", lambda d: d.update(results=[r for r in d["results"]
                                                                 if not (r["group"] == "forward" and r["kind"] == "peer")]))
    _edit(results_copy, "conv_as_gemm", lambda d: d.pop("sgemm_shapes"))
    (results_copy / "index_notation.json").unlink()
    scores = _scores(results_copy)
    assert len(scores) == len(COMPARISONS)
    capsule = scores["capsule prediction"]
    assert not capsule.measured and capsule.ratio is None and "peer" in capsule.missing
    assert scores["capsule input gradient"].measured  # the rest of the file still counts
    assert all(not s.measured and "sgemm_shapes" in s.missing for s in scores.values()
               if s.label.startswith("SGEMM ") and s.label != "SGEMM")
    assert scores["SGEMM"].measured
    notation = [s for s in scores.values() if s.chapter.startswith("7.")]
    assert notation and all(s.missing == "no index_notation.json" and s.gpu is None for s in notation)
    rows = _table_rows(list(scores.values()))
    missing = sum(not s.measured for s in scores.values())
    assert sum(cells[1].startswith("not measured") for _, cells in rows) == missing
    # The two capsule predictions (against einsum's copy and its view), the SGEMM shapes, index notation.
    assert missing == 2 + len(scoreboard.SGEMM_SHAPES) + len(notation)
    assert f"{missing} comparisons are not measured yet" in scoreboard.sources_text(list(scores.values()))


def test_a_kernel_marked_wrong_is_never_the_best(results_copy):
    fastest = resolve(COMPARISONS[0]).kernel  # vector add

    def mark_wrong(data):
        for r in data["results"]:
            if r["name"] == fastest:
                r["correct"] = False

    _edit(results_copy, "cuda_from_python", mark_wrong)
    score = resolve(COMPARISONS[0], results_copy)
    assert score.measured and score.kernel != fastest


def test_the_peer_is_from_the_same_file_as_the_kernel(results_copy):
    """The backward kernels' file measured on another day than cnn.json: a row never mixes the two."""
    def slower_peers(data):
        for r in data["results"]:
            if r["kind"] == "peer":
                r["median_ms"] *= 10

    _edit(results_copy, "cnn_backward", slower_peers)
    before, after = _scores(RESULTS_DIR), _scores(results_copy)
    for label, s in after.items():
        if "backward" in label and s.chapter.startswith("3."):
            assert s.peer_ms == pytest.approx(10 * before[label].peer_ms)
        elif s.chapter.startswith("3."):
            assert s.peer_ms == before[label].peer_ms


def _table_rows(scores) -> list[tuple[str, list[str]]]:
    """Each row of the HTML table under a heading: (its heading, its cells)."""
    from bs4 import BeautifulSoup

    table = BeautifulSoup(scoreboard.html_table(scores), "html.parser")
    rows, heading = [], None
    for tr in table.tbody.find_all("tr"):
        if tr.find("td"):
            rows.append((heading, [td.get_text(" ", strip=True) for td in tr.find_all("td")]))
        else:
            heading = tr.get_text(" ", strip=True)
    return rows


def test_table_marks_ratios_of_one_or_more_and_names_the_gpus():
    scores = scoreboard.scoreboard()
    rows = _table_rows(scores)
    assert len(rows) == len(scores)
    for s, (heading, cells) in zip(scores, rows):
        compared, kernel, kernel_us, peer, peer_us, ratio, limit = cells
        assert heading == f"{s.chapter} · {s.gpu}, {s.date}"
        assert (compared, kernel, peer) == (s.what, s.kernel, s.peer)
        assert float(kernel_us.replace(",", "")) == pytest.approx(s.kernel_ms * 1e3, rel=1e-3, abs=0.051)
        assert float(peer_us.replace(",", "")) == pytest.approx(s.peer_ms * 1e3, rel=1e-3, abs=0.051)
        assert ("▲" in ratio) == (s.ratio >= 1) and ratio.startswith(f"{s.ratio:.2f}×")
        if s.percent_of_limit is None:
            assert limit == ""
        elif s.percent_of_limit >= 10:
            assert limit == f"{s.percent_of_limit:.0f} % {s.roof}"
    text = scoreboard.sources_text(scores)
    for s in scores:
        assert s.gpu in text and s.date in text
    if len({s.gpu for s in scores}) > 1:
        assert "comparable only within its own row" in text


def test_a_comparison_written_wrong_says_which_argument():
    with pytest.raises(TypeError, match="groups"):
        Comparison("cnn", "conv forward", "cnn", "forward")
    with pytest.raises(ValueError, match="section 'nowhere'"):
        resolve(Comparison("conv_as_gemm", "SGEMM", "conv_as_gemm", ("sgemm",), section="nowhere"))


def test_the_page_is_in_the_book_and_draws_from_the_module():
    toc = (ROOT / "_toc.yml").read_text()
    assert "file: book/scoreboard\n" in toc
    page = (ROOT / "book" / "scoreboard.md").read_text()
    assert "scoreboard.scoreboard()" in page and "scoreboard.plot_ratios(scores)" in page
    assert "make bench" in page
