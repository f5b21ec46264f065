"""The feedback pages students (and the instructor) open: the submission's own HTML made inert, long lines wrapped.

nbgrader writes each student's feedback as HTML through nbconvert.  The text
of every output is escaped, but a notebook carries HTML of its own that
nbconvert passes through as it is: the student's markdown cells
(``<img onerror=...>``, ``<iframe srcdoc=...>`` render live) and any saved
``text/html`` output.  Whoever opens the page -- the student, and the
instructor reviewing it -- would run that script.  So every page is rebuilt
after nbgrader wrote it (:func:`finish_feedback_page`):

* its body is cleaned with bleach (the sanitizer nbconvert itself depends on,
  pinned in ``requirements.lock``) against an allow-list of tags and
  attributes: text, headings, lists, tables, code, links (``http``, ``https``,
  ``mailto`` and anchors) and images embedded as data (PNG, JPEG, GIF, WebP);
  no script, frame, object, form, style, event handler or ``javascript:`` URL
  survives, nor a comment;
* its head keeps only nbconvert's own style sheets and the page's title, under
  a ``Content-Security-Policy`` that allows no script, no frame, no request to
  any address (``default-src 'none'``), inline styles and embedded images
  only: should anything slip past the sanitizer, the browser still runs and
  loads nothing;
* ``<pre>`` blocks, which do not wrap, get a style that makes them wrap.

:func:`finish_feedback_pages` applies it to every page of an assignment.
"""

from __future__ import annotations

import glob
import html
import os
import re

import bleach
from bs4 import BeautifulSoup

MARKER = "dlk-feedback-wrap"
STYLE = (f'<style id="{MARKER}">\n'
         "/* Feedback lines (hints, compiler messages) wrap at the page width, not scroll sideways. */\n"
         "pre, .output_text pre, .jp-OutputArea-output pre {\n"
         "  white-space: pre-wrap; overflow-wrap: anywhere; word-break: normal; overflow-x: visible;\n"
         "}\n</style>\n")

#: What the page may do: nothing but show itself (no script, frame, font, request or form).
CONTENT_SECURITY_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
                           "form-action 'none'; frame-src 'none'; object-src 'none'; script-src 'none'")
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'

ALLOWED_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "ol", "p", "pre", "q", "s", "samp",
    "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u",
    "ul", "var",
})
#: Attributes every allowed tag may carry, and those of one tag (checked again by :func:`_attribute_allowed`).
COMMON_ATTRIBUTES = frozenset({"class", "id", "title", "lang", "dir"})
TAG_ATTRIBUTES = {"a": {"href", "name"}, "img": {"src", "alt", "width", "height"}, "td": {"colspan", "rowspan"},
                  "th": {"colspan", "rowspan", "scope"}, "ol": {"start"}}
_SAFE_LINK = re.compile(r"^(?:https?://|mailto:|#)", re.I)
_EMBEDDED_IMAGE = re.compile(r"^data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$", re.I)


def _attribute_allowed(tag: str, name: str, value: str) -> bool:
    if name in COMMON_ATTRIBUTES:
        return True
    if name not in TAG_ATTRIBUTES.get(tag, ()):
        return False
    if tag == "a" and name == "href":
        return bool(_SAFE_LINK.match(value.strip()))
    if tag == "img" and name == "src":
        return bool(_EMBEDDED_IMAGE.match(value.strip()))
    return True


def sanitized_body(fragment: str) -> str:
    """``fragment`` with only allowed tags and attributes (the rest removed, their text kept as text)."""
    return bleach.clean(fragment, tags=ALLOWED_TAGS, attributes=_attribute_allowed, protocols={"http", "https", "mailto", "data"},
                        strip=True, strip_comments=True)


def finish_feedback_page(page: str) -> str:
    """The page rebuilt: nbconvert's styles and title, the policy, the wrapping style, the body sanitized."""
    soup = BeautifulSoup(page, "html.parser")
    title = soup.title.get_text() if soup.title else "Feedback"
    styles = [str(tag) for tag in (soup.head.find_all("style") if soup.head else []) if tag.get("id") != MARKER]
    body = soup.body.decode_contents() if soup.body else page
    return ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n" + CSP_META + "\n"
            f"<title>{html.escape(title)}</title>\n" + "\n".join(styles) + "\n" + STYLE + "</head>\n<body>\n"
            + sanitized_body(body) + "\n</body>\n</html>\n")


def finish_feedback_pages(folder_glob: str) -> list[str]:
    """Apply :func:`finish_feedback_page` to every ``*.html`` under the folders ``folder_glob`` matches."""
    paths = sorted(glob.glob(os.path.join(folder_glob, "*.html")))
    for path in paths:
        with open(path, encoding="utf-8") as f:
            page = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(finish_feedback_page(page))
    return paths
