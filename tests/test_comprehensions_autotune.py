"""The autotuner: the candidates it tries, and (on any backend) that every candidate it keeps
computes what the naive kernel computes.  Speed is only searched on a GPU."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernels.index_notation import NAIVE, Schedule, compile_tc
from kernels.index_notation.autotune import autotune, cache_key, candidates
from kernels.index_notation.examples import EXAMPLES


def test_candidates_start_naive_and_split_only_small_outputs():
    mv = compile_tc(EXAMPLES["mv"].text)
    few = candidates(mv, {"M": 8, "K": 4096}, limit=30)
    assert few[0] == NAIVE and len(few) == len(set(few)) and len(few) <= 30
    assert any(s.split for s in few)
    many = candidates(mv, {"M": 1 << 20, "K": 64}, limit=30)
    assert not any(s.split for s in many)
    pool = candidates(compile_tc(EXAMPLES["gather"].text), {"N": 10, "A": 64, "B": 64}, limit=200)
    assert pool and all(s.tile_k == 0 and not s.split for s in pool)  # no reduction to tile or split


def test_cache_key_depends_on_text_shape_and_device():
    a = cache_key("t", {"M": 1}, "H100")
    assert a != cache_key("u", {"M": 1}, "H100") != cache_key("t", {"M": 2}, "H100") != cache_key("t", {"M": 1}, "A100")


@pytest.mark.backend
def test_search_checks_every_candidate(backend, tmp_path):
    ex = EXAMPLES["fcrelu"]
    args = ex.make_inputs({"B": 5, "M": 19, "N": 9}, np.random.default_rng(3))
    pool = [NAIVE, Schedule(), Schedule(block=(8, 4), tile_k=8, regs=(2, 2)), Schedule(split=32, block=(32, 4))]
    result = autotune(ex.text, args, schedules=pool, cache=tmp_path / "cache.json")
    assert [t.schedule for t in result.trials] == pool
    assert all(t.correct for t in result.trials), [t.error for t in result.trials]
    assert result.best in pool
    if backend.name == "gpu":
        assert result.timed and all(t.median_ms > 0 for t in result.trials)
        # a full search caches its best per comprehension, shape and device; the next call reads it
        first = autotune(ex.text, args, limit=6, cache=tmp_path / "cache.json")
        again = autotune(ex.text, args, limit=6, cache=tmp_path / "cache.json")
        assert not first.from_cache and again.from_cache and again.best == first.best
    else:
        assert not result.timed and all(t.median_ms is None for t in result.trials)
    json.dumps(result.as_dict())  # what the chapter and the benchmark record
