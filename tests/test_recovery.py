"""Error recovery is not the training step (docs/contexts.md, "Recovery after a failed step"): a
handler for an error the step raises only when it fails (a loss scaler's `OverflowError`, a NaN
check's `FloatingPointError`, running out of memory) and what only it calls run in a job that went
wrong, so their findings are the opt-in feature `error-recovery`. A handler for `RuntimeError`,
`Exception` or `ImportError` may be the path a device without CUDA takes: it stays as it is."""

from __future__ import annotations

from scanning import write_tree as tree
from test_cuda_checks import found, scan

TRAIN = """\
    import torch


    class NanDetector:
        def __init__(self, model):
            self.model = model

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            for p in self.model.parameters():
                if torch.isnan(p).any().item():
                    print("nan")


    def assign(x):
        try:
            return x.nonzero()
        except RuntimeError as e:
            if "out of memory" not in str(e).lower():
                raise
        return torch.cat([row.nonzero() for row in x])


    def step(model, opt, x):
        try:
            model(x).sum().backward()
            assign(x)
            opt.step()
        except OverflowError:
            grad_norm = torch.tensor(0.0).cuda()
            opt.zero_grad()
        except FloatingPointError:
            with NanDetector(model):
                model(x).sum().backward()
            raise
        except RuntimeError as e:
            if "out of memory" in str(e):
                torch.cuda.empty_cache()
            fallback = x.nonzero()
            raise


    if __name__ == "__main__":
        model = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(10):
            step(model, opt, torch.randn(4, 4))
    """


def test_handlers_for_a_failed_step_are_the_error_recovery_feature(tmp_path):
    by = found(scan(tree(tmp_path, {"train.py": TRAIN})))
    overflow = by[("train.py", 32, "NR1001")]  # .cuda() under `except OverflowError:`
    assert (overflow.context, overflow.gate) == (
        "opt-in", "only when `OverflowError` is raised (error recovery: runs only after the training step failed)")
    nan = by[("train.py", 13, "NR1506")]  # what only the FloatingPointError handler constructs
    assert nan.context == "opt-in" and nan.gate.startswith("only when `FloatingPointError` is raised")
    retry = by[("train.py", 23, "NR1501")]  # after `try: return ... except RuntimeError: if not OOM: raise`
    assert (retry.context, retry.gate) == (
        "opt-in", "only when the step runs out of memory (error recovery: runs only after the training step failed)")
    empty = by[("train.py", 40, "NR1010")]  # `if "out of memory" in str(e):`
    assert empty.context == "opt-in" and empty.gate.startswith("only when 'out of memory' in str(e)")


def test_the_step_itself_and_other_handlers_stay_must_port(tmp_path):
    by = found(scan(tree(tmp_path, {"train.py": TRAIN})))
    assert by[("train.py", 19, "NR1501")].context == "step"  # the try body: the step as it runs
    # a RuntimeError handler may be what a device without CUDA runs: outside its OOM test it stays
    assert by[("train.py", 41, "NR1501")].context == "step"
