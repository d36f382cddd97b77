"""A GPU-only library the default configuration selects is not an optional integration, and a check
that rejects every device but CUDA is a porting edit (docs/contexts.md "Chosen by default", docs/
effort-model.md §3.5). Small trees scanned through the whole pipeline; kinds and contexts are
asserted, and costs only against the model's own constants."""

from __future__ import annotations

from pathlib import Path

from scanning import write_tree as tree
from test_cuda_checks import CUDA_ATTN, TRAIN
from neuron_ready.config import Settings
from neuron_ready.effort import FALLBACK, REFERENCE_SWITCH
from neuron_ready.engine import run_scan


def scan(root: Path):
    return run_scan(Settings(root=root, cache=False)).report


def lib_task(report, rule: str = "NR1901"):
    return next((t for t in report.tasks if t.id == f"T-lib-{rule}"), None)


def train(option: str, default: str) -> str:
    """The training script of test_cuda_checks, its model built from a command-line option."""
    script = TRAIN.replace("    def main():\n        model = Net()\n", f"""\
    import argparse

    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--{option}", default={default!r})
        args = parser.parse_args()
        model = Net(args.{option})
""")
    assert script != TRAIN
    return script


# `if attn == "flash":` with a PyTorch branch beside it; the import inside raises when flash_attn is missing.
BRANCH_MODEL = """\
    import torch

    class Net(torch.nn.Module):
        def __init__(self, attn="flash"):
            super().__init__()
            self.attn = attn
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            q = self.proj(x)
            if self.attn == "flash":
                try:
                    from flash_attn import flash_attn_func
                except ImportError:
                    raise RuntimeError("pip install flash-attn, or set --attn torch")
                return flash_attn_func(q, q, q)
            else:
                return torch.softmax(q @ q.transpose(-2, -1), -1) @ q
    """


def test_a_library_the_default_option_selects_is_a_switch_to_its_pytorch_value(tmp_path):
    report = scan(tree(tmp_path, {"train.py": train("attn", "flash"), "model.py": BRANCH_MODEL}))
    uses = [f for f in report.findings if f.rule == "NR1901"]
    assert uses and all(f.context == "step" and f.details["default_option"] == "attn" for f in uses)
    task = lib_task(report)
    assert task.kind == "switch-to-reference" and task.details["options"] == ["attn"]
    assert task.person_days.likely == REFERENCE_SWITCH.likely  # well below a swap, more than a gate
    assert task.person_days.likely > FALLBACK.likely


REGISTRY_MODEL = """\
    import torch

    class Registry(dict):
        def register(self, name, func):
            self[name] = func

    attention_implementations = Registry()

    def flash_fn(q):
        from flash_attn import flash_attn_func
        return flash_attn_func(q, q, q)

    def torch_fn(q):
        return torch.softmax(q @ q.transpose(-2, -1), -1) @ q

    attention_implementations.register("flash", func=flash_fn)
    attention_implementations.register("torch", func=torch_fn)

    class Net(torch.nn.Module):
        def __init__(self, attn_impl="flash"):
            super().__init__()
            self.fn = attention_implementations[attn_impl]
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.fn(self.proj(x))
    """


def test_a_library_registered_under_the_default_key_is_a_switch(tmp_path):
    report = scan(tree(tmp_path, {"train.py": train("attn_impl", "flash"), "model.py": REGISTRY_MODEL}))
    uses = [f for f in report.findings if f.rule == "NR1901"]
    assert uses and all(f.details.get("default_option") == "attn_impl" for f in uses)
    assert lib_task(report).kind == "switch-to-reference"


def test_a_default_choice_with_no_other_value_is_the_library_swap(tmp_path):
    model = BRANCH_MODEL.replace(
        "            else:\n                return torch.softmax(q @ q.transpose(-2, -1), -1) @ q\n",
        "            else:\n                raise ValueError(f\"unknown attention {self.attn}\")\n")
    assert "unknown attention" in model
    report = scan(tree(tmp_path, {"train.py": train("attn", "flash"), "model.py": model}))
    uses = [f for f in report.findings if f.rule == "NR1901"]
    assert uses and not any(f.details["default_alternative"] for f in uses)
    assert lib_task(report).kind == "swap-library"


def test_a_guarded_import_whose_default_path_falls_back_stays_a_cheap_gate(tmp_path):
    model = """\
        import torch

        try:
            from flash_attn import flash_attn_func
        except ImportError:
            flash_attn_func = None

        class Net(torch.nn.Module):
            def __init__(self, attn="flash"):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)

            def forward(self, x):
                q = self.proj(x)
                if flash_attn_func is not None:
                    return flash_attn_func(q, q, q)
                return torch.softmax(q @ q.transpose(-2, -1), -1) @ q
        """
    report = scan(tree(tmp_path, {"train.py": train("attn", "flash"), "model.py": model}))
    task = lib_task(report)
    assert task is None or (task.kind == "gate-library" and task.person_days.likely <= FALLBACK.likely)
    assert not any(f.details.get("default_option") for f in report.findings)


def test_a_non_default_value_selecting_the_library_stays_opt_in(tmp_path):
    report = scan(tree(tmp_path, {"train.py": train("attn", "torch"), "model.py": BRANCH_MODEL}))
    assert lib_task(report) is None  # nothing of flash_attn in the must-port part
    opt = [f for f in report.findings + report.off_path if f.rule == "NR1901"]
    assert opt and all(f.context == "opt-in" and "default_option" not in f.details for f in opt)


# ------------------------------------------------------------------------------ CUDA-only checks

CHECK_MODEL = """\
    import torch

    def check_inputs(*tensors):
        for t in tensors:
            if not t.is_cuda:
                raise TypeError("inputs must be CUDA tensors")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            check_inputs(x)
            y = self.proj(x)
            assert y.device.type == "cuda", "CUDA only"
            if not torch.cuda.is_available():
                raise RuntimeError("needs a GPU")
            return y
    """


def test_a_check_that_rejects_every_device_but_cuda_is_a_device_edit(tmp_path):
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": CHECK_MODEL}))
    checks = sorted((f.line, f.context) for f in report.findings if f.rule == "NR1019")
    assert checks == [(5, "step"), (16, "step")]  # not the is_available() raise: NR1005's
    device = next(t for t in report.tasks if t.id == "T-device")
    assert {report.findings[i].rule for i in device.findings} >= {"NR1019"}


# A model whose forward calls cuda_attn.fused (a kernel wrapper the tests write).
WRAPPED_NET = """\
    import torch
    from cuda_attn import fused

    class Net(torch.nn.Linear):
        def __init__(self):
            super().__init__(4, 4)

        def forward(self, x):
            return fused(super().forward(x))
    """


def test_a_check_inside_a_kernel_wrapper_is_part_of_that_kernels_task(tmp_path):
    wrapper = CUDA_ATTN.replace("    def fused(x):\n", "    def fused(x):\n        assert x.is_cuda\n")
    assert wrapper != CUDA_ATTN
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": WRAPPED_NET, "cuda_attn.py": wrapper}))
    check = next(i for i, f in enumerate(report.findings) if f.rule == "NR1019")
    owner = [t for t in report.tasks if check in t.findings]
    assert len(owner) == 1 and owner[0].id.startswith("T-triton-")
    assert not any(t.id == "T-device" for t in report.tasks)


def test_a_check_on_a_path_only_cuda_takes_is_skipped_on_trainium(tmp_path):
    model = """\
        import torch

        def fused(x):
            assert x.is_cuda, "the fused path is CUDA-only"
            return x * 2

        class Net(torch.nn.Linear):
            def __init__(self):
                super().__init__(4, 4)

            def forward(self, x):
                y = super().forward(x)
                if y.is_cuda:
                    return fused(y)
                return y * 2
        """
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": model}))
    check = [f for f in report.findings + report.off_path if f.rule == "NR1019"]
    assert [(f.line, f.context, f.details.get("feature")) for f in check] == [(4, "opt-in", "cuda")]


def test_a_check_in_a_kernel_wrapper_with_a_fallback_is_part_of_that_fallback(tmp_path):
    """`if not HAS_TRITON: def fused(x): return x * 2` beside the Triton version whose wrapper asserts
    CUDA: the kernel and its check are one fallback to check, not a device edit."""
    body = CUDA_ATTN.replace("    def fused(x):\n", "    def fused(x):\n        assert x.is_cuda\n")
    wrapper = "    from importlib.util import find_spec\n\n    HAS_TRITON = find_spec('triton') is not None\n\n" \
        "    if not HAS_TRITON:\n        def fused(x):\n            return x * 2\n    else:\n" + \
        "".join("    " + line if line.strip() else line for line in body.splitlines(True))
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": WRAPPED_NET, "cuda_attn.py": wrapper}))
    check = next(i for i, f in enumerate(report.findings) if f.rule == "NR1019")
    assert report.findings[check].fallback
    owner = [t for t in report.tasks if check in t.findings]
    assert len(owner) == 1 and owner[0].id.startswith("T-triton-") and owner[0].fallback
