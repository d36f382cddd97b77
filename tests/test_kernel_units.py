"""Kernel units a reader believes: a backward named by its gradient is its forward's op, tile-size
specialisations are one op, a copy of an op's backward elsewhere is a copy, and a @triton.jit device
function (it returns a value, so it is never launched) is ported with the kernels that call it."""

from __future__ import annotations

from neuron_ready.catalog import load_catalog
from neuron_ready.config import Settings
from neuron_ready.effort import COPY_SHARE, VARIANT_SHARE, backward_of, estimate, op_stem, sibling_forward
from neuron_ready.engine import run_scan
from scanning import write_tree
from test_effort import approx, finding

CATALOG = load_catalog()


def kernels(*specs):
    return [finding("NR1801", path=p, line=n, kernel=k, lines=30) for n, (p, k) in enumerate(specs, start=1)]


def test_a_backward_named_by_its_gradient_pairs_with_the_forward_in_its_file():
    fs = kernels(("ops/scan/chunk_h.py", "chunk_fwd_kernel_h"), ("ops/scan/chunk_h.py", "chunk_bwd_kernel_dh"),
                 ("ops/scan/chunk_o.py", "chunk_fwd_kernel_o"), ("ops/scan/chunk_o.py", "chunk_bwd_kernel_dqkwg"))
    tasks, _ = estimate(fs, CATALOG)
    assert sorted(t.id for t in tasks) == ["T-triton-chunk_h", "T-triton-chunk_o"]
    assert all(t.details["kernel_units"] == approx(1 + VARIANT_SHARE) for t in tasks)


def test_a_backward_file_pairs_with_the_forward_file_named_like_it():
    fs = kernels(("ops/atk/chunk_atk_fwd.py", "_forward_chunk_summary"),
                 ("ops/atk/chunk_atk_bwd.py", "_atk_backward_chunk_summary_dq"),
                 ("ops/lone/grads.py", "lone_bwd_kernel_dq"))  # no forward beside it: an op of its own
    tasks, _ = estimate(fs, CATALOG)
    assert sorted(t.id for t in tasks) == ["T-triton-chunk_summary", "T-triton-lone"]
    assert sibling_forward("ops/x/chunk_o_bwd.py") == "ops/x/chunk_o_fwd.py"
    assert sibling_forward("ops/x/backward.py") == "ops/x/forward.py"
    assert sibling_forward("ops/x/chunk.py") == "" and sibling_forward("ops/x/bwdish.py") == ""


def test_the_forward_sharing_most_words_wins_and_a_named_pair_is_kept():
    forwards = {"chunk_h_parallel": 90.0, "chunk_h_reduction": 70.0}
    assert backward_of("chunk_dh_reduction", forwards) == "chunk_h_reduction"
    assert backward_of("chunk_dh_parallel", forwards) == "chunk_h_parallel"
    assert backward_of("chunk_h_reduction", forwards) == "chunk_h_reduction"  # its own name: itself
    assert backward_of("rcum", forwards) == "chunk_h_parallel"  # no shared word: the largest forward
    assert backward_of("rcum", {}) == "rcum"


def test_tile_size_specialisations_are_one_op():
    assert op_stem("prepare_wy_repr_fwd_kernel_chunk32") == op_stem("prepare_wy_repr_fwd_kernel_chunk64")
    assert op_stem("merge_16x16_to_32x32_inverse_kernel") == op_stem("merge_16x16_to_64x64_inverse_kernel")
    assert op_stem("chunk_fwd_kernel_h_blockdim64") == "chunk_h"
    assert op_stem("rwkv6_fwd_kernel") == "rwkv6" and op_stem("conv1d_fwd") == "conv1d"  # names, not sizes


def test_copies_of_an_ops_backward_elsewhere_are_copies():
    fs = kernels(("a/k.py", "scan_fwd_kernel"), ("b/k.py", "scan_bwd_kernel"), ("c/k.py", "scan_bwd_kernel"),
                 ("d/k.py", "scan_bwd_kernel"))
    (t,), _ = estimate(fs, CATALOG)
    # the forward whole; the op's backward a variant; two more copies of that backward a copy share each
    assert t.details["kernel_units"] == approx(1 + VARIANT_SHARE + 2 * COPY_SHARE)


_DEVICE_FN = '''
import triton
import triton.language as tl


@triton.jit
def softplus(x):
    return tl.where(x < 20.0, tl.log(1 + tl.exp(x)), x)


@triton.jit
def gate_fwd_kernel(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N)
    tl.store(Y + offs, softplus(x), mask=offs < N)
    return
'''


def test_a_device_function_is_ported_with_the_kernels_that_call_it(tmp_path):
    write_tree(tmp_path, {"ops/gate.py": _DEVICE_FN, "ops/utils.py": _DEVICE_FN.split("@triton.jit\ndef gate")[0]})
    report = run_scan(Settings(root=tmp_path, cache=False)).report
    found = {(f.path, f.details["kernel"]): f.details.get("device_function", False)
             for f in report.findings + report.off_path if f.rule == "NR1801"}
    assert found == {("ops/gate.py", "softplus"): True, ("ops/gate.py", "gate_fwd_kernel"): False,
                     ("ops/utils.py", "softplus"): True}
    tasks = {t.id: t for t in report.tasks + [t for feat in report.opt_in for t in feat.tasks] if t.category == "triton"}
    assert sorted(tasks) == ["T-triton-gate", "T-triton-helpers"]
    helpers = tasks["T-triton-helpers"]
    assert helpers.details["kernels"] == ["softplus"] and "kernel_units" not in helpers.details
    assert helpers.title.startswith("Port the Triton device functions with the kernels that call them (1 in ")
    assert tasks["T-triton-gate"].details["kernel_units"] == approx(0.5)  # 4 lines: half a unit


_CUDA_KERNEL = """\
#include <cuda_runtime.h>
__global__ void {name}(const float* {x}, float* {y}, const float* {w}, int {n}, float {eps}) {{
  int row = blockIdx.x;
  __shared__ float part[256];
  float acc = 0.0f;
  for (int i = threadIdx.x; i < {n}; i += blockDim.x) {{
    float v = {x}[row * {n} + i];
    acc += v * v;
  }}
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }}
  float rstd = rsqrtf(part[0] / {n} + {eps});
  for (int i = threadIdx.x; i < {n}; i += blockDim.x) {{
    {y}[row * {n} + i] = {x}[row * {n} + i] * rstd * {w}[i];
  }}
}}
"""
_HISTOGRAM = """\
__global__ void histogram_kernel(const int* x, int* h, int n, int bins) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&h[min(max(x[i], 0), bins - 1)], 1);
}
"""


def test_cuda_near_copies_by_content_are_one_op(tmp_path):
    write_tree(tmp_path, {
        "setup.py": """\
            from setuptools import setup
            from torch.utils.cpp_extension import CUDAExtension
            setup(name="ops", ext_modules=[CUDAExtension("ops._C", ["csrc/norm.cu", "csrc/gla/scale.cu"])])
            """,
        "csrc/norm.cu": _CUDA_KERNEL.format(name="row_energy_kernel", x="x", y="y", w="w", n="n", eps="eps") + _HISTOGRAM,
        # the same kernel for another model: renamed, its arguments renamed, one constant changed
        "csrc/gla/scale.cu": _CUDA_KERNEL.format(name="gla_row_scale", x="inp", y="out", w="gamma", n="cols",
                                                 eps="epsilon").replace("256", "512"),
    })
    report = run_scan(Settings(root=tmp_path, cache=False)).report
    files = {f.path: f for f in report.findings + report.off_path if f.rule == "NR1703"}
    assert all(fp and len(fp) % 8 == 0 for f in files.values() for fp in f.details["kernel_fingerprints"])
    (task,) = [t for t in report.tasks + [t for feat in report.opt_in for t in feat.tasks] if t.id.startswith("T-ext-")]
    assert task.details["near_copies"] == ["row_energy_kernel"]  # walked by path: csrc/gla/ first
    assert task.details["ops"] == 2  # row_energy (with its copy) and histogram, not three ops
    # without the sketches the copy is an op of its own, on the curve at full size
    fp = files["csrc/norm.cu"].details["kernel_fingerprints"][0]
    cu = [finding("NR1703", path=f"csrc/{n}.cu", line=2, kernels=1, kernel_loc=40, loc=45, kernel_names=[f"{n}_kernel"],
                  kernel_fingerprints=[fp]) for n in ("alpha", "beta")]
    (folded,), _ = estimate(cu, CATALOG)
    assert folded.details["ops"] == 1 and folded.details["kernel_units"] == approx(1 + COPY_SHARE)
    for f in cu:
        del f.details["kernel_fingerprints"]
    (by_name,), _ = estimate(cu, CATALOG)
    assert by_name.details["ops"] == 2 and by_name.details["kernel_units"] == approx(2)


def test_a_backward_with_its_own_pytorch_reference_stays_a_switch():
    fs = kernels(("ops/mlp.py", "swiglu_fwd_kernel"), ("ops/mlp.py", "swiglu_bwd_kernel_dgu"))
    tasks, _ = estimate(fs, CATALOG, references=frozenset({"swiglu_dgu"}))
    assert {t.id: t.kind for t in tasks} == {"T-triton-swiglu": "rewrite-kernel", "T-triton-swiglu_dgu": "switch-to-reference"}


_CALL_FORM = '''
import triton
import triton.language as tl


def _scale_fwd(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N)
    tl.store(Y + offs, x * 2.0, mask=offs < N)


_scale_fwd = triton.jit(_scale_fwd)
_scale_fwd = triton.heuristics({"BLOCK": lambda args: 128})(_scale_fwd)


@triton.jit
def _scale_bwd(DY, DX, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(DX + offs, tl.load(DY + offs, mask=offs < N) * 2.0, mask=offs < N)


def scale(x, y, n):  # the library's surface launches both (a private kernel nothing launches is dead code)
    _scale_fwd[(1,)](x, y, n)
    _scale_bwd[(1,)](y, x, n)
'''


def test_a_kernel_made_by_a_call_is_a_kernel_like_a_decorated_one(tmp_path):
    # unsloth writes `_cross_entropy_forward = triton.jit(_cross_entropy_forward)`: the finding sits at
    # the call and is measured on the function's body, so the op is costed as the decorator would
    write_tree(tmp_path, {"ops/scale.py": _CALL_FORM})
    report = run_scan(Settings(root=tmp_path, cache=False)).report
    found = {f.details["kernel"]: f for f in report.findings + report.off_path if f.rule == "NR1801"}
    assert sorted(found) == ["_scale_bwd", "_scale_fwd"]
    fwd, bwd = found["_scale_fwd"], found["_scale_bwd"]
    assert fwd.line == 12 and fwd.details["lines"] >= 4 and fwd.details["fingerprint"]
    assert fwd.details["tl_ops"] == 4  # program_id, arange, load, store: the body was measured
    tasks = [t for t in report.tasks + [t for feat in report.opt_in for t in feat.tasks] if t.category == "triton"]
    assert [t.details["kernels"] for t in tasks] == [["_scale_bwd", "_scale_fwd"]]  # one op, forward and backward
