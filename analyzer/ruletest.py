"""A rule's own examples run through the real per-file scanner, as `fixit test` does: each `invalid`
example must be flagged (on the lines marked `# flagged` or `// flagged`, when any are), each `valid`
example must not be. A native finding that holds only in a build the default one skips (`only_on`: a
CMake branch behind an OFF option or another platform, CUDA only under `#ifdef`) is listed but never
costed: it does not count. `neuron-ready rules --test FILE.toml` and the test suite both use this runner.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from .catalog import Catalog, CatalogError, Rule, load_catalog, load_text
from .discover import file_kind
from .sources import FileJob, ScanContext, scan_file

MARK = re.compile(r"(#|//)\s*flagged\b")
KINDS = ("invalid", "valid")


@dataclass(frozen=True)
class Failure:
    rule: str
    kind: str  # "invalid" (must be flagged) or "valid" (must not be)
    index: int  # 0-based, in the rule's list of that kind
    example: str
    problem: str


def flagged_lines(example: str) -> set[int]:
    return {i for i, line in enumerate(example.splitlines(), start=1) if MARK.search(line)}


def run_example(rule: Rule, example: str, target: str | None = None) -> tuple[set[int], list]:
    """Lines where `rule` fires on `example`, and the diagnostics of the scan."""
    target = target or rule.targets[0]
    ctx = ScanContext(Catalog({rule.id: rule}), target)
    name = rule.example_file
    kind = file_kind(name)
    if kind is None:
        raise ValueError(f"{rule.id}: example_file {name!r} is not a scanned file type")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(example, encoding="utf-8")
        result = scan_file(FileJob(str(path), name, kind), ctx)
    # a native line in a branch the default build skips (`only_on`) is listed, never costed: not flagged
    native = all(m.kind == "native" for m in rule.match)
    return {f.line for f in result.findings
            if f.rule == rule.id and not (native and f.details.get("only_on"))}, result.diagnostics


def example_problem(rule: Rule, example: str, kind: str, target: str | None = None) -> str | None:
    """Why one example does not behave as its kind says, or None. Matching does not depend on the
    target (only remedy text does), so the rule's first target is enough."""
    target = target or rule.targets[0]
    try:
        got, diagnostics = run_example(rule, example, target)
    except ValueError as e:
        return str(e)
    if diagnostics:
        return "the scan reported " + "; ".join(f"{d.kind}: {d.message}" for d in diagnostics)
    if kind == "valid":
        return f"{rule.id} ({target}) fired on lines {sorted(got)} of a valid example" if got else None
    want = flagged_lines(example)
    if want and got != want:
        return f"{rule.id} ({target}) fired on lines {sorted(got)}, example marks {sorted(want)}"
    return None if got else f"{rule.id} ({target}) did not fire"


def check_rules(rules) -> tuple[int, list[Failure]]:
    """(examples run, failures) for every valid and invalid example of `rules`, in rule order."""
    ran = 0
    failures = []
    for rule in rules:
        for kind in KINDS:
            for i, example in enumerate(getattr(rule, kind)):
                ran += 1
                problem = example_problem(rule, example, kind)
                if problem:
                    failures.append(Failure(rule.id, kind, i, example, problem))
    return ran, failures


def load_file(path: Path) -> list[Rule]:
    """The rules of one catalog file, checked as `--catalog FILE` would check them (besides the
    built-in catalog, whose own files test as themselves). A bad file raises a CatalogError of one
    line that starts FILE:LINE:."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogError(f"{path}:1: cannot read catalog file: {getattr(e, 'strerror', None) or e}") from None
    try:
        rules = load_text(text, str(path))
        builtin = load_catalog()
        for r in rules:
            same = builtin.get(r.id)
            if same is not None and same != replace(r, origin=same.origin):
                raise CatalogError(f"{path}: {r.id}: field 'id': duplicate of the rule in {same.origin}", rule=r.id, field="id")
        if not rules:
            raise CatalogError(f"{path}: no rules to test (rules go in [[rule]] tables)")
    except CatalogError as e:
        message = str(e).removeprefix(f"{path}: ")
        raise CatalogError(f"{path}:{e.line_in(text)}: {message}") from None
    return rules
