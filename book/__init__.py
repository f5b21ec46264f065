"""What the chapters use beside the kernels, one job a module: the speed figures of a chapter, measured now
or read from a benchmark's results file (:mod:`book.speed_figures`), shown as tables (:mod:`book.speed_tables`),
plots (:mod:`book.speed_plots`) and sentences (:mod:`book.prose`); pictures (:mod:`book.figures`); the source a
page shows (:mod:`book.listings`); checks against a reference (:mod:`book.checks`).  A page imports its helpers
from here rather than defining them in a code cell, and names a results file's rows through the constants of
the benchmark that writes them (its contract, :class:`benchmarks.common.Contract`).

Nothing in ``kernels`` or ``autograder`` imports this package: the engine stays apart from the book.
"""
