"""Folders of the grader's cache that every grading process of a host shares, lent read-only to the children."""

from __future__ import annotations

import os
from pathlib import Path


def lent_folder(cache_base: Path, name: str) -> Path | None:
    """``name`` below ``cache_base``, made if missing and readable by the sandbox's uids; None unless it is a folder
    of this user's own (a link, or a folder someone else made, may hold what no grading process wrote)."""
    made = cache_base / name
    made.mkdir(parents=True, exist_ok=True)
    if made.is_symlink() or not made.is_dir() or made.stat().st_uid != os.getuid():
        return None
    os.chmod(made, 0o755)  # the sandbox's processes run as a uid of their own: they read, never write
    return made
