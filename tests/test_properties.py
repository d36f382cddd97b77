"""Properties: the scanner never raises on arbitrary text or arbitrary valid Python, and the report
does not depend on file order (or on how the tree was created)."""

from __future__ import annotations

import json
import random
import shutil

import hypothesmith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli import run_cli
from neuron_ready.catalog import load_catalog
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from neuron_ready.render import render
from scanning import scan_text

CATALOG = load_catalog()


def _no_internal_errors(result):
    assert not [d for d in result.diagnostics if d.kind == "internal-error"], result.diagnostics


@given(st.text(max_size=400))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_arbitrary_text_never_breaks_a_python_scan(text):
    _no_internal_errors(scan_text("import torch\n" + text, CATALOG))


@given(st.text(max_size=400), st.sampled_from(["k.cu", "CMakeLists.txt", "requirements.txt", "pyproject.toml",
                                               "environment.yml", "setup.cfg", "Pipfile", "n.ipynb", "run.sh",
                                               "Makefile", "README.md", "README.rst", "Dockerfile", "c.yaml",
                                               "c.json", "c.toml"]))
def test_arbitrary_text_never_breaks_other_scanners(text, name):
    _no_internal_errors(scan_text(text, CATALOG, name=name))


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_break_a_scan(data):
    _no_internal_errors(scan_text(b"import torch\n" + data, CATALOG))


@given(hypothesmith.from_grammar())
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_arbitrary_valid_python_never_breaks_the_scanner(code):
    result = scan_text("import torch\nimport triton\n" + code, CATALOG)
    _no_internal_errors(result)


@given(hypothesmith.from_node())
@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_arbitrary_libcst_generated_python_never_breaks_the_scanner(code):
    _no_internal_errors(scan_text("import torch\n" + code, CATALOG))


def _copy_in_order(src, dst, order):
    files = sorted(p for p in src.rglob("*") if p.is_file())
    for i in order:
        f = files[i % len(files)]
        target = dst / f.relative_to(src)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
    for f in files:  # whatever the order, every file ends up there
        target = dst / f.relative_to(src)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)


@given(st.randoms(use_true_random=False))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_report_does_not_depend_on_file_creation_order(tmp_path_factory, fixtures, rnd: random.Random):
    base = tmp_path_factory.mktemp("order")
    outputs = set()
    for k in range(2):
        dst = base / f"copy{k}" / "repo"
        dst.mkdir(parents=True)
        order = list(range(40))
        rnd.shuffle(order)
        _copy_in_order(fixtures / "cuda_extension", dst, order)
        report = run_scan(Settings(root=dst)).report
        report.root = "repo"
        outputs.add(render(report, "json"))
    assert len(outputs) == 1


def test_explicit_file_order_does_not_change_the_report(fixtures):
    files = sorted(str(p.relative_to(fixtures)) for p in (fixtures / "mainstream").rglob("*") if p.is_file())
    a = run_cli("scan", "--format", "json", *files, cwd=fixtures)
    b = run_cli("scan", "--format", "json", *reversed(files), cwd=fixtures)
    assert a.code == b.code == 0, a.err + b.err
    assert a.out == b.out
    assert json.loads(a.out)["summary"]["findings"] > 0
