"""The repository follows the chapter manifest (book/chapters.py): one name per chapter everywhere.

Adding a chapter is adding its line to the manifest; these tests then say
which of its files are missing or misnamed, and which files belong to no
chapter.
"""

from __future__ import annotations

import importlib
import re
import pkgutil
from pathlib import Path

import pytest

import autograder.exercises
from book.chapters import CHAPTERS, ROOT, chapter
from kernels.runtime import sources
from kernels.runtime.sources import source_path, topic_module, topic_sources

TOC = (ROOT / "_toc.yml").read_text()


def test_numbers_and_names_are_unique_and_in_order():
    # chapter 0 is the warm-up puzzles, before the first chapter
    assert [c.number for c in CHAPTERS] == list(range(len(CHAPTERS)))
    assert len({c.name for c in CHAPTERS}) == len(CHAPTERS)
    assignments = [a.name for c in CHAPTERS for a in c.assignments]
    assert len(set(assignments)) == len(assignments)


def test_a_chapter_s_own_assignment_comes_first_and_the_others_are_named_alike():
    gemm = chapter("conv_as_gemm")
    assert [a.assignment for a in gemm.assignments] == ["04_conv_as_gemm", "04_gemm_ladder"]
    assert gemm.exercises() == [name for a in gemm.assignments for name in a.exercises()]
    assert gemm.assignments[1].solution == ROOT / "solutions" / "04_gemm_ladder" / "gemm_ladder.ipynb"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.name)
def test_every_file_of_a_chapter_is_where_its_name_says(chapter):
    for page in chapter.pages:
        assert (ROOT / "book" / f"{page}.md").exists(), page
        assert f"file: book/{page}\n" in TOC, f"book/{page}.md is not in _toc.yml"
    assert bool(chapter.assignments) == chapter.graded
    for assignment in chapter.assignments:
        assert assignment.solution.exists(), assignment.solution
        assert (ROOT / "exercises" / assignment.assignment / f"{assignment.notebook}.ipynb").exists()
        assert assignment.exercises(), f"{assignment.exercise_module} declares no EXERCISES"
    if chapter.benchmark:
        assert callable(importlib.import_module(chapter.benchmark).measure)
    for topic in chapter.topics:
        assert source_path(topic).with_suffix(".py").exists(), topic
        assert importlib.import_module(topic_module(topic)).TOPIC == topic


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if c.graded], ids=lambda c: c.name)
def test_every_exercise_is_named_on_a_page_of_its_chapter(chapter):
    """A reader finds each exercise where its kernel is taught: the page names it (`name`, or its signature), with
    the assignment's folder, so that no exercise is left without a pointer when a page is split or an exercise
    added."""
    pages = {page: (ROOT / "book" / f"{page}.md").read_text() for page in chapter.pages}
    for assignment in chapter.assignments:
        for name in assignment.exercises():
            named = [page for page, text in pages.items() if f"`{name}`" in text or f"`{name}(" in text]
            assert named, f"{name} ({assignment.assignment}) is named on no page of {chapter.name}: {sorted(pages)}"
            assert any(f"exercises/{assignment.assignment}" in pages[page] for page in named), (
                f"{name} is named on {named}, but no such page says where it is (exercises/{assignment.assignment}/)")


def test_every_exercise_module_benchmark_assignment_and_topic_belongs_to_a_chapter():
    names = {a.name for c in CHAPTERS for a in c.assignments}
    modules = {info.name for info in pkgutil.iter_modules(autograder.exercises.__path__) if not info.name.startswith("_")}
    assert modules == names, f"exercise modules without a chapter's assignment: {sorted(modules - names)}"
    # The emulator's and the grader's own benchmarks (emulator_speed, emulator_profile, cluster_grading) belong to
    # no chapter, and the profiler's figures (profiles) to two.
    benchmarks = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} - {"__init__", "common", "emulator_speed",
                                                                         "emulator_profile", "cluster_grading",
                                                                         "profiles"}
    chapters_benchmarks = {c.name for c in CHAPTERS if c.benchmark} | {b for c in CHAPTERS for b in c.more_benchmarks}
    assert benchmarks == chapters_benchmarks, "benchmarks without a chapter"
    for folder in ("solutions", "exercises"):
        assignments = {p.name for p in (ROOT / folder).iterdir() if p.is_dir()}
        assert assignments == {a.assignment for c in CHAPTERS for a in c.assignments}, folder
    topics = set(topic_sources())
    taught = {t for c in CHAPTERS for t in c.topics}
    assert topics == taught, f"topics no chapter teaches: {sorted(topics - taught)}"


#: Folders of kernels/ that are no part of the book: the engine, tools, networks, data sets, framework ops.
SUPPORT_FOLDERS = {"runtime", "tools", "models", "data", "frameworks"}


def test_kernels_are_grouped_by_the_books_parts():
    """A chapter's kernels are in a folder of their part: ``kernels/<part>/<topic>.cu`` for a topic,
    ``kernels/<name>/`` for a chapter whose kernels are generated (no .cu); nothing of a chapter lies loose in
    ``kernels/``, every part is a package, and the README's layout names every part."""
    kernels = ROOT / "kernels"
    assert not list(kernels.glob("*.cu")) and {p.name for p in kernels.glob("*.py")} == {"__init__.py"}
    parts = {path.parent.name for path in topic_sources().values()}
    generated = {c.name for c in CHAPTERS if not c.topics and c.prints_kernels}
    folders = {p.name for p in kernels.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders == parts | generated | SUPPORT_FOLDERS, "kernels/ holds folders that are no part of the book"
    readme = (ROOT / "README.md").read_text().split("## What is where", 1)[1].split("\n## ", 1)[0]
    for part in sorted(parts | generated):
        assert (kernels / part / "__init__.py").exists(), f"kernels/{part}/ is not a package"
        assert f"`kernels/{part}/`" in readme, f"the README's layout does not name kernels/{part}/"


def test_a_topic_is_found_by_its_name_and_a_name_in_two_parts_is_refused(tmp_path, monkeypatch):
    for part in ("basics", "dense"):
        (tmp_path / part).mkdir()
    (tmp_path / "basics" / "sum.cu").write_text("")
    monkeypatch.setattr(sources, "KERNEL_DIR", tmp_path)
    assert source_path("sum") == tmp_path / "basics" / "sum.cu"
    with pytest.raises(KeyError, match="no kernels/<part>/product.cu: the topics are sum"):
        source_path("product")
    (tmp_path / "dense" / "sum.cu").write_text("")
    with pytest.raises(ValueError, match="two topics are called 'sum'"):
        source_path("sum")


def test_every_chapter_page_of_the_table_of_contents_is_in_the_manifest():
    pages = {line.split("book/", 1)[1].strip() for line in TOC.splitlines() if "file: book/" in line}
    # The introduction and the scoreboard (every chapter's speed figures on one page) belong to no chapter.
    assert pages - {"intro", "scoreboard"} == {p for c in CHAPTERS for p in c.pages}


def test_the_readmes_what_is_where_names_files_that_exist():
    """Every file or folder the README's layout table and "Adding a chapter" name (a literal path, not a
    ``<pattern>``) is there, looked up from the root or the folder of the table's row."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## What is where", 1)[1].split("\n## On a GPU machine", 1)[0]
    missing = []
    for row in section.splitlines():
        folders = [ROOT] + [ROOT / p for p in re.findall(r"`([a-z_/]+/)`", row)]
        for name in re.findall(r"`([\w./-]+\.(?:py|md|yml|json|cu)|[\w-]+/(?:[\w-]+/)*)`", row):
            if not any((folder / name).exists() for folder in folders):
                missing.append(name)
    assert "autograder/" in section and "kernels/runtime/" in section
    assert not missing, f"the README's layout names what is not there: {sorted(set(missing))}"
