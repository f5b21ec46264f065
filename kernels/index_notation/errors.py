"""Errors of the index-notation language, each pointing at a line and column of the TC text."""

from __future__ import annotations


class TcError(ValueError):
    """A problem in a comprehension, at ``line``:``column`` (1-based) of its text.

    ``str(error)`` reads like a compiler message: the position, what is wrong,
    the offending line with a caret under the column, and, where one exists, a
    suggested correction.
    """

    def __init__(self, message: str, line: int, column: int, text: str = "", hint: str = ""):
        self.message = message
        self.line = int(line)
        self.column = int(column)
        self.text = text
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        out = f"line {self.line}, column {self.column}: {self.message}"
        lines = self.text.splitlines()
        if 1 <= self.line <= len(lines):
            src = lines[self.line - 1]
            out += f"\n    {src}\n    {' ' * (self.column - 1)}^"
        if self.hint:
            out += f"\n  {self.hint}"
        return out


class TcSyntaxError(TcError):
    """The text is not a comprehension (a token out of place, a missing bracket, ...)."""


class TcSemanticError(TcError):
    """The text parses but does not define a computation (unknown names, unbound indices, ...)."""


class TcShapeError(ValueError):
    """The arrays passed to a comprehension do not fit its declared shapes (names the argument)."""
