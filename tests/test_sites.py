"""One edit, one item (effort.py `_Planner.sites`, docs/effort-model.md "Sites"): a further line of an
edit a finding of the same task already counts keeps its context and task, names that finding in
`part_of`, and is listed under it (text, Markdown, SARIF), never as an item of its own."""

from __future__ import annotations

import json
from pathlib import Path

from scanning import write_tree as tree
from test_cuda_checks import TRAIN
from neuron_ready.catalog import load_catalog
from neuron_ready.config import Settings
from neuron_ready.effort import estimate
from neuron_ready.engine import run_scan
from neuron_ready.model import Finding
from neuron_ready.render import common, markdown, sarif, text


def scan(root: Path):
    return run_scan(Settings(root=root, cache=False)).report


def sites(report) -> dict[tuple[str, int], str]:
    return {(f.rule, f.line): f.part_of for f in report.findings}


def task_of(report, rule: str, line: int) -> str:
    i = next(i for i, f in enumerate(report.findings) if (f.rule, f.line) == (rule, line))
    return next(t.id for t in report.tasks if i in t.findings)


TRITON_MODEL = """\
    import torch
    import triton
    import triton.language as tl

    @triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])
    @triton.jit
    def _double(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)

    def fused(x):
        assert x.is_cuda
        y = x.half()
        _double[(1,)](y, y.numel())
        return y.float()

    class Net(torch.nn.Linear):
        def __init__(self):
            super().__init__(4, 4)

        def forward(self, x):
            return fused(super().forward(x))
    """


def test_a_triton_kernels_decorator_launch_and_wrappers_check_are_sites_of_the_kernel(tmp_path):
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": TRITON_MODEL}))
    kernel = next(f for f in report.findings if f.rule == "NR1801")
    got = sites(report)
    assert got[("NR1801", kernel.line)] == ""
    assert got[("NR1802", 5)] == got[("NR1803", 14)] == f"NR1801 model.py:{kernel.line}"  # the launch calls the new kernel
    # the first finding of its task in its function is the launch, itself a site: the chain ends at the kernel
    assert got[("NR1019", 12)] == f"NR1801 model.py:{kernel.line}"
    tid = task_of(report, "NR1801", kernel.line)
    assert {task_of(report, r, n) for r, n in (("NR1802", 5), ("NR1803", 14), ("NR1019", 12))} == {tid}
    d = report.to_dict()
    assert got[("NR1805", 2)] == f"NR1801 model.py:{kernel.line}"  # the import goes with the kernel
    assert d["summary"]["sites"] == 4 and d["summary"]["items"] == d["summary"]["findings"] - 4
    assert [f["part_of"] for f in d["findings"] if f["rule"] == "NR1802"] == [f"NR1801 model.py:{kernel.line}"]


DEVICE_MODEL = """\
    import torch

    def get_device(device="auto"):
        if device == "auto":
            device = "cuda"
        device = torch.device(device)
        if device.type == torch.device("cuda").type and not torch.cuda.is_available():
            return torch.device("cpu")
        return device

    def count():
        return torch.cuda.device_count()

    def describe():
        device = torch.device("cuda")
        return device, torch.cuda.get_device_capability()

    def pick():
        if torch.cuda.device_count() > 1:
            return torch.device("cuda:1")
        return torch.device("cpu")

    class Net(torch.nn.Linear):
        def __init__(self):
            super().__init__(4, 4)
            self.where = get_device()
            self.n = count()
            self.d = describe()
            self.p = pick()

        def forward(self, x):
            return super().forward(x.cuda())

        def extra(self, x):
            return x.cuda()
    """


def test_a_cuda_probe_beside_the_device_it_selects_is_a_site_and_plumbing_elsewhere_is_not(tmp_path):
    report = scan(tree(tmp_path, {"train.py": TRAIN.replace("model(torch.ones(2, 4))", "model.extra(model(torch.ones(2, 4)))"),
                                  "model.py": DEVICE_MODEL}))
    got = sites(report)
    # the probe picks between "cuda" and the CPU: a site of the nearest device literal (its own line),
    # which is itself a further line of the function's one device choice: both name its first literal
    assert got[("NR1005", 7)] == got[("NR1004", 7)] == "NR1004 model.py:5"
    assert got[("NR1004", 5)] == ""
    assert got[("NR1005", 12)] == ""  # a probe in a function naming no device: its own edit
    assert got[("NR1005", 16)] == ""  # it describes the device, chooses nothing
    assert got[("NR1005", 19)] == "NR1004 model.py:20"  # it chooses between cuda:1 and the CPU
    assert got[("NR1001", 32)] == "" and got[("NR1001", 35)] == ""  # each `.cuda()` in its own function
    out = text.render(report)
    assert "also at model.py:6 (NR1004), model.py:7 (NR1004), model.py:7 (NR1005)" in out
    assert not any("NR1005" in line and ":7:" in line for line in out.splitlines())  # not an item of its own


SHAPES_MODEL = """\
    import torch

    def assign(scores, boxes):
        fg = (scores > 0.5).nonzero(as_tuple=True)
        picked = boxes[fg]
        weights = scores[scores > 0.5]
        return picked * weights[:, None]

    def prune(x):
        return x[x > 0]

    class Net(torch.nn.Linear):
        def __init__(self):
            super().__init__(4, 4)

        def forward(self, x):
            y = super().forward(x)
            return assign(y[:, 0], y).sum() + prune(y).sum()
    """


def test_further_dynamic_shapes_of_one_function_are_sites_of_its_first(tmp_path):
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": SHAPES_MODEL}))
    shapes = sorted((f.scope, f.line, f.part_of) for f in report.findings if f.category == "dynamic-shape")
    first = next((line, rule) for scope, line, _ in shapes if scope == "assign"
                 for rule in [next(f.rule for f in report.findings if f.line == line and f.category == "dynamic-shape")])
    in_assign = [(line, part) for scope, line, part in shapes if scope == "assign"]
    assert len(in_assign) == 2 and in_assign[0] == (first[0], "")
    assert all(part == f"{first[1]} model.py:{first[0]}" for _line, part in in_assign[1:])
    assert [part for scope, _line, part in shapes if scope == "prune"] == [""]  # another function: its own item
    assert len({task_of(report, f.rule, f.line) for f in report.findings if f.scope == "assign"}) == 1


CMAKE = """\
    cmake_minimum_required(VERSION 3.18)
    project(demo LANGUAGES CXX CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} --expt-relaxed-constexpr")
    set(CMAKE_CUDA_ARCHITECTURES 80)
    add_library(demo SHARED kernel.cu)
    """

KERNEL = """\
    __global__ void scale(float *x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= 2.0f;
    }
    """


def test_cuda_settings_of_one_build_file_after_the_first_are_sites_of_it(tmp_path):
    report = scan(tree(tmp_path, {"CMakeLists.txt": CMAKE, "kernel.cu": KERNEL}))
    build = sorted((f.line, f.part_of) for f in report.findings if f.path == "CMakeLists.txt")
    assert build == [(2, "")] + [(n, "NR1705 CMakeLists.txt:2") for n in (3, 4, 5, 6)]
    assert sites(report)[("NR1703", 1)] == ""  # the kernel source is the port, an item
    assert len({task_of(report, f.rule, f.line) for f in report.findings if f.path == "CMakeLists.txt"}) == 1


def test_renderers_list_a_site_under_its_primary(tmp_path):
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": TRITON_MODEL}))
    n = len(report.findings)
    out = text.render(report)
    assert "also at model.py:2 (NR1805), model.py:5 (NR1802), model.py:12 (NR1019), model.py:14 (NR1803)\n" in out
    assert f"{n - 4} findings in" in out and "4 more sites of these edits" in out
    assert not any(f" {r} " in line for line in out.splitlines() for r in ("NR1802", "NR1019", "NR1803"))
    assert " 2:1  NR1805 " not in out  # (model.py:3's NR1805 is listed off the path: it repeats that import)
    md = markdown.render(report)
    assert "also at `model.py:2` (NR1805), `model.py:5` (NR1802), `model.py:12` (NR1019), `model.py:14` (NR1803) |" in md
    assert f"{n - 4} findings (+4 sites of their edits)" in md
    # no row is NR1802's, so its remedy and link are in the row of the kernel it is a site of
    assert md.count(f"[NR1802]({common.rule_url('NR1802')}): ") == 1
    results = json.loads(sarif.render(report))["runs"][0]["results"]
    assert len(results) == n - 4 and not {"NR1805", "NR1802", "NR1019", "NR1803"} & {r["ruleId"] for r in results}
    related = {r["ruleId"]: [x["physicalLocation"]["region"]["startLine"] for x in r.get("relatedLocations", ())]
               for r in results}
    assert related["NR1801"] == [2, 5, 12, 14]


def test_the_html_report_counts_items_and_names_their_sites(tmp_path):
    from neuron_ready.render import html

    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": TRITON_MODEL}))
    page = html.render(report)
    assert f"default configuration ({len(report.findings) - 4})" in page
    assert "also at model.py:2 (NR1805), model.py:5 (NR1802)" in page and "model.py:12 (NR1019)" in page and "model.py:14 (NR1803)" in page


LAUNCH_SETUP = """\
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    setup(name="ops", ext_modules=[CUDAExtension("ops._ext", ["csrc/scale.cu", "csrc/fused.cu", "csrc/add_one.cu"])],
          cmdclass={"build_ext": BuildExtension})
    """

SCALE_KERNEL_HEADER = """\
    #pragma once
    template <typename T>
    __global__ void scale_kernel(T *x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= 2;
    }
    """

SCALE_LAUNCHER = """\
    #include <ATen/cuda/CUDAContext.h>
    #include "common/scale_kernel.cuh"

    void scale_launcher(float *x, int n) {
        cudaStream_t stream = at::cuda::getCurrentCUDAStream();
        scale_kernel<float><<<(n + 255) / 256, 256, 0, stream>>>(x, n);
    }
    """

FUSED = """\
    #include "common/scale_kernel.cuh"

    __global__ void fused_kernel(float *x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] += 1.0f;
    }

    void fused_launcher(float *x, int n) {
        scale_kernel<float><<<(n + 255) / 256, 256>>>(x, n);
        fused_kernel<<<(n + 255) / 256, 256>>>(x, n);
    }
    """

# no __global__ of its own, but a kernel's body: a functor the header's generic kernel runs
FUNCTOR = """\
    #include "common/scale_kernel.cuh"

    template <typename Op>
    void apply(float *x, int n, Op op);

    struct AddOne {
        __device__ void operator()(float *x, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) x[i] += 1.0f;
        }
    };

    void add_one(float *x, int n) { apply(x, n, AddOne()); }
    """


def test_a_cuda_launcher_without_kernels_is_a_site_of_the_included_kernels_and_kernel_code_stays_an_item(tmp_path):
    report = scan(tree(tmp_path, {"setup.py": LAUNCH_SETUP, "csrc/common/scale_kernel.cuh": SCALE_KERNEL_HEADER,
                                  "csrc/scale.cu": SCALE_LAUNCHER, "csrc/fused.cu": FUSED, "csrc/add_one.cu": FUNCTOR}))
    per_file = {f.path: f for f in report.findings if f.rule == "NR1703"}
    header = per_file["csrc/common/scale_kernel.cuh"]
    assert per_file["csrc/scale.cu"].part_of == f"NR1703 {header.path}:{header.line}"  # 0 kernels: the launcher
    assert header.part_of == "" and per_file["csrc/fused.cu"].part_of == ""  # a kernel of its own: an item
    assert per_file["csrc/add_one.cu"].part_of == ""  # a kernel's body (reads threadIdx): an item
    tids = {task_of(report, "NR1703", f.line) for f in per_file.values()}
    assert len(tids) == 1
    assert "also at csrc/scale.cu:5 (NR1703)" in text.render(report)  # listed under the kernels' header


LIBRARY_MODEL = """\
    import torch
    from flash_attn import flash_attn_func
    import flashinfer
    from attn import attend

    class Net(torch.nn.Linear):
        def __init__(self):
            super().__init__(4, 4)

        def forward(self, x):
            y = super().forward(x)
            return attend(flash_attn_func(y, y, y))
    """

LIBRARY_ATTN = """\
    import torch
    from flash_attn.bert_padding import unpad_input
    import flash_attn_2_cuda
    import sageattention

    def attend(x):
        flash_attn_2_cuda.fwd(x)
        sageattention.sageattn(x, x, x)
        return unpad_input(x, x > 0)[0]
    """


def test_further_imports_of_one_gpu_library_are_sites_of_its_first_across_files(tmp_path):
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": LIBRARY_MODEL, "attn.py": LIBRARY_ATTN}))
    lib = sorted((f.path, f.line, f.rule, f.symbol, f.part_of) for f in report.findings if f.category == "gpu-library")
    got = {(p, n): part for p, n, _r, _s, part in lib}
    # flash_attn in attn.py (first by path) is the item; model.py's import of it follows its swap
    assert got[("attn.py", 2)] == "" and got[("model.py", 2)] == "NR1901 attn.py:2"
    # flash_attn_2_cuda is another module of the catalog's rule: its own item; so are the uses
    assert got[("attn.py", 3)] == "" and got[("attn.py", 7)] == "" and got[("model.py", 12)] == ""
    assert got[("attn.py", 9)] == ""
    # two libraries of one task (NR1904: FlashInfer, SageAttention) are two swaps: two items
    assert got[("attn.py", 4)] == "" and got[("model.py", 3)] == ""
    assert task_of(report, "NR1901", 2) == "T-lib-NR1901"
    d = report.to_dict()
    assert d["summary"]["sites"] == 1 and d["summary"]["items"] == d["summary"]["findings"] - 1
    assert "also at model.py:2 (NR1901)" in text.render(report)


def test_the_import_that_needs_a_library_is_its_primary_and_each_context_or_setting_keeps_its_own():
    def imp(path: str, line: int, snippet: str, fallback: bool = False, context: str = "step") -> Finding:
        symbol = snippet.split()[1]
        return Finding("NR1906", "gpu-library", path, line, 1, "m", "r", fallback=fallback, symbol=symbol,
                       snippet=snippet, context=context)

    findings = [imp("a/guard.py", 3, "import bitsandbytes", fallback=True), imp("b/optim.py", 1, "import bitsandbytes.optim"),
                imp("c/layers.py", 2, "from bitsandbytes.nn import Linear4bit"),
                imp("d/extra.py", 1, "import bitsandbytes", context="opt-in")]
    estimate(findings, load_catalog())
    # the first import with no fallback is the item, not the guarded import before it in path order
    assert [f.part_of for f in findings] == ["NR1906 b/optim.py:1", "", "NR1906 b/optim.py:1", ""]
    # an import in a file that calls the library comes before one in a file that only imports it
    findings.append(Finding("NR1906", "gpu-library", "c/layers.py", 9, 1, "m", "r", symbol="bitsandbytes.nn.Linear4bit",
                            snippet="Linear4bit(4, 4)", scope="build", context="step"))
    tasks, _est = estimate(findings, load_catalog())
    assert [f.part_of for f in findings] == ["NR1906 c/layers.py:2", "NR1906 c/layers.py:2", "", "", ""]
    assert [t.findings for t in tasks] == [[0, 1, 2, 3, 4]]  # sites keep their task, and so its cost

    # imports under two default settings (attn_impl, loss) are two switches of one task: two items
    switched = [imp("attention.py", 13, "from flash_attn import flash_attn_func"),
                imp("model.py", 16, "from flash_attn.losses.cross_entropy import CrossEntropyLoss"),
                imp("mpt.py", 5, "from flash_attn.losses.cross_entropy import CrossEntropyLoss")]
    for f, option in zip(switched, ("attn_impl", "loss", "loss")):
        f.rule = "NR1901"
        f.details.update(default_option=option, default_alternative=True)
    tasks, _est = estimate(switched, load_catalog())
    assert [t.kind for t in tasks] == ["switch-to-reference"]
    assert [f.part_of for f in switched] == ["", "", "NR1901 model.py:16"]


def test_a_long_list_of_sites_shows_the_first_few_and_counts_the_rest(tmp_path):
    """A library imported in twelve files: the item lists SITES_SHOWN of its eleven sites and says how
    many more, in the terminal and in the PR comment; the JSON keeps every `part_of`."""
    files = {f"layers/l{i:02d}.py": "import torch\nfrom flash_attn import flash_attn_func\n\n\n"
             "def attend(q, k, v):\n    return flash_attn_func(q, k, v)\n" for i in range(12)}
    files["train.py"] = "import torch\n" + "".join(f"from layers import l{i:02d}\n" for i in range(12)) + (
        "\nif __name__ == '__main__':\n    q = torch.randn(2, 2, 4, 8, requires_grad=True)\n"
        + "".join(f"    l{i:02d}.attend(q, q, q).sum().backward()\n" for i in range(12)))
    report = scan(tree(tmp_path, files))
    imports = [f for f in report.findings if f.rule == "NR1901" and f.snippet.startswith("from ")]
    assert len(imports) == 12 and sum(1 for f in imports if f.part_of) == 11
    shown = common.SITES_SHOWN
    out, md = text.render(report), markdown.render(report)
    assert f"layers/l{shown:02d}.py:2 (NR1901) and {11 - shown} more" in out
    assert f"`layers/l{shown:02d}.py:2` (NR1901) and {11 - shown} more" in md
    assert f"layers/l{shown + 1:02d}.py:2" not in out


SUPPORT_SETUP = """\
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    setup(name="ops", ext_modules=[CUDAExtension("ops._ext", ["csrc/a.cu", "csrc/b.cu", "csrc/c.cu"])],
          cmdclass={"build_ext": BuildExtension})
    """

# device helpers with inline PTX, no per-file finding of their own (helper_header): three PTX lines
PTX_HEADER = """\
    #pragma once
    __device__ unsigned clock32() {
      unsigned t;
      asm volatile("mov.u32 %0, %%clock;" : "=r"(t));
      return t;
    }
    __device__ unsigned sm_id() {
      unsigned id;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
      return id;
    }
    __device__ void fence() { asm volatile("membar.gl;"); }
    """

# macros and a host-device helper only: what they hold expands into the kernels that include it
MACRO_HEADER = """\
    #pragma once
    #include <c10/cuda/CUDAGuard.h>
    #define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
    #define CUDA_GET_THREAD_ID(tid, n) \\
        const int tid = blockIdx.x * blockDim.x + threadIdx.x; \\
        if (tid >= n) return
    template <typename T>
    inline __device__ __host__ T ceil_div(T a, T b) { return (a + b - 1) / b; }
    """

# a device function of its own (it reads the lane it runs on): ported work, not glue
DEVICE_HEADER = """\
    #pragma once
    #include <cuda_runtime.h>
    __device__ float lane_value(const float *x) { return x[threadIdx.x % 32]; }
    """

KERNEL_A = """\
    #include "include/macros.cuh"
    #include "include/ptx.cuh"

    __global__ void a_kernel(float *x, int n) {
        CUDA_GET_THREAD_ID(i, n);
        unsigned s;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
        asm volatile("membar.cta;");
        x[i] += clock32() + s;
    }

    void a(float *x, int n) { a_kernel<<<ceil_div(n, 256), 256>>>(x, n); }
    """

KERNEL_B = """\
    #include "include/macros.cuh"

    __global__ void b_kernel(float *x, int n) {
        CUDA_GET_THREAD_ID(i, n);
        x[i] *= 2;
    }

    void b(float *x, int n) { b_kernel<<<ceil_div(n, 256), 256>>>(x, n); }
    """

KERNEL_C = """\
    #include "include/device.cuh"

    __global__ void c_kernel(float *x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] = lane_value(x);
    }

    void c(float *x, int n) { c_kernel<<<(n + 255) / 256, 256>>>(x, n); }
    """


def test_ptx_lines_of_one_source_are_sites_and_a_macro_header_of_kernels_too_but_device_code_stays(tmp_path):
    report = scan(tree(tmp_path, {"setup.py": SUPPORT_SETUP, "csrc/include/ptx.cuh": PTX_HEADER,
                                  "csrc/include/macros.cuh": MACRO_HEADER, "csrc/include/device.cuh": DEVICE_HEADER,
                                  "csrc/a.cu": KERNEL_A, "csrc/b.cu": KERNEL_B, "csrc/c.cu": KERNEL_C}))
    ptx = {(f.path, f.line): f.part_of for f in report.findings if f.rule == "NR1706"}
    # a header with no per-file finding: its first PTX line is the item, the two others its sites
    assert [ptx[("csrc/include/ptx.cuh", n)] for n in (4, 9, 12)] == [""] + ["NR1706 csrc/include/ptx.cuh:4"] * 2
    assert "csrc/include/ptx.cuh" not in {f.path for f in report.findings if f.rule == "NR1703"}
    per_file = {f.path: f for f in report.findings if f.rule == "NR1703"}
    a = per_file["csrc/a.cu"]
    assert a.part_of == "" and per_file["csrc/b.cu"].part_of == "" and per_file["csrc/c.cu"].part_of == ""
    # a kernel source's PTX lines: sites of the file's own finding, which carries its size
    assert [ptx[("csrc/a.cu", n)] for n in (7, 8)] == [f"NR1703 csrc/a.cu:{a.line}"] * 2
    # macros and a host-device helper: a site of the first kernel file (by path) that includes it
    macros = per_file["csrc/include/macros.cuh"]
    assert macros.part_of == f"NR1703 csrc/a.cu:{a.line}" and not macros.details.get("device_code")
    # a device function of its own: an item
    device = per_file["csrc/include/device.cuh"]
    assert device.part_of == "" and device.details.get("device_code") is True
    tids = {task_of(report, "NR1703", f.line) for f in per_file.values()}
    assert len(tids) == 1


def test_a_launch_of_a_kernel_defined_in_another_file_is_its_site_unless_the_name_is_ambiguous(tmp_path):
    kernel = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef _double_kernel(x_ptr, n):\n"
              "    i = tl.program_id(0)\n    tl.store(x_ptr + i, tl.load(x_ptr + i) * 2)\n")
    caller = ("import torch\nimport triton\nimport other\nfrom kernels import _double_kernel\n\ndef fused(x):\n"
              "    _double_kernel[(triton.cdiv(x.numel(), 128),)](x, x.numel())\n    return {ret}\n\n"
              "class Net(torch.nn.Linear):\n    def __init__(self):\n        super().__init__(4, 4)\n\n"
              "    def forward(self, x):\n        return fused(super().forward(x))\n")
    own = kernel + "\ndef run(x):\n    _double_kernel[(1,)](x, x.numel())\n    return x\n"
    report = scan(tree(tmp_path / "one", {"train.py": TRAIN, "kernels.py": kernel, "other.py": "",
                                          "model.py": caller.format(ret="x")}))
    got = sites(report)
    assert got[("NR1803", 7)] == "NR1801 kernels.py:4"
    # the kernel file's Triton import goes with its kernel; the caller's (for `triton.cdiv`) is the
    # Triton plumbing task's own item
    assert got[("NR1805", 1)] == "NR1801 kernels.py:4" and got[("NR1805", 2)] == ""
    assert task_of(report, "NR1805", 2) != task_of(report, "NR1801", 4)
    # a second kernel of that name on the path, launched in its own file: that launch is its site, but
    # which of the two the first launch calls is not the scan's to guess
    report = scan(tree(tmp_path / "two", {"train.py": TRAIN, "kernels.py": kernel, "other.py": own,
                                          "model.py": caller.format(ret="other.run(x)")}))
    got = sites(report)
    assert {f.path for f in report.findings if f.rule == "NR1801"} == {"kernels.py", "other.py"}
    assert got[("NR1803", 7)] == "" and got[("NR1803", 10)] == "NR1801 other.py:4"


ROPE_MODEL = """\
    import torch

    def apply_rotary(xq, xk, freqs):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        return torch.view_as_real(xq_ * freqs).flatten(3), torch.view_as_real(xk_ * freqs).flatten(3)

    def profile(x):
        torch.cuda.synchronize()
        y = x * 2
        torch.cuda.synchronize()
        return y

    def other(x):
        torch.cuda.synchronize()
        return x

    class Net(torch.nn.Linear):
        def __init__(self):
            super().__init__(4, 4)

        def forward(self, x):
            y = profile(other(super().forward(x)))
            q, k = apply_rotary(y, y, torch.ones(2, dtype=torch.complex64))
            return q + k
    """


def test_further_findings_of_one_rule_in_one_function_are_sites_of_its_first(tmp_path):
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": ROPE_MODEL}))
    got = {(f.rule, f.line): f.part_of for f in report.findings if f.path == "model.py"}
    rope = sorted(line for rule, line in got if rule == "NR1213")
    assert rope == [4, 5, 6, 24]
    # two view_as_complex and a view_as_real of one rotary function: one rewrite
    assert got[("NR1213", 4)] == "" and got[("NR1213", 5)] == got[("NR1213", 6)] == "NR1213 model.py:4"
    assert got[("NR1213", 24)] == ""  # the complex dtype in forward: another function, its own item
    sync = sorted(line for rule, line in got if rule == "NR1007")
    assert sync == [9, 11, 15]
    assert got[("NR1007", 9)] == "" and got[("NR1007", 11)] == "NR1007 model.py:9"  # one profiler: one removal
    assert got[("NR1007", 15)] == ""  # another function: another edit, its own item
    d = report.to_dict()
    assert d["summary"]["sites"] == sum(1 for v in got.values() if v)


BINDING_SETUP = """\
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    setup(name="ops", ext_modules=[CUDAExtension("ops._ext", [
        "csrc/Adam.cpp", "csrc/AdamCUDA.cu", "csrc/rw.cpp", "csrc/cuda/rw_cuda.cu", "csrc/ext.cpp"])],
          cmdclass={"build_ext": BuildExtension})
    """

BINDING = """\
    #include <torch/extension.h>
    #include <c10/cuda/CUDAGuard.h>

    void launch_{op}_kernel(at::Tensor x);

    void {op}(at::Tensor x) {{
        const at::cuda::OptionalCUDAGuard guard(x.device());
        launch_{op}_kernel(x);
    }}
    """

BOUND_KERNEL = """\
    #include <ATen/cuda/CUDAContext.h>

    __global__ void {op}_kernel(float *x, int n) {{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= 2;
    }}

    void launch_{op}_kernel(at::Tensor x) {{
        {op}_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), x.numel());
    }}
    """


def test_a_host_binding_named_after_its_kernel_source_is_its_site_and_an_unpaired_one_stays(tmp_path):
    report = scan(tree(tmp_path, {
        "setup.py": BINDING_SETUP, "csrc/Adam.cpp": BINDING.format(op="adam"),
        "csrc/AdamCUDA.cu": BOUND_KERNEL.format(op="adam"), "csrc/rw.cpp": BINDING.format(op="rw"),
        "csrc/cuda/rw_cuda.cu": BOUND_KERNEL.format(op="rw"), "csrc/ext.cpp": BINDING.format(op="ext")}))
    per_file = {f.path: f for f in report.findings if f.rule in ("NR1703", "NR1704")}
    adam, rw = per_file["csrc/AdamCUDA.cu"], per_file["csrc/cuda/rw_cuda.cu"]
    assert per_file["csrc/Adam.cpp"].part_of == f"NR1703 {adam.path}:{adam.line}"  # AdamCUDA: stem adam
    assert per_file["csrc/rw.cpp"].part_of == f"NR1703 {rw.path}:{rw.line}"  # a kernel folder in its folder
    assert per_file["csrc/ext.cpp"].part_of == ""  # no kernel source of its name: the extension's own binding
    assert adam.part_of == rw.part_of == ""
    d = report.to_dict()
    assert d["summary"]["sites"] == 2
    # sites keep their cost: the task's figures are those of the same tree without pairing names
    renamed = scan(tree(tmp_path / "renamed", {
        "setup.py": BINDING_SETUP.replace("Adam.cpp", "Bind1.cpp").replace("rw.cpp", "Bind2.cpp"),
        "csrc/Bind1.cpp": BINDING.format(op="adam"), "csrc/AdamCUDA.cu": BOUND_KERNEL.format(op="adam"),
        "csrc/Bind2.cpp": BINDING.format(op="rw"), "csrc/cuda/rw_cuda.cu": BOUND_KERNEL.format(op="rw"),
        "csrc/ext.cpp": BINDING.format(op="ext")}))
    assert renamed.to_dict()["summary"]["sites"] == 0
    assert renamed.to_dict()["summary"]["effort"] == d["summary"]["effort"]


def test_binding_names_pair_by_stem_or_a_long_prefix_in_the_folder_or_one_below():
    from neuron_ready.effort import _binding_stem, _pairs

    def pairs(binding: str, kernel: str) -> bool:
        return _pairs(*_binding_stem(binding), *_binding_stem(kernel))

    assert _binding_stem("csrc/AdamCUDA.cu") == ("csrc", "adam") and _binding_stem("a/rw_cuda_kernel.cu") == ("a", "rw")
    assert pairs("csrc/Projection.cpp", "csrc/ProjectionEWA3DGSFused.cu")  # a stem of four letters or more
    assert not pairs("csrc/rw.cpp", "csrc/rwx_cuda.cu")  # a short stem pairs only whole
    assert pairs("csrc/rw.cpp", "csrc/cuda/rw_cuda.cu") and not pairs("csrc/rw.cpp", "csrc/a/b/rw_cuda.cu")
    assert not pairs("csrc/cpu/rw.cpp", "csrc/cuda/rw_cuda.cu")  # a sibling folder: the CPU build's file


HELPER_KERNELS = """\
    import torch
    import triton
    import triton.language as tl
    from helpers import _half, _twice

    @triton.jit
    def _square(x):
        return x * x

    @triton.jit
    def _poly_kernel(x_ptr):
        v = tl.load(x_ptr)
        tl.store(x_ptr, _square(v) + _half(v) + _twice(v))

    class Net(torch.nn.Linear):
        def __init__(self):
            super().__init__(4, 4)

        def forward(self, x):
            y = super().forward(x)
            _poly_kernel[(1,)](y)
            return y
    """

HELPERS_ONLY = """\
    import triton

    @triton.jit
    def _half(x):
        return x * 0.5

    @triton.jit
    def _twice(x):
        return x * 2
    """


def test_triton_device_functions_are_sites_of_their_files_kernel_or_first_helper(tmp_path):
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": HELPER_KERNELS, "helpers.py": HELPERS_ONLY}))
    kernels = {(f.path, f.kernel_facts.kernel): f for f in report.findings if f.rule == "NR1801"}
    poly, square = kernels[("model.py", "_poly_kernel")], kernels[("model.py", "_square")]
    half, twice = kernels[("helpers.py", "_half")], kernels[("helpers.py", "_twice")]
    assert poly.part_of == "" and square.part_of == f"NR1801 model.py:{poly.line}"  # inlined into the kernel
    assert half.part_of == "" and twice.part_of == f"NR1801 helpers.py:{half.line}"  # a file of helpers: one item
    # the helpers keep their own (small) task: the figures do not move
    assert task_of(report, "NR1801", square.line) == "T-triton-helpers" != task_of(report, "NR1801", poly.line)


LAUNCHER_MODEL = """\
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _scale(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)

    def scale(x):
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        with torch.cuda.device(x.device):
            _scale[(sms,)](x, x.numel(), BLOCK=128)
        return x

    def place(x):
        with torch.cuda.device(x.device):
            return x * 2

    class Net(torch.nn.Linear):
        def __init__(self):
            super().__init__(4, 4)

        def forward(self, x):
            return place(scale(super().forward(x)))
    """


def test_a_device_context_and_property_query_around_a_launch_are_sites_of_the_kernel(tmp_path):
    """They exist for the launch: the kernel's rewrite removes them. The same context around plain
    PyTorch code is device plumbing of its own."""
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": LAUNCHER_MODEL}))
    kernel = next(f for f in report.findings if f.rule == "NR1801")
    got = sites(report)
    assert got[("NR1005", 11)] == got[("NR1006", 12)] == f"NR1801 model.py:{kernel.line}"
    tid = task_of(report, "NR1801", kernel.line)
    assert task_of(report, "NR1006", 12) == task_of(report, "NR1005", 11) == tid
    assert got[("NR1006", 17)] == "" and task_of(report, "NR1006", 17) == "T-device"
