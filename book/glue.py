"""Handing what a cell shows to a place of the page's text, such as a box the prose opens.

A cell that computes a listing or a result for a box (an advanced section, say) gives it a
key; the box shows it with a ``{glue:}`` directive.  Sentences go through
:func:`book.prose.glue_phrase`, which shows them inline.
"""

from __future__ import annotations

from IPython.display import display


def show_in_box(key: str, shown) -> None:
    """Give ``shown`` (a listing, a result) to the page under ``key``; run as a plain script
    (``book/run_chapter.py``, no myst-nb) there is no page, and it is shown where the cell runs."""
    try:
        from myst_nb import glue
    except ImportError:
        display(shown)
        return
    glue(key, shown, display=False)
