"""The tokens of a CUDA kernel's body for near-copy fingerprints (nearcopy.py), as kerneltokens.py
reads a Triton kernel's: a small C lexer over the text the native scanner already holds. No parse,
so macros and templates cannot break it, and no libcst: the native scanner runs where no Python
parser is loaded. Keywords, CUDA's own names (`threadIdx`, `__syncthreads`, `atomicAdd`,
`__shfl_xor_sync`) and member names (`.x`, `->data`) stay; other identifiers are `$id`, literals
keep only their kind, and commas and semicolons are dropped (a copy may split or join declarations).
"""

from __future__ import annotations

import re
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
