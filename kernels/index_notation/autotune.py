"""Search the schedule parameters of a comprehension for one set of input shapes.

On a GPU every candidate is generated, compiled, run once and checked against
the naive kernel's output, then timed with CUDA events (the book's
``time_kernel``: warm-up, L2 flush before every call, median).  The fastest
correct schedule is cached per comprehension and shape in a JSON file, and the
whole search is returned (and can be saved) so the chapter can plot it.

On the CPU emulator, which says nothing about speed, the search only checks
that every candidate computes the same result as the naive kernel.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..runtime import selection as select
from ..runtime.module import to_device
from ..runtime.timing import time_kernel
from . import Comprehension, compile_tc
from .runner import bind_sizes
from .schedule import NAIVE, Schedule


def default_cache_path() -> Path:
    root = os.environ.get("DLK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "deep-learning-kernels")
    return Path(root) / "tc_autotune.json"


def cache_key(text: str, sizes: dict, device: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    shape = ",".join(f"{k}={v}" for k, v in sorted(sizes.items()))
    return f"{digest}|{shape}|{device}"


@dataclass
class Trial:
    schedule: Schedule
    median_ms: float | None  # None: not timed (emulator) or failed
    correct: bool
    error: str = ""

    def as_dict(self) -> dict:
        return {"schedule": self.schedule.as_dict(), "describe": self.schedule.describe(),
                "median_ms": self.median_ms, "correct": self.correct, "error": self.error}


@dataclass
class TuneResult:
    name: str
    sizes: dict
    device: str
    timed: bool
    best: Schedule
    trials: list = field(default_factory=list)
    from_cache: bool = False

    @property
    def naive_ms(self) -> float | None:
        return next((t.median_ms for t in self.trials if t.schedule == NAIVE), None)

    @property
    def best_ms(self) -> float | None:
        return next((t.median_ms for t in self.trials if t.schedule == self.best), None)

    def as_dict(self) -> dict:
        return {"name": self.name, "sizes": self.sizes, "device": self.device, "timed": self.timed,
                "best": self.best.as_dict(), "best_describe": self.best.describe(),
                "trials": [t.as_dict() for t in self.trials]}


def candidates(tc: Comprehension, sizes: dict, limit: int = 48, seed: int = 0) -> list[Schedule]:
    """Schedules worth trying for this comprehension at these sizes (the naive one first).

    Split reductions are tried when the outputs are too few to fill a GPU;
    shared-memory tiles only where there is a reduction.  Above ``limit`` a
    fixed-seed sample is taken, always keeping a few balanced defaults.
    """
    cd = tc.checked
    has_reduction = any(cs.reduction for cs in cd.statements)
    outputs = 1
    for d in cd.outputs[0].dims:
        outputs *= d.eval(sizes)
    keep = [Schedule(block=(16, 16), regs=(4, 4), tile_k=16), Schedule(block=(32, 8), regs=(2, 2)),
            Schedule(block=(16, 16), regs=(8, 8), tile_k=8, unroll=4)]
    keep = [s if has_reduction else s.with_(tile_k=0) for s in keep]
    found: list[Schedule] = list(dict.fromkeys([NAIVE, Schedule()] + keep))
    if has_reduction and outputs <= 16384:
        for split in (32, 64, 128, 256):
            for by in (1, 2, 4):
                if split * by <= 1024:
                    found.append(Schedule(split=split, block=(split, by)))
    grid = []
    for block in ((32, 4), (32, 8), (16, 16), (64, 4), (16, 8)):
        for regs in ((1, 1), (1, 4), (2, 2), (4, 4), (8, 4), (4, 8), (8, 8)):
            for tile_k in ((0, 8, 16, 32) if has_reduction else (0,)):
                for unroll in (1, 4):
                    grid.append(Schedule(block=block, regs=regs, tile_k=tile_k, unroll=unroll))
    rng = random.Random(seed)
    rest = [s for s in grid if s not in found]
    room = max(0, limit - len(found))
    found += rng.sample(rest, room) if room < len(rest) else rest
    return list(dict.fromkeys(found))[:max(2, limit)]


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape or not np.isfinite(got).all():
        return False
    return float(np.abs(got - want).max()) <= 1e-4 * (float(np.abs(want).max()) + 1.0)


def autotune(text: str, args: tuple, *, limit: int = 48, cache: Path | str | None = None, use_cache: bool = True,
             schedules: list | None = None, progress=None) -> TuneResult:
    """Try schedules of ``text`` on the inputs ``args``; the best is cached per comprehension, shape and device."""
    backend = select.current_backend()
    on_gpu = backend.name == "gpu"
    device = str(backend.describe().get("name") or backend.name)
    base = compile_tc(text, NAIVE)
    values = dict(zip([n for k, n, _ in base.program.params if k in ("scalar", "input")], args))
    host = {k: (np.ascontiguousarray(v) if hasattr(v, "shape") else v) for k, v in values.items()}
    sizes = bind_sizes(base.program, {k: v for k, v in host.items() if hasattr(v, "shape")})
    cache_path = Path(cache) if cache else default_cache_path()
    key = cache_key(text, sizes, device)
    if on_gpu and use_cache and schedules is None and cache_path.exists():
        stored = json.loads(cache_path.read_text()).get(key)
        if stored:
            sched = Schedule(**{k: tuple(v) if isinstance(v, list) else v for k, v in stored["best"].items()})
            return TuneResult(base.name, sizes, device, True, sched, [], from_cache=True)
    want = base(*args)
    trials: list[Trial] = []
    pool = schedules if schedules is not None else candidates(base, sizes, limit)
    for n, sched in enumerate(pool):
        tc = base.with_schedule(sched)
        try:
            got = tc(*args)
            ok = _close(np.asarray(got), np.asarray(want))
            ms = None
            if ok and on_gpu:
                ms = time_kernel(_enqueue(tc, args), warmup=2, repeat=10, max_repeat=30).median_ms
            trials.append(Trial(sched, ms, ok, "" if ok else "differs from the naive kernel"))
        except Exception as exc:  # a schedule the device refuses (too much shared memory, ...) is skipped
            trials.append(Trial(sched, None, False, f"{type(exc).__name__}: {exc}"[:300]))
        if progress:
            progress(n, trials[-1])
    timed = [t for t in trials if t.correct and t.median_ms is not None]
    if timed:
        best = min(timed, key=lambda t: t.median_ms).schedule
    else:  # the emulator: no speed to go by, the balanced default
        best = Schedule() if any(t.correct and t.schedule == Schedule() for t in trials) else NAIVE
    result = TuneResult(base.name, sizes, device, bool(timed), best, trials)
    if on_gpu and timed and schedules is None:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        data = json.loads(cache_path.read_text()) if cache_path.exists() else {}
        data[key] = {"best": best.as_dict(), "median_ms": result.best_ms, "date": time.strftime("%Y-%m-%d")}
        cache_path.write_text(json.dumps(data, indent=1))
    return result


def _enqueue(tc: Comprehension, args):
    """Launches only (inputs and outputs on the device already), for timing."""
    dev = [to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a for a in args]
    return tc(*dev, prepare_only=True)
