"""One fix is one finding (analyzer/repeats.py): a package listed again in one dependency file and a
library imported again in one block repeat the fix the first line carries; they are listed off the
path with `repeats`, and a package only an extra installs is opt-in unless module code imports it."""

from __future__ import annotations

from pathlib import Path

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan

TRAIN = """\
    import torch
    from pkg.model import Net

    def train(steps):
        net = Net()
        opt = torch.optim.AdamW(net.parameters())
        for _ in range(steps):
            net(torch.ones(4)).sum().backward()
            opt.step()

    if __name__ == "__main__":
        train(10)
    """


def scan(root: Path, **kw):
    return run_scan(Settings(root=root, cache=False, **kw)).report


def project(root: Path, files: dict[str, str]) -> Path:
    """A package `pkg` (its `pkg/model.py` among `files`) under TRAIN's trainer."""
    return tree(root, {"train.py": TRAIN, "pkg/__init__.py": "", **files})


def where(report) -> dict[tuple[str, int], tuple]:
    return {(f.path, f.line): (f.context, f.details.get("repeats"), f.details.get("feature"))
            for f in report.findings + report.off_path}


def test_a_core_dependency_carries_its_repeats_in_every_extra(tmp_path):
    root = project(tmp_path, {
        "pkg/model.py": """\
            import torch
            import bitsandbytes as bnb

            class Net(torch.nn.Module):
                def forward(self, x):
                    return bnb.functional.quantize_4bit(x)[0]
            """,
        "pyproject.toml": """\
            [project]
            name = "demo"
            dependencies = ["torch", "bitsandbytes>=0.45"]

            [project.optional-dependencies]
            cu121 = ["torch==2.4.0", "bitsandbytes>=0.45"]
            cu124 = ["torch==2.5.0", "bitsandbytes>=0.45"]
            """,
    })
    got = where(scan(root))
    assert got[("pyproject.toml", 3)] == ("step", None, None)  # the core line carries the edit
    for line in (6, 7):  # the same package in each install flavour: the same edit, listed once
        assert got[("pyproject.toml", line)] == ("off-path", "pyproject.toml:3", None), line


def test_a_package_only_an_extra_installs_is_opt_in_unless_module_code_imports_it(tmp_path):
    files = {
        "pkg/model.py": """\
            import torch

            class Net(torch.nn.Module):
                def forward(self, x):
                    if x.dtype == torch.uint8:
                        import bitsandbytes as bnb
                        return bnb.functional.dequantize_4bit(x)
                    return x
            """,
        "pyproject.toml": """\
            [project]
            name = "demo"
            dependencies = ["torch"]

            [project.optional-dependencies]
            quant = [
              "bitsandbytes>=0.42; sys_platform=='darwin'",
              "bitsandbytes>=0.45; sys_platform=='linux'",
            ]
            """,
    }
    got = where(scan(project(tmp_path / "lazy", files)))
    # imported only when a function runs: the default install leaves it out, the uses are costed where they are
    assert got[("pyproject.toml", 7)] == ("opt-in", None, "extra:quant")
    assert got[("pyproject.toml", 8)] == ("off-path", "pyproject.toml:7", None)  # one extra, one edit
    assert got[("pkg/model.py", 6)][0] == "step"
    files["pkg/model.py"] = """\
        import torch
        import bitsandbytes as bnb

        class Net(torch.nn.Module):
            def forward(self, x):
                return bnb.functional.dequantize_4bit(x)
        """
    got = where(scan(project(tmp_path / "loaded", files)))
    # module code on the path imports it: the training job cannot start without it
    assert got[("pyproject.toml", 7)] == ("step", None, None)
    assert got[("pyproject.toml", 8)] == ("off-path", "pyproject.toml:7", None)


KERNEL_MODULE = """\
    import torch
    import triton
    import triton.language as tl
    {extra}

    @triton.jit
    def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)

    class Net(torch.nn.Module):
        def forward(self, x):
            scale_kernel[(1,)](x, x.numel(), BLOCK=128)
            return x
    """


def test_triton_imported_twice_in_one_file_is_one_guard(tmp_path):
    one_line = KERNEL_MODULE.replace("import triton.language as tl\n", "tl = triton.language\n").format(extra="")
    once = scan(project(tmp_path / "once", {"pkg/model.py": one_line}))
    three = KERNEL_MODULE.format(extra="from triton.language.extra import libdevice")
    twice = scan(project(tmp_path / "twice", {"pkg/model.py": three}))
    assert [f.line for f in once.findings + once.off_path if f.rule == "NR1805"] == [2]
    got = where(twice)
    assert got[("pkg/model.py", 2)] == ("step", None, None)
    assert got[("pkg/model.py", 3)] == ("off-path", "pkg/model.py:2", None)
    assert got[("pkg/model.py", 4)] == ("off-path", "pkg/model.py:2", None)
    reason = next(f.details["off_path_reason"] for f in twice.off_path if f.line == 3 and f.path == "pkg/model.py")
    assert "pkg/model.py:2" in reason
    # the import joined its kernel's task before: the estimate is the same as with one import line
    assert twice.estimate.person_days == once.estimate.person_days


def test_the_same_module_of_a_library_imported_twice_repeats_and_another_module_does_not(tmp_path):
    root = project(tmp_path, {
        "pkg/model.py": """\
            import torch
            from flash_attn import flash_attn_func
            from flash_attn.layers.rotary import RotaryEmbedding
            from flash_attn import flash_attn_varlen_func

            class Net(torch.nn.Module):
                def forward(self, x):
                    x = RotaryEmbedding(4)(x)
                    return flash_attn_func(x, x, x) + flash_attn_varlen_func(x, x, x)
            """,
    })
    got = where(scan(root))
    assert got[("pkg/model.py", 2)][0:2] == ("step", None)
    assert got[("pkg/model.py", 3)][0:2] == ("step", None)  # another module: its own functions
    assert got[("pkg/model.py", 4)][0:2] == ("off-path", "pkg/model.py:2")
    assert got[("pkg/model.py", 9)][0] == "step"  # the uses are never repeats


def test_triton_imported_unconditionally_for_opt_in_kernels_costs_the_import_guard(tmp_path):
    from neuron_ready.catalog import load_catalog
    from neuron_ready.effort import TRITON_GUARD_TITLE

    root = tree(tmp_path, {
        "train.py": """\
            import argparse
            import torch
            from pkg.model import Net

            def main():
                p = argparse.ArgumentParser()
                p.add_argument("--fused-scale", action="store_true")
                args = p.parse_args()
                net = Net(fused=args.fused_scale)
                opt = torch.optim.AdamW(net.parameters())
                for _ in range(10):
                    net(torch.ones(4)).sum().backward()
                    opt.step()

            if __name__ == "__main__":
                main()
            """,
        "pkg/__init__.py": "",
        "pkg/model.py": """\
            import torch
            from pkg.kernels import fused_scale

            class Net(torch.nn.Module):
                def __init__(self, fused=False):
                    super().__init__()
                    self.fused = fused
                    self.w = torch.nn.Parameter(torch.ones(4))

                def forward(self, x):
                    if self.fused:
                        return fused_scale(x * self.w)
                    return x * self.w * 2
            """,
        "pkg/kernels.py": """\
            import torch
            import triton
            import triton.language as tl

            @triton.jit
            def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
                i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)

            def fused_scale(x):
                scale_kernel[(1,)](x, x.numel(), BLOCK=128)
                return x
            """,
    })
    report = scan(root)
    got = where(report)
    assert got[("pkg/kernels.py", 2)][0] == "step"  # the module is imported unconditionally: the import fails
    assert got[("pkg/kernels.py", 3)][0:2] == ("off-path", "pkg/kernels.py:2")
    assert all(f.context == "opt-in" for f in report.off_path if f.path == "pkg/kernels.py" and f.rule != "NR1805")
    guard = [t for t in report.tasks if any(report.findings[i].path == "pkg/kernels.py" for i in t.findings)]
    assert [t.title for t in guard] == [TRITON_GUARD_TITLE]
    # the cost of one guarded import, not of a kernel rewrite
    assert guard[0].person_days.likely <= load_catalog().get("NR1805").effort.likely


def test_requirements_named_for_an_extra_are_opt_in_and_development_files_never_train(tmp_path):
    root = project(tmp_path, {
        "pkg/model.py": """\
            import torch
            import deepspeed

            class Net(torch.nn.Module):
                def forward(self, x):
                    return x * 2
            """,
        "requirements.txt": "torch\ndeepspeed\n",
        "requirements-sd.txt": "triton>=2.1\n",
        "requirements-dev.txt": "deepspeed\n",
    })
    report = scan(root)
    got = {(f.path, f.line): (f.context, f.gate, f.details.get("feature"))
           for f in report.findings + report.off_path if f.category == "dependency"}
    assert got[("requirements.txt", 2)][0] == "step"
    assert got[("requirements-sd.txt", 1)] == ("opt-in", "only when installed from requirements-sd.txt", "extra:sd")
    # a developer's install, even of a package the training job imports (the import is costed)
    assert got[("requirements-dev.txt", 1)][0] == "off-path"
