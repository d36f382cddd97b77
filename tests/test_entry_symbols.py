"""`--entry module:name`: a library's user names the call the training job makes, and the path
starts there, through the package's re-exports, instead of at the library's whole surface."""

from __future__ import annotations

import json

import pytest

from cli import run_cli
from scanning import write_tree as tree
from neuron_ready.config import ConfigError, Settings
from neuron_ready.engine import run_scan

LIBRARY = {
    "pkg/__init__.py": "from .render import rasterize\nfrom .other import unused_op\nfrom .model import Block\n",
    "pkg/render.py": (
        "import torch\n\n"
        "def rasterize(x):\n"
        "    return _project(x)\n\n"
        "def _project(x):\n"
        "    return x.to('cuda') * 2\n\n"
        "if __name__ == '__main__':\n"
        "    print(torch.zeros(1).cuda())\n"
    ),
    "pkg/other.py": "import torch\n\ndef unused_op(x):\n    return x.cuda()\n",
    "pkg/model.py": (
        "import torch\nfrom torch import nn\n\n"
        "class Block(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x.float()\n\n"
        "    def decode(self, x):\n"
        "        return x.to(torch.device('cuda'))\n"
    ),
}


def scan(root, *entries):
    return run_scan(Settings(root=root, entries=list(entries))).report


def step_lines(report) -> set[tuple[str, int]]:
    return {(f.path, f.line) for f in report.findings}


def test_without_an_entry_the_whole_surface_is_on_the_path(tmp_path):
    report = scan(tree(tmp_path, LIBRARY))
    assert report.extra["reach"]["mode"] == "library"
    paths = {p for p, _ in step_lines(report)}
    assert {"pkg/render.py", "pkg/other.py", "pkg/model.py"} <= paths


def test_a_re_exported_function_starts_the_path_where_it_is_defined(tmp_path):
    root = tree(tmp_path, LIBRARY)
    report = scan(root, "pkg:rasterize")
    reach = report.extra["reach"]
    assert reach["mode"] == "entries" and reach["entries"] == ["pkg/__init__.py"]
    assert reach["entry_symbols"] == {"pkg:rasterize": ["pkg/render.py:rasterize"]}
    # what rasterize calls is the step; the other export and the class nobody calls are not
    assert step_lines(report) == {("pkg/render.py", 7)}
    off = {(f.path, f.line): f.context for f in report.off_path}
    assert off[("pkg/other.py", 4)] == "off-path" and off[("pkg/model.py", 9)] == "off-path"
    # the module is imported, not run: its `__main__` block stays a demo
    assert off[("pkg/render.py", 10)] == "off-path"
    # the file and the module spelling lead to the same definition and the same findings
    for spec in ("pkg/render.py:rasterize", "pkg.render:rasterize", "pkg:render.rasterize"):
        again = scan(root, spec)
        assert step_lines(again) == {("pkg/render.py", 7)}
        assert again.extra["reach"]["entry_symbols"] == {spec: ["pkg/render.py:rasterize"]}


def test_naming_the_file_alone_still_runs_its_main_block(tmp_path):
    report = scan(tree(tmp_path, LIBRARY), "pkg/render.py")
    assert ("pkg/render.py", 10) in step_lines(report)
    assert "entry_symbols" not in report.extra["reach"]


def test_a_class_starts_with_its_hooks_and_a_method_must_be_named(tmp_path):
    root = tree(tmp_path, LIBRARY)
    assert ("pkg/model.py", 9) not in step_lines(scan(root, "pkg:Block"))  # forward runs, decode is not called
    report = scan(root, "pkg:Block.decode")
    assert ("pkg/model.py", 9) in step_lines(report)
    assert report.extra["reach"]["entry_symbols"] == {"pkg:Block.decode": ["pkg/model.py:Block.decode"]}


def test_the_text_report_says_which_name_led_where(tmp_path):
    root = tree(tmp_path, LIBRARY)
    r = run_cli("scan", str(root), "--entry", "pkg:rasterize", "--no-cache")
    assert r.code == 0
    assert "Training path: from pkg:rasterize (pkg/render.py:rasterize) (named)" in r.out
    j = run_cli("scan", str(root), "--entry", "pkg:rasterize", "--format", "json", "--no-cache")
    assert json.loads(j.out)["reach"]["entry_symbols"] == {"pkg:rasterize": ["pkg/render.py:rasterize"]}


@pytest.mark.parametrize("spec, message", [
    ("pkg:rasterise", "entry 'pkg:rasterise': pkg/__init__.py defines or imports no function, class or module `rasterise`"),
    ("pkg:9lives", "entry 'pkg:9lives': no Python file"),
    ("nopkg:rasterize", "entry 'nopkg:rasterize': no Python file"),
])
def test_a_name_that_leads_nowhere_is_a_one_line_error(tmp_path, spec, message):
    root = tree(tmp_path, LIBRARY)
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(")[:40]):
        scan(root, spec)
    r = run_cli("scan", str(root), "--entry", spec, "--no-cache")
    assert r.code == 2 and r.err.count("\n") == 1 and message in r.err and "Traceback" not in r.err


def test_an_optimizer_class_runs_its_step(tmp_path):
    root = tree(tmp_path, {
        "opt/__init__.py": "from .lion import Lion\n",
        "opt/lion.py": (
            "import torch\n\n"
            "class Lion(torch.optim.Optimizer):\n"
            "    def __init__(self, params, lr=1e-4):\n"
            "        super().__init__(params, dict(lr=lr))\n\n"
            "    def step(self, closure=None):\n"
            "        return torch.zeros(1).cuda()\n"
        ),
    })
    assert ("opt/lion.py", 8) in step_lines(scan(root, "opt:Lion"))


def test_a_name_re_exported_with_a_star_is_found_where_it_is_defined(tmp_path):
    root = tree(tmp_path, {
        "geo/__init__.py": "",
        "geo/nn/__init__.py": "from .conv import *  # noqa\n",
        "geo/nn/conv/__init__.py": "from .gcn import GCNConv\nfrom .gat import GATConv\n",
        "geo/nn/conv/gcn.py": "import torch\n\nclass GCNConv(torch.nn.Module):\n    def forward(self, x):\n        return x.cuda()\n",
        "geo/nn/conv/gat.py": "import torch\n\nclass GATConv(torch.nn.Module):\n    def forward(self, x):\n        return x.cuda()\n",
    })
    report = scan(root, "geo.nn:GCNConv")
    assert report.extra["reach"]["entry_symbols"] == {"geo.nn:GCNConv": ["geo/nn/conv/gcn.py:GCNConv"]}
    assert step_lines(report) == {("geo/nn/conv/gcn.py", 5)}



def test_the_library_s_other_alternatives_stay_the_user_s_pick(tmp_path):
    """Importing the package registers every tuner, and the named call reaches a method by name
    (`model.update_layer`) that each defines. The family members the user did not name are opt-in,
    as in library mode; one the user names runs."""
    tuner = (
        "import torch\nfrom .base import BaseTuner\nfrom .registry import register\n\n"
        "class {name}(BaseTuner):\n"
        "    def update_layer(self, x):\n"
        "        return torch.nonzero(x)\n\n"
        "register('{key}', {name})\n"
    )
    root = tree(tmp_path, {
        "tune/__init__.py": (
            "from .lora import LoraModel\nfrom .ia3 import IA3Model\nfrom .boft import BOFTModel\n"
            "from .mapping import get_model\n"
        ),
        "tune/base.py": "import torch\n\nclass BaseTuner:\n    def __init__(self):\n        self.dev = torch.device('cuda')\n",
        "tune/registry.py": "REGISTRY = {}\n\ndef register(key, cls):\n    REGISTRY[key] = cls\n",
        "tune/lora.py": tuner.format(name="LoraModel", key="lora"),
        "tune/ia3.py": tuner.format(name="IA3Model", key="ia3"),
        "tune/boft.py": tuner.format(name="BOFTModel", key="boft"),
        "tune/mapping.py": (
            "from .registry import REGISTRY\n\n"
            "def get_model(kind, x):\n"
            "    model = REGISTRY[kind]()\n"
            "    return model.update_layer(x)\n"
        ),
    })
    report = scan(root, "tune:get_model")
    opt_in = {f.path: f.gate for f in report.off_path if f.context == "opt-in"}
    assert {"tune/lora.py", "tune/ia3.py", "tune/boft.py"} <= set(opt_in) and not report.findings
    assert "one of 3 subclasses of `BaseTuner`" in opt_in["tune/ia3.py"]
    named = scan(root, "tune:get_model", "tune:LoraModel")
    assert step_lines(named) == {("tune/lora.py", 7), ("tune/base.py", 5)}  # and the base it derives from


def test_the_bases_of_a_named_class_are_no_alternatives(tmp_path):
    trainer = "from .base import BaseTrainer\n\nclass {name}(BaseTrainer):\n    pass\n"
    root = tree(tmp_path, {
        "st/__init__.py": "from .text import TextTrainer\nfrom .image import ImageTrainer\n",
        "st/base.py": "import torch\n\nclass BaseTrainer:\n    def train(self):\n        return torch.zeros(1).cuda()\n",
        "st/text.py": trainer.format(name="TextTrainer"),
        "st/image.py": trainer.format(name="ImageTrainer"),
        "st/audio.py": trainer.format(name="AudioTrainer"),
    })
    # three `*Trainer` classes are a family in library mode; the one named, and its base, run
    assert step_lines(scan(root, "st:TextTrainer.train")) == {("st/base.py", 5)}


PATCHER = {
    "lk/__init__.py": "from .patch import apply_to_llama\n",
    "lk/mlp.py": (
        "import torch\n\n"
        "class BaseMLP(torch.nn.Module):\n"
        "    pass\n\n"
        "class SwiGLUMLP(BaseMLP):\n"
        "    def forward(self, x):\n"
        "        return torch.nonzero(x)\n\n"
        "class GeGLUMLP(BaseMLP):\n"
        "    def forward(self, x):\n"
        "        return torch.nonzero(x)\n\n"
        "class ReGLUMLP(BaseMLP):\n"
        "    def forward(self, x):\n"
        "        return torch.nonzero(x)\n"
    ),
    "lk/patch.py": (
        "from .mlp import SwiGLUMLP\n\n"
        "def apply_to_llama(swiglu=True):\n"
        "    from transformers.models.llama import modeling_llama\n"
        "    if swiglu:\n"
        "        modeling_llama.LlamaMLP = SwiGLUMLP\n"
    ),
}


def test_a_class_the_library_installs_into_another_module_is_its_pick_not_an_alternative(tmp_path):
    """`modeling_llama.LlamaMLP = SwiGLUMLP` (a monkey patch, on by default) installs one of three
    subclasses of `BaseMLP`: it runs for the patched model, in library mode and from the named call;
    the two it does not install stay the user's pick."""
    root = tree(tmp_path, PATCHER)
    library, named = scan(root), scan(root, "lk:apply_to_llama")
    for report in (library, named):
        assert ("lk/mlp.py", 8) in step_lines(report)
        assert ("lk/mlp.py", 12) not in step_lines(report) and ("lk/mlp.py", 16) not in step_lines(report)
    gates = {(f.path, f.line): f.gate for f in library.off_path if f.context == "opt-in"}
    assert "one of 3 subclasses of `BaseMLP`" in gates[("lk/mlp.py", 12)]


def test_alternatives_of_a_named_call_are_judged_over_modules_its_imports_do_not_reach(tmp_path):
    """The package imports `patch` lazily: the named call still reaches it, and the classes it
    installs are its pick there too."""
    files = dict(PATCHER, **{"lk/__init__.py": (
        "from typing import TYPE_CHECKING\n"
        "from .mlp import SwiGLUMLP, GeGLUMLP, ReGLUMLP\n\n"
        "if TYPE_CHECKING:\n"
        "    from .patch import apply_to_llama\n\n"
        "def __getattr__(name):\n"
        "    import importlib\n"
        "    return getattr(importlib.import_module(f'{__name__}.patch'), name)\n"
    )})
    root = tree(tmp_path, files)
    report = scan(root, "lk:apply_to_llama")
    assert report.extra["reach"]["entry_symbols"] == {"lk:apply_to_llama": ["lk/patch.py:apply_to_llama"]}
    assert ("lk/mlp.py", 8) in step_lines(report)
