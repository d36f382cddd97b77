"""Python sources: one libcst parse and one walk per file match every active rule.

The scanner is in named parts: scopes and name resolution (scopes.py: names resolve to fully
qualified names through the file's imports and aliases), guards and fallbacks (guards.py: an
optional GPU path is reported as a fallback), and the matching: per clause kind here, what a
clause asks of a value in conditions.py, and the code matchers of `kind = "pattern"` clauses in
matchers.py. Only code is matched: strings, comments and docstrings never produce findings.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from .. import nearcopy
from ..catalog import ArgCond, Match, Rule
from .conditions import Conditions, bare_ok
from .cstwalk import Walker, iter_subtree
from .guards import COMPAT, Guards
from .kerneltokens import BodyTokens
from .imports import absolute
from .matchers import MATCHERS, Matcher
from .probes import ProbeSites, sets_tuning_variable
from .pyindex import PyIndex, callee_in
from .scopes import Binding, Names, Scope
from .values import ValueTracker
from .vocab import (
    HOST_CATEGORIES,
    IMPORT_CALLS,
    OPTIMIZER_RECEIVER,
    TRAIN_NAME,
    dotted_parts,
    find_arg,
    from_import,
    literal_value,
    load_libcst,
    short_code,
    string_shapes,
)

load_libcst()

__all__ = ["Hit", "PyResult", "PythonScanner", "dotted_parts", "find_arg", "iter_subtree", "literal_value",
           "scan_module", "snippet_of", "string_shapes"]

_SETUP_KEYWORDS = frozenset({"install_requires", "extras_require", "setup_requires", "tests_require"})


def _setup_strings(keyword: str, value: cst.CSTNode) -> dict[int, str]:
    """The requirement strings of a setup() keyword, each with its extra: the key of an
    `extras_require` dict entry (`{"flash": ["flash-attn"]}`), "tests" for `tests_require`."""
    strings = (cst.SimpleString, cst.ConcatenatedString)
    if keyword == "extras_require" and type(value) is cst.Dict:
        out: dict[int, str] = {}
        for el in value.elements:
            key = literal_value(el.key) if type(el) is cst.DictElement else None
            for n in iter_subtree(el.value):
                if type(n) in strings:
                    out[id(n)] = key if isinstance(key, str) else "extras"
        return out
    extra = "tests" if keyword == "tests_require" else "extras" if keyword == "extras_require" else ""
    return {id(n): extra for n in iter_subtree(value) if type(n) in strings}
_ENV_CALLS = frozenset({"os.environ.get", "os.environ.setdefault", "os.environ.pop", "os.getenv", "os.putenv"})
_ENV_SETS = frozenset({"os.environ.setdefault", "os.putenv"})
# Kinds whose symbol is a qualified name (its first part is a top-level module).
_NAME_KINDS = frozenset({"import", "call", "attribute", "decorator"})
# torch.cuda calls that return before touching a device when CUDA was never initialised (torch 2.13
# torch/cuda/memory.py: `if not is_initialized(): return {}`), so
# they do nothing on a Trainium host: read on a CPU-only build, empty_cache() and the memory getters
# return and memory_allocated() is 0; reset_peak_memory_stats() and synchronize() raise, and a
# queued torch.cuda.manual_seed() leaves the Neuron generator unseeded (an edit), so they are not here.
NOOP_OFF_CUDA = frozenset({
    "torch.cuda.empty_cache", "torch.cuda.memory_stats", "torch.cuda.memory_stats_as_nested_dict",
    "torch.cuda.memory_allocated", "torch.cuda.max_memory_allocated", "torch.cuda.memory_reserved",
    "torch.cuda.max_memory_reserved", "torch.cuda.memory_cached", "torch.cuda.max_memory_cached",
})
_KEYS_CALLS = frozenset({"dict", "builtins.dict"})
_PARTIAL_CALLS = frozenset({"functools.partial", "functools.partialmethod"})
# The matcher events the scanner calls, each only on the matchers that override it.
_EVENTS = ("subscript", "test", "assign", "call", "assertion", "branch", "backward", "function", "binary", "finish")


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
    requirements: list[tuple[int, str, str]]  # setup.py install_requires & co: line, text, extra ("" for core)
    module: cst.Module  # the tree the hits' nodes are in (`neuron-ready fix` rewrites it)


class PythonScanner(Walker):
    def __init__(self, index: PyIndex, module_name: str, is_package: bool, collect_setup: bool,
                 first_party: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.idx = index
        self.first_party = first_party
        self.module_name = module_name
        self.is_package = is_package
        self.collect_setup = collect_setup
        self.names = Names()  # scopes and name resolution (scopes.py)
        self.nonref = self.names.nonref
        self.resolve = self.names.resolve
        self.guards = Guards()  # guards and fallbacks (guards.py)
        self.probes = ProbeSites(self.names.resolve)  # where a CUDA probe sits (probes.py)
        self.conditions = Conditions(self.names)  # what clauses ask of values (conditions.py)
        self.hits: list[Hit] = []
        self.deferred: list[Hit] = []  # checked against the file's imports at the end (requires=)
        self.imports: set[str] = set()  # absolute module names this file imports (for requires=)
        self.requirements: list[tuple[int, str, str]] = []
        self.store: set[int] = set()  # assignment targets
        self.unset: set[int] = set()  # `del os.environ[...]` targets
        self.discarded: set[int] = set()  # calls whose value is thrown away (expression statements)
        self.compared: set[int] = set()  # references that are compared (`x.dtype == torch.float16`)
        self.quiet = 0  # inside an import statement: names there are not references
        self.pending_kernels: list[Hit] = []
        self.autotune_configs: int | None = None
        # module-level functions by name, for a kernel made by a call (`f = triton.jit(f)`)
        self.module_functions: dict[str, tuple[cst.FunctionDef, int, int]] = {}
        self.decorator_calls: set[int] = set()  # `@triton.jit(...)`: the call a decorator holds
        self.raising = 0  # inside a `raise` statement: what it reads only builds the exception
        self.setup_strings: dict[int, str] = {}  # id of a requirement string -> its extra ("" for core)
        # The code matchers the catalog uses, in registry order; per event, the matchers that take it.
        matchers = [cls(self, index.patterns[name]) for name, cls in MATCHERS.items() if index.patterns.get(name)]
        self.on: dict[str, list] = {
            ev: [getattr(m, ev) for m in matchers if getattr(type(m), ev) is not getattr(Matcher, ev)] for ev in _EVENTS
        }
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
        lv[cst.Param] = self.leave_probe_site
        e[cst.Arg] = self.enter_arg
        lv[cst.Arg] = self.leave_probe_site
        e[cst.Try] = self.enter_try
        e[cst.If] = self.enter_if
        lv[cst.If] = self.leave_if
        e[cst.IfExp] = self.enter_ifexp
        e[cst.While] = self.enter_while
        e[cst.Subscript] = self.enter_subscript
        e[cst.Assert] = self.enter_assert
        lv[cst.Assert] = self.leave_probe_site
        e[cst.Raise] = self.enter_raise
        lv[cst.Raise] = self.leave_raise
        if self.on["binary"]:
            e[cst.BinaryOperation] = self.enter_binary
        for block in (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Else):
            e[block] = self.enter_block
            lv[block] = self.leave_block
        e[cst.Lambda] = self.enter_lambda
        e[cst.Expr] = self.enter_expr
        e[cst.Del] = self.enter_del
        e[cst.Comparison] = self.enter_comparison
        if collect_setup:
            e[cst.SimpleString] = self.enter_string
            e[cst.ConcatenatedString] = self.enter_string
        # Values that travel (values.py): chains its callbacks after the scanner's, so it comes last.
        self.values = ValueTracker(self)
        self.conditions.travel = self.values

    # ------------------------------------------------------------------ scopes and guards (scopes.py, guards.py)

    @property
    def scope(self) -> Scope:
        return self.names.scopes[-1]

    def enter_block(self, node: cst.CSTNode, line: int) -> None:
        self.guards.enter_block(node)

    def leave_block(self, node: cst.CSTNode, line: int) -> None:
        self.guards.leave_block(node)

    def enter_try(self, node: cst.Try, line: int) -> None:
        self.guards.enter_try(node, self.resolve)

    def enter_if(self, node: cst.If, line: int) -> None:
        self.guards.enter_if(node)
        self.test(node.test, line)
        if not self.quiet:
            for check in self.on["branch"]:
                check(node, line)
        self.probes.push(ProbeSites.IF, node)

    def leave_if(self, node: cst.If, line: int) -> None:
        self.guards.leave_if(node, self.scope)
        self.probes.pop()

    def enter_ifexp(self, node: cst.IfExp, line: int) -> None:
        self.guards.enter_ifexp(node)
        self.test(node.test, line)

    def enter_while(self, node: cst.While, line: int) -> None:
        self.test(node.test, line)

    def enter_raise(self, node: cst.Raise, line: int) -> None:
        self.raising += 1

    def leave_raise(self, node: cst.Raise, line: int) -> None:
        self.raising -= 1

    def enter_assert(self, node: cst.Assert, line: int) -> None:
        self.probes.push(ProbeSites.ASSERT, node)
        if not self.quiet:
            for check in self.on["assertion"]:
                check(node, line)

    def enter_binary(self, node: cst.BinaryOperation, line: int) -> None:
        if not self.quiet:
            for check in self.on["binary"]:
                check(node, line)

    def test(self, expr: cst.CSTNode, line: int) -> None:
        """A condition (or a range() bound): for the matchers that judge control flow."""
        if not self.quiet:
            for check in self.on["test"]:
                check(expr, line)

    # ------------------------------------------------------------------ hits

    def add(self, rule: Rule, clause: Match, line: int, node: cst.CSTNode, symbol: str,
            guarded: bool = False, details: dict | None = None) -> Hit | None:
        """Record a hit. `guarded`: it was reached through an optional import. Whether it is a
        fallback also depends on the kernel-path guards around it."""
        # (The result cache keys on first-party packages named like a catalog root, as only this
        # check uses them: see cache.relevant_first_party.)
        if clause.kind in _NAME_KINDS and symbol.split(".", 1)[0] in self.first_party:
            return None  # the scanned project's own package, e.g. flash_attn inside flash-attn
        if self.values.silent(rule, clause, node):
            return None  # a type annotation, a dtype table, a precision the user picks (values.py)
        if self.harmless(rule, clause, node, symbol):
            return None  # a CUDA probe that only chooses, code for an older PyTorch (probes.py, guards.py)
        only_on = self.only_on(rule, clause, node, symbol)
        if only_on is not None:
            details = {**(details or {}), "only_on": only_on[1], "only_on_feature": only_on[0]}
        if rule.category == "precision" and (key := self.values.dtype_key(node)) is not None:
            details = {**(details or {}), "dtype_key": key}  # context.py `dtype_keys`
        if rule.category == "precision" and clause.kind == "call" and (off := self.values.autocast_off(node, symbol)):
            details = {**(details or {}), "autocast_off": off}  # context.py `autocast_off`
        if rule.category == "precision" and clause.kind == "call" and (to := self.values.autocast_follows(node, symbol)):
            details = {**(details or {}), "autocast_follows": list(to)}  # context.py `autocast_off`
        if rule.category == "precision" and (cast := self.values.module_override()) is not None:
            details = {**(details or {}), "module_override": cast}  # context.py `dtype_keys`
        chosen = self.values.chosen_by(node) if rule.category == "precision" else None
        if chosen is not None:
            details = {**(details or {}), "chosen_by": chosen[0], "chosen_when": chosen[1]}
        if rule.category in HOST_CATEGORIES:
            host = self.values.on_host(node, clause.kind, clause.matcher)
            if host is not None:  # `x.cpu().nonzero()`: a shape or a read on the CPU (context.py `on_host_values`)
                details = {**(details or {}), "host_value": host}
        owner = None
        fallback = False
        # A device call under `if torch.cuda.is_available(): ... else: ...` has a path for other devices.
        if rule.fallback or rule.category == "device":
            fallback, owner = self.guards.fallback(guarded, rule.fallback, node, self.names.scopes)
        if guarded and fallback and rule.fallback and rule.category == "gpu-library":
            # imported under `try/except ImportError` or `if is_x_available():`: runs only when the user
            # installs the library (context.py makes it an opt-in feature named for it)
            details = {**(details or {}), "optional_library": symbol.lstrip(".").split(".", 1)[0]}
        root = symbol.lstrip(".").split(".", 1)[0]
        if guarded and clause.kind == "import" and root != "torch":
            # the import itself is already what the remedies ask for (a guard with a fallback): never
            # a porting task by itself, whatever library; its uses are judged on their own. (torch is
            # always installed: a guard around its modules only covers an older PyTorch.)
            details = {**(details or {}), "optional_library": root, "guarded_import": True}
        hit = Hit(rule, clause, line, node, symbol, self.names.scope_name(), fallback, details or {})
        if owner is not None:
            self.guards.record(hit, owner)
        if clause.within:
            self.scope.candidates.append(hit)
        else:
            self.keep(hit)
        return hit

    def harmless(self, rule: Rule, clause: Match, node: cst.CSTNode, symbol: str) -> bool:
        """Nothing to port: a CUDA probe whose False or 0 only picks a working alternative
        (probes.py), or a torch API in the `except AttributeError/TypeError:` of a try that calls a
        newer torch API (`torch.cuda.amp.GradScaler()` beside `torch.amp.GradScaler(device=...)`):
        an older PyTorch's path, never taken on a current torch (guards.py)."""
        if rule.housekeeping and clause.kind == "call" and type(node) is cst.Call and self.probes.harmless(node):
            return True
        return symbol.startswith("torch.") and any(g.kind == COMPAT for g in self.guards.open)

    def only_on(self, rule: Rule, clause: Match, node: cst.CSTNode, symbol: str = "") -> tuple[str, str] | None:
        """(feature, where) for a hit that runs only on some data or device: code under
        `if torch.is_complex(x):` runs for complex tensors only; a CUDA backend flag set
        (`torch.backends.cudnn.benchmark = True`) and a CUDA call that returns without touching the
        device before CUDA is initialised (`torch.cuda.empty_cache()`) do nothing off CUDA.
        context.py lists them as opt-in, never costed."""
        test = self.values.complex_only(node)
        if test is not None:
            return "complex", f"complex tensors (`{test}`)"
        if rule.housekeeping and clause.kind == "attribute" and clause.context == "store":
            return "cuda", "a CUDA device (a CUDA backend flag: no edit needed, harmless off CUDA)"
        if rule.housekeeping and clause.kind == "call" and symbol in NOOP_OFF_CUDA:
            return "cuda", f"a CUDA device (`{symbol}()` does nothing before CUDA is initialised: harmless off CUDA)"
        return None

    def emit(self, rule: Rule, clause: Match, line: int, node: cst.CSTNode, symbol: str, scope: str,
             fallback: bool) -> None:
        """Record a hit a matcher judged at the end of the file (no guards or scope conditions apply)."""
        self.keep(Hit(rule, clause, line, node, symbol, scope, fallback))

    def keep(self, hit: Hit) -> None:
        (self.deferred if hit.clause.requires else self.hits).append(hit)

    def finish_scope(self, scope: Scope) -> None:
        for hit in scope.candidates:
            w = hit.clause.within
            if w == "train_step":
                ok = scope.trains or bool(TRAIN_NAME.search(scope.name))
            elif w == "collate":  # a collate function, or a collator class's method
                ok = scope.kind == "function" and ("collat" in scope.name.lower() or "collat" in scope.owner.lower())
            else:  # forward: a method named forward, what torch.compile traces
                ok = scope.kind == "function" and scope.in_class and scope.name == "forward"
            if ok:
                self.keep(hit)

    # ------------------------------------------------------------------ imports

    def absolute_module(self, module: cst.CSTNode | None, level: int) -> str:
        name = ".".join(dotted_parts(module) or []) if module is not None else ""
        return absolute(name, level, self.module_name, self.is_package)

    def match_import(self, module: str, line: int, node: cst.CSTNode, guarded: bool) -> bool:
        matched = False
        for prefix, (rule, clause) in self.idx.imports:
            if module == prefix or module.startswith(prefix + "."):
                matched = self.add(rule, clause, line, node, module, guarded) is not None or matched
        return matched

    def enter_import(self, node: cst.Import, line: int) -> None:
        self.quiet += 1
        guarded, type_only = self.guards.import_guard()
        for alias in node.names:
            parts = dotted_parts(alias.name) or []
            full = ".".join(parts)
            if not full:
                continue
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                self.names.bind(alias.asname.name.value, Binding(full, guarded, type_only))
            else:
                self.names.bind(parts[0], Binding(parts[0], guarded, type_only))
            if type_only:
                continue
            self.imports.add(full)
            self.match_import(full, line, node, guarded)

    def enter_import_from(self, node: cst.ImportFrom, line: int) -> None:
        self.quiet += 1
        guarded, type_only = self.guards.import_guard()
        module = self.absolute_module(node.module, len(node.relative))
        if not type_only and module:
            self.imports.add(module)
        names = node.names
        matched_module = False
        if type(names) is cst.ImportStar:
            if not type_only and not node.relative:
                self.match_import(module, line, node, guarded)
            return
        imported = [(".".join(dotted_parts(a.name) or []),
                     a.asname.name.value if a.asname is not None and type(a.asname.name) is cst.Name else None)
                    for a in names]
        for alias in names:
            parts = dotted_parts(alias.name) or []
            if not parts:
                continue
            full, library = from_import(module, parts[0], imported)
            local = alias.asname.name.value if alias.asname is not None and type(alias.asname.name) is cst.Name else parts[0]
            self.names.bind(local, Binding(full, guarded, type_only))
            if type_only:
                continue
            if library:
                self.imports.add(full)
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
        if type(expr) is cst.Call:
            self.decorator_calls.add(id(expr))
        target = expr.func if type(expr) is cst.Call else expr
        q, guarded = self.resolve(target)
        if q is None:
            return
        self.mark_chain(target)
        for rule, clause in self.idx.decorators.lookup(q):
            ok = self.conditions.args(expr, clause.args) if type(expr) is cst.Call else bare_ok(clause.args)
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
        for check in self.on["function"]:
            check(node)
        if kernels:
            for hit in kernels:
                hit.details["kernel"] = name
                if autotune is not None:
                    hit.details["autotune_configs"] = autotune
        in_class = self.scope.kind == "class"
        owner = self.scope.name if in_class else ""
        self.names.bind(name, Binding(None))
        self.names.scopes.append(Scope("function", name, start=line, in_class=in_class, owner=owner, kernel_hits=kernels))

    def enter_class(self, node: cst.ClassDef, line: int) -> None:
        self.nonref.add(id(node.name))
        self.pending_kernels = []
        self.names.bind(node.name.value, Binding(None))
        self.names.scopes.append(Scope("class", node.name.value, start=line))

    def leave_scope(self, node: cst.CSTNode, line: int) -> None:
        scope = self.names.scopes[-1]
        self.finish_scope(scope)
        self.names.scopes.pop()
        if scope.kind == "function":
            if self.scope.kind == "module" and type(node) is cst.FunctionDef:
                self.module_functions[node.name.value] = (node, scope.start, line)
            if scope.trains and self.scope.kind == "function":
                self.scope.trains = True  # a closure's backward() makes its parent a training step
            if scope.kernel_hits:
                self.describe_kernel(node, scope.kernel_hits, scope.start, line)

    def kernel_by_call(self, node: cst.Call, q: str, line: int, guarded: bool) -> None:
        """`_fwd = triton.jit(_fwd)`: the decorator applied by a call (anywhere in the file: screen.py
        `_kernels_by_call` keeps the same calls) to a module function defined above is that function's
        kernel finding, at the call, measured on the function's body."""
        found = self.module_functions.get(node.args[0].value.value)
        if found is None:
            return
        fn, start, end = found
        for rule, clause in self.idx.decorators.lookup(q):
            if rule.costing == "triton-kernel" and bare_ok(clause.args):
                hit = self.add(rule, clause, line, node, q, guarded, details={"kernel": fn.name.value})
                if hit is not None:
                    self.describe_kernel(fn, [hit], start, end)

    def describe_kernel(self, node: cst.FunctionDef, hits: list[Hit], start: int, end: int) -> None:
        """Size and shape of a Triton kernel, inputs to its porting cost."""
        atomics = 0
        tl_ops = 0
        tokens = BodyTokens() if any(hit.rule.costing == "triton-kernel" for hit in hits) else None
        returns = False  # a launched kernel returns nothing: a @triton.jit that returns a value is a device function
        for n in iter_subtree(node.body):
            if tokens is not None:
                tokens.add(n)
            if type(n) is cst.Return and n.value is not None:
                returns = True
            if type(n) is cst.Call:
                parts = dotted_parts(n.func)
                if parts and len(parts) >= 2:
                    q, _ = self.resolve(n.func)
                    if q and q.startswith("triton.language."):
                        tl_ops += 1
                        if parts[-1].startswith("atomic_"):
                            atomics += 1
        name = node.name.value.lower()
        fingerprint = nearcopy.fingerprint(tokens.tokens) if tokens is not None else ""
        for hit in hits:
            hit.details.update(
                lines=end - start + 1,
                tl_ops=tl_ops,
                atomics=atomics,
                backward=bool(re.search(r"bwd|backward|grad", name)),
            )
            if hit.rule.costing == "triton-kernel":  # the kernel's own finding: effort.py folds near-copies by it
                hit.details["fingerprint"] = fingerprint
                if returns:
                    hit.details["device_function"] = True

    def enter_param(self, node: cst.Param, line: int) -> None:
        self.nonref.add(id(node.name))
        self.names.bind(node.name.value, Binding(None, param=True))
        self.probes.push(ProbeSites.VALUE, node.default)

    def enter_arg(self, node: cst.Arg, line: int) -> None:
        self.probes.push(ProbeSites.VALUE if node.keyword is not None else ProbeSites.NONE, node.value)

    def leave_probe_site(self, node: cst.CSTNode, line: int) -> None:
        self.probes.pop()

    def enter_lambda(self, node: cst.Lambda, line: int) -> None:
        for p in node.params.params:
            self.nonref.add(id(p.name))

    def enter_asname(self, node: cst.AsName, line: int) -> None:
        if self.quiet:
            return
        self.names.bind_local(node.name)

    # ------------------------------------------------------------------ assignments

    def enter_assign(self, node: cst.Assign, line: int) -> None:
        self.probes.push(ProbeSites.VALUE, node.value)
        for t in node.targets:
            self.mark_store(t.target)
            self.check_environ_subscript(t.target, line)
            for check in self.on["assign"]:
                check(t.target, node.value, line)

    def leave_assign(self, node: cst.Assign, line: int) -> None:
        self.probes.pop()
        for t in node.targets:
            self.names.bind_local(t.target, node.value if len(node.targets) == 1 else None)

    def enter_ann_assign(self, node: cst.AnnAssign, line: int) -> None:
        self.mark_store(node.target)
        self.probes.push(ProbeSites.VALUE, node.value)
        if node.value is not None:
            for check in self.on["assign"]:
                check(node.target, node.value, line)

    def leave_ann_assign(self, node: cst.AnnAssign, line: int) -> None:
        self.probes.pop()
        self.names.bind_local(node.target, node.value)

    def enter_aug_assign(self, node: cst.AugAssign, line: int) -> None:
        self.mark_store(node.target)

    def enter_for(self, node: cst.For, line: int) -> None:
        self.names.bind_local(node.target)
        it = node.iter
        if type(it) is cst.Call and self.on["test"]:
            q, _ = self.resolve(it.func)
            if q == "builtins.range":
                for arg in it.args:
                    self.test(arg.value, line)

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
            b = self.names.lookup(node.value)
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
                if self.conditions.args(node, clause.args) and self.use_ok(node, clause):
                    self.add(rule, clause, line, node, q, guarded)
            if id(node) not in self.decorator_calls and node.args and type(node.args[0].value) is cst.Name:
                self.kernel_by_call(node, q, line, guarded)
            if q in IMPORT_CALLS and node.args:
                mod = literal_value(node.args[0].value)
                if isinstance(mod, str):
                    self.imports.add(mod)
                    self.match_import(mod, line, node, guarded or self.guards.import_guard()[0])
            elif q in _ENV_CALLS and node.args and not (q == "os.environ.pop" and id(node) in self.discarded):
                # (a pop whose value nobody reads unsets the variable: nothing off CUDA reads it either)
                self.check_environ(node.args[0].value, line, node, store=q in _ENV_SETS)
            elif q == "os.environ.update" and node.args and type(node.args[0].value) is cst.Dict:
                for el in node.args[0].value.elements:
                    if type(el) is cst.DictElement:
                        self.check_environ(el.key, line, node, store=True)
            elif self.collect_setup and q.split(".")[-1] == "setup":
                for arg in node.args:
                    if arg.keyword is not None and arg.keyword.value in _SETUP_KEYWORDS:
                        self.setup_strings.update(_setup_strings(arg.keyword.value, arg.value))
            if q.endswith(".backward"):
                self.note_backward(line, node)
        elif ftype is cst.Attribute:
            method = func.attr.value
            if method == "backward":
                self.note_backward(line, node)
            elif method == "step":
                receiver = dotted_parts(func.value)
                if receiver and OPTIMIZER_RECEIVER.search(receiver[-1]):
                    self.scope.trains = True
            entries = self.idx.methods.get(method)
            if entries and not self.values.host_value(func.value):  # a NumPy or pandas method is no tensor op
                for rule, clause in entries:
                    if self.conditions.args(node, clause.args) and self.use_ok(node, clause):
                        self.add(rule, clause, line, node, f".{method}()")
        for check in self.on["call"]:
            check(node, q, line)
        if self.idx.keywords:
            self.match_keywords(node, q, line)

    def enter_string(self, node: cst.CSTNode, line: int) -> None:
        """setup.py: a requirement string inside install_requires and friends."""
        if id(node) in self.setup_strings:
            v = literal_value(node)
            if isinstance(v, str):
                self.requirements.append((line, v, self.setup_strings[id(node)]))

    def note_backward(self, line: int, node: cst.CSTNode) -> None:
        for check in self.on["backward"]:
            check(node, line)
        self.scope.trains = True

    def use_ok(self, call: cst.Call, clause: Match) -> bool:
        return clause.result_used is None or clause.result_used == (id(call) not in self.discarded)

    def enter_expr(self, node: cst.Expr, line: int) -> None:
        self.discarded.add(id(node.value))

    def enter_del(self, node: cst.Del, line: int) -> None:
        # `del os.environ["CUBLAS_WORKSPACE_CONFIG"]` unsets a variable: no runtime off CUDA reads it
        self.unset.update(id(n) for n in iter_subtree(node.target) if type(n) is cst.Subscript)

    def enter_comparison(self, node: cst.Comparison, line: int) -> None:
        if self.idx.attributes:
            self.compared.update(id(n) for n in iter_subtree(node) if type(n) in (cst.Attribute, cst.Name))

    def match_keywords(self, node: cst.Call, callee: str | None, line: int) -> None:
        if callee in _KEYS_CALLS:
            return  # `dict(device=device)`: its keywords are the dictionary's keys, not a device argument
        if callee in _PARTIAL_CALLS and node.args and node.args[0].keyword is None:
            # `partial(custom_fwd, device_type="cuda")`: the keywords are the wrapped function's
            wrapped = node.args[0].value
            callee = self.resolve(wrapped)[0] if type(wrapped) in (cst.Name, cst.Attribute) else None
            node = node.with_changes(func=wrapped) if callee is None else node
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
                if clause.args and not self.conditions.args(node, clause.args):
                    continue
                if self.conditions.keyword_value(arg.value, clause):
                    sym = f"{arg.keyword.value}={short_code(arg.value)}"
                    # where the value was chosen: context.py gates the keyword by those lines too
                    at = self.values.assigned_at(arg.value, clause)
                    self.add(rule, clause, line, node, sym, details={"value_lines": at} if at else None)

    # ------------------------------------------------------------------ environment variables

    def check_environ(self, key: cst.CSTNode | None, line: int, node: cst.CSTNode, store: bool = False) -> None:
        name = literal_value(key)
        if not isinstance(name, str) or (self.raising and not store):
            return  # (a variable read for an exception's message configures nothing)
        for rx, (rule, clause) in self.idx.environ:
            if rx.fullmatch(name) and not (store and rule.housekeeping and sets_tuning_variable(name)):
                # (setting a variable that only tunes the CUDA runtime is ignored off CUDA: probes.py)
                self.add(rule, clause, line, node, name)

    def check_environ_subscript(self, target: cst.CSTNode, line: int) -> None:
        if type(target) is cst.Subscript and self.idx.environ:
            q, _ = self.resolve(target.value)
            if q == "os.environ" and target.slice:
                sl = target.slice[0].slice
                if type(sl) is cst.Index:
                    self.check_environ(sl.value, line, target, store=True)

    # ------------------------------------------------------------------ subscripts

    def enter_subscript(self, node: cst.Subscript, line: int) -> None:
        if self.quiet:
            return
        if id(node) not in self.store and id(node) not in self.unset:
            q, _ = self.resolve(node.value)
            if q == "os.environ" and self.idx.environ and node.slice and type(node.slice[0].slice) is cst.Index:
                self.check_environ(node.slice[0].slice.value, line, node)
        for check in self.on["subscript"]:
            check(node, line)

    # ------------------------------------------------------------------ the end of the file

    def finish(self) -> None:
        self.finish_scope(self.names.scopes[0])
        for check in self.on["finish"]:
            check()
        roots = {m.split(".")[0] for m in self.imports} | self.imports
        for hit in self.deferred:
            if any(r in roots for r in hit.clause.requires):
                self.hits.append(hit)
        # a dtype that only keys a table (`buf[torch.float16]`) yields its line's finding to a real use
        # beside it (`torch.empty(buf[torch.float16], dtype=torch.float16)`): one finding per rule and line
        self.hits.sort(key=lambda h: "dtype_key" in h.details)



def snippet_of(node: cst.CSTNode) -> str:
    if type(node) in (cst.If, cst.While):
        node = node.test
    return short_code(node, 160)


def scan_module(module: cst.Module, index: PyIndex, module_name: str = "", is_package: bool = False,
                collect_setup: bool = False, first_party: frozenset[str] = frozenset(),
                tree: ast.Module | None = None) -> PyResult:
    """`tree`: Python's own parse of the whole file, when the caller has it (values.py reads the
    assignments of a class from it, whatever the screen cut)."""
    scanner = PythonScanner(index, module_name, is_package, collect_setup, first_party)
    scanner.values.ast_tree = tree
    scanner.walk(module)
    scanner.finish()
    return PyResult(scanner.hits, scanner.requirements, module)
