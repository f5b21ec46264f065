"""The built book as a reader's browser shows it, offline.

Two sets of tests:

* a one-page book built here with the project's own ``_config.yml`` and ``_static``
  (about half a minute): a formula, a table that a code cell displays as markdown, and
  a listing wider than the column, each checked in the HTML and in headless Chromium
  with every network request refused;
* every page of the whole book in ``_build/html`` when ``make book`` has built it
  (skipped, saying so, when it has not): no raw markdown table, every formula
  typeset offline and within the column, no listing that overflows its box, and no
  page taller than a reader takes in at one sitting (the length budget).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from built_html import NO_CHROMIUM, book_pages, chromium, inspect_page, raw_markdown_tables

ROOT = Path(__file__).resolve().parent.parent
BUILT_BOOK = ROOT / "_build" / "html"

needs_chromium = pytest.mark.skipif(chromium() is None, reason=NO_CHROMIUM)

# A long line, as a kernel listing has: it must wrap, not overflow its box.
LONG_LINE = "bytes_per_launch = [" + ", ".join(str(1000 * i) for i in range(1, 30)) + "]"

PAGE = textwrap.dedent(
    f"""\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---

    # A page with a formula

    Inline, $y = W x + b$, and displayed:

    $$
    \\frac{{\\partial E}}{{\\partial x_i}} = \\sum_j \\frac{{\\partial E}}{{\\partial y_j}} W_{{ji}}
    $$

    ```{{code-cell}} ipython3
    from IPython.display import Markdown, display

    display(Markdown("| kernel | GB/s |\\n|---|---:|\\n| copy | 3,909 |\\n| vector_add | 3,584 |"))
    ```

    ```{{code-cell}} ipython3
    {LONG_LINE}
    ```
    """
)


@pytest.fixture(scope="module")
def tiny_book(tmp_path_factory) -> Path:
    """A one-page book built with the project's configuration; its HTML folder."""
    source = tmp_path_factory.mktemp("tiny_book")
    shutil.copy(ROOT / "_config.yml", source / "_config.yml")
    shutil.copytree(ROOT / "_static", source / "_static")
    (source / "_toc.yml").write_text("format: jb-book\nroot: page\n")
    (source / "page.md").write_text(PAGE)
    result = subprocess.run(
        [sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build", "--all", str(source)],
        capture_output=True, text=True, timeout=600, cwd=source,
    )
    html = source / "_build" / "html"
    assert result.returncode == 0 and (html / "page.html").exists(), (
        f"the one-page book did not build:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return html


def test_mathjax_is_served_with_the_book(tiny_book):
    """The page loads MathJax 3 from the book's own _static folder, not from a CDN."""
    html = (tiny_book / "page.html").read_text()
    assert "cdn.jsdelivr.net" not in html and "mathjax@" not in html
    assert 'src="_static/mathjax/tex-chtml.js' in html
    assert (tiny_book / "_static" / "mathjax" / "tex-chtml.js").is_file()
    fonts = list((tiny_book / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    assert fonts, "MathJax's fonts were not copied into the book"


@needs_chromium
def test_formula_renders_offline(tiny_book):
    seen = inspect_page(tiny_book / "page.html")
    assert "exception" not in seen, seen
    assert seen["mathjax_version"] and seen["mathjax_version"].startswith("3."), seen
    assert seen["math_elements"] == 2 and seen["formulas"] == 2, seen
    assert seen["unrendered"] == [] and seen["formula_errors"] == 0, seen
    assert any(family.startswith("MJXTEX") for family in seen["fonts_loaded"]), (
        f"MathJax typeset without its own fonts (loaded: {seen['fonts_loaded']}, failed: {seen['fonts_failed']})")


def test_markdown_table_from_a_code_cell_is_a_table(tiny_book):
    html = (tiny_book / "page.html").read_text()
    assert raw_markdown_tables(html) == []
    outputs = BeautifulSoup(html, "html.parser").select("div.cell_output table")
    assert len(outputs) == 1, "the code cell's markdown table is not an HTML table"
    cells = [[cell.get_text(strip=True) for cell in row.find_all(["th", "td"])] for row in outputs[0].find_all("tr")]
    assert cells == [["kernel", "GB/s"], ["copy", "3,909"], ["vector_add", "3,584"]]


def test_raw_table_detector_finds_one():
    """The check above would notice a table left as text (smart quotes turn --- into dashes)."""
    left_as_text = "<article><p>| kernel | GB/s |\n|—|—:|\n| copy | 3,909 |</p></article>"
    assert raw_markdown_tables(left_as_text) == ["|—|—:|"]
    in_a_listing = "<article><pre>rows = ['| a | b |', '|---|---:|']</pre></article>"
    assert raw_markdown_tables(in_a_listing) == []


@needs_chromium
def test_long_listing_lines_wrap(tiny_book):
    seen = inspect_page(tiny_book / "page.html")
    assert seen["listings"] >= 2, seen
    assert seen["overflowing_listings"] == [], seen


# --- the whole book, when it has been built ----------------------------------------------

BUILT_PAGES = book_pages(BUILT_BOOK) if (BUILT_BOOK / "index.html").exists() else []
NOT_BUILT = "the book is not built here (`make book` builds it into _build/html); the one-page book above covers the configuration"


# In a 1280-pixel-wide window the column is about 680 pixels wide.
MIN_FIGURE_SCALE = 0.7
#: The length budget: no page of the book taller than this at 1280 pixels wide (with its dropdowns closed, as a
#: reader first sees it). Longer pages split by what a student learns in one sitting.
MAX_PAGE_HEIGHT_PX = 25_000
_SEEN: dict[Path, dict] = {}


def _inspected(page: Path) -> dict:
    """What Chromium reports of a built page, once per page for all the tests below."""
    if page not in _SEEN:
        _SEEN[page] = inspect_page(page)
    return _SEEN[page]


def _page_id(page: Path) -> str:
    return str(page.relative_to(BUILT_BOOK))


@pytest.mark.skipif(not BUILT_PAGES, reason=NOT_BUILT)
@pytest.mark.parametrize("page", BUILT_PAGES, ids=_page_id)
def test_built_page_has_no_raw_markdown_table(page):
    assert raw_markdown_tables(page.read_text()) == []


@needs_chromium
@pytest.mark.skipif(not BUILT_PAGES, reason=NOT_BUILT)
@pytest.mark.parametrize("page", BUILT_PAGES, ids=_page_id)
def test_built_page_renders_offline(page):
    """Formulas typeset with the book's own MathJax and fonts and within the column; no listing overflows its box."""
    seen = _inspected(page)
    assert "exception" not in seen, seen
    assert seen["unrendered"] == [] and seen["formula_errors"] == 0, seen["unrendered"][:5]
    if seen["math_elements"]:
        assert seen["formulas"] >= seen["math_elements"], seen
        assert any(family.startswith("MJXTEX") for family in seen["fonts_loaded"]), seen["fonts_failed"]
    assert seen["overflowing_listings"] == [], seen["overflowing_listings"]
    assert seen["clipped_formulas"] == [] and seen["wide_formulas"] == [], (
        f"displayed formulas wider than the column (split them into lines): "
        f"{seen['clipped_formulas'] + seen['wide_formulas']}")
    # A figure drawn much wider than the column is shrunk until its labels are a few
    # pixels high: figures are sized for the page (at most about 9 inches wide).
    shrunk = [(i["src"], i["natural_px"], round(i["shown_px"])) for i in seen["images"]
              if i["natural_px"] and i["shown_px"] < MIN_FIGURE_SCALE * i["natural_px"]]
    assert shrunk == [], f"figures shown below {MIN_FIGURE_SCALE:.0%} of their size (src, drawn px, shown px): {shrunk}"


@needs_chromium
@pytest.mark.skipif(not BUILT_PAGES, reason=NOT_BUILT)
@pytest.mark.parametrize("page", BUILT_PAGES, ids=_page_id)
def test_built_page_fits_the_length_budget(page):
    height = _inspected(page)["page_height_px"]
    assert height <= MAX_PAGE_HEIGHT_PX, (
        f"{_page_id(page)} is {height:,} px tall at 1280 px wide, over the budget of {MAX_PAGE_HEIGHT_PX:,}: split it "
        f"by what a student learns in one sitting, or move a tuning history into an advanced box or an appendix page")


@needs_chromium
def test_the_probe_measures_a_page_and_finds_a_formula_wider_than_the_column(tmp_path_factory, tiny_book):
    seen = _inspected(tiny_book / "page.html")
    assert 500 < seen["page_height_px"] < MAX_PAGE_HEIGHT_PX, seen["page_height_px"]
    wide = tiny_book / "wide.html"
    formula = "+".join(f"x_{{{i}}}" for i in range(120))
    html = (tiny_book / "page.html").read_text().replace("</article>", f'<div class="math notranslate nohighlight">\\[{formula}\\]</div></article>', 1)
    wide.write_text(html)
    try:
        seen = inspect_page(wide)
    finally:
        wide.unlink()
    assert seen["clipped_formulas"] or seen["wide_formulas"], seen
