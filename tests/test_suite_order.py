"""The GPU suite starts its longest files first (``make test-gpu``: ``--heavy-first``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from suite_order import HEAVY_FIRST

ROOT = Path(__file__).resolve().parent.parent


def test_every_file_the_gpu_suite_starts_first_exists():
    assert [path for path in HEAVY_FIRST if not (ROOT / path).is_file()] == []
    assert len(set(HEAVY_FIRST)) == len(HEAVY_FIRST)


def test_heavy_first_puts_those_files_ahead_in_their_order_and_keeps_the_rest_in_theirs():
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--heavy-first",
         "tests/test_im2col.py", "tests/autograder/test_build_cache.py", "tests/test_sgemm.py", "tests/test_pooling.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    files = [line.split("::", 1)[0] for line in listed.stdout.splitlines() if "::" in line]
    order = list(dict.fromkeys(files))
    assert order == ["tests/test_sgemm.py", "tests/autograder/test_build_cache.py", "tests/test_im2col.py",
                     "tests/test_pooling.py"]
