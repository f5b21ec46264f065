"""The book's benchmarks: one module per chapter, each with ``measure()`` and a ``main()``.

Run one on a GPU machine with ``python3 -m benchmarks.<name>`` (``make bench`` runs them
all); each writes ``benchmarks/results/<name>.json`` through :mod:`benchmarks.common`,
and the chapters read those files (:mod:`book.speed_figures`) when built without a GPU.
Each declares what the book reads in its file, as constants it writes its rows with and
a :class:`~benchmarks.common.Contract` of them; the book names rows only through those.
"""
