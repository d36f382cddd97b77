"""Static findings meet traced ones: one report with a status on every static Python finding.

The matching rule (docs/trace.md):

- A static finding is **confirmed** when a traced finding lands on the same file and line with the
  same rule, or, failing that, with the same category (a static NR1501 on `.nonzero()` and a
  traced `aten::nonzero` are one problem; so are a static FP64 attribute and a traced op on
  float64 tensors). The traced twin is folded into it: its ops go into the static finding's
  `trace` details and it is not reported twice.
- Otherwise it is **not-traced** when its code never ran while the model was built and traced:
  its innermost enclosing function never ran, or, for module-level code, its file was never
  imported. Else it is **traced**: the code ran and the trace saw nothing of that rule there
  (rules about devices, imports or configuration cannot show in a graph; an FP64 `sort` on a
  Python list is a look-alike).
- Traced findings without a static twin are added as they are (origin "trace").
- Findings in files that are not Python (CUDA sources, requirements) and notebooks keep no status:
  the trace says nothing about them.

"Ran" is known from the frames the trace saw: every user function on the stack when an op was
dispatched. A function that ran without calling a single tensor op is counted as not run.
"""

from __future__ import annotations

import ast
import os

from ..model import Finding
from .data import TraceResult


def merge(static: list[Finding], traced: list[Finding], result: TraceResult, root: str) -> list[Finding]:
    """Sets status on the static findings (in place) and returns the traced findings left over."""
    at: dict[tuple[str, int], list[Finding]] = {}
    for t in traced:
        at.setdefault((t.path, t.line), []).append(t)
    folded: set[int] = set()
    spans = _FunctionSpans(root)
    for s in static:
        if not s.path.endswith(".py") or s.cell is not None:
            continue
        here = at.get((s.path, s.line), [])
        twins = [t for t in here if t.rule == s.rule] or [t for t in here if t.category == s.category]
        if twins:
            s.status = "confirmed"
            s.details["trace"] = sorted({t.symbol for t in twins})
            folded.update(id(t) for t in twins)
        elif ran(s, result, spans):
            s.status = "traced"
        else:
            s.status = "not-traced"
    return [t for t in traced if id(t) not in folded]


def ran(f: Finding, result: TraceResult, spans: "_FunctionSpans") -> bool:
    starts = spans.enclosing(f.path, f.line)
    if starts is None:  # module or class level: ran when the file was imported
        return f.path in result.loaded
    executed = result.executed.get(f.path, set())
    return any(line in executed for line in starts)


class _FunctionSpans:
    """For a file and line, the first lines of the innermost function around it (`def` and first
    decorator, either of which a code object's co_firstlineno can be), or None at module level."""

    def __init__(self, root: str):
        self.root = root
        self._funcs: dict[str, list[tuple[int, int, tuple[int, ...]]]] = {}

    def _load(self, path: str) -> list[tuple[int, int, tuple[int, ...]]]:
        if path not in self._funcs:
            funcs = []
            try:
                with open(os.path.join(self.root, path), encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                tree = None
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    starts = {node.lineno} | {d.lineno for d in node.decorator_list}
                    funcs.append((min(starts), node.end_lineno or node.lineno, tuple(sorted(starts))))
            self._funcs[path] = funcs
        return self._funcs[path]

    def enclosing(self, path: str, line: int) -> tuple[int, ...] | None:
        inner = None
        for start, end, starts in self._load(path):
            if start <= line <= end and (inner is None or start >= inner[0]):
                inner = (start, starts)
        return inner[1] if inner else None


def status_counts(findings: list[Finding]) -> dict[str, int]:
    """How the merged report's findings stand: per status of static findings, and trace-only."""
    counts = {"confirmed": 0, "traced": 0, "not-traced": 0, "trace-only": 0}
    for f in findings:
        key = "trace-only" if f.origin == "trace" else f.status
        if key in counts:
            counts[key] += 1
    return counts
