"""The scoreboard page (book/scoreboard.md, book/scoreboard.py) shows what the results files hold.

Every comparison resolves against the recorded files to rows of one run per GPU (a benchmark's
file and its tagged files, such as cnn.json and cnn_h200.json); a comparison whose file, part or
rows are missing stays on the board as "not measured"; nothing is invented.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.common import RESULTS_DIR, recorded_runs
from book import scoreboard
from book.scoreboard import COMPARISONS, Comparison, resolve

ROOT = Path(__file__).resolve().parent.parent


def _run_of(c: Comparison, source: str) -> tuple[list[dict], str, str]:
    """The rows, GPU and date of the run a score of ``c`` reads, straight from its file (``source``)."""
    data = json.loads((RESULTS_DIR / source.split(",")[0]).read_text())
    if c.section is None:
        return data["results"], data["device"]["name"], data["date"][:10]
    section = data[c.section]
    device = section.get("device", data["device"])
    return scoreboard.SECTIONS[c.section](section), device["name"], section.get("date", data["date"])[:10]


@pytest.mark.parametrize("c", COMPARISONS, ids=lambda c: f"{c.chapter}: {c.label}")
def test_every_comparison_resolves_against_the_recorded_files(c):
    scores = resolve(c)
    files = recorded_runs(c.results)
    assert [s.source.split(",")[0] for s in scores] == [p.name for p in files], "one score per GPU's file"
    for score in scores:
        assert score.measured, score.missing
        assert score.kernel_ms > 0 and score.peer_ms > 0
        assert score.ratio == pytest.approx(score.peer_ms / score.kernel_ms)
        rows, gpu, date = _run_of(c, score.source)
        assert score.gpu == gpu and score.date == date and gpu and date[:4].isdigit()
        assert "{" not in score.what, f"shape left unformatted: {score.what}"
        # Both rows are of this run and of this comparison's group and layer.
        here = [r for r in rows if r["group"] in c.groups and (c.layer is None or r.get("layer") == c.layer)]
        ours = [r for r in here if r["kind"] == "kernel" and r["name"] == score.kernel
                and r.get("median_ms") == score.kernel_ms]
        peer = [r for r in here if r["kind"] == "peer" and r["name"] == score.peer and r.get("median_ms") == score.peer_ms]
        assert ours and peer, f"{score.kernel!r} or {score.peer!r} is not a row of {score.source}"
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
    by_label = {c.label: c for c in COMPARISONS}
    scores = [s for s in scoreboard.scoreboard() if s.measured]  # (that every one is: the test above)
    for s in scores:
        c = by_label[s.label]
        data = json.loads((RESULTS_DIR / s.source.split(",")[0]).read_text())
        part = data[c.section] if c.section else data
        row = next(r for r in _run_of(c, s.source)[0] if r["name"] == s.kernel and r.get("median_ms") == s.kernel_ms
                   and r.get("group") in c.groups and (c.layer is None or r.get("layer") == c.layer)
                   and scoreboard._matches(r, c.kernels))
        if "percent_of_limit" in row:
            assert s.percent_of_limit == pytest.approx(row["percent_of_limit"])
        elif not part.get("peaks") and "percent_of_peak_bandwidth" not in row:
            assert s.percent_of_limit is None, f"{s.label}: a fraction of the limit with no peaks to take it from"
    # The index-notation file records no peaks: its rows say nothing of the limit.
    assert all(s.percent_of_limit is None for s in scores if s.chapter.startswith("7."))


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


def _scores(folder: Path) -> dict[tuple[str, str], scoreboard.Score]:
    """The board's scores by (label, GPU): ("SGEMM", "H100")."""
    return {(s.label, s.gpu_short): s for s in scoreboard.scoreboard(folder)}


def test_a_comparison_missing_from_its_file_is_not_measured_and_stays_on_the_board(results_copy):
    _edit(results_copy, "capsules", lambda d: d.update(results=[r for r in d["results"]
                                                                 if not (r["group"] == "forward" and r["kind"] == "peer")]))
    _edit(results_copy, "conv_as_gemm", lambda d: d.pop("sgemm_shapes"))
    for path in recorded_runs("index_notation", results_copy):
        path.unlink()
    board = scoreboard.scoreboard(results_copy)
    # Every line stays, measured or not (a comparison with no file at all keeps one line: below).
    def lines(scores):
        return [(s.chapter, s.label, s.gpu_short) for s in scores if not s.chapter.startswith("7.")]

    assert lines(board) == lines(scoreboard.scoreboard())
    scores = _scores(results_copy)
    capsule = scores[("capsule prediction", "H100")]
    assert not capsule.measured and capsule.ratio is None and "peer" in capsule.missing
    assert capsule.gpu and capsule.source == "capsules.json"  # the file is there; its peer rows are not
    assert scores[("capsule input gradient", "H100")].measured  # the rest of the file still counts
    shape_labels = {f"SGEMM {label.split(',')[0]}" for label in scoreboard.SGEMM_SHAPES}
    shapes = [s for (label, gpu), s in scores.items() if label in shape_labels and gpu == "H100"]
    assert shapes and all(not s.measured and "sgemm_shapes" in s.missing for s in shapes)
    assert scores[("SGEMM", "H100")].measured
    # Another GPU's file of the same benchmark is untouched by what happened to this one.
    assert all(s.measured for (label, gpu), s in scores.items() if gpu != "H100" and label.startswith("SGEMM"))
    notation = [s for s in board if s.chapter.startswith("7.")]
    assert len(notation) == len(scoreboard.INDEX_NOTATION_WORKLOADS)
    assert all(s.missing == "no index_notation.json" and s.gpu is None for s in notation)
    rows = _table_rows(board)
    missing = sum(not s.measured for s in board)
    assert sum(cells[-1].startswith("not measured") for _, cells in rows) == missing
    # The two capsule predictions (against einsum's copy and its view), the SGEMM shapes, index notation.
    assert missing == 2 + len(shapes) + len(notation)
    assert f"{missing} comparisons are not measured yet" in scoreboard.sources_text(board)


def test_a_kernel_marked_wrong_is_never_the_best(results_copy):
    (score, *_) = resolve(COMPARISONS[0])  # vector add, on the GPU of cuda_from_python.json
    fastest = score.kernel

    def mark_wrong(data):
        for r in data["results"]:
            if r["name"] == fastest:
                r["correct"] = False

    _edit(results_copy, "cuda_from_python", mark_wrong)
    after = resolve(COMPARISONS[0], results_copy)[0]
    assert after.measured and after.kernel != fastest


def test_the_peer_is_from_the_same_file_as_the_kernel(results_copy):
    """The backward kernels' file measured on another day than cnn.json, and on another GPU than
    cnn_backward_h200.json: a score never mixes two files."""
    def slower_peers(data):
        for r in data["results"]:
            if r["kind"] == "peer":
                r["median_ms"] *= 10

    _edit(results_copy, "cnn_backward", slower_peers)
    before, after = _scores(RESULTS_DIR), _scores(results_copy)
    assert any(s.source == "cnn_backward.json" for s in after.values())
    for key, s in after.items():
        if s.source == "cnn_backward.json":
            assert s.peer_ms == pytest.approx(10 * before[key].peer_ms)
        elif s.chapter.startswith("3."):
            assert s.peer_ms == before[key].peer_ms


def test_a_tagged_file_adds_a_row_for_its_gpu(results_copy):
    """A second GPU's file (``<name>_<tag>.json``, benchmark ``<name>``) gives the comparison a row of its
    own under the same "compared" cell, and a panel of its own in the plot."""
    data = json.loads((results_copy / "cuda_from_python.json").read_text())
    data["device"]["name"] = "NVIDIA B200"
    for r in data["results"]:
        r["median_ms"] *= 2 if r["kind"] == "kernel" else 1
    (results_copy / "cuda_from_python_b200.json").write_text(json.dumps(data))
    # A file whose stem looks tagged but that is another benchmark's is not a run of this one.
    (results_copy / "cuda_from_python_extra.json").write_text(json.dumps({**data, "benchmark": "other"}))
    first, *others = resolve(COMPARISONS[0], results_copy)
    second = next(s for s in others if s.gpu_short == "B200")
    assert first.gpu_short == "H100" and second.source == "cuda_from_python_b200.json"
    assert len(others) == len(recorded_runs("cuda_from_python"))  # the recorded files, and the B200's
    assert second.ratio == pytest.approx(first.ratio / 2, rel=1e-2) or second.kernel != first.kernel
    board = scoreboard.scoreboard(results_copy, COMPARISONS[:2])
    rows = _table_rows(board)
    runs = len(others) + 1
    # The comparison's first row holds the "compared" cell, its other GPUs' rows share it.
    assert rows[0][1][:2] == [first.what, "H100"] and "B200" in [cells[0] for _, cells in rows[1:runs]]
    assert all(len(cells) == 7 for _, cells in rows[1:runs]) and len(rows[runs][1]) == 8
    assert "B200" in scoreboard.sources_text(board) and "comparable only within its own row" in scoreboard.sources_text(board)
    import matplotlib

    matplotlib.use("Agg")
    axes = scoreboard.plot_ratios(board)
    assert [ax.get_title().split(":")[0] for ax in axes][0] == "H100" and "B200" in [ax.get_title().split(":")[0] for ax in axes]


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
    compared = None
    for s, (heading, cells) in zip(scores, rows):
        if len(cells) == 8:
            compared, cells = cells[0], cells[1:]  # the first GPU's row of a comparison holds the "compared" cell
        gpu, kernel, kernel_us, peer, peer_us, ratio, limit = cells
        assert heading == s.chapter and gpu == s.gpu_short and gpu in s.gpu
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
