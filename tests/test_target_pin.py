"""A `torch-neuronx` pin tells the target when neither --target nor the configuration chose one:
2.10 and later (2.13/2.14 in Neuron 2.33) is native TorchNeuron, 2.9 and earlier the XLA stack."""

from __future__ import annotations

import json

import pytest

from cli import run_cli
from neuron_ready.target_pin import pinned_target, target_of
from scanning import write_tree

TRAIN = "import torch\nmodel = torch.nn.Linear(4, 4).cuda()\n"


@pytest.mark.parametrize("spec, target", [
    ("torch-neuronx==2.9.0.2.15", "xla"),
    ("torch-neuronx==2.13.3.0", "native"),
    ("torch-neuronx ~= 2.14.3", "native"),
    ("torch-neuronx===2.8.0", "xla"),
    ("torch-neuronx=2.9.0", "xla"),  # conda
    ("torch-neuronx<2.10", "xla"),
    ("torch-neuronx<=2.9.1", "xla"),
    ("torch-neuronx>=2.9", None),  # a lower bound admits both
    ("torch-neuronx<=2.10", None),
    ("torch-neuronx", None),
    ("torch-neuronx!=2.9.0", None),
])
def test_target_of_a_requirement(spec, target):
    assert target_of(spec) == target


def test_pins_in_the_top_dependency_files(tmp_path):
    write_tree(tmp_path, {"requirements.txt": "numpy\ntorch-neuronx==2.9.0.2.15\n", "sub/requirements.txt": "torch-neuronx==2.14.3.0\n"})
    assert pinned_target(tmp_path) == ("xla", "torch-neuronx==2.9.0.2.15 in requirements.txt:2")
    write_tree(tmp_path, {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["torch-neuronx==2.13.3.0"]\n'})
    assert pinned_target(tmp_path) is None  # two files disagree: no guess
    assert pinned_target(tmp_path / "missing") is None


def scan_json(root, *args):
    r = run_cli("scan", str(root), "--format", "json", "--no-cache", *args)
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_a_legacy_pin_scans_for_the_xla_target_and_says_why(tmp_path):
    root = write_tree(tmp_path / "repo", {"train.py": TRAIN, "requirements.txt": "torch-neuronx==2.9.0.2.15\n"})
    doc = scan_json(root)
    assert doc["target"] == "xla" and doc["target_from"] == "torch-neuronx==2.9.0.2.15 in requirements.txt:1"
    text = run_cli("scan", str(root), "--no-cache")
    assert "target xla (torch-neuronx==2.9.0.2.15 in requirements.txt:1)" in text.out
    explicit = scan_json(root, "--target", "native")  # the user's choice wins
    assert explicit["target"] == "native" and "target_from" not in explicit


def test_the_configuration_wins_over_a_pin(tmp_path):
    root = write_tree(tmp_path / "repo", {
        "train.py": TRAIN, "requirements.txt": "torch-neuronx==2.9.0.2.15\n",
        "pyproject.toml": '[project]\nname = "x"\n\n[tool.neuron-ready]\ntarget = "native"\n',
    })
    doc = scan_json(root)
    assert doc["target"] == "native" and doc["target_from"] == "pyproject.toml"


def test_no_pin_keeps_the_default(tmp_path):
    root = write_tree(tmp_path / "repo", {"train.py": TRAIN, "requirements.txt": "torch==2.13.0\n"})
    doc = scan_json(root)
    assert doc["target"] == "native" and "target_from" not in doc
