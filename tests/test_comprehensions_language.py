"""The index-notation language: parsing, the semantic checks (each error at its line and column),
and range inference as Tensor Comprehensions defines it.  No kernel runs here."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.index_notation import TcSemanticError, TcShapeError, TcSyntaxError, check_text, compile_tc
from kernels.index_notation.examples import EXAMPLES, INVALID
from kernels.index_notation.runner import bind_sizes, check_ranges


def error_of(text):
    with pytest.raises((TcSyntaxError, TcSemanticError)) as info:
        check_text(text)
    return info.value


def at(err, line, column):
    assert (err.line, err.column) == (line, column), str(err)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_checks(name):
    cd = check_text(EXAMPLES[name].text)
    assert cd.name == name and cd.outputs


# ---------------------------------------------------------------------- the three invalid examples
def test_sgemm_as_written_reads_c_before_writing_it():
    err = error_of(INVALID["sgemm"][0])
    at(err, 2, 18)
    assert "C is read here before any statement has written it" in err.message
    assert "input" in err.hint


def test_conv1d_as_written_has_no_reduction_operator():
    err = error_of(INVALID["conv1d"][0])
    at(err, 2, 14)  # the first use of x
    assert "'x'" in err.message and "no reduction operator" in err.message
    assert "+=!" in err.hint


def test_runtime_strides_cannot_take_part_in_range_inference():
    err = error_of(INVALID["sconv2d"][0])
    at(err, 2, 26)  # the 'sh' of sh * h + kh
    assert "runtime scalar 'sh'" in err.message
    assert "literal" in err.hint


@pytest.mark.parametrize("name", sorted(INVALID))
def test_corrected_forms_check(name):
    check_text(INVALID[name][1])


# ---------------------------------------------------------------------- the other errors
def test_syntax_error_at_the_unexpected_token():
    err = error_of("def f(float(N) X) -> (Y) {\n    Y(i) = X(i) +* 2\n}")
    assert isinstance(err, TcSyntaxError)
    at(err, 2, 18)
    assert "unexpected '*'" in err.message


def test_syntax_error_at_the_end_of_the_text():
    err = error_of("def f(float(N) X) -> (Y) {\n    Y(i) = X(i)")
    assert isinstance(err, TcSyntaxError) and "ends too early" in err.message
    assert err.line == 2


def test_syntax_error_for_a_stray_character():
    err = error_of("def f(float(N) X) -> (Y) { Y(i) = X(i) @ 2 }")
    assert isinstance(err, TcSyntaxError)
    at(err, 1, 40)


#: (text, line, column, words of the message, words of the hint): an error the checks must find, at its place.
ERRORS = [
    pytest.param("def mv(float(M,K) A, float(L) x) -> (C) {\n    C(i) +=! A(i,k) * x(k)\n}", 2, 25,
                 ("index 'k' ranges over 0:K in A(i,k)", "0:L in x(k)"), (), id="inconsistent ranges of one index"),
    pytest.param("def f(float(M) A) -> (C) {\n    C(i) = 1\n}", 2, 7,
                 ("cannot infer the range of index 'i'",), ("where i in",), id="index that cannot be bound"),
    pytest.param("def f(float(N) X) -> (Y, Z) {\n    Z(i) = Y(i) + X(i)\n    Y(i) = X(i)\n}", 2, 12,
                 ("Y is read here before any statement has written it",), (), id="output read before written"),
    pytest.param("def f(float(M,K) A) -> (C) {\n    C(i) += A(i,k)\n}", 2, 10,
                 ("'+=' adds to C",), ("+=!",), id="accumulating into an unwritten output"),
    pytest.param("def t(float(N,N) x) -> (a) {\n    a(i,j) = x(i,j)\n    a(i,j) = a(j,i)\n}", 3, 14,
                 ("in-place",), (), id="in-place transpose"),
    pytest.param("def f(float(M,K) A) -> (C) {\n    C(i) +=! A(i)\n}", 2, 14,
                 ("A has 2 dimensions but is accessed with 1 index",), (), id="wrong number of indices"),
    pytest.param("def f(float(M) A) -> (C) {\n    C(i) = softplus(A(i))\n}", 2, 12,
                 ("unknown function or tensor 'softplus'",), (), id="unknown function"),
    pytest.param("def f(float(M) A) -> (C) { A(i) = 1 }", 1, 28, ("'A' is an input",), (), id="writing an input"),
    pytest.param("def f(float(M) A, float b) -> (C) { C(i) = A(i) * b(i) }", 1, 51,
                 ("unknown function or tensor 'b'",), (), id="indexing a scalar"),
    pytest.param("def f(float(M) A) -> (C) { C(i) = A(i + 0.5) }", 1, 41, ("an index must be an integer",), (),
                 id="fractional index"),
    pytest.param("def f(float(M,K) A) -> (C) { C(i) +=! A(i, k * k) }", 1, 46, ("affine",), (), id="non-affine index"),
    pytest.param("def f(float(M) A) -> (C) { C(i) = A(i) where k in 0:2 }", 1, 46, ("does not use",), (),
                 id="range of an unused index"),
    pytest.param("def f(float(M) A, float(M) A) -> (C) { C(i) = A(i) }", 1, 28, ("declared twice",), (),
                 id="parameter declared twice"),
    pytest.param("def f(float(M) for) -> (C) { C(i) = for(i) }", 1, 16, ("reserved",), (),
                 id="reserved word as a name"),
]


@pytest.mark.parametrize("text, line, column, message_words, hint_words", ERRORS)
def test_error_at_its_line_and_column(text, line, column, message_words, hint_words):
    err = error_of(text)
    at(err, line, column)
    for words in message_words:
        assert words in err.message
    for words in hint_words:
        assert words in err.hint


def test_a_trailing_newline_is_valid():
    check_text("def f(float(M) A) -> (C) { C(i) = A(i) }\n")


def test_message_shows_the_line_and_a_caret():
    err = error_of(INVALID["conv1d"][0])
    text = str(err)
    assert text.startswith("line 2, column 14:")
    assert "    O(i) = K(x) * I(i + x)\n" in text and "\n" + " " * 17 + "^" in text


# ---------------------------------------------------------------------- range inference
def test_conv1d_ranges_as_tc_defines_them():
    cd = check_text(EXAMPLES["conv1d"].text)
    (cs,) = cd.statements
    assert str(cs.ranges["x"][0]) == "0" and str(cs.ranges["x"][1]) == "N - 1"
    assert str(cs.ranges["i"][0]) == "0" and str(cs.ranges["i"][1]) == "M - N"
    assert [str(d) for d in cd.outputs[0].dims] == ["M - N + 1"]
    assert "i in [0, M - N]" in cd.describe_ranges()


def test_maxpool_where_clause_and_output_shape():
    cd = check_text(EXAMPLES["maxpool2x2"].text)
    (cs,) = cd.statements
    assert cs.reduction == ("kw", "kh") and str(cs.ranges["kw"][1]) == "1"
    dims = cd.outputs[0].dims
    for H, W in [(2, 2), (9, 8), (28, 27), (3, 5)]:
        env = {"B": 1, "C": 1, "H": H, "W": W}
        assert (dims[2].eval(env), dims[3].eval(env)) == (H // 2, W // 2)


def test_conv2d_and_strided_conv_output_shapes():
    cd = check_text(EXAMPLES["conv2d"].text)
    assert [str(d) for d in cd.outputs[0].dims] == ["B", "OP", "H - KH + 1", "W - KW + 1"]
    cd = check_text(EXAMPLES["sconv2d"].text)
    dims = cd.outputs[0].dims
    for H, K in [(3, 3), (11, 3), (16, 2), (10, 1)]:
        assert dims[2].eval({"H": H, "KH": K}) == (H - K) // 2 + 1


def test_gather_index_is_not_bounds_checked_and_says_so():
    cd = check_text(EXAMPLES["gather"].text)
    assert cd.statements[0].unchecked and "not checked: X(I(i,j))" in cd.describe_ranges()


def test_fcrelu_statements_share_ranges():
    cd = check_text(EXAMPLES["fcrelu"].text)
    assert len(cd.statements) == 3
    assert all(str(cs.ranges["n"][1]) == "N - 1" for cs in cd.statements)
    assert cd.statements[0].reduction == ("m",) and not cd.statements[1].reduction


def test_several_definitions_pick_one_by_name():
    text = EXAMPLES["mv"].text + "\n" + EXAMPLES["conv1d"].text
    assert check_text(text, "conv1d").name == "conv1d"
    with pytest.raises(KeyError, match="no definition 'nope'"):
        check_text(text, "nope")


# ---------------------------------------------------------------------- shapes at run time
def test_sizes_come_from_the_arrays_and_must_agree():
    prog = compile_tc(EXAMPLES["mv"].text).program
    assert bind_sizes(prog, {"A": np.zeros((3, 5)), "x": np.zeros(5)}) == {"M": 3, "K": 5}
    with pytest.raises(TcShapeError, match=r"argument 'x': dimension 0 is K = 5 \(from A.shape\[1\]\), got 4"):
        bind_sizes(prog, {"A": np.zeros((3, 5)), "x": np.zeros(4)})
    with pytest.raises(TcShapeError, match="argument 'A' must have 2 dimensions"):
        bind_sizes(prog, {"A": np.zeros(3), "x": np.zeros(4)})


def test_empty_range_for_the_given_sizes_names_the_index():
    prog = compile_tc(EXAMPLES["conv1d"].text).program
    with pytest.raises(TcShapeError, match=r"index 'i' has the empty range \[0, M - N\] = \[0, -2\]"):
        check_ranges(prog, {"M": 3, "N": 5})


def test_bad_arguments_are_named():
    mv = compile_tc(EXAMPLES["mv"].text)
    with pytest.raises(TypeError, match="missing argument x"):
        mv(np.zeros((2, 2), np.float32))
    with pytest.raises(TypeError, match="has no argument 'y'"):
        mv(np.zeros((2, 2), np.float32), y=1)
    gather = compile_tc(EXAMPLES["gather"].text)
    with pytest.raises(TcShapeError, match="argument 'I' is declared int"):
        gather(np.zeros(4, np.float32), np.zeros((2, 2), np.float32))
