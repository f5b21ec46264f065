"""What the grader reads of a grading child's process tree, and how it ends it (autograder.process_tree).

Run on a small tree of this test's own: a shell that starts two sleeping processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from autograder import process_tree as tree

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

GONE = 2**22 + 12345  # above the default pid_max: no process has it


@pytest.fixture
def shell_with_two_sleepers():
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(tree.descendants(proc.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    yield proc
    ended = tree.kill_group(proc)
    proc.wait()  # reaped: a zombie still has its /proc entry
    tree.wait_gone(ended)


def test_the_tree_holds_the_process_and_every_process_below_it(shell_with_two_sleepers):
    pids = tree.descendants(shell_with_two_sleepers.pid)
    assert pids[0] == shell_with_two_sleepers.pid and len(pids) == 3
    assert tree.task_count(pids) == 3  # one thread each
    assert tree.rss_bytes(pids) >= tree.rss_bytes(pids[:1]) > 0
    # Outside a sandbox and holding no memfd, the tree's memory is its resident pages and the pipes it holds
    # (each read is a new look at processes that are still starting, so the parts are compared, not two totals).
    assert tree.held_buffer_bytes(pids) % tree.PIPE_BYTES == 0 and tree.sandbox_tmpfs_bytes(pids) == 0


def test_a_memfd_held_open_counts_though_no_process_maps_it():
    before = tree.held_buffer_bytes([os.getpid()])
    fd = os.memfd_create("held")
    try:
        os.write(fd, os.urandom(256 * 1024))
        assert tree.held_buffer_bytes([os.getpid()]) >= before + 256 * 1024
    finally:
        os.close(fd)


def test_a_pipe_held_open_counts_at_what_it_may_hold():
    """A pipe's contents are the kernel's (in no RSS): each pipe counts once, at its capacity, full or not."""
    before = tree.held_buffer_bytes([os.getpid()])
    read_end, write_end = os.pipe()
    try:
        assert tree.held_buffer_bytes([os.getpid()]) == before + tree.PIPE_BYTES  # both ends: one pipe
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_process_that_ended_adds_nothing():
    assert tree.descendants(GONE) == [GONE]
    assert tree.rss_bytes([GONE]) == 0 and tree.task_count([GONE]) == 0 and tree.tree_memory_bytes([GONE]) == 0


def test_ending_the_tree_leaves_none_of_it(shell_with_two_sleepers):
    pids = tree.kill_group(shell_with_two_sleepers)
    assert len(pids) == 3
    shell_with_two_sleepers.wait()
    tree.wait_gone(pids)
    assert not [p for p in pids if os.path.exists(f"/proc/{p}")]


def test_folder_usage_counts_what_the_files_hold_and_every_entry(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "data").write_bytes(os.urandom(64 * 1024))
    (tmp_path / "b").write_bytes(os.urandom(64 * 1024))
    with open(tmp_path / "sparse", "wb") as f:  # 1 GiB long, holding nothing: counts (almost) nothing
        f.truncate(2**30)
    for i in range(10):
        (tmp_path / f"empty-{i}").touch()  # no block, an inode each
    total, entries = tree.folder_usage([str(tmp_path)], 2**40)
    assert 128 * 1024 <= total < 2**20 and entries == 14  # a, a/data, b, sparse and the ten empty files
    assert tree.folder_usage([str(tmp_path / "a")], 2**40)[0] < total
    assert tree.folder_usage([str(tmp_path / "missing"), ""], 2**40) == (0, 0)
