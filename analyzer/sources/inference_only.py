"""Code that says in its own shape that it never trains: the ast readers codefacts.py uses to mark
inference-only functions, classes and branches (context.py then labels what only they reach as the
evaluation path).

- An op that refuses gradients: a function whose own body raises when an input requires a gradient
  (`if torch.is_grad_enabled() and x.requires_grad: raise ValueError("Gradients not supported.")`,
  `assert not x.requires_grad`), or an autograd Function whose `backward` does nothing but raise with
  a message (`raise NotImplementedError("inference-only")`, `"Backward pass is not implemented. Stay
  tuned!"`): whatever the intent, no training job can call it today. A bare `raise
  NotImplementedError` is the abstract-method idiom of a base class, not an op. A backward that
  raises in one branch only (an unsupported option) still trains, but the branch of `forward` under
  the same test (`if initial_state is not None:` in both) serves only what cannot train; a function
  that raises when a switch is on and an input needs a gradient (`if use_fused and x.requires_grad`)
  still trains.
- A branch that opens by asserting its tensors need no gradient (`if store is not None: assert
  not k.requires_grad ...`: a KV-cache decode branch): it runs only without autograd; and one that
  opens by switching the model to evaluation mode (`if i % GENERATE_EVERY == 0: model.eval()`).
- A driver of a trained model: a class named `*Generator` that is no module (no `forward`) and
  whose `generate` runs under `@torch.no_grad()` (`SAM2AutomaticMaskGenerator`). Data generators
  that feed training neither disable autograd nor go by that pair.
"""

from __future__ import annotations

import ast

from .vocab import ast_chain as _chain
from .vocab import ast_nodes

NO_GRAD_DECORATORS = frozenset({"no_grad", "inference_mode"})


def _stmts(body: list[ast.stmt]) -> list[ast.stmt]:
    """A body without its docstring and `pass`."""
    return [st for st in body if not (type(st) is ast.Pass or (type(st) is ast.Expr and type(st.value) is ast.Constant))]


def _asks_grad(node: ast.AST) -> bool:
    """True for a test that holds when autograd records: `x.requires_grad`, `torch.is_grad_enabled()`,
    `any(t.requires_grad for t in ts)`, `w is not None and w.requires_grad` (never a negation)."""
    for n in ast_nodes(node):
        if type(n) is ast.UnaryOp and type(n.op) is ast.Not:
            return False
    return any((type(n) is ast.Attribute and n.attr == "requires_grad")
               or (type(n) is ast.Call and (_chain(n.func) or [""])[-1] == "is_grad_enabled") for n in ast_nodes(node))


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


def _backward(node: ast.ClassDef) -> ast.FunctionDef | None:
    """The `backward` of an autograd Function (`class F(torch.autograd.Function)`), else None."""
    if not any((_chain(b) or [""])[-1] == "Function" for b in node.bases):
        return None
    for st in node.body:
        if type(st) in (ast.FunctionDef, ast.AsyncFunctionDef) and st.name == "backward":
            return st
    return None


def _says_why(st: ast.stmt) -> bool:
    """`raise E("message")`: not the bare `raise NotImplementedError` of an abstract method."""
    return (type(st) is ast.Raise and type(st.exc) is ast.Call
            and any(type(n) is ast.Constant and type(n.value) is str for a in st.exc.args for n in ast.walk(a)))


def backward_only_raises(node: ast.ClassDef) -> bool:
    """An autograd Function whose `backward` does nothing but raise, saying why."""
    back = _backward(node)
    body = _stmts(back.body) if back is not None else []
    return len(body) == 1 and _says_why(body[0])


def backward_refusals(node: ast.ClassDef) -> frozenset[str]:
    """The tests under which an autograd Function's `backward` gives up (`if initial_state is not None:
    raise NotImplementedError(...)` at its top level, nothing else in the branch), as `ast.dump`s:
    `forward`'s branch under the same test serves only calls that cannot train."""
    back = _backward(node)
    if back is None:
        return frozenset()
    return frozenset(ast.dump(st.test) for st in _stmts(back.body)
                     if type(st) is ast.If and not st.orelse and len(_stmts(st.body)) == 1 and _says_why(_stmts(st.body)[0]))


def asserts_no_grad(body: list[ast.stmt]) -> bool:
    """A branch that opens (its first statements, before anything else runs) by asserting no gradients."""
    for st in _stmts(body)[:3]:
        if _no_grad_assert(st):
            return True
        if type(st) is not ast.Assert:
            return False
    return False


def switches_to_eval(body: list[ast.stmt]) -> bool:
    """A branch that opens with `model.eval()` (`if step % sample_every == 0: model.eval(); ...`): it
    runs the model in evaluation mode. Not one that freezes a part for training (`self.stem.eval()`
    beside `p.requires_grad = False`)."""
    stmts = _stmts(body)
    if not stmts or type(stmts[0]) is not ast.Expr or type(stmts[0].value) is not ast.Call:
        return False
    call = stmts[0].value
    if type(call.func) is not ast.Attribute or call.func.attr != "eval" or call.args or call.keywords:
        return False
    return not any((type(n) is ast.Attribute and n.attr == "requires_grad" and type(n.ctx) is ast.Store)
                   or (type(n) is ast.Attribute and n.attr == "requires_grad_") for st in stmts for n in ast.walk(st))


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
