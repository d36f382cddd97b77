"""Run a rule's own valid/invalid examples through the real per-file scanner (Fixit-style)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from neuron_ready.catalog import Catalog, Rule
from neuron_ready.discover import file_kind
from neuron_ready.sources import FileJob, ScanContext, scan_file

MARK = re.compile(r"(#|//)\s*flagged\b")


def flagged_lines(example: str) -> set[int]:
    return {i for i, line in enumerate(example.splitlines(), start=1) if MARK.search(line)}


def run_example(rule: Rule, example: str, target: str | None = None) -> tuple[set[int], list]:
    """Lines where `rule` fires on `example`, and the diagnostics of the scan."""
    target = target or rule.targets[0]
    ctx = ScanContext(Catalog({rule.id: rule}), target)
    with tempfile.TemporaryDirectory() as tmp:
        name = rule.example_file
        path = Path(tmp) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(example, encoding="utf-8")
        kind = file_kind(name)
        assert kind is not None, f"{rule.id}: example_file {name!r} is not a scanned file type"
        result = scan_file(FileJob(str(path), name, kind), ctx)
    return {f.line for f in result.findings if f.rule == rule.id}, result.diagnostics
