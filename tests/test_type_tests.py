"""Type tests as gates: `isinstance(x, C)` is true only when the job has an object of class C, so a
branch under it is opt-in when the project builds C only behind a switch that is off by default
(`plugins = LowBitPrecision(...)` under `if quantize is not None:`), and a None-default parameter
annotated with the names it may take (`quantize: Literal["int8", "nf4"] | None = None`) is such a
switch (codefacts.py `_Facts.type_test`, `_named_choice`; context.py `Defaults.built_by_default`)."""

from __future__ import annotations

from pathlib import Path

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan

TRAIN = """\
    from typing import Literal, Optional

    import torch
    from lowbit.plugins import LowBitPrecision
    from helpers import low_bit_optimizer
    from precision import FullPrecision

    def setup(quantize: Optional[Literal["int8", "nf4"]] = None, mask=None, out_dir: str = None):
        precision = FullPrecision()
        if quantize is not None:
            precision = LowBitPrecision(quantize)
        main(precision, quantize, mask, out_dir)

    def main(precision, quantize, mask, out_dir, device=None):
        x = torch.zeros(4, device=device)  # on the device: a CPU value would be host-side
        if isinstance(precision, LowBitPrecision):
            x = torch.unique(x)
            low_bit_optimizer(x)
        if isinstance(precision, FullPrecision):
            x = torch.nonzero(x)
        x.sum().backward()

    if __name__ == "__main__":
        setup()
"""

HELPERS = """\
    import torch

    def low_bit_optimizer(x):
        return torch.unique(x, dim=0)
"""

PRECISION = """\
    class FullPrecision:
        pass
"""

# the lines of train.py / helpers.py that hold a finding
LOW_BIT, FULL, HELPER = ("train.py", 17), ("train.py", 20), ("helpers.py", 4)


def _contexts(tmp_path: Path, train: str = TRAIN, extra: dict | None = None) -> dict:
    root = tree(tmp_path, {"train.py": train, "helpers.py": HELPERS, "precision.py": PRECISION, **(extra or {})})
    report = run_scan(Settings(root=root, cache=False)).report
    return {(f.path, f.line): (f.context, f.gate) for f in report.findings + report.off_path}


def test_type_test_of_a_class_built_only_behind_an_option_is_opt_in(tmp_path):
    got = _contexts(tmp_path)
    context, gate = got[LOW_BIT]
    assert context == "opt-in"
    assert gate.startswith("only when isinstance(precision, LowBitPrecision)")
    assert "`LowBitPrecision` is built only when quantize is not None (quantize defaults to None)" in gate
    # what only that branch calls follows it
    assert got[HELPER][0] == "opt-in"
    # the class the job always builds: its branch is the step
    assert got[FULL] == ("step", None)


def test_type_test_stays_in_the_step_when_the_default_job_may_build_the_class(tmp_path):
    # built outside any switch somewhere in the project (here a module-level default)
    built = _contexts(tmp_path / "built", extra={"defaults.py": "from lowbit.plugins import LowBitPrecision\n"
                                                                  "DEFAULT = LowBitPrecision('int8')\n"})
    assert built[LOW_BIT] == ("step", None)
    # named by a shipped configuration file: the user's configuration may build it
    config = _contexts(tmp_path / "config", extra={"config.yaml": "precision: lowbit.plugins.LowBitPrecision\n"})
    assert config[LOW_BIT] == ("step", None)
    # a class of the project derives from it and may be what the job builds
    sub = _contexts(tmp_path / "sub", extra={"mine.py": "from lowbit.plugins import LowBitPrecision\n"
                                                           "class Mine(LowBitPrecision):\n    pass\n"})
    assert sub[LOW_BIT] == ("step", None)
    # a switch that is on by default builds it in the default job
    on = _contexts(tmp_path / "on", train=TRAIN.replace('Optional[Literal["int8", "nf4"]] = None',
                                                        'Optional[Literal["int8", "nf4"]] = "int8"'))
    assert on[LOW_BIT] == ("step", None)
    # tests build everything by design: they say nothing about the job
    tested = _contexts(tmp_path / "tested", extra={"tests/test_train.py": "from lowbit.plugins import LowBitPrecision\n"
                                                                          "def test_it():\n"
                                                                          "    LowBitPrecision('int8')\n"})
    assert tested[LOW_BIT][0] == "opt-in"


SWITCHES = """\
    from typing import Literal, Optional, Union

    import torch

    def step(x, quantize: Literal["int8", "nf4"] | None = None, kind: Union[Literal["a"], None] = None,
             mask=None, out_dir: str = None, name: Optional[str] = None):
        if quantize is not None:
            x = torch.unique(x)
        if kind:
            x = torch.unique(x, dim=0)
        if mask is not None:
            x = x[mask]
        if out_dir is not None:
            x = torch.nonzero(x)
        if name is not None:
            x = torch.argwhere(x)
        return x

    if __name__ == "__main__":
        step(torch.zeros(4)).sum().backward()
"""


def test_a_none_default_that_lists_its_names_is_an_option(tmp_path):
    root = tree(tmp_path, {"train.py": SWITCHES})
    report = run_scan(Settings(root=root, cache=False)).report
    got = {f.line: (f.context, f.gate) for f in report.findings + report.off_path if f.path == "train.py"}
    assert got[8] == ("opt-in", "only when quantize is not None (quantize defaults to None)")
    assert got[10][0] == "opt-in" and "kind defaults to None" in got[10][1]
    # an optional input, a path or a free-form name: the job may pass it, and it is no switch
    assert got[12] == ("step", None)
    assert got[14] == ("step", None)
    assert got[16] == ("step", None)


LISTED = """\
    import torch
    from other import OtherPrecision, ThirdPrecision

    def main(precision, build):
        known = [OtherPrecision, ThirdPrecision]
        x = torch.zeros(4)
        if isinstance(precision, tuple(known)):
            x = x + 1
        made = [OtherPrecision, ThirdPrecision]
        if build:
            x = x * len([k() for k in made])
        x.sum().backward()

    if __name__ == "__main__":
        main(None, False)
"""

OTHER = """\
    import torch

    class OtherPrecision:
        def __init__(self):
            self.table = torch.nonzero(self.scores)  # a value of unknown device: torch.ones(3) is on the CPU

    class ThirdPrecision:
        pass
"""


def test_a_list_of_classes_only_a_type_test_reads_builds_none(tmp_path):
    listed = tree(tmp_path / "listed", {"train.py": LISTED.replace("made = [OtherPrecision, ThirdPrecision]", "made = []"),
                                        "other.py": OTHER})
    report = run_scan(Settings(root=listed, cache=False)).report
    got = {(f.path, f.line): f.context for f in report.findings + report.off_path}
    assert got[("other.py", 5)] == "off-path"
    # the same list also iterated and called: its classes run
    built = tree(tmp_path / "built", {"train.py": LISTED.replace("known = [OtherPrecision, ThirdPrecision]", "known = made")
                                      .replace("        made = [OtherPrecision, ThirdPrecision]\n", "")
                                      .replace("    def main(precision, build):\n",
                                               "    def main(precision, build):\n        made = [OtherPrecision, ThirdPrecision]\n"),
                                      "other.py": OTHER})
    report = run_scan(Settings(root=built, cache=False)).report
    got = {(f.path, f.line): f.context for f in report.findings + report.off_path}
    assert got[("other.py", 5)] == "step"


def test_type_tests_of_objects_the_project_never_builds_stay_unread(tmp_path):
    # the project names the class only behind the switch, but never calls it: such objects come
    # from elsewhere (the user's model, a library), so the test says nothing about the default job
    train = TRAIN.replace("precision = LowBitPrecision(quantize)", "precision = LowBitPrecision")
    got = _contexts(tmp_path / "named", train=train)
    assert got[LOW_BIT] == ("step", None)
    # PyTorch's own types: a model built elsewhere holds them whatever the project builds
    torch_type = TRAIN.replace("from lowbit.plugins import LowBitPrecision", "from torch.nn import Linear as LowBitPrecision")
    got = _contexts(tmp_path / "torch", train=torch_type)
    assert got[LOW_BIT] == ("step", None)
