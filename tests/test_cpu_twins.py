"""An extension that builds each op for the CPU too (torch-cluster's csrc/cpu/knn_cpu.cpp beside
csrc/cuda/knn_cuda.cu) runs those ops on the host on Trainium: one switch for the extension, not a
kernel rewrite per op. An op with only a CUDA version keeps its port; a binding file that
dispatches to both is not a CPU implementation."""

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


def test_ops_built_for_the_cpu_switch_once_and_the_rest_keep_their_port(tmp_path):
    files = {"setup.py": SETUP, "graphlib/__init__.py": "import torch\nfrom graphlib import _C\n",
             "csrc/bind.cpp": "#include <torch/extension.h>\n"}
    for op in ("knn", "radius", "fps"):
        files[f"csrc/cuda/{op}_cuda.cu"] = _kernel(op)
        files[f"csrc/cpu/{op}_cpu.cpp"] = CPU.format(op)
    r = run_cli("scan", str(tree(tmp_path / "twins", files)), "--isolated", "--format", "json")
    assert r.code in (0, 1), r.err
    (task,) = [t for t in json.loads(r.out)["tasks"] if t["id"].startswith("T-ext-")]
    assert task["kind"] == "switch-to-reference"
    assert task["cpu_ops"] == ["fps", "knn", "radius"]
    assert task["person_days"]["likely"] == 2.0  # one switch (REFERENCE_SWITCH), not three kernel ports
    assert "CPU implementation of 3 ops" in task["title"]

    files["csrc/cuda/nearest_cuda.cu"] = _kernel("nearest")  # CUDA only
    r = run_cli("scan", str(tree(tmp_path / "mixed", files)), "--isolated", "--format", "json")
    (mixed,) = [t for t in json.loads(r.out)["tasks"] if t["id"].startswith("T-ext-")]
    assert mixed["kind"] == "port-extension" and mixed["cpu_ops"] == ["fps", "knn", "radius"]
    assert mixed["kernel_units"] > 0 and mixed["person_days"]["likely"] > task["person_days"]["likely"]
