"""Modules a file imports only behind an import guard (context.py makes their imports optional).

A package often keeps its GPU-library code in a module of its own and imports that module only when
the library is there: `if is_bnb_available(): from .bnb import Linear8bitLt` (in a function or a
package `__getattr__`), or under `try/except ImportError`. Such a module is never imported on a
Trainium install without the library, so its own top-level `import bitsandbytes` is as optional as
an import under the guard. This reads, per file, the modules every import of which sits behind a
guard with a way on (a capability test whose branches do not give up; a handler that goes on).
"""

from __future__ import annotations

import ast

from .codefacts import _gives_up  # a block that raises, asserts or exits: an error message, not a way on
from .codefacts import capability_test
from .imports import absolute

_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _import_guard(node: ast.Try) -> bool:
    for h in node.handlers:
        caught = h.type.elts if type(h.type) is ast.Tuple else [h.type] if h.type is not None else []
        names = {c.id if type(c) is ast.Name else c.attr if type(c) is ast.Attribute else "" for c in caught}
        if (h.type is None or names & _IMPORT_ERRORS) and not _gives_up(h.body):
            return True
    return False


def guarded_only_imports(tree: ast.Module, module_name: str, is_package: bool) -> list[str]:
    """The absolute module names this file imports, each only behind an import guard."""
    guarded: set[str] = set()
    plain: set[str] = set()
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, under = stack.pop()
        t = type(node)
        if t is ast.Import or t is ast.ImportFrom:
            if t is ast.Import:
                mods = [a.name for a in node.names]
            else:  # the module and its names, which may be modules (as imports.python_facts reads them)
                base = absolute(node.module or "", node.level, module_name, is_package)
                mods = ([base] if node.module else []) + [f"{base}.{a.name}" for a in node.names if base and a.name != "*"]
            (guarded if under else plain).update(m for m in mods if m)
            continue
        if t is ast.If and capability_test(node.test) and not (_gives_up(node.body) or _gives_up(node.orelse)):
            stack.extend((s, True) for s in node.body + node.orelse)
            continue
        if t is ast.Try and _import_guard(node):
            stack.extend((s, True) for s in node.body)
            stack.extend((s, under) for s in node.orelse + node.finalbody)
            stack.extend((s, under) for h in node.handlers for s in h.body)
            continue
        # imports are statements: descend through statement blocks only, never into expressions
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if type(block) is list:
                stack.extend((s, under) for s in block)
        for h in getattr(node, "handlers", ()):
            stack.extend((s, under) for s in h.body)
        for case in getattr(node, "cases", ()):
            stack.extend((s, under) for s in case.body)
    return sorted(guarded - plain)
