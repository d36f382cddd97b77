"""One fix is one finding: lines that repeat a fix another finding already carries.

A porting engineer edits a dependency once per file and guards a library's import once per file,
however often the file names it:
- **the same package twice in one dependency file** (`bitsandbytes` in `dependencies` and again in
  forty install flavours under `[project.optional-dependencies]`, or one extra's line per platform
  marker): the core line carries the edit (else the first line of the same context and feature),
  the others repeat it;
- **Triton imported twice in one file** (`import triton`, `import triton.language as tl`, `from
  triton.language.extra import libdevice`): one guard covers every Triton import of that block
  (module or function), so the first carries it;
- **the same module of a GPU library imported twice in one block** (`from flash_attn import a` and,
  later, `from flash_attn import b`). Different modules of one library stay apart: each brings
  its own functions, whose uses may each need a replacement.
A repeat is listed off the path with `repeats` ("path:line" of the finding it repeats), the way
copies.py lists the findings of an identical file with `copy_of`: nothing is lost, nothing is
counted twice. Only findings in one context (and one opt-in feature) repeat each other, except
that a core dependency line carries its package's lines in every extra.
"""

from __future__ import annotations

import re

from .model import Finding

_KEEP = frozenset({"off-path", "neuron-native"})  # already not counted, with a reason of their own
_IMPORTED = re.compile(r"^(?:from\s+(\.*[\w.]*)\s+import\b|import\s+([\w.]+))")


def _imported_module(snippet: str) -> str | None:
    m = _IMPORTED.match(snippet)
    return (m.group(1) or m.group(2)) if m else None


def _key(f: Finding) -> tuple | None:
    """What a finding's fix is one of, or None when it repeats nothing."""
    if f.context is None or f.context in _KEEP:
        return None
    if f.category == "dependency" and f.symbol:
        return ("dependency", f.path, f.rule, f.symbol)
    module = _imported_module(f.snippet) if f.category in ("triton", "gpu-library") else None
    if module is None:
        return None
    guard = (f.fallback, bool(f.details.get("guarded_import")))
    if f.category == "triton":
        return ("import", f.path, f.cell, f.scope, "triton", guard)
    return ("import", f.path, f.cell, f.scope, f.rule, module, guard)


def _where(f: Finding) -> str:
    return f"{f.path}:{f.line}" if f.cell is None else f"{f.path}:cell {f.cell}:{f.line}"


def mark_repeats(findings: list[Finding]) -> int:
    """Move every finding that repeats another's fix off the path (context "off-path", `repeats`
    naming the finding that carries it); returns how many moved. Walked in path and line order, so
    the same tree marks the same findings whatever the file order."""
    groups: dict[tuple, list[Finding]] = {}
    for f in sorted(findings, key=Finding.sort_key):
        key = _key(f)
        if key is not None:
            groups.setdefault(key, []).append(f)
    moved = 0
    for key, fs in groups.items():
        if len(fs) < 2:
            continue
        if key[0] == "dependency":
            core = next((f for f in fs if f.context == "step" and not f.details.get("extra")), None)
            carriers = {None: core} if core is not None else {}
        else:
            carriers = {}
        for f in fs:
            scope = None if None in carriers else (f.context, f.details.get("feature"))
            carrier = carriers.setdefault(scope, f)
            if carrier is f:
                continue
            f.context, f.gate = "off-path", None
            f.details.pop("feature", None)
            f.details["repeats"] = _where(carrier)
            what = ("package listed at", "edit") if key[0] == "dependency" else ("import at", "guard")
            f.details["context_reason"] = f.details["off_path_reason"] = (
                f"repeats the {what[0]} {_where(carrier)}: one {what[1]} covers both")
            moved += 1
    return moved
