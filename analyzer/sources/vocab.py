"""What the Python scanner (python.py), its ast screen (screen.py), the code matchers (matchers.py)
and the code facts (codefacts.py) mean by the same words: names with a meaning, and the small
readers of literals, name chains, strings and call arguments, for both trees they walk.

The libcst readers and their ast twins sit side by side so that a change to one is made to the
other: the screen must over-approximate what the scanner sees. libcst loads on first use (see
sources/__init__.py), not with this module, which the screen and the matcher registry import: the libcst
readers find it through `cst`, bound by `load_libcst()`, which the scanner's modules (python.py,
scopes.py, guards.py, conditions.py) call when they are imported.
"""

from __future__ import annotations

import ast
import builtins
import re
from typing import Any

BUILTINS = frozenset(dir(builtins))
# Calls that import the module named by their first argument.
IMPORT_CALLS = frozenset({"importlib.import_module", "builtins.__import__"})
# A function whose name says it trains (`within = "train_step"` without a backward() in it).
TRAIN_NAME = re.compile(r"(?i)(^|_)(train|training)($|_)|^fit$")
# A receiver of `.step()` that is an optimizer (or a grad scaler): the step trains.
OPTIMIZER_RECEIVER = re.compile(r"(?i)optim|opt$|scaler")

# ---------------------------------------------------------------------------------- libcst readers

cst: Any = None  # the libcst module, once load_libcst() ran
NOT_LITERAL = object()


def load_libcst() -> None:
    global cst
    if cst is None:
        import libcst

        cst = libcst


# Categories that are no device concern where the code runs on the host (context.py's `host`).
HOST_CATEGORIES = frozenset({"dynamic-shape", "host-sync", "unsupported-op", "precision"})

# torch calls that return no tensor (sizes, dtypes, devices, predicates, distributed and CUDA state).
NOT_TENSOR_CALLS = ("torch.Size", "torch.finfo", "torch.iinfo", "torch.cuda.", "torch.distributed.", "torch.get_",
                    "torch.device", "torch.dtype", "torch.is_", "torch.jit.", "torch.compiler.", "torch.backends.")


def literal_value(node) -> Any:
    """The Python value of a literal node, or NOT_LITERAL."""
    if node is None:
        return NOT_LITERAL
    t = type(node)
    if t is cst.SimpleString or t is cst.ConcatenatedString:
        try:
            v = node.evaluated_value
        except Exception:  # noqa: BLE001 - odd prefixes; treat as not a literal
            return NOT_LITERAL
        return v if isinstance(v, str) else NOT_LITERAL
    if t is cst.Integer or t is cst.Float:
        return node.evaluated_value
    if t is cst.Name and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if t is cst.UnaryOperation and type(node.operator) is cst.Minus:
        v = literal_value(node.expression)
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else NOT_LITERAL
    return NOT_LITERAL


# `from deepspeed.ops.triton_ops._triton import triton, tl`: a project module that imports Triton
# once behind an availability check and re-exports it. A statement that imports both `triton` and
# `tl` under their own names imports Triton's (a module exporting that pair re-exports Triton), so
# the importing file's `@triton.jit` kernels are kernels; the re-exporting module is not read (a
# file's facts are its own). One of the pair alone, or renamed (`from torch._inductor.config import
# triton as inductor_triton_config`), is the module's own name.
_TRITON_REEXPORTS = {"triton": "triton", "tl": "triton.language"}


def reexported(module: str, name: str, imported: list[tuple[str, str | None]]) -> str | None:
    """The library a name of `from module import ...` stands for when module re-exports it;
    `imported` holds the statement's (name, asname) pairs."""
    if module.split(".")[0] == "triton" or name not in _TRITON_REEXPORTS:
        return None
    plain = {n for n, alias in imported if alias in (None, n)}
    return _TRITON_REEXPORTS[name] if set(_TRITON_REEXPORTS) <= plain else None


def from_import(module: str, name: str, imported: list[tuple[str, str | None]]) -> tuple[str, bool]:
    """The qualified name `from module import name` binds, and whether it is a re-exported library's
    (reexported): every reader of imports (python.py, screen.py, codefacts.py) binds names by it."""
    library = reexported(module, name, imported)
    return (library, True) if library else ((f"{module}.{name}" if module else name), False)


def dotted_parts(node) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"]; None for anything that is not a plain name chain."""
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    parts.reverse()
    return parts


def string_shapes(node) -> list[str]:
    """The strings an expression can evaluate to, with interpolations shown as "0":
    `"cuda"` -> ["cuda"], `f"cuda:{rank}"` -> ["cuda:0"], `"cuda:" + str(r)` -> ["cuda:0"],
    `"cuda" if ok else "cpu"` -> ["cuda", "cpu"]."""
    t = type(node)
    lit = literal_value(node)
    if isinstance(lit, str):
        return [lit]
    if t is cst.FormattedString:
        return ["".join(p.value if type(p) is cst.FormattedStringText else "0" for p in node.parts)]
    if t is cst.BinaryOperation and type(node.operator) is cst.Add:
        left = string_shapes(node.left) or ["0"]
        right = string_shapes(node.right) or ["0"]
        if left == ["0"] and right == ["0"]:
            return []
        return [a + b for a in left for b in right]
    if t is cst.IfExp:
        return string_shapes(node.body) + string_shapes(node.orelse)
    return []


def find_arg(call, cond):
    """The argument an ArgCond names: by keyword, else by position among the arguments before any unpacking."""
    if cond.keyword is not None:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == cond.keyword:
                return a.value
    if cond.position is not None:
        i = 0
        for a in call.args:
            if a.keyword is not None:
                continue
            if a.star:
                return None
            if i == cond.position:
                return a.value
            i += 1
    return None


def maybe_none(value) -> bool:
    if literal_value(value) is None:
        return True
    if type(value) is cst.IfExp:
        return maybe_none(value.body) or maybe_none(value.orelse)
    return False


_WS = re.compile(r"\s+")


def short_code(node, limit: int = 60) -> str:
    """A node's code on one line, cut at `limit` characters: a finding's symbol or snippet."""
    if type(getattr(node, "lpar", None)) in (list, tuple) and node.lpar:
        node = node.with_changes(lpar=(), rpar=())  # `(\n x.cuda()\n)` reads as `x.cuda()`
    if getattr(node, "leading_lines", None):
        node = node.with_changes(leading_lines=())  # a decorator's comment lines above it
    try:
        code = cst.Module([]).code_for_node(node)
    except Exception:  # noqa: BLE001
        return ""
    code = _WS.sub(" ", code).strip()
    return code if len(code) <= limit else code[: limit - 1] + "…"


# ---------------------------------------------------------------------------------- ast twins

MAYBE = object()  # a value the screen cannot judge
AST_NOT_LITERAL = object()
# Nodes literal_value never takes for a literal (True, False and None are ast.Constant).
_NEVER_LITERAL = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.List, ast.Tuple, ast.Dict, ast.Set,
                  ast.Compare, ast.BoolOp, ast.Lambda, ast.JoinedStr)


def defaulted_params(args: ast.arguments) -> list[tuple[ast.arg, ast.expr, int]]:
    """The parameters that have a default, with the default and their position among the positional
    parameters (-1 keyword-only), in order: what `def f(a, b=1, *, c=2)` lets a call leave out."""
    pos = args.posonlyargs + args.args
    first = len(pos) - len(args.defaults)
    out = [(arg, d, first + i) for i, (arg, d) in enumerate(zip(pos[first:], args.defaults))]
    out.extend((arg, d, -1) for arg, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    return out


def ast_chain(node: ast.AST) -> list[str] | None:
    """dotted_parts on ast: `a.b.c` -> ["a", "b", "c"]; None for anything that is not a plain name chain."""
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    parts.reverse()
    return parts


# Per node class, the fields that can hold nodes a check looks at (not names, operators or ctx).
_AST_LEAF_FIELDS = frozenset({"ctx", "id", "attr", "name", "arg", "module", "level", "names", "op", "ops",
                              "kind", "type_comment", "conversion", "is_async", "simple", "type_ignores",
                              "kwd_attrs", "rest", "asname"})
AST_PLANS: dict[type, tuple[str, ...]] = {}


def ast_plan(t: type) -> tuple[str, ...]:
    plan = AST_PLANS.get(t)
    if plan is None:
        plan = AST_PLANS[t] = tuple(
            f for f in t._fields if f not in _AST_LEAF_FIELDS and not (f == "value" and t in (ast.Constant, ast.MatchSingleton))
        )
    return plan


def ast_nodes(node: ast.AST, skip: frozenset[int] = frozenset()):
    """ast.walk, parents before children (depth first), without the subtrees whose ids are in
    `skip` and without the nodes no check reads: contexts, operators, import aliases. Several
    times faster than ast.walk; a search for names, attributes, constants or calls finds the same."""
    stack = [node]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        n = pop()
        yield n
        plan = AST_PLANS.get(type(n))
        for f in plan if plan is not None else ast_plan(type(n)):
            v = getattr(n, f)
            if type(v) is list:
                extend([c for c in v if c is not None and id(c) not in skip] if skip else [c for c in v if c is not None])
            elif v is not None and (not skip or id(v) not in skip):
                push(v)


def ast_literal(node: ast.AST):
    """literal_value where ast and libcst agree exactly (AST_NOT_LITERAL for a non-literal); MAYBE where they may not."""
    t = type(node)
    if t is ast.Constant:
        v = node.value
        return v if v is None or type(v) in (str, int, float, bool) else MAYBE
    return AST_NOT_LITERAL if t in _NEVER_LITERAL else MAYBE


def ast_shapes(node: ast.AST) -> list[str] | None:
    """string_shapes, or None where libcst may see other strings (f-strings keep their source
    text there, escapes and all)."""
    t = type(node)
    if t is ast.Constant:
        return [node.value] if type(node.value) is str else []
    if t is ast.JoinedStr:
        return None
    if t is ast.BinOp and type(node.op) is ast.Add:
        left, right = ast_shapes(node.left), ast_shapes(node.right)
        if left is None or right is None:
            return None
        left, right = left or ["0"], right or ["0"]
        return [] if left == right == ["0"] else [a + b for a in left for b in right]
    if t is ast.IfExp:
        body, orelse = ast_shapes(node.body), ast_shapes(node.orelse)
        return None if body is None or orelse is None else body + orelse
    return []


def ast_find_arg(call: ast.Call, cond) -> ast.AST | None:
    """find_arg on ast: by keyword, else by position among the arguments before any unpacking."""
    if cond.keyword is not None:
        for k in call.keywords:
            if k.arg == cond.keyword:
                return k.value
    if cond.position is not None:
        for i, a in enumerate(call.args):
            if type(a) is ast.Starred:
                return None
            if i == cond.position:
                return a
    return None


def ast_maybe_none(value: ast.AST) -> bool:
    if type(value) is ast.Constant:
        return value.value is None
    if type(value) is ast.IfExp:
        return ast_maybe_none(value.body) or ast_maybe_none(value.orelse)
    return False


def fullmatch_may(pattern: str, shapes: list[str] | None) -> bool:
    """Some shape (ast_shapes) may fully match `pattern`: None shapes may be anything."""
    return shapes is None or any(re.fullmatch(pattern, s) for s in shapes)
