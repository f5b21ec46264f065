"""Text -> syntax tree, with a lark grammar (LALR, so errors are found at the first wrong token).

The language is the one of Tensor Comprehensions (Vasilache et al., 2018)::

    def mv(float(M,K) A, float(K) x) -> (C) {
        C(i) +=! A(i,k) * x(k)     # one statement per line; '#' (or '//') starts a comment
    }

Statements need no separator (a ``;`` is allowed).  The grammar accepts any
expression as a left-hand side index; the semantic checks then say, at the
right place, what is not allowed.
"""

from __future__ import annotations

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from .errors import TcError, TcSyntaxError
from .syntax import Binary, Call, Definition, Name, Num, Param, Pos, RangeClause, Statement, Ternary, Unary

GRAMMAR = r"""
start: definition+

definition: "def" NAME "(" [param ("," param)*] ")" "->" "(" [NAME ("," NAME)*] ")" "{" statement* "}"

param: TYPE [dims] NAME
dims: "(" [dim ("," dim)*] ")"
dim: NAME | INT

statement: NAME "(" [expr ("," expr)*] ")" ASSIGN expr [where] ";"?
where: "where" range_clause ("," range_clause)*
range_clause: NAME "in" expr ":" expr

?expr: ternary
?ternary: or_expr
        | or_expr "?" expr ":" expr        -> ternary
?or_expr: and_expr
        | or_expr OROR and_expr            -> binary
?and_expr: comparison
         | and_expr ANDAND comparison      -> binary
?comparison: sum
           | sum COMPARE sum               -> binary
?sum: product
    | sum ADDOP product                    -> binary
?product: unary
        | product MULOP unary              -> binary
?unary: atom
      | ADDOP unary                        -> unary
      | "!" unary                          -> not_
?atom: NUMBER                              -> number
     | NAME "(" [expr ("," expr)*] ")"     -> call
     | NAME                                -> name
     | "(" expr ")"

TYPE: "float" | "int"
ASSIGN: "+=!" | "*=!" | "max=!" | "min=!" | "+=" | "*=" | "max=" | "min=" | "="
COMPARE: "<=" | ">=" | "==" | "!=" | "<" | ">"
OROR: "||"
ANDAND: "&&"
ADDOP: "+" | "-"
MULOP: "*" | "/" | "%"
NUMBER: /(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?f?/
INT: /\d+/
NAME: /[A-Za-z_][A-Za-z0-9_]*/
COMMENT: /(#|\/\/)[^\n]*/

%import common.WS
%ignore WS
%ignore COMMENT
"""

_parser = Lark(GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=True)

#: How a token type is named in messages.
_TOKEN_NAMES = {
    "NAME": "a name", "NUMBER": "a number", "INT": "an integer", "ASSIGN": "an assignment (=, +=, +=!, max=!, ...)",
    "LPAR": "'('", "RPAR": "')'", "LBRACE": "'{'", "RBRACE": "'}'", "COMMA": "','", "COLON": "':'",
    "SEMICOLON": "';'", "ADDOP": "'+' or '-'", "MULOP": "'*', '/' or '%'", "TYPE": "a type (float or int)",
    "DEF": "'def'", "MINUS": "'-'", "MORETHAN": "'>'", "WHERE": "'where'", "IN": "'in'", "__ANON_0": "'->'",
    "$END": "the end of the text", "BANG": "'!'", "OROR": "'||'", "ANDAND": "'&&'", "COMPARE": "a comparison", "QMARK": "'?'",
}


def _pos(meta_or_token) -> Pos:
    return Pos(getattr(meta_or_token, "line", 1) or 1, getattr(meta_or_token, "column", 1) or 1)


@v_args(meta=True)
class _ToSyntax(Transformer):
    def start(self, meta, children):
        return list(children)

    def definition(self, meta, children):
        name, *rest = children
        params = [c for c in rest if isinstance(c, Param)]
        outputs = [c for c in rest if isinstance(c, Token) and c.type == "NAME"]
        statements = [c for c in rest if isinstance(c, Statement)]
        return Definition(str(name), tuple(params), tuple(str(o) for o in outputs), tuple(_pos(o) for o in outputs),
                          tuple(statements), _pos(meta))

    def param(self, meta, children):
        type_, dims, name = children
        if dims is None:
            return Param(str(type_), str(name), None, _pos(name))
        return Param(str(type_), str(name), tuple(d[0] for d in dims), _pos(name), tuple(d[1] for d in dims))

    def dims(self, meta, children):
        return [c for c in children if c is not None]

    def dim(self, meta, children):
        (tok,) = children
        return (int(tok) if tok.type == "INT" else str(tok), _pos(tok))

    def statement(self, meta, children):
        name, *rest = children
        where = ()
        if rest and isinstance(rest[-1], tuple) and (not rest[-1] or isinstance(rest[-1][0], RangeClause)):
            where = rest.pop()
        elif rest and rest[-1] is None:
            rest.pop()
        rhs = rest.pop()
        op = rest.pop()
        indices = tuple(c for c in rest if c is not None)
        return Statement(str(name), indices, str(op), rhs, where, _pos(name), _pos(op))

    def where(self, meta, children):
        return tuple(children)

    def range_clause(self, meta, children):
        name, lo, hi = children
        return RangeClause(str(name), lo, hi, _pos(name))

    def ternary(self, meta, children):
        cond, then, other = children
        return Ternary(cond, then, other, _pos(meta))

    def binary(self, meta, children):
        left, op, right = children
        return Binary(str(op), left, right, _pos(op))

    def unary(self, meta, children):
        op, operand = children
        return Unary(str(op), operand, _pos(op))

    def not_(self, meta, children):
        return Unary("!", children[0], _pos(meta))

    def number(self, meta, children):
        (tok,) = children
        text = str(tok).rstrip("f")
        is_int = text.isdigit()
        return Num(int(text) if is_int else float(text), is_int, _pos(tok))

    def call(self, meta, children):
        name, *args = children
        return Call(str(name), tuple(a for a in args if a is not None), _pos(name))

    def name(self, meta, children):
        (tok,) = children
        return Name(str(tok), _pos(tok))


def _describe_expected(expected) -> str:
    names = sorted({_TOKEN_NAMES.get(e, f"'{e}'" if not e.isupper() else e.lower()) for e in expected})
    if len(names) > 6:
        names = names[:6] + ["..."]
    return ", ".join(names)


def parse(text: str) -> list[Definition]:
    """Every ``def`` of ``text``; :class:`TcSyntaxError` at the first token that does not fit."""
    if not isinstance(text, str):
        raise TypeError(f"a comprehension is text, not {type(text).__name__}")
    try:
        tree = _parser.parse(text)
        definitions = _ToSyntax().transform(tree)
    except UnexpectedToken as exc:
        tok = exc.token
        if tok.type == "$END":
            lines = text.rstrip().splitlines() or [""]
            line, column = len(lines), len(lines[-1]) + 1
            raise TcSyntaxError(f"the text ends too early; expected {_describe_expected(exc.expected)}",
                                line, column, text) from None
        raise TcSyntaxError(f"unexpected '{tok}'; expected {_describe_expected(exc.expected)}",
                            exc.line, exc.column, text) from None
    except UnexpectedCharacters as exc:
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else "?"
        raise TcSyntaxError(f"unexpected character '{char}'", exc.line, exc.column, text) from None
    except UnexpectedEOF as exc:
        lines = text.rstrip().splitlines() or [""]
        raise TcSyntaxError("the text ends too early", len(lines), len(lines[-1]) + 1, text) from None
    except UnexpectedInput as exc:  # any other parse failure lark reports
        raise TcSyntaxError(str(exc).splitlines()[0], exc.line, exc.column, text) from None
    except VisitError as exc:
        if isinstance(exc.orig_exc, TcError):
            raise exc.orig_exc from None
        raise
    return [Definition(d.name, d.params, d.outputs, d.output_pos, d.statements, d.pos, text) for d in definitions]
