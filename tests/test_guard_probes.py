"""Fallbacks that really fall back (issue 11, deliverable 4): import guards and CUDA probes that are
the guard. A CUDA probe answers False or 0 on Trainium; it is a concern only where that answer
fails or loses something the training needs. An import already under a guard with a fallback is
what the remedies ask for. Code for an older PyTorch never runs on a current one."""

from __future__ import annotations

import textwrap
from pathlib import Path

from scanning import scan_text

from neuron_ready.config import Settings
from neuron_ready.engine import run_scan


def found(code: str, rule: str) -> list[int]:
    return sorted(f.line for f in scan_text(textwrap.dedent(code)).findings if f.rule == rule)


def report_of(root: Path, files: dict[str, str]):
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    return run_scan(Settings(root=root, cache=False)).report


# ------------------------------------------------------------------------------------ CUDA probes


def test_a_probe_that_only_chooses_a_value_is_not_reported():
    assert found('''
        import torch
        from dataclasses import dataclass, field

        @dataclass
        class Cfg:
            world_size: int = field(default=max(1, torch.cuda.device_count()))

        def build(use_kernel=None, pin=torch.cuda.is_available()):
            use_kernel = use_kernel if use_kernel is not None else torch.cuda.is_available()
            is_cuda = device.type == "cuda" and torch.cuda.is_available()
            dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
            ids = visible[: torch.cuda.device_count()]
            many = torch.cuda.device_count() > 1
            return loader(pin_memory=torch.cuda.is_available())
    ''', "NR1005") == []


def test_a_probe_that_fails_drops_to_the_cpu_or_sizes_something_stays():
    assert found('''
        import torch
        import torch.multiprocessing as mp

        device = "cuda" if torch.cuda.is_available() else "cpu"
        dev = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        world_size = torch.cuda.device_count()
        assert torch.cuda.is_available()
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA is required")
        mp.spawn(train, nprocs=torch.cuda.device_count())
        name = torch.cuda.get_device_name(0)
    ''', "NR1005") == [5, 6, 7, 8, 9, 11, 12]


# ------------------------------------------------------------------------------ CUDA env variables


def test_setting_a_cuda_tuning_variable_is_not_reported_choosing_or_reading_one_is():
    assert found('''
        import os
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        os.environ.setdefault("CUDA_LAUNCH_BLOCKING", "1")
        os.environ.update({"TORCH_CUDNN_V8_API_ENABLED": "1"})
        os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
        assert os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1"
        blocking = os.getenv("CUDA_LAUNCH_BLOCKING")
    ''', "NR1017") == [6, 7, 8]


# --------------------------------------------------------------------------- an older PyTorch's path


def test_the_except_of_a_newer_torch_api_is_an_older_pytorchs_path():
    assert found('''
        import torch
        try:
            scaler = torch.amp.GradScaler(device=device)
        except (AttributeError, TypeError):
            scaler = torch.cuda.amp.GradScaler()
    ''', "NR1203") == [4]  # the new API is FP16 loss scaling still; the old one never runs


def test_an_except_that_is_not_about_a_missing_api_still_runs():
    assert found('''
        import torch
        try:
            scaler = torch.amp.GradScaler(device=device)
        except Exception:
            scaler = torch.cuda.amp.GradScaler()
        try:
            scaler = make_scaler()
        except AttributeError:
            scaler = torch.cuda.amp.GradScaler()
    ''', "NR1203") == [4, 6, 10]


# ----------------------------------------------------------------------------------- import guards


def test_a_guarded_import_is_opt_in_even_where_the_library_is_required(tmp_path):
    """The guarded import line is what the remedies ask for; the unguarded use carries the cost."""
    report = report_of(tmp_path, {
        "train.py": '''
            import torch
            try:
                import nvtx
            except ImportError:
                nvtx = None
            try:
                import flash_attn
            except ImportError:
                flash_attn = None
            from flash_attn import flash_attn_func
            from kern import rowwise

            def main():
                model = torch.nn.Linear(4, 4)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for _ in range(3):
                    y = flash_attn_func(model(torch.randn(2, 4)), None, None)
                    y.sum().backward()
                    opt.step()

            if __name__ == "__main__":
                main()
        ''',
        "kern.py": '''
            import torch

            def triton_ok():
                return False

            if not triton_ok():
                def rowwise(x):
                    return None
            else:
                import triton

                def rowwise(x):
                    return x
        ''',
    })
    every = {(f.path, f.line, f.rule): f for f in report.findings + report.off_path}
    opt_in = {k: f.gate for k, f in every.items() if f.context == "opt-in"}
    assert opt_in[("train.py", 4, "NR1012")] == "only when nvtx is installed (imported under a guard with a fallback)"
    assert ("train.py", 8, "NR1901") in opt_in  # flash_attn is required (line 11), its guarded import is not the task
    assert ("kern.py", 11, "NR1805") in opt_in  # the else of a negated availability test, beside a stub
    assert every[("train.py", 11, "NR1901")].context == "step"
    assert every[("train.py", 11, "NR1901")].details.get("guarded_import") is None


def test_an_import_whose_except_raises_is_required():
    report = scan_text(textwrap.dedent('''
        try:
            import flash_attn
        except ImportError as e:
            raise RuntimeError("install flash-attn") from e
    '''))
    [f] = [f for f in report.findings if f.rule == "NR1901"]
    assert not f.details.get("guarded_import") and not f.details.get("optional_library")


def test_a_check_that_fails_only_with_another_option_is_not_reported_one_the_probe_decides_is():
    assert found('''
        import torch

        def build(use_cuda_kernel=None, ids=()):
            use_cuda_kernel = use_cuda_kernel if use_cuda_kernel is not None else False
            assert not (use_cuda_kernel and not torch.cuda.is_available())
            if use_cuda_kernel and not torch.cuda.is_available():
                raise ValueError("the CUDA kernel needs CUDA")
            if any(int(i) >= torch.cuda.device_count() for i in ids):
                ids = [str(i) for i in ids]
            assert torch.cuda.is_available(), "CUDA is required"
            if torch.cuda.device_count() < 1:
                raise RuntimeError("no GPU")
            if torch.cuda.is_available():
                pass
            else:
                raise NotImplementedError("only CUDA")
            if torch.cuda.device_count() > 1:
                device = "cuda"
            else:
                device = "cpu"
            if torch.cuda.device_count() > 0:  # a presence test: what the CUDA branch does decides
                seed_model_parallel(0)
    ''', "NR1005") == [11, 12, 14, 18, 22]


def test_a_module_imported_only_behind_a_guard_makes_its_own_imports_guarded(tmp_path):
    """peft's pattern: `tuners/x/bnb.py` imports bitsandbytes at the top, and the package imports that
    module only when bitsandbytes is there (a package `__getattr__`, a dispatcher)."""
    report = report_of(tmp_path, {
        "train.py": '''
            import torch
            import adapters
            from adapters.model import build

            def main():
                model = build(torch.nn.Linear(4, 4))
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                model(torch.randn(2, 4)).sum().backward()
                opt.step()

            if __name__ == "__main__":
                main()
        ''',
        "adapters/__init__.py": '''
            from .util import has_bnb

            def __getattr__(name):
                if name == "Linear8bit" and has_bnb():
                    from .quant import Linear8bit
                    return Linear8bit
                raise AttributeError(name)
        ''',
        "adapters/util.py": '''
            import importlib.util

            def has_bnb():
                return importlib.util.find_spec("bitsandbytes") is not None
        ''',
        "adapters/model.py": '''
            from .util import has_bnb

            def build(base):
                if has_bnb():
                    from .quant import Linear8bit
                return base
        ''',
        "adapters/quant.py": '''
            import bitsandbytes as bnb

            class Linear8bit(bnb.nn.Linear8bitLt):
                pass
        ''',
        "adapters/always.py": '''
            import bitsandbytes as bnb
        ''',
        "adapters/lora.py": '''
            from .always import bnb
        ''',
    })
    every = {(f.path, f.line): f for f in report.findings + report.off_path if f.rule == "NR1906"}
    assert every[("adapters/quant.py", 2)].context == "opt-in"
    assert every[("adapters/quant.py", 2)].details["guarded_import"] is True
    assert every[("adapters/always.py", 2)].details.get("guarded_import") is None  # imported unguarded


def test_guarded_only_imports_reads_both_guards_and_ignores_a_guard_that_gives_up():
    import ast

    from neuron_ready.sources.optional_imports import guarded_only_imports

    tree = ast.parse(textwrap.dedent('''
        import torch
        from .util import is_apex_available
        try:
            from . import fused
            from .triton_ops import rms
        except ImportError:
            rms = None
        if is_apex_available():
            from .apex_ops import norm
        else:
            norm = None
        if HAS_FLASH:
            from .flash_ops import attn
        else:
            raise ImportError("flash-attn is required")
        from .triton_ops import layer
    '''))
    assert guarded_only_imports(tree, "pkg.mod", False) == ["pkg.apex_ops", "pkg.apex_ops.norm", "pkg.fused",
                                                            "pkg.triton_ops.rms"]


def test_a_guard_around_a_torch_module_covers_an_older_pytorch_not_a_missing_library():
    report = scan_text(textwrap.dedent('''
        import torch
        try:
            from torch.nn.attention.flex_attention import flex_attention, create_block_mask
        except ImportError:
            flex_attention = None
    '''))
    hits = [f for f in report.findings if f.line == 4]
    assert hits and all(not f.details.get("guarded_import") for f in hits)
