"""Settings read one hop away from the condition: a module-level dict of defaults merged into a
configuration and a registry of alternatives keyed by one of its values, another object's attribute
set from an off keyword, and a helper predicate over the configuration (codefacts.py conditions,
context.py `Defaults`)."""

from __future__ import annotations

from pathlib import Path

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan


def _contexts(root: Path) -> dict[tuple[str, int], tuple]:
    report = run_scan(Settings(root=root, cache=False)).report
    return {(f.path, f.line): (f.context, f.gate) for f in report.findings + report.off_path}


REGISTRY = {
    "registry.py": """\
        class Registry(dict):
            def register(self, name, func):
                self[name] = func

        blocks = Registry()
        blocks_with_experts = Registry()
    """,
    "defaults.py": """\
        block_config_defaults: dict = {
            'block_type': 'dense',
            'width': 4,
        }
    """,
    "blocks.py": """\
        import torch
        from registry import blocks, blocks_with_experts

        def build_dense(x):
            return x * 2

        def build_sparse(x):
            return x[torch.nonzero(x)]

        def build_expert(x):
            return torch.unique(x)

        blocks.register('dense', func=build_dense)
        blocks.register('sparse', func=build_sparse)
        blocks_with_experts.register('experts', func=build_expert)
    """,
    "model.py": """\
        import torch
        import blocks
        from defaults import block_config_defaults
        from registry import blocks as table, blocks_with_experts

        class Model(torch.nn.Module):
            def __init__(self, block_config=None):
                super().__init__()
                self.block_config = {**block_config_defaults, **(block_config or {})}

            def forward(self, x):
                y = table[self.block_config['block_type']](x)
                if self.block_config['block_type'] in blocks_with_experts:
                    y = y + blocks_with_experts[self.block_config['block_type']](x)
                    y = y[y > 0]
                return y.sum()
    """,
    "train.py": """\
        import torch
        from model import Model

        def main():
            m = Model()
            m(torch.zeros(3)).backward()

        if __name__ == "__main__":
            main()
    """,
}


def test_a_registry_entry_the_default_setting_does_not_pick_is_opt_in(tmp_path):
    got = _contexts(tree(tmp_path, REGISTRY))
    # `block_type` defaults to 'dense' (the dict of defaults): the 'sparse' entry of `blocks` and the
    # whole registry tested for membership are alternatives a user picks
    assert got[("blocks.py", 8)] == ("opt-in", "only when block_type == 'sparse' (the default is 'dense')")
    assert got[("blocks.py", 11)] == ("opt-in", "only when block_type == 'experts' (the default is 'dense')")
    assert got[("model.py", 15)] == (
        "opt-in", "only when self.block_config['block_type'] in blocks_with_experts (block_type defaults to 'dense')")


def test_a_registry_entry_chosen_by_the_default_or_a_setting_without_a_default_stays_must_port(tmp_path):
    files = dict(REGISTRY)
    files["defaults.py"] = files["defaults.py"].replace("'dense'", "'experts'")
    got = _contexts(tree(tmp_path, files))
    assert got[("blocks.py", 11)][0] == "step"
    assert got[("model.py", 15)][0] == "step"
    files["defaults.py"] = "block_config_defaults = {'width': 4}\n"  # no default for the key: nothing is read
    got = _contexts(tree(tmp_path / "nodefault", files))
    assert got[("blocks.py", 8)][0] == "step" and got[("model.py", 15)][0] == "step"


WRAPPER = {
    "net.py": """\
        import torch

        class Decoder(torch.nn.Module):
            def __init__(self, dim, looped=False, cont_head=False):
                super().__init__()
                self.looped = looped
                self.cont_head = cont_head
                self.proj = torch.nn.Linear(dim, dim)

            def forward(self, x):
                return self.proj(x)
    """,
    "wrapper.py": """\
        import torch
        from net import Decoder

        class Wrapper(torch.nn.Module):
            def __init__(self, net, weight=1.0):
                super().__init__()
                self.net = net
                self.cont_head = net.cont_head
                self.inner = Decoder(4)

            def forward(self, x):
                y = self.net(x)
                use_cont = self.cont_head
                if self.net.looped:
                    y = y[y > 0]
                if use_cont:
                    y = torch.unique(y)
                if self.inner.looped:
                    y = torch.nonzero(y)
                if self.net.proj.bias is not None:
                    y = y.nonzero()
                return y.sum()
    """,
    "train.py": """\
        import torch
        from net import Decoder
        from wrapper import Wrapper

        def main():
            w = Wrapper(Decoder(4{args}))
            w(torch.zeros(3)).backward()

        if __name__ == "__main__":
            main()
    """,
}


def _wrapper(tmp_path: Path, args: str = "", extra: dict | None = None) -> dict[int, tuple]:
    files = {**WRAPPER, "train.py": WRAPPER["train.py"].replace("{args}", args), **(extra or {})}
    got = _contexts(tree(tmp_path, files))
    return {line: got.get(("wrapper.py", line)) for line in (15, 17, 19, 21)}


def test_another_objects_attribute_set_from_an_off_keyword_gates_its_branch(tmp_path):
    got = _wrapper(tmp_path)
    assert got[15] == ("opt-in", "only when self.net.looped (looped defaults to False)")
    assert got[17] == ("opt-in", "only when use_cont (cont_head defaults to False)")  # copied in __init__
    assert got[19] == ("opt-in", "only when self.inner.looped (looped defaults to False)")  # built here
    assert got[21][0] == "step"  # `proj` is no object of the class: nothing is read


def test_another_objects_attribute_turned_on_or_set_otherwise_stays_must_port(tmp_path):
    got = _wrapper(tmp_path, args=", looped=True")
    assert got[15][0] == "step" and got[19][0] == "step"
    assert got[17][0] == "opt-in"
    # a second class sets `cont_head` from something else: which object it is is unknown
    got = _wrapper(tmp_path / "other", extra={
        "other.py": "class Other:\n    def __init__(self, cfg):\n        self.cont_head = cfg is None\n"})
    assert got[17][0] == "step" and got[15][0] == "opt-in"


HELPER = {
    "schema.py": """\
        from dataclasses import dataclass

        @dataclass
        class TrainConfig:
            lr: float = 1e-4
            masked_lm: dict | None = None
            packing: str = "none"
    """,
    "support.py": """\
        from collections.abc import Mapping

        def is_masked_lm(cfg) -> bool:
            \"\"\"Whether the run trains a masked LM.\"\"\"
            get = cfg.get if isinstance(cfg, Mapping) else lambda key: getattr(cfg, key, None)
            config = get("masked_lm")
            if config is None:
                return False
            return not config.get("from_causal", False)

        def packs(cfg):
            return cfg.packing in ("varlen", "flex")

        def busy(cfg):
            for _ in range(2):
                pass
            return cfg.packing == "none"
    """,
    "builder.py": """\
        import torch
        from support import is_masked_lm, packs, busy

        def trainer_for(cfg):
            if not is_masked_lm(cfg):
                return None
            from masked import MaskedTrainer
            return MaskedTrainer

        def loss(cfg, x):
            if packs(cfg):
                x = x[x > 0]
            if busy(cfg):
                x = torch.unique(x)
            return x.sum()
    """,
    "masked.py": """\
        import torch

        class MaskedTrainer:
            def __init__(self):
                self.idx = torch.nonzero(self.scores)
    """,
    "train.py": """\
        import torch
        from schema import TrainConfig
        from builder import trainer_for, loss

        def main():
            cfg = TrainConfig()
            t = trainer_for(cfg)
            x = torch.zeros(3, requires_grad=True)
            if t is not None:
                t()
            loss(cfg, x).backward()

        if __name__ == "__main__":
            main()
    """,
}


def test_a_helper_predicate_over_the_configuration_is_evaluated_one_level_deep(tmp_path):
    got = _contexts(tree(tmp_path, HELPER))
    # the guard `if config is None: return False` decides with masked_lm's default None
    assert got[("masked.py", 5)] == ("opt-in", "only when is_masked_lm(cfg) (masked_lm defaults to None)")
    assert got[("builder.py", 12)] == ("opt-in", "only when packs(cfg) (packing defaults to 'none')")
    # a helper that is no short predicate (a loop) cannot be evaluated: no gate
    assert got[("builder.py", 14)][0] == "step"


def test_a_helper_predicate_true_by_default_or_unreadable_leaves_no_gate(tmp_path):
    files = {**HELPER, "schema.py": HELPER["schema.py"].replace('packing: str = "none"', 'packing: str = "flex"')
             .replace("masked_lm: dict | None = None", "masked_lm: dict | None = field(default_factory=dict)")}
    got = _contexts(tree(tmp_path, files))
    assert got[("builder.py", 12)][0] == "step"  # packing defaults to 'flex'
    assert got[("masked.py", 5)][0] == "step"  # masked_lm's default cannot be read


def test_facts_read_a_predicate_s_guards_and_return_over_its_parameter():
    import ast

    from neuron_ready.sources.codefacts import predicate

    fn = ast.parse(HELPER["support.py"].replace("\n        ", "\n").strip()).body[1]
    assert predicate(fn) == [["cfg"], ["ifx", ["cmp", "Is", ["arg", 0, "masked_lm"], ["lit", None]], ["lit", False],
                                       ["not", ["?"]]]]
    loop = ast.parse("def busy(cfg):\n    for _ in range(2):\n        pass\n    return cfg.packing\n").body[0]
    assert predicate(loop) is None
