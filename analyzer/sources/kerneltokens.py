"""The tokens of a kernel's body that say what it computes, for near-copy fingerprints (nearcopy.py).

Identifiers are normalised (`$id`): a copy of a kernel per model renames its variables and
arguments, not its algorithm. Attribute names stay (`tl.load`, `tl.dot`, `.to`): they name the API
the kernel calls. Literals keep only their kind (a copy tunes block sizes and constants). Whitespace,
comments, commas and redundant parentheses are formatting, not code.
(CUDA bodies are read by ctokens.py, the same normalisation over C tokens.)
"""

from __future__ import annotations

import libcst as cst

from .cstwalk import iter_subtree

_FORMAT = frozenset((
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline, cst.Comment,
    cst.EmptyLine, cst.LeftParen, cst.RightParen, cst.Comma,
))
_KEPT_NAMES = frozenset({"True", "False", "None"})


class BodyTokens:
    """Tokens collected node by node, so a walk the scanner makes anyway (python.describe_kernel)
    also reads them: walking a kernel's body a second time cost more than hashing its shingles."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self._attrs: set[int] = set()  # the Name nodes that are an attribute's name

    def add(self, n: cst.CSTNode) -> None:
        """The next node of a pre-order walk."""
        t = type(n)
        if t in _FORMAT:
            return
        if t is cst.Name:
            v = n.value
            self.tokens.append(v if id(n) in self._attrs or v in _KEPT_NAMES else "$id")
            return
        if t is cst.Attribute:
            self._attrs.add(id(n.attr))
        self.tokens.append(t.__name__)


def body_tokens(body: cst.CSTNode) -> list[str]:
    """Pre-order node kinds of `body`, with attribute names kept and other identifiers normalised."""
    acc = BodyTokens()
    for n in iter_subtree(body):
        acc.add(n)
    return acc.tokens

