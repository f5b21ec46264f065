"""Gradings per minute for a whole class: ``autograder grade`` one after another vs on Dask, one worker per GPU.

A class of ``--class-size`` students (default 40) submits the first
assignment's sample notebooks in turn (correct, slow, wrong, the released
stub), each in a fresh course made from ``solutions/``. Measured in one run:

* the sequential path (``autograder grade``), the peer;
* the cluster path (``autograder grade --cluster ADDRESS``) on a cluster of
  one GPU, then of two and of four when that many are visible, each card
  shared by ``--per-gpu`` gradings at once (one worker process each; the
  one-GPU cluster at every value given, so that sharing a card is measured
  against not sharing it in one run); the cluster is started once before its
  class (its start-up is reported apart);
* one more correct submission graded on the warm one-GPU worker: the
  worker's grading time and the whole command's.

Each figure is the wall time of the whole ``autograder grade`` command
(process start, nbgrader, the gradebook); gradings per minute is the class
size over it.  Each run also holds where a grading's time went
(:mod:`autograder.phase_times`, as ``autograder grade --phases`` shows it per
student): the median over the class of each phase's seconds per student, and
each phase's total over the class. Results go to ``benchmarks/results/cluster_grading.json`` on a
GPU; on the CPU emulator (a smoke run, e.g. ``DLK_BACKEND=cpu python3 -m
benchmarks.cluster_grading --class-size 4``) the workers are emulator workers
and the figures are printed, not written, unless ``--out`` names a file.

A class of 40 graded both ways takes longer than one command may run on a
GPU runner (10 minutes): measure it in two commands, the second adding the
first's runs (same GPU model and class size, each run with its own date)::

    python3 -m benchmarks.cluster_grading --sequential-only --gpus 1 --out /tmp/sequential.json
    python3 -m benchmarks.cluster_grading --no-sequential --gpus 1 --with /tmp/sequential.json

Usage: python3 -m benchmarks.cluster_grading [--class-size N] [--gpus K] [--per-gpu N[,N...]] [--timeout S]
       [--out FILE] [--no-sequential | --sequential-only] [--with FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder import cluster as grading_cluster
from autograder.phase_times import ordered
from benchmarks.common import now_utc, software_versions, write_results

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "autograder" / "submissions"
ASSIGNMENT = "01_cuda_from_python"
NOTEBOOK = "cuda_from_python"
#: The notebooks the class submits, in turn.
SAMPLES = ["correct", "slow", "wrong", "blank"]
SECRET = "cluster-grading-benchmark"


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["DLK_GRADER_SECRET"] = SECRET
    return env


def _cli(course: Path, *args: str, timeout: float = 3600) -> tuple[float, str]:
    """Run ``autograder ARGS`` on ``course``; (wall seconds, stdout)."""
    cmd = [sys.executable, "-m", "autograder.cli", *args, "--course-dir", str(course)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=course, env=_env(), capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds, proc.stdout


def _submit(course: Path, student: str, sample: str) -> None:
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(CORPUS / f"{sample}.ipynb", folder / f"{NOTEBOOK}.ipynb")
    (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC\n")


def make_class(root: Path, size: int) -> Path:
    course = root / "course"
    course.mkdir(parents=True)
    shutil.copytree(REPO / "solutions", course / "solutions")
    shutil.copy(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
    _cli(course, "release", ASSIGNMENT)
    for i in range(size):
        sample = SAMPLES[i % len(SAMPLES)]
        _submit(course, f"s{i:03d}_{sample}", sample)
    return course


def _entries(course: Path) -> dict[str, dict]:
    with open(course / "grading_record" / f"{ASSIGNMENT}.json") as f:
        return json.load(f)["students"]


def phase_figures(entries: dict[str, dict]) -> dict:
    """Where the class's grading time went, from the grading record's entries: per phase, the median over the
    class of a student's seconds in it (0 for a student whose grading never entered it) and the total."""
    per_student = [e.get("phases") or {} for e in entries.values()]
    names = ordered({name for phases in per_student for name in phases})
    seconds = [float(e.get("seconds") or 0.0) for e in entries.values()]
    return {
        "students": len(per_student),
        "median_grading_seconds": round(statistics.median(seconds), 3) if seconds else None,
        "phases_median": {n: round(statistics.median([p.get(n, 0.0) for p in per_student]), 3) for n in names},
        "phases_total": {n: round(sum(p.get(n, 0.0) for p in per_student), 3) for n in names},
    }


def phase_table(run: dict) -> str:
    """The run's phases as a table: median per student and total over the class, seconds and share."""
    figures = run.get("phases") or {}
    median, total = figures.get("phases_median") or {}, figures.get("phases_total") or {}
    if not total:
        return "  (no phases recorded)"
    whole = sum(total.values())
    lines = [f"  {'phase':<24}{'median s':>10}{'total s':>10}{'share':>8}"]
    for name in total:
        lines.append(f"  {name:<24}{median.get(name, 0.0):>10.2f}{total[name]:>10.2f}{total[name] / whole:>8.1%}")
    lines.append(f"  {'all phases':<24}{'':>10}{whole:>10.2f}   (the class's wall time: {run['seconds']:.1f} s)")
    return "\n".join(lines)


def measure_sequential(root: Path, size: int, timeout: str) -> dict:
    course = make_class(root / "sequential", size)
    seconds, _ = _cli(course, "grade", ASSIGNMENT, "--timeout", timeout)
    entries = _entries(course)
    return {"path": "sequential", "workers": 1, "class_size": size, "seconds": seconds,
            "gradings_per_minute": 60 * size / seconds, "phases": phase_figures(entries),
            "scores": {s: e["score"] for s, e in entries.items()}}


def measure_cluster(root: Path, size: int, gpus: list[str], n: int, timeout: str, warm: bool, per_gpu: int) -> dict:
    """A cluster of ``n`` GPUs of ``gpus``, ``per_gpu`` workers sharing each, or without GPUs ``n`` emulator workers
    (a smoke run)."""
    import dask
    from distributed import Client

    course = make_class(root / f"cluster{n}x{per_gpu}", size)
    t0 = time.perf_counter()
    with dask.config.set(grading_cluster.CLUSTER_CONFIG):
        local = grading_cluster.local_cluster(gpus[:n], cpu_workers=n, per_gpu=per_gpu)
    with local, Client(local) as client:
        client.wait_for_workers(n * per_gpu if gpus else n, timeout=300)
        started = time.perf_counter() - t0
        seconds, out = _cli(course, "grade", ASSIGNMENT, "--cluster", local.scheduler_address, "--timeout", timeout,
                            "--no-progress")
        in_run = re.search(r"([\d.]+) gradings per minute", out)
        entries = _entries(course)
        result = {"path": "cluster", "workers": n, "per_gpu": per_gpu if gpus else 1, "class_size": size,
                  "seconds": seconds,
                  "gradings_per_minute": 60 * size / seconds, "cluster_start_seconds": started,
                  "gradings_per_minute_inside_the_run": float(in_run.group(1)) if in_run else None,
                  "phases": phase_figures(entries), "scores": {s: e["score"] for s, e in entries.items()}}
        if warm:
            _submit(course, "warm_correct", "correct")
            command_s, _ = _cli(course, "grade", ASSIGNMENT, "--cluster", local.scheduler_address,
                                "--timeout", timeout, "--no-progress", "--student", "warm_correct")
            entry = _entries(course)["warm_correct"]
            result["warm_correct"] = {"worker_seconds": entry["seconds"], "command_seconds": command_s,
                                      "score": entry["score"], "devices": entry["devices"],
                                      "phases": entry.get("phases") or {}}
    return result


def _gpu_device(gpus: list[str]) -> dict:
    """The GPUs measured, as the results files name a device: ``{"name": model, "gpus": [...]}``."""
    names = []
    for gpu in gpus:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", gpu],
                                 capture_output=True, text=True, timeout=30)
            names.append(out.stdout.strip() or "unknown model")
        except (OSError, subprocess.SubprocessError):
            names.append("unknown model")
    return {"name": ", ".join(dict.fromkeys(names)), "gpus": list(gpus)}


def _earlier_runs(path: Path, device: dict, class_size: int) -> list[dict]:
    """The runs of an earlier results file, if it measured this GPU model and class size (else a clear stop)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"--with {path}: not a results file of this benchmark ({exc})") from None
    if data.get("benchmark") != "cluster_grading":
        raise SystemExit(f"--with {path}: not a results file of this benchmark")
    if data["device"]["name"] != device["name"] or data["class_size"] != class_size:
        raise SystemExit(f"--with {path}: measured {data['class_size']} students on {data['device']['name']}, "
                         f"this command {class_size} on {device['name']}: ratios are taken on one GPU model")
    runs = [{"date": data["date"], **{k: v for k, v in r.items() if not k.startswith("same_scores_as_")}}
            for r in data["runs"]]
    if any("scores" not in r for r in runs):
        raise SystemExit(f"--with {path}: its runs carry no scores to compare with this command's")
    return runs


def summary_of(runs: list[dict]) -> dict:
    """Every run's gradings per minute, each cluster against the sequential path, several cards against one
    shared alike, and one card shared against one card not shared (where the runs hold both)."""
    seq = runs[0]["gradings_per_minute"] if runs[0]["path"] == "sequential" else None
    summary = {"gradings_per_minute": {f"{r['path']} {r['workers']}x{r.get('per_gpu', 1)}":
                                       round(r["gradings_per_minute"], 2) for r in runs}}
    rate = {(r["path"], r["workers"], r.get("per_gpu", 1)): r["gradings_per_minute"] for r in runs}
    for (path, n, k), per_minute in rate.items():
        if path != "cluster":
            continue
        if seq:  # each cluster against the sequential path
            summary[f"cluster_{n}x{k}_over_sequential"] = per_minute / seq
        # several cards against one shared alike; one card shared against one card not shared
        base = (1, k) if n > 1 else (1, 1)
        if (n, k) != base and ("cluster", *base) in rate:
            summary[f"cluster_{n}x{k}_over_{base[0]}x{base[1]}"] = per_minute / rate[("cluster", *base)]
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--class-size", type=int, default=40, help="submissions in the class (default 40)")
    parser.add_argument("--gpus", type=int, default=None, help="largest cluster measured, 1, 2 or 4 GPUs (default: "
                        "every visible GPU, at most 4; on the emulator: 2 emulator workers)")
    parser.add_argument("--per-gpu", default=None, metavar="N[,N...]",
                        help="gradings sharing each card at once (default: autograder.cluster.gradings_per_gpu); "
                        "with several values the one-GPU cluster is measured at each, larger ones at the last")
    parser.add_argument("--timeout", default="120", help="time limit per exercise, seconds (default 120)")
    parser.add_argument("--out", help="results file (default benchmarks/results/cluster_grading.json on a GPU)")
    parser.add_argument("--no-sequential", action="store_true",
                        help="measure the cluster only (the sequential path takes as long as the one-GPU cluster)")
    parser.add_argument("--sequential-only", action="store_true",
                        help="measure the sequential path only (then --with the results file adds the cluster's)")
    parser.add_argument("--with", dest="earlier", metavar="FILE",
                        help="a results file of this benchmark from an earlier command on the same GPU model and "
                             "class size: its runs join this command's (a class of 40 graded both ways takes longer "
                             "than one command may run on a GPU runner)")
    args = parser.parse_args()
    if args.class_size < 1:
        raise SystemExit(f"--class-size {args.class_size}: the class needs at least one submission")
    if args.no_sequential and args.sequential_only:
        raise SystemExit("--no-sequential and --sequential-only: nothing left to measure")

    gpus = grading_cluster.visible_gpus()
    on_gpu = bool(gpus)
    workers = gpus if on_gpu else ["0", "1"]  # emulator workers stand in for GPUs in a smoke run
    limit = args.gpus if args.gpus is not None else 4
    if limit < 1:
        raise SystemExit(f"--gpus {args.gpus}: measure at least one worker")
    sizes = [] if args.sequential_only else [n for n in (1, 2, 4) if n <= min(limit, len(workers))]
    try:
        sharing = ([int(v) for v in args.per_gpu.split(",")] if args.per_gpu
                   else [grading_cluster.gradings_per_gpu(max(sizes or [1]))])
    except ValueError:
        raise SystemExit(f"--per-gpu {args.per_gpu}: give whole numbers separated by commas, e.g. 1,8") from None
    if any(k < 1 for k in sharing):
        raise SystemExit(f"--per-gpu {args.per_gpu}: each card needs at least one grading at a time")
    if not on_gpu:
        sharing = [1]  # emulator workers share no card
    device = _gpu_device(gpus) if on_gpu else {"name": "CPU emulator workers", "gpus": []}
    earlier = _earlier_runs(Path(args.earlier), device, args.class_size) if args.earlier else []
    root = Path(tempfile.mkdtemp(prefix="dlk-cluster-bench-"))
    try:
        runs = []
        if not args.no_sequential:
            runs.append(measure_sequential(root, args.class_size, args.timeout))
            print(f"sequential: {runs[-1]['seconds']:.1f} s, {runs[-1]['gradings_per_minute']:.1f} gradings/min",
                  flush=True)
            print(phase_table(runs[-1]), flush=True)
        plan = [(1, k) for k in sharing[:-1] if 1 in sizes] + [(n, sharing[-1]) for n in sizes]
        for n, k in plan:
            runs.append(measure_cluster(root, args.class_size, gpus, n, args.timeout,
                                        warm=(n == 1 and k == sharing[0]), per_gpu=k))
            r = runs[-1]
            print(f"cluster of {n} ({k} per card): {r['seconds']:.1f} s, {r['gradings_per_minute']:.1f} gradings/min "
                  f"(cluster start {r['cluster_start_seconds']:.1f} s)", flush=True)
            print(phase_table(r), flush=True)
            if "warm_correct" in r:
                w = r["warm_correct"]
                print(f"  one correct submission on the warm worker: {w['worker_seconds']:.1f} s on the worker, "
                      f"{w['command_seconds']:.1f} s the whole command", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    now = now_utc()
    runs = sorted(earlier + [{**r, "date": now} for r in runs],
                  key=lambda r: (r["path"] != "sequential", r["workers"], r.get("per_gpu", 1)))
    measured = [(r["path"], r["workers"], r.get("per_gpu", 1)) for r in runs]
    if len(set(measured)) < len(measured):
        raise SystemExit(f"--with {args.earlier}: it measured a path this command measured again ({measured})")
    base = runs[0]["scores"]  # the sequential path's, else the one-GPU cluster's
    for r in runs[1:]:
        r["same_scores_as_sequential" if runs[0]["path"] == "sequential" else "same_scores_as_one_worker"] = \
            r["scores"] == base
    summary = summary_of(runs)
    print(json.dumps(summary))
    if not (on_gpu or args.out):
        print("(emulator workers: figures printed, not written; a GPU run writes benchmarks/results/cluster_grading.json)")
        return
    payload = {"class_size": args.class_size, "samples": SAMPLES, "timeout_s": float(args.timeout),
               "runs": runs, "summary": summary}
    if args.out:
        data = {"benchmark": "cluster_grading", "date": now, "device": device, "software": software_versions(),
                **payload}
        Path(args.out).write_text(json.dumps(data, indent=2) + "\n")
        print(f"wrote {args.out}")
    else:
        print(f"wrote {write_results('cluster_grading', payload)}")


if __name__ == "__main__":
    main()
