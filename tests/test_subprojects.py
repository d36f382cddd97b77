"""A separate distribution in a subfolder is not part of the root's install.

A folder below the root with a build file of its own (`fastkern/pyproject.toml`, `fastkern/setup.py`)
and no `__init__.py` is a package built and installed on its own: the root's `pip install` leaves
it out, so its kernels, bindings and Python code run only when the user installs it as well. Its
findings are the opt-in feature `subproject:NAME`, gated in words. Code of the root that imports it
in module code makes it a dependency again, and a `setup.py` inside a Python package is a module,
not a build. Real scans of small trees.
"""

from __future__ import annotations

from pathlib import Path

from scanning import write_tree as tree

from neuron_ready.config import Settings
from neuron_ready.engine import run_scan

KERNEL = """\
    #include <cuda_runtime.h>
    __global__ void scale_kernel(float* x, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= a;
    }
    void scale(float* x, float a, int n) { scale_kernel<<<(n + 255) / 256, 256>>>(x, a, n); }
    """


def _repo(tmp_path: Path, extra: dict[str, str] | None = None) -> Path:
    files = {
        "pyproject.toml": '[project]\nname = "kern"\nversion = "1.0"\ndependencies = ["torch"]\n',
        "src/kern/__init__.py": "from .ops import run\n",
        "src/kern/ops.py": """\
            import torch

            def run(x):
                return x.cuda()
            """,
        "fastkern/pyproject.toml": '[build-system]\nrequires = ["setuptools", "cmake"]\n[project]\nname = "fastkern"\nversion = "1.0"\n',
        "fastkern/setup.py": """\
            from setuptools import setup
            from torch.utils.cpp_extension import BuildExtension, CUDAExtension

            setup(name="fastkern", ext_modules=[CUDAExtension("fastkern._C", ["csrc/scale.cu"])],
                  cmdclass={"build_ext": BuildExtension})
            """,
        "fastkern/csrc/scale.cu": KERNEL,
        "fastkern/fastkern/__init__.py": """\
            import torch

            def fast_scale(x):
                return x.cuda() * 2
            """,
        "src/kern/trainer/__init__.py": "",
        "src/kern/trainer/setup.py": """\
            import torch

            def configure(model):
                return model.cuda()  # a module named setup.py, inside a package
            """,
    }
    files.update(extra or {})
    return tree(tmp_path, files)


def scan(root: Path):
    return run_scan(Settings(root=root, cache=False)).report


def by_path(report) -> dict[str, set[tuple[str, str | None]]]:
    out: dict[str, set] = {}
    for f in report.findings + report.off_path:
        out.setdefault(f.path, set()).add((f.context, f.gate))
    return out


def test_a_separate_distribution_is_opt_in(tmp_path):
    got = by_path(scan(_repo(tmp_path)))
    gate = ("only when the separate package in `fastkern/` is installed (it builds on its own from "
            "fastkern/pyproject.toml; the root's install leaves it out)")
    assert got["fastkern/csrc/scale.cu"] == {("opt-in", gate)}
    assert got["fastkern/fastkern/__init__.py"] == {("opt-in", gate)}
    assert {c for c, _ in got["src/kern/ops.py"]} == {"step"}
    assert {c for c, _ in got["src/kern/trainer/setup.py"]} == {"step"}  # a module, not a build


def test_imported_by_the_root_it_is_a_dependency(tmp_path):
    root = _repo(tmp_path, {"src/kern/__init__.py": "import fastkern\nfrom .ops import run\n"})
    got = by_path(scan(root))
    assert {c for c, _ in got["fastkern/csrc/scale.cu"]} == {"step"}
    assert {c for c, _ in got["fastkern/fastkern/__init__.py"]} == {"step"}


def test_a_hostile_folder_name_stays_inert_in_every_renderer(tmp_path):
    """The gate of a separate distribution quotes its folder's name, which a stranger's pull request
    chooses: every renderer that shows the gate must escape it like any other name."""
    import json
    import re

    from cli import run_cli
    from commonmark import to_html

    folder = "k`|<img src=x onerror=alert(1)>\n::error::pwned\u202e"
    root = _repo(tmp_path)
    (root / "fastkern").rename(root / folder)
    report = scan(root)
    gates = {f.gate for f in report.findings + report.off_path if f.path.startswith(folder)}
    assert len(gates) == 1 and folder in gates.pop()  # the data keeps the real name
    control = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
    for fmt in ("text", "markdown", "html", "sarif"):
        r = run_cli("scan", str(root), "--format", fmt, "--no-cache", "--include-opt-in", "all")
        assert r.code == 0, r.err
        assert "pwned" in r.out, fmt  # the gate is shown ...
        assert not [line for line in r.out.splitlines() if line.lstrip().startswith(("::", "##["))], fmt
        if fmt != "sarif":  # SARIF, like JSON, keeps the real name as data in its properties
            assert not control.search(r.out), fmt  # ... with its newline and bidi override escaped
        if fmt == "html":
            assert "<img" not in r.out
        if fmt == "markdown":
            assert "<img" not in to_html(r.out)
        if fmt == "sarif":
            texts = [x["message"]["text"] for x in json.loads(r.out)["runs"][0]["results"]]
            assert texts and not any(control.search(t) for t in texts)
