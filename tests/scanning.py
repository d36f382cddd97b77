"""Helpers for tests: scan source text with a catalog, through the real per-file scanner."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

from neuron_ready.catalog import Catalog, load_catalog, load_text
from neuron_ready.discover import file_kind
from neuron_ready.sources import FileJob, FileResult, ScanContext, scan_file

RULE_TEMPLATE = '''
[[rule]]
id = "{id}"
title = "{id} hit"
message = "{id} `{{name}}`"
category = "{category}"
targets = ["native", "xla"]
confidence = "high"
evidence = "doc"
effort = {{ low = 1, likely = 2, high = 3, per = "task" }}
why = "w"
remedy = "r"
source = "https://example.com"
invalid = ["x  # flagged"]
{match}
'''


def catalog_of(*rules: tuple[str, str, str]) -> Catalog:
    """Rules given as (id, category, match TOML), e.g. ("NR1099", "device", '[[rule.match]]...')."""
    text = "\n".join(RULE_TEMPLATE.format(id=i, category=c, match=m) for i, c, m in rules)
    return Catalog({r.id: r for r in load_text(text, "test.toml")})


def scan_text(code: str, catalog: Catalog | None = None, name: str = "example.py", target: str = "native",
              screen: bool = True, dedent: bool = True) -> FileResult:
    catalog = catalog if catalog is not None else load_catalog()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(code, bytes):
            path.write_bytes(code)
        else:
            path.write_text(textwrap.dedent(code) if dedent else code, encoding="utf-8")
        kind = file_kind(name)
        return scan_file(FileJob(str(path), name, kind), ScanContext(catalog, target, screen=screen))


def hits(result: FileResult) -> list[tuple[int, str, str]]:
    return [(f.line, f.rule, f.symbol) for f in result.findings]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """A small repository on disk: each relative path gets its (dedented) text."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return root
