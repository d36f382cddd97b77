"""`neuron-ready fix`: every fixable rule's before/after examples, idempotence, re-scan, the CLI's
conventions (--diff, --unsafe-fixes, exit codes), what is left and why, atomic writes, and a CUDA
trainer that runs on this machine's CPU build of torch after the fix."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_ready.catalog import Catalog, CatalogError, load_catalog, load_text
from neuron_ready.fixes import CODEMODS
from neuron_ready.fixes import codemods
from neuron_ready.fixes.run import plan_file, write_file
from neuron_ready.sources import FileJob, ScanContext, scan_file

from cli import run_cli

ROOT = Path(__file__).resolve().parent.parent
CATALOG = load_catalog()
FIXABLE = [r for r in CATALOG if r.fix]
EXAMPLES = [pytest.param(r, i, id=f"{r.id}-{i}") for r in FIXABLE for i in range(len(r.fix_examples))]


def fix_text(tmp_path: Path, text: str, catalog: Catalog, unsafe: bool = True, name: str = "example.py"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    ctx = ScanContext(catalog, "native")
    return plan_file(FileJob(str(path), name, "python"), ctx, unsafe)


def scan_text(tmp_path: Path, text: str, catalog: Catalog, name: str = "rescan.py"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return scan_file(FileJob(str(path), name, "python"), ScanContext(catalog, "native")).findings


def test_the_catalog_names_only_codemods_that_exist():
    assert set(CODEMODS) == set(codemods.CODEMODS)
    assert {r.codemod for r in FIXABLE} == set(CODEMODS)  # every codemod is used by some rule
    # the mechanical categories are covered (issue 13: device, distributed, precision)
    assert {r.category for r in FIXABLE} == {"device", "distributed", "precision"}


@pytest.mark.parametrize("rule, i", EXAMPLES)
def test_fix_example(tmp_path, rule, i):
    before, after = rule.fix_examples[i]
    one = Catalog({rule.id: rule})
    first = fix_text(tmp_path, before, one)
    assert first.diagnostic is None
    assert first.after == after
    assert first.fixed, "a fix example must fix something"
    compile(first.after, "after.py", "exec")
    # fixing twice equals fixing once
    second = fix_text(tmp_path, after, one)
    assert second.after == after and not second.fixed
    # a re-scan reports only what was left
    assert len(scan_text(tmp_path, after, one)) == len(first.left)


def test_unsafe_fixes_apply_only_when_asked(tmp_path):
    rule = CATALOG.get("NR1013")
    before = rule.fix_examples[0][0]
    safe_only = fix_text(tmp_path, before, Catalog({rule.id: rule}), unsafe=False)
    assert safe_only.after == before and not safe_only.fixed
    assert all("--unsafe-fixes" in why for _, why in safe_only.left)


LEFT_ALONE = {
    "cuda branch": ('''
import torch
if torch.cuda.is_available():
    model = model.cuda()
    torch.cuda.synchronize()
else:
    model = model.cpu()
''', "under `if torch.cuda.is_available()`, which already has a non-CUDA branch"),
    "elif": ('''
import torch
if torch.backends.mps.is_available():
    dev = "mps"
elif torch.cuda.is_available():
    x = x.cuda()
''', "under `elif torch.cuda.is_available()`"),
    "conditional expression": ('''
import torch
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
''', "already has a non-CUDA branch"),
    "string building": ('''
import torch
x = x.to(f"cuda:{rank}")
''', "builds a string from 'cuda'"),
    "comparison": ('''
import torch as th
using_cuda = device.type == th.device("cuda").type
''', "compared (`device.type == th.device(\"cuda\").type`)"),
    "test about CUDA itself": ('''
import torch
if device == "cuda" and not torch.cuda.is_available():
    device = "cpu"
''', "the test asks about CUDA itself"),
    "argument of a CUDA call": ('''
import torch
props = torch.cuda.get_device_properties(torch.device("cuda"))
''', "an argument of a CUDA-only call (`torch.cuda.get_device_properties`)"),
    "extension wrapper": ('''
import torch
from torch.utils.cpp_extension import load
ext = load(name="fused", sources=["fused.cu"])
def fused(x):
    return ext.forward(x.cuda())
''', "inside a CUDA extension's Python wrapper"),
}


@pytest.mark.parametrize("source, reason", LEFT_ALONE.values(), ids=list(LEFT_ALONE))
def test_no_fix_where_the_result_would_be_wrong(tmp_path, source, reason):
    result = fix_text(tmp_path, source, CATALOG.select(select=["device"]))
    assert result.after == source and not result.fixed
    assert result.left and any(reason in why for _, why in result.left), result.left


def test_scan_counts_what_fix_resolves(tmp_path):
    """The scan's `fix` detail marks exactly the findings `fix` rewrites."""
    source = (ROOT / "fixtures/mainstream/train.py").read_text()
    findings = scan_text(tmp_path, source, CATALOG)
    marked = sorted((f.line, f.rule) for f in findings if f.details.get("fix") == "safe")
    fixed = sorted((f.line, f.rule) for f in fix_text(tmp_path, source, CATALOG, unsafe=False).fixed)
    assert marked == fixed and len(fixed) == 6
    unsafe = sorted((f.line, f.rule) for f in findings if f.details.get("fix") == "unsafe")
    assert unsafe == [(30, "NR1013"), (48, "NR1205")]


def test_cli_diff_then_fix_then_rescan(tmp_path):
    project = tmp_path / "proj"
    shutil.copytree(ROOT / "fixtures/mainstream", project)
    train = project / "train.py"
    original = train.read_bytes()
    train.chmod(0o754)
    diff = run_cli("fix", "--diff", str(project), cwd=tmp_path)
    assert diff.code == 1, diff.err
    assert "--- a/train.py" in diff.out and "+    if torch.accelerator.is_available():" in diff.out
    assert "Would fix 6 findings in 1 file; 4 left." in diff.err
    assert "train.py:34:5: NR1013 left: its fix is unsafe" in diff.err  # its line in the fixed file
    assert train.read_bytes() == original  # --diff writes nothing
    before = json.loads(run_cli("scan", str(project), "--format", "json", "--no-cache", cwd=tmp_path).out)
    # the cuDNN flag (NR1013) is listed as CUDA-only, not must-port, so one unsafe fix counts there
    assert before["summary"]["fixable"] == 6 and before["summary"]["fixable_unsafe"] == 1
    fixed = run_cli("fix", str(project), cwd=tmp_path)
    assert fixed.code == 0, fixed.err
    assert "Fixed 6 findings in 1 file; 4 left." in fixed.out
    assert stat.S_IMODE(train.stat().st_mode) == 0o754  # the original mode is kept
    assert not [p for p in project.iterdir() if p.name.endswith(".nr-fix")]  # no temporary file left
    again = run_cli("fix", "--diff", str(project), cwd=tmp_path)
    assert again.code == 0 and again.out == "", again.out  # nothing more to do
    after = json.loads(run_cli("scan", str(project), "--format", "json", "--no-cache", cwd=tmp_path).out)
    assert after["summary"]["fixable"] == 0
    assert after["summary"]["findings"] == before["summary"]["findings"] - 6
    unsafe = run_cli("fix", "--unsafe-fixes", str(project), cwd=tmp_path)
    assert "Fixed 2 findings in 1 file" in unsafe.out
    assert "cudnn" not in train.read_text()


def test_assume_fixed_costs_fixable_findings_as_done(tmp_path):
    plain = json.loads(run_cli("scan", str(ROOT / "fixtures/mainstream"), "--format", "json", "--no-cache", cwd=tmp_path).out)
    assumed = json.loads(run_cli("scan", str(ROOT / "fixtures/mainstream"), "--format", "json", "--no-cache",
                                 "--assume-fixed", cwd=tmp_path).out)
    assert assumed["summary"]["findings"] == plain["summary"]["findings"]
    assert assumed["summary"]["effort"]["person_days"]["likely"] < plain["summary"]["effort"]["person_days"]["likely"]


def test_renderers_say_how_many_findings_fix_resolves(tmp_path):
    target = str(ROOT / "fixtures/mainstream")
    line = "6 of these findings can be fixed automatically with"
    for fmt in ("text", "markdown", "html"):
        out = run_cli("scan", target, "--format", fmt, "--no-cache", cwd=tmp_path).out
        assert line in out and "(1 more with --unsafe-fixes)" in out, fmt


def test_rules_show_the_fix(tmp_path):
    table = run_cli("rules", cwd=tmp_path).out
    assert "FIX" in table.splitlines()[0]
    assert any(line.startswith("NR1001") and " safe " in line for line in table.splitlines())
    page = run_cli("rules", "NR1013", cwd=tmp_path).out
    assert "Fix (unsafe): `neuron-ready fix` with --unsafe-fixes" in page
    assert json.loads(run_cli("rules", "NR1001", "--format", "json", cwd=tmp_path).out)["fix"] == "safe"


def test_unparseable_and_changed_files_are_left_untouched(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    broken = project / "broken.py"
    broken.write_text("import torch\nx = torch.ones(2).cuda(\n")
    r = run_cli("fix", str(project), cwd=tmp_path)
    assert r.code == 0
    assert "broken.py:2: cannot parse" in r.err and "left untouched" in r.err
    assert broken.read_text() == "import torch\nx = torch.ones(2).cuda(\n"
    # a file that changes between reading and writing is not overwritten
    good = project / "good.py"
    good.write_text("import torch\nx = torch.ones(2).cuda()\n")
    plan = plan_file(FileJob(str(good), "good.py", "python"), ScanContext(CATALOG, "native"), False)
    assert plan.changed
    good.write_text("import torch\nx = torch.ones(3).cuda()\n")
    problem = write_file(plan)
    assert problem is not None and problem.kind == "changed"
    assert good.read_text() == "import torch\nx = torch.ones(3).cuda()\n"


def test_comments_and_formatting_are_kept(tmp_path):
    source = '''"""Doc."""
import torch  # the framework

# move the model
model = (
    model  # the network
    .cuda()  # to the GPU
)
torch.backends.cudnn.benchmark = True  # autotune convolutions
'''
    result = fix_text(tmp_path, source, CATALOG.select(select=["NR1001", "NR1013"]))
    assert result.after == '''"""Doc."""
import torch  # the framework

# The accelerator this module runs on (CUDA, Neuron, ...), else the CPU: set by `neuron-ready fix`.
DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")

# move the model
model = (
    model  # the network
    .to(DEVICE)  # to the GPU
)
# autotune convolutions
'''


def test_a_cuda_trainer_runs_on_the_cpu_after_fix(tmp_path):
    """The fixture fails on a CPU-only torch as written, and after `neuron-ready fix` prints the
    loss sequence of the same trainer written by hand for the CPU."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the trainer would run before the fix")
    fixture = ROOT / "fixtures/fix_training"
    work = tmp_path / "train"
    work.mkdir()
    shutil.copy(fixture / "train_cuda.py", work / "train_cuda.py")

    def run(path: Path) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env)

    before = run(work / "train_cuda.py")
    assert before.returncode != 0 and "CUDA" in before.stderr
    r = run_cli("fix", str(work), cwd=tmp_path)
    assert r.code == 0 and "Fixed 6 findings in 1 file; 2 left." in r.out, r.out + r.err
    after = run(work / "train_cuda.py")
    reference = run(fixture / "train_cpu.py")
    assert after.returncode == 0, after.stderr
    assert reference.returncode == 0, reference.stderr
    assert after.stdout == reference.stdout
    assert after.stdout.count("loss") == 6


BAD_FIX = [
    ('fix = "maybe"', "field 'fix': expected one of safe, unsafe, got 'maybe'"),
    ('fix = "safe"\ncodemod = "nope"', "field 'codemod': expected one of"),
    ('codemod = "to_device"', "field 'codemod': needs 'fix'"),
    ('fix = "safe"\ncodemod = "to_device"', "field 'fix_example': a rule with a fix needs at least one"),
]


@pytest.mark.parametrize("lines, expected", BAD_FIX)
def test_bad_fix_fields_name_file_rule_and_field(lines, expected):
    text = f'''[[rule]]
id = "NR1099"
title = "t"
category = "device"
targets = ["native"]
confidence = "high"
evidence = "doc"
effort = {{ low = 0.1, likely = 0.2, high = 0.3, per = "occurrence" }}
{lines}
why = "w"
remedy = "r"
source = "https://example.com"
invalid = ["import torch\\nx.cuda()  # flagged\\n"]
[[rule.match]]
kind = "method"
names = ["cuda"]
'''
    with pytest.raises(CatalogError) as e:
        load_text(text, "extra.toml")
    assert str(e.value).startswith("extra.toml: NR1099: ") and expected in str(e.value)


def test_a_cuda_test_is_rewritten_only_once_the_code_it_guards_is(tmp_path):
    """A device-agnostic test would let other accelerators into CUDA-only code, so it waits for
    the code it guards; fixes run until nothing changes (Ruff's convention), in one `fix`."""
    guarded = "import torch\nif torch.cuda.is_available():\n    name = torch.cuda.get_device_name(0)\n"
    left = fix_text(tmp_path, guarded, CATALOG.select(select=["device"]))
    assert left.after == guarded
    assert any("it guards CUDA-only code (`name = torch.cuda.get_device_name(0)`)" in why for _, why in left.left)
    source = "import torch\nif torch.cuda.is_available():  # a GPU\n    torch.cuda.synchronize()\n"
    result = fix_text(tmp_path, source, CATALOG.select(select=["device"]))
    assert result.after == ("import torch\nif torch.accelerator.is_available():  # a GPU\n"
                            "    torch.accelerator.synchronize()\n")
    assert len(result.fixed) == 2 and not result.left


def test_the_module_s_own_name_for_torch_is_used(tmp_path):
    source = "import torch as th\n\nx = th.ones(2).cuda()\nth.cuda.synchronize()\n"
    result = fix_text(tmp_path, source, CATALOG.select(select=["device"]))
    assert result.after == (
        "import torch as th\n\n"
        "# The accelerator this module runs on (CUDA, Neuron, ...), else the CPU: set by `neuron-ready fix`.\n"
        'DEVICE = th.accelerator.current_accelerator(check_available=True) or th.device("cpu")\n\n'
        "x = th.ones(2).to(DEVICE)\nif th.accelerator.is_available():\n    th.accelerator.synchronize()\n"
    )


def test_encoding_bom_and_line_endings_are_kept(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    path = project / "crlf.py"
    path.write_bytes(b"\xef\xbb\xbfimport torch\r\nx = torch.ones(2).cuda()  # caf\xc3\xa9\r\n")
    r = run_cli("fix", str(project), cwd=tmp_path)
    assert r.code == 0 and "Fixed 1 finding in 1 file" in r.out, r.out + r.err
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbfimport torch\r\n")
    assert b"x = torch.ones(2).to(DEVICE)  # caf\xc3\xa9\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")
