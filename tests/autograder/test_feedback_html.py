"""Feedback HTML: student text is escaped, long lines wrap."""

import nbformat
from nbconvert import HTMLExporter

from autograder.feedback_html import MARKER, wrap_feedback_pages, wrap_long_lines

HOSTILE = "// </pre><script>alert('x')</script> " + "y[i] = alpha * x[i] + y[i]; " * 20


def _page() -> str:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("grade('saxpy')")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hint: " + HOSTILE + "\n")]
    nb.cells.append(cell)
    body, _ = HTMLExporter().from_notebook_node(nb)
    return body


def test_student_text_is_escaped_and_long_lines_wrap(tmp_path):
    page = _page()
    assert "<script>alert(" not in page and "&lt;script&gt;alert(" in page
    folder = tmp_path / "feedback" / "ada" / "a1"
    folder.mkdir(parents=True)
    (folder / "nb.html").write_text(page)
    [path] = wrap_feedback_pages(str(tmp_path / "feedback" / "*" / "a1"))
    wrapped = open(path).read()
    head = wrapped[: wrapped.lower().index("</head>")]
    assert MARKER in head and "white-space: pre-wrap" in head
    assert wrap_long_lines(wrapped) == wrapped  # once
