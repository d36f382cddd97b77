"""What a clause asks of a value in the code, judged on libcst nodes: argument conditions
(`args = [{ keyword = ..., equals/pattern/names/literal/string/maybe_none/int_like }]`) and a keyword
clause's values. The screen's twins, on ast, over-approximate these (screen.py `_args_may`). A value
a name was given a few lines up counts too (values.py: `backend = "nccl"` ... `init(backend)`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import libcst as cst

from ..catalog import ArgCond, Match, conds_hold
from .pyindex import name_in
from .scopes import Names
from .vocab import (
    NOT_LITERAL,
    NOT_TENSOR_CALLS,
    dotted_parts,
    find_arg,
    literal_value,
    load_libcst,
    maybe_none,
    string_shapes,
)

load_libcst()

if TYPE_CHECKING:
    from .values import ValueTracker

_INT_NAME = re.compile(
    r"(?i)^(n|k|num\w*|n_\w+|\w*_?size|\w*_?dim|top_?k|\w*_len|\w*batch\w*|samples?|\w*groups?|\w*heads?"
    r"|times|factor|repeat|n_?rep|\w*_count|count|\w*_num|\w*steps?|\w*width|\w*height|scale)$"
)

# Methods that return a tensor whatever they are called on, and ones that return a Python number.
_TENSOR_METHODS = frozenset({
    "sum", "cumsum", "long", "int", "bincount", "diff", "clamp", "clamp_min", "flatten", "view", "reshape",
    "squeeze", "unsqueeze", "to", "cpu", "cuda", "count_nonzero", "repeat_interleave", "masked_fill", "where",
})
_NUMBER_METHODS = frozenset({"size", "dim", "numel", "item", "tolist", "ndimension", "get", "index", "count"})


class Conditions:
    def __init__(self, names: Names) -> None:
        self.names = names
        self.travel: ValueTracker | None = None  # the scanner's value tracker (values.py), once it has one

    def args(self, call: cst.Call, conds: tuple[ArgCond, ...]) -> bool:
        """A call's arguments meet a clause's `args` conditions. An argument is shown missing only
        where the call could not pass it: a function that spreads its own parameter (`def
        compile(model, **kwargs): return torch.compile(model, **kwargs)`) forwards its caller's
        choice, the backend included, so such a call is not judged missing (as linters do). A spread
        of anything else (`**self.kwargs`, a local dict) is the project's own: still judged."""
        if any(c.missing is True and self.forwards(call, c) for c in conds):
            return False
        return conds_hold(conds, lambda cond: find_arg(call, cond), self.value)

    def value(self, cond: ArgCond, value: cst.CSTNode) -> bool:
        if self.travel is not None and self.travel.arg_travels(cond, value):
            return True  # `backend = "nccl"` ... `init_process_group(backend)` (values.py)
        lit = literal_value(value)
        if cond.literal is not None and cond.literal == (lit is NOT_LITERAL):
            return False
        if cond.equals and not any(_same(lit, e) for e in cond.equals):
            return False
        if cond.pattern and not _pattern_matches(cond.pattern, value):
            return False
        if cond.names:
            q, _ = self.names.resolve(value)
            if q is None or not name_in(q, cond.names):
                return False
        if cond.string is not None and cond.string != bool(string_shapes(value)):
            return False
        if cond.maybe_none is not None and cond.maybe_none != maybe_none(value):
            return False
        if cond.tensor_like is not None and cond.tensor_like != self.tensor_like(value):
            return False
        return cond.int_like is None or cond.int_like == self.int_like(value)

    def forwards(self, call: cst.Call, cond: ArgCond) -> bool:
        """The call spreads a parameter of the enclosing function that may carry the argument `cond`
        names: `**kwargs` for a keyword, `*args` for a position."""
        for a in call.args:
            if a.star and type(a.value) is cst.Name and ((a.star == "**" and cond.keyword is not None)
                                                         or (a.star == "*" and cond.position is not None)):
                b = self.names.lookup(a.value.value)
                if b is not None and b.param:
                    return True
        return False

    def tensor_like(self, value: cst.CSTNode, follow: bool = True) -> bool:
        """Shown to be a tensor, not a Python number: a `torch.*` call that makes one, a tensor
        method's result (`counts.sum(0)`, `x.long()`), an element of a tensor (`counts[i]`), or, one
        assignment away, a name given one. A bare name, a literal, a size or `len()` shows nothing."""
        t = type(value)
        if t is cst.Call and type(value.func) in (cst.Name, cst.Attribute):
            q, _ = self.names.resolve(value.func)
            if q is not None:
                return q.startswith("torch.") and not q.startswith(NOT_TENSOR_CALLS)
            func = value.func
            return type(func) is cst.Attribute and (
                func.attr.value in _TENSOR_METHODS or
                (func.attr.value not in _NUMBER_METHODS and self.tensor_like(func.value, follow)))
        if t is cst.Subscript:
            return self.tensor_like(value.value, follow)
        if t is cst.BinaryOperation:
            return self.tensor_like(value.left, follow) or self.tensor_like(value.right, follow)
        if t is cst.Name and follow and self.travel is not None:
            return self.travel.travels(value, lambda v: self.tensor_like(v, follow=False))
        return False

    def int_like(self, value: cst.CSTNode) -> bool:
        """A Python int rather than a tensor, judged from the expression: a literal, a shape or
        size, len(), or a count-like name (`num_heads`, `batch_size`, `self.n_rep`, `top_k`)."""
        t = type(value)
        lit = literal_value(value)
        if lit is not NOT_LITERAL:
            return isinstance(lit, int)
        if t is cst.BinaryOperation:
            return self.int_like(value.left) and self.int_like(value.right)
        if t is cst.UnaryOperation:
            return self.int_like(value.expression)
        if t is cst.Subscript:
            parts = dotted_parts(value.value)
            return bool(parts) and parts[-1] == "shape"
        if t is cst.Call:
            q, _ = self.names.resolve(value.func) if type(value.func) in (cst.Name, cst.Attribute) else (None, False)
            if q in ("builtins.len", "builtins.int", "builtins.round", "math.ceil", "math.floor", "math.prod"):
                return True
            return type(value.func) is cst.Attribute and value.func.attr.value in ("size", "dim", "numel", "item", "ndimension")
        parts = dotted_parts(value)
        return bool(parts) and bool(_INT_NAME.search(parts[-1]))

    def keyword_value(self, value: cst.CSTNode, clause: Match) -> bool:
        """A keyword argument's value is one a keyword clause asks for."""
        lit = literal_value(value)
        if clause.values and any(_same(lit, v) for v in clause.values):
            return True
        if clause.pattern and any(re.fullmatch(clause.pattern, v) for v in string_shapes(value)):
            return True
        if clause.value_names:
            q, _ = self.names.resolve(value)
            if q is not None and name_in(q, clause.value_names):
                return True
        return self.travel is not None and self.travel.keyword_travels(value, clause)  # values.py


def bare_ok(conds: tuple[ArgCond, ...]) -> bool:
    """A bare decorator (`@torch.compile`) is a call without arguments."""
    return all(c.missing is True for c in conds)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _pattern_matches(pattern: str, value: cst.CSTNode) -> bool:
    if any(re.fullmatch(pattern, s) for s in string_shapes(value)):
        return True
    if type(value) in (cst.List, cst.Tuple, cst.Set):
        return any(_pattern_matches(pattern, el.value) for el in value.elements)
    if type(value) is cst.Dict:  # `extra_compile_args={"nvcc": [...]}`
        return any(
            _pattern_matches(pattern, el.key) or _pattern_matches(pattern, el.value)
            for el in value.elements if type(el) is cst.DictElement
        )
    if type(value) is cst.Call and dotted_parts(value.func) == ["dict"]:  # `dict(nvcc=[...])`
        return any(
            (a.keyword is not None and re.fullmatch(pattern, a.keyword.value)) or _pattern_matches(pattern, a.value)
            for a in value.args
        )
    return False
