"""Which functions and classes of a Python file could a rule match? An `ast` screen ahead of libcst.

libcst builds a full object tree and costs about ten times what Python's own parser does, while
in PyTorch code most functions match no rule at all. So a file that passes the text prefilter is
parsed with `ast` first, and every function or class (at module level, in module-level `if`/`try`
blocks, and inside kept classes) that provably holds nothing a rule could match is cut out and
replaced by a one-line stub binding the same name. libcst parses what is left, and the hits' line
numbers are mapped back, so the report is the one a full parse gives.

The screen mirrors python.py's entry points and over-approximates them; it never decides on a
guess. Names resolve to every qualified name any import or alias in the file could give them; an
argument condition fails only when it certainly fails (the argument is absent, or certainly not
the literal, string or name asked for); a clause that `requires` a module the file never imports
cannot match; anything the screen cannot judge keeps its region. Regions that change what the file
as a whole reports stay too: an import of a module some clause `requires` that the rest of the
file does not import, a Triton decorator (kernel names, for launches), and with the XLA step rule
active, backward and mark_step calls. tests/test_screen.py checks screened and full scans agree.
"""

from __future__ import annotations

import ast
import io
import re
from dataclasses import dataclass

from ..catalog import ArgCond, Match, conds_hold
from .imports import absolute
from .matchers import MATCHERS
from .pyindex import PyIndex, callee_in, name_in
from .valuefacts import ScreenFacts
from .vocab import (
    AST_NOT_LITERAL,
    BUILTINS,
    IMPORT_CALLS,
    MAYBE,
    TRAIN_NAME,
    ast_chain,
    ast_find_arg,
    ast_literal,
    ast_maybe_none,
    ast_shapes,
    from_import,
    fullmatch_may,
)
from .vocab import AST_PLANS as _PLANS
from .vocab import ast_nodes as _walk
from .vocab import ast_plan as _plan

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Reduced:
    """The text libcst parses and, for each of its lines, the line of the original file."""

    text: str
    lines: tuple[int, ...]
    matchable: bool = True  # False: nothing in the file can match, so nothing needs parsing

    def original_line(self, line: int) -> int:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else line


NOTHING = Reduced("", (), matchable=False)


def reduce_source(text: str, tree: ast.Module, idx: PyIndex, module_name: str, is_package: bool) -> Reduced | None:
    """The file without the functions and classes no active rule can match; None when all stay,
    NOTHING when no rule can match anything in it."""
    if "\r" in text.replace("\r\n", ""):
        return None  # a lone CR ends a line for some tools and not others: not worth the doubt
    if any(p not in MATCHERS or (MATCHERS[p].triggers and not MATCHERS[p].screen_nodes) for p in idx.patterns):
        return None  # a code matcher the screen does not know the shape of (one without triggers matches no Python)
    screen = _Screen(idx, tree, text, module_name, is_package)
    drops: list[ast.AST] = []
    if not screen.screen(tree.body, drops) and not screen.needed(tree, frozenset(map(id, _regions(tree.body)))):
        return NOTHING
    drops = screen.keep_required_imports(drops)
    return _cut(text, drops) if drops else None


# ---------------------------------------------------------------------------------- regions and cuts

def _regions(body: list[ast.stmt]):
    """Functions and classes a screen may cut: in `body` and in its if/try blocks."""
    for st in body:
        t = type(st)
        if t in _DEFS:
            yield st
        elif t is ast.If:
            yield from _regions(st.body)
            yield from _regions(st.orelse)
        elif t is ast.Try or t.__name__ == "TryStar":
            yield from _regions(st.body)
            for h in st.handlers:
                yield from _regions(h.body)
            yield from _regions(st.orelse)
            yield from _regions(st.finalbody)


def _start(node: ast.AST) -> int:
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])


def _cut(text: str, drops: list[ast.AST]) -> Reduced:
    lines = io.StringIO(text, newline="").readlines()
    out: list[str] = []
    where: list[int] = []
    i = 0  # 0-based index of the next original line to copy
    for node in sorted(drops, key=_start):
        start, end = _start(node) - 1, node.end_lineno
        out.extend(lines[i:start])
        where.extend(range(i + 1, start + 1))
        def_line = lines[node.lineno - 1]
        indent = def_line[: len(def_line) - len(def_line.lstrip(" \t\f"))]
        newline = lines[end - 1][len(lines[end - 1].rstrip("\r\n")):] or "\n"
        stub = f"class {node.name}: pass" if type(node) is ast.ClassDef else f"def {node.name}(): pass"
        out.append(indent + stub + newline)  # python.py binds a definition's name to nothing importable
        where.append(node.lineno)
        i = end
    out.extend(lines[i:])
    where.extend(range(i + 1, len(lines) + 2))  # and a position after the last newline
    return Reduced("".join(out), tuple(where))


# ---------------------------------------------------------------------------------- ast helpers

def _pattern_may(pattern: str, value: ast.AST) -> bool:
    """conditions.py's _pattern_matches: a string shape, or a string in a list, dict or dict() call."""
    if fullmatch_may(pattern, ast_shapes(value)):
        return True
    t = type(value)
    if t in (ast.List, ast.Tuple, ast.Set):
        return any(_pattern_may(pattern, el.value if type(el) is ast.Starred else el) for el in value.elts)
    if t is ast.Dict:
        return any((k is not None and _pattern_may(pattern, k)) or _pattern_may(pattern, v)
                   for k, v in zip(value.keys, value.values))
    if t is ast.Call and ast_chain(value.func) == ["dict"]:
        return any(_pattern_may(pattern, a) for a in value.args) or any(
            (kw.arg is not None and re.fullmatch(pattern, kw.arg)) or _pattern_may(pattern, kw.value)
            for kw in value.keywords
        )
    return False


# ---------------------------------------------------------------------------------- the screen

class _Screen:
    walk = staticmethod(_walk)  # for the matchers' ast checks

    def __init__(self, idx: PyIndex, tree: ast.Module, text: str, module_name: str, is_package: bool) -> None:
        self.idx = idx
        self.module_name = module_name
        self.is_package = is_package
        self.collate = "collat" in text.lower()  # some name could make a function a collate function
        self.prefixes = frozenset(p for p, _ in idx.imports)
        # Per ast node class, the ast checks of the code matchers the catalog uses.
        self.checks: dict[type, list] = {}
        for name, entries in idx.patterns.items():
            if entries:
                m = MATCHERS[name]
                for t in m.screen_nodes:
                    self.checks.setdefault(t, []).append((m.may, entries))
        self.names: dict[str, set[str]] = {}
        self.imports: list[tuple[int, str]] = []  # (line, module) python.py records as imported
        self.call_imports: list[tuple[int, str]] = []  # (line, module) of import_module-like calls
        self.roots: set[str] = set()  # every module the file may import, and their top-level packages
        self.decorated: set[str] = set()  # functions with decorators (Triton kernels among them)
        self._bind(tree, text)
        self.wrapped = self._kernels_by_call(tree)  # `f = triton.jit(f)`: f's def is a kernel
        self.travel = ScreenFacts(tree, text)  # where values travel (values.py), for conditions and value matchers
        # Per region: references inside a comparison, and (lazily) the names of its functions.
        self.compared: set[int] = set()
        self.region: tuple[ast.AST, frozenset[int]] | None = None
        self.facts: tuple[set[str], bool] | None = None
        self.region_answers: dict[str, bool] = {}  # region_has: per region, per key

    # ------------------------------------------------------------------ resolution

    def _bind(self, tree: ast.Module, text: str) -> None:
        """Every qualified name each name may be bound to, from imports and aliases anywhere.

        Only statements bind names python.py resolves, so only statements are visited."""
        names = self.names
        aliases: list[tuple[str, ast.AST]] = []
        stack: list[tuple[list[ast.stmt], bool]] = [(tree.body, True)]
        while stack:
            body, counts = stack.pop()  # counts: imports here run (not under `if TYPE_CHECKING:`)
            for node in body:
                t = type(node)
                if t is ast.Import:
                    for a in node.names:
                        head = a.name.split(".")[0]
                        names.setdefault(a.asname or head, set()).add(a.name if a.asname else head)
                        if counts:
                            self.imports.append((node.lineno, a.name))
                elif t is ast.ImportFrom:
                    mod = absolute(node.module or "", node.level, self.module_name, self.is_package)
                    if mod and counts:
                        self.imports.append((node.lineno, mod))
                    imported = [(a.name, a.asname) for a in node.names]
                    for a in node.names:
                        if a.name == "*":
                            continue
                        full, library = from_import(mod, a.name, imported)
                        names.setdefault(a.asname or a.name, set()).add(full)
                        if (node.level or library) and counts:
                            self.imports.append((node.lineno, full))
                elif t is ast.Assign:
                    if len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
                        aliases.append((node.targets[0].id, node.value))
                elif t is ast.AnnAssign:
                    if type(node.target) is ast.Name and node.value is not None:
                        aliases.append((node.target.id, node.value))
                elif t is ast.If:
                    parts = ast_chain(node.test)
                    stack.append((node.body, counts and not (parts and parts[-1] == "TYPE_CHECKING")))
                    stack.append((node.orelse, counts))
                    continue
                elif t in _FUNCS and node.decorator_list:
                    self.decorated.add(node.name)
                for f in ("body", "orelse", "finalbody"):
                    inner = getattr(node, f, None)
                    if inner:
                        stack.append((inner, counts))
                for h in getattr(node, "handlers", None) or getattr(node, "cases", None) or ():
                    stack.append((h.body, counts))
        if "import_module" in text or "__import__" in text:
            # `importlib.import_module("x")` also imports x for python.py: found by name here,
            # which finds more than python.py resolves (only ever keeping more).
            for node in _walk(tree):
                if type(node) is ast.Call and node.args:
                    parts = ast_chain(node.func)
                    mod = ast_literal(node.args[0]) if parts and parts[-1] in ("import_module", "__import__") else None
                    if type(mod) is str:
                        self.call_imports.append((node.lineno, mod))
        for _, mod in self.imports + self.call_imports:
            self.roots.update((mod, mod.split(".")[0]))
        # One pass in source order, as python.py binds them: `F = torch.nn.functional; G = F` makes G
        # torch.nn.functional, and `node = node.parent` in a loop adds one name, not an endless chain.
        for name, value in sorted(aliases, key=lambda a: (a[1].lineno, a[1].col_offset)):
            parts = ast_chain(value)
            if parts:
                names.setdefault(name, set()).update(self.candidates(parts))

    def _kernel_call(self, node: ast.AST) -> bool:
        """`triton.jit(f)`: a kernel decorator applied by a call to a name (python.py `kernel_by_call`)."""
        if type(node) is not ast.Call or not node.args or type(node.args[0]) is not ast.Name:
            return False
        parts = ast_chain(node.func)
        return bool(parts) and any(rule.costing == "triton-kernel" for q in self.candidates(parts)
                                   for rule, _clause in self.idx.decorators.lookup(q))

    def _kernels_by_call(self, tree: ast.Module) -> frozenset[str]:
        """The functions a call of a kernel decorator names, wherever the call is (`_fwd =
        triton.jit(_fwd)`, `return triton.jit(_fwd)`): python.py `kernel_by_call` reports any such
        call of a module function, so the call and the def both stay. Only a file that may import a
        kernel decorator's package is walked."""
        roots = {name.split(".")[0] for name, entries in self.idx.decorators.exact.items()
                 if any(rule.costing == "triton-kernel" for rule, _clause in entries)}
        if not roots & self.roots:
            return frozenset()
        return frozenset(n.args[0].id for n in _walk(tree) if self._kernel_call(n))

    def candidates(self, parts: list[str]) -> list[str]:
        rest = "." + ".".join(parts[1:]) if len(parts) > 1 else ""
        out = [head + rest for head in self.names.get(parts[0], ())]
        if parts[0] in BUILTINS:
            out.append("builtins." + ".".join(parts))
        return out

    # ------------------------------------------------------------------ regions

    def screen(self, body: list[ast.stmt], drops: list[ast.AST]) -> bool:
        """Add the regions of `body` nothing can match to `drops`; True when some region stays.

        A class is judged on its own lines (header, decorators, plain statements) and its methods
        one by one: it goes whole when nothing in it is needed, else only its unneeded methods go.
        """
        kept = False
        for region in _regions(body):
            if type(region) is ast.ClassDef:
                inner: list[ast.AST] = []
                if self.screen(region.body, inner) or self.needed(region, frozenset(map(id, _regions(region.body)))):
                    drops.extend(inner)
                    kept = True
                else:
                    drops.append(region)
            elif self.needed(region):
                kept = True
            else:
                drops.append(region)
        return kept

    def needed(self, region: ast.AST, skip: frozenset[int] = frozenset()) -> bool:
        """Could python.py report anything inside `region`, or learn a file-wide fact from it?"""
        idx = self.idx
        self.compared = set()
        self.region, self.facts, self.region_answers = (region, skip), None, {}
        stack = [region]  # _walk, inline: a name chain is judged whole and not entered
        while stack:
            node = stack.pop()
            t = type(node)
            checks = self.checks.get(t)
            if checks is not None and any(may(self, node, entries) for may, entries in checks):
                return True
            if t is ast.Name or t is ast.Attribute:
                parts = ast_chain(node)
                if parts is not None:
                    if idx.attributes and self._reference(node, parts):
                        return True
                    continue
            elif t is ast.Call:
                if self._call(node) or (self.wrapped and self._kernel_call(node)):
                    return True
            elif t is ast.Compare:
                if idx.attributes:  # python.py: testing a dtype or device is not using it
                    self.compared.update(id(n) for n in _walk(node) if type(n) in (ast.Name, ast.Attribute))
            elif t in _DEFS:
                if any(self._decorator(d) for d in node.decorator_list) or node.name in self.wrapped:
                    return True
            elif t is ast.Import or t is ast.ImportFrom:
                if self._import(node):
                    return True
            elif t is ast.Constant:
                if idx.environ and type(node.value) is str and any(
                    rx.fullmatch(node.value) and self._may(c) for rx, (_, c) in idx.environ
                ):
                    return True
            plan = _PLANS.get(t)
            for f in plan if plan is not None else _plan(t):
                v = getattr(node, f)
                if type(v) is list:
                    stack.extend([c for c in v if c is not None and id(c) not in skip])
                elif v is not None and id(v) not in skip:
                    stack.append(v)
        return False

    # ------------------------------------------------------------------ entry points

    def _call(self, node: ast.Call) -> bool:
        idx = self.idx
        func = node.func
        parts = ast_chain(func)
        qs = self.candidates(parts) if parts else ()
        for q in qs:
            for _, clause in idx.calls.lookup(q):
                if self._may(clause) and self._args_may(node, clause.args):
                    return True
            if q in IMPORT_CALLS and self._import_call_may(node):
                return True
        if type(func) is ast.Attribute:
            for _, clause in idx.methods.get(func.attr, ()):
                if self._may(clause) and self._args_may(node, clause.args):
                    return True
        for kw in node.keywords:
            for _, clause in idx.keywords.get(kw.arg, ()) if kw.arg else ():
                if (self._may(clause) and self._callee_may(func, qs, clause) and self._args_may(node, clause.args)
                        and self._keyword_value_may(kw.value, clause)):
                    return True
        return False

    def _reference(self, node: ast.AST, parts: list[str]) -> bool:
        for q in self.candidates(parts):
            for _, clause in self.idx.attributes.lookup(q):
                if clause.context == "store" and type(node.ctx) is ast.Load:
                    continue  # only an assignment target is a store
                if clause.context == "load" and id(node) in self.compared:
                    continue
                if self._may(clause):
                    return True
        return False

    def _decorator(self, expr: ast.AST) -> bool:
        target = expr.func if type(expr) is ast.Call else expr
        parts = ast_chain(target)
        if not parts:
            return False
        for q in self.candidates(parts):
            if q.startswith("triton."):
                return True  # the triton_launch matcher learns kernel names from these, for launches elsewhere
            for _, clause in self.idx.decorators.lookup(q):
                if self._may(clause) and (type(expr) is not ast.Call or self._args_may(expr, clause.args)):
                    return True
        return False

    def _import(self, node: ast.AST) -> bool:
        if type(node) is ast.Import:
            mods = [a.name for a in node.names]
        else:
            mod = absolute(node.module or "", node.level, self.module_name, self.is_package)
            mods = [mod] + [f"{mod}.{a.name}" if mod else a.name for a in node.names]
        return any(self._imported(m) for m in mods)

    def _imported(self, module: str) -> bool:
        """python.py's match_import: the module or a package above it is in an import clause."""
        parts = module.split(".")
        return any(".".join(parts[:i]) in self.prefixes for i in range(1, len(parts) + 1))

    def _import_call_may(self, node: ast.Call) -> bool:
        """`importlib.import_module("x")`: python.py matches x like an import (what it adds to the
        file's imports is kept by keep_required_imports)."""
        if any(type(a) is ast.Starred for a in node.args) or any(k.arg is None for k in node.keywords):
            return True
        first = node.args[0] if node.args else node.keywords[0].value if node.keywords else None
        lit = ast_literal(first) if first is not None else None
        if lit is MAYBE:
            return True
        return type(lit) is str and self._imported(lit)

    # ------------------------------------------------------------------ clause conditions

    def _may(self, clause: Match) -> bool:
        """A clause's conditions on the file (`requires`) and on the enclosing function (`within`)."""
        if clause.requires and not any(r in self.roots for r in clause.requires):
            return False
        if clause.within:
            defs, trains = self._region_facts()
            if clause.within == "forward":
                return "forward" in defs
            if clause.within == "collate":
                return self.collate
            return trains or any(TRAIN_NAME.search(d) for d in defs)
        return True

    def region_has(self, key: str, predicate) -> bool:
        """Whether some node of the region being judged satisfies `predicate` (answered once per
        region and key): a matcher's condition on the whole function, not on one node."""
        found = self.region_answers.get(key)
        if found is None:
            region, skip = self.region
            found = self.region_answers[key] = any(predicate(n) for n in _walk(region, skip))
        return found

    def any_may(self, entries) -> bool:
        """Some clause naming a matcher may hold here (a matcher's ast check asks, see matchers.py)."""
        return any(self._may(clause) for _, clause in entries)

    def _region_facts(self) -> tuple[set[str], bool]:
        """The region's function names, and whether it calls backward() or step() anywhere."""
        if self.facts is None:
            region, skip = self.region
            defs: set[str] = set()
            trains = False
            for n in _walk(region, skip):
                t = type(n)
                if t in _FUNCS:
                    defs.add(n.name)
                elif t is ast.Call:
                    f = n.func
                    name = f.attr if type(f) is ast.Attribute else f.id if type(f) is ast.Name else ""
                    trains = trains or name in ("backward", "step") or name.endswith("backward")
            self.facts = (defs, trains)
        return self.facts

    def _args_may(self, call: ast.Call, conds: tuple[ArgCond, ...]) -> bool:
        return conds_hold(conds, lambda cond: ast_find_arg(call, cond), self._value_may)

    def _value_may(self, cond: ArgCond, value: ast.AST) -> bool:
        if self.travel.may_carry(cond, value):
            return True  # values.py: a name given a value somewhere in the file
        lit = ast_literal(value)
        if cond.literal is not None and lit is not MAYBE and cond.literal == (lit is AST_NOT_LITERAL):
            return False
        if cond.equals and not self._equals_may(lit, cond.equals):
            return False
        if cond.pattern and not _pattern_may(cond.pattern, value):
            return False
        if cond.names and not self._names_may(value, cond.names):
            return False
        if cond.string is not None:
            shapes = ast_shapes(value)
            if shapes is not None and cond.string != bool(shapes):
                return False
        return cond.maybe_none is None or cond.maybe_none == ast_maybe_none(value)  # int_like: libcst judges

    @staticmethod
    def _equals_may(lit, wanted: tuple) -> bool:
        return lit is MAYBE or any(type(lit) is type(e) and lit == e for e in wanted)

    def _names_may(self, value: ast.AST, names: tuple[str, ...]) -> bool:
        parts = ast_chain(value)
        return bool(parts) and any(name_in(q, names) for q in self.candidates(parts))

    def _keyword_value_may(self, value: ast.AST, clause: Match) -> bool:
        return bool(
            (clause.values and self._equals_may(ast_literal(value), clause.values))
            or (clause.pattern and fullmatch_may(clause.pattern, ast_shapes(value)))
            or (clause.value_names and self._names_may(value, clause.value_names))
            or self.travel.may_carry(None, value)
        )

    @staticmethod
    def _callee_may(func: ast.AST, qs, clause: Match) -> bool:
        """python.py's callee check, for every name the callee may resolve to (a method name
        counts whatever the receiver resolves to)."""
        method = func.attr if type(func) is ast.Attribute else None
        return not clause.calls or any(callee_in(q, method, clause.calls) for q in (qs or (None,)))

    # ------------------------------------------------------------------ file-wide facts

    def keep_required_imports(self, drops: list[ast.AST]) -> list[ast.AST]:
        """Keep the regions whose imports alone give the file a module some clause `requires`."""
        if not self.idx.requires or not drops:
            return drops
        spans = [(_start(r), r.end_lineno) for r in drops]

        def dropped(line: int) -> int | None:
            return next((i for i, (a, b) in enumerate(spans) if a <= line <= b), None)

        def required(mod: str) -> set[str]:
            return {mod, mod.split(".")[0]} & self.idx.requires

        kept: set[str] = set()
        for line, mod in self.imports:
            if dropped(line) is None:
                kept |= required(mod)
        undrop: set[int] = set()
        for line, mod in self.imports:
            missing = required(mod) - kept
            if missing:
                undrop.add(dropped(line))
                kept |= missing
        for line, mod in self.call_imports:  # never counted as kept: python.py may not resolve the call
            i = dropped(line)
            if i is not None and required(mod) - kept:
                undrop.add(i)
        return [r for i, r in enumerate(drops) if i not in undrop]
