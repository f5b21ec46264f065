"""Writing so that a command stopped at any moment (Ctrl-C, a closed terminal) leaves nothing half-written.

* :func:`write_text` writes a file under a temporary name beside it and
  renames it into place: a reader sees the old file or the new one.
* :func:`replace_folder` puts a folder written under a temporary name in the
  place of an older one.
* :func:`uninterrupted` holds Ctrl-C back while a few writes that belong
  together (a student's gradebook entry, graded notebook and record) are
  made, and raises it once they are all done.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading

#: What a folder being written is called until it is complete (beside its final name).
PARTIAL_SUFFIX = ".partial"


def write_text(path: str, text: str) -> None:
    """``path`` holds ``text`` once this returns; never a part of it, whenever the process stops."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        if os.path.lexists(path) and not os.path.isfile(path):
            os.remove(path)  # e.g. a link of that name: replaced, never written through
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


def replace_folder(partial: str, final: str) -> None:
    """Put the complete folder ``partial`` where ``final`` is (an older ``final`` goes)."""
    old = f"{final}.old"
    if os.path.lexists(old):
        shutil.rmtree(old)
    if os.path.lexists(final):
        os.rename(final, old)
    os.rename(partial, final)
    if os.path.lexists(old):
        shutil.rmtree(old)


@contextlib.contextmanager
def uninterrupted():
    """Ctrl-C (SIGINT) waits until the block is done, then raises KeyboardInterrupt as usual.

    Only the main thread receives signals; elsewhere the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt
