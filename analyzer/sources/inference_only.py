"""Code that says in its own shape that it never trains: the ast readers codefacts.py uses to mark
inference-only functions, classes and branches (context.py then labels what only they reach as the
evaluation path).

- An op that refuses gradients: a function whose own body raises when an input requires a gradient
  (`if torch.is_grad_enabled() and x.requires_grad: raise ValueError("Gradients not supported.")`,
  `assert not x.requires_grad`), or an autograd Function whose `backward` does nothing but raise
  (`raise NotImplementedError("inference-only; use chunk mode for training")`) with a message that
  says so by design. A backward "not implemented yet" is a to-do of an op meant to train; a backward
  that raises in one branch only (an unsupported option) still trains, and so does a function that
  raises when a switch is on and an input needs a gradient (`if use_fused and x.requires_grad`).
- A branch that opens by asserting its tensors need no gradient (`if store is not None: assert
  not k.requires_grad ...`: a KV-cache decode branch): it runs only without autograd.
- A driver of a trained model: a class named `*Generator` that is no module (no `forward`) and
  whose `generate` runs under `@torch.no_grad()` (`SAM2AutomaticMaskGenerator`). Data generators
  that feed training neither disable autograd nor go by that pair.
"""

from __future__ import annotations

import ast
import re

from .vocab import ast_chain as _chain

NO_GRAD_DECORATORS = frozenset({"no_grad", "inference_mode"})
# What a backward's error says when the op refuses gradients by design (not "not implemented yet").
BY_DESIGN = re.compile(r"(?i)inference|decod|forward[- ]only|for training|not supported|no backward|not differentiable")


def _stmts(body: list[ast.stmt]) -> list[ast.stmt]:
    """A body without its docstring and `pass`."""
    return [st for st in body if not (type(st) is ast.Pass or (type(st) is ast.Expr and type(st.value) is ast.Constant))]


def _asks_grad(node: ast.AST) -> bool:
    """True for a test that holds when autograd records: `x.requires_grad`, `torch.is_grad_enabled()`,
    `any(t.requires_grad for t in ts)`, `w is not None and w.requires_grad` (never a negation)."""
    for n in ast.walk(node):
        if type(n) is ast.UnaryOp and type(n.op) is ast.Not:
            return False
    return any((type(n) is ast.Attribute and n.attr == "requires_grad")
               or (type(n) is ast.Call and (_chain(n.func) or [""])[-1] == "is_grad_enabled") for n in ast.walk(node))


def _grad_test(test: ast.AST) -> bool:
    """A test every conjunct of which is about gradients (or about an input being there at all):
    nothing a user switches."""
    parts = test.values if type(test) is ast.BoolOp and type(test.op) is ast.And else [test]
    if not any(_asks_grad(p) for p in parts):
        return False
    for p in parts:
        if _asks_grad(p):
            continue
        if (type(p) is ast.Compare and len(p.ops) == 1 and type(p.ops[0]) in (ast.Is, ast.IsNot)
                and type(p.comparators[0]) is ast.Constant and p.comparators[0].value is None):
            continue  # `w is not None and w.requires_grad`
        return False
    return True


def _no_grad_assert(st: ast.stmt) -> bool:
    """`assert not x.requires_grad`, `assert x.requires_grad is False`, `assert not torch.is_grad_enabled()`."""
    if type(st) is not ast.Assert:
        return False
    test = st.test
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        return _grad_test(test.operand)
    if type(test) is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) in (ast.Is, ast.Eq):
        right = test.comparators[0]
        return type(right) is ast.Constant and right.value is False and _grad_test(test.left)
    return False


def _names_input_grad(test: ast.AST) -> bool:
    return any(type(n) is ast.Attribute and n.attr == "requires_grad" for n in ast.walk(test))


def refuses_gradients(node: ast.FunctionDef) -> bool:
    """The function's own statements give up when an input needs a gradient. A `backward` that
    raises under `torch.is_grad_enabled()` refuses a second derivative only: it trains."""
    if node.name == "backward":
        return False
    for st in _stmts(node.body):
        if _no_grad_assert(st):
            return True
        if (type(st) is ast.If and not st.orelse and _grad_test(st.test) and _names_input_grad(st.test)
                and all(type(s) is ast.Raise for s in _stmts(st.body)) and _stmts(st.body)):
            return True
    return False


def backward_only_raises(node: ast.ClassDef) -> bool:
    """An autograd Function (`class F(torch.autograd.Function)`) whose `backward` only raises."""
    if not any((_chain(b) or [""])[-1] == "Function" for b in node.bases):
        return False
    for st in node.body:
        if type(st) in (ast.FunctionDef, ast.AsyncFunctionDef) and st.name == "backward":
            body = _stmts(st.body)
            if len(body) != 1 or type(body[0]) is not ast.Raise or body[0].exc is None:
                return False
            said = " ".join(n.value for n in ast.walk(body[0].exc) if type(n) is ast.Constant and type(n.value) is str)
            return bool(BY_DESIGN.search(said))
    return False


def asserts_no_grad(body: list[ast.stmt]) -> bool:
    """A branch that opens (its first statements, before anything else runs) by asserting no gradients."""
    for st in _stmts(body)[:3]:
        if _no_grad_assert(st):
            return True
        if type(st) is not ast.Assert:
            return False
    return False


def no_grad(node: ast.FunctionDef) -> bool:
    return any((_chain(d.func if type(d) is ast.Call else d) or [""])[-1] in NO_GRAD_DECORATORS for d in node.decorator_list)


def drives_trained_model(node: ast.ClassDef) -> bool:
    """`class SAM2AutomaticMaskGenerator:` with `@torch.no_grad() def generate(...)` and no `forward`."""
    if not node.name.endswith("Generator"):
        return False
    methods = {st.name: st for st in node.body if type(st) in (ast.FunctionDef, ast.AsyncFunctionDef)}
    if "forward" in methods or any((_chain(b) or [""])[-1].endswith("Module") for b in node.bases):
        return False
    gen = methods.get("generate")
    return gen is not None and no_grad(gen)
