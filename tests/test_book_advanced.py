"""Advanced boxes: material a first reading can skip, collapsed until the reader opens it.

An advanced box is an admonition whose title starts with "Advanced", of class ``dropdown``
(closed on the built page), whose text says that it can be skipped.  What a code cell shows
inside one (a kernel listing, a check's result) reaches it through ``{glue}`` directives, since
a code cell cannot sit inside an admonition: each glued name must be glued by the page, and on
the built page the box must hold what was glued, not an empty slot.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from book.chapters import CHAPTERS

ROOT = Path(__file__).resolve().parent.parent
BUILT = ROOT / "_build" / "html" / "book"
PAGES = [page for chapter in CHAPTERS for page in chapter.pages]
BOX = re.compile(r"^(:{3,})\{admonition\} (Advanced[^\n]*)\n(.*?)^\1\s*$", re.S | re.M)


def advanced_boxes(text: str) -> list[tuple[str, str]]:
    """``(title, body)`` of each advanced box of a page's source."""
    return [(m.group(2), m.group(3)) for m in BOX.finditer(text)]


def glued_names(body: str) -> list[str]:
    return re.findall(r"^```\{glue\} (\w+)\s*$", body, re.M)


def test_the_box_reader_finds_boxes_and_their_glue():
    text = (":::{admonition} Advanced: a kernel\n:class: dropdown\n\nSkip it on a first read.\n\n"
            "```{glue} listing\n```\n:::\n\n:::{admonition} Answers\n:class: dropdown\n1. x\n:::\n")
    [(title, body)] = advanced_boxes(text)
    assert title == "Advanced: a kernel" and glued_names(body) == ["listing"]


def test_the_convolution_chapter_boxes_its_densest_kernels():
    [(forward_title, forward)] = advanced_boxes((ROOT / "book" / "cnn_forward_speed.md").read_text())
    [(backward_title, backward)] = advanced_boxes((ROOT / "book" / "cnn_backward_kernels.md").read_text())
    assert "version 7" in forward_title
    assert glued_names(forward) == ["whole_sample_quad_unrolled", "conv2d_forward_whole_sample", "whole_sample_check"]
    assert "versions 8-10" in backward_title
    assert glued_names(backward) == ["conv2d_backward_weight_gemm", "conv2d_backward_split_sum",
                                     "implicit_gemm_backward_check"]


@pytest.mark.parametrize("page", PAGES)
def test_advanced_boxes_are_collapsed_skippable_and_glued_by_their_page(page):
    text = (ROOT / "book" / f"{page}.md").read_text()
    for title, body in advanced_boxes(text):
        assert body.startswith(":class: dropdown\n"), f"{page}.md, {title!r}: not a collapsed (dropdown) box"
        assert re.search(r"\bskip", body), f"{page}.md, {title!r}: does not say it can be skipped"
        for name in glued_names(body):
            assert f'show_in_box("{name}"' in text, f"{page}.md shows {name!r} in {title!r} but never glues it"


@pytest.mark.parametrize("page", PAGES)
def test_built_advanced_boxes_are_closed_and_hold_what_was_glued(page):
    html = BUILT / f"{page}.html"
    if not html.exists():
        pytest.skip("the book is not built here (`make book`)")
    from bs4 import BeautifulSoup

    boxes = advanced_boxes((ROOT / "book" / f"{page}.md").read_text())
    soup = BeautifulSoup(html.read_text(), "html.parser")
    built = [a for a in soup.select("div.admonition") if a.select_one(".admonition-title")
             and a.select_one(".admonition-title").get_text(strip=True).startswith("Advanced")]
    assert len(built) == len(boxes)
    for box, (title, body) in zip(built, boxes):
        assert "dropdown" in box.get("class", []), title
        assert len(box.select("div.highlight, pre")) >= len(glued_names(body)), (
            f"{page}.html, {title!r}: fewer listings than glued outputs")
    if page == "cnn_forward_speed":
        [forward] = built
        assert "__global__ void conv2d_forward_whole_sample" in forward.get_text()
    if page == "cnn_backward_kernels":
        [backward] = built
        assert "\nconv2d_backward_weight_gemm(const float* X" in backward.get_text()
        assert "relative error dW" in backward.get_text()
