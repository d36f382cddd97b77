"""An extension of kernels PyTorch already has (torch-scatter's scatter/segment ops): one switch per
op and its variants, its build joined to it however the setup.py spells it, a second CMake build of
the same sources part of the same port, and its testing.py helpers not training code."""

from __future__ import annotations

import json

from cli import run_cli
from scanning import write_tree as tree
from neuron_ready.effort import base_ops

SETUP = """\
    import glob
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
    cuda = True
    Extension = CUDAExtension if cuda else CppExtension
    ext = Extension("scatterlib._C", glob.glob("csrc/*.cu") + glob.glob("csrc/*.cpp"))
    setup(name="scatterlib", ext_modules=[ext], cmdclass={"build_ext": BuildExtension})
"""
CMAKE = """\
    cmake_minimum_required(VERSION 3.18)
    project(scatterlib LANGUAGES CXX CUDA)
    file(GLOB SRCS csrc/*.cu csrc/*.cpp)
    add_library(scatterlib SHARED ${SRCS})
"""
KERNELS = """\
    #include <cuda_runtime.h>
    __global__ void scatter_kernel(const float* src, const long* index, float* out, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) atomicAdd(&out[index[i]], src[i]);
    }
    __global__ void scatter_arg_kernel(const float* src, const long* index, long* arg, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) arg[index[i]] = i;
    }
    __global__ void segment_csr_kernel(const float* src, const long* ptr, float* out, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) for (long j = ptr[i]; j < ptr[i + 1]; j++) out[i] += src[j];
    }
    __global__ void segment_csr_broadcast_kernel(const float* src, const long* ptr, float* out, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) out[i] = src[ptr[i]];
    }
"""


def _tree(tmp_path):
    return tree(tmp_path, {"setup.py": SETUP, "CMakeLists.txt": CMAKE, "csrc/scatter.cu": KERNELS,
             "csrc/bind.cpp": "#include <torch/extension.h>\n",
             "scatterlib/__init__.py": "import torch\nfrom scatterlib import _C\n",
             "scatterlib/testing.py": "import torch\ndevices = [torch.device('cuda:0')]\n"})


def test_variants_switch_with_their_op():
    assert base_ops(["segment_coo", "segment_coo_arg", "segment_coo_broadcast", "scatter", "scatter_arg",
                     "gather_csr"]) == ["gather_csr", "scatter", "segment_coo"]


def test_an_extension_of_core_ops_is_one_switch_with_its_builds(tmp_path):
    r = run_cli("scan", str(_tree(tmp_path)), "--isolated", "--format", "json")
    assert r.code in (0, 1), r.err
    report = json.loads(r.out)
    tasks = {t["id"]: t for t in report["tasks"]}
    ext = [t for t in tasks.values() if t["id"].startswith("T-ext-")]
    assert len(ext) == 1, sorted(tasks)  # the CMake build of the same sources joins the setup.py one
    (task,) = ext
    assert task["kind"] == "switch-to-reference"
    assert task["references"] == ["scatter", "scatter_arg", "segment_csr", "segment_csr_broadcast"]
    assert task["person_days"]["likely"] == 2 * 2.0  # two ops to switch: scatter, segment_csr
    joined = {report["findings"][i]["path"] for i in task["findings"]}
    assert {"setup.py", "CMakeLists.txt"} <= joined  # the build a line above the call is its build
    assert not any(f["path"] == "scatterlib/testing.py" for f in report["findings"])  # test helpers


def test_a_second_build_of_one_module_with_no_sources_of_its_own_joins_the_first(tmp_path):
    setup = """\
        from setuptools import setup
        from torch.utils.cpp_extension import CUDAExtension
        rocm = False
        if not rocm:
            ext = CUDAExtension("fastattn_cuda", ["csrc/attn.cu"])
        else:
            ext = CUDAExtension("fastattn_cuda", hip_sources)
        setup(name="fastattn", ext_modules=[ext])
    """
    kernel = "#include <cuda_runtime.h>\n__global__ void attn_fwd_kernel(float* x) { x[0] = 1; }\n"
    root = tree(tmp_path, {"setup.py": setup, "csrc/attn.cu": kernel, "fastattn/__init__.py": "import fastattn_cuda\n"})
    r = run_cli("scan", str(root), "--isolated", "--format", "json")
    assert r.code in (0, 1), r.err
    report = json.loads(r.out)
    assert [e["id"] for e in report["reach"]["extensions"]] == ["fastattn_cuda", "fastattn_cuda#2"]
    assert [t["id"] for t in report["tasks"] if t["id"].startswith("T-ext-")] == ["T-ext-fastattn_cuda"]


def test_the_repositorys_own_extension_under_an_import_guard_is_not_an_optional_library(tmp_path):
    setup = """\
        from setuptools import setup
        from torch.utils.cpp_extension import CUDAExtension
        setup(name="flash_attn", ext_modules=[CUDAExtension("flash_attn_2_cuda", ["csrc/attn.cu"])])
    """
    kernel = "#include <cuda_runtime.h>\n__global__ void attn_fwd_kernel(float* x) { x[0] = 1; }\n"
    package = """\
        try:
            import flash_attn_2_cuda
        except ImportError:
            flash_attn_2_cuda = None
        def attention(q):
            if flash_attn_2_cuda is not None:
                return flash_attn_2_cuda.fwd(q)
            return q
    """
    root = tree(tmp_path, {"setup.py": setup, "csrc/attn.cu": kernel, "flash_attn/__init__.py": package})
    r = run_cli("scan", str(root), "--isolated", "--format", "json")
    assert r.code in (0, 1), r.err
    report = json.loads(r.out)
    imports = [f for f in report["findings"] + report["off_path"] if f["path"] == "flash_attn/__init__.py"]
    assert imports and all(f["context"] == "step" for f in imports)  # its port is this repository's work



LOADER = """\
    import importlib.machinery
    import os.path as osp
    import torch
    spec = importlib.machinery.PathFinder().find_spec("_scatter_cuda", [osp.dirname(__file__)])
    torch.ops.load_library(spec.origin)
"""


def test_a_package_loading_the_one_extension_it_builds_is_part_of_that_port(tmp_path):
    plain = json.loads(run_cli("scan", str(_tree(tmp_path / "plain")), "--isolated", "--format", "json").out)
    root = _tree(tmp_path / "loads")
    tree(root, {"scatterlib/__init__.py": LOADER})
    report = json.loads(run_cli("scan", str(root), "--isolated", "--format", "json").out)
    (ext,) = [t for t in report["tasks"] if t["id"].startswith("T-ext-")]
    loads = [i for i, f in enumerate(report["findings"]) if f["rule"] == "NR1714"]
    assert loads and set(loads) <= set(ext["findings"])
    assert not any(t["id"] == "T-rule-NR1714" for t in report["tasks"])
    (before,) = [t for t in plain["tasks"] if t["id"].startswith("T-ext-")]
    assert ext["person_days"] == before["person_days"]  # loading it adds no second port


def test_a_library_loaded_where_nothing_is_built_is_a_task_of_its_own(tmp_path):
    root = tree(tmp_path, {"pkg/__init__.py": LOADER})
    report = json.loads(run_cli("scan", str(root), "--isolated", "--format", "json").out)
    assert [t["id"] for t in report["tasks"] if "NR1714" in t["rules"]] == ["T-rule-NR1714"]
