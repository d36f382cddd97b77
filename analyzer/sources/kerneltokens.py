"""The tokens of a kernel's body that say what it computes, for near-copy fingerprints (nearcopy.py).

Identifiers are normalised (`$id`): a copy of a kernel per model renames its variables and
arguments, not its algorithm. Attribute names stay (`tl.load`, `tl.dot`, `.to`): they name the API
the kernel calls. Literals keep only their kind (a copy tunes block sizes and constants). Whitespace,
comments, commas and redundant parentheses are formatting, not code.

CUDA bodies are read by a small C lexer (c_tokens) over the text the native scanner already holds:
no parse, so macros and templates cannot break it. Keywords, CUDA's own names (`threadIdx`,
`__syncthreads`, `atomicAdd`, `__shfl_xor_sync`) and member names (`.x`, `->data`) stay; other
identifiers and literals are normalised as for Triton.
"""

from __future__ import annotations

import re

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


# One C token: an identifier, a number (1.0f, 0x1F, 1e-5), a string or char literal, a multi-character
# operator, or any other single character; whitespace between them is skipped.
_C_TOKEN = re.compile(
    r"[A-Za-z_]\w*|\.?\d[\w.]*(?:[eEpP][+-]\d+)?|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'"
    r"|->|::|<<=|>>=|<<|>>|[-+*/%&|^!=<>]=|&&|\|\||\+\+|--|\S"
)
_C_KEPT = frozenset((
    "if else for while do switch case default break continue return goto sizeof const volatile static "
    "inline constexpr auto void bool char short int long float double signed unsigned struct union enum "
    "template typename typedef using true false nullptr extern __restrict__ __shared__ "
    "threadIdx blockIdx blockDim gridDim warpSize min max"
).split())
_C_PUNCT = frozenset(",;")  # formatting-like separators: a copy may split or join declarations


def c_tokens(body: str) -> list[str]:
    """The tokens of a comment-free C/CUDA body, identifiers and literals normalised (module docstring)."""
    out: list[str] = []
    member = False
    for m in _C_TOKEN.finditer(body):
        t = m.group()
        c = t[0]
        if c.isalpha() or c == "_":
            out.append(t if member or t in _C_KEPT or t.startswith(("__", "atomic")) else "$id")
        elif c.isdigit() or (c == "." and len(t) > 1):
            out.append("$num")
        elif c in "\"'":
            out.append("$str")
        elif t not in _C_PUNCT:
            out.append(t)
        member = t in (".", "->")
    return out
