"""A library's own imports are its code, not a dependency on it: the scanned project's packages,
namespace packages (PEP 420) included, never match the library rules named after them."""

from __future__ import annotations

import json

from cli import run_cli

MEGATRON_IMPORT = "from megatron.core import tensor_parallel\nimport megatron.core.parallel_state as ps\n"


def _rules(tree) -> list[tuple[str, str]]:
    r = run_cli("scan", str(tree), "--isolated", "--format", "json", "--select", "NR1931")
    assert r.code in (0, 1), r.err
    return sorted((f["path"], f["rule"]) for f in json.loads(r.out)["findings"])


def test_a_namespace_packages_own_imports_are_not_the_library(tmp_path):
    # megatron-core's layout: megatron/core/__init__.py and no megatron/__init__.py
    core = tmp_path / "megatron" / "core"
    core.mkdir(parents=True)
    (core / "__init__.py").write_text(MEGATRON_IMPORT, encoding="utf-8")
    (core / "parallel_state.py").write_text("import torch\n", encoding="utf-8")
    assert _rules(tmp_path) == []


def test_a_project_that_uses_the_library_is_still_flagged(tmp_path):
    pkg = tmp_path / "src" / "mytrainer"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(MEGATRON_IMPORT, encoding="utf-8")
    assert _rules(tmp_path) == [("src/mytrainer/__init__.py", "NR1931")] * 2
