"""A determined student against the sandbox: code that runs before any check does, graded end to end.

Every attack below is a kernel cell whose C++ has a global object with a
constructor: on the CPU emulator that code runs when the emulator's worker
starts, before the worker's ``main()`` (and so before the emulator's own
system-call filter).  What stops it is the sandbox the grader starts the
grading child in (:mod:`autograder.sandbox`), which is there before the
child's first instruction, and the verdict, which the grader computes itself
from the arrays handed back (:mod:`autograder.verdict`).  On a GPU the same
cells compile to device code only and the constructors never run: there the
attacks must simply change nothing.

Each attack is graded beside its honest twin (the same kernel without the
trick, or, for the forging attacks, a stub that computes nothing): it may not
score more than the twin; no file outside the scratch directory may change;
nothing it outlives the grading; no secret or course path may appear in
anything the student sees.  What an attack saw it writes to the one folder
of the host the test lends it ($DLK_CACHE_DIR): a grading itself has none.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from autograder import grading_cgroup, isolation, process_tree, sandbox
from autograder.isolation import grade_submission
from autograder.submission import submission_from_cell

pytestmark = [
    pytest.mark.backend,
    pytest.mark.skipif(bool(sandbox.unavailable_reason()), reason=f"the sandbox cannot start here: {sandbox.unavailable_reason()}"),
]

SECRET = b"sandbox attack tests: instructor secret 5e1c"
HEAD = "%%cuda saxpy block=256\n"
PREAMBLE = 'extern "C" long syscall(long number, ...);\nextern "C" int getppid(void);\n'
HONEST = (
    "__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i * incy] = alpha * x[i * incx] + y[i * incy];\n"
    "}\n"
)
#: computes nothing: what a forged verdict would have to turn into points
STUB = "__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {\n    if (n < 0) y[0] = alpha * x[0];\n}\n"


def _with_constructor(body: str, kernel: str = HONEST) -> str:
    return HEAD + PREAMBLE + "struct Attack { Attack() {\n" + body + "\n} } attack_at_startup;\n" + kernel


#: Where each student's probe folder lies (set by the ``cache`` fixture).
_PROBES: list[Path] = []


def _grade(cell: str, student: str, **options):
    """Grade ``cell`` as ``student``.  A grading's only writable place is its own tmpfs, gone with it; so that an
    attack can say what it saw, the test lends it one folder of the host as its build cache ($DLK_CACHE_DIR, as
    ``check()`` has one): a window out that a grading itself never has."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(isolation, "_check_cache_dir", lambda mode: str(_student_cache(_PROBES[-1], student)))
        return grade_submission(submission_from_cell(cell), mode="hidden", student_key=SECRET, student_id=student,
                                **options)


def _seen_by_student(result) -> str:
    return result.feedback_text() + "\n" + (result.log or "") + "\n" + json.dumps(result.to_dict())


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course folder as the grader holds it: a gradebook and the course secret, outside the sandbox."""
    root = tmp_path_factory.mktemp("course")
    (root / "gradebook.db").write_text("the real gradebook\n")
    (root / "course_secret").write_text(SECRET.decode() + "\n")
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    _PROBES.append(tmp_path_factory.mktemp("cache"))
    return _PROBES[-1]


@pytest.fixture(autouse=True)
def _grader_environment(monkeypatch, cache):
    monkeypatch.setenv("DLK_CACHE_DIR", str(cache))
    monkeypatch.setenv("DLK_GRADER_SECRET", SECRET.decode())


@pytest.fixture(scope="module")
def honest_twin(cache):
    os.environ["DLK_CACHE_DIR"] = str(cache)
    result = _grade(HEAD + HONEST, "honest-twin")
    assert result.status == "passed", result.feedback_text()
    return result


@pytest.fixture(scope="module")
def stub_twin(cache):
    os.environ["DLK_CACHE_DIR"] = str(cache)
    result = _grade(HEAD + STUB, "stub-twin")
    assert result.status == "failed" and result.correctness_score == 0, result.feedback_text()
    return result


def _student_cache(cache: Path, student: str) -> Path:
    return cache / "students" / student


def _on_emulator(result) -> bool:
    return result.backend == "cpu"


def test_a_daemon_started_before_the_checks_dies_with_the_grading(course, honest_twin, cache):
    """setsid + a background shell that stamps a file in its own cache (allowed) every 0.2 s, forever."""
    result = _grade(_with_constructor(
        'system("setsid sh -c \'while true; do date +%s%N > \\"$DLK_CACHE_DIR/alive.txt\\"; sleep 0.2; done\' '
        '>/dev/null 2>&1 &");'), "daemon")
    stamp = _student_cache(cache, "daemon") / "alive.txt"
    if _on_emulator(result):
        assert stamp.exists(), "the constructor did not run: this test would prove nothing"
    before = stamp.read_text() if stamp.exists() else ""
    time.sleep(2)
    after = stamp.read_text() if stamp.exists() else ""
    assert before == after, "a process the submission started outlived its grading"
    assert result.score <= honest_twin.score


def test_nothing_outside_the_scratch_directory_can_be_written(course, honest_twin):
    from autograder.sandbox import REPO_ROOT

    target = REPO_ROOT / "autograder" / "pwned.txt"
    result = _grade(_with_constructor(
        f'system("echo pwned > {course}/gradebook.db; echo pwned > {target}; echo pwned > /tmp/dlk-pwned; '
        f'echo pwned > $HOME/../dlk-pwned");'), "writer")
    assert (course / "gradebook.db").read_text() == "the real gradebook\n"
    assert not target.exists() and not Path("/tmp/dlk-pwned").exists()
    assert result.score <= honest_twin.score


def test_the_emulator_runtime_the_grader_built_cannot_be_changed(honest_twin, cache):
    """Every grading on the emulator links with the runtime the grader built once (autograder.emulator_builds):
    the attack overwrites, removes and adds files there, for the next student's grading to link with."""
    from autograder import emulator_builds

    folder = emulator_builds.built_folder() if _on_emulator(honest_twin) else None
    if _on_emulator(honest_twin):
        assert folder, "the grader lent no runtime to the honest twin's grading: this test would prove nothing"
        folder = Path(folder)
    built = {p.name: p.read_bytes() for p in folder.iterdir()} if folder else {}
    result = _grade(_with_constructor(
        'system("(ls $DLK_EMULATOR_PREBUILT; for f in $DLK_EMULATOR_PREBUILT/*; do echo pwned > $f; rm -f $f; done; '
        'echo pwned > $DLK_EMULATOR_PREBUILT/runtime-planted.o; echo tried) > $DLK_CACHE_DIR/tamper.txt 2>&1");'),
        "tamperer")
    assert result.score <= honest_twin.score
    if folder:
        probe = (_student_cache(cache, "tamperer") / "tamper.txt").read_text()
        assert "tried" in probe and any(name in probe for name in built), \
            "the constructor did not see the runtime: this test would prove nothing"
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == built
        assert any(name.startswith("runtime-") and name.endswith(".o") for name in built)
    again = _grade(HEAD + HONEST, "after-the-tamperer")
    assert again.status == "passed" and again.score == honest_twin.score, again.feedback_text()


def test_the_grader_s_files_and_processes_are_not_visible(course, honest_twin, cache):
    """Every /proc entry it can see, the course folder, the solutions: printed to its own output."""
    from autograder.sandbox import REPO_ROOT

    result = _grade(_with_constructor(
        f'system("(echo probe ran; cat /proc/*/environ /proc/*/cmdline {course}/course_secret {course}/gradebook.db; '
        f'ls -la /proc/*/cwd /proc/*/root {REPO_ROOT}/solutions {REPO_ROOT}; cat {REPO_ROOT}/solutions/*/*.ipynb | head -c 300) '
        f'> $DLK_CACHE_DIR/snoop.txt 2>&1");'), "snoop")
    probe = _student_cache(cache, "snoop") / "snoop.txt"
    # what the constructor could see (written where the test, not the student, can read it) and what the student sees
    for seen in (probe.read_text(errors="replace") if probe.exists() else "", _seen_by_student(result)):
        assert SECRET.decode() not in seen and "the real gradebook" not in seen
        assert "%%cuda" not in seen.replace(HEAD.strip(), "")  # no solution cell
        assert "DLK_GRADER_SECRET" not in seen
    if _on_emulator(result):
        assert "probe ran" in probe.read_text(), "the constructor did not run: this test would prove nothing"
    assert result.score <= honest_twin.score


def test_io_uring_ptrace_and_other_process_memory_are_refused(honest_twin, cache):
    result = _grade(_with_constructor(
        'long params[30] = {0};\n'
        'long uring = syscall(425, 8, params);\n'            # io_uring_setup
        'long trace = syscall(101, 16, 1, 0, 0);\n'          # ptrace(PTRACE_ATTACH, 1)
        'char buf[8]; long local[2] = {(long)buf, 8}; long remote[2] = {0x400000, 8};\n'
        'long peek = syscall(310, 1, local, 1, remote, 1, 0);\n'  # process_vm_readv(1, ...)
        'long share = syscall(272, 0x10000000);\n'            # unshare(CLONE_NEWUSER)
        'char grader[64]; snprintf(grader, sizeof grader, "/proc/%d/mem", getppid());\n'  # the grading child
        'FILE* mem = fopen(grader, "r");\n'
        'char path[4096]; snprintf(path, sizeof path, "%s/syscalls.txt", getenv("DLK_CACHE_DIR"));\n'
        'FILE* out = fopen(path, "w");\n'
        'fprintf(out, "io_uring_setup=%ld ptrace=%ld process_vm_readv=%ld unshare=%ld mem=%d\\n", uring, trace, peek, share, mem != 0);\n'
        'fclose(out);'), "syscalls")
    if _on_emulator(result):
        probe = (_student_cache(cache, "syscalls") / "syscalls.txt").read_text()
        assert probe.strip() == "io_uring_setup=-1 ptrace=-1 process_vm_readv=-1 unshare=-1 mem=0", probe
    assert result.score <= honest_twin.score


def test_no_network(honest_twin, cache):
    """A listener on the grader's loopback: the sandbox has a network of its own, with nothing in it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted = []

    def listen():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    stop = threading.Event()
    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    try:
        result = _grade(_with_constructor(
            f'system("python3 -c \\"import socket; socket.create_connection((\'127.0.0.1\', {port}), 2)\\" '
            f'&& echo connected > $DLK_CACHE_DIR/net.txt || echo no-connection > $DLK_CACHE_DIR/net.txt");'), "network")
    finally:
        stop.set()
        thread.join()
        server.close()
    assert not accepted
    if _on_emulator(result):
        assert (_student_cache(cache, "network") / "net.txt").read_text().strip() == "no-connection"
    assert result.score <= honest_twin.score


def test_killing_everything_it_can_see_ends_only_its_own_grading(honest_twin):
    result = _grade(_with_constructor('system("kill -9 -1");'), "killer")
    assert result.score <= honest_twin.score
    again = _grade(HEAD + HONEST, "after-the-killer")
    assert again.status == "passed" and again.score == honest_twin.score


def test_a_forged_result_line_earns_nothing(stub_twin):
    """A stub kernel whose constructor writes a perfect result, in the child's format, to every pipe it can open."""
    forged = json.dumps({"event": "result", "result": {"exercise": "saxpy", "status": "passed", "correctness_score": 6,
                                                        "correctness_max": 6, "speed_score": 2, "speed_max": 2}})
    result = _grade(_with_constructor(
        'system("for f in /proc/*/fd/*; do echo \'' + forged.replace('"', '\\"') + '\' > $f; done 2>/dev/null");',
        kernel=STUB), "forger")
    assert result.score <= stub_twin.score == 0
    assert result.correctness_score == 0 and result.speed_score == 0


def test_output_files_planted_in_the_scratch_directory_earn_nothing(stub_twin):
    """Links to files the grader would read, and files of the right name with made-up arrays, before any case runs."""
    result = _grade(_with_constructor(
        'system("mkdir -p results; for i in $(seq 0 80); do ln -sf /usr/lib/os-release results/case-$i.out.y.npy; '
        'ln -sf /usr/lib/os-release results/case-$i.in.x.npy; done; ln -sf /usr/lib/os-release results/timing.out.y.npy");',
        kernel=STUB), "planter")
    assert result.score <= stub_twin.score == 0


def test_overriding_the_emulator_s_own_filter_changes_nothing(course, honest_twin):
    """A cell that defines prctl() makes the emulator's worker believe its filter is installed; the kernel then writes."""
    result = _grade(HEAD + 'extern "C" int prctl(int, unsigned long, unsigned long, unsigned long, unsigned long) { return 0; }\n'
                    + HONEST.replace("if (i < n) y[i]", f'if (i == 0) {{ FILE* f = fopen("{course}/gradebook.db", "w"); '
                                     f'if (f) {{ fputs("pwned", f); fclose(f); }} }}\n    if (i < n) y[i]'), "prctl")
    assert (course / "gradebook.db").read_text() == "the real gradebook\n"
    assert result.score <= honest_twin.score


def _sandbox_processes_left(marker: str) -> list[int]:
    """Processes of the machine still running as a sandbox's own uid (the grader as root draws them from a range)
    whose environment holds ``marker`` (a student's build cache): gradings of other tests, running beside
    this one, run under uids of the same range."""
    left = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        uid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("Uid:")), 0)
        if sandbox.SANDBOX_ID_BASE <= uid < sandbox.SANDBOX_ID_BASE + sandbox.SANDBOX_ID_SPAN:
            try:
                environment = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if marker.encode() in environment:
                left.append(int(entry))
    return left


def test_a_fork_bomb_is_stopped_at_the_process_limit(honest_twin, cache):
    """fork() forever, from every process: the sandbox's RLIMIT_NPROC holds it at the limit, where the
    grader stops the grading and says why; the machine, the twin and the next student are untouched."""
    result = _grade(_with_constructor(
        'char path[4096]; snprintf(path, sizeof path, "%s/bomb.txt", getenv("DLK_CACHE_DIR"));\n'
        'long limit[2]; syscall(97, 6, limit);\n'  # getrlimit(RLIMIT_NPROC)
        'FILE* out = fopen(path, "w"); if (out) { fprintf(out, "uid=%ld nproc=%ld\\n", syscall(102), limit[0]); fclose(out); }\n'
        'int noted = 0;\n'
        'for (;;) if (syscall(57) < 0 && !noted) {\n'  # fork(), from every process, forever
        '  noted = 1; out = fopen(path, "a"); if (out) { fputs("fork refused\\n", out); fclose(out); } }'), "fork-bomb")
    if _on_emulator(result):
        probe = (_student_cache(cache, "fork-bomb") / "bomb.txt").read_text()
        # not the machine's root inside, the limit set before any of its code ran, and the kernel held it there
        assert probe.startswith("uid=") and "uid=0 " not in probe and f"nproc={sandbox.PROCESS_LIMIT}\n" in probe, probe
        assert "fork refused" in probe, probe
        assert result.status == "crashed", result.feedback_text()
        assert "Too many processes" in result.message and f"limit of {sandbox.PROCESS_LIMIT}" in result.message
        assert "did not finish within" not in result.message  # stopped at the limit, not by the clock
    assert result.score <= honest_twin.score
    assert _sandbox_processes_left(str(_student_cache(cache, "fork-bomb"))) == []
    again = _grade(HEAD + HONEST, "after-the-bomb")
    assert again.status == "passed" and again.score == honest_twin.score


MEMORY_LIMIT = 2**30  # a small limit for the memory attacks; the honest twin grades within it


def test_memory_hidden_in_memfds_and_dev_shm_is_counted(cache):
    """Pages written to memfds (never mapped) and to /dev/shm are no process's resident memory; the
    grader counts them with it, and /dev/shm is a small tmpfs besides; System V segments, which
    outlive every process, cannot be made at all."""
    result = _grade(_with_constructor(
        'static char block[1 << 20]; for (int k = 0; k < (1 << 20); ++k) block[k] = (char)k;\n'
        'long shm = 0; for (int f = 0; f < 4; ++f) {\n'
        '  char name[64]; snprintf(name, sizeof name, "/dev/shm/hoard-%d", f); FILE* s = fopen(name, "w");\n'
        '  for (int m = 0; s && m < 32; ++m) shm += fwrite(block, 1, sizeof block, s); if (s) fclose(s); }\n'
        'char path[4096]; snprintf(path, sizeof path, "%s/shm.txt", getenv("DLK_CACHE_DIR"));\n'
        'long sysv = syscall(29, 0, 256 << 20, 01000 | 0600);\n'  # shmget(IPC_PRIVATE, 256 MiB): pages of no process
        'FILE* out = fopen(path, "w"); fprintf(out, "%ld %ld", shm, sysv); fclose(out);\n'
        'for (int f = 0; f < 16; ++f) { long fd = syscall(319, "hoard", 0);\n'  # memfd_create
        '  for (int m = 0; fd >= 0 && m < 96; ++m) syscall(1, fd, block, sizeof block); }'),  # write(): never mapped
        "memfd-hoarder", memory_limit=MEMORY_LIMIT)
    # On a GPU the cell is device code only (its constructor never runs), and timing at the timing size
    # needs more than the attack's small limit: there the twin grades under the grader's own limit.
    twin = _grade(HEAD + HONEST, "memory-twin", **({"memory_limit": MEMORY_LIMIT} if _on_emulator(result) else {}))
    assert twin.status == "passed", twin.feedback_text()
    if _on_emulator(result):
        written, sysv = map(int, (_student_cache(cache, "memfd-hoarder") / "shm.txt").read_text().split())
        assert 0 < written <= sandbox.SHM_BYTES  # /dev/shm is full at its size
        assert sysv == -1  # System V shared memory is refused where no GPU is bound
        assert result.status == "crashed", result.feedback_text()
        assert "more than 1.0 GiB of memory" in result.message, result.message
    assert result.score <= twin.score


def test_kernel_buffers_no_process_holds_are_refused_or_counted(cache):
    """Memory outside every resident set: a socket pair's queues (a gigabyte passed a 512 MiB limit), a TCP
    connection to itself, System V message queues, pipes grown to a megabyte each, and then as many full pipes
    as 100 processes can hold.  Sockets and System V IPC are refused, pipes keep their 64 KiB, and the pipes a
    grading holds are counted at what they may hold: the hoard is stopped at the limit, the twin is not."""
    result = _grade(_with_constructor(
        'char path[4096]; snprintf(path, sizeof path, "%s/buffers.txt", getenv("DLK_CACHE_DIR"));\n'
        'int pair[2]; long sp = syscall(53, 1, 1, 0, pair);\n'        # socketpair(AF_UNIX, SOCK_STREAM)
        'long tcp = syscall(41, 2, 1, 0);\n'                          # socket(AF_INET, SOCK_STREAM)
        'long mq = syscall(68, 0, 01000 | 0600);\n'                   # msgget(IPC_PRIVATE)
        'long sem = syscall(64, 0, 1, 01000 | 0600);\n'               # semget(IPC_PRIVATE)
        'int p[2]; syscall(22, p); long grown = syscall(72, p[1], 1031, 1 << 20);\n'  # pipe, F_SETPIPE_SZ 1 MiB
        'FILE* out = fopen(path, "w"); fprintf(out, "socketpair=%ld socket=%ld msgget=%ld semget=%ld setpipe=%ld\\n", '
        'sp, tcp, mq, sem, grown); fclose(out);\n'
        'static char block[65536]; memset(block, 1, sizeof block);\n'
        'for (int k = 0; k < 100; ++k) if (syscall(57) == 0) break;\n'  # fork() 100 times: each process hoards
        'for (;;) { int q[2]; if (syscall(293, q, 04000) != 0) break; syscall(1, q[1], block, sizeof block); syscall(3, q[1]); }\n'
        'for (;;) syscall(34);'),                                      # pause(): hold the pipes
        "buffer-hoarder", memory_limit=MEMORY_LIMIT)
    twin = _grade(HEAD + HONEST, "buffer-twin", **({"memory_limit": MEMORY_LIMIT} if _on_emulator(result) else {}))
    assert twin.status == "passed", twin.feedback_text()
    if _on_emulator(result):
        probe = (_student_cache(cache, "buffer-hoarder") / "buffers.txt").read_text()
        assert probe.strip() == "socketpair=-1 socket=-1 msgget=-1 semget=-1 setpipe=-1", probe
        assert result.status == "crashed" and "more than 1.0 GiB of memory" in result.message, result.message
    assert result.score <= twin.score


def test_a_grading_cannot_fill_the_disk_nor_leave_files_behind(cache, honest_twin):
    """Two gigabytes written to the working directory (in files under the file-size limit), and 30,000 empty files:
    the scratch space is a tmpfs of its own (the kernel refuses writes past its size; its inodes are counted),
    gone with the grading."""
    import shutil
    import tempfile

    free_before = shutil.disk_usage(tempfile.gettempdir()).free
    filler = _grade(_with_constructor(
        'static char block[1 << 20]; memset(block, 7, sizeof block); long written = 0;\n'
        'for (int part = 0; part < 5; ++part) {\n'  # five files of 400 MiB: each under the 512 MiB file-size limit
        '  char name[32]; snprintf(name, sizeof name, "ballast-%d", part); FILE* f = fopen(name, "w");\n'
        '  for (int k = 0; f && k < 400; ++k) written += fwrite(block, 1, sizeof block, f); if (f) fclose(f); }\n'
        'char path[4096]; snprintf(path, sizeof path, "%s/filled.txt", getenv("DLK_CACHE_DIR"));\n'
        'FILE* out = fopen(path, "w"); fprintf(out, "%ld", written); fclose(out);'), "disk-filler")
    inodes = _grade(_with_constructor(
        'char name[64]; for (int k = 0; k < 30000; ++k) { snprintf(name, sizeof name, "e%d", k); fclose(fopen(name, "w")); }'),
        "inode-filler")
    assert free_before - shutil.disk_usage(tempfile.gettempdir()).free < 256 * 2**20
    assert not list(Path(tempfile.gettempdir()).glob("dlk-grade-*/ballast*"))
    if _on_emulator(filler):
        written = int((_student_cache(cache, "disk-filler") / "filled.txt").read_text())
        assert written < 2**30 + 2**20, "the kernel let the grading write past its scratch space's size"
        assert filler.status == "crashed" and "wrote more than it may" in filler.message, filler.message
        assert inodes.status == "crashed" and "files and folders" in inodes.message, inodes.message
    assert filler.score <= honest_twin.score and inodes.score <= honest_twin.score
    again = _grade(HEAD + HONEST, "after-the-fillers")
    assert again.status == "passed" and again.score == honest_twin.score, again.feedback_text()


@pytest.mark.skipif("memory" not in grading_cgroup.limiting_controllers(),
                    reason="no cgroup v2 memory controller to give a grading its own memory.max here "
                           f"({grading_cgroup.unavailable_reason() or 'the unified hierarchy is mounted without it'}): "
                           "the seccomp filter and the grader's count stand in (the test above)")
def test_the_kernel_counts_what_the_grader_does_not(monkeypatch, cache):
    """Where a grading has a cgroup with memory.max, memory the grader's own count misses is the kernel's to
    count: six gigabytes written into memfds (pages of no process's resident set; here left out of the grader's
    count on purpose) are stopped at the emulator's real limit, under which the honest twin grades.  (Pipes fell
    short of the limit on a GPU runner: 256 descriptors a process hold a process's pipes to 8 MiB.  And the small
    limit of the other attacks is too small here: the cgroup counts what the grading's tmpfs and page cache hold
    too, and the honest twin passed 1 GiB at its largest hidden case.)"""

    monkeypatch.setattr(process_tree, "held_buffer_bytes", lambda pids: 0)
    limit = isolation.MEMORY_LIMIT_CPU
    result = _grade(_with_constructor(
        'static char block[1 << 20]; memset(block, 1, sizeof block);\n'
        'for (int f = 0; f < 24; ++f) {\n'  # 24 memfds of 256 MiB: each under the 512 MiB file-size limit
        '  long fd = syscall(319, "hoard", 0); if (fd < 0) break;\n'  # memfd_create
        '  for (int k = 0; k < 256; ++k) syscall(1, fd, block, sizeof block); }\n'
        'for (;;) syscall(34);'), "cgroup-hoarder", memory_limit=limit, backend="cpu")
    assert result.status == "crashed" and f"more than {limit / 2**30:.1f} GiB of memory" in result.message, \
        result.message
    twin = _grade(HEAD + HONEST, "cgroup-twin", memory_limit=limit, backend="cpu")
    assert twin.status == "passed" and result.score <= twin.score, twin.message


def test_files_made_after_the_last_count_are_counted_at_the_end(monkeypatch, honest_twin):
    """The grader counts the scratch space's files while the grading runs, every SCRATCH_POLL_S, and once more at
    its end: 25,000 empty files made by a grading that ends before the next count (here: no count while it
    runs) are found all the same; the twin, the same kernel without them, passes."""
    monkeypatch.setattr(isolation, "SCRATCH_POLL_S", 1e9)
    result = _grade(_with_constructor(
        'char name[64]; for (int k = 0; k < 25000; ++k) { snprintf(name, sizeof name, "e%d", k); fclose(fopen(name, "w")); }'),
        "quick-inode-filler")
    if _on_emulator(result):
        assert result.status == "crashed" and "files and folders" in result.message, result.message
    assert result.score <= honest_twin.score
