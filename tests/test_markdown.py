"""The PR-comment Markdown: what it says, what it escapes, and that it always fits in a comment."""

from __future__ import annotations

import json
import re

from cli import run_cli
from conftest import FIXTURES
from neuron_ready.baseline import diff_reports, report_from_dict
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from neuron_ready.render import json as json_fmt
from neuron_ready.render import markdown


def _report(name: str):
    return run_scan(Settings(root=FIXTURES / name)).report


def test_comment_body_has_the_estimate_drivers_and_findings():
    r = run_cli("scan", str(FIXTURES / "cuda_extension"), "--format", "markdown", "--isolated")
    assert r.code == 0, r.err
    body = r.out
    report = _report("cuda_extension")
    est = report.estimate
    assert f"**Readiness {est.score}/100** · effort **month-plus**" in body
    assert f"P50 **{est.p50:.1f}** / P80 **{est.p80:.1f}** person-days" in body
    assert "**Top drivers**\n\n1. Port CUDA extension `fusedops._C` (3 kernels, 2 ops, in 3 files)" in body
    assert body.count("<details>") == body.count("</details>") == 1
    rows = [line for line in body.splitlines() if line.startswith("| `")]
    assert len(rows) == len(report.findings) - report.sites()  # a site is named in its primary's row
    assert "| `csrc/scan_kernel.cu:6` | [NR1703](https://github.com/neuron-ready/neuron-ready/blob/main/docs/rules.md#nr1703) |" in body


def test_breakeven_line_when_configured():
    doc = json.loads(json_fmt.render(_report("mainstream")))
    assert "Break-even" not in markdown.render(report_from_dict(doc))
    doc["breakeven"] = {"summary": "Pays back after 3.1 runs (1.6 months) at P50"}
    assert "Pays back after 3.1 runs (1.6 months) at P50" in markdown.render(report_from_dict(doc))
    doc["breakeven"] = {"breakeven_runs": 3.14, "breakeven_months": 1.57, "verdict": "trainium"}
    assert "Break-even after 3.1 runs / 1.6 months · verdict: trainium" in markdown.render(report_from_dict(doc))
    doc["breakeven"] = {"breakeven_runs": None, "breakeven_months": None, "verdict": "gpu"}
    assert "never at these prices" in markdown.render(report_from_dict(doc))


def test_off_path_findings_are_counted():
    doc = json.loads(json_fmt.render(_report("mainstream")))
    assert "off the training path" not in markdown.render(report_from_dict(doc))
    doc["off_path"] = [dict(f, context="off-path", on_path=False) for f in doc["findings"][:2]]
    assert "2 findings off the training path" in markdown.render(report_from_dict(doc))


def test_untrusted_names_cannot_break_the_table_or_inject_html(tmp_path):
    root = tmp_path / "repo"
    (root / "k").mkdir(parents=True)
    evil = "a|b<img src=x>@octocat`x.cu"
    (root / "k" / evil).write_text("__global__ void k(float* x) { x[0] = 1; }\n", encoding="utf-8")
    # a build compiles it, so the kernel is on the training path and in the findings table
    (root / "setup.py").write_text("from torch.utils.cpp_extension import CUDAExtension\n"
                                   f"ext = CUDAExtension('k', [{'k/' + evil!r}])\n", encoding="utf-8")
    body = markdown.render(run_scan(Settings(root=root)).report)
    row = next(line for line in body.splitlines() if "NR1703" in line)
    cells = re.split(r"(?<!\\)\|", row)
    assert len(cells) == 6  # | loc | rule | finding | fix |: no pipe from the file name leaks out
    assert "<img" in row and "<img" not in re.sub(r"(`+)(.+?)\1", "", row)  # only inside code spans
    assert markdown.inline("see <img src=x> and @octocat") == "see &lt;img src=x&gt; and @\u200bocto" + "cat"
    assert markdown.inline("`<b>|` then <b>") == "`<b>\\|` then &lt;b&gt;"
    assert markdown.code("a`b") == "``a`b``"


def test_long_bodies_are_truncated_with_a_note(tmp_path):
    root = tmp_path / "big"
    root.mkdir()
    lines = ["import torch"] + [f"t{i} = torch.zeros({i}).cuda()" for i in range(2500)]
    (root / "train.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = run_scan(Settings(root=root)).report
    assert len(report.findings) == 2500
    body = markdown.render(report)
    assert len(body) <= markdown.LIMIT
    assert re.search(r"_… and \d+ more not shown: this comment stays under 65,000 characters", body)
    assert body.count("<details>") == body.count("</details>")
    assert body.rstrip().endswith("</sub>")  # the footer survives

    empty = run_scan(Settings(root=tmp_path / "none_here", files=[])).report
    d = markdown.render_diff(diff_reports(empty, report))
    assert len(d) <= markdown.LIMIT
    added = d[d.index("<summary>Added (2500)</summary>"):]
    added = added[: added.index("</details>")]
    assert added.count("| `train.py:") > 100 and "more not shown" in added


def test_diff_body_compares_base_and_head():
    base, head = _report("mainstream"), _report("cuda_extension")
    body = markdown.render_diff(diff_reports(base, head))
    assert "| Readiness |" in body and "| Effort class | days | **month-plus** | ▲ 2 classes more work |" in body
    assert f"**This change adds {len(head.findings)} findings and removes {len(base.findings)}.**" in body
    same = markdown.render_diff(diff_reports(head, head))
    assert "**This change adds and removes no findings.**" in same and "Added (" not in same


HOSTILE_NAME = ("a\n::error file=train.py,line=1,title=Injected::PWNED\n\n# Injected heading\n\n<img src=x.png> @octocat"
                "\n\n<!-- neuron-ready-comment: other -->\n.py")
HOSTILE_EXT = "x` \\`<img src=https://evil.example/y.png> @octocat\\`"


def hostile_tree(root):
    """File names with newlines and a lone CR, and an extension name that escapes a backtick."""
    (root / "csrc").mkdir(parents=True)
    (root / HOSTILE_NAME).write_text("import torch\ntorch.cuda.synchronize()\n", encoding="utf-8")
    (root / "b\r::warning::CR.py").write_text("import torch\nx = torch.zeros(1).cuda()\n", encoding="utf-8")
    (root / "setup.py").write_text("from torch.utils.cpp_extension import CUDAExtension\n"
                                   f"ext = CUDAExtension({HOSTILE_EXT!r}, sources=['csrc/k.cu'])\n", encoding="utf-8")
    (root / "csrc" / "k.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n", encoding="utf-8")
    (root / "bad\n<h1>x<\\h1>.py").write_text("def broken(:\n", encoding="utf-8")  # a diagnostic


def test_user_text_never_becomes_markup_in_any_markdown_body(tmp_path):
    """Rendered the way GitHub reads it (CommonMark + tables): no tag, heading, mention or marker
    comes from a path, an extension name, a message or a diagnostic; no line is a workflow command."""
    from commonmark import live_markup, to_html

    hostile_tree(tmp_path / "head")
    (tmp_path / "base").mkdir()
    head = run_scan(Settings(root=tmp_path / "head")).report
    base = run_scan(Settings(root=tmp_path / "base")).report
    assert len(head.findings) >= 4 and head.diagnostics
    diff = diff_reports(base, head)
    for body in (markdown.render(head), markdown.render_diff(diff), markdown.render_diff(diff, head.diagnostics)):
        html = to_html(body)
        assert live_markup(html) == [], body
        assert "PWNED" in html and "Injected heading" in html  # shown, as text
        assert not any(line.lstrip().startswith(("::", "##[")) for line in body.splitlines())
        assert body.count("\n| ") >= 4  # every row stayed a row


def test_inline_handles_backslash_escapes_and_control_characters():
    from commonmark import live_markup, to_html

    for text in [HOSTILE_EXT, "`ok` \\`<b>x</b>\\` `code`", "\\\\`<img src=x>`", "a\rb\u2028c\x1b[31m",
                 "![img](https://evil.example/p.png) [link](https://evil.example) <!-- neuron-ready-comment: t -->",
                 "`` ` `` <script>x</script> | pipe", "```unclosed <img src=x> @octocat"]:
        out = markdown.inline(text)
        assert "\n" not in out and "\r" not in out and "\x1b" not in out
        assert live_markup(to_html(f"| a |\n|---|\n| {out} |\n")) == [], out
        assert "<table>" in to_html(f"| a |\n|---|\n| {out} |\n") and to_html(f"| a |\n|---|\n| {out} |\n").count("<td>") == 1
    assert markdown.inline("run `torch.cuda.synchronize()` less") == "run `torch.cuda.synchronize()` less"
