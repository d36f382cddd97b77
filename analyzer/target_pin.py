"""The target a repository's own `torch-neuronx` pin names, for scans where neither `--target` nor the
configuration chose one.

Native TorchNeuron and the legacy XLA stack share the pip name `torch-neuronx`: 2.10 and later
(2.13.x, 2.14.x in Neuron 2.33) are the native backend, 2.9.x and earlier the XLA one (RTD
torch/troubleshooting, Neuron 2.33.0 release notes, 2026-10-19). So a pin in the dependency files at
the top of the scanned tree tells which target the project already uses.
"""

from __future__ import annotations

import re
from pathlib import Path

from .sources.deps import dependency_kind, parse_dependencies

PACKAGE = "torch-neuronx"
FIRST_NATIVE = (2, 10)  # the first PyTorch (and torch-neuronx) version of the native backend
# an exact pin (==, ===, ~=, conda's single =) or an upper bound below the native line (<2.10, <=2.9)
_PIN = re.compile(r"(?<![<>!])(===?|~=|=)\s*v?(\d+)\.(\d+)")
_BELOW = re.compile(r"<=\s*v?(\d+)\.(\d+)|<\s*v?(\d+)\.(\d+)")


def pinned_target(root: Path) -> tuple[str, str] | None:
    """("native" | "xla", "torch-neuronx==2.9.0 in requirements.txt:3") from the dependency files at the
    top of `root`, or None when there is no pin or the pins disagree."""
    if not root.is_dir():
        return None
    found: dict[str, str] = {}
    for path in sorted(p for p in root.iterdir() if p.is_file()):
        kind = dependency_kind(path.name)
        if kind is None or kind == "setup.py":  # setup.py needs its calls read; its pins are rare
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        try:
            reqs = parse_dependencies(kind, text)
        except Exception:  # a broken file is the scan's diagnostic to report, not this guess's
            continue
        for req in reqs:
            if req.name != PACKAGE:
                continue
            target = target_of(req.text)
            if target:
                found.setdefault(target, f"{' '.join(req.text.split())} in {path.name}:{req.line}")
    return next(iter(found.items())) if len(found) == 1 else None


def target_of(spec: str) -> str | None:
    """The target a `torch-neuronx` requirement names by its version, or None (unpinned, a lower bound)."""
    m = _PIN.search(spec)
    if m:
        return "native" if (int(m.group(2)), int(m.group(3))) >= FIRST_NATIVE else "xla"
    b = _BELOW.search(spec)
    if b:
        major, minor = (int(b.group(1)), int(b.group(2))) if b.group(1) else (int(b.group(3)), int(b.group(4)))
        inclusive = b.group(1) is not None
        return "xla" if ((major, minor) < FIRST_NATIVE or ((major, minor) == FIRST_NATIVE and not inclusive)) else None
    return None
