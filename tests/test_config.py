"""[tool.neuron-ready]: what it controls, and one-line errors with file and line (exit 2)."""

from __future__ import annotations

import json

import pytest

from cli import run_cli


def _repo(tmp_path, pyproject: str, code: str = "import torch\nx = torch.ones(1).cuda()\n"):
    (tmp_path / "pyproject.toml").write_text(pyproject)
    (tmp_path / "train.py").write_text(code)
    return tmp_path


@pytest.mark.parametrize(
    "body,line,needle",
    [
        ('[tool.neuron-ready]\nselct = ["NR10"]\n', 2, "unknown key 'selct' (did you mean 'select'?)"),
        ('[tool.neuron-ready]\ntarget = "tpu"\n', 2, "target: expected one of native, xla"),
        ('[project]\nname = "x"\n\n[tool.neuron-ready]\nignore = ["NRX1"]\n', 5, "ignore: 'NRX1' is not a rule id"),
        ('[tool.neuron-ready]\nmax-file-size = "lots"\n', 2, "max-file-size: expected a size"),
        ('[tool.neuron-ready]\nfail-on = ["soon"]\n', 2, "fail-on: 'soon' is not an effort class"),
        ('[tool.neuron-ready]\nextra-catalogs = ["missing.toml"]\n', 2, "extra-catalogs: no such file"),
        ('[tool.neuron-ready]\nselect = "NR10"\n\n[tool.neuron-ready.per-path-ignores]\n"tests/**" = ["bogus"]\n', 4, "is not a rule id"),
        ('[tool.neuron-ready]\n[tool.neuron-ready.workload]\ngpu-prize = 3\n', 2, "workload: unknown key 'gpu-prize' (did you mean 'gpu-price'?)"),
        ('[tool.neuron-ready]\ntarget = \n', 2, "invalid TOML"),
    ],
)
def test_bad_config_is_one_line_with_file_and_line(tmp_path, body, line, needle):
    repo = _repo(tmp_path, body)
    r = run_cli("scan", str(repo))
    assert r.code == 2, r
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert "Traceback" not in r.err
    assert f"pyproject.toml:{line}:" in lines[0], lines[0]
    assert needle in lines[0], lines[0]


def test_invalid_extra_catalog_names_file_rule_and_field(tmp_path):
    (tmp_path / "mine.toml").write_text('[[rule]]\nid = "NR1098"\ncategory = "device"\n')
    repo = _repo(tmp_path, '[tool.neuron-ready]\nextra-catalogs = ["mine.toml"]\n')
    r = run_cli("scan", str(repo))
    assert r.code == 2
    assert "mine.toml: NR1098: field 'targets': is required" in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_config_selects_targets_and_ignores_paths(tmp_path):
    repo = _repo(
        tmp_path,
        '[tool.neuron-ready]\ntarget = "xla"\nignore = ["NR1005"]\nexclude = ["vendor/"]\n'
        '[tool.neuron-ready.per-path-ignores]\n"scripts/*.py" = ["device"]\n',
        "import torch\nx = torch.ones(1).cuda()\nif torch.cuda.is_available():\n    pass\n",
    )
    (repo / "vendor").mkdir()
    (repo / "vendor" / "v.py").write_text("import torch\nx.cuda()\n")
    (repo / "scripts").mkdir()
    (repo / "scripts" / "s.py").write_text("import torch\nx.cuda()\n")
    report = json.loads(run_cli("scan", str(repo), "--format", "json").out)
    assert report["target"] == "xla"
    assert [(f["path"], f["rule"]) for f in report["findings"]] == [("train.py", "NR1001")]
    assert report["summary"]["suppressed"] == 1


def test_flags_override_config_and_isolated_ignores_it(tmp_path):
    repo = _repo(tmp_path, '[tool.neuron-ready]\nselect = ["precision"]\n')
    assert json.loads(run_cli("scan", str(repo), "--format", "json").out)["findings"] == []
    r = json.loads(run_cli("scan", str(repo), "--format", "json", "--select", "NR10").out)
    assert [f["rule"] for f in r["findings"]] == ["NR1001"]
    r = json.loads(run_cli("scan", str(repo), "--format", "json", "--isolated").out)
    assert [f["rule"] for f in r["findings"]] == ["NR1001"]


def test_standalone_config_file(tmp_path):
    (tmp_path / "neuron-ready.toml").write_text('ignore = ["device"]\n')
    (tmp_path / "train.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    r = json.loads(run_cli("scan", str(tmp_path), "--format", "json").out)
    assert r["findings"] == []
    (tmp_path / "neuron-ready.toml").write_text('ignoer = ["device"]\n')
    r = run_cli("scan", str(tmp_path))
    assert r.code == 2 and "neuron-ready.toml:1: unknown key 'ignoer'" in r.err


def test_extra_catalog_adds_user_rules(tmp_path):
    (tmp_path / "team.toml").write_text(
        '[[rule]]\nid = "NR1097"\ntitle = "our wrapper pins CUDA"\ncategory = "device"\ntargets = ["native"]\n'
        'confidence = "high"\nevidence = "derived"\neffort = { low = 0.1, likely = 0.2, high = 0.5, per = "occurrence" }\n'
        'why = "w"\nremedy = "r"\nsource = "https://example.com/wiki"\ninvalid = ["import ourlib\\nourlib.pin_gpu()  # flagged\\n"]\n'
        '[[rule.match]]\nkind = "call"\nnames = ["ourlib.pin_gpu"]\n'
    )
    repo = _repo(tmp_path, '[tool.neuron-ready]\nextra-catalogs = ["team.toml"]\n', "import ourlib\nourlib.pin_gpu()\n")
    r = json.loads(run_cli("scan", str(repo), "--format", "json").out)
    assert [f["rule"] for f in r["findings"]] == ["NR1097"]


def test_a_catastrophic_regex_in_a_repository_catalog_costs_one_file(tmp_path):
    """A repository's own catalog may hold a backtracking regex; with `jobs = 1` in the same
    configuration it would once have run in-process without a timeout. It runs in a worker, under
    the per-file limit: that file becomes a diagnostic, the others are scanned."""
    (tmp_path / "team.toml").write_text(
        '[[rule]]\nid = "NR1796"\ntitle = "slow"\ncategory = "custom-cuda"\ntargets = ["native"]\n'
        'confidence = "high"\nevidence = "derived"\neffort = { low = 0.1, likely = 0.2, high = 0.5, per = "occurrence" }\n'
        'why = "w"\nremedy = "r"\nsource = "https://example.com/wiki"\ninvalid = ["aab\\n"]\n'
        '[[rule.match]]\nkind = "native"\nfiles = ["*.cu"]\nregex = [\'^(a|aa)+$\']\n'
    )
    repo = _repo(tmp_path, '[tool.neuron-ready]\nextra-catalogs = ["team.toml"]\njobs = 1\n',
                 "import torch\nx = torch.ones(1).cuda()\n")
    (repo / "slow.cu").write_text("a" * 60 + "b\n")
    r = run_cli("scan", str(repo), "--format", "json", "--no-cache", env={"NEURON_READY_FILE_TIMEOUT": "3"}, timeout=300)
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert [f["rule"] for f in report["findings"]] == ["NR1001"]
    assert [(d["path"], d["kind"]) for d in report["diagnostics"]] == [("slow.cu", "too-complex")]
