"""Baselines and diffs: finding identity ignores line numbers, counts duplicates, survives JSON."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from cli import run_cli
from conftest import FIXTURES
from neuron_ready.baseline import diff_reports, fingerprints, load_report, report_from_dict
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from neuron_ready.render import json as json_fmt

TRAIN = """\
import torch

model = torch.nn.Linear(4, 4).cuda()
x = torch.zeros(4, device="cuda")
y = x.cuda()
y = x.cuda()
"""


def scan(root):
    return run_scan(Settings(root=root, config_path=None)).report


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / "train.py").write_text(TRAIN, encoding="utf-8")
    return root


def test_moved_code_keeps_its_fingerprints(repo):
    before = scan(repo)
    (repo / "train.py").write_text("# header\n\n\ndef helper():\n    pass\n\n" + TRAIN, encoding="utf-8")
    after = scan(repo)
    assert [f.line for f in before.findings] != [f.line for f in after.findings]
    assert fingerprints(before.findings) == fingerprints(after.findings)
    d = diff_reports(before, after)
    assert d.new == [] and d.fixed == [] and d.unchanged == len(after.findings)


def test_identical_lines_stay_two_findings(repo):
    before = scan(repo)
    fps = fingerprints(before.findings)
    assert len(set(fps)) == len(fps)  # `y = x.cuda()` twice: two fingerprints
    (repo / "train.py").write_text(TRAIN.replace("y = x.cuda()\n", "", 1), encoding="utf-8")
    d = diff_reports(before, scan(repo))
    assert [(f.rule, f.snippet) for f in d.fixed] == [("NR1001", "x.cuda()")] and d.new == []


def test_a_finding_in_another_file_is_new(repo):
    before = scan(repo)
    shutil.copy(repo / "train.py", repo / "pretrain.py")
    d = diff_reports(before, scan(repo))
    assert {f.path for f in d.new} == {"pretrain.py"} and len(d.new) == len(before.findings)


@pytest.mark.parametrize("name", ["mainstream", "cuda_extension", "fused_fallbacks", "notebook", "broken"])
def test_json_report_reads_back_byte_for_byte(tmp_path, name):
    text = json_fmt.render(run_scan(Settings(root=FIXTURES / name)).report)
    (tmp_path / "r.json").write_text(text, encoding="utf-8")
    assert json_fmt.render(load_report(tmp_path / "r.json")) == text


def test_report_extra_fields_survive(tmp_path):
    doc = json.loads(json_fmt.render(run_scan(Settings(root=FIXTURES / "mainstream")).report))
    doc["breakeven"] = {"breakeven_runs": 3.2, "summary": "Pays back after 3.2 runs"}
    assert report_from_dict(doc).extra["breakeven"]["breakeven_runs"] == 3.2


def test_write_baseline_then_only_new_findings_fail(repo):
    r = run_cli("scan", ".", "--write-baseline", "nr-baseline.json", "--fail-on", "any", "--format", "json", cwd=repo)
    assert r.code == 1  # without a baseline, every finding counts
    base = json.loads((repo / "nr-baseline.json").read_text())
    assert base["kind"] == "neuron-ready-baseline" and len(base["findings"]) == 4
    assert {"fingerprint", "rule", "path", "line", "snippet"} <= set(base["findings"][0])

    r = run_cli("scan", ".", "--baseline", "nr-baseline.json", "--fail-on", "any", cwd=repo)
    assert r.code == 0, r.err
    assert "0 new findings, 4 known" in r.err

    (repo / "train.py").write_text("import torch\n\n\n" + TRAIN + "z = torch.ones(2).cuda()\n", encoding="utf-8")
    r = run_cli("scan", ".", "--baseline", "nr-baseline.json", "--fail-on", "any", "--format", "json", cwd=repo)
    assert r.code == 1
    d = json.loads(r.out)
    assert [f["snippet"] for f in d["findings"]] == ["torch.ones(2).cuda()"]
    assert d["baseline"] == {"new": 1, "known": 4}
    assert d["summary"]["effort"]["class"] == "days"  # the estimate stays the whole scan's

    # a category that the new finding is not in does not fail
    r = run_cli("scan", ".", "--baseline", "nr-baseline.json", "--fail-on", "precision", cwd=repo)
    assert r.code == 0


def test_baseline_accepts_findings_off_the_training_path(repo):
    """A directory scan puts an unbuilt kernel and a test off the path; the hook scans files alone,
    where they count: the baseline written from the directory must still know them."""
    (repo / "kernel.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n", encoding="utf-8")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_gpu.py").write_text("import torch\nx = torch.zeros(2).cuda()\n", encoding="utf-8")
    r = run_cli("scan", ".", "--write-baseline", "nr-baseline.json", "--format", "json", cwd=repo)
    d = json.loads(r.out)
    assert {f["path"] for f in d["off_path"]} == {"kernel.cu", "tests/test_gpu.py"}
    assert len(json.loads((repo / "nr-baseline.json").read_text())["findings"]) == len(d["findings"]) + 2
    r = run_cli("scan", "kernel.cu", "tests/test_gpu.py", "--baseline", "nr-baseline.json", "--fail-on", "any", cwd=repo)
    assert r.code == 0 and "0 new findings" in r.err, r.err  # the kernel counts here, and is known


def test_a_json_report_works_as_a_baseline(repo):
    r = run_cli("scan", ".", "--format", "json", "-o", "report.json", cwd=repo)
    assert r.code == 0
    r = run_cli("scan", ".", "--baseline", "report.json", "--fail-on", "any", cwd=repo)
    assert r.code == 0 and "0 new findings" in r.err


@pytest.mark.parametrize(
    "content,needle",
    [
        ("{not json", "nr.json:1: not valid JSON"),
        ('{"kind": "neuron-ready-baseline", "fingerprint_version": 9, "findings": []}', "fingerprint version 9 is not 1"),
        ('{"kind": "neuron-ready-baseline", "fingerprint_version": 1, "findings": [1]}', "must be a list of objects"),
        ('{"schema_version": 1, "summary": {}}', "not a neuron-ready JSON report (missing 'effort')"),
        ("[]", "expected a JSON object"),
    ],
)
def test_bad_baseline_is_one_line_exit_2(repo, content, needle):
    (repo / "nr.json").write_text(content, encoding="utf-8")
    r = run_cli("scan", ".", "--baseline", "nr.json", cwd=repo)
    assert r.code == 2 and needle in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_missing_baseline_is_an_error(repo):
    r = run_cli("scan", ".", "--baseline", "nope.json", cwd=repo)
    assert r.code == 2 and "baseline file not found: nope.json (create it with --write-baseline)" in r.err


def _two_reports(tmp_path):
    """Base: the CUDA extension fixture. Head: one new `.cuda()`, a kernel file deleted, code moved."""
    base_dir, head_dir = tmp_path / "base", tmp_path / "head"
    shutil.copytree(FIXTURES / "cuda_extension", base_dir)
    shutil.copytree(FIXTURES / "cuda_extension", head_dir)
    (head_dir / "csrc" / "scan_backward.cu").unlink()
    train = head_dir / "train.py"
    train.write_text("\n\n" + train.read_text() + "\nextra = torch.zeros(3).cuda()\n", encoding="utf-8")
    for d, name in ((base_dir, "base.json"), (head_dir, "head.json")):
        r = run_cli("scan", str(d), "--format", "json", "-o", str(tmp_path / name))
        assert r.code == 0, r.err
    return tmp_path / "base.json", tmp_path / "head.json"


def test_diff_command_formats(tmp_path):
    base, head = _two_reports(tmp_path)
    r = run_cli("diff", str(base), str(head), "--format", "json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert [(f["rule"], f["snippet"]) for f in d["new"]] == [("NR1001", "torch.zeros(3).cuda()")]
    assert [(f["rule"], f["path"]) for f in d["fixed"]] == [("NR1703", "csrc/scan_backward.cu")]
    assert d["unchanged"] == d["head"]["findings"] - 1
    assert d["score_delta"] == d["head"]["score"] - d["base"]["score"]
    assert d["kind"] == "neuron-ready-diff" and all(len(f["fingerprint"]) == 32 for f in d["new"])

    r = run_cli("diff", str(base), str(head))
    assert r.code == 0
    assert "1 new, 1 fixed" in r.out and "New (1)\n  train.py:" in r.out and "Fixed (1)\n  csrc/scan_backward.cu" in r.out

    r = run_cli("diff", str(base), str(head), "--format", "markdown")
    assert r.code == 0
    assert "**This change adds 1 finding and removes 1.**" in r.out
    assert "<details open><summary>Added (1)</summary>" in r.out and "<summary>Removed (1)</summary>" in r.out


def test_diff_fail_on(tmp_path):
    base, head = _two_reports(tmp_path)
    assert run_cli("diff", str(base), str(head), "--fail-on", "NR10").code == 1
    assert run_cli("diff", str(base), str(head), "--fail-on", "triton").code == 0
    # month-plus already before the change: the class threshold is not crossed by it
    assert run_cli("diff", str(base), str(head), "--fail-on", "month-plus").code == 0
    r = run_cli("diff", str(head), str(base), "--fail-on", "any")  # reversed: the kernel comes back
    assert r.code == 1 and "1 finding" in r.err


def test_diff_class_crossing(tmp_path):
    small, big = tmp_path / "small", tmp_path / "big"
    small.mkdir()
    (small / "train.py").write_text(TRAIN, encoding="utf-8")
    shutil.copytree(FIXTURES / "cuda_extension", big)
    for d in (small, big):
        assert run_cli("scan", str(d), "--format", "json", "-o", str(tmp_path / f"{d.name}.json")).code == 0
    r = run_cli("diff", str(tmp_path / "small.json"), str(tmp_path / "big.json"), "--fail-on", "weeks")
    assert r.code == 1 and "effort class rose from days to month-plus, at or above weeks" in r.err
    assert "(up 2 classes)" in r.out


def test_diff_rejects_what_is_not_a_report(tmp_path):
    (tmp_path / "a.json").write_text(textwrap.dedent('{"schema_version": 1, "kind": "x"}'), encoding="utf-8")
    r = run_cli("diff", str(tmp_path / "a.json"), str(tmp_path / "a.json"))
    assert r.code == 2 and "a.json: not a neuron-ready JSON report (missing 'summary')" in r.err
