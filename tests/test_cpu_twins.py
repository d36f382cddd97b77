"""An extension that builds each op for the CPU too (torch-cluster's csrc/cpu/knn_cpu.cpp beside
csrc/cuda/knn_cuda.cu) runs those ops on the host on Trainium: one switch for the extension, not a
kernel rewrite per op. An op with only a CUDA version keeps its port, an op PyTorch has switches to
it on the device; a binding file that dispatches to both is not a CPU implementation. An op the
project's Python calls only on CUDA tensors, beside a branch that computes the result itself, has a
host path too; a branch that raises, asserts or calls the same op is none."""

from __future__ import annotations

import ast
import json
import textwrap

from cli import run_cli
from scanning import write_tree as tree
from neuron_ready.cpu_twins import cpu_twins, host_path_ops, host_path_twins
from neuron_ready.sources.codefacts import code_facts

SETUP = """\
    import glob
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension
    srcs = glob.glob("csrc/*.cpp") + glob.glob("csrc/cpu/*.cpp") + glob.glob("csrc/cuda/*.cu")
    setup(name="graphlib", ext_modules=[CUDAExtension("graphlib._C", srcs)], cmdclass={"build_ext": BuildExtension})
"""


BODIES = {  # different work per op: identical bodies would be near-copies of one op (nearcopy.py)
    "knn": "for (int j = 0; j < n; j++) { float d = pos[i] - pos[j]; if (d * d < 1.0f) out[i] = j; }",
    "radius": "float r = pos[i] * pos[i]; while (r > 1.0f) { r = r / 2.0f; out[i] += 1; }",
    "fps": "long best = 0; for (int j = 1; j < n; j++) if (pos[j] > pos[best]) best = j; out[0] = best;",
    "nearest": "out[i] = (long)(pos[i] + 0.5f); if (out[i] < 0) { out[i] = -out[i]; }",
    "scatter": "atomicAdd((float*)out + (long)pos[i], pos[i] * 3.0f);",
    "segment_csr": "float acc = 0.0f; for (long j = out[i]; j < out[i + 1]; j++) acc += pos[j]; out[n + i] = (long)acc;",
}


def _kernel(name: str) -> str:
    return f"""\
        #include <cuda_runtime.h>
        __global__ void {name}_kernel(const float* pos, long* out, int n) {{
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) {{ {BODIES[name]} }}
        }}
    """


CPU = "#include <torch/extension.h>\ntorch::Tensor {0}_cpu(torch::Tensor x) {{ return x; }}\n"


def test_pairs_by_stem_across_sibling_device_folders_or_in_one_folder():
    paths = ["csrc/cuda/knn_cuda.cu", "csrc/cpu/knn_cpu.cpp", "csrc/knn.cpp",
             "csrc/cuda/nearest_cuda.cu", "csrc/nearest.cpp",  # a binding only: no CPU implementation
             "ops/fps_kernel.cu", "ops/fps_cpu.cc",
             "other/cuda/knn_cuda.cu"]  # another extension's folder: its twin would be other/cpu/
    assert cpu_twins(paths) == {"csrc/cuda/knn_cuda.cu", "ops/fps_kernel.cu"}
    assert cpu_twins(reversed(paths)) == cpu_twins(paths)


def _extension(twinned: tuple[str, ...], cuda_only: tuple[str, ...] = ()) -> dict[str, str]:
    """A graphlib tree whose extension builds `twinned` for CUDA and the CPU, `cuda_only` for CUDA."""
    files = {"setup.py": SETUP, "graphlib/__init__.py": "import torch\nfrom graphlib import _C\n",
             "csrc/bind.cpp": "#include <torch/extension.h>\n"}
    for op in twinned + cuda_only:
        files[f"csrc/cuda/{op}_cuda.cu"] = _kernel(op)
    for op in twinned:
        files[f"csrc/cpu/{op}_cpu.cpp"] = CPU.format(op)
    return files


def _extension_task(root) -> dict:
    r = run_cli("scan", str(root), "--isolated", "--format", "json")
    assert r.code in (0, 1), r.err
    (task,) = [t for t in json.loads(r.out)["tasks"] if t["id"].startswith("T-ext-")]
    return task


def test_ops_built_for_the_cpu_switch_once_and_the_rest_keep_their_port(tmp_path):
    task = _extension_task(tree(tmp_path / "twins", _extension(("knn", "radius", "fps"))))
    assert task["kind"] == "switch-to-reference"
    assert task["cpu_ops"] == ["fps", "knn", "radius"]
    assert task["person_days"]["likely"] == 2.0  # one switch (REFERENCE_SWITCH), not three kernel ports
    assert "CPU implementation of 3 ops" in task["title"]

    mixed = _extension_task(tree(tmp_path / "mixed", _extension(("knn", "radius", "fps"), ("nearest",))))
    assert mixed["kind"] == "port-extension" and mixed["cpu_ops"] == ["fps", "knn", "radius"]
    assert mixed["kernel_units"] > 0 and mixed["person_days"]["likely"] > task["person_days"]["likely"]


def test_an_op_pytorch_has_switches_to_it_on_the_device_not_to_the_cpu_build(tmp_path):
    """torch-scatter's `scatter` and `segment_csr` are built for the CPU too, but PyTorch has them
    (scatter_reduce, segment_reduce): they run on the device, one reference switch each, and only the
    op PyTorch lacks (`knn`) goes to the host from the CPU build."""
    task = _extension_task(tree(tmp_path / "core", _extension(("scatter", "segment_csr", "knn"))))
    assert task["kind"] == "switch-to-reference"
    assert task["cpu_ops"] == ["knn"]
    assert "`scatter`" in task["title"] and "`segment_csr`" in task["title"]
    assert task["person_days"]["likely"] == 6.0  # three switches: two PyTorch ops and the CPU build


# The Python wrapper as the host path: the op is called only on CUDA tensors, and the other branch
# of the same device check computes the result itself (torch-cluster's `nearest` does it with SciPy).
WRAPPER = """\
    import torch
    from graphlib import _C


    def nearest(x, y):
        if x.is_cuda:
            return torch.ops.graphlib.nearest(x, y)
        else:
            return torch.cdist(x, y).argmin(dim=1)


    def nearest_early(x, y):
        if not x.is_cuda:
            return torch.cdist(x, y).argmin(dim=1)
        return torch.ops.graphlib.nearest_early(x, y)


    def knn_local(x, y, k):
        on_gpu = x.device.type == "cuda"
        if on_gpu:
            out = _C.knn_local(x, y, k)
        else:
            out = torch.cdist(x, y).topk(k, largest=False).indices
        return out
"""
NOT_A_PATH = """\
    import torch


    def raising(x, y):
        if x.is_cuda:
            return torch.ops.graphlib.raising(x, y)
        else:
            raise NotImplementedError("CUDA only")


    def asserting(x, y):
        if torch.cuda.is_available():
            out = torch.ops.graphlib.asserting(x, y)
        else:
            assert False, "needs a GPU"
        return out


    def same_op(x, y):
        if x.is_cuda:
            return torch.ops.graphlib.same_op(x, y)
        else:
            return torch.ops.graphlib.same_op(x.cuda(), y.cuda()).cpu()


    def passthrough(x, y):
        if x.is_cuda:
            return torch.ops.graphlib.passthrough(x, y)
        else:
            return x


    def pytorch_op(x):
        if x.is_cuda:
            return torch.ops.aten.relu(x)
        else:
            return x.clamp(min=0)
"""


def _facts(text: str) -> dict:
    src = textwrap.dedent(text)
    return code_facts(ast.parse(src), "graphlib.wrap", False, src)


def test_an_op_called_only_on_cuda_beside_a_branch_that_computes_has_a_host_path():
    ops = host_path_ops([_facts(WRAPPER)], modules={"graphlib._C"})
    assert ops == {"nearest", "nearest_early", "knn_local"}
    assert host_path_ops([_facts(WRAPPER)]) == {"nearest", "nearest_early"}  # `_C` built by no extension here
    # a branch that raises, asserts, calls the same op or passes its input through is no path;
    # an op of PyTorch itself (`torch.ops.aten`) is no extension's
    assert host_path_ops([_facts(NOT_A_PATH)], modules={"graphlib._C"}) == frozenset()
    kernels = {"csrc/cuda/nearest_cuda.cu": ["nearest_kernel"], "csrc/cuda/ops.cu": ["knn_local_kernel"],
               "csrc/cuda/mixed.cu": ["knn_local_kernel", "radius_kernel"], "csrc/nearest.cpp": []}
    assert host_path_twins(kernels, ops) == {"csrc/cuda/nearest_cuda.cu", "csrc/cuda/ops.cu"}


def test_a_cuda_only_op_whose_wrapper_computes_it_off_cuda_joins_the_host_switch(tmp_path):
    files = _extension(("knn",), ("nearest",))
    hosted = _extension_task(tree(tmp_path / "wrapped", {**files, "graphlib/nearest.py": WRAPPER}))
    assert hosted["kind"] == "switch-to-reference"
    assert hosted["cpu_ops"] == ["knn", "nearest"]
    assert hosted["person_days"]["likely"] == 2.0  # the one host switch of the extension

    # the same op behind a wrapper whose else raises keeps its kernel port
    raising = WRAPPER.replace("return torch.cdist(x, y).argmin(dim=1)\n\n\n    def nearest_early",
                              "raise NotImplementedError('CUDA only')\n\n\n    def nearest_early")
    assert raising != WRAPPER
    ported = _extension_task(tree(tmp_path / "raising", {**files, "graphlib/nearest.py": raising}))
    assert ported["kind"] == "port-extension" and ported["cpu_ops"] == ["knn"]
    assert ported["kernel_units"] > 0 and ported["person_days"]["likely"] > hosted["person_days"]["likely"]
