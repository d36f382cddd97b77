"""Python sources: one libcst parse and one walk per file match every active rule.

Names are resolved to fully qualified names through the file's imports and simple aliases
(`import torch.utils.cpp_extension as ext; ext.load` is `torch.utils.cpp_extension.load`;
`np.unique` is `numpy.unique`, never `torch.unique`). Only code is matched: strings, comments and
docstrings never produce findings. Guards are tracked so an optional GPU path is reported as a
fallback: imports inside `try/except ImportError` or behind `find_spec` / `is_*_available()`, and
kernel paths behind `if x.is_cuda:` (or a HAS_TRITON-style flag) with a PyTorch path beside them.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

import libcst as cst

from ..catalog import ArgCond, Match, Rule, conds_hold
from .cstwalk import Walker, field_order, is_node_type
from .imports import absolute
from .pyindex import CAPABILITY, PyIndex, callee_in, name_in
from .values import ValueTracker

_BUILTINS = frozenset(dir(builtins))
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OSError"})
_RUNTIME_ERRORS = frozenset({"Exception", "BaseException", "RuntimeError", "NotImplementedError"})
_INT_NAME = re.compile(
    r"(?i)^(n|k|num\w*|n_\w+|\w*_?size|\w*_?dim|top_?k|\w*_len|\w*batch\w*|samples?|\w*groups?|\w*heads?"
    r"|times|factor|repeat|n_?rep|\w*_count|count|\w*_num|\w*steps?|\w*width|\w*height|scale)$"
)
_TRAIN_NAME = re.compile(r"(?i)(^|_)(train|training)($|_)|^fit$")
_OPTIMIZER_RECEIVER = re.compile(r"(?i)optim|opt$|scaler")
_SETUP_KEYWORDS = frozenset({"install_requires", "extras_require", "setup_requires", "tests_require"})
_IMPORT_CALLS = frozenset({"importlib.import_module", "builtins.__import__"})
_ENV_CALLS = frozenset({"os.environ.get", "os.environ.setdefault", "os.environ.pop", "os.getenv", "os.putenv"})
# On the XLA path a training step must end in a graph cut; any of these provides one.
_XLA_STEP_CALLS = frozenset({
    "torch_xla.core.xla_model.mark_step",
    "torch_xla.core.xla_model.optimizer_step",
    "torch_xla.sync",
    "torch_xla.step",
    "torch_xla.distributed.parallel_loader.MpDeviceLoader",
    "torch_xla.distributed.parallel_loader.ParallelLoader",
})

NOT_LITERAL = object()
# Kinds whose symbol is a qualified name (its first part is a top-level module).
_NAME_KINDS = frozenset({"import", "call", "attribute", "decorator"})


@dataclass(slots=True)
class Binding:
    qualname: str | None  # None: a local value that shadows any import
    guarded: bool = False
    type_only: bool = False
    alias: bool = False  # bound by assignment (`dt = torch.float64`), not by an import


@dataclass(slots=True)
class Scope:
    kind: str  # module, class, function
    name: str
    bindings: dict[str, Binding] = field(default_factory=dict)
    trains: bool = False  # calls backward() or an optimizer step
    guard_rest: bool = False  # an earlier `if <capability>: return ...` makes the rest a kernel path
    candidates: list = field(default_factory=list)  # hits waiting for the scope's facts (within=)
    start: int = 0
    in_class: bool = False  # a method
    owner: str = ""  # the enclosing class of a method
    kernel_hits: list = field(default_factory=list)  # decorator hits (Triton kernels) of this def


@dataclass(slots=True)
class Hit:
    rule: Rule
    clause: Match
    line: int
    node: cst.CSTNode
    symbol: str
    scope: str
    fallback: bool
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class PyResult:
    hits: list[Hit]
    imports: list[str]  # absolute module names this file imports (for the import graph)
    main_guard: bool
    trains: bool
    requirements: list[tuple[int, str]]  # setup.py install_requires & co, with lines
    module: cst.Module


def literal_value(node: cst.CSTNode | None) -> Any:
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


def dotted_parts(node: cst.CSTNode) -> list[str] | None:
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


def iter_subtree(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node below `node` (pre-order), for the small expressions matchers inspect."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for name in reversed(field_order(type(n))):
            v = getattr(n, name)
            tv = type(v)
            if tv is list or tv is tuple:
                stack.extend(reversed([x for x in v if is_node_type(type(x))]))
            elif v is not None and is_node_type(tv):
                stack.append(v)


def _last_stmt(block: cst.CSTNode) -> cst.CSTNode | None:
    body = getattr(block, "body", None)
    if not body:
        return None
    last = body[-1]
    if type(last) is cst.SimpleStatementLine and last.body:
        return last.body[-1]
    return last


def _names_in(expr: cst.CSTNode) -> Iterator[str]:
    for n in iter_subtree(expr):
        if type(n) is cst.Name:
            yield n.value
        elif type(n) is cst.SimpleString:
            v = literal_value(n)
            if v == "cuda":
                yield "cuda"


def is_capability_test(expr: cst.CSTNode) -> bool:
    return any(CAPABILITY.search(name) for name in _names_in(expr))


def _handler_names(handler: cst.ExceptHandler) -> set[str]:
    if handler.type is None:
        return {"BaseException"}
    exprs = handler.type.elements if type(handler.type) is cst.Tuple else [handler.type]
    out = set()
    for e in exprs:
        if isinstance(e, cst.Element):
            e = e.value
        parts = dotted_parts(e)
        if parts:
            out.add(parts[-1])
    return out


_EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit", "builtins.exit", "builtins.quit"})


def raises(block: cst.CSTNode) -> bool:
    """A block that gives up (raise, assert, sys.exit) rather than doing something else: an
    `except ImportError:` or `else:` like that is an error message, not a fallback."""
    for st in getattr(block, "body", ()):
        small = st.body if type(st) is cst.SimpleStatementLine else [st]
        for x in small:
            if type(x) in (cst.Raise, cst.Assert):
                return True
            if type(x) is cst.Expr and type(x.value) is cst.Call:
                parts = dotted_parts(x.value.func)
                if parts and ".".join(parts) in _EXITS:
                    return True
    return False


def _only_reraises(handler: cst.ExceptHandler) -> bool:
    last = _last_stmt(handler.body)
    body = getattr(handler.body, "body", [])
    return len(body) == 1 and type(last) is cst.Raise


class PythonScanner(Walker):
    def __init__(self, index: PyIndex, module_name: str, is_package: bool, collect_setup: bool,
                 first_party: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.idx = index
        self.first_party = first_party
        self.module_name = module_name
        self.is_package = is_package
        self.collect_setup = collect_setup
        self.scopes: list[Scope] = [Scope("module", "")]
        self.hits: list[Hit] = []
        self.deferred: list[Hit] = []  # checked against the file's imports at the end (requires=)
        self.imports: set[str] = set()
        self.main_guard = False
        self.trains = False
        self.requirements: list[tuple[int, str]] = []
        # Node ids with a role decided by a parent: not free references, callees, stores.
        self.nonref: set[int] = set()
        self.store: set[int] = set()
        # Guards: (kind, id of the owning `if` or 0, branch 0 = body / 1 = else); kind is "import"
        # (only imports inside are optional), "kernel" (a GPU path with a PyTorch path beside it) or
        # "type" (TYPE_CHECKING: never runs).
        self.guard_blocks: dict[int, tuple[str, int, int]] = {}
        self.guards: list[tuple[str, int, int]] = []
        self.branch_hits: dict[int, tuple[list, list]] = {}  # GPU hits per branch of a capability `if`
        self.discarded: set[int] = set()  # calls whose value is thrown away (expression statements)
        self.compared: set[int] = set()  # references that are compared (`x.dtype == torch.float16`)
        self.pending_triton = False
        self.quiet = 0  # inside an import statement: names there are not references
        self.pending_kernels: list[Hit] = []
        self.autotune_configs: int | None = None
        self.kernel_names: set[str] = set()
        self.launches: list[tuple[str, int, cst.CSTNode, str, bool]] = []
        self.elif_guards: set[int] = set()  # ids of elif branches entered under a guard
        self._elif_owner: dict[int, tuple[str, int, int]] = {}
        self.rest_guards: set[int] = set()  # ids of `if <capability>: ... return` statements
        self.ifexp_arms: set[int] = set()  # ids of nodes inside the arms of a capability IfExp
        self.setup_strings: set[int] = set()
        self.marks_step = False  # XLA: the file calls mark_step / optimizer_step / uses MpDeviceLoader
        self.backward_sites: list[tuple[int, cst.CSTNode, str]] = []
        e, lv = self.enter, self.leave
        e[cst.Import] = self.enter_import
        lv[cst.Import] = self.leave_quiet
        e[cst.ImportFrom] = self.enter_import_from
        lv[cst.ImportFrom] = self.leave_quiet
        e[cst.Call] = self.enter_call
        e[cst.Decorator] = self.enter_decorator
        e[cst.FunctionDef] = self.enter_function
        lv[cst.FunctionDef] = self.leave_scope
        e[cst.ClassDef] = self.enter_class
        lv[cst.ClassDef] = self.leave_scope
        e[cst.Attribute] = self.enter_attribute
        e[cst.Name] = self.enter_name
        e[cst.Assign] = self.enter_assign
        lv[cst.Assign] = self.leave_assign
        e[cst.AnnAssign] = self.enter_ann_assign
        lv[cst.AnnAssign] = self.leave_ann_assign
        e[cst.AugAssign] = self.enter_aug_assign
        e[cst.For] = self.enter_for
        e[cst.AsName] = self.enter_asname
        e[cst.Param] = self.enter_param
        e[cst.Try] = self.enter_try
        e[cst.If] = self.enter_if
        lv[cst.If] = self.leave_if
        e[cst.IfExp] = self.enter_ifexp
        e[cst.While] = self.enter_while
        e[cst.Subscript] = self.enter_subscript
        for block in (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Else):
            e[block] = self.enter_block
            lv[block] = self.leave_block
        e[cst.Lambda] = self.enter_lambda
        e[cst.Expr] = self.enter_expr
        e[cst.Comparison] = self.enter_comparison
        if collect_setup:
            e[cst.SimpleString] = self.enter_string
            e[cst.ConcatenatedString] = self.enter_string
        self.values = ValueTracker(self)  # values that travel; adds its own callbacks (values.py)

    # ------------------------------------------------------------------ scopes and resolution

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    def scope_name(self) -> str:
        return ".".join(s.name for s in self.scopes[1:])

    def lookup(self, name: str) -> Binding | None:
        scopes = self.scopes
        last = len(scopes) - 1
        for i in range(last, -1, -1):
            s = scopes[i]
            if s.kind == "class" and i != last:
                continue  # class bodies are not visible from their methods
            b = s.bindings.get(name)
            if b is not None:
                return b
        if name in _BUILTINS:
            return Binding(f"builtins.{name}")
        return None

    def resolve(self, node: cst.CSTNode) -> tuple[str | None, bool]:
        """(qualified name, reached through a guarded import) for a name chain bound to an import."""
        parts = dotted_parts(node)
        if not parts:
            return None, False
        b = self.lookup(parts[0])
        if b is None or b.qualname is None:
            return None, False
        q = b.qualname if len(parts) == 1 else b.qualname + "." + ".".join(parts[1:])
        return q, b.guarded

    def bind(self, name: str, binding: Binding) -> None:
        self.scope.bindings[name] = binding

    def bind_local(self, target: cst.CSTNode, value: cst.CSTNode | None = None) -> None:
        t = type(target)
        if t is cst.Name:
            self.nonref.add(id(target))
            cur = self.scope.bindings.get(target.value)
            if value is not None:
                lit = literal_value(value)
                if lit is None or lit is True or lit is False:
                    if cur is not None and cur.qualname is not None:
                        return  # `flash_attn = None` in an except branch keeps the import's meaning
                q, guarded = self.resolve(value) if type(value) in (cst.Name, cst.Attribute) else (None, False)
                if q is not None:
                    self.bind(target.value, Binding(q, guarded, alias=True))  # `F = torch.nn.functional`
                    return
            self.bind(target.value, Binding(None))
        elif t in (cst.Tuple, cst.List):
            for el in target.elements:
                self.bind_local(el.value)
        elif t is cst.StarredElement:
            self.bind_local(target.value)

    # ------------------------------------------------------------------ guards

    def in_kernel_guard(self) -> bool:
        return any(g[0] == "kernel" for g in self.guards) or any(s.guard_rest for s in self.scopes if s.kind == "function")

    def enter_block(self, node: cst.CSTNode, line: int) -> None:
        guard = self.guard_blocks.get(id(node))
        if guard:
            self.guards.append(guard)

    def leave_block(self, node: cst.CSTNode, line: int) -> None:
        if id(node) in self.guard_blocks:
            self.guards.pop()

    def enter_try(self, node: cst.Try, line: int) -> None:
        caught = set()
        runtime_fallback = False
        for h in node.handlers:
            names = _handler_names(h)
            if names & _IMPORT_ERRORS and raises(h.body):
                continue  # `except ImportError: raise ...`: the import is required, not optional
            caught |= names
            if names & _RUNTIME_ERRORS and not _only_reraises(h):
                runtime_fallback = True
        if caught & _IMPORT_ERRORS:
            self.guard_blocks[id(node.body)] = ("kernel" if runtime_fallback else "import", 0, 0)

    def enter_if(self, node: cst.If, line: int) -> None:
        if id(node) in self.elif_guards:
            owner_guard = self._elif_owner.get(id(node))
            if owner_guard:
                self.guards.append(owner_guard)
        test = node.test
        parts = dotted_parts(test)
        if parts and parts[-1] == "TYPE_CHECKING":
            self.guard_blocks[id(node.body)] = ("type", 0, 0)
            return
        self.check_tensor_control_flow(test, line, node)
        if type(test) is cst.Comparison and len(test.comparisons) == 1:
            left = dotted_parts(test.left)
            right = literal_value(test.comparisons[0].comparator)
            if left == ["__name__"] and right == "__main__":
                self.main_guard = True
        if not is_capability_test(test):
            return
        ends_with_return = type(_last_stmt(node.body)) is cst.Return
        gives_up = node.orelse is not None and type(node.orelse) is not cst.If and raises(node.orelse.body)
        if gives_up:
            return  # `if HAS_FLASH: ... else: raise ...`: no other path
        has_alternative = node.orelse is not None or ends_with_return
        kind = "kernel" if has_alternative else "import"
        self.guard_blocks[id(node.body)] = (kind, id(node), 0)
        if node.orelse is not None:
            if type(node.orelse) is cst.If:
                # An elif is entered as an If, not as a block: the guard spans the whole chain.
                self.elif_guards.add(id(node.orelse))
                self._elif_owner[id(node.orelse)] = (kind, id(node), 1)
            else:
                self.guard_blocks[id(node.orelse)] = (kind, id(node), 1)
        elif ends_with_return:
            self.rest_guards.add(id(node))

    def leave_if(self, node: cst.If, line: int) -> None:
        if id(node) in self.rest_guards and self.scope.kind == "function":
            # `if not x.is_cuda: return reference(x)`: what follows in the function is the kernel path.
            self.scope.guard_rest = True
        if id(node) in self.elif_guards:
            self.guards.pop()
        branches = self.branch_hits.pop(id(node), None)
        if branches and branches[0] and branches[1]:
            # GPU code on both sides (e.g. `if TRITON3: ... else: ...`) is a choice between two
            # kernel paths, not a kernel path with a PyTorch fallback.
            for hit in branches[0] + branches[1]:
                hit.fallback = False

    def enter_ifexp(self, node: cst.IfExp, line: int) -> None:
        if is_capability_test(node.test):
            # Both arms: whichever is the kernel path, the other is its fallback.
            for arm in (node.body, node.orelse):
                self.ifexp_arms.update(id(n) for n in iter_subtree(arm))
        self.check_tensor_control_flow(node.test, line, node)

    # ------------------------------------------------------------------ hits

    def add(self, rule: Rule, clause: Match, line: int, node: cst.CSTNode, symbol: str,
            guarded: bool = False, details: dict | None = None) -> Hit | None:
        """Record a hit. `guarded`: it was reached through an optional import. Whether it is a
        fallback also depends on the kernel-path guards around it."""
        # (The result cache keys on first-party packages named like a catalog root, as only this
        # check uses them: see cache.relevant_first_party.)
        if clause.kind in _NAME_KINDS and symbol.split(".", 1)[0] in self.first_party:
            return None  # the scanned project's own package, e.g. flash_attn inside flash-attn
        if self.values.silent(clause, node):
            return None  # a type annotation or a dtype lookup table: nothing runs (values.py)
        owner = None
        fallback = False
        # A device call under `if torch.cuda.is_available(): ... else: ...` has a path for other devices.
        if rule.fallback or rule.category == "device":
            kernel = [g for g in self.guards if g[0] == "kernel"]
            if guarded and rule.fallback:
                fallback = True
            elif kernel:
                fallback = True
                owner = kernel[-1]
            elif self.in_kernel_guard() or id(node) in self.ifexp_arms:
                fallback = True
        hit = Hit(rule, clause, line, node, symbol, self.scope_name(), fallback, details or {})
        if owner is not None and owner[1]:
            self.branch_hits.setdefault(owner[1], ([], []))[owner[2]].append(hit)
        if clause.within:
            self.scope.candidates.append(hit)
        elif clause.requires:
            self.deferred.append(hit)
        else:
            self.hits.append(hit)
        return hit

    def finish_scope(self, scope: Scope) -> None:
        for hit in scope.candidates:
            w = hit.clause.within
            if w == "train_step":
                ok = scope.trains or bool(_TRAIN_NAME.search(scope.name))
            elif w == "collate":  # a collate function, or a collator class's method
                ok = scope.kind == "function" and ("collat" in scope.name.lower() or "collat" in scope.owner.lower())
            else:  # forward: a method named forward, what torch.compile traces
                ok = scope.kind == "function" and scope.in_class and scope.name == "forward"
            if ok:
                (self.deferred if hit.clause.requires else self.hits).append(hit)

    # ------------------------------------------------------------------ imports

    def absolute_module(self, module: cst.CSTNode | None, level: int) -> str:
        name = ".".join(dotted_parts(module) or []) if module is not None else ""
        return absolute(name, level, self.module_name, self.is_package)

    def import_guard(self) -> tuple[bool, bool]:
        """(guarded, type_only) for an import at the current position."""
        type_only = any(g[0] == "type" for g in self.guards)
        guarded = any(g[0] == "import" for g in self.guards)
        return guarded, type_only

    def match_import(self, module: str, line: int, node: cst.CSTNode, guarded: bool) -> bool:
        matched = False
        for prefix, (rule, clause) in self.idx.imports:
            if module == prefix or module.startswith(prefix + "."):
                matched = self.add(rule, clause, line, node, module, guarded) is not None or matched
        return matched

    def enter_import(self, node: cst.Import, line: int) -> None:
        self.quiet += 1
        guarded, type_only = self.import_guard()
        for alias in node.names:
            parts = dotted_parts(alias.name) or []
            full = ".".join(parts)
            if not full:
                continue
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                self.bind(alias.asname.name.value, Binding(full, guarded, type_only))
            else:
                self.bind(parts[0], Binding(parts[0], guarded, type_only))
            if type_only:
                continue
            self.imports.add(full)
            self.match_import(full, line, node, guarded)

    def enter_import_from(self, node: cst.ImportFrom, line: int) -> None:
        self.quiet += 1
        guarded, type_only = self.import_guard()
        module = self.absolute_module(node.module, len(node.relative))
        if not type_only and module:
            self.imports.add(module)
        names = node.names
        matched_module = False
        if type(names) is cst.ImportStar:
            if not type_only and not node.relative:
                self.match_import(module, line, node, guarded)
            return
        for alias in names:
            parts = dotted_parts(alias.name) or []
            if not parts:
                continue
            full = f"{module}.{parts[0]}" if module else parts[0]
            local = alias.asname.name.value if alias.asname is not None and type(alias.asname.name) is cst.Name else parts[0]
            self.bind(local, Binding(full, guarded, type_only))
            if type_only:
                continue
            if node.relative:
                self.imports.add(full)  # `from . import x` may name a module
                continue  # a relative import is the project's own code, never a GPU library
            if not matched_module:
                matched_module = self.match_import(full, line, node, guarded)

    def leave_quiet(self, node: cst.CSTNode, line: int) -> None:
        self.quiet -= 1

    # ------------------------------------------------------------------ definitions

    def enter_decorator(self, node: cst.Decorator, line: int) -> None:
        expr = node.decorator
        target = expr.func if type(expr) is cst.Call else expr
        q, guarded = self.resolve(target)
        if q is None:
            return
        self.mark_chain(target)
        if q.startswith("triton."):
            self.pending_triton = True
        for rule, clause in self.idx.decorators.lookup(q):
            ok = self.args_match(expr, clause.args) if type(expr) is cst.Call else _bare_ok(clause.args)
            if ok:
                hit = self.add(rule, clause, line, node, q, guarded)
                if hit is not None:
                    self.pending_kernels.append(hit)
        if q == "triton.autotune" and type(expr) is cst.Call:
            configs = find_arg(expr, ArgCond(keyword="configs", position=0))
            if type(configs) in (cst.List, cst.Tuple):
                self.autotune_configs = len(configs.elements)

    def enter_function(self, node: cst.FunctionDef, line: int) -> None:
        self.nonref.add(id(node.name))
        name = node.name.value
        kernels, self.pending_kernels = self.pending_kernels, []
        autotune, self.autotune_configs = self.autotune_configs, None
        if self.pending_triton:
            self.kernel_names.add(name)
            self.pending_triton = False
        if kernels:
            for hit in kernels:
                hit.details["kernel"] = name
                if autotune is not None:
                    hit.details["autotune_configs"] = autotune
        in_class = self.scope.kind == "class"
        owner = self.scope.name if in_class else ""
        self.bind(name, Binding(None))
        self.scopes.append(Scope("function", name, start=line, in_class=in_class, owner=owner, kernel_hits=kernels))

    def enter_class(self, node: cst.ClassDef, line: int) -> None:
        self.nonref.add(id(node.name))
        self.pending_kernels = []
        self.pending_triton = False
        self.bind(node.name.value, Binding(None))
        self.scopes.append(Scope("class", node.name.value, start=line))

    def leave_scope(self, node: cst.CSTNode, line: int) -> None:
        scope = self.scopes[-1]
        self.finish_scope(scope)
        self.scopes.pop()
        if scope.kind == "function":
            if scope.trains and self.scope.kind == "function":
                self.scope.trains = True  # a closure's backward() makes its parent a training step
            if scope.kernel_hits:
                self.describe_kernel(node, scope.kernel_hits, scope.start, line)

    def describe_kernel(self, node: cst.FunctionDef, hits: list[Hit], start: int, end: int) -> None:
        """Size and shape of a Triton kernel, inputs to its porting cost."""
        atomics = 0
        tl_ops = 0
        for n in iter_subtree(node.body):
            if type(n) is cst.Call:
                parts = dotted_parts(n.func)
                if parts and len(parts) >= 2:
                    q, _ = self.resolve(n.func)
                    if q and q.startswith("triton.language."):
                        tl_ops += 1
                        if parts[-1].startswith("atomic_"):
                            atomics += 1
        name = node.name.value.lower()
        for hit in hits:
            hit.details.update(
                lines=end - start + 1,
                tl_ops=tl_ops,
                atomics=atomics,
                backward=bool(re.search(r"bwd|backward|grad", name)),
            )

    def enter_param(self, node: cst.Param, line: int) -> None:
        self.nonref.add(id(node.name))
        self.bind(node.name.value, Binding(None))

    def enter_lambda(self, node: cst.Lambda, line: int) -> None:
        for p in node.params.params:
            self.nonref.add(id(p.name))

    def enter_asname(self, node: cst.AsName, line: int) -> None:
        if self.quiet:
            return
        self.bind_local(node.name)

    # ------------------------------------------------------------------ assignments

    def enter_assign(self, node: cst.Assign, line: int) -> None:
        for t in node.targets:
            self.mark_store(t.target)
            self.check_environ_subscript(t.target, line)
            self.check_device_string(t.target, node.value, line)

    def leave_assign(self, node: cst.Assign, line: int) -> None:
        for t in node.targets:
            self.bind_local(t.target, node.value if len(node.targets) == 1 else None)

    def enter_ann_assign(self, node: cst.AnnAssign, line: int) -> None:
        self.mark_store(node.target)
        if node.value is not None:
            self.check_device_string(node.target, node.value, line)

    def check_device_string(self, target: cst.CSTNode, value: cst.CSTNode, line: int) -> None:
        """`device = "cuda"` (or `self.device = f"cuda:{rank}"`): a CUDA device chosen by name."""
        entries = self.idx.patterns.get("device_string")
        if not entries:
            return
        parts = dotted_parts(target)
        if not parts or "device" not in parts[-1].lower():
            return
        if any(re.fullmatch(r"cuda(:\d+)?", v) for v in string_shapes(value)):
            for rule, clause in entries:
                self.add(rule, clause, line, value, _short_code(value))

    def leave_ann_assign(self, node: cst.AnnAssign, line: int) -> None:
        self.bind_local(node.target, node.value)

    def enter_aug_assign(self, node: cst.AugAssign, line: int) -> None:
        self.mark_store(node.target)

    def enter_for(self, node: cst.For, line: int) -> None:
        self.bind_local(node.target)
        it = node.iter
        if type(it) is cst.Call:
            q, _ = self.resolve(it.func)
            if q == "builtins.range":
                for arg in it.args:
                    self.check_tensor_control_flow(arg.value, line, node, loop=True)

    def mark_store(self, target: cst.CSTNode) -> None:
        if type(target) in (cst.Tuple, cst.List):
            for el in target.elements:
                self.mark_store(el.value)
        else:
            self.store.add(id(target))

    def mark_chain(self, node: cst.CSTNode) -> None:
        """The parts of a name chain already handled as one reference."""
        while type(node) is cst.Attribute:
            self.nonref.add(id(node))
            node = node.value
        self.nonref.add(id(node))

    # ------------------------------------------------------------------ references

    def enter_attribute(self, node: cst.Attribute, line: int) -> None:
        self.nonref.add(id(node.attr))
        if self.quiet or id(node) in self.nonref:
            return
        self.mark_chain(node.value)
        self.reference(node, line)

    def enter_name(self, node: cst.Name, line: int) -> None:
        if self.quiet or id(node) in self.nonref:
            return
        self.reference(node, line)

    def reference(self, node: cst.CSTNode, line: int) -> None:
        if not self.idx.attributes:
            return
        if type(node) is cst.Name:
            b = self.lookup(node.value)
            if b is not None and b.alias:
                return  # `dt = torch.float64` was reported where it was written, not at every use
        q, guarded = self.resolve(node)
        if q is None or q.startswith("builtins."):
            return
        is_store = id(node) in self.store
        for rule, clause in self.idx.attributes.lookup(q):
            if clause.context == "store" and not is_store:
                continue
            if clause.context == "load" and (is_store or id(node) in self.compared):
                continue  # testing a dtype or device is not using it
            self.add(rule, clause, line, node, q, guarded)

    # ------------------------------------------------------------------ calls

    def enter_call(self, node: cst.Call, line: int) -> None:
        func = node.func
        for arg in node.args:
            if arg.keyword is not None:
                self.nonref.add(id(arg.keyword))
        if self.quiet:
            return
        ftype = type(func)
        q: str | None = None
        guarded = False
        if ftype is cst.Name or ftype is cst.Attribute:
            q, guarded = self.resolve(func)
            self.mark_chain(func)
        if q is not None:
            for rule, clause in self.idx.calls.lookup(q):
                if self.args_match(node, clause.args) and self.use_ok(node, clause):
                    self.add(rule, clause, line, node, q, guarded)
            if q in _IMPORT_CALLS and node.args:
                mod = literal_value(node.args[0].value)
                if isinstance(mod, str):
                    self.imports.add(mod)
                    self.match_import(mod, line, node, guarded or self.import_guard()[0])
            elif q in _ENV_CALLS and node.args:
                self.check_environ(node.args[0].value, line, node)
            elif q == "os.environ.update" and node.args and type(node.args[0].value) is cst.Dict:
                for el in node.args[0].value.elements:
                    if type(el) is cst.DictElement:
                        self.check_environ(el.key, line, node)
            elif self.collect_setup and q.split(".")[-1] == "setup":
                for arg in node.args:
                    if arg.keyword is not None and arg.keyword.value in _SETUP_KEYWORDS:
                        self.setup_strings.update(
                            id(n) for n in iter_subtree(arg.value)
                            if type(n) in (cst.SimpleString, cst.ConcatenatedString)
                        )
            if q.endswith(".backward"):
                self.note_backward(line, node)
            elif q in _XLA_STEP_CALLS:
                self.marks_step = True
        elif ftype is cst.Attribute:
            method = func.attr.value
            if method == "backward":
                self.note_backward(line, node)
            elif method == "step":
                receiver = dotted_parts(func.value)
                if receiver and _OPTIMIZER_RECEIVER.search(receiver[-1]):
                    self.scope.trains = True
                    self.trains = True
            entries = self.idx.methods.get(method)
            if entries:
                for rule, clause in entries:
                    if self.args_match(node, clause.args) and self.use_ok(node, clause):
                        self.add(rule, clause, line, node, f".{method}()")
        elif ftype is cst.Subscript and "triton_launch" in self.idx.patterns:
            parts = dotted_parts(func.value)
            index = func.slice[0].slice if len(func.slice) == 1 else None
            keyed = type(index) is cst.Index and isinstance(literal_value(index.value), str)
            if parts and not keyed:  # `kernels["rms"](x)` looks a kernel up; `k[grid](x)` launches one
                guarded = self.in_kernel_guard() or id(node) in self.ifexp_arms
                self.launches.append((parts[-1], line, node, self.scope_name(), guarded))
        if self.idx.keywords:
            self.match_keywords(node, q, line)

    def enter_string(self, node: cst.CSTNode, line: int) -> None:
        """setup.py: a requirement string inside install_requires and friends."""
        if id(node) in self.setup_strings:
            v = literal_value(node)
            if isinstance(v, str):
                self.requirements.append((line, v))

    def note_backward(self, line: int, node: cst.CSTNode) -> None:
        if not self.scope.trains:
            self.backward_sites.append((line, node, self.scope_name()))
        self.scope.trains = True
        self.trains = True

    def args_match(self, call: cst.Call, conds: tuple[ArgCond, ...]) -> bool:
        return conds_hold(conds, lambda cond: find_arg(call, cond), self.value_matches)

    def value_matches(self, cond: ArgCond, value: cst.CSTNode) -> bool:
        if self.values.arg_travels(cond, value):
            return True  # `backend = "nccl"` ... `init_process_group(backend)` (values.py)
        lit = literal_value(value)
        if cond.literal is not None and cond.literal == (lit is NOT_LITERAL):
            return False
        if cond.equals and not any(_same(lit, e) for e in cond.equals):
            return False
        if cond.pattern and not _pattern_matches(cond.pattern, value):
            return False
        if cond.names:
            q, _ = self.resolve(value)
            if q is None or not name_in(q, cond.names):
                return False
        if cond.string is not None and cond.string != bool(string_shapes(value)):
            return False
        if cond.maybe_none is not None and cond.maybe_none != _maybe_none(value):
            return False
        return cond.int_like is None or cond.int_like == self.int_like(value)

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
            q, _ = self.resolve(value.func) if type(value.func) in (cst.Name, cst.Attribute) else (None, False)
            if q in ("builtins.len", "builtins.int", "builtins.round", "math.ceil", "math.floor", "math.prod"):
                return True
            return type(value.func) is cst.Attribute and value.func.attr.value in ("size", "dim", "numel", "item", "ndimension")
        parts = dotted_parts(value)
        return bool(parts) and bool(_INT_NAME.search(parts[-1]))

    def use_ok(self, call: cst.Call, clause: Match) -> bool:
        return clause.result_used is None or clause.result_used == (id(call) not in self.discarded)

    def enter_expr(self, node: cst.Expr, line: int) -> None:
        self.discarded.add(id(node.value))

    def enter_comparison(self, node: cst.Comparison, line: int) -> None:
        if self.idx.attributes:
            self.compared.update(id(n) for n in iter_subtree(node) if type(n) in (cst.Attribute, cst.Name))

    def match_keywords(self, node: cst.Call, callee: str | None, line: int) -> None:
        method = node.func.attr.value if type(node.func) is cst.Attribute and callee is None else None
        for arg in node.args:
            if arg.keyword is None:
                continue
            entries = self.idx.keywords.get(arg.keyword.value)
            if not entries:
                continue
            for rule, clause in entries:
                if clause.calls and not callee_in(callee, method, clause.calls):
                    continue
                if clause.exclude_calls and callee_in(callee, method, clause.exclude_calls):
                    continue
                if clause.args and not self.args_match(node, clause.args):
                    continue
                if self.keyword_value_matches(arg.value, clause):
                    sym = f"{arg.keyword.value}={_short_code(arg.value)}"
                    self.add(rule, clause, line, node, sym)

    def keyword_value_matches(self, value: cst.CSTNode, clause: Match) -> bool:
        lit = literal_value(value)
        if clause.values and any(_same(lit, v) for v in clause.values):
            return True
        if clause.pattern and any(re.fullmatch(clause.pattern, v) for v in string_shapes(value)):
            return True
        if clause.value_names:
            q, _ = self.resolve(value)
            if q is not None and name_in(q, clause.value_names):
                return True
        return self.values.keyword_travels(value, clause)  # values.py

    # ------------------------------------------------------------------ environment variables

    def check_environ(self, key: cst.CSTNode | None, line: int, node: cst.CSTNode) -> None:
        name = literal_value(key)
        if not isinstance(name, str):
            return
        for rx, (rule, clause) in self.idx.environ:
            if rx.fullmatch(name):
                self.add(rule, clause, line, node, name)

    def check_environ_subscript(self, target: cst.CSTNode, line: int) -> None:
        if type(target) is cst.Subscript and self.idx.environ:
            q, _ = self.resolve(target.value)
            if q == "os.environ" and target.slice:
                sl = target.slice[0].slice
                if type(sl) is cst.Index:
                    self.check_environ(sl.value, line, target)

    # ------------------------------------------------------------------ code matchers

    def enter_subscript(self, node: cst.Subscript, line: int) -> None:
        if self.quiet:
            return
        if id(node) not in self.store:
            q, _ = self.resolve(node.value)
            if q == "os.environ" and self.idx.environ and node.slice and type(node.slice[0].slice) is cst.Index:
                self.check_environ(node.slice[0].slice.value, line, node)
        entries = self.idx.patterns.get("bool_mask_index")
        if not entries or id(node) in self.store or len(node.slice) != 1:
            return
        sl = node.slice[0].slice
        if type(sl) is not cst.Index or not self.looks_boolean(sl.value) or self.values.not_a_mask(node, sl.value):
            return
        for rule, clause in entries:
            self.add(rule, clause, line, node, _short_code(node))

    def looks_boolean(self, expr: cst.CSTNode) -> bool:
        t = type(expr)
        if t is cst.Comparison:
            return all(type(c.operator) not in (cst.In, cst.NotIn, cst.Is, cst.IsNot) for c in expr.comparisons)
        if t is cst.UnaryOperation and type(expr.operator) is cst.BitInvert:
            return True
        if t is cst.BinaryOperation and type(expr.operator) in (cst.BitAnd, cst.BitOr):
            return self.looks_boolean(expr.left) or self.looks_boolean(expr.right)
        if t is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "bool":
            return True
        if self.values.boolean_travels(expr, self.looks_boolean):
            return True  # `keep = labels != ignore_index` ... `logits[keep]` (values.py)
        parts = dotted_parts(expr)
        if parts and "mask" in parts[-1].lower():
            b = self.lookup(parts[0])
            return b is None or b.qualname is None
        return False

    def enter_while(self, node: cst.While, line: int) -> None:
        self.check_tensor_control_flow(node.test, line, node)

    def check_tensor_control_flow(self, test: cst.CSTNode, line: int, node: cst.CSTNode, loop: bool = False) -> None:
        entries = self.idx.patterns.get("tensor_control_flow")
        if not entries or self.quiet:
            return
        culprit = self.tensor_value_read(test)
        if culprit is None:
            return
        for rule, clause in entries:
            self.add(rule, clause, line, test, culprit)

    def tensor_value_read(self, expr: cst.CSTNode) -> str | None:
        """A call in `expr` that reads a tensor's value into Python, e.g. `(x > 0).any()`."""
        for n in iter_subtree(expr):
            if type(n) is not cst.Call:
                continue
            func = n.func
            q, _ = self.resolve(func) if type(func) in (cst.Name, cst.Attribute) else (None, False)
            if q is not None:
                if q in ("torch.any", "torch.all", "torch.equal", "torch.allclose", "torch.is_nonzero",
                         "torch.count_nonzero", "torch.isnan", "torch.isinf", "torch.isfinite"):
                    return q
                continue
            if type(func) is cst.Attribute and func.attr.value in ("any", "all", "item", "sum", "max", "min",
                                                                   "mean", "norm", "count_nonzero"):
                if func.attr.value in ("sum", "max", "min", "mean", "norm") and n.args:
                    continue  # `.sum(dim)` and friends return tensors; only whole reductions are read back
                return f".{func.attr.value}()"
        return None

    # ------------------------------------------------------------------ the end of the file

    def finish(self) -> None:
        self.finish_scope(self.scopes[0])
        # A launch `k[grid](...)` of a kernel defined in this file, or of an imported one whose name
        # says it is a kernel (kernels are often defined in a sibling module).
        for name, line, node, scope, guarded in self.launches:
            if name in self.kernel_names or "kernel" in name.lower():
                for rule, clause in self.idx.patterns.get("triton_launch", ()):
                    hit = Hit(rule, clause, line, node, name, scope, rule.fallback and guarded)
                    (self.deferred if clause.requires else self.hits).append(hit)
        if not self.marks_step:
            for rule, clause in self.idx.patterns.get("xla_step_without_mark_step", ()):
                for line, node, scope in self.backward_sites:
                    hit = Hit(rule, clause, line, node, "backward()", scope, False)
                    (self.deferred if clause.requires else self.hits).append(hit)
        for rule, clause, line, node, symbol, scope in self.values.finish():  # values.py's file-wide matchers
            (self.deferred if clause.requires else self.hits).append(Hit(rule, clause, line, node, symbol, scope, False))
        roots = {m.split(".")[0] for m in self.imports} | self.imports
        for hit in self.deferred:
            if any(r in roots for r in hit.clause.requires):
                self.hits.append(hit)


def find_arg(call: cst.Call, cond: ArgCond) -> cst.CSTNode | None:
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


def _bare_ok(conds: tuple[ArgCond, ...]) -> bool:
    """A bare decorator (`@torch.compile`) is a call without arguments."""
    return all(c.missing is True for c in conds)


def _maybe_none(value: cst.CSTNode) -> bool:
    if literal_value(value) is None:
        return True
    if type(value) is cst.IfExp:
        return _maybe_none(value.body) or _maybe_none(value.orelse)
    return False


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def string_shapes(node: cst.CSTNode) -> list[str]:
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


_WS = re.compile(r"\s+")


def _short_code(node: cst.CSTNode, limit: int = 60) -> str:
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


def snippet_of(node: cst.CSTNode) -> str:
    if type(node) in (cst.If, cst.While):
        node = node.test
    return _short_code(node, 160)


def scan_module(module: cst.Module, index: PyIndex, module_name: str = "", is_package: bool = False,
                collect_setup: bool = False, first_party: frozenset[str] = frozenset()) -> PyResult:
    scanner = PythonScanner(index, module_name, is_package, collect_setup, first_party)
    scanner.walk(module)
    scanner.finish()
    return PyResult(scanner.hits, sorted(scanner.imports), scanner.main_guard, scanner.trains,
                    scanner.requirements, module)
