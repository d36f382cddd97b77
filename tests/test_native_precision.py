"""Native build and source precision: what in a CUDA build or a C/C++ tree is a porting concern.

CMake branches the default Linux build skips (an option that defaults to OFF, another platform, a
workaround for one tool version), CUDA headers included only under `#ifdef`, a quoted include of the
project's own `cuda.h`, CUDA files with no device work of their own, device probes in `setup.py`, and
the CUDA settings of a program that is rewritten anyway. Each case scans a small tree end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from neuron_ready.sources import native


def scan(root: Path):
    return run_scan(Settings(root=root, cache=False)).report


def where(report, rule: str) -> dict[tuple[str, int], tuple[str, str | None]]:
    return {(f.path, f.line): (f.context, f.gate) for f in report.findings + report.off_path if f.rule == rule}


# ------------------------------------------------------------------------------------------ CMake

_CMAKE = """\
cmake_minimum_required(VERSION 3.18)
project(ops)
option(WITH_CUDA "Enable CUDA support" OFF)
option(WITH_NCCL "NCCL" ON)
option(WITH_NVTX "NVTX ranges")
if(WITH_CUDA)
  enable_language(CUDA)
  file(GLOB SRCS ${SRCS} csrc/cuda/*.cu)
endif()
if(WITH_NCCL)
  find_package(NCCL REQUIRED)
endif()
if(WITH_NVTX AND UNIX)
  find_package(CUDAToolkit REQUIRED)
endif()
if(${OPS_IS_WINDOWS})
  set(CMAKE_CUDA_FLAGS_RELEASE "${CMAKE_CUDA_FLAGS_RELEASE} -Xcompiler /bigobj")
endif()
if(NOT MSVC)
  set(CMAKE_CUDA_ARCHITECTURES 80)
else()
  set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} /MP")
endif()
if(Boost_VERSION EQUAL 105500)
  set(CUDA_NVCC_FLAGS "${CUDA_NVCC_FLAGS} -DBOOST_NOINLINE")
endif()
add_library(ops SHARED csrc/ops.cpp)
"""


def test_cmake_branches_the_default_build_skips_carry_their_gate():
    gates = {(a, b): where for a, b, where, _feature in native.cmake_gates(native.blank_hash_comments(_CMAKE))}
    assert gates == {
        (6, 9): "a build with `WITH_CUDA` ON (`option(WITH_CUDA ... OFF)`)",
        (13, 15): "a build with `WITH_NVTX` ON (`option(WITH_NVTX ... OFF)`)",  # CMake's default is OFF
        (16, 18): "Windows (`if(${OPS_IS_WINDOWS})`)",
        (21, 23): "Windows (`if(MSVC)`)",  # the else() of if(NOT MSVC)
        (24, 26): "one toolchain version (`if(Boost_VERSION EQUAL 105500)`, a workaround)",
    }
    assert (10, 12) not in gates and (19, 20) not in gates  # an option ON, and the branch Linux takes
    # a `#` inside a quoted argument is text, not a comment that would hide the rest of the file
    written = 'file(WRITE probe.cu "#include <cstdio>\\n"\n  "int main() { return 0; }")\nif(APPLE)\n  set(CUDA_NVCC_FLAGS -x)\nendif()\n'
    assert native.cmake_gates(native.blank_hash_comments(written)) == [(3, 5, "macOS (`if(APPLE)`)", "platform")]


def test_cmake_lines_off_the_default_build_are_listed_not_costed(tmp_path):
    report = scan(tree(tmp_path, {"CMakeLists.txt": _CMAKE, "csrc/ops.cpp": "int f() { return 1; }\n"}))
    got = where(report, "NR1705")
    opt_in = {line for (_p, line), (ctx, gate) in got.items() if ctx == "opt-in"}
    step = {line for (_p, line), (ctx, _g) in got.items() if ctx == "step"}
    assert opt_in == {7, 8, 14, 17, 22, 25}
    assert step == {11, 20}
    assert got[("CMakeLists.txt", 7)][1] == "only on a build with `WITH_CUDA` ON (`option(WITH_CUDA ... OFF)`)"


# ------------------------------------------------------------------------------------------ C/C++ headers

def test_a_cuda_include_only_under_ifdef_with_no_cuda_use_is_only_that_build(tmp_path):
    report = scan(tree(tmp_path, {
        "CMakeLists.txt": "add_library(ops SHARED csrc/version.cpp csrc/handle.h csrc/plain.cpp csrc/guarded_off.cpp csrc/convert.h)\n",
        "csrc/version.cpp": """\
            #include <torch/script.h>
            #ifdef WITH_CUDA
            #include <cuda.h>
            #endif
            int64_t cuda_version() {
            #ifdef WITH_CUDA
              return CUDA_VERSION;
            #else
              return -1;
            #endif
            }
            """,
        "csrc/handle.h": """\
            #ifdef GPU
            #include "cublas_v2.h"
            #endif
            typedef struct layer {
            #ifdef GPU
              cublasHandle_t handle;
            #endif
            } layer;
            """,
        "csrc/plain.cpp": "#include <cuda_runtime.h>\nint n() { int c; cudaGetDeviceCount(&c); return c; }\n",
        "csrc/convert.h": "#ifdef BF16_AVAILABLE\n#include <cuda_bf16.h>\n#endif\nfloat to_float(__nv_bfloat16 v);\n",
        "csrc/guarded_off.cpp": "#ifndef CPU_ONLY\n#include <cuda_runtime.h>\n#endif\nint m() { return 0; }\n",
    }))
    got = where(report, "NR1704")
    assert got[("csrc/version.cpp", 3)] == ("opt-in", "only on a build that sets `WITH_CUDA` (`#ifdef WITH_CUDA`)")
    assert got[("csrc/handle.h", 2)][0] == "step"  # cuBLAS types are used: host CUDA code of the GPU build
    assert got[("csrc/plain.cpp", 1)][0] == "step"
    assert got[("csrc/convert.h", 2)][0] == "step"  # CUDA's bfloat16 type is used
    assert got[("csrc/guarded_off.cpp", 2)][0] == "step"  # `#ifndef CPU_ONLY`: CUDA is the default build


def test_a_quoted_include_of_the_projects_own_cuda_h_is_not_the_toolkit(tmp_path):
    files = {
        "src/cuda.h": "#ifdef GPU\n#include \"cuda_runtime.h\"\nvoid cuda_set_device(int n);\n#endif\n",
        "src/layer.h": "#include \"darknet.h\"\n#include \"cuda.h\"\nvoid forward(float* x);\n",
        "src/nested/pool.h": "#include \"cuda.h\"\nvoid pool(float* x);\n",
        "src/darknet.h": "int version(void);\n",
        "CMakeLists.txt": "add_library(dn SHARED src/layer.h src/nested/pool.h src/cuda.h)\n",
    }
    report = scan(tree(tmp_path / "own", files))
    got = where(report, "NR1704")
    assert got[("src/layer.h", 2)][0] == "off-path"
    assert got[("src/nested/pool.h", 1)][0] == "off-path"  # found under a parent directory
    off = {f.path: f for f in report.off_path}
    assert "the project's own header" in off["src/layer.h"].details["context_reason"]
    # without the project's cuda.h, the same include is the toolkit's
    del files["src/cuda.h"]
    report = scan(tree(tmp_path / "toolkit", files))
    assert where(report, "NR1704")[("src/layer.h", 2)][0] == "step"


# ------------------------------------------------------------------------------------------ CUDA helpers

def test_cuda_files_without_device_work_are_not_port_units(tmp_path):
    report = scan(tree(tmp_path, {
        "setup.py": """\
            from setuptools import setup
            from torch.utils.cpp_extension import CUDAExtension
            setup(name="ops", ext_modules=[CUDAExtension("ops._C", ["csrc/ops.cu", "csrc/index.cuh",
                  "csrc/props.cu", "csrc/warp.cuh", "csrc/atomics.cuh", "csrc/body.cuh", "csrc/layer.cu", "csrc/inst.cu",
                  "csrc/functor.cu", "csrc/meta.cu", "csrc/grouped.cu"])])
            """,
        "csrc/ops.cu": "__global__ void scale(float* x) { x[threadIdx.x] *= 2; }\n",
        "csrc/index.cuh": """\
            template <typename T> struct Offset {
              static __host__ __device__ int get(int idx, const int* strides) { return idx * strides[0]; }
            };
            """,
        "csrc/props.cu": """\
            #include <cuda_runtime.h>
            cudaDeviceProp props;
            cudaDeviceProp* get() { cudaGetDeviceProperties(&props, 0); return &props; }
            """,
        # device helpers that compute from their arguments go with the kernels that include them
        "csrc/warp.cuh": "__device__ float sum(float v) { return v + __shfl_xor_sync(0xffffffff, v, 1); }\n",
        "csrc/atomics.cuh": "__device__ void add(float* a, float v) { atomicAdd(a, v); }\n#define CHECK(x) x\n",
        # a kernel's body kept as a device function in a header (flash-attn's flash_fwd_kernel.h) stays
        "csrc/body.cuh": "__device__ void row_block(float* x) { __shared__ float s[32]; x[threadIdx.x] = s[0]; }\n",
        "csrc/layer.cu": "#include <cudnn.h>\nvoid f(cudnnHandle_t h) { cudnnActivationForward(h, 0, 0, 0, 0, 0, 0, 0); }\n",
        "csrc/inst.cu": "template<> void run_<cutlass::half_t, 64>(P& p, cudaStream_t s) { run64<cutlass::half_t>(p, s); }\n",
        "csrc/functor.cu": """\
            struct AdamFunctor {
              __device__ void operator()(int n, float* p) { p[blockIdx.x * blockDim.x + threadIdx.x] -= 1; }
            };
            """,
        # CUTLASS's host types (layouts, TensorRef, coordinates) on the CPU compile no kernel (xformers'
        # sparse24/meta_utils.cu, round 15); a CUTLASS device operator compiles one
        "csrc/meta.cu": """\
            #include <cutlass/layout/matrix.h>
            using Layout = cutlass::layout::RowMajor;
            void reorder(cutlass::TensorRef<int, Layout> dst, cutlass::MatrixCoord dim) { dst.at({0, 0}) = dim.row(); }
            """,
        "csrc/grouped.cu": "using Gemm = cutlass::gemm::device::GemmGrouped<Kernel>;\nvoid run(Gemm& g) { g.run(); }\n",
    }))
    files = {p for (p, _l) in where(report, "NR1703")}
    assert files == {"csrc/ops.cu", "csrc/body.cuh", "csrc/layer.cu", "csrc/inst.cu", "csrc/functor.cu",
                     "csrc/grouped.cu"}


# ------------------------------------------------------------------------------------------ build scripts

def test_a_device_probe_in_setup_py_is_build_configuration(tmp_path):
    probe = """\
        import torch
        from setuptools import setup
        if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8:
            arch = "80"
        setup(name="pkg")
        """
    report = scan(tree(tmp_path, {
        "setup.py": probe,
        "pkg/__init__.py": "",
        "train.py": """\
            import torch
            model = torch.nn.Linear(4, 4).cuda()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            bf16 = torch.cuda.get_device_capability()[0] >= 8
            for step in range(10):
                loss = model(torch.randn(2, 4).cuda()).sum()
                loss.backward()
                opt.step()
            """,
    }))
    by_path = {(f.path, f.rule): f for f in report.findings + report.off_path if f.rule == "NR1005"}
    assert by_path[("setup.py", "NR1005")].context == "off-path"
    assert "build script" in by_path[("setup.py", "NR1005")].details["context_reason"]
    assert by_path[("train.py", "NR1005")].context == "step"


_TRAIN = """\
    import torch
    import ops
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        loss = ops.scale(model(torch.randn(2, 4))).sum()
        loss.backward()
        opt.step()
    """
_KERNEL = "__global__ void scale_kernel(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }\n"
_OPS = {
    "ops/__init__.py": "from . import _C\ndef scale(x):\n    return _C.scale(x)\n",
    "csrc/ops.cpp": "#include <torch/extension.h>\nint scale() { return 0; }\n",
    "csrc/cpu/scale_cpu.cpp": "int scale_cpu() { return 0; }\n",
    "csrc/cuda/scale_cuda.cu": _KERNEL,
}

_IFEXP_SETUP = """\
    import os
    import torch
    from setuptools import setup
    from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension
    WITH_CUDA = torch.cuda.is_available() and CUDA_HOME is not None
    suffices = ["cpu", "cuda"] if WITH_CUDA or os.getenv("FORCE_CUDA", "0") == "1" else ["cpu"]
    def get_extensions():
        extensions = []
        for suffix in suffices:
            sources = ["csrc/ops.cpp", "csrc/cpu/scale_cpu.cpp"]
            if suffix == "cuda":
                sources += ["csrc/cuda/scale_cuda.cu"]
            Extension = CppExtension if suffix == "cpu" else CUDAExtension
            extensions += [Extension(f"ops._C_{suffix}", sources)]
        return extensions
    setup(name="ops", ext_modules=get_extensions(), cmdclass={"build_ext": BuildExtension})
    """

_BRANCH_SETUP = """\
    import os
    import torch
    from setuptools import setup
    from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension
    def get_extensions():
        extension = CppExtension
        sources = ["csrc/ops.cpp", "csrc/cpu/scale_cpu.cpp"]
        args = {"cxx": ["-O3"]}
        if torch.cuda.is_available() and CUDA_HOME is not None or os.getenv("FORCE_CUDA", "0") == "1":
            extension = CUDAExtension
            sources += ["csrc/cuda/scale_cuda.cu"]
            args["nvcc"] = ["-O3"]
        return [
            extension(
                "ops._C",
                sources,
                extra_compile_args=args,
            )
        ]
    setup(name="ops", ext_modules=get_extensions(), cmdclass={"build_ext": BuildExtension})
    """

_IF_ELSE_SETUP = """\
    from setuptools import setup
    from torch.utils.cpp_extension import CUDA_HOME
    if CUDA_HOME is not None:
        from torch.utils.cpp_extension import CUDAExtension
        ext = CUDAExtension("ops._C", ["csrc/ops.cpp", "csrc/cuda/scale_cuda.cu"])
    else:
        from torch.utils.cpp_extension import CppExtension
        ext = CppExtension("ops._C", ["csrc/ops.cpp", "csrc/cpu/scale_cpu.cpp"])
    setup(name="ops", ext_modules=[ext])
    """

_IMPORTED_AS_SETUP = """\
    from setuptools import setup
    from torch.utils.cpp_extension import CUDA_HOME
    if CUDA_HOME is None:
        from torch.utils.cpp_extension import CppExtension as Builder
    else:
        from torch.utils.cpp_extension import CUDAExtension as Builder
    setup(name="ops", ext_modules=[Builder("ops._C", ["csrc/ops.cpp", "csrc/cuda/scale_cuda.cu"])])
    """


@pytest.mark.parametrize("setup_py, lines", [
    (_IFEXP_SETUP, {13}),  # the CUDA arm of `CppExtension if suffix == "cpu" else CUDAExtension`
    (_BRANCH_SETUP, {10, 14}),  # `extension = CUDAExtension` under the CUDA test, and the call of the chosen class
    (_IF_ELSE_SETUP, {5}),  # a CUDAExtension call whose `else` builds a CppExtension of the same module
    (_IMPORTED_AS_SETUP, {7}),  # the call of a name imported as CppExtension or CUDAExtension by the branch
])
def test_a_cuda_build_chosen_beside_a_cpu_build_is_a_build_time_option(tmp_path, setup_py, lines):
    report = scan(tree(tmp_path, {"setup.py": setup_py, "train.py": _TRAIN, **_OPS}))
    builds = {line: f for f in report.findings + report.off_path
              if f.rule == "NR1701" and f.path == "setup.py" for line in [f.line]}
    assert set(builds) == lines
    for f in builds.values():
        assert f.context == "opt-in", (f.line, f.context)
        assert f.gate == "only on a build that picks CUDA (`setup.py` builds a `CppExtension` otherwise)"
        assert f.details["feature"] == "cuda-build"
        assert "build-time choice" in f.details["context_reason"]
    # the kernels the CUDA build would compile still need their port
    [kernel] = [f for f in report.findings if f.path == "csrc/cuda/scale_cuda.cu" and f.rule == "NR1703"]
    assert kernel.context == "step"


@pytest.mark.parametrize("setup_py", [
    """\
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension
    setup(name="ops", ext_modules=[CUDAExtension("ops._C", ["csrc/ops.cpp", "csrc/cuda/scale_cuda.cu"])],
          cmdclass={"build_ext": BuildExtension})
    """,
    # only an environment variable skips the CUDA build, which leaves no extension at all
    """\
    import os
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
    ext_modules = []
    if os.getenv("BUILD_NO_CUDA", "0") != "1":
        ext_modules.append(CUDAExtension("ops._C", ["csrc/ops.cpp", "csrc/cuda/scale_cuda.cu"]))
    setup(name="ops", ext_modules=ext_modules, cmdclass={"build_ext": BuildExtension})
    """,
    # a CPU extension of other ops beside the CUDA one is no alternative to it
    """\
    import torch
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
    ext_modules = [CppExtension("ops._host", ["csrc/cpu/scale_cpu.cpp"])]
    if torch.cuda.is_available():
        ext_modules.append(CUDAExtension("ops._C", ["csrc/ops.cpp", "csrc/cuda/scale_cuda.cu"]))
    setup(name="ops", ext_modules=ext_modules, cmdclass={"build_ext": BuildExtension})
    """,
    # a choice the file itself decides for CUDA (`cuda = True`) is the build, in either form
    """\
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
    cuda = True
    Extension = CUDAExtension if cuda else CppExtension
    setup(name="ops", ext_modules=[Extension("ops._C", ["csrc/ops.cpp", "csrc/cuda/scale_cuda.cu"])],
          cmdclass={"build_ext": BuildExtension})
    """,
    """\
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
    WITH_CUDA = True
    extension = CppExtension
    if WITH_CUDA:
        extension = CUDAExtension
    setup(name="ops", ext_modules=[extension("ops._C", ["csrc/ops.cpp", "csrc/cuda/scale_cuda.cu"])],
          cmdclass={"build_ext": BuildExtension})
    """,
])
def test_an_unconditional_cuda_build_or_one_with_no_cpu_build_stays(tmp_path, setup_py):
    report = scan(tree(tmp_path, {"setup.py": setup_py, "train.py": _TRAIN, **_OPS}))
    builds = [f for f in report.findings + report.off_path if f.rule == "NR1701" and f.path == "setup.py"]
    assert builds
    for build in builds:
        assert build.context == "step", build.details.get("context_reason")
        assert build.gate is None


# ------------------------------------------------------------------------------------------ programs

@pytest.mark.parametrize("folder, joined", [("", True), ("tune/", False)])
def test_cmake_cuda_settings_in_a_rewritten_programs_tree_go_with_the_rewrite(tmp_path, folder, joined):
    report = scan(tree(tmp_path, {
        f"{folder}Makefile": "train: train.cu\n\tnvcc -O3 -o train train.cu\n",
        f"{folder}train.cu": "__global__ void step(float* w) { w[threadIdx.x] -= 0.1f; }\nint main() { return 0; }\n",
        "cmake/Cuda.cmake": "find_package(CUDA 7.0 REQUIRED)\nset(CUDA_NVCC_FLAGS \"${CUDA_NVCC_FLAGS} -Xcompiler -fPIC\")\n",
    }))
    [program] = [t for t in report.tasks if t.kind == "rewrite-program"]
    paths = {report.findings[i].path for i in program.findings}
    # under the program's folder the build goes with the rewrite; elsewhere it stays a task of its own
    assert paths == ({f"{folder}train.cu", "cmake/Cuda.cmake"} if joined else {f"{folder}train.cu"})
    assert bool([t for t in report.tasks if t.id == "T-rule-NR1705"]) is not joined
    assert "in 1 file" in program.title  # the build is replaced, not a file to port
