"""A class chosen by a configuration class's fields: a table of alternatives nested one level
(`TABLE[spec.kind][spec.impl]`) and the fields read through a parameter annotated with the class
(`spec: NormSettings`, `self.spec = spec`). The field's default picks the entry unless the project
sets it otherwise (codefacts.py tables and `field` conditions, context.py `Defaults.setting`)."""

from __future__ import annotations

import ast
from pathlib import Path

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from neuron_ready.sources.codefacts import KEY_PATH, code_facts


def _contexts(root: Path) -> dict[tuple[str, int], tuple]:
    report = run_scan(Settings(root=root, cache=False)).report
    return {(f.path, f.line): (f.context, f.gate) for f in report.findings + report.off_path}


NORMS = {
    "settings.py": """\
        from dataclasses import dataclass

        @dataclass
        class NormSettings:
            norm_kind: str = 'layer'
            norm_impl: str = 'eager'
    """,
    "norms.py": """\
        import torch

        class EagerLayerNorm(torch.nn.Module):
            def forward(self, x):
                return x - x.mean()

        class FusedLayerNorm(torch.nn.Module):
            def forward(self, x):
                return x[torch.nonzero(x)]

        class EagerRMSNorm(torch.nn.Module):
            def forward(self, x):
                return torch.unique(x)

        class FusedRMSNorm(torch.nn.Module):
            def forward(self, x):
                return torch.nonzero(x)
    """,
    "table.py": """\
        from norms import EagerLayerNorm, EagerRMSNorm, FusedLayerNorm, FusedRMSNorm
        from settings import NormSettings

        _NORMS = {
            'layer': {'eager': EagerLayerNorm, 'fused': FusedLayerNorm},
            'rms': {'eager': EagerRMSNorm, 'fused': FusedRMSNorm},
        }

        def build(spec: NormSettings):
            if spec.norm_impl not in _NORMS[spec.norm_kind]:
                raise ValueError(spec.norm_impl)
            return _NORMS[spec.norm_kind][spec.norm_impl]()
    """,
    "block.py": """\
        import torch
        import table
        from settings import NormSettings

        class Block(torch.nn.Module):
            def __init__(self, spec: NormSettings):
                super().__init__()
                self.spec = spec
                self.norm = table.build(spec)

            def forward(self, x):
                x = self.norm(x)
                if self.spec.norm_impl == 'fused':
                    x = x[x > 0]
                return x.sum()
    """,
    "train.py": """\
        import torch
        from block import Block
        from settings import NormSettings

        def main():
            b = Block(NormSettings({args}))
            b(torch.zeros(3)).backward()

        if __name__ == "__main__":
            main()
    """,
}
LINES = {"layer-fused": ("norms.py", 9), "rms-eager": ("norms.py", 13), "rms-fused": ("norms.py", 17),
         "branch": ("block.py", 14)}


def _norms(tmp_path: Path, args: str = "", extra: dict | None = None) -> dict[str, tuple]:
    files = {**NORMS, "train.py": NORMS["train.py"].replace("{args}", args), **(extra or {})}
    got = _contexts(tree(tmp_path, files))
    return {k: got.get(where) for k, where in LINES.items()}


def test_entries_of_a_nested_table_the_default_fields_do_not_pick_are_opt_in(tmp_path):
    got = _norms(tmp_path)
    assert got["layer-fused"] == ("opt-in", "only when norm_impl == 'fused' (norm_impl defaults to 'eager')")
    assert got["rms-eager"] == ("opt-in", "only when norm_kind == 'rms' (norm_kind defaults to 'layer')")
    assert got["rms-fused"] == ("opt-in", "only when norm_kind == 'rms' and norm_impl == 'fused' "
                                          "(norm_kind defaults to 'layer'; norm_impl defaults to 'eager')")
    # `self.spec = spec`, `spec: NormSettings`: the branch reads the field's default
    assert got["branch"] == ("opt-in", "only when self.spec.norm_impl == 'fused' (norm_impl defaults to 'eager')")


def test_a_field_the_project_sets_otherwise_keeps_its_entries_on_the_path(tmp_path):
    got = _norms(tmp_path, args="norm_impl='fused'")  # the training script turns it on
    assert got["layer-fused"][0] == "step" and got["branch"][0] == "step"
    assert got["rms-fused"] == ("opt-in", "only when norm_kind == 'rms' (norm_kind defaults to 'layer')")
    # a shipped configuration file that sets it is a run a user makes
    got = _norms(tmp_path / "yaml", extra={"configs/fused.yaml": "norm_impl: fused\n"})
    assert got["layer-fused"][0] == "step" and got["branch"][0] == "step"
    # a test that passes every value, or its configuration, says nothing about the training job
    got = _norms(tmp_path / "tests", extra={
        "tests/test_norms.py": "from settings import NormSettings\n\ndef test_fused():\n"
                               "    NormSettings(norm_kind='rms', norm_impl='fused')\n",
        "tests/fused.yaml": "norm_impl: fused\n"})
    assert got["layer-fused"][0] == "opt-in" and got["rms-eager"][0] == "opt-in"


def test_a_field_without_a_readable_default_leaves_every_entry_must_port(tmp_path):
    files = {"settings.py": NORMS["settings.py"].replace("norm_impl: str = 'eager'", "norm_impl: str = pick()")}
    got = _norms(tmp_path, extra=files)
    assert got["layer-fused"][0] == "step" and got["branch"][0] == "step"
    assert got["rms-eager"][0] == "opt-in" and got["rms-fused"][0] == "opt-in"  # norm_kind still reads 'layer'


def test_facts_record_a_nested_table_by_key_path_and_leave_nested_data_alone():
    src = NORMS["table.py"].replace("\n        ", "\n").strip() + (
        "\n\nSIZES = {'small': {'dim': 512, 'block': EagerLayerNorm}, 'big': {'dim': 1024, 'block': EagerRMSNorm}}\n")
    facts = code_facts(ast.parse(src), "table", False)
    assert facts["registries"]["_NORMS"] == {
        "layer" + KEY_PATH + "eager": ["q:norms.EagerLayerNorm"], "layer" + KEY_PATH + "fused": ["q:norms.FusedLayerNorm"],
        "rms" + KEY_PATH + "eager": ["q:norms.EagerRMSNorm"], "rms" + KEY_PATH + "fused": ["q:norms.FusedRMSNorm"]}
    assert "SIZES" not in facts["registries"]  # a table of settings is data: its classes stay module code's
    assert ["q:norms.EagerRMSNorm", -1] in facts["refs"][""]
    # the membership test reads the inner table's keys and runs none of its entries: no lookup
    assert facts["lookups"]["build"] == [["_NORMS", ["path", ["field", "norm_kind"], ["field", "norm_impl"]], -1]]


def test_a_configuration_named_as_one_keeps_its_own_rule_for_branches(tmp_path):
    # `self.cfg.norm_impl` is read by the name rule (a configuration's default, docs/contexts.md
    # "Instance attributes"); the table lookup is judged by who sets the field
    files = {"block.py": NORMS["block.py"].replace("self.spec", "self.cfg")}
    got = _norms(tmp_path, args="norm_impl='fused'", extra=files)
    assert got["branch"] == ("opt-in", "only when self.cfg.norm_impl == 'fused' (norm_impl defaults to 'eager')")
    assert got["layer-fused"][0] == "step"


CHOICE = {
    "codebooks.py": """\
        import torch

        class EuclideanBook(torch.nn.Module):
            def forward(self, x):
                return torch.cdist(x, x)

        class CosineBook(torch.nn.Module):
            def forward(self, x):
                return x[torch.nonzero(x)]

        class Quantizer(torch.nn.Module):
            def __init__(self, use_cosine=False, kind='plain'):
                super().__init__()
                book = EuclideanBook if not use_cosine else CosineBook
                self.book = book()
                self.norm = (torch.nn.Identity if kind == 'plain' else torch.nn.LayerNorm)(3)

            def forward(self, x):
                return self.book(x).sum()
    """,
    "train.py": """\
        import torch
        from codebooks import Quantizer

        if __name__ == "__main__":
            Quantizer({args})(torch.zeros(3, 3)).backward()
    """,
}


def test_a_class_chosen_by_an_option_in_a_conditional_expression_is_opt_in(tmp_path):
    got = _contexts(tree(tmp_path, {**CHOICE, "train.py": CHOICE["train.py"].replace("{args}", "")}))
    assert got[("codebooks.py", 9)] == ("opt-in", "only when use_cosine (use_cosine defaults to False)")
    got = _contexts(tree(tmp_path / "on", {**CHOICE, "train.py": CHOICE["train.py"].replace("{args}", "use_cosine=True")}))
    assert got[("codebooks.py", 9)][0] == "step"


def test_facts_give_each_arm_of_a_conditional_expression_a_region_that_holds_no_line():
    src = CHOICE["codebooks.py"].replace("\n        ", "\n").strip()
    facts = code_facts(ast.parse(src), "codebooks", False)
    arms = [r for r in facts["regions"] if r[0] > r[1]]
    # a parameter's condition names the function it is a parameter of: a call's keyword overrides that one's
    cosine, kind = ["param", "use_cosine", False, False, "Quantizer.__init__"], ["param", "kind", "plain", "plain", "Quantizer.__init__"]
    assert [(r[2], r[3], r[5]) for r in arms] == [
        (["not", cosine], "body", "not use_cosine"), (cosine, "body", "use_cosine"),
        (["cmp", "Eq", kind, ["lit", "plain"]], "body", "kind == 'plain'"),
        (["cmp", "Eq", kind, ["lit", "plain"]], "else", "kind == 'plain'")]
    refs = dict((ref, region) for ref, region in facts["refs"]["Quantizer.__init__"])
    assert facts["regions"][refs["l:CosineBook"]][2] == cosine
