"""The ast side of values.py (no libcst, which loads only for files that need it): `ScreenFacts`,
which tells screen.py where values travel and which value matcher (matchers.py) a node may concern.
"""

from __future__ import annotations

import ast
import re
from typing import Callable

from .vocab import ast_chain, ast_nodes, defaulted_params

CUDA_DEVICE = re.compile(r"(?i)cuda(:\d+)?")
DATA_PARALLEL = frozenset({
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
})
_CREATE_METHODS = frozenset({"new_zeros", "new_ones", "new_full", "new_empty"})


# ---------------------------------------------------------------------------------- the screen

class ScreenFacts:
    """What screen.py needs to keep the regions values travel to: names given a value a condition
    could look for, names given a boolean expression or a batch maximum, and argparse device options
    with a CUDA default (and the names given them). Over-approximate: names, not scopes. Computed on
    first use, from the whole file."""

    def __init__(self, tree: ast.Module, text: str) -> None:
        self.tree = tree
        self.has_max = "max(" in text
        self.has_argparse = "add_argument" in text
        self.done = False
        self.last: tuple[ast.AST | None, str | None] = (None, None)  # needed()'s last node and answer

    def _compute(self) -> None:
        """One walk over the statements (values.py records only statements: assignments, `for`
        targets, function defaults), and over the expressions only when argparse is used."""
        self.done = True
        self.valued: set[str] = set()  # last segment of names given a literal-ish value or default
        self.boolean: set[str] = set()
        self.devices: set[str] = set()  # dests of `--device`-like options that may default to CUDA
        self.batch_max: set[str] = set()
        assigned: list[tuple[str, ast.AST]] = []
        stack = [self.tree.body]
        while stack:
            for n in stack.pop():
                t = type(n)
                if t is ast.Assign or t is ast.AnnAssign:
                    if n.value is not None:
                        for target in (n.targets if t is ast.Assign else [n.target]):
                            for tg in (target.elts if type(target) in (ast.Tuple, ast.List) else [target]):
                                name = _last(tg)
                                if name:
                                    assigned.append((name, n.value))
                    continue
                if t is ast.For or t is ast.AsyncFor:
                    name = _last(n.target)
                    if name and type(n.iter) in (ast.List, ast.Tuple):
                        self.valued.add(name)
                elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
                    self.valued.update(p.arg for p, d, _at in defaulted_params(n.args) if _literalish(d))
                for f in ("body", "orelse", "finalbody"):
                    inner = getattr(n, f, None)
                    if type(inner) is list:
                        stack.append(inner)
                for h in getattr(n, "handlers", None) or getattr(n, "cases", None) or ():
                    stack.append(h.body)
        if self.has_argparse:
            for n in ast_nodes(self.tree):
                if type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr == "add_argument":
                    self._argparse(n)
        for name, value in assigned:
            if _literalish(value):
                self.valued.add(name)
            if _boolean(value):
                self.boolean.add(name)
        if self.has_max:
            for name, value in assigned:
                if _batch_max(value):
                    self.batch_max.add(name)
            for name, value in assigned if self.batch_max else ():  # a size list holding a batch maximum
                if any(type(x) is ast.Name and x.id in self.batch_max for x in ast_nodes(value)):
                    self.batch_max.add(name)
        self.reaching = set(self.devices)  # names whose value may hold a device option
        if self.devices:
            for name, value in assigned:
                if any(type(x) is ast.Attribute and x.attr in self.devices for x in ast_nodes(value)):
                    self.reaching.add(name)

    def _argparse(self, n: ast.Call) -> None:
        if not any(k.arg == "default" and not (type(k.value) is ast.Constant and not CUDA_DEVICE.fullmatch(str(k.value.value)))
                   for k in n.keywords):
            return  # no default, or one that is certainly not a CUDA device
        for a in n.args:
            if type(a) is ast.Constant and type(a.value) is str and "device" in a.value.lower():
                self.devices.add(a.value.lstrip("-").replace("-", "_"))
        for k in n.keywords:
            if k.arg == "dest" and type(k.value) is ast.Constant and type(k.value.value) is str:
                self.devices.add(k.value.value)

    def may_carry(self, cond, value: ast.AST) -> bool:
        """values.py's arg_travels / keyword_travels may match (cond None: a keyword clause)."""
        if cond is not None and not (cond.pattern or cond.equals or cond.string):
            return False
        if not self.done:
            self._compute()
        name = _last(value)
        return name is not None and name in self.valued

    def may_be_boolean(self, index: ast.AST) -> bool:
        if not self.done:
            self._compute()
        return type(index) is ast.Name and index.id in self.boolean

    def needed(self, node: ast.AST, candidates: Callable) -> str | None:
        """The value matcher that may match at `node` (or needs to see it), or None. Each value
        matcher's ast check asks (matchers.py), so the last answer is kept."""
        if self.last[0] is not node:
            self.last = (node, self._needed(node, candidates))
        return self.last[1]

    def _needed(self, node: ast.AST, candidates: Callable) -> str | None:
        t = type(node)
        if t is ast.Assert:
            return "host_read"
        if not self.done:
            self._compute()
        if t is ast.Assign:
            if any(type(tg) is ast.Attribute and tg.attr.lower().endswith("backend") for tg in node.targets):
                return "backend_setting"
            if self.devices and any(type(x) is ast.Attribute and x.attr in self.devices for x in ast_nodes(node.value)):
                return "argparse_cuda_default"  # a name the option's value reaches `.to()` through
            return None
        if t is not ast.Call:
            return None
        func = node.func
        name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None
        if name is None:
            return None
        if name in ("int", "float", "arange", "linspace", "logspace"):
            return "host_read"
        if name in ("from_numpy", "as_tensor", "tensor"):
            return "numpy_float64" if node.args and type(node.args[0]) in (ast.Name, ast.Attribute, ast.Call) else None
        if name == "add_argument":
            return "argparse_cuda_default"
        if name in ("zeros", "ones", "full", "empty", "pad") or name in _CREATE_METHODS:
            for a in node.args if self.has_max else ():
                if _batch_max(a) or any(type(x) is ast.Name and x.id in self.batch_max for x in ast_nodes(a)):
                    return "batch_max_pad"
            return None
        if name in ("to", "device"):
            if any(_last(a) in self.reaching for a in list(node.args) + [k.value for k in node.keywords]):
                return "argparse_cuda_default"  # a use the option's finding depends on
            return None
        parts = ast_chain(func)
        if parts and any(q in DATA_PARALLEL for q in candidates(parts)):
            return "cuda_device_arg"
        return None


def _last(node: ast.AST) -> str | None:
    if type(node) is ast.Name:
        return node.id
    if type(node) is ast.Attribute:
        return node.attr
    return None


def _literalish(value: ast.AST) -> bool:
    """A value a pattern, literal or string condition could match (vocab.py's string_shapes
    and literal_value, conditions.py's _pattern_matches look into these)."""
    if type(value) is ast.Call:
        return type(value.func) is ast.Name and value.func.id == "dict"
    return type(value) in (ast.Constant, ast.JoinedStr, ast.IfExp, ast.BinOp, ast.UnaryOp, ast.List, ast.Tuple,
                           ast.Set, ast.Dict)


def _boolean(value: ast.AST) -> bool:
    t = type(value)
    return (t is ast.Compare or (t is ast.UnaryOp and type(value.op) is ast.Invert)
            or (t is ast.BinOp and type(value.op) in (ast.BitAnd, ast.BitOr))
            or (t is ast.Call and type(value.func) is ast.Attribute and value.func.attr == "bool"))


def _batch_max(value: ast.AST) -> bool:
    return any(type(x) is ast.Call and type(x.func) is ast.Name and x.func.id == "max" for x in ast_nodes(value))
