"""What a library's user runs beside the training step, and plugins enabled by name.

A library scanned without an entry (library mode) starts from its surface. Of that surface, the
functions a user calls on a trained model (search, clustering, saving) are the evaluation path and
the ones run once before training or on a trained model's weights (mining a dataset, initialising
weights, weight surgery in a loop over a model's modules) are opt-in; a class used
only by a module's `__main__` demo is still the user's pick. Code under `plugins/` or
`integrations/` runs only when its plugin is enabled. Real scans of small trees, no mocks.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from scanning import write_tree as tree

from neuron_ready.config import Settings
from neuron_ready.context import plugin_of
from neuron_ready.engine import run_scan


def scan(root: Path):
    return run_scan(Settings(root=root, cache=False)).report


def labelled(report) -> dict[tuple[str, int], tuple[str, str | None]]:
    return {(f.path, f.line): (f.context, f.details.get("feature")) for f in report.findings + report.off_path}


def _embedding_library(tmp_path: Path) -> Path:
    return tree(tmp_path, {
        "emb/__init__.py": "",
        "emb/model.py": """\
            import torch
            from .util import normalize
            class Encoder(torch.nn.Module):
                def forward(self, x):
                    return normalize(torch.nonzero(x))
            """,
        "emb/util.py": """\
            import torch
            def normalize(x):
                return x[x > 0]  # the model's forward runs this too: stays in the training step
            def _search_rows(x):
                return torch.nonzero(x)  # a search word, but the library calls it from training code
            def pool(x):
                return _search_rows(x)
            """,
        "emb/retrieval.py": """\
            import torch
            from .util import normalize
            def semantic_search(queries, corpus):
                scores = normalize(queries @ corpus.T)
                return torch.nonzero(scores > 0.5)
            def community_detection(embeddings):
                return torch.unique(embeddings)
            """,
        "emb/datasets.py": """\
            import torch
            def mine_hard_negatives(model, pairs):
                return torch.nonzero(pairs)
            """,
        "emb/adapters.py": """\
            import torch
            def initialize_adapter_weights(model, loader):
                return torch.nonzero(model)
            def export_merged(model):
                return torch.nonzero(model)
            def save_checkpoint(model):
                return torch.nonzero(model)
            """,
        "emb/surgery.py": """\
            import torch
            def reduce_noise(model):
                for name, layer in model.named_modules():
                    keep = torch.nonzero(layer.weight)
                    layer.weight.data = layer.weight.data[keep]
            def sgd_update(params, lr):
                for p in params:
                    idx = torch.nonzero(p.grad)
                    p.data = p.data - lr * p.grad[idx]
            """,
        "emb/trainer.py": """\
            import torch
            from .model import Encoder
            from .util import pool
            class Trainer:
                def train(self, x):
                    loss = pool(Encoder()(x)).sum()
                    loss.backward()
            """,
    })


def test_a_librarys_inference_and_preparation_utilities_are_not_the_training_step(tmp_path):
    report = scan(_embedding_library(tmp_path))
    assert report.extra["reach"]["mode"] == "library"
    got = labelled(report)
    assert got[("emb/model.py", 5)] == ("step", None)  # the model's forward: the training step
    assert got[("emb/util.py", 3)] == ("step", None)  # shared with the training step: the best path wins
    assert got[("emb/util.py", 5)] == ("step", None)  # a name is judged only where nothing calls it
    # search and clustering run on a trained model's outputs: the evaluation path
    assert got[("emb/retrieval.py", 5)][0] == "evaluation"
    assert got[("emb/retrieval.py", 7)][0] == "evaluation"
    assert got[("emb/adapters.py", 5)][0] == "evaluation"  # exporting the result
    # a checkpoint is saved inside the training job, not by evaluation; once per save, so a dynamic
    # shape there is host-side (docs/contexts.md, code that runs once)
    assert got[("emb/adapters.py", 7)][0] == "host"
    # run once before training: opt-in features named for the function
    assert got[("emb/datasets.py", 3)] == ("opt-in", "mine_hard_negatives")
    assert got[("emb/adapters.py", 3)] == ("opt-in", "initialize_adapter_weights")
    # weight surgery on a trained model (a loop over its modules writing `.data`) is opt-in; an
    # update of parameters a user's step calls is not surgery
    assert got[("emb/surgery.py", 4)] == ("opt-in", "reduce_noise")
    assert got[("emb/surgery.py", 8)] == ("step", None)
    gate = next(f.gate for f in report.off_path if f.path == "emb/datasets.py")
    assert gate == "only when the user calls `mine_hard_negatives` (prepares a dataset before training)"
    assert {p.name for p in report.opt_in} >= {"mine_hard_negatives", "initialize_adapter_weights"}


def test_with_a_training_entry_the_calls_decide_not_the_names(tmp_path):
    root = _embedding_library(tmp_path)
    (root / "train.py").write_text(textwrap.dedent("""\
        import torch
        from emb.retrieval import semantic_search
        def main():
            x = semantic_search(torch.ones(3, 3), torch.ones(3, 3)).float()
            x.sum().backward()
        if __name__ == "__main__":
            main()
        """))
    report = scan(root)
    assert report.extra["reach"]["mode"] == "entries"
    assert labelled(report)[("emb/retrieval.py", 5)] == ("step", None)  # this trainer searches in its step


def test_a_class_used_only_by_a_modules_main_demo_is_still_the_users_pick(tmp_path):
    report = scan(tree(tmp_path, {
        "wrap/__init__.py": "from .wrappers import ARWrapper, BeliefWrapper, XLWrapper\n",
        "wrap/wrappers.py": """\
            import torch
            class ARWrapper(torch.nn.Module):
                def forward(self, x):
                    return torch.nonzero(x)
            class XLWrapper(torch.nn.Module):
                def forward(self, x):
                    return x[x > 0]
            class BeliefWrapper(torch.nn.Module):
                def forward(self, x):
                    return torch.unique(x)
            if __name__ == "__main__":
                print(BeliefWrapper()(torch.ones(3)))  # a demo: run as a script, never by the library
            """,
    }))
    got = labelled(report)
    assert got[("wrap/wrappers.py", 10)] == ("opt-in", "BeliefWrapper")
    assert "one of 3 classes named `*Wrapper`" in next(f.gate for f in report.off_path if f.line == 10)


DEMO = """\
    import torch
    class Net(torch.nn.Module):
        def forward(self, x):
            return x * 2
    if __name__ == "__main__":
        net = Net().cuda()
        loss = net(torch.ones(3).cuda()).sum()
        loss.backward()
    """


def test_the_main_demo_of_a_library_module_is_not_the_step(tmp_path):
    """Library mode: a library module's `__main__` block runs only when someone runs the file as a
    script; importing the module never runs it. Imported by the package, or a package module whose
    block runs its own classes: the block is the evaluation path (a demo), like a developer tool.
    A script outside a package that nobody imports keeps its answer: it may be what the user runs."""
    report = scan(tree(tmp_path, {
        "lib/__init__.py": "from .model import Net\n",
        "lib/model.py": DEMO,
        "lib/guided.py": DEMO,  # imported by nothing, but a module of the package
        "run.py": DEMO.replace("import torch", "import torch  # a script, in no package"),
    }))
    assert report.extra["reach"]["mode"] == "library"
    by = {(f.path, f.line, f.rule): f for f in report.findings + report.off_path}
    for path in ("lib/model.py", "lib/guided.py"):
        for line in (6, 7):
            f = by[(path, line, "NR1001")]
            assert f.context == "evaluation", (path, line, f.context)
            assert "a demo run only when the file is run as a script" in f.details["context_reason"]
    assert "`lib/__init__.py` imports it" in by[("lib/model.py", 6, "NR1001")].details["context_reason"]
    assert "whose block runs its own `Net`" in by[("lib/guided.py", 6, "NR1001")].details["context_reason"]
    assert by[("run.py", 6, "NR1001")].context == "step"


def test_a_packages_main_module_is_its_command_not_the_step(tmp_path):
    """Library mode: `python -m lib` runs `lib/__main__.py` (an install self-check, a CLI); importing
    the library never does. Its module code and its own functions are the evaluation path, like a
    module's `__main__` block (bitsandbytes' `__main__.py` moves a parameter to CUDA to check the
    install). A `__main__.py` outside a package is a script and keeps its answer."""
    check = """\
        import torch
        from lib import double

        print("checking the install")
        p = torch.nn.Parameter(torch.rand(10, 10).cuda())
        double(p).sum().backward()

        def helper():
            return torch.zeros(2).cuda()

        helper()
        """
    report = scan(tree(tmp_path, {
        "lib/__init__.py": "from .ops import double\n",
        "lib/ops.py": "import torch\n\ndef double(x):\n    return x.cuda() * 2\n",
        "lib/__main__.py": check,
        "tools/__main__.py": check,  # no package: a script someone may run
    }))
    assert report.extra["reach"]["mode"] == "library"
    by = {(f.path, f.line, f.rule): f for f in report.findings + report.off_path}
    for line in (5, 9):
        f = by[("lib/__main__.py", line, "NR1001")]
        assert f.context == "evaluation", (line, f.context)
        assert "run only by the command `python -m lib`" in f.details["context_reason"]
    assert by[("lib/ops.py", 4, "NR1001")].context == "step"  # the library itself
    assert by[("tools/__main__.py", 5, "NR1001")].context == "step"


ATTACK = """\
    import torch

    class Attack(torch.nn.Module):
        def forward(self, x, mask):
            return torch.unique(x[mask])
    """


def test_a_librarys_contributed_modules_are_opt_in_unless_the_core_imports_them(tmp_path):
    """Library mode: `contrib/` holds contributed code beside the maintained core
    (`torch_geometric.contrib`); a user imports a module of it by name, so each is the opt-in feature
    `contrib:NAME`. A `contrib/` folder the core imports in module code is part of the core; with a
    training entry, reachability decides as everywhere."""
    files = {
        "lib/__init__.py": "from .nn.conv import Conv\n",
        "lib/nn/__init__.py": "",
        "lib/nn/conv.py": "import torch\n\nclass Conv(torch.nn.Module):\n    def forward(self, x, mask):\n        return x[mask]\n",
        "lib/contrib/__init__.py": "",
        "lib/contrib/models/__init__.py": "",
        "lib/contrib/models/attack.py": ATTACK,
        "other/__init__.py": "from .contrib.ops import Attack\n",
        "other/contrib/__init__.py": "",
        "other/contrib/ops.py": ATTACK,
    }
    got = labelled(scan(tree(tmp_path, files)))
    assert got[("lib/nn/conv.py", 5)] == ("step", None)
    assert got[("lib/contrib/models/attack.py", 5)] == ("opt-in", "contrib:attack")
    assert got[("other/contrib/ops.py", 5)] == ("step", None)  # `other` cannot be imported without it
    report = scan(tree(tmp_path / "app", {**files, "train.py": """\
        import torch
        from lib.contrib.models.attack import Attack
        model = Attack()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(10):
            model(torch.ones(4), torch.ones(4) > 0).sum().backward()
            opt.step()
        """}))
    assert report.extra["reach"]["mode"] == "entries"
    assert labelled(report)[("lib/contrib/models/attack.py", 5)] == ("step", None)  # the entry uses it


def test_plugins_enabled_by_name_are_opt_in_and_the_plugin_manager_is_not(tmp_path):
    report = scan(tree(tmp_path, {
        "proj/__init__.py": "",
        "proj/integrations/__init__.py": "",
        "proj/integrations/base.py": """\
            import importlib
            import torch
            def load_plugins(names):
                torch.cuda.synchronize()
                return [importlib.import_module(n) for n in names]
            """,
        "proj/integrations/fused_loss/__init__.py": "",
        "proj/integrations/fused_loss/ops.py": """\
            import torch
            def fused_loss(x):
                return torch.nonzero(x).sum()
            """,
        "train.py": """\
            import torch
            from proj.integrations.base import load_plugins
            from proj.integrations.fused_loss.ops import fused_loss
            def main(plugins=()):
                load_plugins(plugins)
                loss = fused_loss(torch.ones(3))
                loss.backward()
            if __name__ == "__main__":
                main()
            """,
    }))
    assert report.extra["reach"]["mode"] == "entries"
    got = labelled(report)
    assert got[("proj/integrations/base.py", 4)] == ("step", None)  # the folder's own code: default path
    assert got[("proj/integrations/fused_loss/ops.py", 3)] == ("opt-in", "plugin:fused_loss")
    gate = next(f.gate for f in report.off_path if f.path.endswith("ops.py"))
    assert gate.startswith("only when the plugin `fused_loss` is enabled")
    assert "plugin:fused_loss" in {p.name for p in report.opt_in}


def test_the_plugin_of_a_path():
    assert plugin_of("src/axo/integrations/liger/kernels/rms.py") == "liger"
    assert plugin_of("lightning/fabric/plugins/precision/amp.py") == "precision"
    assert plugin_of("src/axo/integrations/base.py") is None  # the plugin manager itself
    assert plugin_of("src/axo/integrations.py") is None
    assert plugin_of("src/axo/core/trainer.py") is None


def test_a_plugins_own_cuda_extension_is_the_plugins(tmp_path):
    report = scan(tree(tmp_path, {
        "setup.py": """\
            from setuptools import setup
            from torch.utils.cpp_extension import BuildExtension, CUDAExtension
            setup(name="proj", ext_modules=[CUDAExtension("proj.integrations.fastops._ext",
                  ["proj/integrations/fastops/kernel.cu"])], cmdclass={"build_ext": BuildExtension})
            """,
        "proj/__init__.py": "",
        "proj/integrations/__init__.py": "",
        "proj/integrations/fastops/__init__.py": "",
        "proj/integrations/fastops/ops.py": """\
            from proj.integrations.fastops import _ext
            def fused(x):
                return _ext.fused(x)
            """,
        "proj/integrations/fastops/kernel.cu": """\
            __global__ void fused_kernel(float* x) { x[threadIdx.x] *= 2.0f; }
            """,
        "train.py": """\
            import torch
            from proj.integrations.fastops.ops import fused
            def main():
                loss = fused(torch.ones(3)).sum()
                loss.backward()
            if __name__ == "__main__":
                main()
            """,
    }))
    cuda = [f for f in report.findings + report.off_path if f.path.endswith("kernel.cu")]
    assert cuda and all((f.context, f.details.get("feature")) == ("opt-in", "plugin:fastops") for f in cuda)
    assert not any(f.path.startswith("proj/integrations/fastops/") for f in report.findings)


def test_weight_surgery_is_found_in_any_statement_block():
    """The loop over a model's modules and its `.data` write are found however deep in statement
    blocks they sit (with, try, if, an inner function), and not from a loop over anything else."""
    import ast

    from neuron_ready.sources.codefacts import code_facts

    src = textwrap.dedent("""\
        def merge(model, keep):
            with ctx():
                try:
                    for name, m in model.named_modules():
                        if keep:
                            def inner():
                                pass
                        else:
                            m.weight.data = m.weight.data * 0.5
                finally:
                    pass

        def step(params, grads):
            for p, g in zip(params, grads):
                p.data = p.data - g

        def outer(model):
            def reset():
                for m in model.modules():
                    while True:
                        m.bias.data = 0
            return reset
        """)
    defs = code_facts(ast.parse(src), "m", False)["defs"]
    assert "surgery" in defs["merge"][3] and "surgery" not in defs["step"][3]
    assert "surgery" in defs["outer"][3] and "surgery" in defs["outer.reset"][3]
