"""One ``results_path``: where a benchmark's results file is, the tag (the kind of GPU) its explicit parameter.

What writes a file (``write_results``) takes this run's tag from ``$DLK_RESULTS_TAG``; what reads one says
which file it reads: the chapters the untagged file, the scoreboard every file.  A tag in the environment
never changes what the book reads.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from benchmarks import common
from benchmarks.common import RESULTS_DIR, RESULTS_TAG_VARIABLE, recorded_runs, results_path, write_results
from book.speed_figures import SpeedFigures
from kernels.runtime import selection

ROOT = Path(__file__).resolve().parents[1]


def test_one_function_says_where_a_results_file_is():
    defined = [f"{path.relative_to(ROOT)}:{node.lineno}" for folder in ("benchmarks", "book", "kernels", "autograder")
               for path in sorted((ROOT / folder).rglob("*.py"))
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.FunctionDef) and node.name == "results_path"]
    assert len(defined) == 1 and defined[0].startswith("benchmarks/common.py:"), defined


def test_the_tag_is_a_parameter_and_the_environment_does_not_change_what_is_read(monkeypatch, tmp_path):
    monkeypatch.setenv(RESULTS_TAG_VARIABLE, "h200")
    assert results_path("cnn") == RESULTS_DIR / "cnn.json"
    assert results_path("cnn", "h200") == RESULTS_DIR / "cnn_h200.json"
    assert results_path("cnn", None, tmp_path) == tmp_path / "cnn.json"
    assert SpeedFigures.recorded("cnn").path == RESULTS_DIR / "cnn.json"
    h200 = SpeedFigures.recorded("cnn", tag="h200")
    assert h200.path.name == "cnn_h200.json" and h200.data == json.loads((RESULTS_DIR / "cnn_h200.json").read_text())


class _Backend:
    def describe(self) -> dict:
        return {"name": "Test GPU"}


@pytest.mark.parametrize("tag, written", [("", "demo.json"), ("b200", "demo_b200.json")])
def test_a_run_writes_the_file_of_its_tag_and_the_readers_find_it(monkeypatch, tmp_path, tag, written):
    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(selection, "current_backend", lambda: _Backend())
    monkeypatch.setenv(RESULTS_TAG_VARIABLE, tag)
    path = write_results("demo", {"results": []})
    assert path == tmp_path / written and json.loads(path.read_text())["benchmark"] == "demo"
    assert recorded_runs("demo") == [path]
    # The chapters read the untagged file only: a tagged run alone leaves them "not recorded".
    assert SpeedFigures.recorded("demo").available == (tag == "")
    assert [run.path for run in SpeedFigures.every_run("demo")] == [path]
