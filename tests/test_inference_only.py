"""Code that never trains, read from its shape: ops that refuse gradients (and the kernels only they
launch), branches that assert no gradients (a KV-cache decode branch), generation helpers reached
only from `generate`/beam search, serving-engine plugins and `generation/` folders, predictor modules
and mask generators. Each is the evaluation path, not the training estimate; the near misses (a
backward that raises in one branch, a refusal behind a switch, a data generator) stay in the step.
Real scans of small trees, no mocks."""

from __future__ import annotations

from pathlib import Path

from scanning import write_tree as tree

from neuron_ready.config import Settings
from neuron_ready.engine import run_scan


def scan(root: Path):
    return run_scan(Settings(root=root, cache=False)).report


def where(report, rule: str) -> dict[str, str]:
    """`path:line` -> context of every finding of one rule."""
    return {f"{f.path}:{f.line}": f.context for f in report.findings + report.off_path if f.rule == rule}


_KERNELS = """\
    import triton
    import triton.language as tl

    @triton.jit
    def _norm_kernel(x_ptr, n):
        pid = tl.program_id(0)

    @triton.jit
    def _decode_kernel(x_ptr, n):
        pid = tl.program_id(0)

    @triton.jit
    def _shared_kernel(x_ptr, n):
        pid = tl.program_id(0)

    def norm_fwd(x):
        _norm_kernel[(1,)](x, 1)
        _shared_kernel[(1,)](x, 1)
        return x

    def decode_fwd(x):
        _decode_kernel[(1,)](x, 1)
        return x

    def shared_fwd(x):
        _shared_kernel[(1,)](x, 1)
        return x
    """


def test_ops_that_refuse_gradients_and_the_kernels_only_they_launch_are_evaluation(tmp_path):
    root = tree(tmp_path, {
        "kops/__init__.py": "",
        "kops/kernels.py": _KERNELS,
        "kops/norm.py": """\
            import torch
            from .kernels import norm_fwd

            def fused_norm(x, weight=None):
                \"\"\"Inference only.\"\"\"
                if torch.is_grad_enabled() and (x.requires_grad or (weight is not None and weight.requires_grad)):
                    raise ValueError("Gradients not supported.")
                return norm_fwd(x)

            def switched_norm(x, use_fused=False):
                if use_fused and x.requires_grad:
                    raise ValueError("the fused path has no backward")  # a switch: not an inference op
                return torch.nonzero(x)
            """,
        "kops/decode.py": """\
            import torch
            from .kernels import decode_fwd, shared_fwd

            class DecodeFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return decode_fwd(torch.nonzero(x))

                @staticmethod
                def backward(ctx, *grads):
                    raise NotImplementedError("inference-only; use chunk mode for training")

            def decode_attention(x):
                return DecodeFunction.apply(x)

            class ChunkFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return shared_fwd(torch.nonzero(x))

                @staticmethod
                def backward(ctx, grad):
                    if ctx.needs_input_grad[1]:
                        raise NotImplementedError("no gradient for the scale")  # one option only
                    return grad

            def chunk_attention(x):
                return ChunkFunction.apply(x)

            class PlannedFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return torch.nonzero(x)

                @staticmethod
                def backward(ctx, grad):
                    raise NotImplementedError("Backward pass is not implemented yet. Stay tuned!")

            def planned_attention(x):
                return PlannedFunction.apply(x)

            class FirstOrderFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    if torch.is_grad_enabled():
                        raise RuntimeError("no second derivative; create_graph=True is not supported")
                    return torch.nonzero(grad)

            def first_order(x):
                return FirstOrderFunction.apply(x)
            """,
    })
    report = scan(root)
    kernels, launches, nonzero = where(report, "NR1801"), where(report, "NR1803"), where(report, "NR1501")
    assert kernels["kops/kernels.py:4"] == "evaluation"  # launched only by fused_norm
    assert kernels["kops/kernels.py:8"] == "evaluation"  # launched only by the Function without a backward
    assert kernels["kops/kernels.py:12"] == "step"  # also launched by a Function that trains
    assert launches["kops/kernels.py:17"] == "evaluation" and launches["kops/kernels.py:26"] == "step"
    assert nonzero["kops/decode.py:7"] == "evaluation"
    assert nonzero["kops/decode.py:19"] == "step"  # a backward that raises in one branch still trains
    assert nonzero["kops/norm.py:13"] == "step"  # refuses gradients only behind a switch
    # a backward not implemented yet cannot train today either: whoever trains does not call the op
    assert nonzero["kops/decode.py:33"] == "evaluation"
    assert nonzero["kops/decode.py:51"] == "step"  # a backward that refuses only a second derivative trains
    assert report.evaluation is not None


def test_a_branch_that_asserts_no_gradients_is_evaluation(tmp_path):
    root = tree(tmp_path, {
        "train.py": """\
            import torch

            class Attention(torch.nn.Module):
                def forward(self, x):
                    store = self.get_local_store()
                    if store is not None:  # decoding with a KV cache
                        assert not x.requires_grad
                        return torch.nonzero(x)
                    if x.dim() > 3:
                        assert x.is_contiguous()
                        return torch.unique(x)
                    return x.nonzero()

                def get_local_store(self):
                    return getattr(self, "_store", None)

            def main():
                Attention()(torch.zeros(4)).sum().backward()

            if __name__ == "__main__":
                main()
            """,
    })
    report = scan(root)
    assert where(report, "NR1501") == {"train.py:8": "evaluation", "train.py:12": "step"}
    assert where(report, "NR1502")["train.py:11"] == "step"  # an assert about something else: no decode branch


def test_generation_helpers_and_serving_plugins_are_evaluation(tmp_path):
    root = tree(tmp_path, {
        "lm/__init__.py": "",
        "lm/wrapper.py": """\
            import torch

            def top_p(logits, thres=0.9):
                return torch.sort(logits, descending=True)

            def top_k(logits, k=4):
                return torch.argsort(logits)

            FILTER_FNS = dict(top_p=top_p, top_k=top_k)

            def eval_decorator(fn):
                def inner(self, *args, **kwargs):
                    was_training = self.training
                    self.eval()
                    out = fn(self, *args, **kwargs)
                    self.train(was_training)
                    return out
                return inner

            class Wrapper(torch.nn.Module):
                def __init__(self, net):
                    super().__init__()
                    self.net = net

                @torch.no_grad()
                @eval_decorator
                def beam_search(self, x, beams=4):
                    return torch.sort(self.net(x))

                @torch.no_grad()
                def generate(self, x, filter_logits_fn=top_k):
                    if isinstance(filter_logits_fn, str):
                        filter_logits_fn = FILTER_FNS[filter_logits_fn]
                    return filter_logits_fn(self.net(x))

                def forward(self, x):
                    return torch.sort(self.net(x)).values.mean()
            """,
        "lm/generation/__init__.py": "",
        "lm/generation/logits_process.py": """\
            import torch

            class FusedLogitsWarper:
                def __call__(self, logits):
                    return torch.sort(logits)
            """,
        "lm/vllm/__init__.py": "",
        "lm/vllm/worker.py": """\
            import torch
            from vllm.worker.worker_base import WorkerBase

            class NeuronWorker(WorkerBase):
                def execute_model(self, x):
                    return torch.sort(x)
            """,
    })
    report = scan(root)
    sorts = where(report, "NR1603")
    assert sorts["lm/wrapper.py:4"] == "evaluation"  # top_p: a table entry generate picks, never called by building it
    assert sorts["lm/wrapper.py:7"] == "evaluation"  # top_k: generate's default, run when generate runs
    assert sorts["lm/wrapper.py:28"] == "evaluation"  # beam search under an eval-mode decorator
    assert sorts["lm/wrapper.py:37"] == "step"  # forward trains
    assert sorts["lm/generation/logits_process.py:5"] == "evaluation"
    assert sorts["lm/vllm/worker.py:6"] == "evaluation"
    assert all(c == "evaluation" for p, c in where(report, "NR1917").items() if p.startswith("lm/vllm/"))


def test_predictor_modules_and_mask_generators_are_evaluation(tmp_path):
    root = tree(tmp_path, {
        "seg/__init__.py": "",
        "seg/model.py": """\
            import torch

            class SegModel(torch.nn.Module):
                def forward(self, x):
                    return torch.nonzero(x)
            """,
        "seg/seg_video_predictor.py": """\
            import torch
            from .model import SegModel

            class VideoTrackerVOS(SegModel):
                def __init__(self):
                    super().__init__()
                    self.forward = torch.compile(self.forward, mode="max-autotune")
            """,
        "seg/utils/__init__.py": "",
        "seg/utils/amg.py": """\
            import torch

            def mask_to_rle(mask):
                return torch.nonzero(mask)
            """,
        "seg/automatic_mask_generator.py": """\
            import torch
            from .utils.amg import mask_to_rle

            class AutomaticMaskGenerator:
                def __init__(self, model):
                    self.model = model

                @torch.no_grad()
                def generate(self, image):
                    return self.postprocess(self.model(image))

                @staticmethod
                def postprocess(masks):
                    return mask_to_rle(masks[masks > 0])
            """,
        "seg/batch_generator.py": """\
            import torch

            class BatchGenerator:
                def generate(self, x):
                    return self.next_batch(x)

                def next_batch(self, x):
                    return x[x > 0]  # feeds training: its generate keeps autograd, so the class is no driver
            """,
    })
    report = scan(root)
    assert where(report, "NR1501")["seg/utils/amg.py:4"] == "evaluation"
    assert where(report, "NR1501")["seg/model.py:5"] == "step"
    masks = where(report, "NR1504")
    assert masks["seg/automatic_mask_generator.py:14"] == "evaluation"  # a public method of the generator
    assert masks["seg/batch_generator.py:8"] == "step"
    assert {c for p, c in where(report, "NR1301").items() if "predictor" in p} == {"evaluation"}


def test_forward_only_functions_whatever_their_message_and_the_branch_a_backward_refuses(tmp_path):
    root = tree(tmp_path, {
        "lin/__init__.py": "",
        "lin/kernels.py": _KERNELS,
        "lin/ops.py": """\
            import torch
            from .kernels import decode_fwd, norm_fwd, shared_fwd

            class ParallelFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return decode_fwd(x)

                @staticmethod
                def backward(ctx, grad):
                    raise NotImplementedError("Backward pass is not implemented. Stay tuned!")

            class PrefillFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, initial_state=None):
                    if initial_state is not None:
                        norm_fwd(initial_state)  # copies a prefilled cache: only decoding passes one
                    ctx.save_for_backward(x, initial_state)
                    return shared_fwd(x)

                @staticmethod
                def backward(ctx, grad):
                    x, initial_state = ctx.saved_tensors
                    if initial_state is not None:
                        raise NotImplementedError("Backward is not implemented with a prefilled state.")
                    return grad

            class AbstractFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return torch.nonzero(x)

                @staticmethod
                def backward(ctx, grad):
                    raise NotImplementedError  # an abstract method: subclasses give the backward

            def parallel_attention(x):
                return ParallelFunction.apply(x)

            def chunk_attention(x, initial_state=None):
                return PrefillFunction.apply(x, initial_state)

            def abstract_op(x):
                return AbstractFunction.apply(x)
            """,
    })
    report = scan(root)
    kernels, launches = where(report, "NR1801"), where(report, "NR1803")
    assert kernels["lin/kernels.py:8"] == "evaluation"  # launched only by the Function with no backward
    assert kernels["lin/kernels.py:4"] == "evaluation"  # launched only in forward's refused branch
    assert kernels["lin/kernels.py:12"] == "step"  # the rest of that Function's forward trains
    assert launches["lin/kernels.py:17"] == "evaluation" and launches["lin/kernels.py:26"] == "step"
    assert where(report, "NR1501")["lin/ops.py:31"] == "step"  # a bare raise: an abstract method


def test_profilers_and_benchmarks_are_evaluation_and_never_a_detected_entry(tmp_path):
    files = {
        "attn/__init__.py": "from .ops import attention\n",
        "attn/ops.py": """\
            import torch

            def attention(q):
                return torch.nonzero(q)
            """,
        "attn/tuned.py": """\
            import torch

            def compiled_attention(q):
                return torch.argsort(q)  # only the profiler tries this variant
            """,
        "attn/profiler.py": """\
            import torch
            from .profiling_utils.timing import measure

            def profile(q):
                measure(q)
                torch.cuda.synchronize()

            if __name__ == "__main__":
                profile(torch.randn(8, requires_grad=True))
            """,
        "attn/profiling_utils/__init__.py": "",
        "attn/profiling_utils/timing.py": """\
            import torch
            from ..ops import attention
            from ..tuned import compiled_attention

            def measure(q):
                out = attention(q).float().sum() + compiled_attention(q).float().sum()
                out.backward()  # profiles the backward too: still no trainer
                return torch.cuda.max_memory_allocated(device="cuda")
            """,
        "attn/benchmark.py": """\
            import torch

            assert torch.cuda.is_available()
            device = torch.device("cuda")
            """,
    }
    report = scan(tree(tmp_path / "lib", files))
    assert report.extra["reach"]["mode"] == "library"  # the profiler that runs backward is not the trainer
    assert where(report, "NR1501")["attn/ops.py:4"] == "step"  # the library's op, also profiled
    # a function of the library stays its surface, even when only the profiler calls it (as tests do)
    assert where(report, "NR1603")["attn/tuned.py:4"] == "step"
    assert where(report, "NR1009")["attn/profiling_utils/timing.py:8"] == "evaluation"
    assert where(report, "NR1007")["attn/profiler.py:6"] == "off-path"  # a script run on its own
    assert {c for p, c in where(report, "NR1004").items() if p.startswith("attn/benchmark.py")} == {"evaluation"}
    # named as the entry, a benchmark script that trains keeps its step
    bench = tree(tmp_path / "bench", {**files, "attn/benchmark_train.py": """\
        import torch
        from .tuned import compiled_attention

        def main():
            q = torch.randn(8, device="cuda", requires_grad=True)
            compiled_attention(q).float().sum().backward()

        if __name__ == "__main__":
            main()
        """})
    named = run_scan(Settings(root=bench, cache=False, entries=["attn/benchmark_train.py"])).report
    assert where(named, "NR1003")["attn/benchmark_train.py:5"] == "step"
    assert where(named, "NR1603")["attn/tuned.py:4"] == "step"


def test_sampling_branches_and_export_modes_are_evaluation(tmp_path):
    root = tree(tmp_path, {
        "train.py": """\
            import torch

            model = torch.nn.Linear(4, 4).cuda()
            opt = torch.optim.AdamW(model.parameters())
            for i in range(100):
                x = torch.randn(4, 4).cuda()
                model(x).sum().backward()
                opt.step()
                if i % 10 == 0:
                    model.eval()
                    sample = torch.randn(1, 4).cuda()
                    print(model(sample))
                    model.train()
                if i == 50:
                    model.eval()  # freezes for the rest of training: not an evaluation branch
                    for p in model.parameters():
                        p.requires_grad = False
                    frozen = torch.randn(1, 4).cuda()
                if torch.jit.is_scripting():
                    dtype = torch.float64
                else:
                    dtype = torch.bfloat16
            """,
    })
    report = scan(root)
    assert report.extra["reach"]["mode"] == "entries"
    cuda = where(report, "NR1001")
    assert cuda["train.py:11"] == "evaluation"
    assert cuda["train.py:6"] == "step" and cuda["train.py:18"] == "step"
    assert where(report, "NR1207")["train.py:20"] == "evaluation"  # float64 only under TorchScript


def test_a_patched_prediction_step_is_evaluation(tmp_path):
    root = tree(tmp_path, {
        "fast/__init__.py": "",
        "fast/patch.py": """\
            import torch
            from transformers import Trainer

            def fast_prediction_step(self, model, inputs, prediction_loss_only):
                return torch.nonzero(inputs["labels"])  # the evaluation loop's step

            def fast_training_step(self, model, inputs):
                return torch.nonzero(inputs["labels"])

            def patch():
                Trainer.prediction_step = fast_prediction_step
                Trainer.training_step = fast_training_step
            """,
    })
    assert where(scan(root), "NR1501") == {"fast/patch.py:5": "evaluation", "fast/patch.py:8": "step"}


def test_what_only_a_benchmark_module_calls_is_evaluation_in_library_mode(tmp_path):
    """A benchmark's module code is the benchmark's code: the builder it alone runs at import (no
    root of the library, since an inference class also names it) is the evaluation path, not the step."""
    files = {
        "vis/__init__.py": "from .build import build_model\n",
        "vis/build.py": """\
            import torch

            def build_model(cfg):
                return torch.nn.Linear(2, 2)

            def build_video_predictor(cfg):
                model = build_model(cfg)
                state = torch.zeros(2, device="cuda")
                return model, state
            """,
        "vis/video_predictor.py": """\
            from .build import build_video_predictor

            class VideoPredictor:
                @classmethod
                def from_pretrained(cls, name):
                    return cls(*build_video_predictor(name))
            """,
        "vis/benchmark.py": """\
            from .build import build_video_predictor

            predictor = build_video_predictor("small")
            """,
    }
    report = scan(tree(tmp_path / "lib", files))
    assert report.extra["reach"]["mode"] == "library"
    assert where(report, "NR1003")["vis/build.py:8"] == "evaluation"


def test_a_module_called_only_in_a_decode_branch_is_evaluation(tmp_path):
    """`self.rotary = Rotary(dim)` built in `__init__` and called only in the branch that asserts no
    gradients (a KV-cache decode): its `forward` is the evaluation path, though the class is built in
    the step's constructor. One the step also calls stays the step, and so does a method the step
    calls by name on it."""
    root = tree(tmp_path / "proj", {
        "model.py": """\
            import torch
            from torch import nn

            class Rotary(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.dim = dim

                def forward(self, x):
                    return torch.view_as_real(torch.view_as_complex(x))

                def init_cache(self):
                    return torch.zeros(self.dim, device="cuda")

            class Scale(nn.Module):
                def forward(self, x):
                    return torch.view_as_real(torch.view_as_complex(x))

            class Attention(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)
                    self.rotary = Rotary(dim)
                    self.scale = Scale()

                def forward(self, x, store=None):
                    q = self.proj(x)
                    if store is not None:
                        assert q.requires_grad is False
                        q = self.rotary(q)
                        q = self.scale(q)
                    return self.scale(q)
            """,
        "train.py": """\
            import torch
            from model import Attention

            def main():
                model = Attention(8)
                for m in model.modules():
                    if hasattr(m, "init_cache"):
                        m.init_cache()
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for _ in range(10):
                    loss = model(torch.randn(2, 8)).sum()
                    loss.backward()
                    opt.step()

            if __name__ == "__main__":
                main()
            """,
    })
    report = scan(root)
    assert report.extra["reach"]["mode"] == "entries"
    assert where(report, "NR1213")["model.py:10"] == "evaluation"  # Rotary.forward: the decode branch only
    assert where(report, "NR1213")["model.py:17"] == "step"  # Scale.forward: the step calls it too
    assert where(report, "NR1003")["model.py:13"] == "step"  # called by name from the trainer
