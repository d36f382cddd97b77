"""Which findings sit in code that `torch.compile` compiles: the report-time half of the
compiled-region analysis (sources/compilefacts.py records, per file, what torch.compile is applied to).

Neuron 2.33 on the native target: in eager mode an op with no Neuron lowering falls back to the CPU
(a device-to-host round trip every step); under `torch.compile(backend="neuron")` fallback is off and
the same op fails the compile. So each native unsupported-op finding says which of the two it is:
- compiled: its function is reached from a compiled root (a decorated function, the `forward` of a
  module class passed to `torch.compile`, a function passed by name), through the calls the context
  graph follows (TorchDynamo traces into them too);
- maybe compiled: the training step calls `torch.compile` on something the scan cannot place (a
  parameter, a factory's result), so any step code may be in the graph: costed as compiled, as before;
- eager: otherwise, a CPU fallback to measure (effort.CPU_FALLBACK).
"""

from __future__ import annotations

from .context import MAIN, STEP, UNREACHED, Context, line_gate, node_of, propagate, split_node
from .model import Finding

CPU_FALLBACK_CATEGORY = "unsupported-op"


def mark(findings: list[Finding], infos, ctx: Context, target: str) -> list[str]:
    """Annotate native unsupported-op findings (details `compiled` or `cpu_fallback`, and the
    message); returns the step's compile sites the scan could not place ("path:line")."""
    if target != "native" or not any(f.category == CPU_FALLBACK_CATEGORY for f in findings):
        return []
    graph = ctx.graph
    if graph is None:
        return []
    roots: dict[str, str] = {}  # compiled root node -> the compile site ("path:line")
    unplaced: list[str] = []
    for info in sorted(infos, key=lambda i: i.rel):
        code = (info.facts.get("code") or {}) if info.facts else {}
        for kind, scope, line, ref in code.get("compiles", ()):
            site = f"{info.rel}:{line}"
            if kind == "def":
                here = node_of(code, info.rel, scope)
                if here is not None and (not ctx.labels or ctx.labels.get(here, UNREACHED) < UNREACHED):
                    roots.setdefault(here, site)
                continue
            if not ctx.function_level:
                continue  # a library's own compile calls say nothing about how its users train
            where = node_of(code, info.rel, scope) or f"{info.rel}::{MAIN}"
            if ctx.labels.get(where, UNREACHED) != STEP or line_gate(code, line, info.rel, graph.defaults) is not None:
                continue
            placed = _targets(graph, info.rel, ref)
            if placed is None:
                unplaced.append(site)
                continue
            for node in placed:
                roots.setdefault(node, site)
    reached, parents = {}, {}
    if roots:
        reached, _gates, parents = propagate(graph, sorted(roots))
    codes = {i.rel: (i.facts.get("code") or {}) for i in infos if i.facts}
    for f in findings:
        if f.category != CPU_FALLBACK_CATEGORY:
            continue
        code = codes.get(f.path) or {}
        node = node_of(code, f.path, f.scope) if code else None
        if node is not None and node in reached:
            root = node
            while root not in roots and root in parents:
                root = parents[root]
            root_rel, root_scope = split_node(root)
            what = root_scope or root_rel
            f.details["compiled"] = roots.get(root, "")
            f.message += (f"; `{what}` is compiled (`torch.compile`, {roots.get(root, '')}), where CPU fallback is off:"
                          " the compile fails")
        elif unplaced and (node is None or ctx.labels.get(node, UNREACHED) == STEP):
            f.details["compiled"] = unplaced[0]
            f.message += (f"; the step calls `torch.compile` ({unplaced[0]}) on code the scan cannot place: in that"
                          " graph the compile fails, in eager mode it falls back to the CPU")
        else:
            f.details["cpu_fallback"] = True
            f.message += "; in eager mode it falls back to the CPU: a device-to-host round trip every step"
    return unplaced


def _targets(graph, rel: str, ref: str) -> list[str] | None:
    """The nodes a compiled reference names (a class: its `forward` and `__call__`); [] for code
    outside the project (`torch.nn.Linear(...)`: nothing of ours is compiled); None when unknown."""
    if not ref:
        return None
    made = ref.endswith("()")
    ref = ref[:-2] if made else ref
    nodes = graph.resolve(rel, ref)
    if not nodes:
        if ref.startswith("q:") and not _project_module(graph, rel, ref[2:]):
            return []
        return None
    out = []
    for node in nodes:
        d = graph.def_of(node)
        if d is not None and d[2] == "c":
            out += [node] + [f"{node}.{m}" for m in ("forward", "__call__") if graph.def_of(f"{node}.{m}") is not None]
        elif made:
            return None  # a factory's result: what it builds is not known here
        else:
            out.append(node)
    return out


def _project_module(graph, rel: str, dotted: str) -> bool:
    parts = dotted.split(".")
    return any(graph.files_of(".".join(parts[:i]), rel) for i in range(len(parts), 0, -1))
