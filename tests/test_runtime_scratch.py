"""Scratch kept between launches (kernels/runtime/scratch.py): one buffer per purpose, shape, dtype and stream."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.runtime import launching_on
from kernels.runtime.scratch import kept_buffer

pytestmark = pytest.mark.backend


def test_a_purpose_gets_its_own_buffer_and_gets_it_again(backend):
    partials = kept_buffer("test partials", (4, 8))
    assert kept_buffer("test partials", (4, 8)) is partials
    # a launch that reads one buffer while it writes another of the same shape must get two
    assert kept_buffer("test products", (4, 8)) is not partials
    assert kept_buffer("test partials", (8, 4)) is not partials
    assert kept_buffer("test partials", (4, 8), np.uint32) is not partials


def test_a_zeroed_buffer_starts_at_zero_and_is_not_zeroed_again(backend):
    counters = kept_buffer("test counters", (16,), np.uint32, zeroed=True)
    assert counters.dtype == np.uint32 and not counters.get().any()
    counters.set(np.arange(16, dtype=np.uint32))
    # the kernels given it leave it zero; the runtime never clears it behind their back
    np.testing.assert_array_equal(kept_buffer("test counters", (16,), np.uint32, zeroed=True).get(), np.arange(16))


def test_two_streams_never_share_a_buffer(backend):
    mine = kept_buffer("test partials", (3,))
    with launching_on(0, backend=backend):
        assert kept_buffer("test partials", (3,)) is not mine
