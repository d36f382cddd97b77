"""Byte-identical copies of a file are one port (analyzer/copies.py): one copy carries the findings,
the others are listed off the path with the file they repeat."""

from __future__ import annotations

from pathlib import Path

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan

KERNEL = """\
    #include <cuda_runtime.h>
    __global__ void scale(float* x, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= a;
    }
    """


def setup(*sources: str) -> str:
    exts = ", ".join(f"CUDAExtension('ext{i}', [{src!r}])" for i, src in enumerate(sources))
    return ("from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension, BuildExtension\n"
            f"setup(name='x', ext_modules=[{exts}], cmdclass={{'build_ext': BuildExtension}})\n")


def scan(root: Path, **kw):
    return run_scan(Settings(root=root, cache=False, **kw)).report


def test_a_copied_source_tree_is_ported_once(tmp_path):
    # Two builds of one source, from two copies of the tree (an sdist that ships csrc/ twice).
    one = scan(tree(tmp_path / "one", {"csrc/scale.cu": KERNEL, "setup.py": setup("csrc/scale.cu")}))
    two = scan(tree(tmp_path / "two", {"csrc/scale.cu": KERNEL, "pkg/ops/csrc/scale.cu": KERNEL,
                                       "setup.py": setup("csrc/scale.cu", "pkg/ops/csrc/scale.cu")}))
    kept = [f for f in two.findings if f.path.endswith("scale.cu")]
    copies = [f for f in two.off_path if f.details.get("copy_of")]
    assert kept and {f.path for f in kept} == {"csrc/scale.cu"}
    assert copies and {f.path for f in copies} == {"pkg/ops/csrc/scale.cu"}
    assert all(f.details["copy_of"] == "csrc/scale.cu" and "identical copy" in f.details["off_path_reason"]
               for f in copies)
    assert two.estimate.person_days.likely == one.estimate.person_days.likely  # the copy adds no work


def test_a_copy_that_differs_by_one_byte_is_its_own_file(tmp_path):
    report = scan(tree(tmp_path, {"a/scale.cu": KERNEL, "b/scale.cu": KERNEL.replace("*= a", "*= 2 * a"),
                                  "setup.py": setup("a/scale.cu", "b/scale.cu")}))
    assert {f.path for f in report.findings if f.path.endswith(".cu")} == {"a/scale.cu", "b/scale.cu"}
    assert not any(f.details.get("copy_of") for f in report.off_path)


def test_python_modules_and_copies_in_test_folders_keep_their_own_answer(tmp_path):
    # Two identical Python modules are two imports; a copy under tests/ is off the path as a test.
    module = "import torch\ndef step(x):\n    return x.cuda()\n"
    report = scan(tree(tmp_path, {"apkg/__init__.py": "", "apkg/util.py": module, "zpkg/__init__.py": "",
                                  "zpkg/util.py": module, "csrc/scale.cu": KERNEL, "tests/scale.cu": KERNEL,
                                  "setup.py": setup("csrc/scale.cu")}))
    assert {f.path for f in report.findings if f.path.endswith("util.py")} == {"apkg/util.py", "zpkg/util.py"}
    tests = [f for f in report.off_path if f.path == "tests/scale.cu"]
    assert tests and not any(f.details.get("copy_of") for f in tests)


def test_copies_keep_the_report_deterministic(tmp_path):
    root = tree(tmp_path, {"x/scale.cu": KERNEL, "y/scale.cu": KERNEL, "z/scale.cu": KERNEL,
                           "setup.py": setup("z/scale.cu", "y/scale.cu", "x/scale.cu")})
    a, b = scan(root, jobs=1), scan(root, jobs=2)
    assert [(f.path, f.line, f.context, f.details.get("copy_of")) for f in a.findings + a.off_path] == \
        [(f.path, f.line, f.context, f.details.get("copy_of")) for f in b.findings + b.off_path]
    assert {f.details.get("copy_of") for f in a.off_path if f.path.endswith(".cu")} == {"x/scale.cu"}
