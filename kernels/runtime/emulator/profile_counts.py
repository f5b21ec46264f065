"""Counting a launch's profile from the profiling build's events (:mod:`.profiling` says what is counted).

Every count is a grouping of events by sorting (NumPy): the lanes of one warp at the same instance of one
instruction between the same two barriers are one warp-level request; its distinct 32-byte sectors, its
distinct words per bank and phase, and the distinct places a branch's lanes went on to are counted per
request, then summed per source line.
"""

from __future__ import annotations

import numpy as np

from .diagnose import SourceInfo, addresses_lines
from .profiling import (BANKS, BRANCH, OPS, SECTOR_BYTES, SHARED, SPACES, STORE, WARP, BranchCounts, LaunchProfile,
                        LaunchShape, LineCounts)


def _group_ids(columns: list[np.ndarray], then: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(order, group id of each sorted row): rows sorted by ``columns`` (the first the primary key; rows of
    one group by ``then``), and numbered so that rows equal in every column share a number."""
    order = np.lexsort(([then] if then is not None else []) + columns[::-1])
    n = len(order)
    if n == 0:
        return order, np.zeros(0, np.int64)
    new = np.zeros(n, bool)
    new[0] = True
    for c in columns:
        s = c[order]
        new[1:] |= s[1:] != s[:-1]
    return order, np.cumsum(new) - 1


def _distinct_per_group(group: np.ndarray, value: np.ndarray, ngroups: int) -> np.ndarray:
    """How many distinct values each group holds."""
    order = np.lexsort((value, group))
    g, v = group[order], value[order]
    first = np.ones(len(g), bool)
    first[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1])
    return np.bincount(g[first], minlength=ngroups)


def _mode(values: np.ndarray) -> int | None:
    if len(values) == 0:
        return None
    uniq, counts = np.unique(values, return_counts=True)
    return int(uniq[np.argmax(counts)])


def _expand(start: np.ndarray, count: np.ndarray, *carried: np.ndarray):
    """Each row i repeated count[i] times, with start[i] + 0, 1, ... (and the carried columns repeated)."""
    total = int(count.sum())
    row = np.repeat(np.arange(len(count)), count)
    offset = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
    return (start[row] + offset, *(c[row] for c in carried))


def merged_as_nvcc_does(ev: np.ndarray) -> np.ndarray:
    """The events with a thread's 4-byte shared-memory accesses merged into the wider ones nvcc makes of them.

    nvcc's assembler (ptxas) turns a thread's loads of neighbouring words of shared memory, in code it
    has unrolled (a tile loop of constant length), into one 64- or 128-bit load (LDS.64, LDS.128), and
    the same for stores; the emulator's compiler does not.  So, as ptxas does: where one instruction of
    a thread touches all four words of an aligned 16-byte chunk between two barriers, the chunk is one
    128-bit access; both words of an aligned 8-byte pair, one 64-bit access; a word read twice, one.
    The merged accesses keep the order of their first word.  (Global memory is left alone: nvcc cannot
    know a pointer argument is aligned, and merges its loads only where the source asks, as a float4.)"""
    candidate = (ev["space"] == SHARED) & (ev["size"] == 4) & (ev["kind"] <= STORE)
    if not candidate.any():
        return ev
    c, rest = ev[candidate], ev[~candidate]
    key_columns = [c[k].astype(np.int64) for k in ("block", "thread", "epoch", "site", "caller", "kind")]
    order, key_sorted = _group_ids(key_columns)
    key = np.empty(len(c), np.int64)
    key[order] = key_sorted
    word = (c["address"] >> np.uint64(2)).astype(np.int64)
    # each (instruction of a thread, word) once, at its first instance
    o = np.lexsort((c["instance"], word, key))
    first = np.ones(len(o), bool)
    first[1:] = (key[o][1:] != key[o][:-1]) | (word[o][1:] != word[o][:-1])
    u = o[first]
    ukey, uword = key[u], word[u]
    full4 = _count_in(ukey, uword >> 2) == 4
    full2 = ~full4 & (_count_in(ukey, uword >> 1) == 2)
    address = np.where(full4, (uword >> 2) << 4, np.where(full2, (uword >> 1) << 3, uword << 2))
    size = np.where(full4, 16, np.where(full2, 8, 4))
    merged = c[u].copy()
    merged["address"], merged["size"] = address.astype(np.uint64), size
    # one access per (instruction of a thread, address), numbered again in the order of their first words
    o = np.lexsort((merged["instance"], address, ukey))
    first = np.ones(len(o), bool)
    first[1:] = (ukey[o][1:] != ukey[o][:-1]) | (address[o][1:] != address[o][:-1])
    merged, mkey = merged[o[first]], ukey[o[first]]
    o = np.lexsort((merged["instance"], mkey))
    merged, mkey = merged[o], mkey[o]
    start = np.ones(len(mkey), bool)
    start[1:] = mkey[1:] != mkey[:-1]
    begins = np.flatnonzero(start)
    merged["instance"] = np.arange(len(mkey)) - np.repeat(begins, np.diff(np.append(begins, len(mkey))))
    return np.concatenate([rest, merged])


def _count_in(key: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """For each row, how many rows share its (key, chunk) (rows are distinct (key, word) pairs)."""
    order, ids = _group_ids([key, chunk])
    counts = np.bincount(ids)
    out = np.empty(len(key), np.int64)
    out[order] = counts[ids]
    return out


def _memory_counts(ev: np.ndarray) -> dict:
    """The warp-level requests among the events (the lanes of one warp at one instance of one instruction
    between the same two barriers), each with its site (``site_of_group``: a number per (space, kind,
    code address, caller)) and its counts: active lanes, sectors, wavefronts, phases, worst bank."""
    thread = ev["thread"].astype(np.int64)
    cols = [ev["space"].astype(np.int64), ev["kind"].astype(np.int64), ev["site"].astype(np.int64),
            ev["caller"].astype(np.int64), ev["block"].astype(np.int64), thread // WARP,
            ev["epoch"].astype(np.int64), ev["instance"].astype(np.int64)]
    order, gid = _group_ids(cols, then=thread)
    ev = ev[order]
    ngroups = int(gid[-1]) + 1 if len(gid) else 0
    first = np.ones(len(gid), bool)
    first[1:] = gid[1:] != gid[:-1]
    # the request's site: the 4 leading columns
    _, site_of_group = _group_ids([c[order][first] for c in cols[:4]])
    heads = ev[first]
    address = ev["address"].astype(np.uint64)
    size = np.maximum(ev["size"].astype(np.int64), 1)
    lanes = np.bincount(gid, minlength=ngroups)
    distinct_addresses = _distinct_per_group(gid, address, ngroups)
    sizes = heads["size"].astype(np.int64)
    result = {"site_of_group": site_of_group, "heads": heads, "lanes": lanes, "sizes": sizes}
    is_shared = heads["space"] == SHARED
    # global: distinct sectors of each request
    sector_first = (address >> np.uint64(5)).astype(np.int64)
    sector_count = ((address + (size - 1).astype(np.uint64)) >> np.uint64(5)).astype(np.int64) - sector_first + 1
    sector, sector_gid = _expand(sector_first, sector_count, gid)
    sectors = _distinct_per_group(sector_gid, sector, ngroups)
    result["sectors"] = np.where(is_shared, 0, sectors)
    result["ideal_sectors"] = np.where(is_shared, 0, np.ceil(distinct_addresses * sizes / SECTOR_BYTES).astype(np.int64))
    # shared: wavefronts per request, phase by phase
    word_first = (address >> np.uint64(2)).astype(np.int64)
    word_count = ((address + (size - 1).astype(np.uint64)) >> np.uint64(2)).astype(np.int64) - word_first + 1
    lanes_per_phase = np.where(size > 8, 8, np.where(size > 4, 16, 32))
    phase = (ev["thread"].astype(np.int64) % WARP) // lanes_per_phase
    word, word_gid, word_phase = _expand(word_first, word_count, gid, phase)
    # distinct words per (request, phase), then per bank the count, then the worst bank
    order_w = np.lexsort((word, word_phase, word_gid))
    wg, wp, ww = word_gid[order_w], word_phase[order_w], word[order_w]
    distinct = np.ones(len(wg), bool)
    distinct[1:] = (wg[1:] != wg[:-1]) | (wp[1:] != wp[:-1]) | (ww[1:] != ww[:-1])
    wg, wp, wb = wg[distinct], wp[distinct], ww[distinct] % BANKS
    o2, bank_key = _group_ids([wg, wp, wb])
    per_bank = np.bincount(bank_key)
    bank_rows_first = np.ones(len(o2), bool)
    bank_rows_first[1:] = bank_key[1:] != bank_key[:-1]
    bg, bp = wg[o2][bank_rows_first], wp[o2][bank_rows_first]
    # the worst bank of each (request, phase)
    o3, phase_key = _group_ids([bg, bp])
    ways_of_phase = np.zeros(int(phase_key[-1]) + 1 if len(phase_key) else 0, np.int64)
    np.maximum.at(ways_of_phase, phase_key, per_bank[o3])
    phase_first = np.ones(len(o3), bool)
    phase_first[1:] = phase_key[1:] != phase_key[:-1]
    phase_gid = bg[o3][phase_first]
    wavefronts = np.bincount(phase_gid, weights=ways_of_phase, minlength=ngroups).astype(np.int64)
    phases = np.bincount(phase_gid, minlength=ngroups)
    max_ways = np.zeros(ngroups, np.int64)
    np.maximum.at(max_ways, phase_gid, ways_of_phase)
    result["wavefronts"] = np.where(is_shared, wavefronts, 0)
    result["phases"] = np.where(is_shared, phases, 0)
    result["max_ways"] = np.where(is_shared, max_ways, 0)
    # the distance between the addresses of the active lanes next to each other in a request, per lane
    thread = ev["thread"].astype(np.int64)
    apart = thread[1:] - thread[:-1]
    step = ev["address"][1:].astype(np.int64) - ev["address"][:-1].astype(np.int64)
    neighbour = (gid[1:] == gid[:-1]) & (apart > 0) & (step % np.maximum(apart, 1) == 0)
    result["stride"] = (gid[1:][neighbour], step[neighbour] // np.maximum(apart[neighbour], 1))
    return result


def _branch_counts(ev: np.ndarray) -> list[tuple[int, int, int, int, np.ndarray]]:
    """Per branch (code address, caller): its warp-level instances, how many of them diverged, and the code
    addresses its lanes went on to."""
    site, caller = ev["site"].astype(np.int64), ev["caller"].astype(np.int64)
    cols = [site, caller, ev["block"].astype(np.int64), ev["thread"].astype(np.int64) // WARP,
            ev["epoch"].astype(np.int64), ev["instance"].astype(np.int64)]
    order, gid = _group_ids(cols)
    site, caller, target = site[order], caller[order], ev["address"][order].astype(np.int64)
    ngroups = int(gid[-1]) + 1 if len(gid) else 0
    split = _distinct_per_group(gid, target, ngroups) > 1
    first = np.ones(len(gid), bool)
    first[1:] = gid[1:] != gid[:-1]
    # sorted by (site, caller) first: a branch's rows are contiguous
    new = np.ones(len(gid), bool)
    new[1:] = (site[1:] != site[:-1]) | (caller[1:] != caller[:-1])
    branch = np.cumsum(new) - 1
    instances = np.bincount(branch[first])
    diverged = np.bincount(branch[first], weights=split).astype(np.int64)
    o = np.lexsort((target, branch))
    distinct = np.ones(len(o), bool)
    distinct[1:] = (branch[o][1:] != branch[o][:-1]) | (target[o][1:] != target[o][:-1])
    went_branch, went = branch[o][distinct], target[o][distinct]
    bounds = np.searchsorted(went_branch, np.arange(len(instances) + 1))
    heads = np.flatnonzero(new)
    return [(int(site[h]), int(caller[h]), int(instances[k]), int(diverged[k]), went[bounds[k]:bounds[k + 1]])
            for k, h in enumerate(heads)]


def analyse(kernel: str, launch: LaunchShape, events: np.ndarray, blocks_profiled: int, truncated: bool,
            executable: str, source: SourceInfo, branches_truncated: bool = False) -> LaunchProfile:
    """The profile of a launch from the profiling build's events (``truncated``: the sample's last block was
    cut short; ``branches_truncated``: branches were counted in the first part of the sample only)."""
    profile = LaunchProfile(kernel, launch, blocks_profiled, truncated)
    notes = []
    if truncated:
        notes.append(f"the profile stopped at {len(events):,} accesses, in its last block (a sample of fewer "
                     f"blocks, or a smaller launch, counts everything)")
    if branches_truncated:
        notes.append("branches were counted in the first part of the sample only")
    profile.note = "; ".join(notes)
    memory = merged_as_nvcc_does(events[events["kind"] != BRANCH])
    branches = events[events["kind"] == BRANCH]
    code_addresses = set(int(x) for x in np.unique(events["site"])) | set(int(x) for x in np.unique(events["caller"]))
    code_addresses |= set(int(x) for x in np.unique(branches["address"]))
    lines = addresses_lines(executable, sorted(a for a in code_addresses if a), source)

    def line_of(site: int, caller: int) -> int | None:
        return lines.get(site) or lines.get(caller)

    def code(line: int | None) -> str:
        return source.lines[line - 1].strip() if line and 1 <= line <= len(source.lines) else ""

    if len(memory):
        c = _memory_counts(memory)
        heads, site_of_group = c["heads"], c["site_of_group"]
        # each site (an instruction, by its code address and caller) belongs to one row: (line, space, op)
        rows: dict[tuple, int] = {}
        sites, first_group = np.unique(site_of_group, return_index=True)
        row_of_site = np.zeros(len(sites), np.int64)
        for s, g in zip(sites, first_group):
            h = heads[g]
            line = line_of(int(h["site"]), int(h["caller"]))
            row_of_site[s] = rows.setdefault((line, SPACES[int(h["space"])], OPS[int(h["kind"])]), len(rows))
        row_of_group = row_of_site[site_of_group]
        nrows = len(rows)
        requests = np.bincount(row_of_group, minlength=nrows)
        sums = {name: np.bincount(row_of_group, weights=c[name], minlength=nrows).astype(np.int64)
                for name in ("lanes", "sectors", "ideal_sectors", "wavefronts", "phases")}
        ways = np.zeros(nrows, np.int64)
        np.maximum.at(ways, row_of_group, c["max_ways"])
        stride_group, stride = c["stride"]
        stride_row = row_of_group[stride_group]
        found = []
        for (line, space, op), i in rows.items():
            row = LineCounts(line, code(line), space, op, requests=int(requests[i]), max_ways=int(ways[i]),
                             bytes_per_lane=_mode(c["sizes"][row_of_group == i]) or 0,
                             stride_bytes=_mode(stride[stride_row == i]))
            for name, values in sums.items():
                setattr(row, name, int(values[i]))
            found.append(row)
        profile.memory = sorted(found, key=lambda r: (r.line or 0, r.space, r.op))
    if len(branches):
        rows_b: dict[int | None, BranchCounts] = {}
        for site, caller, instances, diverged, went in _branch_counts(branches):
            if not diverged:
                continue  # went different ways only in different warps: no divergence
            # shown at the first line of the reader's code its lanes went on to
            reached = [lines.get(t) for t in went if lines.get(t)]
            line = min(reached) if reached else line_of(site, caller)
            row = rows_b.setdefault(line, BranchCounts(line, code(line)))
            row.branches += instances
            row.divergent += diverged
        profile.branches = sorted(rows_b.values(), key=lambda b: b.line or 0)
    return profile
