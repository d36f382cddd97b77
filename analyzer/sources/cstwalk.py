"""A fast source-order walk over a libcst tree that knows the line of every node it enters.

Why not libcst's own visitors and PositionProvider: measured on torch/nn (136 files), parsing took
4.2 s, a CSTVisitor pass 3.6 s (it rebuilds every node), PositionProvider 9.2 s and
QualifiedNameProvider 26 s. This walk reads node fields directly in source order and counts newline
tokens as it goes; it costs about 0.15x the parse and gives the same start lines as PositionProvider
(tests/test_cstwalk.py checks that on real files).

The source order of each node class's fields is read from libcst itself: the order in which its
`_visit_and_replace_children` visits them, which is the order libcst generates code in.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Callable

import libcst as cst

_VISIT_HELPERS = {
    "visit_sequence",
    "visit_required",
    "visit_optional",
    "visit_body_sequence",
    "visit_iterable",
    "visit_sentinel",
}
_FIELD_ORDER: dict[type, tuple[str, ...]] = {}
# Fields that only hold whitespace or parentheses before a node's first token.
LEADING_FIELDS = frozenset({"lpar", "leading_lines"})
# Decorators are walked before a definition is entered: they run in the enclosing scope, and the
# line of a def or class is the line of its keyword (as PositionProvider reports it).
_DEF_LEADING = LEADING_FIELDS | {"decorators", "lines_after_decorators"}
_LEADING_BY_CLASS = {cst.FunctionDef: _DEF_LEADING, cst.ClassDef: _DEF_LEADING}


def field_order(cls: type) -> tuple[str, ...]:
    """The child fields of a libcst node class, in source order."""
    order = _FIELD_ORDER.get(cls)
    if order is None:
        src = textwrap.dedent(inspect.getsource(cls._visit_and_replace_children))
        calls = [
            n
            for n in ast.walk(ast.parse(src))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _VISIT_HELPERS
        ]
        calls.sort(key=lambda n: (n.lineno, n.col_offset))
        names: list[str] = []
        for call in calls:
            if len(call.args) > 1 and isinstance(call.args[1], ast.Constant) and call.args[1].value not in names:
                names.append(call.args[1].value)
        order = _FIELD_ORDER[cls] = tuple(names)
    return order


_Newline = cst.Newline
_SimpleString = cst.SimpleString
_FStringText = cst.FormattedStringText
_Whitespace = cst.SimpleWhitespace
_CSTNode = cst.CSTNode


class Walker:
    """Subclasses register `enter` and `leave` callbacks per node class.

    enter(node, line) runs after the node's leading whitespace and parentheses (and a definition's
    decorators), so `line` is the line of its first token. leave(node, line) runs after all
    children, with the line of the node's last token.
    """

    def __init__(self) -> None:
        self.line = 1
        self.enter: dict[type, Callable[[cst.CSTNode, int], None]] = {}
        self.leave: dict[type, Callable[[cst.CSTNode, int], None]] = {}

    def walk(self, node: cst.CSTNode) -> None:
        t = type(node)
        if t is _Newline:
            self.line += 1
            return
        if t is _Whitespace:
            v = node.value
            if "\\" in v:  # a backslash continuation
                self.line += v.count("\n")
            return
        # A string's own newlines come after its first token: counted once the node is entered.
        pending = node.value.count("\n") if t is _SimpleString or t is _FStringText else 0
        on_enter = self.enter.get(t)
        entered = False
        leading = _LEADING_BY_CLASS.get(t, LEADING_FIELDS)
        walk = self.walk
        for name in field_order(t):
            if not entered and name not in leading:
                if on_enter is not None:
                    on_enter(node, self.line)
                self.line += pending
                entered = True
            value = getattr(node, name)
            if isinstance(value, _CSTNode):
                walk(value)
            elif type(value) is list or type(value) is tuple:
                for child in value:
                    walk(child)
        if not entered:
            if on_enter is not None:
                on_enter(node, self.line)
            self.line += pending
        on_leave = self.leave.get(t)
        if on_leave is not None:
            on_leave(node, self.line)
