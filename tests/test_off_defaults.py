"""Defaults that disagree only among values that leave a setting off (`default=False` in one
configuration class, `default=None` in another) still leave it off: `if args.offload:` and
`if args.offload == "disk":` are opt-in, while a test that tells the off values apart
(`args.offload is None`) or defaults of which one is on stay unread (context.py `Off`)."""

from __future__ import annotations

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan

SCHEMA = """\
    from dataclasses import dataclass, field
    from typing import Optional

    @dataclass
    class TrainingArguments:
        offload: Optional[str] = None
        level: Optional[int] = None

    @dataclass
    class Schema:
        offload: Optional[str] = field(default=False)
        level: int = 1
"""

TRAIN = """\
    import torch

    def step(args, x):
        if args.offload:
            x = torch.unique(x)
        if args.offload == "disk":
            x = torch.nonzero(x)
        if args.offload is None:
            x = torch.argwhere(x)
        if args.level:
            x = x[x > 0]
        return x

    if __name__ == "__main__":
        from schema import TrainingArguments
        step(TrainingArguments(), torch.zeros(4)).sum().backward()
"""


def test_defaults_that_are_all_off_leave_the_setting_off(tmp_path):
    root = tree(tmp_path, {"schema.py": SCHEMA, "train.py": TRAIN})
    report = run_scan(Settings(root=root, cache=False)).report
    got = {f.line: (f.context, f.gate) for f in report.findings + report.off_path if f.path == "train.py"}
    assert got[5] == ("opt-in", "only when args.offload (offload defaults to False or None)")
    assert got[7] == ("opt-in", "only when args.offload == 'disk' (offload defaults to False or None)")
    # `is None` tells False from None: which class the job reads decides it, so it stays the step
    assert got[9] == ("step", None)
    # one default is on: unknown, the module-level answer
    assert got[11] == ("step", None)
