"""Where findings run: the context of every finding, on the issue-11 fixture repositories (each README
states what a porting engineer expects) and on small trees built here. Each case scans through the
whole pipeline; contexts are asserted, not the estimate's figures (the goldens hold those)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURES
from scanning import write_tree as tree
from test_cuda_checks import TRAIN
from neuron_ready.config import Settings
from neuron_ready.context import UNKNOWN, Defaults, accelerator_of
from neuron_ready.engine import run_scan
from neuron_ready.reach import FileInfo


def scan(root: Path, **kw):
    return run_scan(Settings(root=root, cache=False, **kw)).report


def contexts(report) -> dict[tuple[str, int], str]:
    return {(f.path, f.line): f.context for f in report.findings + report.off_path}


def by_context(report, context: str) -> set[str]:
    return {f"{f.path}:{f.line}" for f in report.findings + report.off_path if f.context == context}


# ------------------------------------------------------------------------------------------ fixtures


def test_optin_kernel_behind_a_flag_is_opt_in_with_its_switch():
    report = scan(FIXTURES / "ctx_optin_kernel")
    optin = [f for f in report.off_path if f.context == "opt-in"]
    assert {f.rule for f in optin} >= {"NR1801", "NR1803"}
    assert all(f.details["feature"] == "fused_softmax" and "defaults to False" in f.gate for f in optin)
    assert [p.name for p in report.opt_in] == ["fused_softmax"] and report.opt_in[0].estimate.p50 > 2
    assert {f.rule for f in report.findings} >= {"NR1001", "NR1203"}  # the default path's plumbing
    assert report.estimate.effort_class == "days"
    included = scan(FIXTURES / "ctx_optin_kernel", include_opt_in=["fused_softmax"])
    assert included.estimate.p50 > report.estimate.p50 + 2 and not included.opt_in


def test_an_except_branch_that_raises_is_no_fallback():
    report = scan(FIXTURES / "ctx_raising_except")
    flash = {f.path: f.fallback for f in report.findings if f.rule == "NR1901"}
    assert flash == {"model.py": False}
    # `if flash_attn_func is not None and x.is_cuda:` with SDPA beside it: the CUDA path, skipped on Trainium
    pooled = [f for f in report.off_path if f.rule == "NR1901" and f.path == "pooling.py" and f.scope]
    assert pooled and all(f.context == "opt-in" and f.details["feature"] == "cuda" for f in pooled)


def test_data_loading_on_the_cpu_is_host_side():
    report = scan(FIXTURES / "ctx_host_collate")
    host = [f for f in report.off_path if f.context == "host"]
    assert {f.rule for f in host} >= {"NR1501", "NR1504"} and all(f.path == "data.py" for f in host)
    assert all(f.category == "device" for f in report.findings)


def test_evaluation_code_is_its_own_part():
    report = scan(FIXTURES / "ctx_eval_only")
    ev = by_context(report, "evaluation")
    assert any(p.startswith("export.py") for p in ev) and any(p.startswith("train.py") for p in ev)
    assert report.evaluation is not None and report.evaluation.estimate.p50 > 0
    # On the training path only the `--device` option's CUDA default, which reaches `.to()`.
    assert [f.rule for f in report.findings] == ["NR1004"] and report.estimate.score >= 99


def test_code_that_already_runs_on_trainium_scores_days():
    report = scan(FIXTURES / "ctx_neuron_native")
    assert report.estimate.effort_class == "days" and report.estimate.p50 < 1
    # FP8 is a Trn2/Trn3 datatype on the native target (Neuron 2.33): not a finding there; on the
    # XLA path it is one, in code that already targets Neuron
    assert not any(f.rule == "NR1211" for f in report.findings + report.off_path)
    assert "model.py:12" in by_context(scan(FIXTURES / "ctx_neuron_native", target="xla"), "neuron-native")


def test_a_kernel_with_an_in_repo_pytorch_reference_is_a_switch():
    report = scan(FIXTURES / "ctx_kernel_reference")
    ext = next(t for t in report.tasks if t.id.startswith("T-ext-"))
    assert ext.kind == "switch-to-reference" and ext.details["references"] == ["rmsnorm"]
    assert ext.person_days.likely <= 6


def test_a_type_only_import_puts_nothing_on_the_path():
    report = scan(FIXTURES / "ctx_type_only")
    assert not any(f.path == "heavy_kernels.py" for f in report.findings)
    assert all(f.context == "off-path" for f in report.off_path if f.path == "heavy_kernels.py")


def test_alternatives_chosen_by_name_and_environment_switches_are_opt_in():
    report = scan(FIXTURES / "ctx_registry_backend")
    names = {p.name for p in report.opt_in}
    assert {"flash", "xformers", "USE_FUSED_ADAM"} <= names
    assert not any(f.category == "gpu-library" for f in report.findings)
    flash = next(p for p in report.opt_in if p.name == "flash")
    assert "selects 'flash'" in flash.gate and "'sdpa'" in flash.gate
    assert flash.estimate.p50 >= 2  # a kept feature ports its library, it does not switch it off


def test_kernels_for_other_accelerators_are_not_costed():
    report = scan(FIXTURES / "ctx_other_accelerator")
    assert not any("/ascend/" in f.path or "/rocm/" in f.path for f in report.findings)
    for p in report.opt_in:
        assert p.estimate.p50 == 0
    assert accelerator_of("kernels/ascend/rms.py") and accelerator_of("ops/rmsnorm_rocm.py")
    assert accelerator_of("kernels/cuda/rms.py") is None and accelerator_of("models/chip.py") is None
    # a backend folder with the accelerator as one word of its name
    assert accelerator_of("ops/backends/_ascend/ops/kl_div.py") == "Ascend NPUs"
    assert accelerator_of("ops/common/backends/triton_ascend/chunk.py") == "Ascend NPUs"
    assert accelerator_of("flash_attn/flash_attn_triton_amd/bwd.py") == "AMD GPUs (ROCm)"
    assert accelerator_of("models/relationship_net/hipster.py") is None  # words, not substrings


def test_code_and_builds_only_a_rocm_test_admits_are_another_accelerators(tmp_path):
    root = tree(tmp_path, {
        "setup.py": """\
            import os
            from setuptools import setup
            from torch.utils.cpp_extension import BuildExtension, CUDAExtension, IS_HIP_EXTENSION

            SKIP = os.getenv("SKIP_CUDA_BUILD", "FALSE") == "TRUE"
            ext_modules = []
            if not SKIP and not IS_HIP_EXTENSION:
                ext_modules.append(CUDAExtension("ops._C", ["csrc/ops.cu"]))
            elif not SKIP and IS_HIP_EXTENSION:
                ext_modules.append(CUDAExtension("ops._C", ["csrc/ops_hip.cu"]))
            setup(name="ops", ext_modules=ext_modules, cmdclass={"build_ext": BuildExtension})
            """,
        "csrc/ops.cu": "__global__ void k(float *x) { x[threadIdx.x] *= 2; }\n",
        "csrc/ops_hip.cu": "__global__ void k(float *x) { x[threadIdx.x] *= 3; }\n",
        "ops/__init__.py": """\
            import torch
            from ops import _C

            def double(x):
                if torch.version.hip:
                    torch.cuda.synchronize()
                elif is_rocm_available():
                    torch.cuda.empty_cache()
                else:
                    torch.cuda.ipc_collect()
                return _C.k(x)

            def is_rocm_available():
                return torch.version.hip is not None
            """,
    })
    report = scan(root)
    by = {(f.path, f.line): f for f in report.findings + report.off_path}
    assert by[("setup.py", 8)].context == by[("csrc/ops.cu", 1)].context == "step"  # the CUDA build: ported
    for key in (("setup.py", 10), ("csrc/ops_hip.cu", 1), ("ops/__init__.py", 6), ("ops/__init__.py", 8)):
        f = by[key]
        assert f.context == "opt-in" and f.details["feature"] == "amd-gpus", key
        assert "true only in a ROCm build, for AMD GPUs" in f.gate, key
    assert by[("ops/__init__.py", 10)].context == "step"  # the else of the ROCm tests: the CUDA path
    assert "not SKIP and IS_HIP_EXTENSION" in by[("setup.py", 10)].gate
    # listed apart like a `rocm/` folder, never costed, and not added by `--include-opt-in all`
    (amd,) = [p for p in report.opt_in if p.name == "amd-gpus"]
    assert amd.estimate.p50 == 0 and len(amd.findings) == 4
    kept = run_scan(Settings(root=root, cache=False, include_opt_in=["all"])).report
    assert kept.estimate.p50 == report.estimate.p50


def test_code_that_runs_only_on_a_place_is_never_costed_finding_by_finding(tmp_path):
    """A gate that names a place (`only on a CUDA device (...)`, `only on a build that picks CUDA`) is
    no setting a Trainium user turns on: such findings are listed in the opt-in table, never costed
    there, and `--include-opt-in all` leaves them out. Judged per finding, not by a part's first gate:
    an optional library whose import name is a place feature's (cuda-python's `cuda`) takes a feature
    of its own, `lib:cuda`, costed like any optional library."""
    model = """\
        import torch
        try:
            from cuda import cudart
        except ImportError:
            cudart = None


        class Net(torch.nn.Linear):
            def __init__(self):
                super().__init__(4, 4)

            def forward(self, x):
                if x.is_cuda:
                    torch.cuda.synchronize()
                if cudart is not None:
                    cudart.cudaDeviceSynchronize()
                return super().forward(x)
        """
    root = tree(tmp_path, {"train.py": TRAIN, "model.py": model})
    report = scan(root)
    by = {(f.rule, f.line): f for f in report.findings + report.off_path}
    assert by[("NR1712", 3)].details["feature"] == "lib:cuda"
    assert by[("NR1007", 14)].details["feature"] == "cuda" and by[("NR1007", 14)].gate.startswith("only on ")
    parts = {p.name: p.estimate.p50 for p in report.opt_in}
    assert parts["cuda"] == 0 and parts["lib:cuda"] > 0
    kept = run_scan(Settings(root=root, cache=False, include_opt_in=["all"])).report
    assert kept.estimate.p50 == pytest.approx(report.estimate.p50 + parts["lib:cuda"])
    assert [p.name for p in kept.opt_in] == ["cuda"]  # the CUDA-only branch stays listed apart


def test_a_rocm_test_is_a_name_or_call_that_says_so_and_nothing_wider():
    import ast

    from neuron_ready.sources.codefacts import rocm_test

    def test(expr: str) -> bool:
        return rocm_test(ast.parse(expr, mode="eval").body)

    for yes in ("torch.version.hip", "IS_ROCM", "IS_HIP_EXTENSION", "is_hip()", "utils.is_rocm_available()",
                "USE_ROCM", "ROCM", "_is_hip"):
        assert test(yes), yes
    for no in ("hip", "is_hip(x)", "hip_kernel", "rocm_path", "is_cuda", "IS_ROCM_OR_CUDA", "torch.version.cuda",
               "is_hip_or_rocm"):
        assert not test(no), no


# ------------------------------------------------------------------------------------------ trees


def test_a_function_no_call_reaches_is_off_path_with_the_reason(tmp_path):
    root = tree(tmp_path, {
        "train.py": """\
            import torch
            from ops import used
            def main():
                used()
                torch.optim.SGD([]).step()
            if __name__ == "__main__":
                main()
        """,
        "ops.py": """\
            import torch
            def used():
                return torch.zeros(1).cuda()
            def unused():
                return torch.zeros(1).cuda()
        """,
    })
    report = scan(root)
    assert contexts(report)[("ops.py", 3)] == "step"
    off = next(f for f in report.off_path if f.line == 5)
    assert off.context == "off-path" and "reaches `unused`" in off.details["off_path_reason"]


def test_methods_called_by_name_on_reached_classes_and_forward_are_reached(tmp_path):
    root = tree(tmp_path, {
        "train.py": """\
            import torch
            from model import Net
            def main():
                net = Net()
                loss = net(torch.zeros(1)).sum() + net.aux()
                loss.backward()
            if __name__ == "__main__":
                main()
        """,
        "model.py": """\
            import torch
            class Net(torch.nn.Module):
                def forward(self, x):
                    return x.cuda()
                def aux(self):
                    return torch.zeros(1).cuda()
                def never(self):
                    return torch.zeros(1).cuda()
            class Unused(torch.nn.Module):
                def forward(self, x):
                    return x.cuda()
        """,
    })
    c = contexts(scan(root))
    assert c[("model.py", 4)] == "step" and c[("model.py", 6)] == "step"
    assert c[("model.py", 8)] == "off-path" and c[("model.py", 11)] == "off-path"


def test_forward_of_a_subclass_of_a_project_module_is_reached(tmp_path):
    # `Small(Base)` where only `Base` names nn.Module: the library still calls Small.forward by name
    root = tree(tmp_path, {
        "train.py": """\
            import torch
            from model import Small
            def main():
                net = Small()
                net(torch.zeros(1)).sum().backward()
            if __name__ == "__main__":
                main()
        """,
        "model.py": """\
            import torch
            class Base(torch.nn.Module):
                def forward(self, x):
                    return x
            class Small(Base):
                def forward(self, x):
                    return x.cuda()
            class Plain:
                pass
            class Helper(Plain):
                def forward(self, x):
                    return x.cuda()
            class Unused(Base):
                def forward(self, x):
                    return x.cuda()
            Helper()
        """,
    })
    c = contexts(scan(root))
    assert c[("model.py", 7)] == "step"
    # a plain project class is no library class: its `forward` is only a name, called by nobody
    assert c[("model.py", 12)] == "off-path"
    assert c[("model.py", 15)] == "off-path"  # never constructed


def test_a_switch_with_an_unknown_default_keeps_the_code_on_the_path(tmp_path):
    root = tree(tmp_path, {
        "train.py": """\
            import torch
            def main(args):
                if args.mystery:
                    torch.zeros(1).cuda()
                torch.optim.SGD([]).step()
            if __name__ == "__main__":
                main(None)
        """,
    })
    assert contexts(scan(root))[("train.py", 4)] == "step"  # never dropped for lack of analysis


def test_inference_branches_in_forward_are_evaluation(tmp_path):
    root = tree(tmp_path, {
        "train.py": """\
            import torch
            class Net(torch.nn.Module):
                def forward(self, x):
                    if not self.training:
                        return torch.unique(x)
                    return x
            def main():
                Net()(torch.zeros(1)).sum().backward()
            if __name__ == "__main__":
                main()
        """,
    })
    assert contexts(scan(root))[("train.py", 5)] == "evaluation"


def test_test_functions_and_onnx_export_branches_are_evaluation(tmp_path):
    root = tree(tmp_path, {
        "train.py": """\
            import torch
            class Net(torch.nn.Module):
                def __init__(self, onnx_trace=False):
                    super().__init__()
                    self.onnx_trace = onnx_trace
                def forward(self, x):
                    if self.onnx_trace:
                        return torch.unique(x)
                    return x.nonzero()
            def test_net_matches_reference():
                assert torch.unique(Net()(torch.zeros(3))).numel() == 1
            def main():
                Net()(torch.zeros(1)).sum().backward()
                test_net_matches_reference()
            if __name__ == "__main__":
                main()
        """,
    })
    got = contexts(scan(root))
    assert got[("train.py", 8)] == "evaluation"  # only when onnx_trace (default False): an export
    assert got[("train.py", 9)] == "step"
    assert got[("train.py", 11)] == "evaluation"  # a test_* function, even one the script calls


def test_an_entry_whose_guard_calls_a_trainer_in_the_project_is_detected(tmp_path):
    root = tree(tmp_path, {
        "run.py": "from pkg.trainer import fit\nif __name__ == '__main__':\n    fit()\n",
        "pkg/__init__.py": "",
        "pkg/trainer.py": "import torch\ndef fit():\n    torch.zeros(1).cuda()\n    torch.optim.SGD([]).step()\n",
        "tools/convert.py": "import torch\nif __name__ == '__main__':\n    torch.optim.SGD([]).step()\n",
    })
    report = scan(root)
    reach = report.extra["reach"]
    assert reach["entries"] == ["run.py"]  # tools/ counts only when nothing else trains
    assert "calls `fit`" in reach["entry_reasons"]["run.py"]


def test_defaults_come_from_argparse_dataclasses_and_config_files():
    facts = {"code": {"options": [["fused", False, 3], ["attn", "sdpa", 4], ["attn", "flash", 9]]}}
    d = Defaults([FileInfo("a.py", "python", facts), FileInfo("c.yaml", "config", {"values": [["model.lr", 0.1, 2]]})])
    assert d.option("fused") is False and d.option("attn") is UNKNOWN and d.option("lr") == 0.1
    assert d.evaluate(["cmp", "Eq", ["env", "USE_X", "0"], ["lit", "1"]], "a.py") is False
    assert d.evaluate(["not", ["opt", "fused"]], "a.py") is True
    assert d.evaluate(["opt", "nothing"], "a.py") is UNKNOWN


def test_a_default_the_code_declares_wins_over_example_configurations():
    # The schema says `optimizer: str = "adamw"`; example YAMLs pick other optimizers. A user who sets
    # nothing gets the schema's; a name the code gives no default takes the files' agreed value.
    facts = {"code": {"options": [["optimizer", "adamw", 3]]}}
    configs = [FileInfo(f"examples/{n}.yaml", "config", {"values": [["optimizer", n, 1], ["task", "detect", 2]]})
               for n in ("sinkgd", "lion")]
    d = Defaults([FileInfo("schema.py", "python", facts), *configs])
    assert d.option("optimizer") == "adamw" and d.option("task") == "detect"
    two = {"code": {"options": [["optimizer", "adamw", 3], ["optimizer", "lion", 9]]}}
    assert Defaults([FileInfo("schema.py", "python", two), *configs]).option("optimizer") is UNKNOWN


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("ctx_*")))
def test_every_context_fixture_scans_deterministically(name):
    a = scan(FIXTURES / name).to_dict()
    b = run_scan(Settings(root=FIXTURES / name, cache=False, jobs=1)).report.to_dict()
    assert a == b


def test_a_makefile_built_cuda_trainer_is_one_full_rewrite():
    report = scan(FIXTURES / "ctx_makefile_cuda")
    [task] = [t for t in report.tasks if t.kind == "rewrite-program"]
    assert task.details["kernels"] == 3 and report.estimate.effort_class == "month-plus"
    # kernels.cuh holds only helpers the kernels call (no device work of its own): no unit of its own
    assert {report.findings[i].path for i in task.findings} == {"train.cu"}


def test_the_launch_command_of_the_entry_sets_the_default_configuration(tmp_path):
    root = tree(tmp_path, {
        "train.py": """\
            import argparse, torch
            from flash_attn import flash_attn_func
            def main():
                p = argparse.ArgumentParser()
                p.add_argument("--flash", action="store_true")
                args = p.parse_args()
                if args.flash:
                    flash_attn_func(1, 2, 3)
                torch.optim.SGD([]).step()
            if __name__ == "__main__":
                main()
        """,
        "README.md": "# Train\n\n```bash\ntorchrun --nproc_per_node 8 train.py --flash\n```\n",
    })
    report = scan(root)
    assert "launched by `torchrun train.py` in README.md:4" == report.extra["reach"]["entry_reasons"]["train.py"]
    assert contexts(report)[("train.py", 8)] == "step"  # the README's command turns --flash on
    (root / "README.md").write_text("# Train\n\n```bash\npython train.py\n```\n", encoding="utf-8")
    assert contexts(scan(root))[("train.py", 8)] == "opt-in"


def test_the_main_block_of_an_imported_module_never_runs(tmp_path):
    root = tree(tmp_path, {
        "train.py": "import torch\nimport helpers\nhelpers.setup()\nopt = torch.optim.SGD([])\nfor _ in range(3):\n    opt.step()\n",
        "helpers.py": """\
            import torch
            def setup():
                return torch.zeros(1).cuda()
            def benchmark():
                torch.cuda.synchronize()
            if __name__ == "__main__":
                benchmark()
                torch.zeros(1).cuda()
        """,
    })
    c = contexts(scan(root))
    assert c[("helpers.py", 3)] == "step"
    assert c[("helpers.py", 5)] == "off-path" and c[("helpers.py", 8)] == "off-path"


# ------------------------------------------------------------------------------------------ library mode


def _library(tmp_path: Path) -> Path:
    return tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/base.py": """\
            import torch
            class Tuner:
                def fit(self, x):
                    return x.cuda()  # every tuner runs this: the library's shared core
            class LoraTuner(Tuner):
                def forward(self, x):
                    return torch.nonzero(x)
            class IA3Tuner(Tuner):
                def forward(self, x):
                    return x[x > 0]
            class PrefixTuner(Tuner):
                def forward(self, x):
                    return torch.unique(x)
            """,
        "pkg/models.py": """\
            import torch
            from .registry import register_model
            @register_model
            def tiny(x):
                return torch.argsort(x)
            """,
        "pkg/registry.py": "MODELS = {}\ndef register_model(fn):\n    MODELS[fn.__name__] = fn\n    return fn\n",
        "pkg/losses.py": """\
            import torch
            class ContrastiveLoss(torch.nn.Module):
                def forward(self, x):
                    return torch.unique(x).sum()
            class TripletLoss(torch.nn.Module):
                def forward(self, x):
                    return x.sort().values.sum()
            class MarginLoss(torch.nn.Module):
                def forward(self, x):
                    return x.sum()
            """,
        "pkg/predict.py": """\
            import torch
            from .ops import fill_holes
            class DetectionPredictor:
                def postprocess(self, x):
                    return fill_holes(torch.argsort(x))
            """,
        "pkg/ops.py": """\
            import torch
            def fill_holes(x):
                return torch.nonzero(x)
            """,
    })


def test_a_librarys_alternatives_are_opt_in_and_its_shared_core_is_the_default(tmp_path):
    report = scan(_library(tmp_path))
    assert report.extra["reach"]["mode"] == "library"
    got = {(f.path, f.line): (f.context, f.details.get("feature")) for f in report.findings + report.off_path}
    assert got[("pkg/base.py", 4)] == ("step", None)  # the base class's code every alternative runs
    # subclasses of one project base (three or more): the user picks one
    assert got[("pkg/base.py", 7)] == ("opt-in", "LoraTuner")
    assert "one of 3 subclasses of `Tuner`" in next(f.gate for f in report.off_path if f.line == 7)
    # registered by a decorator for lookup by name, and classes named as kinds of one thing
    assert got[("pkg/models.py", 5)] == ("opt-in", "tiny")
    assert got[("pkg/losses.py", 4)] == ("opt-in", "ContrastiveLoss")
    assert "classes named `*Loss`" in next(f.gate for f in report.off_path if f.path == "pkg/losses.py")
    # a predictor's methods run a trained model: evaluation
    assert got[("pkg/predict.py", 5)][0] == "evaluation"
    # a public method of a root class is what a user calls: what only it reaches takes its label
    assert got[("pkg/ops.py", 3)][0] == "evaluation"
    assert {p.name for p in report.opt_in} >= {"LoraTuner", "IA3Tuner", "PrefixTuner", "tiny", "ContrastiveLoss"}


def test_the_only_registration_under_a_key_the_library_dispatches_is_its_default(tmp_path):
    """liger-kernel files `kl_loss_and_grad_triton` under `@register_op("kl_loss_and_grad", ...)` and its
    fused op calls `dispatch("kl_loss_and_grad", ...)`: a lookup that can find nothing else, so the
    library picks it itself (round 14 named it a miss). Two registrations under one key stay
    alternatives a dispatcher chooses among; another accelerator's registration does not count; a
    key nothing names outside its decorator is still the user's pick."""
    root = tree(tmp_path, {
        "pkg/__init__.py": "from .fused import fused_loss\n",
        "pkg/registry.py": """\
            OPS = {}
            def register_op(name, impl_name=""):
                def wrap(fn):
                    OPS.setdefault(name, []).append(fn)
                    return fn
                return wrap
            def dispatch(name, *args):
                return OPS[name][0](*args)
            """,
        "pkg/fused.py": """\
            from .registry import dispatch
            def fused_loss(x):
                return dispatch("loss_and_grad", x) + dispatch("norm", x)
            """,
        "pkg/backends/triton_ops.py": """\
            import torch
            from ..registry import register_op
            @register_op("loss_and_grad", impl_name="triton")
            def loss_and_grad_triton(x):
                return torch.nonzero(x)
            @register_op("norm", impl_name="triton")
            def norm_triton(x):
                return torch.unique(x)
            @register_op("unused", impl_name="triton")
            def unused_triton(x):
                return torch.argsort(x)
            """,
        "pkg/backends/cutedsl_ops.py": """\
            import torch
            from ..registry import register_op
            @register_op("norm", impl_name="cutedsl")
            def norm_cutedsl(x):
                return x[x > 0]
            """,
        "pkg/backends/_ascend/ops.py": """\
            import torch
            from ...registry import register_op
            @register_op("loss_and_grad", impl_name="ascend")
            def loss_and_grad_npu(x):
                return x.sort().values
            """,
    })
    report = scan(root)
    assert report.extra["reach"]["mode"] == "library"
    got = {(f.path, f.line): (f.context, f.details.get("feature")) for f in report.findings + report.off_path}
    assert got[("pkg/backends/triton_ops.py", 5)] == ("step", None)  # the only one under its key
    assert got[("pkg/backends/triton_ops.py", 8)] == ("opt-in", "norm_triton")  # one of two under `norm`
    assert got[("pkg/backends/cutedsl_ops.py", 5)] == ("opt-in", "norm_cutedsl")
    assert got[("pkg/backends/triton_ops.py", 11)] == ("opt-in", "unused_triton")  # nothing dispatches it


def test_two_subclasses_are_no_family_and_an_entry_costs_what_it_calls(tmp_path):
    root = _library(tmp_path)
    (root / "pkg/base.py").write_text((root / "pkg/base.py").read_text().split("class PrefixTuner")[0])
    report = scan(root)
    lora = next(f for f in report.findings + report.off_path if f.path == "pkg/base.py" and f.line == 7)
    assert lora.context == "step"  # two subclasses: not a family, the library's surface
    (root / "train.py").write_text(textwrap.dedent("""\
        import torch
        from pkg.base import LoraTuner
        def main():
            t = LoraTuner()
            x = t.forward(torch.ones(3))
            x.sum().backward()
        if __name__ == "__main__":
            main()
        """))
    report = scan(root)
    assert report.extra["reach"]["mode"] == "entries"
    assert contexts(report)[("pkg/base.py", 7)] == "step"  # an entry names its alternative: no gate


def test_cuda_housekeeping_behind_a_device_check_is_cuda_only(tmp_path):
    root = tree(tmp_path, {"train.py": """\
        import torch

        def step(model, x, opt, device):
            if x.is_cuda:
                torch.cuda.synchronize()
            if x.device.type == "cuda":
                torch.cuda.empty_cache()
            if not torch.cuda.is_available():
                pass
            else:
                torch.backends.cuda.matmul.allow_tf32 = True
            if torch.cuda.is_available():
                device = torch.device("cuda")
                torch.cuda.synchronize()
            torch.cuda.synchronize()
            loss = model(x.to(device)).sum()
            loss.backward()
            opt.step()

        if __name__ == "__main__":
            step(None, torch.ones(1), None, "cpu")
        """})
    report = scan(root)
    got = {f.line: (f.context, f.gate) for f in report.findings + report.off_path}
    assert got[5] == ("opt-in", "only on a CUDA device (`x.is_cuda`)")
    assert got[7][0] == "opt-in" and got[11][0] == "opt-in"  # a negated check: its else branch
    # a branch that also picks the device stays a concern, with its test and its housekeeping
    assert got[12][0] == got[13][0] == got[14][0] == "step"
    assert got[15][0] == "step"  # unguarded
    cuda = next(p for p in report.opt_in if p.name == "cuda")
    assert cuda.estimate.p50 == 0 and not cuda.tasks


def test_evaluator_validator_and_exporter_modules_are_evaluation():
    from neuron_ready.context import evaluation_path

    for path in ("pkg/task/evaluator.py", "pkg/engine/exporter.py", "validators.py", "pkg/predictor_utils.py"):
        assert evaluation_path(path), path
    assert not evaluation_path("pkg/models/model.py")
    assert not evaluation_path("pkg/validation_loss.py")  # a loss used in training, not a validator


def report_reason(report, line: int) -> str:
    return " ".join(f.details.get("context_reason", "") for f in report.findings + report.off_path if f.line == line)


def test_more_cuda_only_shapes_strings_nccl_and_early_returns(tmp_path):
    root = tree(tmp_path, {"train.py": """\
        import os
        import torch
        import torch.distributed as dist

        class Runner:
            def setup(self, device, backend):
                device_type = str(device).split(":")[0]
                if device_type == "cuda":
                    os.environ["TORCH_NCCL_BLOCKING_WAIT"] = "1"
                if self.device_type == "cuda":
                    torch.cuda.empty_cache()
                if str(device).startswith("cuda"):
                    torch.cuda.synchronize()
                if device.startswith("cuda:"):
                    torch.cuda.set_device(device)
                if backend == "nccl":
                    dist.barrier(device_ids=[0])
                if dist.get_backend() != "nccl":
                    pass
                else:
                    torch.cuda.reset_peak_memory_stats()
                if device_type == "cuda":
                    torch.cuda.synchronize()
                    model = torch.zeros(1).cuda()

        def report(device):
            if not torch.cuda.is_available():
                torch.cuda.synchronize()
                return "no cuda"
            used = torch.cuda.max_memory_allocated()
            return used

        def graphed(fn):
            if device_type() != "cuda":
                return fn
            def run(*args):
                return Graph(fn)(*args)
            return run

        class Graph:
            def __init__(self, fn):
                self.fn = fn

            def __call__(self, *args):
                g = torch.cuda.CUDAGraph()
                return self.fn(*args)

        def device_type():
            return "cpu"

        def train(model, x, opt):
            runner = Runner(); runner.setup("cpu", "gloo")
            step = graphed(model)
            loss = step(x).sum()
            loss.backward()
            opt.step()
            print(report("cpu"))

        if __name__ == "__main__":
            train(None, torch.ones(1), None)
        """})
    report = scan(root)
    got = {f.line: (f.context, f.gate) for f in report.findings + report.off_path}
    cuda = {line for line, (context, gate) in got.items() if context == "opt-in" and "CUDA device" in (gate or "")}
    assert got[9] == ("opt-in", "only on a CUDA device (`device_type == 'cuda'`)")  # NCCL env var
    assert {9, 11, 13, 15, 17, 21} <= cuda  # strings, startswith, NCCL backend, the else of `!= "nccl"`
    # a branch that also places data stays a concern when its test asks what is available; this one
    # reads the device passed in (`device_type = str(device).split(":")[0]`): chosen by the caller, a
    # Neuron device on Trainium, the branch not taken (test_cuda_checks: an existing device chooses nothing)
    assert got[23][0] == got[24][0] == "opt-in"
    assert "already exists" in report_reason(report, 24)
    # an early return leaves the rest of the function (and the check itself) to CUDA devices
    assert 27 in cuda and 30 in cuda
    assert got[28][0] == "step"  # the return branch runs everywhere: not CUDA-only
    # a class reached only through the CUDA-only rest of a wrapper never runs on Trainium
    assert got[45] == ("opt-in", "only on a CUDA device (`Graph.__call__` is reached only through CUDA-only branches)")


def test_a_gpu_library_behind_an_import_guard_is_opt_in_unless_imported_unconditionally(tmp_path):
    root = tree(tmp_path, {
        "train.py": """\
            import torch
            from pkg.norm import norm
            from pkg.attn import attn
            from pkg.quant import quantize

            def train(model, x, opt):
                loss = quantize(attn(norm(x))).sum()
                loss.backward()
                opt.step()

            if __name__ == "__main__":
                train(None, torch.ones(1), None)
            """,
        "pkg/__init__.py": "",
        "pkg/norm.py": """\
            import torch
            try:
                from apex.normalization import fused_layer_norm
                has_apex = True
            except ImportError:
                has_apex = False

            def norm(x):
                if has_apex:
                    return fused_layer_norm(x)
                return torch.nn.functional.layer_norm(x, x.shape[-1:])
            """,
        "pkg/attn.py": """\
            from pkg.fast import fast
            try:
                import flash_attn
            except ImportError:
                flash_attn = None

            def attn(x):
                if flash_attn is not None:
                    return flash_attn.flash_attn_func(x, x, x)
                return fast(x)
            """,
        "pkg/fast.py": """\
            from flash_attn import flash_attn_func

            def fast(x):
                return flash_attn_func(x, x, x)
            """,
        "pkg/quant.py": """\
            from transformers.utils import is_bitsandbytes_available
            if is_bitsandbytes_available():
                import bitsandbytes as bnb

            def quantize(x):
                return x
            """,
        "pyproject.toml": """\
            [project]
            name = "demo"
            dependencies = ["torch", "deepspeed"]

            [project.optional-dependencies]
            quant = ["bitsandbytes>=0.43"]
            flash = ["flash-attn"]
            dev = ["liger-kernel", "pytest"]
            """,
        "requirements-dev.txt": "vllm\n",
        "setup.py": """\
            from setuptools import setup
            setup(name="demo", install_requires=["torch"],
                  extras_require={"fp8": ["transformer-engine"], "tests": ["xformers"]})
            """,
    })
    report = scan(root)
    got = {(f.path, f.line): (f.context, f.gate, f.details.get("feature")) for f in report.findings + report.off_path}
    # try/except ImportError with a handler that goes on, and `if is_x_available():`: opt-in, named for the library
    assert got[("pkg/norm.py", 3)] == ("opt-in", "only when apex is installed (imported under a guard with a fallback)", "apex")
    assert got[("pkg/norm.py", 10)][2] == "apex"
    assert got[("pkg/quant.py", 3)][0:3:2] == ("opt-in", "bitsandbytes")
    # flash_attn is also imported unconditionally on the path: every use stays must-port; the guarded
    # import statement itself is the guard the remedies ask for, not a task (the audit's llm-foundry row)
    assert got[("pkg/attn.py", 9)][0] == got[("pkg/fast.py", 1)][0] == got[("pkg/fast.py", 4)][0] == "step"
    assert got[("pkg/attn.py", 3)][0:3:2] == ("opt-in", "flash_attn")
    # dependencies: core stays, an optional extra is opt-in, a development extra or file is off the path
    assert got[("pyproject.toml", 3)][0] == "step"
    assert got[("pyproject.toml", 6)] == ("opt-in", "only when installed with the [quant] extra", "extra:quant")
    assert got[("pyproject.toml", 7)][0] == "step"  # flash-attn: imported unconditionally by pkg/fast.py
    assert got[("pyproject.toml", 8)][0] == "off-path"
    assert got[("requirements-dev.txt", 1)][0] == "off-path"
    setup = {f.symbol: (f.context, f.details.get("feature")) for f in report.off_path if f.path == "setup.py"}
    assert setup == {"transformer-engine": ("opt-in", "extra:fp8"), "xformers": ("off-path", None)}
    assert {p.name for p in report.opt_in} >= {"apex", "bitsandbytes", "extra:quant", "extra:fp8"}


def test_a_cuda_branch_whose_alternative_raises_is_required_not_skipped(tmp_path):
    root = tree(tmp_path, {"train.py": """\
        import torch

        def init(rank):
            if torch.cuda.is_available():
                torch.cuda.set_device(rank)
            else:
                raise NotImplementedError("CUDA was not found")

        def train(model, x, opt):
            init(0)
            model(x).sum().backward()
            opt.step()

        if __name__ == "__main__":
            train(None, torch.ones(1), None)
        """})
    report = scan(root)
    got = {f.line: f.context for f in report.findings + report.off_path}
    assert got[4] == got[5] == "step"  # Trainium reaches the raise: the CUDA branch is the only path


# ------------------------------------------------------------------------------------------ what the code picks


def test_a_family_member_the_library_constructs_runs_with_its_caller(tmp_path):
    root = tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/store.py": "class Attachable:\n    pass\n",
        "pkg/model.py": """\
            import torch
            from flash_attn import flash_attn_func
            from .store import Attachable
            class FlashAttention(torch.nn.Module, Attachable):
                def forward(self, q):
                    return flash_attn_func(q, q, q)
            class Embedding(torch.nn.Module, Attachable):
                def forward(self, x):
                    return torch.nonzero(x)
            class Sampler(Attachable):
                def draw(self, x):
                    return torch.unique(x)
            class DecoderLayer(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = FlashAttention()
                def forward(self, x):
                    return self.attn(x)
            """,
        "pkg/trainer.py": """\
            from .model import DecoderLayer
            class Trainer:
                def build(self):
                    return DecoderLayer()
            """,
    })
    report = scan(root)
    assert report.extra["reach"]["mode"] == "library"
    got = {(f.path, f.line): (f.context, f.details.get("feature")) for f in report.findings + report.off_path}
    # the decoder layer builds its attention: no user picks it, it runs with the layer
    assert got[("pkg/model.py", 6)] == ("step", None)
    # the other members of the family nothing builds stay the user's alternatives
    assert got[("pkg/model.py", 9)] == ("opt-in", "Embedding")
    assert got[("pkg/model.py", 12)] == ("opt-in", "Sampler")
    # a GPU library imported by a module the package always imports is no optional integration
    flash = next(t for t in report.tasks if t.category == "gpu-library")
    assert flash.title.startswith("Swap:"), flash.title


def test_a_gpu_library_only_optional_modules_import_stays_an_optional_integration(tmp_path):
    root = tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/fast.py": "from flash_attn import flash_attn_func\ndef attend(q):\n    return flash_attn_func(q, q, q)\n",
        "pkg/model.py": "def attend(q, fast=False):\n    from .fast import attend as f\n    return f(q)\n",
    })
    flash = next(t for t in scan(root).tasks if t.category == "gpu-library")
    assert flash.title.startswith("Gate the optional integration"), flash.title


def test_a_console_script_table_of_subcommands_makes_the_training_ones_entries(tmp_path):
    root = tree(tmp_path, {
        "pyproject.toml": '[project]\nname = "x"\nversion = "1"\n[project.scripts]\nx = "xpkg.__main__:main"\n',
        "xpkg/__init__.py": "",
        "xpkg/__main__.py": """\
            from jsonargparse import CLI
            from xpkg.finetune import setup as finetune_fn
            from xpkg.generate import main as generate_fn
            COMMANDS = {"finetune": finetune_fn, "generate": generate_fn}
            def main():
                CLI(COMMANDS)
            """,
        "xpkg/finetune.py": """\
            import torch
            from xpkg.model import Net
            def setup():
                fit(Net())
            def fit(net):
                loss = net(torch.ones(2).cuda()).sum()
                loss.backward()
            """,
        "xpkg/model.py": "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return torch.nonzero(x)\n",
        "xpkg/generate.py": "import torch\ndef main():\n    return torch.zeros(1).cuda()\n",
    })
    report = scan(root)
    reach = report.extra["reach"]
    assert reach["entries"] == ["xpkg/finetune.py"]
    assert reach["entry_reasons"]["xpkg/finetune.py"] == (
        "subcommand `finetune` of console script `xpkg.__main__:main`, which trains")
    c = contexts(report)
    assert c[("xpkg/finetune.py", 6)] == "step" and c[("xpkg/model.py", 4)] == "step"
    assert c[("xpkg/generate.py", 3)] == "off-path"  # a subcommand that does not train


def test_a_class_chosen_by_a_config_string_is_an_alternative_with_the_default_on_the_path(tmp_path):
    root = tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/config.py": """\
            from dataclasses import dataclass
            import pkg.model
            @dataclass
            class Config:
                mlp_class_name: str = "MLP"
                @property
                def mlp_class(self):
                    return getattr(pkg.model, self.mlp_class_name)
            """,
        "pkg/model.py": """\
            import torch
            class MLP(torch.nn.Module):
                def forward(self, x):
                    return x.cuda()
            class MoE(torch.nn.Module):
                def forward(self, x):
                    return torch.nonzero(x)
            class Block(torch.nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.mlp = config.mlp_class(config)
                def forward(self, x):
                    return self.mlp(x)
            """,
        "train.py": """\
            from pkg.config import Config
            from pkg.model import Block
            def main():
                block = Block(Config())
                block(None).sum().backward()
            if __name__ == "__main__":
                main()
            """,
    })
    report = scan(root)
    got = {(f.path, f.line): (f.context, f.gate) for f in report.findings + report.off_path}
    assert got[("pkg/model.py", 4)] == ("step", None)  # the default class
    assert got[("pkg/model.py", 7)] == (
        "opt-in", "only when self.mlp_class_name == 'MoE' (the default is 'MLP')")


def test_callbacks_registered_on_an_op_run_when_the_op_does(tmp_path):
    ops = """\
        import torch
        @torch.library.custom_op("x::op", mutates_args=(), device_types="cuda")
        def op(x: torch.Tensor) -> torch.Tensor:
            return x.clone()
        def backward(ctx, grad):
            return torch.nonzero(grad)
        op.register_autograd(backward)
        """
    train = """\
        import torch
        import ops
        def main(x):
            {call}
            torch.optim.SGD([]).step()
        if __name__ == "__main__":
            main(torch.ones(1))
        """
    root = tree(tmp_path, {"ops.py": ops, "train.py": train.format(call="pass")})
    c = contexts(scan(root))
    assert c[("ops.py", 6)] == "off-path"  # imported, registered, never run
    assert c[("ops.py", 2)] == "off-path"  # a CUDA-only op nobody calls needs no Neuron kernel
    (root / "train.py").write_text(textwrap.dedent(train.format(call="ops.op(x)")))
    c = contexts(scan(root))
    assert c[("ops.py", 6)] == "step" and c[("ops.py", 2)] == "step"


def test_a_table_method_asked_for_the_configured_task_runs_only_the_default_entry(tmp_path):
    # `self.task_map[self.task]`: a method returns the classes of each task, and the configuration
    # (here a YAML file) names the default task; the other tasks' classes are opt-in per task.
    root = tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/cfg/default.yaml": "task: detect\nepochs: 3\n",
        "pkg/losses.py": """\
            import torch
            class DetectLoss:
                def __call__(self, x):
                    return x[x > 0].sum()
            class PoseLoss:
                def __call__(self, x):
                    return torch.nonzero(x).sum()
            """,
        "pkg/tasks.py": """\
            from pkg import losses
            class DetectTrainer:
                def train(self, x):
                    losses.DetectLoss()(x).backward()
            class PoseTrainer:
                def train(self, x):
                    losses.PoseLoss()(x).backward()
            """,
        "pkg/model.py": """\
            from pkg.tasks import DetectTrainer, PoseTrainer
            class Model:
                def __init__(self, task):
                    self.task = task
                @property
                def task_map(self):
                    \"\"\"Classes of each task.\"\"\"
                    return {
                        "detect": {"trainer": DetectTrainer},
                        "pose": {"trainer": PoseTrainer},
                    }
                def train(self, x):
                    trainer = self.task_map[self.task]["trainer"]()
                    trainer.train(x)
            """,
        "train.py": """\
            import torch
            from pkg.model import Model
            def main():
                opt = torch.optim.SGD([], lr=0.1)
                model = Model("detect")
                model.train(None)
                opt.step()
            if __name__ == "__main__":
                main()
            """,
    })
    report = scan(root)
    assert report.extra["reach"]["entries"] == ["train.py"]
    got = {(f.path, f.line): (f.context, f.gate) for f in report.findings + report.off_path}
    assert got[("pkg/losses.py", 4)] == ("step", None)
    assert got[("pkg/losses.py", 7)] == ("opt-in", "only when task == 'pose' (the default is 'detect')")
    assert [p.name for p in report.opt_in] == ["pose"]
    # Without a readable default every entry runs (the module-level answer).
    (root / "pkg/cfg/other.yaml").write_text("task: pose\n", encoding="utf-8")
    again = {(f.path, f.line): f.context for f in scan(root).findings}
    assert again[("pkg/losses.py", 7)] == "step" and again[("pkg/losses.py", 4)] == "step"


def test_an_xla_mode_behind_a_setting_leaves_the_cuda_default_to_port(tmp_path):
    # fairseq-style: the trainer has a TPU mode (`if self.tpu: import torch_xla ...`) beside its CUDA
    # default; only what the XLA mode's own function imports is already XLA.
    root = tree(tmp_path, {
        "trainer.py": """\
            import torch
            class Trainer:
                def __init__(self, cfg, model):
                    self.tpu = cfg.tpu
                    self.model = model.cuda()
                def step(self, batch):
                    if self.tpu:
                        import torch_xla.core.xla_model as xm
                        xm.mark_step()
                    torch.cuda.synchronize()
                    return self.model(batch)
            def tpu_device():
                import torch_xla.core.xla_model as xm
                torch.cuda.synchronize()
                return xm.xla_device()
            """,
        "ported.py": """\
            import torch
            import torch_xla.core.xla_model as xm
            def step(model, batch):
                torch.cuda.synchronize()
                return model(batch)
            """,
        "probe.py": """\
            import torch
            try:
                import torch_xla
            except ImportError:
                torch_xla = None
            def step(x):
                return x.cuda()
            """,
    })
    got = contexts(scan(root))
    assert got[("trainer.py", 5)] == "step" and got[("trainer.py", 10)] == "step"  # the CUDA default
    assert got[("trainer.py", 14)] == "neuron-native"  # the XLA mode's own function
    assert got[("ported.py", 4)] == "neuron-native"  # a file that imports torch_xla in its module code
    assert got[("probe.py", 7)] == "neuron-native"  # a capability import: XLA whenever it is installed


def test_a_local_holding_a_cuda_check_is_a_cuda_check(tmp_path):
    root = tree(tmp_path, {"train.py": """\
        import torch

        def step(model, q, k, opt):
            any_cuda = any(t.is_cuda for t in (q, k))
            every_cuda = all([t.is_cuda for t in (q, k)])
            if any_cuda:
                torch.cuda.synchronize()
            if every_cuda and model is not None:
                torch.cuda.empty_cache()
            loss = model(q).sum()
            loss.backward()
            opt.step()

        if __name__ == "__main__":
            step(None, torch.ones(1), torch.ones(1), None)
        """})
    got = {f.line: f.context for f in scan(root).findings + scan(root).off_path}
    assert got[7] == "opt-in" and got[9] == "opt-in"  # skipped on Trainium, like `if q.is_cuda:`


def test_a_class_named_only_in_a_type_test_runs_none_of_its_code(tmp_path):
    """`isinstance(self.strategy, DeepSpeedStrategy)` asks what the strategy is; it constructs nothing,
    so the DeepSpeed strategy's methods are not on the path because of it. Constructing it is."""
    strategies = """\
        import torch

        class Strategy:
            def setup(self, model):
                return model.to("cpu")

        class FusedStrategy(Strategy):
            def setup(self, model):
                torch.cuda.synchronize()
                return model.cuda()
    """
    train = """\
        import torch
        from strategies import FusedStrategy, Strategy

        def run(strategy):
            if isinstance(strategy, FusedStrategy) or issubclass(type(strategy), (FusedStrategy,)):
                print("fused")
            model = strategy.setup(torch.nn.Linear(2, 2))
            for _ in range(3):
                model(torch.ones(2)).sum().backward()

        if __name__ == "__main__":
            run(Strategy())
    """
    root = tree(tmp_path / "typetest", {"strategies.py": strategies, "train.py": train})
    assert by_context(scan(root), "step") == set()
    constructed = tree(tmp_path / "built", {"strategies.py": strategies,
                                            "train.py": train.replace("run(Strategy())", "run(FusedStrategy())")})
    assert by_context(scan(constructed), "step") == {"strategies.py:9", "strategies.py:10"}


# Graph nodes are `rel::scope`; folder and file names are the scanned tree's, so hostile ones must not
# split in the wrong place (`a::b/train.py::main`) or pass for a call by name (`a:`, `q:` prefixes).
@pytest.mark.parametrize("folder", ["a::b", "q:x", "a:y", "x::", "t`r\nx::y"])
@pytest.mark.parametrize("named", [False, True])
def test_a_hostile_folder_name_keeps_the_training_path(tmp_path, folder, named):
    root = tree(tmp_path, {
        f"{folder}/train.py": """\
            import torch
            from model import Net

            def main():
                net = Net().cuda()
                opt = torch.optim.SGD(net.parameters(), lr=0.1)
                for _ in range(3):
                    net(torch.randn(4, 8)).sum().backward()
                    opt.step()

            if __name__ == "__main__":
                main()
            """,
        f"{folder}/model.py": """\
            import torch

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.l = torch.nn.Linear(8, 8)

                def forward(self, x):
                    x = x[x > 0]
                    return self.l(x)

            def unused(x):
                return x.nonzero()
            """,
    })
    report = scan(root, entries=[f"{folder}/train.py"] if named else [])
    assert report.extra["reach"]["entries"] == [f"{folder}/train.py"]
    assert contexts(report) == {(f"{folder}/train.py", 5): "step", (f"{folder}/model.py", 9): "step",
                                (f"{folder}/model.py", 13): "off-path"}


@pytest.mark.parametrize("test, gate", [
    ("not use_par", "only when use_par (use_par defaults to False)"),
    ("impl != 'local'", "only when impl == 'local' (impl defaults to 'none')"),
    ("impl == 'none' and not use_par",
     "only when not (impl == 'none' and (not use_par)) (impl defaults to 'none'; use_par defaults to False)"),
])
def test_the_gate_of_an_else_branch_reads_as_its_test_negated(tmp_path, test, gate):
    """An `else` branch's gate is the negation a reader would write, not `not (not use_par)`."""
    root = tree(tmp_path, {"train.py": f"""\
        import torch

        def step(x, use_par=False, impl="none"):
            if {test}:
                y = x
            else:
                y = x.cuda()
            y.sum().backward()

        if __name__ == "__main__":
            step(torch.randn(4, requires_grad=True))
        """})
    report = scan(root)
    assert [(f.line, f.context, f.gate) for f in report.findings + report.off_path] == [(7, "opt-in", gate)]


def test_a_keyword_is_gated_where_its_value_is_chosen(tmp_path):
    """`attn_implementation=impl` asks for flash-attn only through `impl = "flash_attention_2"`: under a
    switch that is off by default that is the keyword's gate; set unconditionally it is must-port.
    The leading function no rule matches is cut by the screen, so the lines must map back."""
    filler = "".join(f"    total += {i}\n" for i in range(40))
    root = tree(tmp_path, {"train.py": "def unrelated():\n    total = 0\n" + filler + "    return total\n\n\n" + textwrap.dedent("""\
        from transformers import AutoModelForCausalLM, Trainer


        def build(path, attn_implementation=None, use_flash_attention_2=False):
            if use_flash_attention_2:
                attn_implementation = "flash_attention_2"
            if attn_implementation is None:
                attn_implementation = "eager"
            return AutoModelForCausalLM.from_pretrained(path, attn_implementation=attn_implementation)


        def build_fast(path):
            impl = "flash_attention_2"
            return AutoModelForCausalLM.from_pretrained(path, attn_implementation=impl)


        if __name__ == "__main__":
            Trainer(model=build("m")).train()
            Trainer(model=build_fast("m")).train()
        """)})
    report = scan(root)
    got = {f.line: (f.context, f.gate, f.details.get("value_lines")) for f in report.findings + report.off_path}
    assert got == {
        54: ("opt-in", "only when use_flash_attention_2 (use_flash_attention_2 defaults to False): the branch that"
                       " gives `attn_implementation` its value (line 51)", [51]),
        59: ("step", None, [58]),
    }


def test_a_required_bool_parameter_is_what_every_call_passes(tmp_path):
    """`build_inner_model(..., use_flash_attention_2: bool)` has no default: its value is what its
    calls pass (here the constructor's own parameter, False by default). A call that passes it by
    position leaves it unknown, so the code behind it stays must-port."""
    root = tree(tmp_path, {"train.py": """\
        from transformers import AutoModelForCausalLM, Trainer


        class Wrapper:
            def __init__(self, path, use_flash_attention_2: bool = False):
                self.model = self.build_inner_model(path=path, use_flash_attention_2=use_flash_attention_2)

            @staticmethod
            def build_inner_model(path, use_flash_attention_2: bool):
                impl = "eager"
                if use_flash_attention_2:
                    impl = "flash_attention_2"
                return AutoModelForCausalLM.from_pretrained(path, attn_implementation=impl)


        def build(path, fast: bool):
            impl = "eager"
            if fast:
                impl = "flash_attention_2"
            return AutoModelForCausalLM.from_pretrained(path, attn_implementation=impl)


        if __name__ == "__main__":
            Trainer(model=Wrapper("m").model).train()
            Trainer(model=build("m", True)).train()
            Trainer(model=build("m", fast=False)).train()
        """})
    report = scan(root)
    got = {f.line: (f.context, f.gate) for f in report.findings + report.off_path}
    assert got == {
        13: ("opt-in", "only when use_flash_attention_2 (use_flash_attention_2 is False at every call): the branch"
                       " that gives `attn_implementation` its value (line 12)"),
        20: ("step", None),
    }


@pytest.mark.parametrize("target, gated", [("native", {11: "only when not TORCH_2_4 (PyTorch on this target is 2.10 or later)"}),
                                           ("xla", {13: "only when torch.__version__ >= '2.12' (PyTorch on this target is 2.1 to 2.9)"})])
def test_a_branch_for_a_pytorch_the_target_never_runs_is_not_the_step(tmp_path, target, gated):
    """TorchNeuron runs PyTorch 2.10 or later and torch-neuronx 2.1 to 2.9 (neuron-facts.md): the
    `torch.cuda.amp` fallback for torch < 2.4 never runs natively, a branch for torch >= 2.12 never
    on XLA; a test the target's versions answer both ways stays unknown (must-port)."""
    root = tree(tmp_path, {
        "utils.py": "import torch\nTORCH_VERSION = torch.__version__\nTORCH_2_4 = TORCH_VERSION >= '2.4'\n",
        "train.py": """\
            import torch
            from utils import TORCH_2_4


            def main():
                model = torch.nn.Linear(4, 4)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                if TORCH_2_4:
                    scaler = torch.amp.GradScaler("cuda")
                else:
                    scaler = torch.cuda.amp.GradScaler()
                if torch.__version__ >= "2.12":
                    model = model.cuda()
                for _ in range(3):
                    scaler.scale(model(torch.randn(2, 4)).sum()).backward()
                    scaler.step(opt)


            if __name__ == "__main__":
                main()
            """})
    report = scan(root, target=target)
    got = {f.line: f.gate for f in report.findings + report.off_path if f.line in (9, 11, 13)}
    assert got == {9: None, 11: None, 13: None, **gated}
    assert all(f.context == ("opt-in" if f.line in gated else "step") for f in report.findings + report.off_path
               if f.line in (9, 11, 13))


def test_a_custom_op_is_reached_through_torch_ops_when_its_module_is_imported(tmp_path):
    """`@custom_op("mylib::scale")` registers `_scale` as `torch.ops.mylib.scale`, a name no import
    resolves (nor is it the fake implementation registered beside it); on PyTorch 2.4 or later the
    module names it only so, and the branch naming `_scale` directly is for an older PyTorch the
    target never runs: its body stays the step."""
    root = tree(tmp_path, {
        "ops.py": """\
            import torch

            if torch.__version__ >= "2.4.0":
                wrapper = torch.library.custom_op
            else:
                def wrapper(name, fn=None, *, mutates_args, device_types=None):
                    return lambda f: f


            @wrapper("mylib::scale", mutates_args=(), device_types="cuda")
            def _scale(x: torch.Tensor) -> torch.Tensor:
                return x.cuda() * 2


            @torch.library.register_fake("mylib::scale")
            def _scale_fake(x):
                return torch.empty_like(x)


            if torch.__version__ >= "2.4.0":
                scale = torch.ops.mylib.scale
            else:
                scale = _scale
            """,
        "train.py": """\
            import torch
            import ops


            def main():
                w = torch.nn.Parameter(torch.randn(4))
                opt = torch.optim.SGD([w], lr=0.1)
                for _ in range(3):
                    ops.scale(w).sum().backward()
                    opt.step()


            if __name__ == "__main__":
                main()
            """})
    report = scan(root)
    assert [(f.path, f.line, f.context) for f in report.findings + report.off_path if f.rule == "NR1001"] == [
        ("ops.py", 12, "step")]


@pytest.mark.parametrize("test, gated", [("TORCH_2_4", None),
                                          ("not TORCH_2_4", "only when not TORCH_2_4 (PyTorch on this target is 2.10 or later)")])
def test_an_arm_of_a_conditional_expression_on_a_version_is_a_branch(tmp_path, test, gated):
    """`a if TORCH_2_4 else b` is the one-line form of `if TORCH_2_4: a else: b`: the arm for a PyTorch
    the target never runs (natively 2.10 or later) is opt-in like the statement's branch, with its gate;
    the arm taken stays must-port."""
    root = tree(tmp_path, {
        "utils.py": "import torch\nTORCH_VERSION = torch.__version__\nTORCH_2_4 = TORCH_VERSION >= '2.4'\n",
        "train.py": f"""\
            import torch
            from utils import TORCH_2_4


            def main():
                model = torch.nn.Linear(4, 4)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                scaler = torch.amp.GradScaler("cuda") if {test} else None
                for _ in range(3):
                    scaler.scale(model(torch.randn(2, 4)).sum()).backward()
                    scaler.step(opt)


            if __name__ == "__main__":
                main()
            """})
    report = scan(root, target="native")
    got = [(f.symbol, f.context, f.gate) for f in report.findings + report.off_path if f.line == 8]
    assert got == [("torch.amp.GradScaler", "opt-in" if gated else "step", gated)]


def test_an_arm_of_a_conditional_expression_on_an_option_is_a_branch(tmp_path):
    """`flash_fn(x) if args.use_flash else torch_fn(x)` with `--use-flash` off by default: the flash arm
    is opt-in with the option's gate, as in `if args.use_flash:`; the other arm is the step."""
    root = tree(tmp_path, {
        "train.py": """\
            import argparse
            import torch
            from flash_attn import flash_attn_func


            def main():
                p = argparse.ArgumentParser()
                p.add_argument("--use-flash", action="store_true")
                args = p.parse_args()
                model = torch.nn.Linear(4, 4)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for _ in range(3):
                    x = torch.randn(2, 4)
                    y = flash_attn_func(x, x, x) if args.use_flash else x.cuda()
                    model(y).sum().backward()
                    opt.step()


            if __name__ == "__main__":
                main()
            """})
    report = scan(root)
    line14 = {f.rule: (f.column, f.context, f.gate) for f in report.findings + report.off_path if f.line == 14}
    flash = [v for v in line14.values() if v[0] < 40]
    other = [v for v in line14.values() if v[0] > 40]
    assert flash and all(c == "opt-in" and g and "use_flash" in g for _c, c, g in flash), line14
    assert other and all(c == "step" for _c, c, g in other), line14


def test_an_arm_of_a_conditional_expression_on_a_capability_is_a_kernel_branch():
    """`fused_add(x, y) if HAS_TRITON else x + y` is `if HAS_TRITON: fused_add(x, y) else: x + y` in one
    line: the kernel arm is a region marked as the statement's kernel branch (what only it calls has a
    PyTorch path beside it), with its span for the findings in it; `not HAS_TRITON` marks the else."""
    import ast as _ast

    from analyzer.sources.codefacts import code_facts

    for test, kernel_arm in (("HAS_TRITON", "fused_add"), ("not HAS_TRITON", "fused_add")):
        body, other = ("fused_add(x, y)", "x + y") if test == "HAS_TRITON" else ("x + y", "fused_add(x, y)")
        src = f"HAS_TRITON = False\n\n\ndef add(x, y):\n    return {body} if {test} else {other}\n"
        facts = code_facts(_ast.parse(src), "m", False, src)
        arms = [r for r in facts["regions"] if len(r) > 9 and r[9]]
        assert len(arms) == 2
        marked = [r for r in arms if r[6]]
        assert len(marked) == 1
        line, col, end, end_col = marked[0][9]
        assert src.splitlines()[line - 1][col - 1:end_col] == kernel_arm + "(x, y)"


def test_a_fallback_binding_of_a_guarded_import_calls_nothing(tmp_path):
    # `f = None` in the except branch of a guarded import rebinds the name; it runs none of `f`'s code.
    # What only a decode method calls stays off the default path, in library mode (every module's code
    # runs on import) and from an entry whose loop calls `opt.step()` on a `torch.optim` optimizer (that
    # is `SGD.step`, not the model's `step`).
    files = {
        "ops/__init__.py": "",
        "ops/update.py": """\
            import triton
            import triton.language as tl

            @triton.jit
            def _update_kernel(x_ptr):
                tl.store(x_ptr, tl.load(x_ptr) + 1)

            def state_update(x):
                _update_kernel[(1,)](x)
                return x
            """,
        "model.py": """\
            import torch
            try:
                from ops.update import state_update
            except ImportError:
                state_update = None

            class Net(torch.nn.Linear):
                def __init__(self):
                    super().__init__(4, 4)

                def forward(self, x, inference_params=None):
                    if inference_params is not None:
                        return self.step(x)
                    return super().forward(x)

                def step(self, x):
                    return state_update(x)
            """,
    }
    for mode, extra in (("library", {}), ("entries", {"train.py": TRAIN})):
        report = scan(tree(tmp_path / mode, {**files, **extra}))
        assert report.to_dict()["reach"]["mode"] == mode
        kernel = next(f for f in report.findings + report.off_path if f.rule == "NR1801")
        assert kernel.context == "evaluation", mode  # `if inference_params is not None:` (off by default, named for inference)
        assert not any(f.path == "ops/update.py" for f in report.findings), mode


def test_a_local_bound_once_to_a_pytorch_class_calls_that_class():
    import ast

    from neuron_ready.sources.codefacts import code_facts

    def refs(src: str, scope: str = "main") -> set[str]:
        src = textwrap.dedent(src)
        return {r for r, _ in code_facts(ast.parse(src), "train", False, src)["refs"].get(scope, [])}

    got = refs("""\
        import torch
        from torch.amp import GradScaler

        def main(model, opt2):
            opt = torch.optim.AdamW(model.parameters())
            scaler = GradScaler()
            sched = build_scheduler(opt)
            again = torch.optim.SGD([])
            again = torch.optim.SGD([])
            scaler.step(opt)
            opt.step()
            sched.step()
            again.step()
            opt2.step()
        """)
    assert {"q:torch.optim.AdamW.step", "q:torch.amp.GradScaler.step"} <= got
    # a factory's result, a name bound twice and a parameter say nothing of their class: by name
    assert "a:step" in got and not any(r.startswith("q:torch.optim.SGD.") for r in got)
    assert refs("""\
        import torch
        opt = torch.optim.SGD([])
        opt.step()
        """, "") >= {"q:torch.optim.SGD.step"}
    # a rebinding is no use: `f = None` after a guarded import references nothing
    assert refs("""\
        try:
            from ops import f
        except ImportError:
            f = None
        """, "") == set()


def test_a_cuda_check_held_in_a_local_of_a_branch_and_a_cuda_seed_beside_torch_manual_seed(tmp_path):
    root = tree(tmp_path, {"state.py": """\
        import torch

        def restore(states, rank):
            if rank < len(states):
                state = states[rank]
                torch.set_rng_state(state["torch"])
                is_cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
                if is_cuda and "cuda" in state:
                    torch.cuda.set_rng_state(state["cuda"])

        def seed_all(seed):
            torch.manual_seed(seed)
            torch.cuda.manual_seed_all(seed)

        def seed_cuda(seed):
            torch.cuda.manual_seed_all(seed)
        """})
    got = {f.line: f for f in scan(root).findings + scan(root).off_path if f.rule == "NR1015"}
    # a local bound once in a branch to a CUDA check: the test on it is a device check
    assert got[9].context == "opt-in" and "is_cuda" in got[9].gate and got[9].gate.startswith("only on a CUDA device")
    # torch.manual_seed already seeds every device; the CUDA call is queued until CUDA initialises
    assert got[13].context == "opt-in" and "torch.manual_seed" in got[13].gate
    assert got[16].context == "step"  # alone, it leaves the Neuron device unseeded
    xla = {f.line: f.context for f in scan(root, target="xla").findings if f.rule == "NR1015"}
    assert xla.get(13) == "step"  # on the XLA path the device is seeded through xm.set_rng_state
