"""An extension that builds each op for the CPU too (torch-cluster's csrc/cpu/knn_cpu.cpp beside
csrc/cuda/knn_cuda.cu) runs those ops on the host on Trainium: one switch for the extension, not a
kernel rewrite per op. An op with only a CUDA version keeps its port, an op PyTorch has switches to
it on the device; a binding file that dispatches to both is not a CPU implementation."""

from __future__ import annotations

import json

from cli import run_cli
from scanning import write_tree as tree
from neuron_ready.cpu_twins import cpu_twins

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
