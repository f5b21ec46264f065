"""Version 15's configurations on products too small to fill the GPU, against cuBLAS: what planned_config should run.

    PYTHONPATH=$PWD DLK_BACKEND=gpu python3 -m benchmarks.sgemm_bf16_small   # -> benchmarks/results/sgemm_bf16_small.json

At 1024^3, 2048^3 and 4096^3 every candidate configuration of version 15 (kernels/gemm/sgemm_bf16.cu's defines:
narrower tiles, T_BN = 64; a split of each tile's k-tiles between the two blocks of a cluster, S_SPLIT_K = 2;
DEFAULTS) is checked against the float64 product of the same BF16 inputs and timed beside cuBLAS BF16
(``torch.matmul(A, B.t())``) in the same run; at attention's Q K^T shapes (16 products of 4096 x 4096, head sizes
64 and 128) the configuration planned_config picks is timed, as a check that nothing was lost there.  Version 16
(version 15's code with a bias and GELU) is checked against its float64 reference at each square with the
configuration planned_config picks.

The table gives, per shape, each configuration's median time, TFLOP/s, % of cuBLAS (cuBLAS's time / ours), its
largest error over sum |a||b| (BF16 C: at most 2^-8), and marks the configuration planned_config runs now and the
fastest correct one.  Its last lines print the ``SIZE_PLANS`` this run supports, in the form that
kernels/gemm/sgemm_bf16.py declares them: paste them there to make planned_config choose by this measurement.
About two minutes on an H100, most of it compiling one module per configuration.
"""

from __future__ import annotations

import argparse
import math

from benchmarks import sgemm_bf16 as ladder
from benchmarks.common import Contract, require_gpu_backend, timed_row, untimed_row, write_results
from kernels.gemm import sgemm_bf16
from kernels.runtime import borrow
from kernels.runtime.loader import multiprocessors
from kernels.runtime.timing import time_kernel, time_torch

NAME = "sgemm_bf16_small"
KERNEL = "sgemm_bf16_warp_specialized"
BF16_BOUND = 2.0 ** -8
SPLIT = {"T_BN": 128, "S_STAGES": 5, "S_SPLIT_K": 2}
#: Version 15's candidates over DEFAULTS ({}: DEFAULTS themselves) at each square.
CANDIDATES = {
    1024: ({}, {"T_BN": 128, "S_STAGES": 6}, {"T_BN": 128, "S_STAGES": 6, "S_CLUSTER": 1},
           {"T_BN": 64, "S_STAGES": 8}, {"T_BN": 64, "S_STAGES": 8, "S_CLUSTER": 1},
           {**SPLIT, "S_CLUSTER": 1}, {**SPLIT, "S_CLUSTER": 2}, {**SPLIT, "S_CLUSTER": 1, "S_TMA_STORE": 0}),
    2048: ({}, {"T_BN": 128, "S_STAGES": 6}, {"T_BN": 128, "S_STAGES": 6, "S_CLUSTER": 1},
           {"T_BN": 64, "S_STAGES": 8}, {"S_TMA_STORE": 0, "S_STAGES": 4}, {"S_BLOCKS": 128}),
    4096: ({}, {"T_BN": 128, "S_STAGES": 6}),
}
#: (group, batch, M, N, K) timed with planned_config's configuration only.
CHECKED_SHAPES = tuple(shape for shape in ladder.SHAPES if shape[0] in (ladder.QK_64, ladder.QK_128))
#: A configuration must beat DEFAULTS by this share to be planned.
MARGIN = 0.01
#: The book shows every row of the sweep, per shape, and marks the one planned_config picks today.
CONTRACT = Contract(NAME, groups=(*(ladder.square(n) for n in CANDIDATES), *(group for group, *_ in CHECKED_SHAPES)))


def label(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items()) or "DEFAULTS"


def over_defaults(config: dict) -> dict:
    """The entries of a full configuration that differ from DEFAULTS."""
    defaults = sgemm_bf16.DEFAULTS[KERNEL]
    return {k: v for k, v in config.items() if defaults.get(k) != v}


def measure_shape(torch, group: str, batch: int, M: int, N: int, K: int, candidates) -> list[dict]:
    """cuBLAS, every candidate and planned_config's configuration at one shape, each row with its time and error."""
    lead = (batch,) if batch > 1 else ()
    A = torch.randn(*lead, M, K, device="cuda").to(torch.bfloat16)
    Bt = torch.randn(*lead, N, K, device="cuda").to(torch.bfloat16)
    C = torch.empty(*lead, M, N, device="cuda", dtype=torch.bfloat16)
    ref = A.double() @ Bt.double().transpose(-1, -2)
    scale = A.double().abs() @ Bt.double().abs().transpose(-1, -2)
    sizes = {"batch": batch, "M": M, "N": N, "K": K}
    flops, nbytes = sgemm_bf16.flops(M, N, K, batch), sgemm_bf16.min_bytes(M, N, K, batch)
    repeat = 10 if flops > 5e11 else 30

    def max_error(out) -> float | None:   # None: some elements were never written (still NaN)
        return None if torch.isnan(out).any() else float(((out.double() - ref).abs() / scale).max())

    cublas = time_torch(lambda: torch.matmul(A, Bt.transpose(-1, -2), out=C), repeat=repeat)
    rows = [timed_row("cuBLAS BF16 (torch.matmul)", group, "peer", cublas.median_ms, nbytes, flops, None,
                      min_ms=cublas.min_ms, max_error=max_error(C), **sizes)]
    planned = sgemm_bf16.planned_config(KERNEL, sizes)
    Ad, Bd, Cd = (borrow(x.data_ptr(), tuple(x.shape), sgemm_bf16.bfloat16) for x in (A, Bt, C))
    configs = [{**sgemm_bf16.DEFAULTS[KERNEL], **candidate} for candidate in candidates]
    for config in configs + ([planned] if planned not in configs else []):
        name = label(over_defaults(config))
        extra = {"config": config, "planned": config == planned, **sizes}
        try:
            C.fill_(float("nan"))
            sgemm_bf16.sgemm_bf16_warp_specialized(Ad, Bd, out=Cd, config=config)
            err = max_error(C)
            t = time_kernel(sgemm_bf16.sgemm_bf16_warp_specialized(Ad, Bd, out=Cd, config=config, prepare_only=True),
                            repeat=repeat)
        except Exception as exc:  # noqa: BLE001 - recorded as a row that says why
            rows.append(untimed_row(name, group, "kernel", error=f"{type(exc).__name__}: {str(exc)[:300]}", **extra))
            continue
        rows.append(timed_row(name, group, "kernel", t.median_ms, nbytes, flops, None, min_ms=t.min_ms,
                              percent_of_cublas=100 * cublas.median_ms / t.median_ms, max_error=err,
                              correct=err is not None and err <= BF16_BOUND, **extra))
    del A, Bt, C, ref, scale
    torch.cuda.empty_cache()
    return rows


def check_fused(torch, n: int) -> dict:
    """Version 16 at n^3 with the planned configuration (bias, GELU) against its float64 reference."""
    A = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    Bt = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    C = torch.empty(n, n, device="cuda", dtype=torch.bfloat16).fill_(float("nan"))
    ref, scale = ladder.gelu_reference(torch, A, Bt, bias)
    Ad, Bd, Cd, bd = (borrow(t.data_ptr(), tuple(t.shape), sgemm_bf16.bfloat16) for t in (A, Bt, C, bias))
    config = sgemm_bf16.planned_config("sgemm_bf16_fused", {"M": n, "N": n, "K": n})
    sgemm_bf16.sgemm_bf16_fused(Ad, Bd, bd, out=Cd, activation="gelu")
    err = None if torch.isnan(C).any() else float(((C.double() - ref).abs() / scale).max())
    return {"name": f"version 16 (bias, GELU) {label(over_defaults(config))}", "group": ladder.square(n),
            "max_error": err, "correct": err is not None and err <= 2 * BF16_BOUND, "config": config}


def print_group(rows: list[dict], sms: int) -> None:
    peer = rows[0]
    shape = {k: peer[k] for k in ("batch", "M", "N", "K")}
    per_sm = sgemm_bf16.tiles_per_multiprocessor(KERNEL, shape, sms)
    print(f"\n{peer['group']}  (batch {shape['batch']}, M {shape['M']}, N {shape['N']}, K {shape['K']}; DEFAULTS' "
          f"128 x 256 tiles: {per_sm:.2f} a multiprocessor of {sms})")
    print(f"  {'configuration over DEFAULTS':<58} {'µs':>8} {'TFLOP/s':>8} {'% cuBLAS':>9} {'max err':>9}")
    print(f"  {peer['name']:<58} {1e3 * peer['median_ms']:8.1f} {peer['gflops'] / 1e3:8.1f} {'':>9} "
          f"{error_text(peer['max_error'])}")
    best = best_row(rows)
    for r in rows[1:]:
        marks = ("  <- planned now" if r.get("planned") else "") + ("  * fastest correct" if r is best else "")
        if "median_ms" not in r:
            print(f"  {r['name']:<58} failed: {r['error']}")
            continue
        wrong = "" if r["correct"] else "  WRONG (error over 2^-8, or elements never written)"
        print(f"  {r['name']:<58} {1e3 * r['median_ms']:8.1f} {r['gflops'] / 1e3:8.1f} {r['percent_of_cublas']:8.1f}% "
              f"{error_text(r['max_error'])}{wrong}{marks}")


def error_text(err: float | None) -> str:
    return f"{err:9.1e}" if err is not None else f"{'unwritten':>9}"


def best_row(rows: list[dict]) -> dict | None:
    timed = [r for r in rows if r["kind"] == "kernel" and r.get("correct")]
    return min(timed, key=lambda r: r["median_ms"], default=None)


def suggested_plans(by_square: dict[int, list[dict]], sms: int) -> list[sgemm_bf16.SizePlan]:
    """The SIZE_PLANS this run supports: at each square where a configuration beats DEFAULTS by MARGIN, a plan up to
    the geometric mean of its tiles a multiprocessor and the next square's; a split of K (S_SPLIT_K) only for K of
    at least 512, with the fastest unsplit configuration for shorter K."""
    squares = sorted(by_square)
    per_sm = {n: sgemm_bf16.tiles_per_multiprocessor(KERNEL, {"M": n, "N": n, "K": n}, sms) for n in squares}
    plans = []
    for i, n in enumerate(squares):
        rows = by_square[n]
        defaults = next((r for r in rows if r.get("config") == sgemm_bf16.DEFAULTS[KERNEL] and "median_ms" in r), None)
        best = best_row(rows)
        if best is None or defaults is None or best["median_ms"] > (1 - MARGIN) * defaults["median_ms"]:
            continue
        bound = round(math.sqrt(per_sm[n] * per_sm[squares[i + 1]]) if i + 1 < len(squares) else 2 * per_sm[n], 2)
        config = over_defaults(best["config"])
        if int(config.get("S_SPLIT_K", 1)) > 1:
            plans.append(sgemm_bf16.SizePlan(bound, 512, config))
            unsplit = best_row([r for r in rows if int(r.get("config", {}).get("S_SPLIT_K", 1)) == 1])
            if unsplit is not None and unsplit["median_ms"] <= (1 - MARGIN) * defaults["median_ms"]:
                plans.append(sgemm_bf16.SizePlan(bound, 0, over_defaults(unsplit["config"])))
        else:
            plans.append(sgemm_bf16.SizePlan(bound, 0, config))
    return plans


def measure(squares=tuple(CANDIDATES), checked=CHECKED_SHAPES) -> dict:
    require_gpu_backend()
    import torch

    if not sgemm_bf16.is_hopper():
        raise SystemExit("version 15 runs on a Hopper GPU only (sm_90)")
    torch.manual_seed(15)
    sms = multiprocessors()
    rows, by_square, checks = [], {}, []
    for n in squares:
        group_rows = measure_shape(torch, ladder.square(n), 1, n, n, n, CANDIDATES[n])
        by_square[n] = group_rows
        rows += group_rows
        print_group(group_rows, sms)
        checks.append(check_fused(torch, n))
        print(f"  {checks[-1]['name']:<58} max err {error_text(checks[-1]['max_error'])} "
              f"{'ok' if checks[-1]['correct'] else 'WRONG (error over 2^-7, or elements never written)'}")
    for group, batch, M, N, K in checked:
        group_rows = measure_shape(torch, group, batch, M, N, K, ())
        rows += group_rows
        print_group(group_rows, sms)
    plans = suggested_plans(by_square, sms)
    print("\nplanned_config now, and the fastest correct configuration, by shape:")
    for group in dict.fromkeys(r["group"] for r in rows):
        group_rows = [r for r in rows if r["group"] == group]
        planned = next((r for r in group_rows if r.get("planned") and "median_ms" in r), None)
        best = best_row(group_rows)
        now = f"{planned['percent_of_cublas']:.1f}% of cuBLAS" if planned else "not timed"
        print(f"  {group:<28} planned now: {now:<20} fastest: "
              + (f"{best['name']} ({best['percent_of_cublas']:.1f}%)" if best else "none correct"))
    print("\nThe SIZE_PLANS this run supports (kernels/gemm/sgemm_bf16.py; replace the table there with it, then run "
          "tests/test_sgemm_bf16.py -k planned):\n\nSIZE_PLANS = (")
    for plan in plans:
        print(f"    SizePlan({plan.tiles_per_multiprocessor}, {plan.least_k}, {plan.config!r}),")
    print(")" + ("   # DEFAULTS everywhere: no configuration beat them by 1%" if not plans else ""))
    return {"layout": "C = A B^T, A (M x K) and B (N x K) row-major BF16, C BF16, float sums; version 15's "
                      "configurations over DEFAULTS",
            "defaults": sgemm_bf16.DEFAULTS[KERNEL], "multiprocessors": sms, "results": rows, "fused_checks": checks,
            "suggested_plans": [plan._asdict() for plan in plans]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--squares", type=int, nargs="*", default=tuple(CANDIDATES), choices=tuple(CANDIDATES))
    parser.add_argument("--no-attention", action="store_true", help="leave out the attention shapes")
    args = parser.parse_args(argv)
    path = write_results(NAME, measure(tuple(args.squares), () if args.no_attention else CHECKED_SHAPES))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
