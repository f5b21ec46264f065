"""What the chapters use beside the kernels: figures (:mod:`book.figures`) and the speed figures
of a chapter, measured now or read from a benchmark's results file (:mod:`book.speed_figures`).

Nothing in ``kernels`` or ``autograder`` imports this package: the engine stays apart from the book.
"""
