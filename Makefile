# Deep Learning Kernels: build the book, run the tests, measure the kernels.
#
#   make book      the HTML book in _build/html, every chapter executed
#   make test      the test suite (CPU emulator; GPU tests skip without a GPU)
#   make lab       JupyterLab on the exercises, kernels on DLK_BACKEND (auto, gpu or cpu)
#   make student-copy  dist/deep-learning-kernels-student.tar.gz: what students get, no solutions/
#   make test-gpu  on a GPU machine: GPU tests and kernel tests on the GPU (no venv, no install)
#   make bench     on a GPU machine: benchmarks/*.py -> benchmarks/results/*.json
#   make clean     remove build outputs and caches (make distclean also removes .venv)

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# Test processes (pytest-xdist): one per core of a CI machine; a test file stays in one process.
TEST_JOBS ?= 2
# A GPU runner's test processes.  The GPU tests' grading children compile and sandbox on the runner's
# cores, so more processes make each test slower: on a 16-core H100 runner the tests' summed time grew
# by half from 8 processes to 12, which finished later (351 s against 310 to 346 s).  The longest files
# start first (--heavy-first, tests/suite_order.py): ordered by test count, a file of two two-minute
# tests started last and the other processes waited for it (333 s against 276 s, two runs otherwise alike).
GPU_TEST_JOBS ?= 8

.PHONY: help book lab kernelspec student-copy test test-gpu bench clean distclean

help:
	@sed -n '3,10p' Makefile | sed 's/^# *//'

# The virtual environment: every pinned package, then this project (editable, so
# that the book and the tests always use the files of this checkout).
$(STAMP): requirements.lock pyproject.toml
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(VPY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

# Notebooks run in the venv's own "python3" kernel (JUPYTER_PATH puts its
# kernelspec first); a cell that raises fails the build (_config.yml).
JUPYTER_ENV = PATH="$(CURDIR)/$(VENV)/bin:$$PATH" JUPYTER_PATH="$(CURDIR)/$(VENV)/share/jupyter" PYTHONPATH="$(CURDIR)"

kernelspec: $(STAMP)
	@$(VPY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (Deep Learning Kernels)" >/dev/null

book: kernelspec
	$(JUPYTER_ENV) $(VENV)/bin/jupyter-book build --all .
	@test -f _build/html/index.html && echo "book: $(CURDIR)/_build/html/index.html"

# JupyterLab from the venv, opened on exercises/; the kernels it starts inherit
# DLK_BACKEND (unset: auto, the GPU if PyCUDA finds one, else the CPU emulator).
# LAB_ARGS passes options to jupyter lab (e.g. LAB_ARGS="--no-browser --port 8890").
# jupyter lab refuses to start as root without --allow-root; containers and many
# course VMs run as root, so it is passed there (RUNNING_AS_ROOT= turns that off).
LAB_ARGS ?=
RUNNING_AS_ROOT ?= $(filter 0,$(shell id -u))
lab: kernelspec
	@echo "make lab: kernels run with DLK_BACKEND=$${DLK_BACKEND:-auto}"
	@$(if $(RUNNING_AS_ROOT),echo "make lab: running as root (as in a container): passing --allow-root to jupyter lab")
	$(JUPYTER_ENV) $(VENV)/bin/jupyter lab --notebook-dir="$(CURDIR)" --ServerApp.default_url=/lab/tree/exercises $(if $(RUNNING_AS_ROOT),--allow-root) $(LAB_ARGS)

# What students get: the book, the kernels, the exercises and the runtime behind
# check(), from the last commit; not solutions/ (instructor notebooks with solutions
# and hidden tests) nor the tests, which grade those solutions.
STUDENT_FILES = README.md Makefile pyproject.toml requirements.lock _config.yml _toc.yml _static \
	book kernels autograder exercises benchmarks
student-copy:
	@mkdir -p dist
	git archive --format=tar.gz --prefix=deep-learning-kernels/ -o dist/deep-learning-kernels-student.tar.gz HEAD $(STUDENT_FILES)
	@echo "student copy: dist/deep-learning-kernels-student.tar.gz (no solutions/)"

test: $(STAMP)
	$(VPY) -m pytest -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS)

# The GPU machine's own python3 (numpy, torch, pytest; PyCUDA from wheels on
# PYTHONPATH); the repository is imported from this checkout, nothing installed.
GPU_ENV = DLK_BACKEND=gpu PYTHONPATH="$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH}"

test-gpu:
	@$(GPU_ENV) python3 -c "import sys; from kernels.runtime.selection import gpu_usable; \
		sys.exit(0 if gpu_usable() else 'make test-gpu: no usable GPU (is PyCUDA importable? is there a CUDA device?)')"
	$(GPU_ENV) python3 -m pytest -p no:cacheprovider -m "gpu or backend" -n $(GPU_TEST_JOBS) --dist loadfile \
		--heavy-first --no-loadscope-reorder $(PYTEST_ARGS)

# Every GPU benchmark, each in its own process; a failing one does not stop the
# others, but fails the target.  (emulator_*.py measure the CPU emulator: run those
# by hand, see their docstrings.)
bench:
	@mkdir -p benchmarks/results
	@failed=""; for script in benchmarks/*.py; do \
		case "$$(basename $$script)" in common.py|_*|emulator_*) continue;; esac; \
		echo "== $$script"; $(GPU_ENV) $(if $(TAG),DLK_RESULTS_TAG=$(TAG)) python3 -m benchmarks.$$(basename $$script .py) || failed="$$failed $$script"; \
	 done; \
	 if [ -n "$$failed" ]; then echo "make bench: failed:$$failed"; exit 1; fi

clean:
	rm -rf _build .pytest_cache .hypothesis *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
