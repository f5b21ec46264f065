"""Reading Nsight Compute's CSV into the profiler figures the convolution-as-GEMM chapter shows.

``benchmarks/profiles.py`` runs under ``ncu`` on a GPU machine; here its reading of ncu's output
is checked on text laid out as ncu prints it: its own ``==PROF==`` lines first, then either the
raw page (a column per metric, a row of units) or the details page (a row per metric).
"""

from __future__ import annotations

import pytest

from benchmarks.profiles import (METRICS, ProfileError, Target, library_kernel, ncu_command, parse_ncu_csv, profile_row,
                                 targets)
from book.profile_figures import table_html
from book.prose import SGEMM_PROFILE_PAIRS, profiled_side_by_side
from kernels.runtime.versions import versions

KERNEL_DECL = "sgemm_coalesced(int, int, int, const float *, const float *, float *)"
FIGURES = {"gpu__time_duration.sum": ("nsecond", "1,234,567"), "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("%", "12.5"),
           "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": ("sector", "4,194,304"),
           "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": ("request", "1,048,576"),
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": ("", "0"),
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": ("", "3"),
           "sm__warps_active.avg.pct_of_peak_sustained_active": ("%", "n/a")}
PROF_LINES = ['==PROF== Connected to process 4242 (/usr/bin/python3.11)',
              '==PROF== Profiling "sgemm_coalesced" - 0: 0%....50%....100% - 9 passes',
              '==PROF== Disconnected from process 4242']


def _quoted(cells) -> str:
    return ",".join(f'"{c}"' for c in cells)


def raw_page(kernel_decl: str = KERNEL_DECL) -> str:
    fixed = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Block Size", "Grid Size"]
    names = list(FIGURES)
    header = _quoted(fixed + names)
    units = _quoted([""] * len(fixed) + [FIGURES[n][0] for n in names])
    values = _quoted(["0", "4242", "python3.11", "127.0.0.1", kernel_decl, "(32, 32, 1)", "(64, 64, 1)"]
                     + [FIGURES[n][1] for n in names])
    return "\n".join(PROF_LINES + [header, units, values]) + "\n"


def details_page() -> str:
    header = _quoted(["ID", "Process ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value"])
    rows = [_quoted(["0", "4242", KERNEL_DECL, "Command line profiler metrics", name, unit, value])
            for name, (unit, value) in FIGURES.items()]
    return "\n".join(PROF_LINES + [header] + rows) + "\n"


@pytest.mark.parametrize("page", [raw_page, details_page], ids=["raw page", "details page"])
def test_both_pages_give_the_same_figures(page):
    figures = parse_ncu_csv(page(), "sgemm_coalesced")
    assert figures["gpu__time_duration.sum"] == pytest.approx(1234.567)  # ns -> µs
    assert figures["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 4194304  # thousands separators read
    assert figures["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == 12.5
    assert "sm__warps_active.avg.pct_of_peak_sustained_active" not in figures  # n/a: not a figure


def test_the_row_holds_the_ratios_the_chapter_reads():
    target = Target("sgemm_coalesced", "sgemm", "coalesced")
    row = profile_row(target, parse_ncu_csv(raw_page(), "sgemm_coalesced"))
    assert row["sectors_per_load_request"] == 4.0
    assert row["shared_bank_conflicts"] == 3
    assert row["duration_us"] == pytest.approx(1234.567)
    assert "sectors_per_store_request" not in row and "achieved_occupancy_percent" not in row


def test_another_kernel_s_row_is_not_taken():
    with pytest.raises(ProfileError, match="no figures for sgemm_naive"):
        parse_ncu_csv(raw_page(), "sgemm_naive")


def test_ncu_s_own_error_is_kept():
    output = "==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n"
    with pytest.raises(ProfileError, match="ERR_NVGPUCTRPERM"):
        parse_ncu_csv(output, "sgemm_naive")


def test_a_time_in_an_unknown_unit_is_refused():
    text = raw_page().replace('"nsecond"', '"cycle"')
    with pytest.raises(ProfileError, match="unknown time unit 'cycle'"):
        parse_ncu_csv(text, "sgemm_coalesced")


def test_every_ladder_step_and_the_c3_versions_are_profiled_by_name():
    from kernels.gemm import sgemm

    chosen = targets()
    assert [t.step for t in chosen if t.group == "sgemm"] == list(versions(sgemm.KERNELS))
    command = ncu_command(chosen[0])
    assert command[command.index("--kernel-name") + 1] == "regex:^sgemm_naive$"
    assert command[command.index("--metrics") + 1].split(",") == list(METRICS.values())
    assert command[-2:] == ["--run-once", "sgemm/sgemm_naive"]


def test_the_limits_group_profiles_our_fastest_sgemms_beside_the_cublas_kernels_they_are_measured_against():
    """Version 7 is in the ladder (2048³) and in the limits (4096³): each process is told which, and a
    cuBLAS kernel, whose name ncu is not told, is the second launch of a kernel named *gemm* (or *nvjet*, cuBLAS's
    BF16 kernels on Hopper)."""
    limits = [t for t in targets() if t.group == "limits"]
    assert [t.step for t in limits] == ["version 7: FP32 warptile", "cuBLAS FP32 (TF32 off)", "version 10: 3xTF32, wgmma",
                                        "version 11: 3xTF32, wgmma fed by TMA", "cuBLAS TF32"]
    ours = ncu_command(limits[0])
    assert ours[-1] == "limits/sgemm_warptile" and ours[ours.index("--kernel-name") + 1] == "regex:^sgemm_warptile$"
    library = ncu_command(limits[1])
    assert library[library.index("--kernel-name") + 1] == "regex:gemm|nvjet"
    assert library[library.index("--launch-skip") + 1] == "1"
    assert len({tuple(ncu_command(t)[-1:]) for t in targets()}) == len(targets())
    bf16 = [t.step for t in targets() if t.group == "bf16"]
    assert bf16[0].startswith("version 12") and bf16[-2].startswith("version 16") and bf16[-1] == "cuBLAS BF16"


def test_a_library_kernel_is_read_whatever_its_name():
    cublas = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_execute_kernel__5x_cublas"
    page = raw_page(f"void {cublas}<(int)0>(Params)")
    figures = parse_ncu_csv(page, None)
    assert figures["gpu__time_duration.sum"] == pytest.approx(1234.567)
    assert library_kernel(page) == cublas
    with pytest.raises(ProfileError, match="no figures for sgemm_coalesced"):
        parse_ncu_csv(page, "sgemm_coalesced")


def test_the_chapter_table_shows_what_was_recorded_and_why_a_kernel_was_not():
    rows = [{"step": "naive", "duration_us": 1500.0, "sectors_per_load_request": 16.5},
            {"step": "coalesced", "error": "ncu gave no figures for sgemm_coalesced: ==ERROR== <permission>"}]
    page = table_html(rows)
    assert "<td>naive</td><td>1,500.0</td>" in page and "<td>16.5</td>" in page
    assert "not profiled: ncu gave no figures for sgemm_coalesced: ==ERROR== &lt;permission&gt;" in page
    assert page.count("<tr>") == 3  # the heading and two kernels


def test_the_recorded_sentence_states_only_figures_both_sides_of_which_were_recorded():
    rows = [{"step": "naive", "sectors_per_load_request": 16.0, "sm_percent": 7.2},
            {"step": "coalesced", "sectors_per_load_request": 4.0}, {"step": "warptile", "sm_percent": 81.0}]
    assert profiled_side_by_side(rows, SGEMM_PROFILE_PAIRS) == ("sectors per global load: 16.0 for the naive kernel, 4.0 for the "
                                                 "coalesced one; SM throughput: 7 % of peak for the naive kernel, "
                                                 "81 % of peak for warp tiling")
    assert profiled_side_by_side([{"step": "naive", "sm_percent": 7.2}], SGEMM_PROFILE_PAIRS) is None


def _recorded_step(group: str, step: str) -> dict:
    from book import profile_figures

    rows = {r["step"]: r for r in profile_figures.recorded().rows(group) if "error" not in r}
    if step not in rows:
        pytest.skip(f"{group} {step} is not profiled in benchmarks/results/profiles.json")
    return rows[step]


def test_what_the_gemm_chapter_says_of_bank_conflicts_follows_the_recorded_counters():
    """conv_as_gemm.md: step 6's float4 loads of the transposed tile conflict as often as step 5's loads;
    step 7's loads do not conflict at all."""
    step5, step6, step7 = (_recorded_step("sgemm", s)["shared_load_bank_conflicts"]
                           for s in ("blocktile_2d", "vectorized", "warptile"))
    assert 0.8 * step5 <= step6 <= 1.25 * step5 and step5 > 1e6
    assert step7 == 0


def test_what_the_cnn_chapter_says_of_the_c3_tiles_follows_the_recorded_counters():
    """cnn.md: on C3 the tiles save global loads, yet the tiled kernel is no faster than the basic one, whose
    loads the caches served (DRAM busy under 1 % of the time); the tiled kernel's shared reads conflict."""
    naive, tiled = _recorded_step("conv2d_c3", "naive"), _recorded_step("conv2d_c3", "tiled")
    assert tiled["global_load_requests"] * 10 < naive["global_load_requests"]
    assert naive["dram_percent"] < 1 and tiled["shared_bank_conflicts"] > 0
    assert tiled["duration_us"] >= naive["duration_us"]


def test_what_the_gemm_chapter_says_of_the_limits_at_4096_follows_the_recorded_counters():
    """conv_as_gemm.md: version 10 keeps the tensor cores busy about half of the time and its warps wait at
    the barrier about a quarter of it; version 11 keeps them much busier and waits at barriers less;
    cuBLAS TF32 keeps them busy a little more than version 11; cuBLAS FP32 keeps the FMA pipe busier than
    version 7 and uses more of its issue slots."""
    v7, fp32 = _recorded_step("limits", "version 7: FP32 warptile"), _recorded_step("limits", "cuBLAS FP32 (TF32 off)")
    v10 = _recorded_step("limits", "version 10: 3xTF32, wgmma")
    v11 = _recorded_step("limits", "version 11: 3xTF32, wgmma fed by TMA")
    tf32 = _recorded_step("limits", "cuBLAS TF32")
    assert 35 <= v10["tensor_pipe_percent"] <= 65 and 15 <= v10["barrier_stall_percent"] <= 35
    assert v11["tensor_pipe_percent"] >= v10["tensor_pipe_percent"] + 20
    assert v11["barrier_stall_percent"] < v10["barrier_stall_percent"] / 2
    assert v11["tensor_pipe_percent"] <= tf32["tensor_pipe_percent"] <= v11["tensor_pipe_percent"] + 15
    assert fp32["fma_pipe_percent"] > v7["fma_pipe_percent"] and fp32["issue_slots_percent"] > v7["issue_slots_percent"]
