"""How benchmarks/emulator_profile.py judges the emulator's counts against Nsight Compute's, on made-up counts
(the GPU run's results file is held to it in tests/test_benchmark_results.py)."""

from __future__ import annotations

from benchmarks.emulator_profile import METRICS, OPTIONAL_METRICS, agreement, ladder

COALESCED = {"global_load_requests": 1000.0, "global_load_sectors": 4000.0, "global_store_requests": 100.0,
             "global_store_sectors": 400.0, "shared_load_requests": 500.0, "shared_store_requests": 100.0,
             "shared_load_bank_conflicts": 1000.0, "shared_store_bank_conflicts": 0.0}


def ncu_like(**changes) -> dict:
    return {**COALESCED, **changes}


def test_counts_within_ten_percent_agree_and_further_apart_do_not():
    assert agreement(COALESCED, ncu_like(global_load_sectors=4300.0, shared_load_bank_conflicts=1090.0)) == {
        "sectors_per_load_request": True, "sectors_per_store_request": True, "bank_conflicts": True}
    verdict = agreement(COALESCED, ncu_like(global_load_sectors=32000.0, shared_load_bank_conflicts=4000.0))
    assert verdict == {"sectors_per_load_request": False, "sectors_per_store_request": True, "bank_conflicts": False}


def test_ncu_s_l1_counter_stands_in_where_its_per_instruction_count_is_missing():
    theirs = ncu_like(shared_load_bank_conflicts_l1=1050.0, shared_store_bank_conflicts_l1=2.0)
    del theirs["shared_load_bank_conflicts"], theirs["shared_store_bank_conflicts"]
    assert agreement(COALESCED, theirs)["bank_conflicts"]
    theirs["shared_load_bank_conflicts_l1"] = 3000.0
    assert not agreement(COALESCED, theirs)["bank_conflicts"]


def test_a_few_conflicts_against_none_count_as_none_but_not_many():
    ours = {**COALESCED, "shared_load_bank_conflicts": 0.0}
    assert agreement(ours, ncu_like(shared_load_bank_conflicts=5.0))["bank_conflicts"]  # 5 of 600 instructions
    assert not agreement(ours, ncu_like(shared_load_bank_conflicts=60.0))["bank_conflicts"]


def test_stores_on_one_side_only_disagree_and_on_neither_are_left_out():
    ours = {**COALESCED, "global_store_requests": 0.0, "global_store_sectors": 0.0}
    assert agreement(ours, COALESCED)["sectors_per_store_request"] is False
    assert "sectors_per_store_request" not in agreement(ours, ours)


def test_the_ladders_are_every_numbered_version_of_sgemm_and_of_the_reduction():
    found = {(v.group, v.number) for v in ladder()}
    assert found == {("sgemm", n) for n in range(1, 10)} | {("reduction", n) for n in range(1, 5)}
    assert not set(METRICS.values()) & set(OPTIONAL_METRICS.values())
