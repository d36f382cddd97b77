"""Config files (YAML, JSON, TOML): every scalar with its dotted key and line, the launch commands
held in values, broken files as diagnostics, and bounded work on hostile YAML."""

from __future__ import annotations

import json
import time

from neuron_ready.sources.configs import MAX_VALUES
from scanning import scan_text


def _scan(name: str, text: str):
    res = scan_text(text, name=name, dedent=False)
    assert res.kind == "config"
    json.dumps(res.facts)  # what the cache stores
    return res


def _targets(res) -> list[tuple]:
    return [(r["line"], r["launcher"], r["target"], r["args"]) for r in res.facts["launches"]]


YAML = """\
defaults: &defaults
  lr: 3.0e-4
  warmup: 100
model:
  name: llama
  attn_impl: flash        # flash | sdpa | eager
  use_fused_adam: true
  dropout: ~
  layers: [4, 8]
  started: 2024-01-31
  custom: !include other.yaml
train:
  <<: *defaults
  command: "torchrun --nproc_per_node 8 train.py --fp16"
  argv:
    - python
    - -m
    - pkg.train
  script: |
    echo starting
    accelerate launch --multi_gpu train.py \\
      --bf16
"""


def test_yaml_values_keys_and_lines():
    res = _scan("configs/base.yaml", YAML)
    values = res.facts["values"]
    assert values[:4] == [["defaults.lr", 3.0e-4, 2], ["train.lr", 3.0e-4, 2],
                          ["defaults.warmup", 100, 3], ["train.warmup", 100, 3]]
    as_dict = {k: (v, line) for k, v, line in values}
    assert as_dict["model.name"] == ("llama", 5)
    assert as_dict["model.attn_impl"] == ("flash", 6)
    assert as_dict["model.use_fused_adam"] == (True, 7)
    assert as_dict["model.dropout"] == (None, 8)
    assert as_dict["model.layers.0"] == (4, 9) and as_dict["model.layers.1"] == (8, 9)
    assert as_dict["model.started"] == ("2024-01-31", 10)  # timestamps stay text
    assert as_dict["model.custom"] == ("other.yaml", 11)  # an unknown tag is never constructed
    assert as_dict["train.argv.2"] == ("pkg.train", 18)
    assert [line for _, _, line in values] == sorted(line for _, _, line in values)


def test_yaml_launch_commands_in_strings_lists_and_blocks():
    res = _scan("configs/base.yaml", YAML)
    assert _targets(res) == [
        (14, "torchrun", "train.py", ["--fp16"]),
        (15, "python", "pkg.train", []),
        (21, "accelerate", "train.py", ["--bf16"]),
    ]


def test_json_values_and_launches_with_lines():
    text = """{
  "model": {"hidden": 4096, "rope": 1e4,
    "flash": false},
  "name": "llm",
  "cmd": ["deepspeed", "--num_gpus", "8", "pretrain.py", "--zero", "3"],
  "nested": [{"a": null}, [1, 2]],
  "run": "python -m pkg.train --cfg x.json"
}
"""
    res = _scan("conf/run.json", text)
    assert res.facts["values"] == [
        ["model.hidden", 4096, 2], ["model.rope", 10000.0, 2], ["model.flash", False, 3], ["name", "llm", 4],
        ["cmd.0", "deepspeed", 5], ["cmd.1", "--num_gpus", 5], ["cmd.2", "8", 5], ["cmd.3", "pretrain.py", 5],
        ["cmd.4", "--zero", 5], ["cmd.5", "3", 5], ["nested.0.a", None, 6], ["nested.1.0", 1, 6],
        ["nested.1.1", 2, 6], ["run", "python -m pkg.train --cfg x.json", 7],
    ]
    assert _targets(res) == [(5, "deepspeed", "pretrain.py", ["--zero", "3"]), (7, "python", "pkg.train", ["--cfg", "x.json"])]


def test_toml_values_with_best_effort_lines():
    text = """\
title = "run"

[trainer]
precision = "bf16-mixed"
devices = 8
cmd = "lightning run model --devices 8 train.py"

[[stages]]
name = "warmup"
steps = 10

[[stages]]
name = "main"
when = 2024-01-01T00:00:00Z
opts = { fused = true }
"""
    res = _scan("train.toml", text)
    assert res.facts["values"] == [
        ["title", "run", 1], ["trainer.precision", "bf16-mixed", 4], ["trainer.devices", 8, 5],
        ["trainer.cmd", "lightning run model --devices 8 train.py", 6], ["stages.0.name", "warmup", 9],
        ["stages.0.steps", 10, 10], ["stages.1.name", "main", 13], ["stages.1.when", "2024-01-01T00:00:00+00:00", 14],
        ["stages.1.opts.fused", True, 15],
    ]
    assert _targets(res) == [(6, "lightning", "train.py", [])]


def test_broken_configs_are_diagnostics_with_line_and_reason():
    cases = {
        "a.yaml": ("model:\n  name: [llama,\n  depth: 2\n", "invalid YAML"),
        "b.json": ('{\n  "a": 1,\n  "b": \n}\n', "invalid JSON: Expecting value"),
        "c.toml": ("[a]\nx = 1\ny = \n", "invalid TOML"),
        "d.yml": ("key: {{ helm_value }}\nother: [\n", "invalid YAML"),
    }
    for name, (text, reason) in cases.items():
        res = _scan(name, text)
        assert len(res.diagnostics) == 1, name
        d = res.diagnostics[0]
        assert d.kind == "syntax-error" and d.message.startswith(reason) and d.path == name
        assert d.line is not None and d.line >= 2, (name, d)
        assert res.facts == {}


def test_yaml_alias_bomb_and_self_reference_are_bounded():
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        levels.append(f"{cur}: &{cur} [{', '.join(['*' + prev] * 9)}]")
    bomb = "\n".join(levels) + "\n"  # 9**9 leaves once expanded
    start = time.process_time()
    res = _scan("bomb.yaml", bomb)
    assert len(res.facts["values"]) == MAX_VALUES and res.facts["values_capped"] is True
    maps = "a: &a {x: {}, y: {}}\n" + "".join(
        f"l{i}: &l{i} {{p: *{'a' if i == 0 else f'l{i - 1}'}, q: *{'a' if i == 0 else f'l{i - 1}'}}}\n" for i in range(40))
    res = _scan("maps.yaml", maps)  # 2**40 empty mappings, no scalar at all: the node budget stops it
    assert res.facts["values"] == [] and res.facts["values_capped"] is True
    res = _scan("loop.yaml", "&a [*a, 1]\n")
    assert res.facts["values_capped"] is True and not res.diagnostics
    assert time.process_time() - start < 30  # generous: a bug here runs for hours, not seconds


def test_unsafe_tags_are_never_constructed():
    res = _scan("evil.yaml", "x: !!python/object/apply:os.system ['touch /tmp/pwned-by-neuron-ready']\n")
    assert not res.diagnostics
    assert res.facts["values"] == [["x.0", "touch /tmp/pwned-by-neuron-ready", 1]]


def test_value_cap_and_multi_document_yaml():
    many = "".join(f"k{i}: {i}\n" for i in range(MAX_VALUES + 50))
    res = _scan("big.yaml", many)
    assert len(res.facts["values"]) == MAX_VALUES and res.facts["values_capped"] is True
    res = _scan("k8s.yaml", "kind: Job\n---\nkind: Pod\ncommand: [torchrun, train.py]\n")
    assert res.facts["values"][:2] == [["0.kind", "Job", 1], ["1.kind", "Pod", 3]]
    assert _targets(res) == [(4, "torchrun", "train.py", [])]


def test_config_facts_are_deterministic():
    assert _scan("c.yaml", YAML).facts == _scan("c.yaml", YAML).facts


def test_deeply_nested_configs_are_diagnostics():
    cases = {"deep.json": ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "too-complex"),
             "deep.toml": ("a = " + "[" * 5000 + "]" * 5000, "too-complex"),
             "deep.yaml": ("[" * 50000 + "]" * 50000, "syntax-error")}  # libyaml's own depth limit
    for name, (text, kind) in cases.items():
        res = _scan(name, text)
        assert [d.kind for d in res.diagnostics] == [kind], (name, res.diagnostics)
        assert res.facts == {}
