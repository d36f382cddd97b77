"""A green result must mean something: no all-clear without analysis, every selector checked, one
rule for numbers, break-even verdicts that say what they do not know, reports a reader can act on."""

from __future__ import annotations

import json
import sys
import tomllib
from importlib import metadata

import pytest

from cli import run_cli
from conftest import FIXTURES, REPO
from neuron_ready.baseline import diff_reports, report_from_dict
from neuron_ready.effort import op_name
from neuron_ready.model import Finding
from neuron_ready.numbers import money, pd, plural, size
from neuron_ready.render import common, diff as diff_fmt, html, json as json_fmt, markdown, text

MAINSTREAM = str(FIXTURES / "mainstream")


# ------------------------------------------------------------------------------- 1. no all-clear


@pytest.fixture
def nothing(tmp_path):
    """Folders a scan finds no code in: empty, data only, and one whose only file is too large."""
    (tmp_path / "empty").mkdir()
    data = tmp_path / "data"
    data.mkdir()
    (data / "table.csv").write_text("a,b\n1,2\n")
    (data / "README.md").write_text("# data\n")
    big = tmp_path / "big"
    big.mkdir()
    (big / "train.py").write_text("import torch\nx = torch.ones(2).cuda()\n" + "# pad\n" * 400)
    return tmp_path


@pytest.mark.parametrize("target,extra", [
    ("empty", []), ("data", []), ("/dev/null", []), ("big", ["--max-file-size", "1KiB"]),
])
def test_no_analysis_has_no_score_and_fails_the_gate(nothing, target, extra):
    path = target if target.startswith("/") else str(nothing / target)
    doc = json.loads(run_cli("scan", path, "--format", "json", "--isolated", *extra).out)
    assert doc["summary"]["score"] is None and doc["summary"]["files_analysed"] == 0
    r = run_cli("scan", path, "--isolated", *extra)
    assert r.code == 0 and "Nothing analysed" in r.out and "Readiness" not in r.out
    gated = run_cli("scan", path, "--isolated", "--fail-on", "any", *extra)
    assert gated.code == 2 and "nothing was analysed" in gated.err and "Traceback" not in gated.err
    assert "Nothing analysed" in gated.out  # the report is still written


def test_a_scan_that_analysed_code_has_a_score():
    doc = json.loads(run_cli("scan", MAINSTREAM, "--format", "json", "--isolated").out)
    assert doc["summary"]["files_analysed"] >= 1 and isinstance(doc["summary"]["score"], int)


def test_no_analysis_in_markdown_html_and_diff(nothing, tmp_path):
    r = run_cli("scan", str(nothing / "empty"), "--format", "json", "--isolated", "-o", str(tmp_path / "e.json"))
    assert r.code == 0, r.err
    report = report_from_dict(json.loads((tmp_path / "e.json").read_text()))
    assert report.estimate.score is None and not report.analysed
    assert "Nothing analysed" in markdown.render(report) and "No findings: nothing here" not in markdown.render(report)
    assert "Nothing analysed" in html.render(report) and "n/a" in html.render(report)
    d = run_cli("diff", str(tmp_path / "e.json"), str(tmp_path / "e.json"), "--fail-on", "any")
    assert d.code == 2 and "Readiness n/a -> n/a" in d.out


def test_a_trace_whose_forward_raised_exits_2_with_one_line():
    r = run_cli("trace", "fixtures/trace_models/transformer_block.py:build", "--inputs", "input_ids:int64[2,128]",
                "--no-graph-breaks", cwd=REPO)
    assert r.code == 2, (r.out, r.err)
    assert "supported" not in r.out and r.out == ""
    (line,) = r.err.strip().splitlines()
    assert "forward raised TypeError" in line and "labels" in line


def test_an_error_inside_forward_names_the_users_line(tmp_path):
    (tmp_path / "bad.py").write_text(
        "import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return {'a': x}['b']\n\n\ndef build():\n    return M(), (torch.ones(2),)\n")
    r = run_cli("trace", "bad.py:build", "--no-graph-breaks", "--isolated", cwd=tmp_path)
    assert r.code == 2 and "Traceback" not in r.err
    assert "KeyError" in r.err and "bad.py:6" in r.err and "in forward" in r.err


# ------------------------------------------------------------------------------- 2. selectors


@pytest.mark.parametrize("args,needle", [
    (["--select", "NR1099"], "select: 'NR1099' matches no rule in the catalog (did you mean NR10"),
    (["--ignore", "NR99"], "ignore: 'NR99' matches no rule"),
    (["--fail-on", "NR99"], "fail-on: 'NR99' matches no rule"),
    (["--select", "devise"], "(did you mean device?)"),
    (["--fail-on", "week"], "(did you mean weeks?)"),
])
def test_unknown_selectors_are_one_line_and_exit_2(args, needle):
    r = run_cli("scan", MAINSTREAM, "--isolated", *args)
    assert r.code == 2 and needle in r.err and "Traceback" not in r.err, r.err


def test_unknown_selector_in_per_path_ignores(tmp_path):
    (tmp_path / "neuron-ready.toml").write_text('[per-path-ignores]\n"tests/*" = ["NR1099"]\n')
    (tmp_path / "t.py").write_text("import torch\n")
    r = run_cli("scan", ".", cwd=tmp_path)
    assert r.code == 2 and "per-path-ignores 'tests/*': 'NR1099' matches no rule" in r.err


def test_a_suppression_naming_no_rule_warns(tmp_path):
    (tmp_path / "t.py").write_text("import torch\nx = torch.ones(2).cuda()  # neuron-ready: ignore[NR1099]\n"
                                   "y = torch.ones(2).cuda()  # neuron-ready: ignore[device]\n")
    for _ in range(2):  # the second run reads the cache: the warning stays
        r = run_cli("scan", ".", "--isolated", cwd=tmp_path)
        assert r.code == 0
        assert r.err.strip().splitlines() == [
            "neuron-ready: warning: t.py:2: suppression 'NR1099' matches no rule in the catalog (did you mean NR1030?); "
            "`neuron-ready rules` lists them"]


def test_per_path_ignores_glob_is_checked(tmp_path):
    (tmp_path / "neuron-ready.toml").write_text('[per-path-ignores]\n"**/[z-a]" = ["NR10"]\n')
    (tmp_path / "t.py").write_text("import torch\n")
    r = run_cli("scan", ".", cwd=tmp_path)
    assert r.code == 2 and "neuron-ready.toml:1: per-path-ignores: '**/[z-a]' is not a valid" in r.err, r.err


def test_rules_with_a_prefix_lists_its_rules():
    r = run_cli("rules", "NR17")
    assert r.code == 0
    ids = [line.split()[0] for line in r.out.splitlines() if line.startswith("NR")]
    assert ids and all(i.startswith("NR17") for i in ids)
    assert run_cli("rules", "NR1001").out.startswith("NR1001: ")
    bad = run_cli("rules", "NR9999")
    assert bad.code == 2 and "NR9999" in bad.err


def test_fail_on_days_means_any_port_work(tmp_path):
    (tmp_path / "clean.py").write_text("import torch\nx = torch.ones(2)\n")
    assert run_cli("scan", str(tmp_path), "--isolated", "--fail-on", "days").code == 0
    assert run_cli("scan", MAINSTREAM, "--isolated", "--fail-on", "days").code == 1


# ------------------------------------------------------------------------------- 3. user input


@pytest.mark.parametrize("args,needle", [
    (["scan", ".", "--exclude", "**/[z-a]"], "--exclude: '**/[z-a]' is not a valid gitignore-style pattern"),
    (["comment", "-", "--repo", "a/b", "--pr", "1", "--api-url", "localhost:80"], "is not an http(s) URL"),
    (["ci", "--api-url", "https://"], "is not an http(s) URL"),
    (["scan", ".", "--max-file-size", "0"], "expected a size above 0"),
])
def test_bad_values_are_usage_errors(tmp_path, args, needle):
    r = run_cli(*args, cwd=tmp_path, env={"GITHUB_TOKEN": "t"})
    assert r.code == 2 and needle in r.err and "internal error" not in r.err, r.err


def test_exclude_in_the_config_is_checked(tmp_path):
    (tmp_path / "neuron-ready.toml").write_text('exclude = ["**/[z-a]"]\n')
    r = run_cli("scan", ".", cwd=tmp_path)
    assert r.code == 2 and "neuron-ready.toml:1: exclude: '**/[z-a]' is not a valid" in r.err


# ------------------------------------------------------------------------------- 4. numbers


def test_one_rounding_rule_for_every_renderer():
    doc = json.loads(run_cli("scan", MAINSTREAM, "--format", "json", "--isolated").out)
    doc["summary"]["effort"]["p50"] = 3.2502  # the JSON stores 3.25: both print 3.3
    report = report_from_dict(doc)
    stored = report_from_dict(json.loads(json_fmt.render(report)))
    assert stored.estimate.p50 == 3.25
    assert "P50 3.3 " in text.render(report) and "P50 **3.3**" in markdown.render(report)
    assert "3.3 / " in html.render(report)
    assert "P50 3.3 -> 3.3" in diff_fmt.text(diff_reports(stored, stored))
    assert "| P50 person-days | 3.3 | 3.3 |" in markdown.render_diff(diff_reports(stored, stored))


def test_money_plurals_and_sizes():
    assert money(-100) == "-$100" and money(-99.5) == "-$99.50" and money(1234.5) == "$1,234" and money(0.004) == "$0.00"
    assert plural(1, "file") == "1 file" and plural(2, "class", "classes") == "2 classes"
    assert size(2 * 1024 * 1024) == "2 MiB" and size(1024) == "1 KiB" and size(1500) == "1,500 bytes"
    assert pd(0.05) == "0.1" and pd(0.049) == "0.1" and pd(0.044) == "0.0"


def test_size_diagnostic_reads_in_the_unit_given(tmp_path):
    (tmp_path / "big.py").write_text("import torch\n" + "# pad\n" * 400)
    (tmp_path / "ok.py").write_text("import torch\n")
    doc = json.loads(run_cli("scan", str(tmp_path), "--format", "json", "--isolated", "--max-file-size", "1KiB").out)
    (diag,) = doc["diagnostics"]
    assert diag["message"].startswith("larger than the 1 KiB limit")


def test_one_file_is_singular(tmp_path):
    (tmp_path / "t.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    out = run_cli("scan", str(tmp_path), "--isolated").out
    assert "1 finding in 1 file " in out and "1 file scanned" in out


def test_counts_in_rule_messages_agree_with_their_noun():
    doc = json.loads(run_cli("scan", str(FIXTURES / "cuda_extension"), "--format", "json", "--isolated").out)
    messages = {f["path"]: f["message"] for f in doc["findings"] + doc["off_path"] if f["rule"] == "NR1703"}
    assert messages["csrc/scan_kernel.cu"].endswith("(2 `__global__` kernels)")
    assert messages["csrc/scan_backward.cu"].endswith("(1 `__global__` kernel)")


# ------------------------------------------------------------------------------- 5. break-even

BE = ["--person-days", "10", "--gpu-instance", "p5.48xlarge", "--gpu-hours-per-run", "100", "--relative-throughput", "0.8"]


def test_without_runs_per_month_there_is_no_trainium_verdict():
    r = run_cli("breakeven", *BE, "--trainium-instance", "trn1.32xlarge", "--isolated")
    assert r.code == 0, r.err
    verdict = next(line for line in r.out.splitlines() if line.startswith("Verdict:"))
    assert "trainium" not in verdict and "pays back after 4.3 runs at P50" in verdict
    doc = json.loads(run_cli("breakeven", *BE, "--trainium-instance", "trn1.32xlarge", "--format", "json").out)
    assert doc["verdict"] is None and doc["verdict_text"] == "pays back after 4.3 runs"


def test_more_runs_than_the_horizon_allows_is_gpu_at_any_run_rate():
    # 4.3 runs to pay back; a 1-month horizon at 1, 2 or 4 runs a month allows fewer
    for rate in ("1", "2", "4"):
        doc = json.loads(run_cli("breakeven", *BE, "--trainium-instance", "trn1.32xlarge", "--runs-per-month", rate,
                                 "--horizon-months", "1", "--format", "json").out)
        assert doc["breakeven_months"] > 1 and doc["verdict"] == "gpu" and doc["p80"]["verdict"] == "gpu"
    doc = json.loads(run_cli("breakeven", *BE, "--trainium-instance", "trn1.32xlarge", "--runs-per-month", "5",
                             "--horizon-months", "1", "--format", "json").out)
    assert doc["verdict"] == "trainium"


def test_trn1_with_the_native_target_warns(tmp_path):
    for target, warned in (("native", True), ("xla", False)):
        report = tmp_path / f"{target}.json"
        run_cli("scan", MAINSTREAM, "--isolated", "--target", target, "--format", "json", "-o", str(report))
        r = run_cli("breakeven", "--report", str(report), *BE[2:], "--trainium-instance", "trn1.32xlarge")
        assert r.code == 0
        assert ("trn1.32xlarge is a Trn1 instance" in r.err) is warned, r.err
        assert len(r.err.splitlines()) == int(warned)


def test_every_price_shows_currency_and_region():
    r = run_cli("breakeven", *BE, "--trainium-price", "20", "--isolated")
    prices = r.out.split("Prices")[1]
    assert "(USD; catalog prices are us-east-1)" in prices
    assert "p5.48xlarge on-demand 55.04 USD/h in us-east-1" in prices and "--trainium-price 20 USD/h" in prices
    assert "$55.04/h x 1 x 100 h" in r.out


def test_list_instances_prints_the_catalog_with_sources_and_dates():
    from neuron_ready.pricing import load_pricing

    r = run_cli("breakeven", "--list-instances")
    assert r.code == 0 and r.out.startswith("Pricing catalog: USD per instance-hour, Linux, us-east-1")
    for name, inst in load_pricing().items():
        assert f"{name} ({inst.family})" in r.out
        for p in inst.prices.values():
            assert f"{p.date}  {p.source}" in r.out


# ------------------------------------------------------------------------------- 6. trace reports


@pytest.fixture(scope="module")
def traced_report():
    r = run_cli("trace", "fixtures/trace_models/masking.py:build", "--no-graph-breaks", "--format", "json", cwd=REPO)
    assert r.code == 0, r.err
    return report_from_dict(json.loads(r.out))


def test_trace_summary_in_markdown_and_html(traced_report):
    ops = traced_report.extra["trace"]["ops"]
    needle = f"{ops['calls']:,} aten calls"
    md, page = markdown.render(traced_report), html.render(traced_report)
    for body in (md, page):
        assert needle in body and f"{ops['support_percentage']:g}% supported" in body and "graph breaks:" in body
    assert "**Trace**" in md and "<h2>Trace</h2>" in page


def test_trace_text_does_not_suggest_entry(traced_report):
    assert "--entry" not in text.render(traced_report)


def test_task_titles_name_the_op_not_the_overload():
    f = Finding("NR1601", "unsupported-op", "m.py", 1, 1, "", "", symbol="aten::scatter_reduce.two")
    assert op_name(f) == "scatter_reduce"
    assert op_name(Finding("NR1601", "unsupported-op", "m.py", 1, 1, "", "", symbol="torch.fft.rfft")) == "rfft"


# ------------------------------------------------------------------------------- 7. terminal


@pytest.mark.parametrize("args,env,coloured", [
    (["--color"], {}, True), ([], {}, False), ([], {"FORCE_COLOR": "1"}, True),
    ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False), (["--color"], {"NO_COLOR": "1"}, True),
    (["--no-color"], {"FORCE_COLOR": "1"}, False),
])
def test_colour_conventions(args, env, coloured):
    r = run_cli("scan", MAINSTREAM, "--isolated", *args, env={"NO_COLOR": "", "FORCE_COLOR": "", **env})
    assert ("\x1b[" in r.out) is coloured


def test_output_into_a_missing_folder_is_documented():
    help_text = run_cli("scan", "--help").out
    assert "missing folders are created" in " ".join(help_text.split())
    assert "missing folders are created" in (REPO / "docs" / "commands.md").read_text()


# ------------------------------------------------------------------------------- 8. reports


def test_statistics_counts_per_rule():
    doc = json.loads(run_cli("scan", MAINSTREAM, "--format", "json", "--isolated").out)
    r = run_cli("scan", MAINSTREAM, "--isolated", "--statistics")
    counts = {}
    for f in doc["findings"]:
        counts[f["rule"]] = counts.get(f["rule"], 0) + 1
    for rule, n in counts.items():
        assert any(line.split()[:2] == [str(n), rule] for line in r.out.splitlines()), rule
    assert "fix:" not in r.out  # counts instead of the listing


def test_text_lists_every_task_explains_the_numbers_and_links_the_docs():
    doc = json.loads(run_cli("scan", str(FIXTURES / "cuda_extension"), "--format", "json", "--isolated").out)
    out = run_cli("scan", str(FIXTURES / "cuda_extension"), "--isolated").out
    assert len(doc["tasks"]) > 3
    for t in doc["tasks"]:
        assert t["title"] in out
    assert common.MEANING in out and common.EFFORT_DOCS in out
    linked = run_cli("scan", str(FIXTURES / "cuda_extension"), "--isolated", "--color").out
    assert f"\x1b]8;;{common.rule_url('NR1703')}\x1b\\" in linked


def test_confidence_is_shown_and_min_confidence_hides_without_changing_the_estimate():
    doc = json.loads(run_cli("scan", MAINSTREAM, "--format", "json", "--isolated").out)
    low = [f for f in doc["findings"] if f["confidence"] != "high"]
    assert low, "the fixture has findings below high confidence"
    out = run_cli("scan", MAINSTREAM, "--isolated").out
    assert f"({low[0]['confidence']} confidence)" in out
    hidden = run_cli("scan", MAINSTREAM, "--isolated", "--min-confidence", "high").out
    assert "confidence)" not in hidden and f"{len(low)} findings below high confidence not shown" in hidden
    summary = [line for line in out.splitlines() if line.startswith("Readiness")]
    assert summary == [line for line in hidden.splitlines() if line.startswith("Readiness")]
    same = json.loads(run_cli("scan", MAINSTREAM, "--format", "json", "--isolated", "--min-confidence", "high").out)
    assert same == doc


def test_pr_comment_has_remedies_and_rule_links():
    body = run_cli("scan", MAINSTREAM, "--format", "markdown", "--isolated").out
    assert "| Location | Rule | Finding | Fix |" in body
    assert f"[NR1001]({common.rule_url('NR1001')})" in body and "`.to(device)`" in body
    assert common.EFFORT_DOCS in body


def test_project_urls_in_the_package_metadata():
    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Rules"] == f"{common.DOCS_URL}/rules.md" and urls["Effort model"] == common.EFFORT_DOCS
    installed = metadata.metadata("neuron-ready").get_all("Project-URL") or []
    assert f"Rules, {common.DOCS_URL}/rules.md" in installed


def test_html_wraps_long_lines_and_has_the_sensitivity_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.neuron-ready.workload]\ngpu-instance = 'p5.48xlarge'\ntrainium-price = 20\n"
        "gpu-hours-per-run = 100\nruns-per-month = 4\n")
    (tmp_path / ("a" * 200 + ".py")).write_text("import torch\nx = torch.ones(2).cuda()\n")
    page = run_cli("scan", ".", "--format", "html", cwd=tmp_path).out
    assert "overflow-wrap:anywhere" in page and "white-space:pre-wrap" in page
    assert "Sensitivity: break-even months at P50" in page
    assert "<th>Relative throughput \\ runs per month</th>" in page


def test_commands_page_documents_exit_codes_statistics_min_confidence_and_no_analysis():
    page = (REPO / "docs" / "commands.md").read_text()
    for needle in ("## Exit codes", "--statistics", "--min-confidence", "Nothing analysed", "NO_COLOR",
                   "FORCE_COLOR", "--list-instances"):
        assert needle in page, needle


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
