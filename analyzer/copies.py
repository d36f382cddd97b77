"""Identical copies of a native source file are one port.

Source distributions ship some native trees twice (DeepSpeed's sdist holds `csrc/` and
`deepspeed/ops/csrc/`, 172 identical files). Porting a kernel or header once ports every copy, so
the findings of one copy carry the work and the others are listed off the path with the copy they
repeat: nothing is lost, nothing is counted twice. Files are compared by the digest of their text,
which sources/__init__.scan_file records for C/C++/CUDA and CMake files with findings (Python
modules are left alone: two identical modules are two imports a trainer may make, and test trees
repeat small files on purpose). Findings a copy already has off the path (a test folder, vendored
code) keep their own reason. The copy kept is the one whose findings reach furthest into the
training job (the most must-port findings), then the first path.
"""

from __future__ import annotations

from collections import defaultdict

from .model import Finding

_RANK = {"step": 0, "host": 1, "opt-in": 2, "evaluation": 3, "neuron-native": 4, "off-path": 5}
_KEEP = frozenset({"off-path", "neuron-native"})


def mark_copies(findings: list[Finding], digests: dict[str, str]) -> int:
    """Move the findings of every copy but one off the path (context "off-path", reason naming the
    kept file); returns how many findings moved. `digests`: path -> digest of its text."""
    by_digest: dict[str, list[str]] = defaultdict(list)
    for path, digest in digests.items():
        by_digest[digest].append(path)
    groups = [sorted(paths) for paths in by_digest.values() if len(paths) > 1]
    if not groups:
        return 0
    by_path: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_path[f.path].append(f)
    moved = 0
    for paths in groups:
        def weight(path: str) -> tuple:
            ranks = sorted(_RANK.get(f.context or "off-path", 5) for f in by_path[path])
            return (ranks, path)
        kept = min(paths, key=weight)
        for path in paths:
            if path == kept:
                continue
            for f in by_path[path]:
                if f.context in _KEEP:
                    continue  # already not counted, with a reason of its own (a test, vendored code)
                f.context, f.gate = "off-path", None
                f.details.pop("feature", None)
                f.details["copy_of"] = kept
                f.details["context_reason"] = f.details["off_path_reason"] = (
                    f"an identical copy of {kept}: porting that file ports this one")
                moved += 1
    return moved
