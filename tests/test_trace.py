"""Trace mode on real PyTorch (CPU, fake tensors): the fixture models in fixtures/trace_models, the
findings at their source lines, the op counts, the merge with a static scan, and the errors."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cli import run_cli
from test_sarif import validator  # noqa: F401 - the SARIF 2.1.0 schema fixture
from neuron_ready.catalog import load_catalog
from neuron_ready.trace.data import OpUse, TraceRequest, TraceSetupError, parse_inputs
from neuron_ready.trace.ops import OpJudge, op_matches, status_of, trace_findings, trace_summary

torch = pytest.importorskip("torch")
from neuron_ready.trace.run import run_trace  # noqa: E402 - needs torch

REPO = Path(__file__).resolve().parents[1]
MODELS = "fixtures/trace_models"
LM_INPUTS = "input_ids:int64[2,16] labels:int64[2,16]"
CATALOG = load_catalog().select(target="native")
JUDGE = OpJudge(CATALOG)


@pytest.fixture(scope="module")
def traced(request):
    """run_trace once per (fixture, options), in this process (torch is imported once)."""
    cache: dict = {}

    def get(name: str, inputs: str = "", **options):
        key = (name, inputs, tuple(sorted(options.items())))
        if key not in cache:
            req = TraceRequest(f"{MODELS}/{name}.py:build", REPO, parse_inputs([inputs] if inputs else []), **options)
            result = run_trace(req)
            findings, _ = trace_findings(result, JUDGE, "native", str(REPO))
            cache[key] = (result, findings, trace_summary(result, JUDGE))
        return cache[key]

    return get


def source_line(path: str, line: int) -> str:
    return (REPO / path).read_text().splitlines()[line - 1]


def at(findings, rule: str) -> list[tuple[str, int]]:
    return sorted((f.path, f.line) for f in findings if f.rule == rule)


def test_clean_transformer_block_has_no_findings_and_counts_backward_ops(traced):
    result, findings, summary = traced("transformer_block", LM_INPUTS)
    assert findings == []
    assert result.forward_done and result.backward_done
    ops = summary["ops"]
    assert ops["support_percentage"] == 100.0
    assert not ops["unsupported_operators"] and not ops["restricted_operators"]
    # backward-only ops are in the counts
    assert ops["supported_operators"]["aten::embedding_dense_backward"] == 1
    assert ops["supported_operators"]["aten::native_layer_norm_backward"] == 5
    assert ops["backward_calls"] > ops["forward_calls"] > 0
    assert summary["graph_breaks"] == {"status": "ran", "graphs": 1, "breaks": 0}


def test_recorded_ops_are_the_ops_make_fx_puts_in_the_joint_graph(traced):
    """The recorder sees the same aten ops as a make_fx trace of forward + autograd.grad, except
    the gradient seed make_fx records and the detach of gradients accumulated into .grad."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from neuron_ready.trace.run import graph_op_counts, make_fx_joint_graph

    result, _, _ = traced("transformer_block", LM_INPUTS)
    ours = collections.Counter()
    for use, n in result.uses.items():
        ours[use.op] += n
    sys.path.insert(0, str(REPO / MODELS))
    import transformer_block

    mode = FakeTensorMode()
    with mode:
        model = transformer_block.build()
        args = (torch.empty(2, 16, dtype=torch.long), torch.empty(2, 16, dtype=torch.long))
        theirs = graph_op_counts(make_fx_joint_graph(model, args))
    skip = {"aten::detach", "aten::ones_like"}
    assert {k: v for k, v in ours.items() if k not in skip} == {k: v for k, v in theirs.items() if k not in skip}


def test_nonzero_and_boolean_mask_are_dynamic_shape_findings_at_their_lines(traced):
    result, findings, summary = traced("masking")
    path = f"{MODELS}/masking.py"
    assert at(findings, "NR1501") == [(path, 15)]
    assert at(findings, "NR1504") == [(path, 16)]
    assert "NR1514" not in {f.rule for f in findings}  # the named rules win over the generic one
    mask = next(f for f in findings if f.rule == "NR1504")
    assert mask.details["ops"] == {"aten::index.Tensor": 1} and mask.column == 18
    # the backward of h[keep] runs at the same user line
    backward = {u.op for u in result.uses if u.phase == "backward" and u.site and u.site.line == 16}
    assert "aten::index_put" in backward
    assert at(findings, "NR1311") == [(path, 15), (path, 16)]  # Dynamo breaks on both


def test_fft_is_unsupported_and_complex(traced):
    result, findings, summary = traced("spectral")
    path = f"{MODELS}/spectral.py"
    assert at(findings, "NR1601") == [(path, 14), (path, 15)]
    assert (path, 14) in at(findings, "NR1213")  # complex tensors: decomposed on native, verify
    unsupported = {e["op"]: e for e in summary["ops"]["unsupported_operators"]}
    assert set(unsupported) == {"aten::_fft_c2r", "aten::_fft_r2c"}
    restricted = {e["op"]: e for e in summary["ops"]["restricted_operators"]}
    assert "NR1213" in restricted["aten::view_as_real"]["rules"]  # in backward; native decomposes complex ops: verify
    assert unsupported["aten::_fft_r2c"]["rules"] == ["NR1213", "NR1601"]  # an FFT, on complex tensors
    assert f"{path}:15" in unsupported["aten::_fft_r2c"]["calls"]  # irfft's backward is an r2c FFT
    irfft = next(f for f in findings if f.rule == "NR1601" and f.line == 15)
    assert irfft.details["phases"] == ["backward", "forward"]
    assert summary["ops"]["support_percentage"] < 100


def test_float64_buffer_is_a_precision_finding_with_its_condition(traced):
    _, findings, summary = traced("float64_buffer")
    path = f"{MODELS}/float64_buffer.py"
    assert at(findings, "NR1207") == [(path, 15), (path, 16)]
    restricted = {e["op"]: e for e in summary["ops"]["restricted_operators"]}
    assert restricted["aten::div.Tensor"]["conditions"] == ["with float64 tensors"]
    assert summary["inputs"] == ["x:float32[4,16]"]  # the factory's keyword inputs


def test_branch_on_data_is_found_and_the_trace_goes_on(traced):
    result, findings, _ = traced("data_branch")
    path = f"{MODELS}/data_branch.py"
    assert at(findings, "NR1506") == [(path, 15)]
    branch = next(f for f in findings if f.rule == "NR1506")
    assert branch.symbol == "if h.mean() > 0:" and branch.scope == "SignGate.forward"
    ops_by_line = {(u.op, u.site.line) for u in result.uses if u.site}
    assert ("aten::relu", 16) in ops_by_line and ("aten::addmm", 19) in ops_by_line
    assert not any(op == "aten::tanh" for op, _ in ops_by_line)  # one arm is traced
    assert result.backward_done
    assert at(findings, "NR1311") == [(path, 15)]


def test_a_loop_on_data_stops_the_trace_at_its_line(tmp_path):
    (tmp_path / "loopy.py").write_text(textwrap.dedent('''\
        import torch


        class Halve(torch.nn.Module):
            def forward(self, x):
                while x.abs().max() > 0.5:
                    x = x / 2
                return x


        def build():
            return Halve(), (torch.randn(2, 4, requires_grad=True),)
    '''))
    result = run_trace(TraceRequest(str(tmp_path / "loopy.py") + ":build", tmp_path, graph_breaks=False))
    findings, _ = trace_findings(result, JUDGE, "native", str(tmp_path))
    branch = next(f for f in findings if f.rule == "NR1506")
    assert (branch.path, branch.line, branch.details["count"]) == ("loopy.py", 6, 16)
    assert "NR1312" not in {f.rule for f in findings}  # a loop on data is not a capture error
    assert not result.forward_done and result.stopped.site.line == 6


def test_item_in_forward_is_a_graph_break_and_a_host_read(traced):
    _, findings, summary = traced("item_break")
    path = f"{MODELS}/item_break.py"
    assert at(findings, "NR1311") == [(path, 15)]
    assert at(findings, "NR1403") == [(path, 15)]
    brk = next(f for f in findings if f.rule == "NR1311")
    assert "item()" in brk.message and brk.details["event"] == "graph-break"
    assert summary["graph_breaks"] == {"status": "ran", "graphs": 2, "breaks": 1}


def test_dtype_conditions_tell_integer_topk_from_float_topk(traced):
    _, findings, summary = traced("routing")
    path = f"{MODELS}/routing.py"
    assert at(findings, "NR1604") == [(path, 17)]  # load.topk on int64, not scores.topk on floats (line 15)
    assert at(findings, "NR1605") == [(path, 16)]
    assert at(findings, "NR1603") == [(path, 18)]
    restricted = {e["op"]: e for e in summary["ops"]["restricted_operators"]}
    assert restricted["aten::topk"]["count"] == 1 and restricted["aten::topk"]["conditions"] == ["on integer inputs"]
    assert summary["ops"]["supported_operators"]["aten::topk"] == 1


def test_an_op_without_a_fake_implementation_is_a_finding_not_a_crash(traced):
    result, findings, summary = traced("opaque_kernel")
    path = f"{MODELS}/opaque_kernel.py"
    assert at(findings, "NR1312") == [(path, 21)]
    assert "nrfixture::fused_gelu" in next(f for f in findings if f.rule == "NR1312").message
    assert summary["complete"] is False and summary["forward"] is False
    assert summary["ops"]["custom_operators"] == {"nrfixture::fused_gelu": 1}


@pytest.mark.parametrize("name,inputs", [
    ("masking", ""), ("spectral", ""), ("float64_buffer", ""), ("data_branch", ""), ("item_break", ""),
    ("routing", ""), ("opaque_kernel", ""),
])
def test_every_traced_finding_points_at_a_line_of_the_fixture(traced, name, inputs):
    _, findings, _ = traced(name, inputs)
    assert findings
    for f in findings:
        assert f.path == f"{MODELS}/{name}.py" and f.origin == "trace"
        text = source_line(f.path, f.line)
        assert text.strip() and " ".join(text.split()) == f.snippet
        assert text[f.column - 1:].strip(), (f.rule, f.line, f.column)


def test_no_train_traces_forward_only_in_eval_mode(traced):
    result, _, summary = traced("transformer_block", LM_INPUTS, train=False, graph_breaks=False)
    assert summary["mode"] == "forward" and summary["ops"]["backward_calls"] == 0
    assert result.forward_done and not result.backward_done and summary["complete"]


def test_dynamic_dims_trace_symbolically_and_list_their_guards(traced):
    result, _, summary = traced("transformer_block", LM_INPUTS, dynamic=True, graph_breaks=False)
    assert summary["complete"] and summary["dynamic"]
    assert any(u.op == "aten::embedding" for u in result.uses)
    assert summary["inputs"] == ["input_ids:int64[2*,16*]", "labels:int64[2*,16*]"]
    # cross_entropy over flattened logits and labels needs batch*sequence to agree: a guard at line 48
    assert summary["shape_guards"] == [{
        "guard": "Eq(input_ids.size(0)*input_ids.size(1), labels.size(0)*labels.size(1))",
        "path": f"{MODELS}/transformer_block.py", "line": 48,
    }]


def test_factory_problems_are_setup_errors(tmp_path):
    (tmp_path / "bad_import.py").write_text("import torch\nimport not_a_module_anywhere\n")
    (tmp_path / "raises.py").write_text("def build():\n    raise ValueError('no config')\n")
    (tmp_path / "not_module.py").write_text("def build():\n    return [1, 2]\n")
    (tmp_path / "no_inputs.py").write_text("import torch\ndef build():\n    return torch.nn.Linear(2, 2)\n")
    cases = {
        "bad_import.py:build": "cannot import {d}/bad_import.py: ModuleNotFoundError: No module named 'not_a_module_anywhere' (bad_import.py:2)",
        "raises.py:build": "build() raised ValueError: no config (raises.py:2)",
        "not_module.py:build": "build() returned list, expected a torch.nn.Module, (module, inputs) or (module, args, kwargs)",
        "no_inputs.py:build": "build() returned a model without example inputs: pass --inputs",
        "raises.py": "cannot read '{d}/raises.py': expected MODULE:FACTORY",
        "missing.py:build": "no such file: {d}/missing.py",
        "raises.py:nope": "{d}/raises.py has no attribute 'nope'",
    }
    for target, expected in cases.items():
        with pytest.raises(TraceSetupError) as e:
            run_trace(TraceRequest(f"{tmp_path}/{target}", tmp_path, graph_breaks=False))
        assert expected.format(d=tmp_path) in str(e.value), str(e.value)


def test_errors_are_one_line_with_exit_code_2(tmp_path):
    (tmp_path / "raises.py").write_text("def build():\n    raise ValueError('no config')\n")
    for args, expected in {
        ("raises.py:build",): "neuron-ready: error: build() raised ValueError: no config (raises.py:2)\n",
        ("raises.py:build", "--inputs", "x:float32[2,x]"): "neuron-ready: error: --inputs: dimensions in 'x:float32[2,x]' must be whole numbers\n",
    }.items():
        r = run_cli("trace", *args, "--no-graph-breaks", cwd=tmp_path)
        assert (r.code, r.err, r.out) == (2, expected, ""), r.err


def test_the_cuda_extension_fixture_cannot_be_traced_on_cpu(fixtures):
    r = run_cli("trace", "fixtures/cuda_extension/model.py:ScanLM", "--inputs", "ids:int64[2,16]", cwd=REPO)
    assert r.code == 2
    assert "cannot import fixtures/cuda_extension/model.py: ImportError: cannot import name '_C'" in r.err
    assert "(fixtures/cuda_extension/fusedops/scan.py:3)" in r.err and str(REPO) not in r.err


def test_merged_report_marks_static_findings_and_points_every_traced_one_at_the_user_line():
    r = run_cli("trace", f"{MODELS}/routing.py:build", "--scan", MODELS, "--format", "json", cwd=REPO)
    assert r.code == 0, r.err
    report = json.loads(r.out)
    by = {(f["path"], f["line"], f["rule"]): f for f in report["findings"]}
    assert by[("routing.py", 18, "NR1603")]["status"] == "confirmed"  # static argsort, traced aten::sort
    assert by[("routing.py", 18, "NR1603")]["trace"] == ["aten::sort"]
    assert by[("routing.py", 16, "NR1605")]["status"] == "confirmed"
    assert by[("routing.py", 17, "NR1604")]["origin"] == "trace"  # integer topk: the trace alone sees the dtype
    assert by[("spectral.py", 14, "NR1601")]["status"] == "not-traced"  # a file the trace never loaded
    traced = [f for f in report["findings"] if f["origin"] == "trace"]
    assert traced
    for f in traced:
        assert " ".join(source_line(f"{MODELS}/{f['path']}", f["line"]).split()) == f["snippet"]
    assert not any((f["path"], f["line"], f["rule"]) == ("routing.py", 18, "NR1603") and f["origin"] == "trace"
                   for f in report["findings"])  # folded into its static twin, not reported twice
    trace = report["trace"]
    assert trace["findings"]["confirmed"] == 2 and trace["findings"]["trace-only"] == 1
    assert trace["ops"]["unsupported_operators"][0]["calls"] == ["routing.py:18"]


def test_static_findings_in_functions_that_did_not_run_are_not_traced(tmp_path):
    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent('''\
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                return self.proj(x).double().sum()

            def export_scores(self, x):
                return torch.sort(x, dim=-1)


        def build():
            return Net(), (torch.randn(2, 8),)
    '''))
    r = run_cli("trace", "model.py:build", "--scan", ".", "--format", "json", "--no-graph-breaks", cwd=tmp_path)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    found = {(f["line"], f["rule"]): f for f in doc["findings"] + doc["off_path"]}
    assert found[(11, "NR1207")]["status"] == "confirmed"  # .double() ran and the trace saw float64
    assert found[(14, "NR1603")]["status"] == "not-traced"  # export_scores never ran
    assert found[(14, "NR1603")]["context"] == "evaluation"  # and by its name it exports: not in the estimate


def test_trace_reports_are_valid_sarif(validator):
    r = run_cli("trace", f"{MODELS}/routing.py:build", "--scan", MODELS, "--format", "sarif", "--no-graph-breaks", cwd=REPO)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert not list(validator.iter_errors(doc))
    located = {(x["ruleId"], x["locations"][0]["physicalLocation"]["region"]["startLine"]) for x in doc["runs"][0]["results"]}
    assert {("NR1604", 17), ("NR1603", 18)} <= located


def test_text_report_shows_statuses_and_op_counts():
    r = run_cli("trace", f"{MODELS}/routing.py:build", "--scan", f"{MODELS}/routing.py", "--no-graph-breaks", cwd=REPO)
    assert r.code == 0, r.err
    assert "NR1603  `torch.argsort` sorts a tensor" in r.out and "[confirmed by trace]" in r.out
    assert "17:22  NR1604  `aten::topk` runs TopK on an integer tensor" in r.out and "[trace]" in r.out
    assert "Trace of fixtures/trace_models/routing.py:build: Router (136 parameters), forward + backward" in r.out
    assert "aten::sort ×1 (NR1603) at fixtures/trace_models/routing.py:18" in r.out


def test_suppression_comments_apply_to_traced_findings(tmp_path):
    text = (REPO / MODELS / "masking.py").read_text().replace(
        "positions = keep.nonzero()", "positions = keep.nonzero()  # neuron-ready: ignore[NR1501]")
    (tmp_path / "masked.py").write_text(text)
    r = run_cli("trace", "masked.py:build", "--format", "json", "--no-graph-breaks", cwd=tmp_path)
    report = json.loads(r.out)
    assert {f["rule"] for f in report["findings"]} == {"NR1504"}
    assert report["summary"]["suppressed"] == 1


def test_report_is_deterministic():
    args = ("trace", f"{MODELS}/masking.py:build", "--scan", MODELS, "--format", "json", "--no-graph-breaks")
    first, second = run_cli(*args, cwd=REPO), run_cli(*args, cwd=REPO)
    assert first.code == 0 and first.out == second.out


def test_hugging_face_config_builds_without_download(tmp_path):
    pytest.importorskip("transformers")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 256, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 128,
    }))
    r = run_cli("trace", f"hf:{config}", "--format", "json", "--no-graph-breaks", cwd=tmp_path,
                env={"HF_HUB_OFFLINE": "1"})
    assert r.code == 0, r.err
    trace = json.loads(r.out)["trace"]
    assert trace["model"] == "LlamaForCausalLM" and trace["complete"]
    assert trace["inputs"] == ["input_ids:int64[1,128]", "labels:int64[1,128]"]
    assert trace["ops"]["supported_operators"]["aten::embedding_dense_backward"] == 1


def test_hf_without_transformers_or_config_is_a_one_line_error(tmp_path):
    r = run_cli("trace", "hf:missing.json", cwd=tmp_path)
    assert (r.code, r.err) == (2, "neuron-ready: error: no such file: missing.json\n")


def test_importing_the_cli_does_not_import_torch():
    code = "import sys, neuron_ready.cli, neuron_ready.trace.ops, neuron_ready.trace.merge; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ------------------------------------------------------------------------------------------ op names


@pytest.mark.parametrize("pattern,op,expected", [
    ("aten::sort", "aten::sort", True),
    ("aten::sort", "aten::sort.stable", True),  # a packet matches every overload
    ("aten::sort.stable", "aten::sort", False),  # an overload matches only itself
    ("aten::repeat_interleave.Tensor", "aten::repeat_interleave.self_int", False),
    ("aten::repeat_interleave.Tensor", "aten::repeat_interleave.Tensor", True),
    ("sort", "aten::sort", True),  # the aten:: prefix may be left out
    ("aten::*", "aten::mm", True),
    ("aten::*", "nrfixture::fused_gelu", False),
    ("aten::scatter_reduce", "aten::scatter_reduce_.two", False),  # in-place variants are their own packets
])
def test_op_names(pattern, op, expected):
    assert op_matches(pattern, op) is expected


def test_precedence_and_status():
    index = OpUse("aten::index.Tensor", None, "forward", frozenset({"dynamic"}))
    assert [r.id for r, _ in JUDGE.rules_for(index)] == ["NR1504"]
    cumsum = OpUse("aten::cumsum", None, "forward", frozenset({"dynamic", "float64"}))
    assert sorted(r.id for r, _ in JUDGE.rules_for(cumsum)) == ["NR1207", "NR1514"]
    sort = OpUse("aten::sort.stable", None, "forward", frozenset())
    assert status_of(sort.op, JUDGE.rules_for(sort)) == "unsupported"
    topk = OpUse("aten::topk", None, "forward", frozenset({"integer"}))
    assert status_of(topk.op, JUDGE.rules_for(topk)) == "restricted"
    assert status_of("aten::topk", JUDGE.rules_for(OpUse("aten::topk", None, "forward"))) == "supported"
    # xla-only rules do not apply on the native target
    median = OpUse("aten::median.dim", None, "forward")
    assert JUDGE.rules_for(median) == []
    assert [r.id for r, _ in OpJudge(load_catalog().select(target="xla")).rules_for(median)] == ["NR1611"]
    # grid_sample has no Neuron lowering either (a CPU fallback on native, Neuron 2.33)
    grid = OpUse("aten::grid_sampler_2d", None, "forward")
    assert [r.id for r, _ in JUDGE.rules_for(grid)] == ["NR1606"]


@pytest.mark.parametrize("text,problem", [
    ("x", "cannot read"), ("x:int65[2]", "unknown dtype"), ("x:float32[-1]", "must not be negative"),
    ("a:int64[2] a:int64[2]", "names 'a' twice"), ("a:int64[2] float32[3]", "positional inputs"),
])
def test_input_spec_errors(text, problem):
    with pytest.raises(TraceSetupError, match=problem):
        parse_inputs([text])


def test_input_specs():
    specs = parse_inputs(["input_ids:long[8,2048];labels:int64[8,2048]", "float[]"][:1])
    assert [str(s) for s in specs] == ["input_ids:int64[8,2048]", "labels:int64[8,2048]"]
    assert str(parse_inputs(["bf16[2,3]"])[0]) == "bfloat16[2,3]"
