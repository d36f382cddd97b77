"""Where one Python file applies `torch.compile`, and to what: the per-file half of the compiled-region
analysis (analyzer/compile_scope.py is the other half).

Under `torch.compile(backend="neuron")` an op without a Neuron lowering fails the compile, where in
eager mode it falls back to the CPU; so a finding needs to know whether its function is compiled.
Three forms are read, each as a plain record [kind, scope, line, ref] cached with the file's facts:

- `def`: a function decorated with `@torch.compile` / `@torch.compile(...)`; `scope` is the function.
- `call`: `torch.compile(x, ...)` (or `torch._dynamo.optimize(...)(x)`); `scope` is where the call runs.
- `method`: `x.compile(...)` with nothing but torch.compile's keywords (nn.Module's in-place form;
  not a Keras `model.compile(optimizer=...)`), in a file that imports torch.

`ref` names what is compiled in the form codefacts uses (`l:step`, `q:pkg.models.Net`): a function
passed by name or the decorated function itself; with a trailing `()` what a call made
(`model = Net(...)`, `self.model = Net(...)`: an instance if `Net` is a class, a factory's result if
not); "" when the scan cannot tell (a parameter, an attribute set elsewhere).
"""

from __future__ import annotations

import ast

from .vocab import ast_chain as _chain

COMPILE_CALLS = frozenset({"torch.compile"})
_OPTIMIZE = "torch._dynamo.optimize"
_MAX_DEPTH = 4
MODULE_COMPILE_KEYWORDS = frozenset({"backend", "fullgraph", "dynamic", "mode", "options", "disable"})


def compile_sites(tree: ast.Module, bindings: dict[str, str], text: str | None = None) -> list[list]:
    """[kind, scope, line, ref] for every place the file applies torch.compile (see the module doc).
    `text`, the tree's source, spares the walk of a file that never spells `compile` nor `optimize`
    (every form, and every import binding one, does; ASCII only: other identifiers are normalised)."""
    if "torch" not in {q.split(".")[0] for q in bindings.values()}:
        return []
    if text is not None and text.isascii() and "compile" not in text and "optimize" not in text:
        return []
    walk = _Walk(bindings)
    walk.visit(tree)
    return sorted(walk.sites)


class _Walk(ast.NodeVisitor):
    def __init__(self, bindings: dict[str, str]) -> None:
        self.bindings = bindings
        self.stack: list[tuple[str, str]] = []  # (name, "c" class / "f" function)
        self.sites: list[list] = []
        # assignments seen so far, per scope: name -> [(line, value)]; self.attr per class
        self.assigned: dict[str, dict[str, list[tuple[int, ast.expr]]]] = {}
        self.attrs: dict[str, dict[str, list[tuple[int, ast.expr, str]]]] = {}
        self.top: set[str] = set()  # top-level defs and classes
        self._pending: list[tuple[str, str, str, int, ast.expr, str]] = []

    # ------------------------------------------------------------------ scopes

    def scope(self) -> str:
        return ".".join(n for n, _ in self.stack)

    def cls(self) -> str | None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][1] == "c":
                return ".".join(n for n, _ in self.stack[: i + 1])
        return None

    def visit(self, node):  # record top-level names first, resolve compile targets at the end
        if isinstance(node, ast.Module):
            self.top = {s.name for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
            self.generic_visit(node)
            for kind, scope, cls, line, target, where in self._pending:
                self.sites.append([kind, where, line, self.ref(target, scope, cls, line, 0)])
            return None
        method = _METHODS.get(type(node))
        return method(self, node) if method is not None else self.generic_visit(node)

    def generic_visit(self, node):
        """NodeVisitor's, in the same order, without its per-node name lookups and the leaves no
        visit_ method reads (contexts, operators): every file that may compile is walked whole."""
        plan = _FIELDS.get(type(node))
        if plan is None:
            plan = _FIELDS[type(node)] = tuple(f for f in node._fields if f not in ("ctx", "op", "ops"))
        for field in plan:
            v = getattr(node, field, None)
            if type(v) is list:
                for x in v:
                    if isinstance(x, ast.AST):
                        self.visit(x)
            elif isinstance(v, ast.AST):
                self.visit(v)

    def _def(self, node, kind: str) -> None:
        self.stack.append((node.name, kind))
        for d in node.decorator_list:
            if self.qualified(d.func if isinstance(d, ast.Call) else d) in COMPILE_CALLS:
                self.sites.append(["def", self.scope(), d.lineno, "l:" + self.scope()])
        for stmt in node.body:
            self.visit(stmt)
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._def(node, "f")

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._def(node, "f")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.stack.append((node.name, "c"))
        for stmt in node.body:
            self.visit(stmt)
        self.stack.pop()

    # ------------------------------------------------------------------ facts

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._assign(t, node.value, node.lineno)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assign(node.target, node.value, node.lineno)
        self.generic_visit(node)

    def _assign(self, target: ast.expr, value: ast.expr, line: int) -> None:
        if isinstance(target, ast.Name):
            self.assigned.setdefault(self.scope(), {}).setdefault(target.id, []).append((line, value))
        elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
              and target.value.id == "self" and self.cls()):
            self.attrs.setdefault(self.cls(), {}).setdefault(target.attr, []).append((line, value, self.scope()))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        q = self.qualified(func)
        if q in COMPILE_CALLS and node.args:
            self._pending.append(("call", self.scope(), self.cls() or "", node.lineno, node.args[0], self.scope()))
        elif isinstance(func, ast.Call) and self.qualified(func.func) == _OPTIMIZE and node.args:
            self._pending.append(("call", self.scope(), self.cls() or "", node.lineno, node.args[0], self.scope()))
        elif isinstance(func, ast.Attribute) and func.attr == "compile" and q is None and _module_compile(node):
            self._pending.append(("method", self.scope(), self.cls() or "", node.lineno, func.value, self.scope()))
        self.generic_visit(node)

    # ------------------------------------------------------------------ resolution

    def qualified(self, expr: ast.expr) -> str | None:
        """The imported name an expression spells (`torch.compile`), or None."""
        parts = _chain(expr)
        if not parts or parts[0] not in self.bindings:
            return None
        return ".".join([self.bindings[parts[0]], *parts[1:]])

    def ref(self, expr: ast.expr, scope: str, cls: str, line: int, depth: int) -> str:
        """What a compiled expression names, as a codefacts reference ("" when unknown)."""
        if depth > _MAX_DEPTH:
            return ""
        if isinstance(expr, ast.Call):
            if self.qualified(expr.func) in COMPILE_CALLS:
                return self.ref(expr.args[0], scope, cls, line, depth + 1) if expr.args else ""
            made = self.name_ref(expr.func, scope, cls, line, depth)
            return made + "()" if made and not made.endswith("()") else made
        if isinstance(expr, ast.Attribute) and expr.attr == "forward":
            return self.ref(expr.value, scope, cls, line, depth + 1)
        return self.name_ref(expr, scope, cls, line, depth)

    def name_ref(self, expr: ast.expr, scope: str, cls: str, line: int, depth: int) -> str:
        parts = _chain(expr)
        if not parts:
            return ""
        if parts[0] == "self" and len(parts) == 2 and cls:
            seen = [a for a in self.attrs.get(cls, {}).get(parts[1], ()) if not _is_compile_of(a[1], parts)]
            if seen:  # `self.model = Net(...)` in any method of the class (usually __init__)
                _line, value, where = max(seen, key=lambda a: a[0])
                return self.ref(value, where, cls, _line, depth + 1)
            return ""
        if len(parts) == 1:
            name = parts[0]
            s = scope
            while True:  # the latest assignment before the compile, innermost scope first
                before = [(ln, v) for ln, v in self.assigned.get(s, {}).get(name, ())
                          if (ln < line or s != scope) and not _is_compile_of(v, parts)]
                if before:
                    ln, value = max(before, key=lambda a: a[0])
                    return self.ref(value, s, cls, ln, depth + 1)
                if not s:
                    break
                s = s.rpartition(".")[0]
        if parts[0] in self.bindings:
            return "q:" + ".".join([self.bindings[parts[0]], *parts[1:]])
        if parts[0] in self.top:
            return "l:" + ".".join(parts)
        return ""


# _Walk's own visit_ methods by node type (NodeVisitor's visit_Constant only forwards to generic_visit)
_METHODS = {getattr(ast, name[len("visit_"):]): fn for name, fn in vars(_Walk).items() if name.startswith("visit_")}
_FIELDS: dict[type, tuple[str, ...]] = {}  # per node type: the fields generic_visit enters


def _module_compile(node: ast.Call) -> bool:
    """`x.compile(backend=..., fullgraph=True)`: nn.Module.compile's arguments, not Keras' (optimizer=, loss=)."""
    return not node.args and all(k.arg in MODULE_COMPILE_KEYWORDS for k in node.keywords)


def _is_compile_of(value: ast.expr, parts: list[str]) -> bool:
    """`model = torch.compile(model)` / `self.m = self.m.compile()`: the name's own compiled value."""
    return isinstance(value, ast.Call) and any(_chain(a) == parts for a in value.args[:1]) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and _chain(value.func.value) == parts)
