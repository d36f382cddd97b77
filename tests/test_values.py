"""Values that travel (sources/values.py): a rule sees a value one assignment or default away from
where it is used, and a few matchers judge where a value came from. Every test scans real source
through the real per-file scanner, with and without the ast screen (both must agree)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cli import run_cli
from neuron_ready.catalog import load_catalog
from scanning import hits, scan_text, write_tree

CATALOG = load_catalog()


def scan(code: str, target: str = "native") -> list[tuple[int, str, str]]:
    screened = scan_text(code, CATALOG, target=target, screen=True)
    full = scan_text(code, CATALOG, target=target, screen=False)
    assert [dataclasses.asdict(f) for f in screened.findings] == [dataclasses.asdict(f) for f in full.findings]
    return hits(full)


def lines_of(found, rule: str) -> list[int]:
    return sorted(line for line, r, _ in found if r == rule)


def test_a_module_constant_travels_into_a_function_and_a_local_rebinding_hides_it():
    found = scan('''
        import torch.distributed as dist
        BACKEND = "nccl"

        def helper():
            return 1

        def setup():
            dist.init_process_group(backend=BACKEND)

        def other(BACKEND):
            dist.init_process_group(backend=BACKEND)
    ''')
    assert lines_of(found, "NR1101") == [9]


def test_every_assignment_counts_and_only_one_step_is_followed():
    found = scan('''
        import torch.distributed as dist
        def setup(gpu):
            if gpu:
                backend = "nccl"
            else:
                backend = "gloo"
            dist.init_process_group(backend)
            alias = backend
            dist.init_process_group(alias)
    ''')
    assert lines_of(found, "NR1101") == [8]


def test_a_name_given_a_comparison_is_a_mask_and_a_string_key_is_not():
    found = scan('''
        import torch
        def loss_fn(logits, labels, batch, ignore_index=-100):
            keep = labels != ignore_index
            picked = logits[keep]
            key = "attention_mask"
            am = batch[key]
            for mask_name in ("a_mask", "b_mask"):
                batch[mask_name]
            return picked, am
    ''')
    assert lines_of(found, "NR1504") == [5]


def test_an_integer_device_index_is_fine_and_cuda_device_ids_are_not():
    found = scan('''
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        def wrap(model, local_rank):
            model = DDP(model, device_ids=[local_rank], output_device=local_rank)
            dev = torch.cuda.current_device()
            return DDP(model, device_ids=[dev])
    ''')
    assert lines_of(found, "NR1103") == [8]


def test_annotations_and_dtype_tables_do_nothing():
    found = scan('''
        import numpy as np
        import torch

        def scale(x: torch.cuda.HalfTensor) -> torch.cuda.HalfTensor:
            return x

        TO_TORCH = {np.dtype("complex64"): torch.complex64, np.dtype("float16"): torch.float16}
        NAMES = {"fp16": torch.float16}
        HALF = torch.float16
    ''')
    rules = {r for _, r, _ in found}
    assert "NR1016" not in rules and "NR1208" not in rules and "NR1213" not in rules
    # a name-to-dtype option table lists the choices (the audit: the user picks); a plain binding uses FP16
    assert lines_of(found, "NR1205") == [10]


def test_argparse_cuda_default_needs_to_reach_to_or_device():
    code = '''
        import argparse
        import torch
        p = argparse.ArgumentParser()
        p.add_argument("--device", default="cuda:0")
        p.add_argument("--eval-device", dest="eval_device", default="cuda")
        args = p.parse_args()

        def helper():
            return 1

        def main():
            dev = torch.device(args.device)
            return torch.ones(2).to(dev)
    '''
    found = scan(code)
    assert lines_of(found, "NR1004") == [5]


def test_host_reads_count_only_in_forward():
    found = scan('''
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, x):
                assert torch.isfinite(x).all()
                n = int(x.sum())
                return torch.linspace(0, 1, n)

        def train_step(x):
            assert torch.isfinite(x).all()
            return int(x.sum())
    ''')
    assert lines_of(found, "NR1403") == [7, 8]


def test_int64_positions_stay_lowest_and_min_confidence_hides_them(tmp_path):
    found = scan('''
        import torch
        pos = torch.arange(seq_len, dtype=torch.long)
        torch.distributed.all_reduce(pos)
    ''')
    assert [r for _, r, _ in found] == ["NR1209"]
    rule = CATALOG.get("NR1209")
    precision = [r for r in CATALOG if r.category == "precision"]
    assert rule.confidence == "low"
    assert rule.effort.likely == min(r.effort.likely for r in precision)
    project = write_tree(tmp_path / "p", {"train.py": "import torch\npos = torch.arange(n, dtype=torch.long)\n"
                                                     "torch.distributed.all_reduce(pos)\n"})
    shown = run_cli("scan", str(project), "--isolated", "--no-cache").out
    hidden = run_cli("scan", str(project), "--isolated", "--no-cache", "--min-confidence", "medium").out
    assert "NR1209" in shown and "NR1209" not in hidden
    report = json.loads(run_cli("scan", str(project), "--isolated", "--no-cache", "--format", "json",
                                "--min-confidence", "medium").out)
    assert [f["rule"] for f in report["findings"]] == ["NR1209"]  # hidden in text only


@pytest.mark.parametrize("code", [
    "import torch\ndef f(x):\n    keep = x > 0\n    return x[keep]\n",
    "import torch\nimport numpy as np\nb = np.linspace(0, 1, 10)\ndef g():\n    return torch.from_numpy(b)\n",
])
def test_the_screen_keeps_what_values_reach(code):
    assert scan(code)


def test_fp16_chosen_in_a_training_json_config_and_not_in_an_export_config():
    deepspeed = '{\n  "train_batch_size": 32,\n  "fp16": {"enabled": true, "loss_scale": 0},\n  "bf16": {"enabled": false}\n}\n'
    found = hits(scan_text(deepspeed, CATALOG, name="ds_config.json"))
    assert found == [(3, "NR1230", "fp16.enabled: true")]
    export = '{"export": {"dtype": "fp16", "fp16": true}}\n'
    assert hits(scan_text(export, CATALOG, name="export.json")) == []
    auto = '{"optimizer": {"type": "AdamW"}, "fp16": {"enabled": "auto"}}\n'
    assert hits(scan_text(auto, CATALOG, name="ds.json")) == []
