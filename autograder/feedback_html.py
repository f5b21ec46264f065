"""The feedback pages students read: long lines wrap instead of scrolling sideways.

nbgrader writes each student's feedback as HTML through nbconvert, which
escapes the text of every output (so a student's kernel source or its error
lines show as text, never as markup). The outputs are ``<pre>`` blocks, which
do not wrap; :func:`wrap_long_lines` adds a style sheet that makes them wrap.
"""

from __future__ import annotations

import glob
import os

MARKER = "dlk-feedback-wrap"
STYLE = (f'<style id="{MARKER}">\n'
         "/* Feedback lines (hints, compiler messages) wrap at the page width, not scroll sideways. */\n"
         "pre, .output_text pre, .jp-OutputArea-output pre {\n"
         "  white-space: pre-wrap; overflow-wrap: anywhere; word-break: normal; overflow-x: visible;\n"
         "}\n</style>\n")


def wrap_long_lines(page: str) -> str:
    """``page`` with the wrapping style in its ``<head>`` (once)."""
    if MARKER in page:
        return page
    head_end = page.lower().find("</head>")
    if head_end < 0:
        return STYLE + page
    return page[:head_end] + STYLE + page[head_end:]


def wrap_feedback_pages(folder_glob: str) -> list[str]:
    """Apply :func:`wrap_long_lines` to every ``*.html`` under the folders ``folder_glob`` matches."""
    paths = sorted(glob.glob(os.path.join(folder_glob, "*.html")))
    for path in paths:
        with open(path, encoding="utf-8") as f:
            page = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(wrap_long_lines(page))
    return paths
