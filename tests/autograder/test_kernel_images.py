"""The grader's own kernels are compiled once per host and loaded, read-only, by each child.

An image is found by a hash of exactly what nvcc would compile (the text, the
options, the architecture and the headers), so a changed header or define is
a different image; the folder is read-only inside the sandbox; on a GPU a
child takes the reference kernel from the folder instead of running nvcc.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from autograder import kernel_images, sandbox
from autograder.exercises import get_exercise
from kernels.runtime import gpu as gpu_backend


def test_an_image_is_named_by_everything_nvcc_would_see(tmp_path):
    headers = tmp_path / "include"
    headers.mkdir()
    (headers / "helpers.cuh").write_text("#define TILE 16\n")
    key = gpu_backend.image_key("__global__ void k() {}", ["-DN=4"], [str(headers)], "sm_90")
    assert key == gpu_backend.image_key("__global__ void k() {}", ["-DN=4"], [str(headers)], "sm_90")
    assert key != gpu_backend.image_key("__global__ void k() { }", ["-DN=4"], [str(headers)], "sm_90")
    assert key != gpu_backend.image_key("__global__ void k() {}", ["-DN=8"], [str(headers)], "sm_90")
    assert key != gpu_backend.image_key("__global__ void k() {}", ["-DN=4"], [str(headers)], "sm_100")
    (headers / "helpers.cuh").write_text("#define TILE 32\n")
    assert key != gpu_backend.image_key("__global__ void k() {}", ["-DN=4"], [str(headers)], "sm_90")


def test_a_stored_image_is_found_only_in_the_folder_named_by_the_environment(tmp_path, monkeypatch):
    compiled = []

    def fake_compile(text, options, include_dirs, arch):
        compiled.append(text)
        return b"image of " + text.encode()

    monkeypatch.setattr(gpu_backend, "_compile_image", fake_compile)
    from kernels.runtime.signature import parse_kernels

    source = "__global__ void k(float* x) { x[0] = 1; }\n"
    signatures = parse_kernels(source, "k.cu", {})
    path = gpu_backend.store_image(str(tmp_path), source, "k.cu", ["-DN=4"], [], signatures, "sm_90")
    gpu_backend.store_image(str(tmp_path), source, "k.cu", ["-DN=4"], [], signatures, "sm_90")
    assert len(compiled) == 1 and os.path.exists(path)  # compiled once, then found
    text, _, _ = gpu_backend._image_source(source, "k.cu", signatures)
    monkeypatch.delenv(gpu_backend.IMAGES_VARIABLE, raising=False)
    assert gpu_backend.stored_image(text, ["-DN=4"], [], "sm_90") is None
    monkeypatch.setenv(gpu_backend.IMAGES_VARIABLE, str(tmp_path))
    assert gpu_backend.stored_image(text, ["-DN=4"], [], "sm_90") == b"image of " + text.encode()
    assert gpu_backend.stored_image(text, ["-DN=5"], [], "sm_90") is None


@pytest.mark.skipif(bool(sandbox.unavailable_reason()), reason="the sandbox cannot start here")
def test_the_images_folder_is_read_only_inside_the_sandbox(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    (images / "a.cubin").write_bytes(b"image")
    scratch = tmp_path / "scratch"
    probe = f"cat {images}/a.cubin && if echo x > {images}/b.cubin; then exit 3; fi && if rm {images}/a.cubin; then exit 4; fi"
    launch = sandbox.command(["/bin/sh", "-c", probe], str(scratch), readonly=[str(images)])
    try:
        proc = subprocess.Popen(launch.argv, pass_fds=launch.pass_fds, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    except OSError:
        launch.abandon()
        raise
    finally:
        launch.close_passed()
    launch.started()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out == "image", (proc.returncode, out, err)
    assert sorted(os.listdir(images)) == ["a.cubin"]


@pytest.mark.gpu
def test_a_child_on_the_gpu_loads_the_reference_kernel_instead_of_compiling_it(tmp_path, monkeypatch):
    from kernels.runtime.loader import load_topic
    from kernels.runtime.selection import make_backend

    ex = get_exercise("saxpy")
    folder = kernel_images.folder_for(ex)
    assert folder and len(os.listdir(folder)) >= 3  # the blend, the poisoning, the reference
    monkeypatch.setenv(gpu_backend.IMAGES_VARIABLE, folder)

    def no_nvcc(*args, **kwargs):
        raise AssertionError("nvcc ran for a kernel whose image the grader stored")

    monkeypatch.setattr(gpu_backend, "_compile_image", no_nvcc)
    rk = ex.reference_kernel
    module = load_topic(rk.topic, rk.defines or None, backend=make_backend("gpu"))
    assert module.compiled.kernel_function(rk.kernel) is not None


def _a_fresh_grading_process(monkeypatch) -> list[str]:
    """kernel_images as a grading process that has built nothing yet sees it (on a Hopper); nvcc recorded, not run."""
    compiled: list[str] = []
    monkeypatch.setattr(kernel_images, "_folder", None)
    monkeypatch.setattr(kernel_images, "_done", set())
    monkeypatch.setattr(kernel_images, "_device_arch", lambda: "sm_90")
    monkeypatch.setattr(gpu_backend, "_compile_image", lambda text, *args: compiled.append(text) or b"image")
    return compiled


def test_the_grading_processes_of_a_host_build_each_image_once_between_them(tmp_path, monkeypatch):
    """A cluster starts several grading processes per card afresh: the first builds the grader's kernels into the
    host's folder, the next finds them there and runs no nvcc."""
    ex = get_exercise("saxpy")
    first = _a_fresh_grading_process(monkeypatch)
    folder = kernel_images.folder_for(ex, tmp_path / "cache")
    assert folder == str(tmp_path / "cache" / kernel_images.HOST_FOLDER)
    assert len(first) >= 3 and len([f for f in os.listdir(folder) if f.endswith(".cubin")]) == len(first)
    assert os.stat(folder).st_mode & 0o777 == 0o755  # the children read it as a uid of their own, never write
    second = _a_fresh_grading_process(monkeypatch)
    turns = []  # a process that finds every image takes no turn at the lock (a cluster's 32 would queue there)
    monkeypatch.setattr(kernel_images.fcntl, "flock", lambda *args: turns.append(args))
    assert kernel_images.folder_for(ex, tmp_path / "cache") == folder and second == [] and turns == []


def test_a_process_that_misses_an_image_builds_it_in_its_turn_at_the_lock(tmp_path, monkeypatch):
    """One image removed from a built host folder: the next process takes the lock and builds that one alone."""
    ex = get_exercise("saxpy")
    _a_fresh_grading_process(monkeypatch)
    folder = kernel_images.folder_for(ex, tmp_path / "cache")
    images = sorted(f for f in os.listdir(folder) if f.endswith(".cubin"))
    os.remove(os.path.join(folder, images[0]))
    again = _a_fresh_grading_process(monkeypatch)
    turns = []
    monkeypatch.setattr(kernel_images.fcntl, "flock", lambda *args: turns.append(args))
    assert kernel_images.folder_for(ex, tmp_path / "cache") == folder
    assert len(again) == 1 and len(turns) == 1 and sorted(f for f in os.listdir(folder) if f.endswith(".cubin")) == images


def test_a_host_folder_that_is_a_link_is_not_lent_to_the_children(tmp_path, monkeypatch):
    """Attack: the host folder replaced by a link to a folder someone else filled. Its twin above is lent."""
    elsewhere = tmp_path / "planted"
    elsewhere.mkdir()
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / kernel_images.HOST_FOLDER).symlink_to(elsewhere)
    compiled = _a_fresh_grading_process(monkeypatch)
    folder = kernel_images.folder_for(get_exercise("saxpy"), tmp_path / "cache")
    assert folder and not folder.startswith(str(tmp_path)) and len(compiled) >= 3  # a folder of this process's own
    assert os.listdir(elsewhere) == []
