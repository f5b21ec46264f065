"""What the emulator reports for a faulty launch, for the tests that read its message."""

from __future__ import annotations

import pytest


def reported(error: type[Exception], kernel, *args, **launch) -> str:
    """The message of the ``error`` that ``kernel(*args, **launch)`` raises; the test fails if it raises none."""
    with pytest.raises(error) as info:
        kernel(*args, **launch)
    return str(info.value)
