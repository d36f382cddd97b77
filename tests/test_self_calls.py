"""`self.f()` calls `f` of the method's own class hierarchy, not every reached class's `f`.

A call on another object (`obj.step()`) names a method only by name: any reached class that defines
it may run. A call on `self` (or `cls`) is narrower: Python looks `f` up in the class of the object,
which is the method's class or one of its subclasses, through their bases. So a private helper that
two unrelated classes both define (`_communicate_shapes`) runs, from each class's methods, as that
class defines it. A name no class of the hierarchy defines (an attribute holding a callable, a method
of a library base) stays a call by name. Real scans of small trees.
"""

from __future__ import annotations

from pathlib import Path

from scanning import write_tree as tree

from neuron_ready.config import Settings
from neuron_ready.engine import run_scan

COMM = """\
    import torch

    class Pipe:
        def __init__(self, variable_shapes=False):
            self.variable_shapes = variable_shapes

        def recv(self):
            if self.variable_shapes:
                return self._communicate_shapes()
            return torch.zeros(3)

        def _communicate_shapes(self):
            return torch.zeros(3, device=torch.cuda.current_device())

    class Bridge:
        def recv(self):
            return self._communicate_shapes()

        def _communicate_shapes(self):
            return [3]

    class Base:
        def run(self):
            return self.hook()

        def hook(self):
            return 0

    class Sub(Base):
        def hook(self):
            torch.cuda.synchronize()
            return 1

    class Unused(Base):
        def hook(self):
            return torch.zeros(1).cuda()

    class Mixin:
        def stats(self):
            return torch.zeros(1).cuda()

    class Reporter:
        def report(self):
            return self.stats()

    class Both(Reporter, Mixin):
        pass
    """

TRAIN = """\
    import torch
    from comm import Both, Bridge, Pipe, Sub

    def main():
        model = torch.nn.Linear(3, 3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        pipe, bridge, sub, both = Pipe(), Bridge(), Sub(), Both()
        for _ in range(3):
            pipe.recv()
            bridge.recv()
            sub.run()
            both.report()
            loss = model(torch.randn(2, 3)).sum()
            loss.backward()
            opt.step()

    if __name__ == "__main__":
        main()
    """


def contexts(root: Path) -> dict[tuple[str, str], str]:
    report = run_scan(Settings(root=root, cache=False)).report
    assert report.extra["reach"]["entries"] == ["train.py"]  # the training script, not library mode
    return {(f.rule, f.scope): f.context for f in report.findings + report.off_path}


def test_a_self_call_runs_its_own_class_method_not_a_namesake(tmp_path):
    got = contexts(tree(tmp_path, {"comm.py": COMM, "train.py": TRAIN}))
    # only Pipe.recv calls Pipe's helper, behind a switch that is off by default
    assert got[("NR1005", "Pipe._communicate_shapes")] == "opt-in"


def test_a_self_call_reaches_the_overrides_of_subclasses_that_are_built(tmp_path):
    got = contexts(tree(tmp_path, {"comm.py": COMM, "train.py": TRAIN}))
    sync = [c for (rule, scope), c in got.items() if scope == "Sub.hook"]
    assert sync and set(sync) == {"step"}  # Base.run's `self.hook()` runs Sub's override
    unused = [c for (rule, scope), c in got.items() if scope == "Unused.hook"]
    assert unused and "step" not in unused  # ... not the override of a subclass nobody builds
    stats = [c for (rule, scope), c in got.items() if scope == "Mixin.stats"]
    assert stats and set(stats) == {"step"}  # Both's MRO puts Mixin after Reporter


def test_a_call_on_another_object_stays_by_name(tmp_path):
    train = TRAIN.replace("bridge.recv()", "bridge.recv()\n            for obj in (pipe, bridge):\n                obj._communicate_shapes()")
    got = contexts(tree(tmp_path, {"comm.py": COMM, "train.py": train}))
    # `obj._communicate_shapes()` on an object of unknown class: any reached class's method may run
    assert got[("NR1005", "Pipe._communicate_shapes")] == "step"


def test_a_self_call_of_construction_code_still_runs_once(tmp_path):
    """What a module's `__init__` calls on `self` runs once, when the model is built, not in the step."""
    model = """\
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3)
                self._check_init()

            def _check_init(self):
                self.positive = self.lin.weight[self.lin.weight > 0].numel()

            def forward(self, x):
                return self.lin(x)
        """
    train = """\
        import torch
        from model import Net

        def main():
            net = Net()
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for _ in range(3):
                loss = net(torch.randn(2, 3)).sum()
                loss.backward()
                opt.step()

        if __name__ == "__main__":
            main()
        """
    got = contexts(tree(tmp_path, {"model.py": model, "train.py": train}))
    assert got[("NR1504", "Net._check_init")] == "host"
