"""Every teaching section of every chapter asks the reader to think first, and ends with questions whose answers
are hidden behind a toggle.

The style is one for the whole book: a "Check your understanding" box (``:class: tip``) with
numbered questions, then an "Answers" box (``:class: dropdown``, collapsed until the reader
opens it) with an answer for each question, in the same order.  Before that, at least one
"Predict" box asks for a prediction that the code cell right after it then measures or shows
("how many blocks will this launch? run it").  Sections that teach nothing new (the exercises,
a summary) have none.  When the book has been built, the answers of every page are in
collapsed boxes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from book.chapters import CHAPTERS

ROOT = Path(__file__).resolve().parent.parent
BUILT = ROOT / "_build" / "html" / "book"
PAGES = [page for chapter in CHAPTERS for page in chapter.pages]
#: Section titles with no questions: they set work or sum up, they do not teach.
NOT_TEACHING = re.compile(r"^(Exercises|Assignment.*|Summary)$")
QUESTIONS = ":::{admonition} Check your understanding\n:class: tip\n"
ANSWERS = ":::{admonition} Answers\n:class: dropdown\n"


def sections(text: str) -> list[tuple[str, str]]:
    """``(title, body)`` of each ``## `` section, outside code fences."""
    found, title, body, fence = [], None, [], None
    for line in text.split("\n"):
        mark = re.match(r"^(```+|:::+)", line)
        if mark:
            if fence is None:
                fence = mark.group(1)[0]
            elif set(line.strip()) <= {fence}:
                fence = None
        if fence is None and line.startswith("## "):
            if title is not None:
                found.append((title, "\n".join(body)))
            title, body = line[3:].strip(), []
        elif title is not None:
            body.append(line)
    if title is not None:
        found.append((title, "\n".join(body)))
    return found


def numbered(block: str) -> list[str]:
    return re.findall(r"^(\d+)\. \S", block, re.M)


def question_blocks(body: str) -> tuple[str, str] | None:
    """The section's closing questions and answers, or None if it does not end with them."""
    m = re.search(re.escape(QUESTIONS) + r"(.*?)^:::\n\n" + re.escape(ANSWERS) + r"(.*?)^:::\s*\Z", body, re.S | re.M)
    return (m.group(1), m.group(2)) if m else None


@pytest.mark.parametrize("page", PAGES)
def test_every_teaching_section_ends_with_questions_and_hidden_answers(page):
    text = (ROOT / "book" / f"{page}.md").read_text()
    teaching = [(title, body) for title, body in sections(text) if not NOT_TEACHING.match(title)]
    assert teaching, f"{page}.md has no sections"
    for title, body in teaching:
        blocks = question_blocks(body)
        assert blocks, (f"{page}.md, section {title!r}: it must end with a 'Check your understanding' box "
                        f"and an 'Answers' dropdown, in that order")
        questions, answers = (numbered(b) for b in blocks)
        assert 2 <= len(questions) <= 3, f"{page}.md, {title!r}: {len(questions)} questions (two or three)"
        assert questions == answers == [str(i) for i in range(1, len(questions) + 1)], (
            f"{page}.md, {title!r}: questions {questions} and answers {answers} must be numbered alike")


@pytest.mark.parametrize("page", PAGES)
def test_sections_that_set_work_have_no_questions(page):
    for title, body in sections((ROOT / "book" / f"{page}.md").read_text()):
        if NOT_TEACHING.match(title):
            assert "Check your understanding" not in body, f"{page}.md, {title!r}"


def test_the_section_reader_finds_the_last_blocks_only():
    body = f"text\n\n{QUESTIONS}\n1. Why?\n2. How?\n:::\n\n{ANSWERS}\n1. Because.\n2. So.\n:::\n"
    assert [numbered(b) for b in question_blocks(body)] == [["1", "2"], ["1", "2"]]
    assert question_blocks(body + "\nmore prose after the answers\n") is None
    assert question_blocks(body.replace(":class: dropdown", ":class: note")) is None


@pytest.mark.parametrize("page", PAGES)
def test_built_answers_are_collapsed(page):
    html = BUILT / f"{page}.html"
    if not html.exists():
        pytest.skip("the book is not built here (`make book`)")
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html.read_text(), "html.parser")
    answers = [a for a in soup.select("div.admonition") if a.select_one(".admonition-title")
               and a.select_one(".admonition-title").get_text(strip=True) == "Answers"]
    source = (ROOT / "book" / f"{page}.md").read_text()
    assert len(answers) == source.count(ANSWERS)
    assert all("dropdown" in a.get("class", []) for a in answers)


#: A "Predict" box (any title that starts so), then, after at most a dropdown with its answer, the code cell that
#: measures or shows what was predicted.
PREDICTION = re.compile(r"^:::\{admonition\} Predict[^\n]*\n(?::class: [^\n]*\n)?.*?^:::\n\s*"
                        r"(?::::?\{dropdown\}[^\n]*\n.*?^:::\n\s*)?```\{code-cell\}", re.S | re.M)


@pytest.mark.parametrize("page", PAGES)
def test_every_teaching_section_asks_for_a_prediction_that_the_next_cell_answers(page):
    teaching = [(title, body) for title, body in sections((ROOT / "book" / f"{page}.md").read_text())
                if not NOT_TEACHING.match(title)]
    without = [title for title, body in teaching if not PREDICTION.search(body)]
    assert not without, (f"{page}.md: these sections ask for no prediction before a cell that answers it (a "
                         f"'Predict, then run' box followed by the code cell): {without}")


def test_the_prediction_finder_wants_a_cell_after_the_box():
    box = ":::{admonition} Predict, then run\n:class: tip\n\nHow many blocks?\n:::\n\n"
    assert PREDICTION.search(box + "```{code-cell} ipython3\nprint(4)\n```\n")
    assert PREDICTION.search(box + ":::{dropdown} Answer\nFour.\n:::\n\n```{code-cell} ipython3\nx\n```\n")
    assert not PREDICTION.search(box + "Some prose, and no cell.\n")
