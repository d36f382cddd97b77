"""The code matchers that `kind = "pattern"` clauses name, each in one place: its trigger strings
(the text prefilter, pyindex.py), its libcst check (run by the scanner, python.py) and its ast
check (run by the screen, screen.py, which must over-approximate the libcst check).

To add a matcher: subclass Matcher here (name, triggers, the libcst events it needs, `screen_nodes`
and `may`), register it in MATCHERS, and name it in a rule's `matcher`. The scanner makes one
instance per file, so its state is the file's; it calls only the events a matcher overrides.

The value matchers (a value's origin matters: `device_ids=[torch.cuda.current_device()]`, a NumPy
float64 array turned into a tensor) read what names were given from the scanner's value tracker
(values.py); their ast checks ask the screen's `travel` (valuefacts.py). `config_precision` matches
training configs, not code (configvalues.py); it is registered here so rules may name it.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst

from . import vocab
from .configvalues import MATCHER as CONFIG_PRECISION
from .valuefacts import _CREATE_METHODS, CUDA_DEVICE, DATA_PARALLEL
from .vocab import dotted_parts, literal_value, string_shapes

if TYPE_CHECKING:
    from .python import PythonScanner
    from .scopes import Names
    from .screen import _Screen
    from .valuefacts import ScreenFacts

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
# Functions that build or initialise a model: what they read from a tensor is read once, not per step.
_CONSTRUCTION = re.compile(r"(?i)(^|_)(init|initiali[sz]e|reset_parameters|init_weights?)(_|$)")


def constructing(names: Names) -> bool:
    """Inside a function that builds or initialises a model (`__init__`, `reset_parameters`, `_init_fn`)."""
    return any(s.kind == "function" and _CONSTRUCTION.search(s.name) for s in names.scopes)

Entries = list  # [(Rule, Match)]: the clauses of the active catalog that name a matcher


class Matcher:
    """A code matcher. Subclasses override the libcst events they need; each is called with the
    node, and the line the scanner is at, for the matchers the active catalog uses."""

    name: ClassVar[str]
    triggers: ClassVar[tuple[str, ...]]  # a file with none of these strings cannot match; (): no Python file can
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

    def assertion(self, node: Any, line: int) -> None:
        """An `assert` statement."""

    def branch(self, node: Any, line: int) -> None:
        """An `if` statement (or an `elif`), with its branches."""

    def backward(self, node: Any, line: int) -> None:
        """A backward() call, before the scanner marks the enclosing scope as training."""

    def function(self, node: Any) -> None:
        """A `def`, entered (its decorators resolve in the enclosing scope)."""

    def binary(self, node: Any, line: int) -> None:
        """A binary operation (`a @ b`, `a ** n`)."""

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
        if type(sl) is vocab.cst.Index and self.looks_boolean(sl.value) and not scan.values.not_a_mask(node, sl.value):
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
        if self.scan.values.boolean_travels(expr, self.looks_boolean):
            return True  # `keep = labels != ignore_index` ... `logits[keep]` (values.py)
        parts = dotted_parts(expr)
        if parts and "mask" in parts[-1].lower():
            b = self.scan.names.lookup(parts[0])
            return b is None or b.qualname is None
        return False

    @staticmethod
    def may(screen, node, entries):
        return _maybe_boolean(node.slice, screen.travel) and screen.any_may(entries)


def _maybe_boolean(index: ast.AST, travel: ScreenFacts) -> bool:
    """looks_boolean on a subscript's single index (a name with "mask" in it counts whatever it is
    bound to, and so does a name given a boolean expression: valuefacts.py)."""
    t = type(index)
    if t is ast.Tuple and len(index.elts) == 1:  # `x[m > 0,]` has one index, as libcst sees it
        return _maybe_boolean(index.elts[0], travel)
    if t is ast.Compare:
        return all(type(op) not in _NOT_BOOLEAN_OPS for op in index.ops)
    if t is ast.UnaryOp:
        return type(index.op) is ast.Invert
    if t is ast.BinOp:
        return type(index.op) in (ast.BitAnd, ast.BitOr) and (
            _maybe_boolean(index.left, travel) or _maybe_boolean(index.right, travel))
    if t is ast.Call:
        return type(index.func) is ast.Attribute and index.func.attr == "bool"
    parts = vocab.ast_chain(index)
    return bool(parts) and "mask" in parts[-1].lower() or travel.may_be_boolean(index)


class TensorControlFlow(Matcher):
    """`if (x > 0).any():`, `while loss.item() > t:`: Python control flow on a tensor's value."""

    name = "tensor_control_flow"
    triggers = ("any(", "all(", "item(", ".sum(", ".max(", ".min(", ".mean(", "equal(", "allclose(")
    screen_nodes = (ast.If, ast.While, ast.IfExp, ast.For, ast.AsyncFor)

    def test(self, expr, line):
        scan = self.scan
        if constructing(scan.names):
            return  # model construction and weight init run once, not per step
        culprit = tensor_value_read(scan.names, expr, scan.values.host_value)
        if culprit is not None:
            self.report(line, expr, culprit)

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


def tensor_value_read(names: Names, expr, host=None) -> str | None:
    """A call in `expr` that reads a tensor's value into Python, e.g. `(x > 0).any()` (libcst).
    `host(receiver)`: the receiver is a NumPy or pandas value, whose reads are not of a tensor."""
    return next((culprit for culprit, _ in tensor_value_reads(names, expr, host)), None)


def tensor_value_reads(names: Names, expr, host=None):
    """Each read tensor_value_read looks for, in source order: (culprit, the tensor it reads), the
    tensor being a method's receiver or a torch read's first argument (None when it has none)."""
    from .cstwalk import iter_subtree

    cst = vocab.cst
    for n in iter_subtree(expr):
        if type(n) is not cst.Call:
            continue
        func = n.func
        q, _ = names.resolve(func) if type(func) in (cst.Name, cst.Attribute) else (None, False)
        if q is not None:
            if q in _TORCH_READS:
                yield q, (n.args[0].value if n.args and n.args[0].keyword is None and not n.args[0].star else None)
            continue
        if type(func) is cst.Attribute and func.attr.value in _READ_ATTRS:
            if func.attr.value in _REDUCTIONS and n.args:
                continue  # `.sum(dim)` and friends return tensors; only whole reductions are read back
            if host is not None and host(func.value):
                continue
            yield f".{func.attr.value}()", func.value


def _reads_value(screen: _Screen, test: ast.AST) -> bool:
    """tensor_value_read on ast: a call in a test that may read a tensor's value."""
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
        # a string index, literal or formatted (`kernels["rms"](x)`, `table[f"{kind}"](x)`), looks a
        # callable up; a grid is a tuple, a lambda or a name (`k[grid](x)` launches a kernel)
        keyed = type(index) is vocab.cst.Index and (
            isinstance(literal_value(index.value), str)
            or type(index.value) in (vocab.cst.FormattedString, vocab.cst.ConcatenatedString))
        if parts and not keyed:
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


class CudaRequired(Matcher):
    """`if not x.is_cuda: raise ...`, `assert q.device.type == "cuda"`, `if not ok: raise` with `ok`
    set from a CUDA check in the function: a check that rejects every device but CUDA. The test is
    codefacts' `cuda_check` (one definition of a CUDA test for the scanner and the reachability);
    `torch.cuda.is_available()` alone is left to NR1005 and NCCL tests to the distributed rules."""

    name = "cuda_required"
    triggers = ("cuda",)
    screen_nodes = (ast.If, ast.Assert)

    def __init__(self, scan, entries) -> None:
        super().__init__(scan, entries)
        self.cuda_locals: dict[tuple, set[str]] = {}  # per function: names set from a CUDA check

    def _locals(self) -> set[str]:
        return self.cuda_locals.setdefault(tuple(s.name for s in self.scan.names.scopes), set())

    def report(self, line, node, symbol):
        from .guards import COMPAT

        if not any(g.kind == COMPAT for g in self.scan.guards.open):  # an older PyTorch's path never runs
            super().report(line, node, symbol)

    def assign(self, target, value, line):
        if type(target) is cst.Name and _cuda_test(value, ()) == "body":
            self._locals().add(target.value)

    def branch(self, node, line):
        from .guards import raises  # guards and codefacts read pyindex, which reads this module

        side = _cuda_test(node.test, self._locals())
        if side is None:
            return
        # the branch that runs off CUDA (the body of `if not x.is_cuda:`, the else of `if x.is_cuda:`)
        off = node.body if side == "else" else node.orelse.body if type(node.orelse) is cst.Else else None
        if off is not None and raises(off):
            self.report(line, node.test, vocab.short_code(node.test))

    def assertion(self, node, line):
        if _cuda_test(node.test, ()) == "body":
            self.report(line, node.test, f"assert {vocab.short_code(node.test)}")

    @staticmethod
    def may(screen, node, entries):
        from .codefacts import _gives_up, cuda_check

        if type(node) is ast.Assert:
            ok = cuda_check(node.test) == "body" and _names_a_device(node.test)
        else:  # a CUDA test, or a bare flag (`if not ok:`) a CUDA test may have set: not every `if ...: raise`
            test = node.test.operand if type(node.test) is ast.UnaryOp and type(node.test.op) is ast.Not else node.test
            ok = (type(test) is ast.Name or _names_a_device(node.test)) and (_gives_up(node.body) or _gives_up(node.orelse))
        return ok and screen.any_may(entries)


def _names_a_device(test: ast.AST) -> bool:
    """A CUDA test on a tensor or device (`.is_cuda`, a value compared with "cuda"), not only
    `torch.cuda.is_available()` (NR1005) or an NCCL backend (the distributed rules)."""
    return any((type(n) is ast.Attribute and n.attr == "is_cuda")
               or (type(n) is ast.Constant and type(n.value) is str and re.fullmatch(_DEVICE_CUDA, n.value))
               for n in vocab.ast_nodes(test))


# The libcst expressions whose ast form cuda_check can answer "body" or "else" for (ast Name,
# Attribute, UnaryOp, BoolOp, Call, Compare); for any other kind it answers None.
_TEST_KINDS = (cst.Name, cst.Attribute, cst.UnaryOperation, cst.BooleanOperation, cst.Call, cst.Comparison)
_TEST_CALLS = frozenset({"any", "all", "startswith", "is_available", "is_initialized"})  # the only callees cuda_check reads


def _cannot_test(expr, cuda_locals) -> bool:
    """cuda_check answers None for `expr`, seen without rendering it: every assigned value is
    asked, and rendering a large table to parse it again cost a tenth of a `--jobs 1` scan of
    torch (docs/lab/performance.md, stop 30). A non-ASCII name is left to the ast (which
    normalizes identifiers)."""
    t = type(expr)
    if t not in _TEST_KINDS:
        return True
    if t is cst.Call:
        func = expr.func
        name = func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else None
        return name is not None and name.isascii() and name not in _TEST_CALLS
    if not cuda_locals:  # a name or an attribute tests CUDA only as a local a CUDA check set, or `.is_cuda`
        if t is cst.Name:
            return True
        if t is cst.Attribute:
            return expr.attr.value.isascii() and expr.attr.value != "is_cuda"
    return False


def _cuda_test(expr, cuda_locals) -> str | None:
    """codefacts.cuda_check on a libcst expression: "body", "else" or None."""
    from .codefacts import cuda_check

    if _cannot_test(expr, cuda_locals):
        return None
    try:
        tree = ast.parse(cst.Module([]).code_for_node(expr).strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    names = {n.id for n in vocab.ast_nodes(tree) if type(n) is ast.Name}
    if not (_names_a_device(tree) or names & set(cuda_locals)):
        return None
    return cuda_check(tree, cuda_locals)


# ---------------------------------------------------------------------------------- values that travel

class _ValueMatcher(Matcher):
    """A matcher that follows values (values.py). Its ast check: valuefacts.py's ScreenFacts names
    the one value matcher a node may concern."""

    @classmethod
    def may(cls, screen, node, entries):
        return screen.travel.needed(node, screen.candidates) == cls.name and screen.any_may(entries)


_DEVICE_ARGS = (("device_ids", 1), ("output_device", 2), ("device_id", None))


class CudaDeviceArg(_ValueMatcher):
    """DDP `device_ids`/`output_device` computed by a `torch.cuda.*` call, FSDP `device_id` naming
    CUDA (a `cuda` string, `torch.device("cuda", i)`, a `torch.cuda.*` call), directly or one
    assignment away. An integer index (`device_ids=[local_rank]`) resolves to the current accelerator."""

    name = "cuda_device_arg"
    triggers = ("device_id", "output_device")
    screen_nodes = (ast.Call,)

    def call(self, node, callee, line):
        if callee not in DATA_PARALLEL:
            return
        from ..catalog import ArgCond

        ddp = "DistributedDataParallel" in callee
        for keyword, position in _DEVICE_ARGS:
            if keyword == "device_id" and ddp:
                continue
            value = vocab.find_arg(node, ArgCond(keyword=keyword, position=position if ddp else None))
            # DDP keeps only the index of what it is given (torch._utils._get_device_index), so
            # "cuda:0" works there; a torch.cuda call does not. FSDP computes on the device it names.
            if value is not None and self.scan.values.names_cuda(value, calls_only=ddp):
                self.report(line, node, f"{keyword}=")


_NCCL = re.compile(r"(?i).*nccl.*")


class BackendSetting(_ValueMatcher):
    """`args.dist_backend = "nccl"`: an attribute named like a backend set to NCCL."""

    name = "backend_setting"
    triggers = ("backend",)
    screen_nodes = (ast.Assign,)

    def assign(self, target, value, line):
        if type(target) is not vocab.cst.Attribute or not target.attr.value.lower().endswith("backend"):
            return
        parts = dotted_parts(target)
        shapes = string_shapes(value)
        if parts and any(_NCCL.fullmatch(v) for v in shapes):
            self.report(line, value, f"{'.'.join(parts)} = {shapes[0]!r}")


class ArgparseCudaDefault(_ValueMatcher):
    """`add_argument("--device", default="cuda")` whose value reaches `.to()` or `torch.device()`
    in the file (decided at its end)."""

    name = "argparse_cuda_default"
    triggers = ("add_argument",)
    screen_nodes = (ast.Call, ast.Assign)

    def __init__(self, scan, entries):
        super().__init__(scan, entries)
        self.options: list[tuple[str, int, Any, str]] = []  # (dest, line, default node, scope)
        self.to_names: set[str] = set()  # what `.to()` and `torch.device()` are given
        self.derived: dict[str, list] = {}  # name -> the values it was given

    def assign(self, target, value, line):
        parts = dotted_parts(target)
        if parts and len(parts) == 1:
            self.derived.setdefault(parts[0], []).append(value)

    def call(self, node, callee, line):
        func = node.func
        method = func.attr.value if type(func) is vocab.cst.Attribute else None
        if method == "to" or callee == "torch.device":
            for a in node.args:
                parts = dotted_parts(a.value)
                if parts:
                    self.to_names.add(".".join(parts))
        if callee is None and method == "add_argument":
            self.option(node, line)

    def option(self, node, line):
        options = [literal_value(a.value) for a in node.args if a.keyword is None]
        options = [o for o in options if isinstance(o, str)]
        default = dest = None
        for a in node.args:
            if a.keyword is not None and a.keyword.value == "default":
                default = a.value
            elif a.keyword is not None and a.keyword.value == "dest":
                dest = literal_value(a.value)
        if default is None or not any(CUDA_DEVICE.fullmatch(v) for v in string_shapes(default)):
            return
        if not isinstance(dest, str):
            longs = [o for o in options if o.startswith("--")] or options
            dest = longs[0].lstrip("-").replace("-", "_") if longs else None
        if dest and "device" in dest.lower():
            self.options.append((dest, line, default, self.scan.names.scope_name()))

    def derives(self, name: str, attr: str) -> bool:
        """`name` was given a value that reads `.attr` (`device = torch.device(args.device)`)."""
        from .cstwalk import iter_subtree

        return any(type(n) is vocab.cst.Attribute and n.attr.value == attr
                   for v in self.derived.get(name, ()) for n in iter_subtree(v))

    def finish(self):
        for dest, line, node, scope in self.options:
            if any(k.endswith("." + dest) or self.derives(k, dest) for k in self.to_names):
                for rule, clause in self.entries:
                    self.scan.emit(rule, clause, line, node, f"--{dest.replace('_', '-')}", scope, False)


_TO_TENSOR = frozenset({"torch.from_numpy", "torch.as_tensor", "torch.tensor"})
_CASTS = frozenset({"float", "half", "bfloat16", "to", "type"})


class NumpyFloat64(_ValueMatcher):
    """`torch.from_numpy` / `torch.as_tensor` / `torch.tensor` of a NumPy array built without a dtype
    by a float64-by-default constructor (`np.linspace`, `np.zeros`, `np.arange` with a float step),
    and not cast right away (`.float()`, `.to(torch.float32)`)."""

    name = "numpy_float64"
    triggers = ("from_numpy", "as_tensor", "tensor(")
    screen_nodes = (ast.Call,)

    def __init__(self, scan, entries):
        super().__init__(scan, entries)
        self.cast: set[int] = set()  # calls whose result is cast at once (`torch.from_numpy(a).float()`)

    def call(self, node, callee, line):
        func = node.func
        values = self.scan.values
        if type(func) is vocab.cst.Attribute and func.attr.value in _CASTS:
            # `.to(device)` keeps the dtype; `.to(torch.float32)` does not. (The outer call comes first.)
            if func.attr.value != "to" or any(values.names_float(a.value) for a in node.args):
                self.cast.add(id(func.value))
        if callee not in _TO_TENSOR or not node.args or id(node) in self.cast:
            return
        if any(a.keyword and a.keyword.value == "dtype" for a in node.args):
            return
        first = node.args[0].value
        if values.float64_array(first) or values.travels(first, values.float64_array):
            self.report(line, node, callee)


_CREATE = frozenset({"torch.zeros", "torch.ones", "torch.full", "torch.empty", "torch.nn.functional.pad"})


class BatchMaxPad(_ValueMatcher):
    """A tensor created (or padded) to a size taken as the `max` over a batch
    (`max(img.shape[-1] for img in images)`): every batch gets its own shape."""

    name = "batch_max_pad"
    triggers = ("max(",)
    screen_nodes = (ast.Call,)

    def call(self, node, callee, line):
        if callee is None:
            func = node.func
            if type(func) is not vocab.cst.Attribute or func.attr.value not in _CREATE_METHODS:
                return
            symbol = f".{func.attr.value}()"
        elif callee in _CREATE:
            symbol = callee
        else:
            return
        if any(self.scan.values.batch_max(a.value) for a in node.args):
            self.report(line, node, symbol)


_SIZED = frozenset({"torch.arange", "torch.linspace", "torch.logspace"})


class HostRead(_ValueMatcher):
    """Host reads the method rules do not see, for `within = "forward"`: an `assert` on a tensor
    value, `torch.arange`/`linspace` sized by a tensor value, `int()`/`float()` of a tensor."""

    name = "host_read"
    triggers = ("assert", "int(", "float(", "arange(", "linspace(")
    screen_nodes = (ast.Call, ast.Assert)

    def call(self, node, callee, line):
        values = self.scan.values
        if callee in _SIZED:
            if any(values.tensor_value(a.value) for a in node.args if a.keyword is None):
                self.report(line, node, callee)
        elif callee in ("builtins.int", "builtins.float") and len(node.args) == 1:
            if values.tensor_value(node.args[0].value):
                self.report(line, node, f"{callee.split('.')[1]}()")

    def assertion(self, node, line):
        culprit = tensor_value_read(self.scan.names, node.test)
        if culprit is not None and culprit != ".item()":
            self.report(line, node, f"assert {culprit}")


# INT64 is narrowed losslessly where it only indexes, gathers, embeds or compares; the loss is in
# ops with no integer datapath (neuron-facts 1.3): matmul and dot, scatter-with-compute, all-reduce
# and reduce-scatter (computed in FP32), integer pow (via INT32) and integer topk (rejected, EVRF013).
_INT64_NAMES = frozenset({"torch.int64", "torch.long"})
_INT64_FACTORIES = frozenset({
    "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.arange", "torch.tensor", "torch.as_tensor",
    "torch.randint", "torch.zeros_like", "torch.ones_like", "torch.empty_like", "torch.full_like",
    "torch.randint_like", "torch.randperm", "torch.linspace", "torch.eye",
})
_INT64_BY_DEFAULT = frozenset({"torch.arange", "torch.randint", "torch.randperm"})  # int64 without a dtype
_TO_FLOAT = frozenset({"float", "half", "bfloat16", "double", "type_as"})  # a cast that ends the integer value
_NOT_A_TENSOR = frozenset({"size", "dim", "item", "tolist", "numel", "ndimension", "data_ptr", "element_size"})
# op -> (what it is, positions and keywords that are indices (lossless), for the function form)
_LOSSY_CALLS = {
    "torch.matmul": "matmul", "torch.mm": "matmul", "torch.bmm": "matmul", "torch.mv": "matmul",
    "torch.dot": "matmul", "torch.einsum": "matmul", "torch.nn.functional.linear": "matmul",
    "torch.scatter_add": "scatter_add", "torch.index_add": "index_add",
    "torch.pow": "pow", "torch.topk": "topk",
}
_LOSSY_METHODS = {
    "matmul": "matmul", "mm": "matmul", "bmm": "matmul", "mv": "matmul", "dot": "matmul",
    "scatter_add": "scatter_add", "scatter_add_": "scatter_add", "index_add": "index_add", "index_add_": "index_add",
    "pow": "pow", "pow_": "pow", "topk": "topk",
}
_INDEX_ARG = {"scatter_add": 2, "index_add": 2}  # torch.scatter_add(input, dim, index, src): index is position 2
_ONLY_FIRST = frozenset({"topk"})  # topk's k is a Python int
# An integer matmul or pow needs every operand integer: with a float one, PyTorch computes in float
# on any device, so nothing changes on Neuron. A scatter-add's data fixes its accumulator's dtype.
_ALL_INTEGER = frozenset({"matmul", "@", "pow", "**"})
# A distributed reduction, by its name: torch.distributed's, and helpers named after one (`dist_sum`).
_REDUCE_NAME = re.compile(r"(?i)(all_?reduce|reduce_?scatter)|^dist_(sum|mean|max|min|reduce)")


class Int64Lossy(Matcher):
    """An INT64 tensor (`torch.arange` without a dtype, `.long()`, `dtype=torch.int64`) that reaches,
    in the same function, directly or through one local name, an op Neuron computes without an
    integer datapath: matmul, `scatter_add`/`index_add` (as data, not as the index), an all-reduce or
    reduce-scatter (`dist.all_reduce`, a `dist_sum` helper), `pow`/`**`, or `topk`. Position ids,
    labels, counters that are only indexed, gathered, compared or cast to float are not reported."""

    name = "int64_lossy"
    triggers = ("long", "int64", "arange", "randint", "randperm", "LongTensor")
    screen_nodes = (ast.Call,)

    def __init__(self, scan, entries):
        super().__init__(scan, entries)
        self.created: dict[int, tuple[int, Any, str, str]] = {}  # id(call) -> (line, node, symbol, scope)
        self.bound: dict[tuple[int, str], list[int]] = {}  # (id(scope), name) -> ids of calls it was given
        self.ops: list[tuple[int, str, list]] = []  # (id(scope), op, per operand: (call ids, names, int literal))
        self.scopes: list = []  # keeps the scopes alive, so their ids stay unique

    def here(self) -> int:
        scope = self.scan.names.scopes[-1]
        self.scopes.append(scope)
        return id(scope)

    def carried(self, expr, ids: list[int], names: list[str]) -> None:
        """The calls and local names whose integer value `expr` still is (a float cast, a size or
        another function's result ends it)."""
        cst = vocab.cst
        t = type(expr)
        if t is cst.Name:
            names.append(expr.value)
        elif t is cst.Call:
            ids.append(id(expr))
            func = expr.func
            if type(func) is cst.Attribute:
                m = func.attr.value
                if m in _TO_FLOAT or m in _NOT_A_TENSOR:
                    return
                if m in ("to", "type") and any(self.scan.values.names_float(a.value) for a in expr.args):
                    return
                if not self.scan.names.resolve(func)[0]:  # a method on a value, not `torch.f(...)`
                    self.carried(func.value, ids, names)
        elif t is cst.BinaryOperation:
            self.carried(expr.left, ids, names)
            self.carried(expr.right, ids, names)
        elif t is cst.UnaryOperation:
            self.carried(expr.expression, ids, names)
        elif t is cst.Subscript:
            self.carried(expr.value, ids, names)
        elif t in (cst.List, cst.Tuple):
            for el in expr.elements:
                self.carried(el.value, ids, names)

    def creation(self, node, callee) -> str | None:
        """What makes `node` an INT64 tensor, or None."""
        args = node.args
        dtype = next((a.value for a in args if a.keyword is not None and a.keyword.value == "dtype"), None)
        if callee in _INT64_FACTORIES:
            if dtype is not None:
                return callee if self.scan.names.resolve(dtype)[0] in _INT64_NAMES else None
            if callee in _INT64_BY_DEFAULT and not any(isinstance(literal_value(a.value), float) for a in args):
                return callee
            return None
        if callee == "torch.LongTensor":
            return callee
        func = node.func
        if callee is None and type(func) is vocab.cst.Attribute:
            if func.attr.value == "long" and not args:
                return ".long()"
            if func.attr.value in ("to", "type") and any(
                    self.scan.names.resolve(a.value)[0] in _INT64_NAMES for a in args if a.keyword is None
                    or a.keyword.value == "dtype"):
                return f".{func.attr.value}(torch.int64)"
        return None

    def call(self, node, callee, line):
        symbol = self.creation(node, callee)
        if symbol is not None:
            self.created[id(node)] = (line, node, symbol, self.scan.names.scope_name())
        func = node.func
        parts = dotted_parts(func)
        op = _LOSSY_CALLS.get(callee) if callee else None
        operands = []
        if op is not None:
            skip = _INDEX_ARG.get(op)
            operands = [a.value for i, a in enumerate(node.args) if a.keyword is None and i != skip
                        and (op not in _ONLY_FIRST or i == 0)]
            operands += [a.value for a in node.args if a.keyword is not None
                         and a.keyword.value in ("input", "other", "src", "source", "tensor1", "tensor2")]
        elif parts and _REDUCE_NAME.search(parts[-1]):
            op = parts[-1]
            operands = [a.value for a in node.args[:1] if a.keyword is None]
            operands += [a.value for a in node.args if a.keyword is not None and a.keyword.value in ("tensor", "input")]
        elif callee is None and type(func) is vocab.cst.Attribute and func.attr.value in _LOSSY_METHODS:
            op = _LOSSY_METHODS[func.attr.value]
            skip = _INDEX_ARG.get(op)
            operands = [func.value] + [a.value for i, a in enumerate(node.args) if a.keyword is None
                                       and (skip is None or i != skip - 1) and op not in _ONLY_FIRST]
        if operands:
            self.reach(op, operands)

    def binary(self, node, line):
        t = type(node.operator)
        if t is vocab.cst.MatrixMultiply:
            self.reach("@", [node.left, node.right])
        elif t is vocab.cst.Power:
            self.reach("**", [node.left, node.right])

    def reach(self, op: str, operands) -> None:
        if constructing(self.scan.names):
            return  # model construction runs once, on the host
        found = []
        for expr in operands:
            ids: list[int] = []
            names: list[str] = []
            self.carried(expr, ids, names)
            found.append((ids, names, isinstance(literal_value(expr), int)))
        self.ops.append((self.here(), op, found))

    def assign(self, target, value, line):
        if type(target) is vocab.cst.Name:
            ids: list[int] = []
            self.carried(value, ids, [])  # one local name: what it was given, not what that name was given
            if ids:
                self.bound.setdefault((self.here(), target.value), []).extend(ids)

    def finish(self):
        reached: dict[int, str] = {}
        for scope, op, operands in self.ops:
            made = [[c for c in ids + [c for n in names for c in self.bound.get((scope, n), ())] if c in self.created]
                    for ids, names, _lit in operands]
            if op in _ALL_INTEGER and not all(m or lit for m, (_i, _n, lit) in zip(made, operands)):
                continue
            for cid in (c for m in made for c in m):
                reached.setdefault(cid, op)
        for cid, op in sorted(reached.items(), key=lambda kv: self.created[kv[0]][0]):
            line, node, symbol, scope = self.created[cid]
            for rule, clause in self.entries:
                self.scan.keep(_hit(rule, clause, line, node, symbol, scope, {"reaches": op}))

    @staticmethod
    def may(screen, node, entries):
        func = node.func
        name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None
        return name is not None and (name in ("long", "to", "type", "LongTensor") or
                                     f"torch.{name}" in _INT64_FACTORIES) and screen.any_may(entries) \
            and screen.region_has("int64_lossy_op", _lossy_op_may)


def _lossy_op_may(node: ast.AST) -> bool:
    """The screen's half of Int64Lossy.reach: the region has an op without an integer datapath (`@`,
    `**`, matmul, scatter/index add, pow, topk, a reduction); without one no INT64 there can be lossy."""
    t = type(node)
    if t is ast.BinOp:
        return type(node.op) in (ast.MatMult, ast.Pow)
    if t is ast.AugAssign:
        return type(node.op) in (ast.MatMult, ast.Pow)
    if t is ast.Call:
        f = node.func
        name = f.attr if type(f) is ast.Attribute else f.id if type(f) is ast.Name else ""
        return (name in _LOSSY_METHODS or f"torch.{name}" in _LOSSY_CALLS or name == "linear"
                or bool(_REDUCE_NAME.search(name)))
    return False


def _hit(rule, clause, line, node, symbol, scope, details):
    from .python import Hit

    return Hit(rule, clause, line, node, symbol, scope, False, details)


class ConfigPrecision(Matcher):
    """FP16 or loss scaling chosen in a training config: matched in config files
    (sources/__init__.py with configvalues.py), never in Python, so it has no triggers and no checks."""

    name = CONFIG_PRECISION
    triggers = ()


# The registry: a rule's `matcher` names one of these. Order is the order of their end-of-file hits.
MATCHERS: dict[str, type[Matcher]] = {
    m.name: m for m in (
        BoolMaskIndex, TensorControlFlow, TritonLaunch, XlaStepWithoutMarkStep, DeviceString,
        CudaDeviceArg, BackendSetting, ArgparseCudaDefault, NumpyFloat64, BatchMaxPad, HostRead, Int64Lossy,
        ConfigPrecision, CudaRequired,
    )
}
