"""The tokens of a kernel's body that say what it computes, for near-copy fingerprints (nearcopy.py).

Identifiers are normalised (`$id`): a copy of a kernel per model renames its variables and
arguments, not its algorithm. Attribute names stay (`tl.load`, `tl.dot`, `.to`): they name the API
the kernel calls. Literals keep only their kind (a copy tunes block sizes and constants). Whitespace,
comments, commas and redundant parentheses are formatting, not code.
"""

from __future__ import annotations

import libcst as cst

from .cstwalk import iter_subtree

_FORMAT = (
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline, cst.Comment,
    cst.EmptyLine, cst.LeftParen, cst.RightParen, cst.Comma,
)
_KEPT_NAMES = frozenset({"True", "False", "None"})


def body_tokens(body: cst.CSTNode) -> list[str]:
    """Pre-order node kinds of `body`, with attribute names kept and other identifiers normalised."""
    out: list[str] = []
    attrs: set[int] = set()  # the Name nodes that are an attribute's name
    for n in iter_subtree(body):
        t = type(n)
        if t in _FORMAT:
            continue
        if t is cst.Name:
            v = n.value
            out.append(v if id(n) in attrs or v in _KEPT_NAMES else "$id")
            continue
        if t is cst.Attribute:
            attrs.add(id(n.attr))
        out.append(t.__name__)
    return out
