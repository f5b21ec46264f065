"""Sentences of the book about a topic's versions, written from its records (``KERNELS``).

A chapter that says how many versions a file has, or names them, takes the words
from here, so that adding a version to ``KERNELS`` changes the prose with it; the
page shows them with ``{glue:md}`name``` (:func:`book.prose.glue_phrase`).
"""

from __future__ import annotations

from collections.abc import Mapping

from kernels.runtime.versions import KernelVersion, ladder

NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve")


def in_words(count: int) -> str:
    """``count`` as the prose writes it: a word up to twelve, digits from 13 on."""
    return NUMBER_WORDS[count] if 0 <= count < len(NUMBER_WORDS) else f"{count:,}"


def has_versions(table: Mapping[str, KernelVersion]) -> str:
    """"`kernels/basics/reduction.cu` has four versions": the topic's file and how many rungs its ladder has."""
    rungs = ladder(table)
    if not rungs:
        raise ValueError("the table has no numbered versions to count")
    count = len(rungs)
    return f"`{rungs[0].source_file}` has {in_words(count)} version{'' if count == 1 else 's'}"

