"""The code matchers that `kind = "pattern"` clauses name, each in one place: its trigger strings
(the text prefilter, pyindex.py), its libcst check (run by the scanner, python.py) and its ast
check (run by the screen, screen.py, which must over-approximate the libcst check).

To add a matcher: subclass Matcher here (name, triggers, the libcst events it needs, `screen_nodes`
and `may`), register it in MATCHERS, and name it in a rule's `matcher`. The scanner makes one
instance per file, so its state is the file's; it calls only the events a matcher overrides.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Any, ClassVar

from . import vocab
from .vocab import dotted_parts, literal_value, string_shapes

if TYPE_CHECKING:
    from .python import PythonScanner
    from .screen import _Screen

_DEVICE_CUDA = r"cuda(:\d+)?"
# Calls that read a tensor's value into Python (in an if / while test, that is a graph break).
_TORCH_READS = frozenset({
    "torch.any", "torch.all", "torch.equal", "torch.allclose", "torch.is_nonzero",
    "torch.count_nonzero", "torch.isnan", "torch.isinf", "torch.isfinite",
})
_READ_METHODS = frozenset({"any", "all", "item", "count_nonzero"})
_REDUCTIONS = frozenset({"sum", "max", "min", "mean", "norm"})  # read back only without arguments
_READ_ATTRS = _READ_METHODS | _REDUCTIONS
# On the XLA path a training step must end in a graph cut; any of these provides one.
_XLA_STEP_CALLS = frozenset({
    "torch_xla.core.xla_model.mark_step",
    "torch_xla.core.xla_model.optimizer_step",
    "torch_xla.sync",
    "torch_xla.step",
    "torch_xla.distributed.parallel_loader.MpDeviceLoader",
    "torch_xla.distributed.parallel_loader.ParallelLoader",
})
# Calls (by their last name) from which the scanner learns a file trains or cuts XLA steps.
_STEP_NAMES = frozenset({"backward", "mark_step", "optimizer_step", "sync", "step", "MpDeviceLoader", "ParallelLoader"})
_NOT_BOOLEAN_OPS = (ast.In, ast.NotIn, ast.Is, ast.IsNot)

Entries = list  # [(Rule, Match)]: the clauses of the active catalog that name a matcher


class Matcher:
    """A code matcher. Subclasses override the libcst events they need; each is called with the
    node, and the line the scanner is at, for the matchers the active catalog uses."""

    name: ClassVar[str]
    triggers: ClassVar[tuple[str, ...]]  # a file with none of these strings cannot match
    screen_nodes: ClassVar[tuple[type, ...]] = ()  # ast nodes `may` judges; none: the screen keeps every file

    def __init__(self, scan: PythonScanner, entries: Entries) -> None:
        self.scan = scan
        self.entries = entries

    def report(self, line: int, node: Any, symbol: str) -> None:
        for rule, clause in self.entries:
            self.scan.add(rule, clause, line, node, symbol)

    # ---------------------------------------------------------------- libcst events
    def subscript(self, node: Any, line: int) -> None:
        """An `x[...]` read or written, outside import statements."""

    def test(self, expr: Any, line: int) -> None:
        """The test of an `if`, `while` or conditional expression, or an argument of `range()`."""

    def assign(self, target: Any, value: Any, line: int) -> None:
        """One target of an assignment (or annotated assignment with a value)."""

    def call(self, node: Any, callee: str | None, line: int) -> None:
        """A call, with its callee's qualified name when it resolves."""

    def backward(self, node: Any, line: int) -> None:
        """A backward() call, before the scanner marks the enclosing scope as training."""

    def function(self, node: Any) -> None:
        """A `def`, entered (its decorators resolve in the enclosing scope)."""

    def finish(self) -> None:
        """The end of the file."""

    # ---------------------------------------------------------------- ast
    @staticmethod
    def may(screen: _Screen, node: ast.AST, entries: Entries) -> bool:
        """Could the libcst check report something at `node` (one of `screen_nodes`)? Never False on a guess."""
        return True


# ---------------------------------------------------------------------------------- the matchers

class BoolMaskIndex(Matcher):
    """`x[mask]`, `x[x > 0]`: boolean-mask indexing, a data-dependent shape."""

    name = "bool_mask_index"
    triggers = ("mask", "[", ">", "<", "==")
    screen_nodes = (ast.Subscript,)

    def subscript(self, node, line):
        scan = self.scan
        if id(node) in scan.store or len(node.slice) != 1:
            return
        sl = node.slice[0].slice
        if type(sl) is vocab.cst.Index and self.looks_boolean(sl.value):
            self.report(line, node, vocab.short_code(node))

    def looks_boolean(self, expr) -> bool:
        cst = vocab.cst
        t = type(expr)
        if t is cst.Comparison:
            return all(type(c.operator) not in (cst.In, cst.NotIn, cst.Is, cst.IsNot) for c in expr.comparisons)
        if t is cst.UnaryOperation and type(expr.operator) is cst.BitInvert:
            return True
        if t is cst.BinaryOperation and type(expr.operator) in (cst.BitAnd, cst.BitOr):
            return self.looks_boolean(expr.left) or self.looks_boolean(expr.right)
        if t is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "bool":
            return True
        parts = dotted_parts(expr)
        if parts and "mask" in parts[-1].lower():
            b = self.scan.names.lookup(parts[0])
            return b is None or b.qualname is None
        return False

    @staticmethod
    def may(screen, node, entries):
        return _maybe_boolean(node.slice) and screen.any_may(entries)


def _maybe_boolean(index: ast.AST) -> bool:
    """looks_boolean on a subscript's single index (a name with "mask" in it counts whatever it is bound to)."""
    t = type(index)
    if t is ast.Tuple and len(index.elts) == 1:  # `x[m > 0,]` has one index, as libcst sees it
        return _maybe_boolean(index.elts[0])
    if t is ast.Compare:
        return all(type(op) not in _NOT_BOOLEAN_OPS for op in index.ops)
    if t is ast.UnaryOp:
        return type(index.op) is ast.Invert
    if t is ast.BinOp:
        return type(index.op) in (ast.BitAnd, ast.BitOr) and (_maybe_boolean(index.left) or _maybe_boolean(index.right))
    if t is ast.Call:
        return type(index.func) is ast.Attribute and index.func.attr == "bool"
    parts = vocab.ast_chain(index)
    return bool(parts) and "mask" in parts[-1].lower()


class TensorControlFlow(Matcher):
    """`if (x > 0).any():`, `while loss.item() > t:`: Python control flow on a tensor's value."""

    name = "tensor_control_flow"
    triggers = ("any(", "all(", "item(", ".sum(", ".max(", ".min(", ".mean(", "equal(", "allclose(")
    screen_nodes = (ast.If, ast.While, ast.IfExp, ast.For, ast.AsyncFor)

    def test(self, expr, line):
        culprit = self.value_read(expr)
        if culprit is not None:
            self.report(line, expr, culprit)

    def value_read(self, expr) -> str | None:
        """A call in `expr` that reads a tensor's value into Python, e.g. `(x > 0).any()`."""
        from .cstwalk import iter_subtree

        cst = vocab.cst
        for n in iter_subtree(expr):
            if type(n) is not cst.Call:
                continue
            func = n.func
            q, _ = self.scan.names.resolve(func) if type(func) in (cst.Name, cst.Attribute) else (None, False)
            if q is not None:
                if q in _TORCH_READS:
                    return q
                continue
            if type(func) is cst.Attribute and func.attr.value in _READ_ATTRS:
                if func.attr.value in _REDUCTIONS and n.args:
                    continue  # `.sum(dim)` and friends return tensors; only whole reductions are read back
                return f".{func.attr.value}()"
        return None

    @staticmethod
    def may(screen, node, entries):
        t = type(node)
        if t is ast.For or t is ast.AsyncFor:
            test = node.iter
            if type(test) is not ast.Call:
                return False
        else:
            test = node.test
        return _reads_value(screen, test) and screen.any_may(entries)


def _reads_value(screen: _Screen, test: ast.AST) -> bool:
    """value_read on ast: a call in a test that may read a tensor's value."""
    for n in screen.walk(test):
        if type(n) is not ast.Call:
            continue
        func = n.func
        if type(func) is ast.Attribute:
            if func.attr in _READ_METHODS or (func.attr in _REDUCTIONS and not n.args and not n.keywords):
                return True
        parts = vocab.ast_chain(func)
        if parts and any(q in _TORCH_READS for q in screen.candidates(parts)):
            return True
    return False


class TritonLaunch(Matcher):
    """`kernel[grid](...)`: a launch of a Triton kernel defined in this file, or named like one
    (kernels are often defined in a sibling module)."""

    name = "triton_launch"
    triggers = ("](",)
    screen_nodes = (ast.Call,)

    def __init__(self, scan, entries):
        super().__init__(scan, entries)
        self.kernel_names: set[str] = set()
        self.launches: list[tuple[str, int, Any, str, bool]] = []

    def function(self, node):
        for d in node.decorators:
            expr = d.decorator
            q, _ = self.scan.names.resolve(expr.func if type(expr) is vocab.cst.Call else expr)
            if q is not None and q.startswith("triton."):
                self.kernel_names.add(node.name.value)
                return

    def call(self, node, callee, line):
        func = node.func
        if type(func) is not vocab.cst.Subscript:
            return
        parts = dotted_parts(func.value)
        index = func.slice[0].slice if len(func.slice) == 1 else None
        keyed = type(index) is vocab.cst.Index and isinstance(literal_value(index.value), str)
        if parts and not keyed:  # `kernels["rms"](x)` looks a kernel up; `k[grid](x)` launches one
            scan = self.scan
            guarded = scan.guards.in_kernel_guard(scan.names.scopes) or id(node) in scan.guards.ifexp_arms
            self.launches.append((parts[-1], line, node, scan.names.scope_name(), guarded))

    def finish(self):
        for name, line, node, scope, guarded in self.launches:
            if name in self.kernel_names or "kernel" in name.lower():
                for rule, clause in self.entries:
                    self.scan.emit(rule, clause, line, node, name, scope, rule.fallback and guarded)

    @staticmethod
    def may(screen, node, entries):
        func = node.func
        if type(func) is not ast.Subscript:
            return False
        parts = vocab.ast_chain(func.value)
        launch = bool(parts) and ("kernel" in parts[-1].lower() or parts[-1] in screen.decorated)
        return launch and screen.any_may(entries)


class XlaStepWithoutMarkStep(Matcher):
    """A training step (backward()) in a file that never cuts the XLA graph (mark_step and friends)."""

    name = "xla_step_without_mark_step"
    triggers = ("backward",)
    screen_nodes = (ast.Call,)

    def __init__(self, scan, entries):
        super().__init__(scan, entries)
        self.marks_step = False
        self.sites: list[tuple[int, Any, str]] = []  # the first backward() of each training scope

    def backward(self, node, line):
        names = self.scan.names
        if not names.scope.trains:
            self.sites.append((line, node, names.scope_name()))

    def call(self, node, callee, line):
        if callee in _XLA_STEP_CALLS:
            self.marks_step = True

    def finish(self):
        if self.marks_step:
            return
        for rule, clause in self.entries:
            for line, node, scope in self.sites:
                self.scan.emit(rule, clause, line, node, "backward()", scope, False)

    @staticmethod
    def may(screen, node, entries):
        # A file-wide fact: any region with such a call stays, whatever the clause conditions.
        func = node.func
        name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None
        return name in _STEP_NAMES


class DeviceString(Matcher):
    """`device = "cuda"`, `self.device = f"cuda:{rank}"`: a CUDA device chosen by name."""

    name = "device_string"
    triggers = ("cuda",)
    screen_nodes = (ast.Assign, ast.AnnAssign)

    def assign(self, target, value, line):
        parts = dotted_parts(target)
        if not parts or "device" not in parts[-1].lower():
            return
        if any(re.fullmatch(_DEVICE_CUDA, v) for v in string_shapes(value)):
            self.report(line, value, vocab.short_code(value))

    @staticmethod
    def may(screen, node, entries):
        if node.value is None:
            return False
        targets = node.targets if type(node) is ast.Assign else [node.target]
        if not any((p := vocab.ast_chain(tg)) and "device" in p[-1].lower() for tg in targets):
            return False
        return vocab.fullmatch_may(_DEVICE_CUDA, vocab.ast_shapes(node.value)) and screen.any_may(entries)


# The registry: a rule's `matcher` names one of these. Order is the order of their end-of-file hits.
MATCHERS: dict[str, type[Matcher]] = {
    m.name: m for m in (BoolMaskIndex, TensorControlFlow, TritonLaunch, XlaStepWithoutMarkStep, DeviceString)
}
