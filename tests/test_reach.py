"""Reachability: entry points, the import graph, builds and what they compile, excluded and vendored
folders. Each case is a small real tree scanned through the whole pipeline."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cli import run_cli
from conftest import FIXTURES
from scanning import write_tree as tree
from neuron_ready.config import ConfigError, Settings
from neuron_ready.engine import run_scan
from neuron_ready.reach import EXCLUDED, STANDALONE, UNBUILT, UNREACHED, glob_matches, module_names, support_name
from neuron_ready.sources.builds import build_facts
from neuron_ready.sources.native import build_facts as native_build_facts

TRAIN = """\
import torch
from model import Net

def main():
    model = Net().cuda()
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 2).cuda()).sum().backward()
    opt.step()

if __name__ == "__main__":
    main()
"""
KERNEL = "#include <cuda_runtime.h>\n__global__ void k(float* x) { x[0] = 1; }\n"


def scan(root: Path, **kw):
    return run_scan(Settings(root=root, **kw)).report


def where(report) -> dict[str, str]:
    """path -> "" on the path, or the reason it is off it (a line repeating another's fix aside)."""
    out = {f.path: "" for f in report.findings}
    out.update({f.path: f.details["off_path_reason"] for f in report.off_path if not f.details.get("repeats")})
    return out


def library_where(root: Path):
    """The report of a tree with no training entry point (library mode), and `where` of it."""
    report = scan(root)
    assert report.extra["reach"]["mode"] == "library"
    return report, where(report)


# ------------------------------------------------------------------------------------------ fixture


def test_cuda_extension_fixture():
    report = scan(FIXTURES / "cuda_extension")
    reach = report.extra["reach"]
    assert reach["mode"] == "entries" and reach["entries"] == ["train.py"] and reach["detected"]
    w = where(report)
    assert w["csrc/unused_experiment.cu"] == UNBUILT
    assert w["benchmarks/bench_scan.py"] == EXCLUDED
    assert w["csrc/scan_kernel.cu"] == w["csrc/scan_backward.cu"] == w["csrc/binding.cpp"] == ""
    assert w["setup.py"] == "" and w["fusedops/gated.py"] == ""
    (ext,) = reach["extensions"]
    assert ext == {"id": "fusedops._C", "kind": "cuda", "build": "setup.py", "line": 8, "files": 3, "on_path": True}
    # the unbuilt experiment is reported but costs nothing
    assert all(report.findings[i].path != "csrc/unused_experiment.cu" for t in report.tasks for i in t.findings)


# ------------------------------------------------------------------------------------------ entries


def test_modules_no_entry_point_reaches_are_off_the_path(tmp_path):
    root = tree(tmp_path, {
        "train.py": TRAIN,
        "model.py": "import torch\nclass Net(torch.nn.Module):\n    pass\n",
        "tools/export.py": "import torch\nx = torch.zeros(2, device='cuda')\n",
    })
    report = scan(root)
    assert report.extra["reach"]["entries"] == ["train.py"]
    w = where(report)
    assert w["train.py"] == "" and w["tools/export.py"] == UNREACHED
    assert report.estimate.person_days.likely > 0


def test_named_entry_overrides_detection_and_reaches_excluded_folders(tmp_path):
    root = tree(tmp_path, {
        "train.py": TRAIN,
        "model.py": "class Net: pass\n",
        "examples/finetune.py": "import torch\nfrom examples.helpers import go\ngo(torch.zeros(1).cuda())\n",
        "examples/helpers.py": "import torch\ndef go(x):\n    return x.to('cuda')\n",
    })
    report = scan(root, entries=["examples/finetune.py"])
    w = where(report)
    assert report.extra["reach"]["entries"] == ["examples/finetune.py"] and not report.extra["reach"]["detected"]
    assert w["examples/finetune.py"] == "" and w["examples/helpers.py"] == ""
    assert w["train.py"] == UNREACHED


def test_entry_by_module_name_and_src_layout(tmp_path):
    root = tree(tmp_path, {
        "src/pkg/__init__.py": "",
        "src/pkg/run.py": "from pkg.ops import f\nf()\n",
        "src/pkg/ops.py": "import torch\ndef f():\n    return torch.zeros(1).cuda()\n",
        "src/pkg/unused.py": "import torch\ny = torch.zeros(1).cuda()\n",
    })
    report = scan(root, entries=["pkg.run"])
    w = where(report)
    assert w["src/pkg/ops.py"] == "" and w["src/pkg/unused.py"] == UNREACHED


def test_unknown_entry_is_a_one_line_error(tmp_path):
    root = tree(tmp_path, {"a.py": "import torch\n"})
    with pytest.raises(ConfigError, match="entry 'nope.py'"):
        scan(root, entries=["nope.py"])
    r = run_cli("scan", str(root), "--entry", "nope.py")
    assert r.code == 2 and r.err.count("\n") == 1 and "entry 'nope.py'" in r.err and "Traceback" not in r.err


def test_without_entry_points_every_module_outside_tests_is_on_the_path(tmp_path):
    root = tree(tmp_path, {
        "lib/__init__.py": "",
        "lib/a.py": "import torch\nx = torch.zeros(1).cuda()\n",
        "tests/test_a.py": "import torch\nx = torch.zeros(1).cuda()\n",
        "lib/test_b.py": "import torch\nx = torch.zeros(1).cuda()\n",
        "docs/conf.py": "import torch\nx = torch.zeros(1).cuda()\n",
        "scripts/convert.py": "import torch\nif __name__ == '__main__':\n    torch.zeros(1).cuda()\n",
    })
    _, w = library_where(root)
    assert w["lib/a.py"] == ""
    assert w["tests/test_a.py"] == w["lib/test_b.py"] == w["docs/conf.py"] == EXCLUDED
    assert w["scripts/convert.py"] == STANDALONE


def test_a_script_is_standalone_only_when_none_of_its_code_trains(tmp_path):
    # The ast's answer (code facts), as for entry detection: a training function the `__main__`
    # block does not call still makes the file more than a tool; words in strings do not.
    root = tree(tmp_path, {
        "lib/__init__.py": "",
        "lib/a.py": "import torch\nx = torch.zeros(1).cuda()\n",
        "scripts/tool.py": "import torch\n\ndef finetune(m):\n    m.loss().backward()\n\n"
                           "if __name__ == '__main__':\n    torch.zeros(1).cuda()\n",
        "scripts/notes.py": "import torch\nHELP = 'call loss.backward() then optimizer.step()'\n\n"
                            "if __name__ == '__main__':\n    torch.zeros(1).cuda()\n",
    })
    _, w = library_where(root)
    assert w["scripts/tool.py"] == "" and w["scripts/notes.py"] == STANDALONE



def test_one_step_outside_any_loop_is_an_installation_check_not_an_entry(tmp_path):
    # `python -m bitsandbytes` runs one backward and one optimizer step on a 10x10 parameter to check
    # the install: a training job repeats its step, so module-level code trains only with a step in a
    # loop, a trainer run, or a call of a project function that trains.
    check = ("import torch\nfrom pkg.optim import Adam\n\n"
             "p = torch.nn.Parameter(torch.rand(10, 10).cuda())\nadam = Adam([p])\n"
             "(p * 2).sum().backward()\nadam.step()\nprint('SUCCESS!')\n")
    root = tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/optim.py": "import torch\n\nclass Adam(torch.optim.Optimizer):\n    pass\n",
        "pkg/ops.py": "import torch\n\ndef scale(x):\n    return x.cuda() * 2\n",
        "pkg/__main__.py": check,
    })
    report = scan(root)
    assert report.extra["reach"]["mode"] == "library"  # no entry: the library's surface is costed
    # the same step in a loop trains, as does a trainer run or a project function that trains
    for name, code in {
        "loop.py": "import torch\nopt = torch.optim.SGD([p], lr=0.1)\nfor batch in data:\n"
                   "    loss(batch).backward()\n    opt.step()\n",
        "fit.py": "import lightning\ntrainer = lightning.Trainer()\ntrainer.fit(model)\n",
        "calls.py": "import torch\nfrom pkg.loop import train\nopt = torch.optim.SGD([p], lr=0.1)\n"
                    "opt.zero_grad()\nloss().backward()\ntrain(opt)\n",
    }.items():
        files = {"pkg/__init__.py": "", "pkg/loop.py": "def train(opt):\n    for b in data:\n"
                 "        b.backward()\n        opt.step()\n", name: code}
        report = scan(tree(tmp_path / name.split(".")[0], files))
        assert report.extra["reach"]["mode"] == "entries", name
        assert name in report.extra["reach"]["entries"], name
def test_a_library_module_only_tests_import_is_test_support(tmp_path):
    # A helper kept in the package for its tests (a loader of bundled test data) runs in no job that
    # uses the library: off the path, with who imports it. One a library module also imports stays;
    # so does a public module only tests import (a user imports it), and a helper a benchmark and a
    # test share, or that only another test helper imports, is support too.
    cuda = "import torch\nx = torch.zeros(1).cuda()\n"
    root = tree(tmp_path, {
        "lib/__init__.py": "from .a import f\n",
        "lib/a.py": "from ._shared import g\n\ndef f():\n    return g()\n",
        "lib/_helper.py": "from ._data_utils import load\n" + cuda,
        "lib/_data_utils.py": cuda + "def load():\n    return x\n",
        "lib/_shared.py": cuda + "def g():\n    return x\n",
        "lib/bench_utils.py": cuda,
        "lib/ops.py": cuda,
        "tests/test_a.py": "from lib._helper import x\nfrom lib._shared import g\nfrom lib.ops import x\n",
        "benchmarks/bench_a.py": "from lib.bench_utils import x\n",
        "tests/test_b.py": "from lib.bench_utils import x\n",
    })
    report, w = library_where(root)
    assert w["lib/_helper.py"] == "imported only by tests and benchmarks: tests/test_a.py"
    assert w["lib/_data_utils.py"] == "imported only by tests, benchmarks and their helper lib/_helper.py"
    assert w["lib/bench_utils.py"] == "imported only by tests and benchmarks: benchmarks/bench_a.py, tests/test_b.py"
    assert w["lib/_shared.py"] == w["lib/ops.py"] == ""
    assert {f.context for f in report.off_path if f.path == "lib/_helper.py"} == {"off-path"}


@pytest.mark.parametrize("rel, support", [
    ("pkg/_helper.py", True), ("pkg/attn_bias_utils.py", True), ("pkg/test_utils/examples.py", True),
    ("pkg/_internal/gemm.py", True), ("pkg/utils/hotswap.py", False), ("pkg/ops/tree_attention.py", False),
    ("pkg/__init__.py", False), ("pkg/testable.py", False),
])
def test_only_a_module_named_for_support_can_be_test_support(rel, support):
    assert support_name(rel) is support


def test_console_script_that_trains_is_an_entry(tmp_path):
    root = tree(tmp_path, {
        "pyproject.toml": '[project]\nname = "x"\nversion = "1"\n[project.scripts]\nx-train = "xpkg.cli:main"\n',
        "xpkg/__init__.py": "",
        "xpkg/cli.py": "import torch\nfrom xpkg.loop import fit\ndef main():\n    fit()\n    torch.optim.SGD([]).step()\n",
        "xpkg/loop.py": "import torch\ndef fit():\n    torch.zeros(1).cuda()\n",
        "xpkg/other.py": "import torch\nz = torch.zeros(1).cuda()\n",
    })
    report = scan(root)
    assert report.extra["reach"]["entries"] == ["xpkg/cli.py"]
    w = where(report)
    assert w["xpkg/loop.py"] == "" and w["xpkg/other.py"] == UNREACHED


# ------------------------------------------------------------------------------------------ builds


def test_jit_load_in_an_unreached_module_costs_nothing(tmp_path):
    root = tree(tmp_path, {
        "train.py": TRAIN,
        "model.py": "class Net: pass\n",
        "ops/jit.py": (
            "import os\nfrom torch.utils.cpp_extension import load\n"
            "here = os.path.dirname(__file__)\n"
            "ext = load(name='k', sources=[os.path.join(here, 'k.cu')])\n"
        ),
        "ops/k.cu": KERNEL,
    })
    report = scan(root)
    w = where(report)
    assert w["ops/k.cu"].startswith("compiled into load@ops/jit.py:4")
    report = scan(root, entries=["train.py", "ops/jit.py"])
    assert where(report)["ops/k.cu"] == ""


def test_headers_a_built_source_includes_are_built(tmp_path):
    root = tree(tmp_path, {
        "setup.py": (
            "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
            "setup(ext_modules=[CUDAExtension('pkg._C', ['csrc/main.cu'])])\n"
        ),
        "pkg/__init__.py": "from pkg import _C\n",
        "csrc/main.cu": '#include "kernels/inner.cuh"\n' + KERNEL,
        "csrc/kernels/inner.cuh": "#pragma once\n__global__ void inner(float* x) { x[1] = 2; }\n",
        "csrc/orphan.cuh": "__global__ void orphan(float* x) { }\n",
    })
    report = scan(root)
    w = where(report)
    assert w["csrc/main.cu"] == w["csrc/kernels/inner.cuh"] == ""
    assert w["csrc/orphan.cuh"] == UNBUILT
    (t,) = [t for t in report.tasks if t.kind == "port-extension"]
    assert t.id == "T-ext-pkg._C" and t.details["kernels"] == 2


def test_cmake_targets_build_their_sources(tmp_path):
    root = tree(tmp_path, {
        "CMakeLists.txt": "project(x LANGUAGES CXX CUDA)\nfile(GLOB SRC ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cu)\nadd_library(x SHARED ${SRC})\n",
        "src/a.cu": KERNEL,
        "old/b.cu": KERNEL,
    })
    w = where(scan(root))
    assert w["src/a.cu"] == "" and w["old/b.cu"] == UNBUILT and w["CMakeLists.txt"] == ""


def test_vendored_code_is_off_the_path_unless_a_build_compiles_it(tmp_path):
    root = tree(tmp_path, {
        "setup.py": (
            "import glob\nfrom setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
            "srcs = ['csrc/own.cu'] + glob.glob('third_party/fa/csrc/*.cu')\n"
            "setup(ext_modules=[CUDAExtension('pkg._C', srcs)])\n"
        ),
        "pkg/__init__.py": "from pkg import _C\n",
        "csrc/own.cu": '#include <cutlass/gemm.h>\n' + KERNEL,
        "csrc/cutlass/include/cutlass/gemm.h": "#include <cuda_runtime.h>\n__global__ void g(float* x) { }\n",
        "csrc/cutlass/test/unit.cu": KERNEL,
        "third_party/fa/csrc/attn.cu": KERNEL,
    })
    report = scan(root)
    w = where(report)
    assert w["csrc/own.cu"] == ""
    assert w["csrc/cutlass/test/unit.cu"].startswith("vendored third-party code (csrc/cutlass)")
    assert w["csrc/cutlass/include/cutlass/gemm.h"].startswith("vendored")
    assert w["third_party/fa/csrc/attn.cu"] == ""  # compiled by the build: replaced as a whole
    kinds = {t.id: t.kind for t in report.tasks}
    assert kinds["T-vendored-third_party/fa"] == "replace-vendored"
    assert "T-vendored-csrc/cutlass" not in kinds


def test_explicit_files_treat_native_sources_as_built(tmp_path):
    root = tree(tmp_path, {"k.cu": KERNEL, "tests/t.py": "import torch\nx = torch.zeros(1).cuda()\n"})
    report = run_scan(Settings(root=root, files=[root / "k.cu", root / "tests" / "t.py"])).report
    assert report.extra["reach"]["mode"] == "files"
    w = where(report)
    assert w["k.cu"] == "" and w["tests/t.py"] == EXCLUDED


# ------------------------------------------------------------------------------------------ facts


def test_build_facts_read_sources_through_joins_globs_and_names():
    facts = build_facts(textwrap.dedent("""
        import glob, os
        from pathlib import Path
        import torch.utils.cpp_extension as ext
        this_dir = os.path.dirname(os.path.abspath(__file__))
        srcs = [os.path.join(this_dir, "csrc", "a.cpp")]
        srcs += glob.glob(os.path.join("csrc", "**", "*.cu"), recursive=True)
        srcs.append(str(Path(__file__).parent / "csrc" / "b.cu"))
        builder = ext.CUDAExtension if os.environ.get("CUDA") else ext.CppExtension
        modules = [builder(name=f"pkg._{n}", sources=sorted(srcs)) for n in ("a", "b")]
        lib = ext.load_inline(name="inl", cpp_sources="", cuda_sources="__global__ void k() {}")
    """))
    (b, inline) = facts["builds"]
    assert b["kind"] == "cuda" and b["name"] == "pkg._*" and b["line"] == 10
    assert b["sources"] == ["csrc/**/*.cu", "csrc/a.cpp", "csrc/b.cu"]
    assert inline == {"kind": "load_inline", "line": 11, "name": "inl", "sources": [], "cuda": True}


def test_build_facts_unknown_sources_are_any_path():
    facts = build_facts("from torch.utils.cpp_extension import load\nm = load(name='x', sources=self.sources())\n")
    assert facts["builds"][0]["sources"] == ["**"]
    assert build_facts("import torch\n") == {}


def test_native_build_facts():
    assert native_build_facts('#include "a/b.h"\n#include <cuda.h>\n', cmake=False) == {"includes": ["a/b.h", "cuda.h"]}
    cm = native_build_facts("add_library(x ${CMAKE_CURRENT_SOURCE_DIR}/k.cu ${OTHER}/j.cpp)\n", cmake=True)
    assert cm == {"cmake_build": True, "cmake_sources": [[1, "k.cu"], [1, "**/j.cpp"]], "programs": []}


def test_module_names_from_packages_and_scripts():
    idx = module_names(["src/pkg/__init__.py", "src/pkg/sub/__init__.py", "src/pkg/sub/m.py", "scripts/run.py"])
    assert idx["pkg.sub.m"] == ["src/pkg/sub/m.py"] and idx["src.pkg.sub.m"] == ["src/pkg/sub/m.py"]
    assert idx["pkg"] == ["src/pkg/__init__.py"] and idx["run"] == ["scripts/run.py"]


@pytest.mark.parametrize("pattern,path,hit", [
    ("csrc/*.cu", "csrc/a.cu", True), ("csrc/*.cu", "csrc/x/a.cu", False),
    ("csrc/**/*.cu", "csrc/a.cu", True), ("csrc/**/*.cu", "csrc/x/y/a.cu", True),
    ("**", "any/where.cu", True), ("a?.cu", "ab.cu", True), ("a.cu", "xa.cu", False),
    ("a/**", "a/x/y.cu", True), ("a/**", "a", False), ("*a*b", "aab", True), ("*a*b", "aaba", False),
    ("[ab].cu", "[ab].cu", True), ("[ab].cu", "a.cu", False), ("x**y/*.cu", "xay/k.cu", True),
])
def test_path_patterns(pattern, path, hit):
    assert glob_matches(pattern, path) is hit


def test_a_hostile_glob_is_linear(tmp_path):
    """`*a*a...*b` against a name of 40 `a`s backtracked for hours in the main process (no timeout)."""
    evil = "csrc/" + "*a" * 14 + "*b.cu"
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / ("a" * 40 + ".cu")).write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    (tmp_path / "setup.py").write_text(f"from torch.utils.cpp_extension import CUDAExtension\n"
                                       f"ext = CUDAExtension('x._C', sources=[{evil!r}])\n")
    (tmp_path / "CMakeLists.txt").write_text(f"add_library(x {evil})\n")
    assert not glob_matches(evil, "csrc/" + "a" * 40 + ".cu")
    r = run_cli("scan", str(tmp_path), "--format", "json", "--no-cache", timeout=120)
    assert r.code == 0, r.err
    assert '"NR1703"' in r.out  # the kernel is still reported, as a kernel no build compiles


def test_the_training_path_analysis_is_time_bound(tmp_path):
    """It runs in the main process on facts from the scanned tree, with no worker timeout: past its
    bound the scan still ends, every file counted on the path, and says so."""
    cache = str(tmp_path / "cache")  # the degraded report is not kept: the next scan tries again
    r = run_cli("scan", str(FIXTURES / "cuda_extension"), "--format", "json", "--cache-dir", cache, "--isolated",
                env={"NEURON_READY_REACH_TIMEOUT": "0.000001"})
    assert r.code == 0, r.err
    import json

    report = json.loads(r.out)
    assert [(d["path"], d["kind"]) for d in report["diagnostics"]] == [(".", "too-complex")]
    assert "training-path analysis took longer than" in report["diagnostics"][0]["message"]
    assert report["findings"] and not report.get("off_path") and report["reach"]["mode"] == "library"
    assert report["reach"]["timed_out"] is True
    normal = json.loads(run_cli("scan", str(FIXTURES / "cuda_extension"), "--format", "json", "--cache-dir", cache,
                                "--isolated").out)
    assert normal["diagnostics"] == [] and normal["reach"]["mode"] == "entries"
