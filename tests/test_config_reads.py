"""A setting read one hop before its test: an instance attribute or a local that holds a
configuration read (`self.rope = config.attn_config['rope']`, `n = getattr(cfg, "n", 0) or 0`), a
loop over `range(setting)` that runs no iteration at the setting's default, and a module-level table
keyed by types whose entries run where it is looked up (codefacts.py `_config_attributes`,
`_config_locals`, `_range_bound`, `top_assign`)."""

from __future__ import annotations

from pathlib import Path

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan


def _contexts(root: Path) -> dict[tuple[str, int], tuple]:
    report = run_scan(Settings(root=root, cache=False)).report
    return {(f.path, f.line): (f.context, f.gate) for f in report.findings + report.off_path}


FILES = {
    "defaults.py": """\
        attn_config_defaults: dict = {
            'rope': False,
            'heads': 4,
        }
    """,
    "config.py": """\
        from dataclasses import dataclass

        @dataclass
        class ModelConfig:
            base_layers: int = 0
            quant_noise: float = 0.0
    """,
    "quant/__init__.py": """\
        from .utils import quantize_model_
    """,
    "quant/modules.py": """\
        import torch

        class IntLinear(torch.nn.Linear):
            def forward(self, x):
                return x * self.scale.item()

        class IntEmbedding(torch.nn.Embedding):
            def forward(self, x):
                return x * self.scale.item()
    """,
    "quant/utils.py": """\
        import torch.nn as nn
        from .modules import IntLinear, IntEmbedding

        MAPPING = {nn.Linear: IntLinear, nn.Embedding: IntEmbedding}

        def quantize_model_(model, p=0.2):
            for name, module in model.named_children():
                if isinstance(module, tuple(MAPPING.keys())):
                    setattr(model, name, MAPPING[module.__class__].__new__(MAPPING[module.__class__]))
            return model
    """,
    "layers.py": """\
        import torch

        class BaseLayer(torch.nn.Module):
            def forward(self, x):
                return torch.sort(x)[0]
    """,
    "model.py": """\
        import torch
        from defaults import attn_config_defaults
        from layers import BaseLayer
        from quant import quantize_model_

        def gen_rotary(x):
            return x[torch.nonzero(x)]

        def maybe_quantize(m, cfg):
            noise = getattr(cfg, "quant_noise", 0) or 0
            if noise > 0:
                m = quantize_model_(m, noise)
            return m

        class Model(torch.nn.Module):
            def __init__(self, config):
                super().__init__()
                self.rope = config.attn_config['rope']
                if self.rope:
                    self.rotary = gen_rotary
                self.layers = torch.nn.ModuleList()
                for i in range(config.base_layers):
                    self.layers.append(BaseLayer())

            def forward(self, x):
                if self.rope:
                    x = x[x > 0]
                for layer in self.layers:
                    x = layer(x)
                return x.sum()
    """,
    "train.py": """\
        import torch
        from config import ModelConfig
        from model import Model, maybe_quantize

        def main():
            cfg = ModelConfig()
            m = maybe_quantize(Model(cfg), cfg)
            m(torch.zeros(3)).backward()

        if __name__ == "__main__":
            main()
    """,
}


def test_an_attribute_or_local_holding_an_off_setting_gates_its_branch(tmp_path):
    got = _contexts(tree(tmp_path, FILES))
    # `self.rope = config.attn_config['rope']` in __init__: `if self.rope:` anywhere in the class reads
    # the dict of defaults, in __init__ (the builder it calls) and in forward alike
    assert got[("model.py", 7)] == ("opt-in", "only when self.rope (rope defaults to False)")
    assert got[("model.py", 27)] == ("opt-in", "only when self.rope (rope defaults to False)")
    # `noise = getattr(cfg, "quant_noise", 0) or 0`: the local is the configuration's field
    assert got[("quant/modules.py", 5)] == ("opt-in", "only when noise > 0 (quant_noise defaults to 0.0)")


def test_a_loop_over_a_setting_that_defaults_to_zero_runs_no_iteration(tmp_path):
    got = _contexts(tree(tmp_path, FILES))
    assert got[("layers.py", 5)] == ("opt-in", "only when config.base_layers > 0 (base_layers defaults to 0)")


def test_a_table_keyed_by_types_runs_its_entries_where_it_is_looked_up(tmp_path):
    got = _contexts(tree(tmp_path, FILES))
    # building `MAPPING` calls nothing: its classes run where `quantize_model_` looks it up, behind
    # the off setting; without the table rule the module code would reach them unconditionally
    assert got[("quant/modules.py", 5)][0] == "opt-in"
    assert got[("quant/modules.py", 9)][0] == "opt-in"


def test_a_setting_turned_on_or_reassigned_keeps_the_branch_must_port(tmp_path):
    files = dict(FILES)
    files["config.py"] = files["config.py"].replace("quant_noise: float = 0.0", "quant_noise: float = 0.1")
    files["defaults.py"] = files["defaults.py"].replace("'rope': False", "'rope': True")
    files["model.py"] = files["model.py"].replace("range(config.base_layers)", "range(config.depth)")
    got = _contexts(tree(tmp_path, files))
    assert got[("model.py", 7)][0] == "step" and got[("model.py", 27)][0] == "step"
    assert got[("quant/modules.py", 5)][0] == "step" and got[("quant/modules.py", 9)][0] == "step"
    assert got[("layers.py", 5)][0] == "step"  # `depth` has no readable default
    # an attribute another method sets again is not the setting's value any more
    files = dict(FILES)
    files["model.py"] = files["model.py"].replace(
        "            def forward(self, x):\n",
        "            def enable(self):\n                self.rope = True\n\n            def forward(self, x):\n")
    got = _contexts(tree(tmp_path / "reassigned", files))
    assert got[("model.py", 7)][0] == "step"
