"""Naming a mistake from the output itself: the inputs, or the layout, under which the reference gives it.

A wrong output is often the right formula computed on the wrong data: a sum
one term short, an input read at index 0 whatever the sample, a matrix read
with its indices swapped, an input never read, the result stored
transposed.  Each of those is a change of the inputs (or of where the
output's elements lie) that the float64 reference can be run under; when the
kernel's output matches the reference under exactly one such change, and not
under the inputs as given, that change is the mistake, and it is said in
those words.  An exercise may add the common ways to get its formula
wrong (:class:`~autograder.exercise.FormulaMistake`: eps outside the square
root, the variance over c - 1), each a float64 reference of its own, tried
the same way.  Nothing here reads the kernel's source or its name: a
student's own bug is named the same way.

Where several changes give the output (a sum of one term, a filter of one
tap), the output cannot tell them apart and nothing is said; a change that
gives one shape's output may do so by coincidence, so a mistake is said only
once a second shape bears it out (:class:`MistakeFinder`).  Only NumPy on the
case's own inputs, a few dozen reference runs of a small case: cases past
:data:`MAX_INPUT_ELEMENTS` are left to the other hints.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .comparison import compare

if TYPE_CHECKING:
    from .exercise import Exercise, FormulaMistake

#: Cases whose inputs hold more elements than this are not tried (each hypothesis is one reference run).
MAX_INPUT_ELEMENTS = 1 << 17
#: Outputs of fewer elements are not tried: on a degenerate shape different mistakes give the same few values
#: (a filter read from its first tap and one not centred, on a signal of one element).
MIN_OUTPUT_ELEMENTS = 8
#: Failed shapes tried per grading before giving up (a shape where several mistakes fit says nothing).
SHAPES_TRIED = 4
#: Wrong values needed before a common factor is named (one or two agree with any factor).
FACTOR_ELEMENTS = 8
#: Unrolled loops whose missing remainder is named, and their steps in words (a hidden case's hint shows no number
#: that may be one of its sizes: :func:`autograder.case_plan.concealed`).
UNROLLS = (2, 4, 8, 16, 32)
_STEPS = {2: "two", 4: "four", 8: "eight", 16: "sixteen", 32: "thirty-two"}
#: Every hint here starts with these words, so that the verdict can prefer a named mistake to a symptom.
NAMED = "Compared with the reference, "
#: An axis in words, and the letters its index takes, as the hints write them.
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
INDEX_LETTERS = "ijklmn"
#: The key of a mistake made of two that give the same output (:func:`_term_left_out`).
TERM_LEFT_OUT = "term left out"


@dataclass(frozen=True)
class Hypothesis:
    """One way the output may have been computed wrongly: the words for it, and what the reference would give."""

    #: What the mistake is, whatever the shape (its words may hold the shape's sizes): another shape bears it out.
    key: tuple
    words: str
    #: -> {output: (expected array, error scale)} under the mistake, or None when it cannot be computed.
    outputs: Callable[[], dict | None]


def name_the_mistake(ex: Exercise, inputs: dict, expected: dict, scales: dict, got: dict) -> str | None:
    """The one mistake under which the reference gives ``got`` (each output of ``ex``), in words; '' if none or
    several do, None if the case is not tried (too large, or every value 0).  ``inputs`` are the case's pristine
    inputs, ``expected`` and ``scales`` the reference's outputs and error scales for them."""
    fitting = _fitting(ex, inputs, expected, scales, got)
    if fitting is None:
        return None
    return NAMED + fitting[0].words if len(fitting) == 1 else ""


def _fitting(ex: Exercise, inputs: dict, expected: dict, scales: dict, got: dict,
             key: tuple | None = None) -> list[Hypothesis] | None:
    """The mistakes under which the reference gives ``got``, as soon as two are found (then it is ambiguous);
    None if the case is not tried.  ``key``: try only the mistake of that key."""
    arrays = {a.name: inputs[a.name] for a in ex.args if a.role in ("in", "inout")
              and isinstance(inputs.get(a.name), np.ndarray)}
    if sum(x.size for x in arrays.values()) > MAX_INPUT_ELEMENTS:
        return None
    outs = {a.name: np.asarray(got[a.name], dtype=np.float64) for a in ex.outputs if a.name in got}
    if (len(outs) != len(ex.outputs) or all(not np.any(v) for v in outs.values())
            or sum(v.size for v in outs.values()) < MIN_OUTPUT_ELEMENTS):
        return None  # nothing back, every value 0 (the hints on the symptom say that better), or too few to tell
    wanted = set(key[1:]) if key is not None and key[0] == TERM_LEFT_OUT else {key}
    fitting: list[Hypothesis] = []
    for hypothesis in _hypotheses(ex, inputs, arrays, expected, scales, outs):
        if key is not None and hypothesis.key not in wanted:
            continue
        with np.errstate(all="ignore"):  # a wrong reference may overflow or divide by 0: it then matches nothing
            fits = _matches(ex, hypothesis, expected, scales, outs)
        if fits and all(hypothesis.words != other.words for other in fitting):
            fitting.append(hypothesis)
            if len(fitting) > 2 or (len(fitting) == 2 and _term_left_out(fitting) is None):
                break  # the output fits several mistakes: say nothing rather than guess
    term = _term_left_out(fitting)
    if key is not None and key[0] == TERM_LEFT_OUT:
        return [term] if term is not None else []  # borne out only where both give the output again
    return [term] if term is not None else fitting


def _term_left_out(fitting: list[Hypothesis]) -> Hypothesis | None:
    """One mistake for two that are one: an input all 0 and a scalar 0 that both give the output are the term that
    is their product, left out (weight_decay = 0 and W = 0 both drop weight_decay * W)."""
    if len(fitting) != 2:
        return None
    by_kind = {h.key[0]: h for h in fitting}
    if by_kind.get("zero") is not None and by_kind.get("index 0") is not None:
        return _read_at_index_zero(by_kind["zero"], by_kind["index 0"])
    array, scalar = by_kind.get("zero"), by_kind.get("scalar")
    if array is None or scalar is None or scalar.key[2] != 0:
        return None
    a, s = array.key[1], scalar.key[1]
    return Hypothesis((TERM_LEFT_OUT, array.key, scalar.key),
                      f"the output is what the right formula gives without its term in {s} and {a} ({s} = 0 and {a} "
                      f"all 0 give it alike, every other input as given): is the term with {s} times {a} added, and "
                      f"where it belongs?", array.outputs)


def _read_at_index_zero(never_read: Hypothesis, first_only: Hypothesis) -> Hypothesis | None:
    """One mistake for two that are one: an input all 0 and an input read at index 0 of one axis that give the same
    output.  The same input: the formula does not change when it is the same along that axis (a normalisation takes
    out a constant per row), so it never reaches the result.  Another input: the one all 0 holds indices (labels)
    into it, and index 0 read in their place is what both say."""
    name, other = never_read.key[1], first_only.key[1]
    index = _index(other, first_only.key[2], first_only.key[2] + 2)
    if other == name:
        why = (f"the formula does not change when {name} is the same along that index, so the output cannot tell "
               f"the two apart")
    elif "index 0 used in its place" in never_read.words:  # an integer input: indices
        why = f"{name} holds the indices into {other}, and index 0 read in their place gives both"
    else:
        return None
    return Hypothesis((TERM_LEFT_OUT, never_read.key, first_only.key),
                      f"{never_read.words} (Reading {other} as if {index} were always 0 gives the same output: {why}.)",
                      never_read.outputs)


class MistakeFinder:
    """:func:`name_the_mistake` over one grading's failed cases, within its cost.

    A mistake is said only once a second shape bears it out: on one shape a mistake may give the output by
    coincidence (alpha (A B + beta C) is A B + C where alpha beta = 1), on two it is the kernel's.  The first failed
    case of each shape is tried, until a mistake is borne out or :data:`SHAPES_TRIED` shapes were tried.
    """

    def __init__(self, ex: Exercise):
        self.ex = ex
        self.tried: set[str] = set()
        self.named = False
        self.candidate: tuple | None = None  # the mistake one shape showed, to be borne out by another

    def hint(self, label: str, inputs: dict, expected: dict, scales: dict, got: dict) -> str:
        """The mistake ``got`` shows on the case of shape ``label`` and an earlier shape showed too, or ''."""
        if self.named or label in self.tried or len(self.tried) >= SHAPES_TRIED:
            return ""
        if self.candidate is not None:
            borne_out = _fitting(self.ex, inputs, expected, scales, got, key=self.candidate)
            if borne_out is None:
                return ""  # not tried here (too large, or every value 0): no evidence either way
            self.tried.add(label)
            if len(borne_out) == 1:
                self.named = True
                return NAMED + borne_out[0].words  # in this shape's words
        fitting = _fitting(self.ex, inputs, expected, scales, got)
        if fitting is not None:  # tried: it counts against the budget
            self.tried.add(label)
            self.candidate = fitting[0].key if len(fitting) == 1 else None
        return ""


def names_a_mistake(hint: str) -> bool:
    """Whether ``hint`` is one of :func:`name_the_mistake`'s."""
    return hint.startswith(NAMED)


def _matches(ex: Exercise, hypothesis: Hypothesis, expected: dict, scales: dict, got: dict) -> bool:
    try:
        wrong = hypothesis.outputs()
    except Exception:  # noqa: BLE001 - a reference given inputs it was never written for: this mistake fits nothing
        return False
    if not wrong:
        return False
    differs = False
    for name, value in got.items():
        want, scale = wrong.get(name, (expected[name], scales[name]))
        want = np.asarray(want, dtype=np.float64)
        if want.shape != value.shape:
            return False
        same_inf = np.isinf(want) & (want == value)  # an infinity the mistake gives (log 0) is matched only exactly
        if np.any(np.isinf(want) & ~same_inf):
            return False
        known = ~np.isnan(want) & ~same_inf  # NaN: an element the mistake leaves unwritten, which must still hold the grader's NaN
        if not np.all(np.isnan(value[np.isnan(want)])) or not np.any(known):
            return False
        scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), want.shape)
        if compare(value[known], want[known], scale[known], ex.rtol, ex.atol)["n_bad"]:
            return False
        differs = differs or bool(compare(want, expected[name], scales[name], ex.rtol, ex.atol)["n_bad"])
    return differs  # a change that gives the right output names nothing


def _hypotheses(ex: Exercise, inputs: dict, arrays: dict, expected: dict, scales: dict,
                got: dict) -> Iterator[Hypothesis]:
    def under(cropped: bool = False, larger_only: bool = False, **changed) -> Callable[[], dict | None]:
        """The reference's outputs under ``changed``; ``cropped``: where they come out larger (a stride or a
        dilation of 1 gives more output pixels), their leading corner of the output's own shape -- what a kernel
        that indexes its own output with the changed value writes; ``larger_only``: None unless they do."""
        def outputs():
            given = {**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}, **changed}
            result = ex.reference(given)
            if larger_only and not any(np.shape(result[name]) != np.shape(got[name]) for name in got):
                return None
            rounding = ex.error_scale(given)  # the rounding of the formula the kernel computed, not of the right one
            fit = (lambda x, name: _corner(x, np.shape(got[name]))) if cropped else (lambda x, name: x)
            return {name: (fit(result[name], name), np.maximum(fit(rounding[name], name), scales[name]))
                    for name in got}
        return outputs

    yield from _sums_cut_short(ex, arrays, under)
    for mistake in ex.formula_mistakes:
        yield Hypothesis(("formula", mistake.key), f"the output is what the formula gives {mistake.words}",
                         _mistaken(mistake, inputs, scales, got))
    for name, x in arrays.items():
        yield from _inputs_misread(name, x, under, read_only=name not in ex.inout)
    sizes = {int(n) for x in [*arrays.values(), *expected.values()] for n in np.shape(x)}
    for arg in ex.args:
        value = inputs.get(arg.name)
        if arg.role == "scalar" and isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
            # A value that is a size of the tensors may be one (another value of a size is another problem): it is
            # tried only where the output comes out larger, as a stride or a dilation of 1 makes it, never a size.
            is_a_size = value in sizes
            for neutral in (0, 1):
                if value != neutral:
                    yield Hypothesis(
                        ("scalar", arg.name, neutral),
                        f"the output is what the right formula gives with {arg.name} = {neutral} (every other input "
                        f"as given): the kernel computes as if {arg.name} were {neutral} -- is {arg.name} read, and "
                        f"used where it belongs?", under(cropped=True, larger_only=is_a_size, **{arg.name: type(value)(neutral)}))
    for name, want in expected.items():
        yield from _stored_elsewhere(name, np.asarray(want, dtype=np.float64), scales[name], got)
    if any(reduction.kind == "max" for reduction in ex.reductions):
        for name, want in expected.items():
            yield Hypothesis(("from 0", name),
                             f"{name} is right wherever it is positive, and 0 where it should be negative: does the "
                             f"maximum start from 0 instead of from the first value (or -INFINITY)?",
                             lambda name=name, want=want: {name: (np.maximum(want, 0.0), scales[name])})
    yield from _scaled(expected, scales, got)


def _corner(x, shape: tuple) -> np.ndarray:
    """The leading corner of ``x`` of ``shape``, where ``x`` is at least as large along every axis; else ``x``."""
    x = np.asarray(x)
    if x.ndim != len(shape) or any(have < want for have, want in zip(x.shape, shape)):
        return x
    return x[tuple(slice(0, want) for want in shape)]


def _mistaken(mistake: FormulaMistake, inputs: dict, scales: dict, got: dict) -> Callable[[], dict | None]:
    """The outputs of ``mistake``'s formula on the case's inputs, with the right formula's rounding scale (the
    mistaken formula rounds on terms of the same size), or the largest of it and the mistake's own."""
    def outputs():
        result = mistake.reference({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()})
        own = mistake.error_scale(dict(inputs)) if mistake.error_scale is not None else {}
        if mistake.result_scale is not None:
            for name, scale in mistake.result_scale(result).items():
                own[name] = np.maximum(own[name], scale) if name in own else scale
        return {name: (result[name], np.maximum(scales[name], own[name]) if name in own else scales[name])
                for name in got if name in result}
    return outputs


def _index(name: str, axis: int, ndim: int) -> str:
    ordinal = "last" if axis == ndim - 1 and ndim > 2 else ORDINALS[axis] if axis < len(ORDINALS) else f"#{axis}"
    return f"the {ordinal} index of {name}"


def _kept(x: np.ndarray, axis: int, keep: slice) -> np.ndarray:
    """``x`` with every term along ``axis`` outside ``keep`` set to 0."""
    out = np.zeros_like(x)
    where = [slice(None)] * x.ndim
    where[axis] = keep
    out[tuple(where)] = x[tuple(where)]
    return out


def _sums_cut_short(ex: Exercise, arrays: dict, under) -> Iterator[Hypothesis]:
    """A sum over a reduced axis that leaves out terms: the last one, a remainder of an unrolled loop, the first
    one, or all but the first."""
    for reduction in ex.reductions:
        if reduction.kind != "sum":
            continue  # a maximum cannot be cut short by zeroing
        name, axes = reduction.operands[0]
        x = arrays.get(name)
        if x is None:
            continue
        for axis in axes:
            n = x.shape[axis]
            what = f"the sum over {_index(name, axis, x.ndim)}"
            if n < 2:
                continue
            if n == 2:  # one short and the first alone are one mistake here: say only what the output shows
                yield Hypothesis(("first alone", name, axis),
                                 f"the output is what {what} gives with its first term alone, the second of its two "
                                 f"left out: does the loop over that index run to its end?",
                                 under(**{name: _kept(x, axis, slice(0, 1))}))
                continue
            unrolled = [u for u in UNROLLS if n % u == 1 and n > u]  # these leave out the last term as well
            also = (f", or one unrolled by {' or '.join(_STEPS[u] for u in unrolled)} with no loop for the term that "
                    f"remains"
                    if unrolled else "")
            yield Hypothesis(("cut at the end", name, axis),
                             f"the output is what {what} gives without its last term: a loop over that index that "
                             f"stops one short (< n - 1, or a bound one too small){also}?",
                             under(**{name: _kept(x, axis, slice(0, n - 1))}))
            for kept in sorted({n - n % u for u in UNROLLS if n % u and n - n % u not in (0, n - 1)}):
                by = [u for u in UNROLLS if n - n % u == kept]
                unroll = f"unrolled by {_STEPS[by[0]]} ({_STEPS[by[0]]} terms a step)" if len(by) == 1 else "unrolled"
                yield Hypothesis(("cut at the end", name, axis),
                                 f"the output is what {what} gives with only its first {kept} of its {n} terms: a "
                                 f"loop {unroll} with no loop for the terms that remain?",
                                 under(**{name: _kept(x, axis, slice(0, kept))}))
            yield Hypothesis(("first left out", name, axis),
                             f"the output is what {what} gives without its first term: a loop that starts at 1 "
                             f"instead of 0?", under(**{name: _kept(x, axis, slice(1, n))}))
            yield Hypothesis(("first alone", name, axis),
                             f"the output is what {what} gives with its first term alone: does the loop over that "
                             f"index (every sample, row or position) run, and move past index 0?",
                             under(**{name: _kept(x, axis, slice(0, 1))}))
        for first, second in itertools.combinations(axes, 2):
            if x.shape[first] == x.shape[second] >= 2:
                both = _kept(_kept(x, first, slice(0, x.shape[first] - 1)), second, slice(0, x.shape[second] - 1))
                yield Hypothesis(("window one short", name, first, second),
                                 f"the output is what the sum gives without the last term of "
                                 f"{_index(name, first, x.ndim)} and of {_index(name, second, x.ndim)} (the last row "
                                 f"and column of a window): loops over them that stop one short?",
                                 under(**{name: both}))


def _inputs_misread(name: str, x: np.ndarray, under, read_only: bool) -> Iterator[Hypothesis]:
    """An input never read, read at index 0 of one of its axes, read with two indices swapped, or backwards.  An
    output read too (``read_only`` False) is not said never read: where the kernel writes it, it is not the input."""
    if read_only:
        yield Hypothesis(("zero", name),
                         f"the output is what the right formula gives with every value of {name} 0 (every other input "
                         f"as given): is {name} read, or index 0 used in its place?" if x.dtype.kind in "iu" else
                         f"the output is what the right formula gives with {name} all 0 (every other input as given): "
                         f"{name} never reaches the result -- is it read, and used where it belongs?",
                         under(**{name: np.zeros_like(x)}))
    if x.dtype.kind not in "fV" and x.dtype.name != "bfloat16":
        return  # integer inputs (labels, lengths) are indices, not terms to rearrange
    for axis in range(x.ndim):
        if x.shape[axis] >= 2:
            first = np.broadcast_to(np.take(x, [0], axis=axis), x.shape).copy()
            yield Hypothesis(("index 0", name, axis),
                             f"the output is what the right formula gives when {name} is read as if "
                             f"{_index(name, axis, x.ndim)} were always 0: that index's offset (a sample, batch, type "
                             f"or row stride) is missing where {name} is read?", under(**{name: first}))
    for first, second in itertools.combinations(range(x.ndim), 2):
        if x.shape[first] >= 2 and x.shape[second] >= 2:
            swapped = list(x.shape)
            swapped[first], swapped[second] = swapped[second], swapped[first]
            misread = np.ascontiguousarray(x).reshape(swapped).swapaxes(first, second).copy()
            yield Hypothesis(("swapped", name, first, second),
                             f"the output is what the right formula gives when {name} is read with "
                             f"{_index(name, first, x.ndim).split(' of ')[0]} and "
                             f"{_index(name, second, x.ndim).split(' of ')[0]} swapped (the order of its indices, or "
                             f"their strides, in the address of {name}): is {name} read as the transpose of what it "
                             f"is?", under(**{name: misread}))
    if x.ndim >= 2 and x.shape[-1] >= 2 and x.shape[-2] >= 2:
        yield Hypothesis(("rotated", name),
                         f"the output is what the right formula gives with {name} rotated by 180 degrees (read from "
                         f"[K-1-p][K-1-q] where [p][q] is meant): is {name} read backwards along its last two indices?",
                         under(**{name: np.ascontiguousarray(x[..., ::-1, ::-1])}))


def _stored_elsewhere(name: str, want: np.ndarray, scale, got: dict) -> Iterator[Hypothesis]:
    """The right values stored at the wrong places: the output's indices permuted, or an output one row and column
    smaller written packed from its start."""
    shape = want.shape
    full_scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), shape)
    letters = INDEX_LETTERS[:want.ndim]
    for order in itertools.permutations(range(want.ndim)):
        if list(order) == sorted(order) or all(shape[a] == 1 for a, o in zip(range(want.ndim), order) if a != o):
            continue
        stored = "][".join(letters[a] for a in order)
        meant = "][".join(letters)

        def permuted(order=order):
            return {name: (np.ascontiguousarray(want.transpose(order)).reshape(shape),
                           np.ascontiguousarray(full_scale.transpose(order)).reshape(shape))}
        yield Hypothesis(("stored permuted", name, order),
                         f"{name} holds the right values at the wrong places: the value of {name}[{stored}] is "
                         f"stored where {name}[{meant}] belongs (the indices of the store in the wrong order, e.g. "
                         f"row and column swapped).", permuted)
    if want.ndim >= 2 and shape[-1] >= 2 and shape[-2] >= 2:
        rows, cols = shape[-2] - 1, shape[-1] - 1
        smaller = want[..., :rows, :cols]

        def packed():
            flat = np.full(want.size, np.nan)  # past the smaller output: never written
            flat[:smaller.size] = smaller.ravel()
            scale_flat = np.zeros(want.size)
            scale_flat[:smaller.size] = full_scale[..., :rows, :cols].ravel()
            return {name: (flat.reshape(shape), scale_flat.reshape(shape))}
        yield Hypothesis(("packed smaller", name),
                         f"the values written are those of {name} with one row and one column fewer, stored one "
                         f"after another from its start (the rest never written): the output's size is computed one "
                         f"too small -- is the + 1 of the output-size formula missing?", packed)


def _scaled(expected: dict, scales: dict, got: dict) -> Iterator[Hypothesis]:
    """Every value the same factor away from the right one."""
    if len(got) != 1:
        return
    (name, value), = got.items()
    want = np.asarray(expected[name], dtype=np.float64)
    big = np.abs(want) > 1e-3 * max(float(np.abs(want).max(initial=0.0)), 1e-300)
    if np.count_nonzero(big) < FACTOR_ELEMENTS:
        return
    factor = float(np.median(value[big] / want[big]))
    if not np.isfinite(factor) or factor == 0 or abs(factor - 1) < 1e-3:
        return
    count = round(1 / factor) if abs(factor) < 1 else round(factor)
    if count >= 2 and abs((1 / factor if abs(factor) < 1 else factor) - count) < 1e-3 * count:
        words = (f"every value of {name} is 1/{count} of the right one: divided by {count} where it should not be "
                 f"(a mean where the sum is asked for?)" if abs(factor) < 1 else
                 f"every value of {name} is {count} times the right one: a division by {count} is missing (the sum "
                 f"where the mean is asked for?)")
    else:
        words = (f"every value of {name} is {factor:.4g} times the right one, the same factor everywhere: a constant "
                 f"factor of the formula is wrong or missing.")
    yield Hypothesis(("factor", name), words, lambda: {name: (want * factor, np.abs(factor) * np.broadcast_to(
        np.asarray(scales[name], dtype=np.float64), want.shape))})
