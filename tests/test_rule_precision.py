"""Rule precision from the hand audit (docs/calibration/audit.md): constructs that look like a porting
concern but have nothing to port. INT64 only where it reaches an op without an integer datapath,
`repeat_interleave` only with tensor repeats, FP16 the user picks from options, complex-only
branches, CUDA flags that are set, and one finding per rule and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

from scanning import scan_text

from neuron_ready.config import Settings
from neuron_ready.engine import run_scan


def found(code: str, rule: str) -> list[tuple[int, str]]:
    return [(f.line, f.symbol) for f in scan_text(code).findings if f.rule == rule]


def report_of(root: Path, files: dict[str, str]):
    for rel, text in files.items():
        (root / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    return run_scan(Settings(root=root, cache=False)).report


# ------------------------------------------------------------------------------------------- NR1209


def test_int64_is_reported_where_it_reaches_an_op_without_an_integer_datapath():
    code = '''
    import torch
    import torch.distributed as dist

    def step(labels, table, src, out, index, mesh):
        tokens = torch.tensor(0, dtype=torch.int64)
        tokens += (labels != -100).sum()
        total = dist_utils.dist_sum_tensor(tokens.to("neuron"), mesh)
        scores = labels.long() @ table.long()
        out.scatter_add_(0, index, src.long())
        return torch.topk(torch.randperm(10), 3), total, scores
    '''
    result = scan_text(code)
    hits = {(f.line, f.details.get("reaches")) for f in result.findings if f.rule == "NR1209"}
    assert hits == {(6, "dist_sum_tensor"), (9, "@"), (10, "scatter_add"), (11, "topk")}
    assert "reaches `dist_sum_tensor`" in next(f.message for f in result.findings if f.line == 6)


def test_int64_that_only_indexes_embeds_compares_or_is_cast_is_not_reported():
    code = '''
    import torch
    import torch.nn.functional as F

    def forward(self, idx, labels, logits, out, values, w):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.wpe(pos) + self.wte(idx.long())
        loss = F.cross_entropy(logits, labels.long())
        out.scatter_add_(0, labels.long(), values)       # the index may narrow: lossless
        inv = 1.0 / (10000 ** (torch.arange(0, 64, 2).float() / 64))
        mixed = torch.matmul(self.emb(idx.long()), w)    # the embedding's output is float
        angles = torch.arange(64) @ w.float()             # a float operand: float on any device
        omega = 10000.0 ** (torch.arange(32).type_as(w) / 32)
        counts = torch.zeros(4, dtype=torch.int64)
        return x, loss, inv, mixed, counts[idx] == 0
    '''
    assert found(code, "NR1209") == []


def test_int64_and_the_op_must_share_a_function():
    code = '''
    import torch

    def make(n):
        counts = torch.zeros(n, dtype=torch.int64)
        return counts

    def use(counts, w):
        return counts @ w
    '''
    assert found(code, "NR1209") == []


# ------------------------------------------------------------------------------------------- NR1505


def test_repeat_interleave_needs_evidence_of_tensor_repeats_and_no_output_size():
    code = '''
    import torch

    def route(self, hidden, routing, lengths, t, h, w, q_per_kv):
        per_expert = routing.bincount(minlength=8)
        a = hidden.repeat_interleave(per_expert, dim=0)
        b = torch.repeat_interleave(hidden, lengths[0].sum(), dim=0)
        c = hidden.repeat_interleave(per_expert, dim=0, output_size=self.capacity)
        d = hidden.repeat_interleave(q_per_kv, dim=2)
        e = hidden.repeat_interleave(t * h * w, dim=1)
        f = hidden.repeat_interleave(self.config.n_rep, dim=1)
        g = hidden.repeat_interleave(lengths, dim=0)
        return a, b, c, d, e, f, g
    '''
    assert [line for line, _ in found(code, "NR1505")] == [6, 7]


# ------------------------------------------------------------------------------------------- NR1205


def test_fp16_the_user_picks_is_not_must_port_but_a_default_fp16_is(tmp_path):
    report = report_of(tmp_path, {"train.py": '''
        import argparse
        import torch

        DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
        LOW = [torch.float16, torch.bfloat16]
        p = argparse.ArgumentParser()
        p.add_argument("--dtype", default="float16" if torch.cuda.is_available() else "float16")
        p.add_argument("--precision", default="amp")
        args = p.parse_args()
        ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]

        def cast(model, precision):
            if precision == "amp":
                return model.to(torch.float16)
            elif precision in ("bf16", "amp_bf16"):
                return model.to(torch.bfloat16)
            elif precision == "pure_fp16":
                return model.half()
            return model

        def only_fp16(model, mode):
            if mode == "fp16":
                model = model.half()
            return model

        ctx = torch.autocast("cuda", dtype=torch.float16)
    '''})
    fp16 = {f.line: (f.context, f.gate) for f in report.findings + report.off_path if f.rule == "NR1205"}
    assert fp16 == {
        11: ("step", None),  # the table entry the default --dtype picks
        15: ("step", None),  # the branch the default --precision takes
        19: ("opt-in", "only when precision is 'pure_fp16' (precision defaults to 'amp')"),
        24: ("step", None),  # no bfloat16 beside it: FP16 is the only choice
        27: ("step", None),
    }


# ---------------------------------------------------------------------- complex-only, flags, one per line


def test_complex_only_branches_and_set_cuda_flags_are_listed_never_costed(tmp_path):
    report = report_of(tmp_path, {"train.py": '''
        import torch

        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.benchmark = True

        def update(params, grads, opt):
            for p, g in zip(params, grads):
                if torch.is_complex(p):
                    g = torch.view_as_real(g)
                if not p.is_complex():
                    pass
                else:
                    p = torch.view_as_real(p)
                gs = [torch.view_as_real(x) if torch.is_complex(x) else x for x in grads]
            y = torch.view_as_real(grads[0])
            loss = y.sum()
            loss.backward()
            opt.step()
    '''})
    listed = {(f.line, f.rule): (f.context, f.gate) for f in report.off_path}
    assert {line for line, _ in listed} >= {4, 5, 10, 14, 15}
    assert listed[(10, "NR1213")] == ("opt-in", "only on complex tensors (`torch.is_complex(p)`)")
    assert listed[(14, "NR1213")][1] == "only on complex tensors (`p.is_complex()`)"
    assert listed[(4, "NR1014")][1].startswith("only on a CUDA device")
    assert [(f.line, f.rule) for f in report.findings if f.rule == "NR1213"] == [(16, "NR1213")]
    parts = {p.name: p for p in report.opt_in}
    assert parts["complex"].estimate.p50 == 0 and parts["cuda"].estimate.p50 == 0


def test_cuda_calls_that_do_nothing_before_cuda_is_initialised_are_listed_never_costed(tmp_path):
    """torch 2.13 on a host without CUDA: empty_cache() and the memory getters return without touching
    a device (memory_allocated() is 0); synchronize() raises and manual_seed() leaves the Neuron
    generator unseeded, so those stay must-port."""
    report = report_of(tmp_path, {"train.py": '''
        import torch
        torch.cuda.manual_seed_all(0)
        model = torch.nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(10):
            model(torch.zeros(1, 2)).sum().backward()
            opt.step()
            torch.cuda.empty_cache()
            peak = torch.cuda.max_memory_allocated() / 2**20
            torch.cuda.synchronize()
    '''})
    listed = {f.line: f.gate for f in report.off_path if f.details.get("feature") == "cuda"}
    assert set(listed) == {9, 10} and all("harmless off CUDA" in g for g in listed.values())
    assert {(f.line, f.rule) for f in report.findings} >= {(3, "NR1015"), (11, "NR1007")}
    assert {p.name: p.estimate.p50 for p in report.opt_in}["cuda"] == 0


def test_one_rule_on_one_line_is_one_finding(tmp_path):
    report = report_of(tmp_path, {"train.py": '''
        import torch

        assert torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        x = torch.zeros(2).cuda()
    '''})
    probes = [f for f in report.findings + report.off_path if f.rule == "NR1005"]
    assert [(f.line, f.symbol, f.details.get("same_line")) for f in probes] == [
        (4, "torch.cuda.is_available", ["torch.cuda.is_bf16_supported"])]


# ------------------------------------------------------------------------------- NR1506, NR1502 (host)


def test_host_reads_at_construction_or_of_numpy_and_pandas_values_are_not_reported():
    code = '''
    import numpy as np
    import pandas as pd
    import torch

    class Net(torch.nn.Module):
        def __init__(self, w):
            super().__init__()
            if torch.isnan(w).any():
                raise ValueError("nan")

        def forward(self, x, mask):
            if mask.any():
                x = x[:1]
            return x

    def prepare(model):
        def _param_init_fn(m):
            if torch.isnan(m.weight).any():
                print("nan")
        model.apply(_param_init_fn)

    def evaluate(pos, neg, records, t):
        pred, y = pos.cpu().numpy(), neg.cpu().numpy()
        f1 = 1.0 if pred.sum() > 0 else 0.0
        df = pd.DataFrame(records)
        kinds = df[df["kind"] != "x"]["kind"].unique()
        arr = np.asarray(records)
        if arr.all():
            pass
        return f1, kinds, t.unique()
    '''
    result = scan_text(code)
    assert [(f.line, f.rule) for f in result.findings if f.rule in ("NR1506", "NR1502")] == [
        (13, "NR1506"), (31, "NR1502")]


def test_a_dtype_key_picks_nothing_and_flag_or_else_branches_beside_bf16_are_the_users_choice(tmp_path):
    """A dtype that indexes a table (`dtype2bytes[torch.float16] = 2`) names it and computes nothing
    in it; the float16 branch of a flag named for FP16 (`if self.fp16_enabled():`) or the else of a
    string test (`if amp_type == "bfloat16": ... else:`) beside a bfloat16 branch is the user's choice,
    must-port only when a readable default picks it."""
    report = report_of(tmp_path, {"train.py": '''
        import argparse
        import torch

        dtype2bytes = {}
        dtype2bytes[torch.float16] = 2; sizes = {torch.float16: 4}
        p = argparse.ArgumentParser()
        p.add_argument("--amp_type", default="float16")
        p.add_argument("--use_fp16", action="store_true")
        args = p.parse_args()

        def data_types(engine):
            model_dtype = torch.float32
            if engine.fp16_enabled():
                model_dtype = torch.float16
            elif engine.bfloat16_enabled():
                model_dtype = torch.bfloat16
            return model_dtype

        def get_amp_type(amp_type=None):
            if amp_type == "bfloat16":
                return torch.bfloat16
            else:
                return torch.float16

        def get_comms_type(comms_type=None):
            if comms_type == "bfloat16":
                return torch.bfloat16
            else:
                return torch.float16

        def cast(model, use_fp16):
            if use_fp16:
                return model.half()
            elif is_fp16_supported():
                return model.half()
            else:
                return model.to(torch.bfloat16)

        def probe(model):
            if torch.cuda.is_bf16_supported():
                return torch.bfloat16
            else:
                return torch.float16

        def fallback(mode, ok):
            if mode == "bf16" and ok:
                return torch.bfloat16
            else:
                return torch.float16

        def comm_type(comm=None):
            if comm == "bfloat16":
                return torch.bfloat16
            else:
                return torch.float16

        p.add_argument("--comm", default=None)
        buf = torch.empty(sizes[torch.float16], dtype=torch.float16)
    '''})
    fp16 = {f.line: (f.context, f.gate) for f in report.findings + report.off_path if f.rule == "NR1205"}
    assert fp16 == {
        6: ("off-path", None),  # a key of a size table
        15: ("opt-in", "only when fp16_enabled() is true (fp16_enabled() defaults to unknown)"),
        24: ("step", None),  # the default 'float16' is none of the tested values: it takes the else
        30: ("opt-in", "only when comms_type is none of 'bfloat16' (comms_type defaults to unknown)"),
        34: ("opt-in", "only when use_fp16 is true (use_fp16 defaults to False)"),
        36: ("step", None),  # a capability probe is no choice
        44: ("step", None),  # the else of a capability probe: what a device without BF16 runs
        50: ("step", None),  # the else of a test of more than one name: no option to read
        56: ("step", None),  # a None default is none of the tested values: it takes the else
        59: ("step", None),  # a real FP16 buffer beside a key on the same line keeps the line's finding
    }


def test_an_autocast_that_switches_autocast_off_is_opt_in_behind_neuron_autocast(tmp_path):
    """`autocast("cuda", enabled=False)` only leaves CUDA autocast around its region: nothing to do on
    a Neuron device unless the user turns on Neuron autocast; one that turns autocast on stays."""
    report = report_of(tmp_path, {"train.py": '''
        import torch
        from torch.amp import autocast

        @autocast("cuda", enabled=False)
        def rotate(x):
            return x.float()

        def step(model, x, use_amp):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = model(x)
            with torch.amp.autocast("cuda", enabled=use_amp):
                y = model(y)
            with torch.cuda.amp.autocast(enabled=False):
                z = rotate(y)
            return z
    '''})
    found = {(f.rule, f.line): (f.context, f.gate) for f in report.findings + report.off_path
             if f.rule in ("NR1201", "NR1202")}
    off = ("opt-in", "only when autocast is turned on for the Neuron device (the region only switches CUDA "
           "autocast off)")
    assert found == {
        ("NR1202", 5): off,
        ("NR1202", 10): ("step", None),
        ("NR1202", 12): ("step", None),
        ("NR1201", 14): off,
    }


def test_an_autocast_on_the_runs_own_device_type_unless_a_test_holds_is_opt_in(tmp_path):
    """`device_type = "cuda" if <test> else state.device.type`: the autocast follows the device the
    run already uses, a Neuron one on Trainium; a choice between "cuda" and "cpu" stays."""
    report = report_of(tmp_path, {"train.py": '''
        import torch

        def context(state, on_gpu_xla, model, x):
            device_type = "cuda" if on_gpu_xla else state.device.type
            with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
                y = model(x)
            with torch.autocast("cuda" if on_gpu_xla else x.device.type):
                y = model(y)
            kind = "cuda" if torch.cuda.is_available() else "cpu"
            with torch.autocast(kind, dtype=torch.bfloat16):
                return model(y)
    '''})
    found = {f.line: (f.context, f.gate) for f in report.findings + report.off_path if f.rule == "NR1202"}
    assert found == {
        6: ("opt-in", "only when `on_gpu_xla` holds (otherwise it autocasts on `state.device.type`, the run's device)"),
        8: ("opt-in", "only when `on_gpu_xla` holds (otherwise it autocasts on `x.device.type`, the run's device)"),
        11: ("step", None),
    }


def test_a_cuda_autocast_read_behind_a_test_of_an_existing_tensor_is_opt_in_behind_neuron_autocast(tmp_path):
    """`if tensor.device.type == "cuda": torch.get_autocast_gpu_dtype()`: right for CUDA tensors, never
    taken by a Neuron one; the same read outside such a test stays."""
    report = report_of(tmp_path, {"train.py": '''
        import torch

        def cast_if_autocast_enabled(tensor):
            if torch.is_autocast_enabled():
                if tensor.device.type == "cuda":
                    dtype = torch.get_autocast_gpu_dtype()
                elif tensor.device.type == "cpu":
                    dtype = torch.get_autocast_cpu_dtype()
                else:
                    raise NotImplementedError()
                return tensor.to(dtype=dtype)
            return tensor

        def step(model, x):
            dtype = torch.get_autocast_gpu_dtype()
            return model(cast_if_autocast_enabled(x)).to(dtype)
    '''})
    found = {f.line: (f.context, f.gate) for f in report.findings + report.off_path if f.rule == "NR1201"}
    assert found == {
        7: ("opt-in", "only when autocast is turned on for the Neuron device (a read of the CUDA autocast state "
            "for CUDA tensors, `tensor.device.type == 'cuda'`)"),
        16: ("step", None),
    }


def test_an_override_of_a_module_cast_that_forwards_to_it_picks_nothing(tmp_path):
    """`def double(self): ...; return super().double()` in an nn.Module mixin runs only where something
    calls `.double()` on the module; that call is the choice and keeps its finding."""
    report = report_of(tmp_path, {"train.py": '''
        import torch

        class Mixin(torch.nn.Module):
            def double(self):
                self._dtype = torch.double
                return super().double()

            def half(self):
                return self.to(torch.float16)

        model = Mixin()
        model.double()
    '''})
    found = {(f.rule, f.line): f.context for f in report.findings + report.off_path if f.rule in ("NR1205", "NR1207")}
    assert found == {("NR1207", 6): "off-path", ("NR1207", 7): "off-path", ("NR1205", 10): "step",
                     ("NR1207", 13): "step"}
