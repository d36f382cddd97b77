"""Qualified-name resolution, look-alikes, guards and suppressions in Python sources."""

from __future__ import annotations

from scanning import catalog_of, hits, scan_text

CALLS = catalog_of(
    ("NR1701", "custom-cuda", '[[rule.match]]\nkind = "call"\nnames = ["torch.utils.cpp_extension.load", "torch.utils.cpp_extension.CUDAExtension"]'),
    ("NR1601", "unsupported-op", '[[rule.match]]\nkind = "call"\nnames = ["torch.unique", "torch.fft.*"]'),
    ("NR1001", "device", '[[rule.match]]\nkind = "method"\nnames = ["cuda"]\nrequires = ["torch"]'),
    ("NR1201", "precision", '[[rule.match]]\nkind = "attribute"\nnames = ["torch.float16", "torch.half"]\ncontext = "load"'),
    ("NR1901", "gpu-library", '[[rule.match]]\nkind = "import"\nmodules = ["flash_attn"]\n[[rule.match]]\nkind = "call"\nnames = ["flash_attn.*"]'),
    ("NR1801", "triton", '[[rule.match]]\nkind = "decorator"\nnames = ["triton.jit"]\n[[rule.match]]\nkind = "pattern"\nmatcher = "triton_launch"'),
    ("NR1101", "distributed", '[[rule.match]]\nkind = "call"\nnames = ["torch.distributed.init_process_group"]\nargs = [{ keyword = "backend", position = 0, pattern = "nccl|cuda:nccl.*" }]'),
    ("NR1102", "distributed", '[[rule.match]]\nkind = "environ"\npattern = "NCCL_\\\\w+"'),
    ("NR1301", "compile", '[[rule.match]]\nkind = "keyword"\nnames = ["mode"]\ncalls = ["torch.compile"]\nvalues = ["max-autotune"]'),
    ("NR1401", "host-sync", '[[rule.match]]\nkind = "method"\nnames = ["item"]\nwithin = "train_step"\nrequires = ["torch"]'),
    ("NR1402", "host-sync", '[[rule.match]]\nkind = "method"\nnames = ["tolist"]\nwithin = "forward"\nrequires = ["torch"]'),
)


def test_aliases_resolve_to_qualified_names():
    r = scan_text(
        """
        import torch.utils.cpp_extension as ext
        from torch.utils import cpp_extension
        from torch.utils.cpp_extension import CUDAExtension as CE
        import torch
        ext.load("ops", ["ops.cu"])
        cpp_extension.load("ops", ["ops.cu"])
        CE("x", ["a.cu"])
        torch.unique(x)
        tfft = torch.fft
        tfft.rfft(x)
        """,
        CALLS,
    )
    assert hits(r) == [
        (6, "NR1701", "torch.utils.cpp_extension.load"),
        (7, "NR1701", "torch.utils.cpp_extension.load"),
        (8, "NR1701", "torch.utils.cpp_extension.CUDAExtension"),
        (9, "NR1601", "torch.unique"),
        (11, "NR1601", "torch.fft.rfft"),
    ]


def test_lookalikes_are_not_findings():
    r = scan_text(
        '''
        """Docstring: torch.unique(x) and x.cuda() and import flash_attn."""
        import numpy as np
        import torch
        # torch.unique(x); model.cuda()
        s = "torch.unique(x) and x.cuda()"
        np.unique(a)
        np.fft.fft(a)
        cfg.cuda_enabled = True
        flag = obj.cuda
        def f(torch):
            return torch.unique(x)
        class Unique:
            def cuda(self):
                return 1
        ''',
        CALLS,
    )
    assert hits(r) == []


def test_local_imports_and_shadowing_by_assignment():
    r = scan_text(
        """
        import torch
        def a():
            import numpy as torch
            return torch.unique(x)
        def b():
            return torch.unique(x)
        torch = None
        torch.unique(x)
        """,
        CALLS,
    )
    # `torch = None` keeps the import's meaning (placeholder pattern), so line 9 still resolves
    assert [h[0] for h in hits(r)] == [7, 9]


def test_methods_need_torch_and_a_non_import_receiver():
    assert hits(scan_text("x.cuda()\n", CALLS)) == []
    r = scan_text("import torch\nimport numpy as np\nx.cuda()\nnp.cuda()\nf(x).cuda()\n", CALLS)
    assert [h[0] for h in hits(r)] == [3, 5]


def test_attribute_references_in_load_context():
    r = scan_text(
        """
        import torch
        from torch import half
        x = y.to(torch.float16)
        z = half
        torch.float16 = 3
        if x.dtype == torch.float16 or x.dtype in (torch.half, torch.bfloat16):
            pass
        dt = torch.float16
        y = x.to(dt)
        """,
        CALLS,
    )
    assert [(h[0], h[2]) for h in hits(r)] == [(4, "torch.float16"), (5, "torch.half"), (9, "torch.float16")]


def test_argument_conditions_and_string_shapes():
    r = scan_text(
        """
        import torch.distributed as dist
        dist.init_process_group("nccl")
        dist.init_process_group(backend="cuda:nccl,cpu:gloo")
        dist.init_process_group(backend="nccl" if gpu else "gloo")
        dist.init_process_group(backend="gloo")
        dist.init_process_group()
        """,
        CALLS,
    )
    assert [h[0] for h in hits(r)] == [3, 4, 5]


def test_keyword_values_environment_and_within():
    r = scan_text(
        """
        import os
        import torch
        os.environ["NCCL_DEBUG"] = "INFO"
        level = os.environ.get("NCCL_P2P_DISABLE")
        os.environ.update({"NCCL_IB_DISABLE": "1"})
        other = os.getenv("HOME")
        m = torch.compile(model, mode="max-autotune")
        m2 = torch.compile(model, mode="default")

        def train(model, loader, opt):
            for batch in loader:
                loss = model(batch)
                loss.backward()
                opt.step()
                print(loss.item())

        def evaluate(model, loader):
            return [model(b).item() for b in loader]

        class Net(torch.nn.Module):
            def forward(self, x):
                return x.tolist()

            def helper(self, x):
                return x.tolist()
        """,
        CALLS,
    )
    assert [(h[0], h[1]) for h in hits(r)] == [
        (4, "NR1102"), (5, "NR1102"), (6, "NR1102"), (8, "NR1301"), (16, "NR1401"), (23, "NR1402"),
    ]


def test_import_forms_and_type_checking():
    r = scan_text(
        """
        from typing import TYPE_CHECKING
        import importlib
        if TYPE_CHECKING:
            import flash_attn
        import flash_attn.flash_attn_interface as fai
        from flash_attn import flash_attn_func
        mod = importlib.import_module("flash_attn")
        out = flash_attn_func(q, k, v)
        """,
        CALLS,
    )
    assert [(h[0], h[2]) for h in hits(r)] == [
        (6, "flash_attn.flash_attn_interface"), (7, "flash_attn.flash_attn_func"), (8, "flash_attn"),
        (9, "flash_attn.flash_attn_func"),
    ]


def test_guarded_imports_and_kernel_paths_are_fallbacks():
    r = scan_text(
        """
        import importlib.util
        import torch
        try:
            from flash_attn import flash_attn_func
        except ImportError:
            flash_attn_func = None
        if importlib.util.find_spec("triton") is not None:
            import triton

        def attn(q, k, v):
            if q.is_cuda:
                return flash_attn_func(q, k, v)
            return sdpa(q, k, v)

        if triton is not None:
            @triton.jit
            def kern(x):
                pass

        def norm(x):
            if not x.is_cuda:
                return ref(x)
            kern[(1,)](x)
            return x

        def hard(x):
            kern[(1,)](x)
        """,
        CALLS,
    )
    got = [(f.line, f.rule, f.fallback) for f in r.findings]
    assert got == [
        (5, "NR1901", True), (13, "NR1901", True), (17, "NR1801", True), (24, "NR1801", True), (28, "NR1801", False),
    ]


def test_unguarded_gpu_code_is_not_a_fallback():
    r = scan_text(
        """
        from flash_attn import flash_attn_func
        def attn(q, k, v):
            return flash_attn_func(q, k, v)
        """,
        CALLS,
    )
    assert [f.fallback for f in r.findings] == [False, False]


def test_triton_kernel_details():
    r = scan_text(
        """
        import triton
        import triton.language as tl

        @triton.jit
        def add_bwd_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.atomic_add(y_ptr + offs, tl.load(x_ptr + offs))
        """,
        CALLS,
    )
    (f,) = r.findings
    assert f.details["kernel"] == "add_bwd_kernel"
    assert f.details["lines"] == 4 and f.details["atomics"] == 1 and f.details["backward"] is True
    assert f.details["tl_ops"] == 4  # program_id, arange, atomic_add, load


def test_suppressions():
    r = scan_text(
        """
        import torch
        a = x.cuda()  # neuron-ready: ignore
        b = x.cuda()  # neuron-ready: ignore[NR1001]
        c = x.cuda()  # neuron-ready: ignore[NR12]
        d = x.cuda()  # neuron-ready: ignore[device]
        e = x.cuda()
        """,
        CALLS,
    )
    assert [h[0] for h in hits(r)] == [5, 7]
    assert r.suppressed == 3
    r = scan_text("# neuron-ready: ignore-file\nimport torch\nx.cuda()\n", CALLS)
    assert hits(r) == [] and r.suppressed == 1


def test_relative_imports_resolve_against_the_package():
    r = scan_text("from .kernels import fused\nfrom .. import utils\n", CALLS, name="pkg/sub/mod.py")
    assert set(r.facts["imports"]) >= {"pkg.sub.kernels", "pkg.utils"}


def test_snippets_of_parenthesized_imports():
    r = scan_text("from flash_attn import (\n    flash_attn_func,\n)\n", CALLS)
    assert [f.snippet for f in r.findings] == ["from flash_attn import ( flash_attn_func, )"]


def test_positions_are_one_based_and_point_at_the_code():
    r = scan_text("import torch\n\ny = (\n    x.cuda()\n)\n", CALLS)
    (f,) = r.findings
    assert (f.line, f.column) == (4, 5)
    assert f.snippet == "x.cuda()"


FEATURES = catalog_of(
    ("NR1506", "dynamic-shape", '[[rule.match]]\nkind = "pattern"\nmatcher = "tensor_control_flow"\nrequires = ["torch"]'),
    ("NR1603", "unsupported-op", '[[rule.match]]\nkind = "method"\nnames = ["sort"]\nresult_used = true\nrequires = ["torch"]'),
    ("NR1509", "dynamic-shape", '[[rule.match]]\nkind = "call"\nnames = ["torch.nn.utils.rnn.pad_sequence"]\nwithin = "collate"'),
    ("NR1507", "dynamic-shape", '[[rule.match]]\nkind = "call"\nnames = ["transformers.DataCollatorWithPadding"]\nargs = [{ keyword = "pad_to_multiple_of", maybe_none = true }]'),
    ("NR1508", "dynamic-shape", '[[rule.match]]\nkind = "keyword"\nnames = ["padding"]\nvalues = [true, "longest"]\nargs = [{ keyword = "pad_to_multiple_of", missing = true }]'),
    ("NR1003", "device", '[[rule.match]]\nkind = "keyword"\nnames = ["device_type"]\npattern = "cuda"\nexclude_calls = ["torch.autocast"]'),
    ("NR1304", "compile", '[[rule.match]]\nkind = "decorator"\nnames = ["torch.compile"]\nargs = [{ keyword = "backend", missing = true }]'),
    ("NR1402", "host-sync", '[[rule.match]]\nkind = "call"\nnames = ["builtins.print"]\nargs = [{ position = 0, string = false }]'),
    ("NR1701", "custom-cuda", '[[rule.match]]\nkind = "call"\nnames = ["setuptools.Extension"]\nargs = [{ keyword = "extra_compile_args", pattern = "nvcc" }]'),
    ("NR1801", "triton", '[[rule.match]]\nkind = "decorator"\nnames = ["triton.jit"]'),
    ("NR1803", "triton", '[[rule.match]]\nkind = "pattern"\nmatcher = "triton_launch"'),
    ("NR1901", "gpu-library", '[[rule.match]]\nkind = "import"\nmodules = ["flash_attn", "fastmodel"]'),
)


def test_matcher_features():
    r = scan_text(
        """
        import torch
        import setuptools
        from torch.nn.utils.rnn import pad_sequence
        from transformers import DataCollatorWithPadding
        if torch.isnan(loss).any():
            pass
        if x.shape[0] > 1:
            pass
        vals, idx = scores.sort(descending=True)
        names.sort()
        def my_collate(batch):
            return pad_sequence(batch)
        def pad_all(xs):
            return pad_sequence(xs)
        c1 = DataCollatorWithPadding(tok, pad_to_multiple_of=8 if fp16 else None)
        c2 = DataCollatorWithPadding(tok, pad_to_multiple_of=8)
        enc = tok(texts, padding=True)
        enc2 = tok(texts, padding=True, pad_to_multiple_of=64)
        with torch.autocast(device_type="cuda"):
            g = torch.Generator(device_type="cuda")
        @torch.compile
        def f(x): return x
        @torch.compile(mode="max-autotune")
        def g2(x): return x
        @torch.compile(backend="neuron")
        def h(x): return x
        print(f"epoch {e}")
        print(loss)
        ext = setuptools.Extension("x", ["a.cpp"], extra_compile_args={"nvcc": ["-O3"]})
        """,
        FEATURES,
    )
    assert [(h[0], h[1]) for h in hits(r)] == [
        (6, "NR1506"), (10, "NR1603"), (13, "NR1509"), (16, "NR1507"), (18, "NR1508"), (21, "NR1003"),
        (22, "NR1304"), (24, "NR1304"), (29, "NR1402"), (30, "NR1701"),
    ]


def test_triton_launch_lookups_and_version_switches():
    r = scan_text(
        """
        import triton
        TRITON3 = triton.__version__ >= "3"
        if TRITON3:
            @triton.jit
            def _k(x):
                pass
        else:
            @triton.jit
            def _k(x):
                pass

        def run(x):
            _k[(1,)](x)
            kernels_by_name["rms"](x)
        """,
        FEATURES,
    )
    assert [(f.line, f.rule, f.fallback) for f in r.findings] == [
        (5, "NR1801", False), (9, "NR1801", False), (14, "NR1803", False),
    ]


def test_project_packages_and_relative_imports_are_not_gpu_libraries():
    from neuron_ready.sources import ScanContext, FileJob, scan_file
    import tempfile, pathlib

    with tempfile.TemporaryDirectory() as tmp:
        p = pathlib.Path(tmp) / "fastmodel" / "x.py"
        p.parent.mkdir()
        p.write_text("import fastmodel.ops\nfrom .flash_attn import f\nimport flash_attn\n")
        ctx = ScanContext(FEATURES, "native", first_party=frozenset({"fastmodel"}))
        res = scan_file(FileJob(str(p), "fastmodel/x.py", "python"), ctx)
    assert [(f.line, f.symbol) for f in res.findings] == [(3, "flash_attn")]
