"""Checks on the built HTML book: what a reader's browser shows, without a network.

Two kinds of check:

* :func:`raw_markdown_tables` reads the HTML (no browser): a markdown table that a code
  cell displayed but nothing rendered shows up as text holding its delimiter row
  (``|---|---:|``) outside any code listing.
* :func:`inspect_page` opens a page in headless Chromium with every network request
  refused, lets MathJax typeset, and reports what the reader would see: formulas
  rendered or left as TeX, the MathJax fonts that loaded, code listings wider than
  their box (clipped or scrolling), and the size at which each figure is drawn.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from bs4 import BeautifulSoup

# Pages Sphinx generates besides the chapters: nothing of the book's own on them.
GENERATED_PAGES = {"genindex.html", "search.html", "py-modindex.html"}

# A markdown table's delimiter row, |---|:--:|---:|, in at least two columns; left as
# text, Sphinx's smart quotes may have turned its "---" into dashes (— or –).
_DELIMITER_ROW = re.compile(r"\|\s*:?[-\u2013\u2014]+:?\s*\|\s*:?[-\u2013\u2014]+:?\s*\|")


def chromium() -> str | None:
    """The headless-capable Chromium on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


NO_CHROMIUM = (
    "Chromium is not installed, so pages cannot be opened in a browser here: "
    "`apt-get install chromium` (Debian's package; .ci/run installs it when it runs as root)"
)


def book_pages(html_dir: Path) -> list[Path]:
    """Every page of a built book (Sphinx's generated index and search pages, and the
    one-line page that redirects to the first chapter, left out)."""
    return sorted(
        p for p in Path(html_dir).rglob("*.html")
        if p.name not in GENERATED_PAGES and "_static" not in p.parts and not p.name.startswith("_")
        and "<body" in p.read_text(encoding="utf-8", errors="replace")
    )


def article_text_outside_code(html: str) -> str:
    """The text of a page's article with code listings, scripts and styles removed."""
    soup = BeautifulSoup(html, "html.parser")
    article = soup.find("article") or soup.body or soup
    for tag in article.find_all(["pre", "code", "script", "style", "textarea"]):
        tag.decompose()
    return article.get_text("\n")


def raw_markdown_tables(html: str) -> list[str]:
    """The lines of a page that are the delimiter rows of markdown tables left as text."""
    return [line.strip()[:120] for line in article_text_outside_code(html).splitlines()
            if _DELIMITER_ROW.search(line)]


# Runs in the page once it has loaded: waits for MathJax's first typesetting and for
# fonts, then writes what it found into a JSON <script> element that --dump-dom prints.
_PROBE = """
<script>
window.addEventListener("load", async () => {
  const found = {};
  try {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
    found.mathjax_version = (window.MathJax && MathJax.version) || null;
    found.math_elements = document.querySelectorAll(".math").length;
    found.formulas = document.querySelectorAll("mjx-container").length;
    found.formula_errors = document.querySelectorAll("mjx-merror").length;
    found.unrendered = [...document.querySelectorAll(".math")]
      .filter(e => !e.querySelector("mjx-container")).map(e => e.textContent.trim().slice(0, 80));
    await document.fonts.ready;
    found.fonts_loaded = [...document.fonts].filter(f => f.status === "loaded").map(f => f.family);
    found.fonts_failed = [...document.fonts].filter(f => f.status === "error").map(f => f.family);
    const article = document.querySelector(".bd-article") || document.body;
    found.listings = article.querySelectorAll("pre").length;
    found.overflowing_listings = [...article.querySelectorAll("pre")]
      .filter(p => p.offsetParent !== null && p.scrollWidth > p.clientWidth + 1)
      .map(p => p.textContent.split("\\n").reduce((a, b) => (a.length >= b.length ? a : b)).slice(0, 100));
    found.column_px = article.clientWidth;
    found.page_height_px = Math.max(document.documentElement.scrollHeight, document.body.scrollHeight);
    found.wide_formulas = [...article.querySelectorAll("mjx-container[display='true']")]
      .filter(m => m.offsetParent !== null && m.getBoundingClientRect().right > article.getBoundingClientRect().right + 1
                   && m.scrollWidth <= m.clientWidth + 1)
      .map(m => (m.getAttribute("aria-label") || m.textContent).slice(0, 80));
    found.clipped_formulas = [...article.querySelectorAll("mjx-container[display='true']")]
      .filter(m => m.offsetParent !== null && m.scrollWidth > m.clientWidth + 1)
      .map(m => (m.getAttribute("aria-label") || m.textContent).slice(0, 80));
    found.images = [...article.querySelectorAll(".cell_output img")].map(i => ({
      src: i.getAttribute("src"), natural_px: i.naturalWidth, shown_px: i.getBoundingClientRect().width }));
  } catch (error) {
    found.exception = String(error);
  }
  const out = document.createElement("script");
  out.type = "application/json";
  out.id = "built-html-probe";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>
"""


def inspect_page(page: Path, width: int = 1280, height: int = 2000, budget_ms: int = 20000) -> dict:
    """Open ``page`` in headless Chromium, offline, and return what the probe found.

    Every request for anything but a file is refused (an unreachable proxy, and no
    host name resolves), so whatever the page loads from the network is missing.
    The probe runs on a copy of the page written beside it (so its relative links
    resolve), removed afterwards.
    """
    browser = chromium()
    if browser is None:
        raise RuntimeError(NO_CHROMIUM)
    page = Path(page).resolve()
    html = page.read_text(encoding="utf-8")
    probed = page.with_name(f"_probe_{os.getpid()}_{page.name}")
    probed.write_text(html.replace("</body>", _PROBE + "</body>", 1), encoding="utf-8")
    try:
        with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
            result = subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", f"--user-data-dir={profile}",
                 "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
                 f"--window-size={width},{height}", f"--virtual-time-budget={budget_ms}",
                 "--dump-dom", probed.as_uri()],
                capture_output=True, text=True, timeout=180,
            )
    finally:
        probed.unlink(missing_ok=True)
    match = re.search(r'<script type="application/json" id="built-html-probe">(.*?)</script>', result.stdout, re.S)
    if match is None:
        raise RuntimeError(
            f"Chromium did not report on {page.name} (exit {result.returncode}): {result.stderr[-800:]}")
    return json.loads(match.group(1))
