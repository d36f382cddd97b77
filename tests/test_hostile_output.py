"""Every renderer against a tree whose names and texts were written to attack the output: nothing
reaches a terminal raw, and no line can be read as a GitHub workflow command."""

from __future__ import annotations

import json
import os
import re

from cli import run_cli
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from test_markdown import hostile_tree

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _is_command(line: str) -> bool:
    return line.lstrip().startswith(("::", "##["))


def test_text_diff_html_and_sarif_keep_user_text_inert(tmp_path):
    hostile_tree(tmp_path / "head")
    # not a byte copy of the hostile-named file (copies are one port, copies.py): both must be findings
    (tmp_path / "head" / "::set-output name=x::y.py").write_text("import torch\ntorch.cuda.synchronize()  # y\n", encoding="utf-8")
    (tmp_path / "head" / "##[error]old-style.py").write_text("def broken(:\n", encoding="utf-8")
    outs = {}
    for fmt in ("text", "markdown", "html", "sarif", "json"):
        r = run_cli("scan", str(tmp_path / "head"), "--format", fmt, "--no-cache", "--color")
        assert r.code == 0, r.err
        outs[fmt] = r.out
    for fmt in ("text", "markdown", "html"):
        assert not [line for line in outs[fmt].splitlines() if _is_command(line)], fmt
        ours = re.sub(r"\x1b\]8;;[^\x1b]*\x1b\\", "", outs[fmt])  # our rule links (terminal hyperlinks)
        assert not CONTROL.search(ours.replace("\x1b[", "")), fmt  # only the --color escapes
    assert "\\n::error file=train.py" in outs["text"] and "\\x3a:set-output" in outs["text"]
    assert "<img" not in outs["html"] and "&lt;img" in outs["html"]
    sarif = json.loads(outs["sarif"])
    texts = [r["message"]["text"] for r in sarif["runs"][0]["results"]]
    assert texts and not any(CONTROL.search(t) for t in texts)
    # the JSON report keeps the real names: it is data, not display
    assert any("\n::error" in f["path"] for f in json.loads(outs["json"])["findings"])

    base = tmp_path / "base"
    base.mkdir()
    (tmp_path / "b.json").write_text(run_cli("scan", str(base), "--format", "json", "--no-cache").out)
    (tmp_path / "h.json").write_text(outs["json"])
    d = run_cli("diff", str(tmp_path / "b.json"), str(tmp_path / "h.json"))
    assert d.code == 0 and not [line for line in d.out.splitlines() if _is_command(line)]
    assert not CONTROL.search(d.out)


def test_a_file_name_that_is_not_utf8_is_scanned_and_reported_with_escapes(tmp_path):
    """Linux allows any bytes but `/` and NUL in a name; Python keeps the others as lone
    surrogates, which no output can encode (the scan used to stop with an internal error)."""
    raw = os.path.join(os.fsencode(tmp_path), b"d\xff", b"m\xc3(.py")
    os.makedirs(os.path.dirname(raw))
    with open(raw, "wb") as fh:
        fh.write(b"import torch\ntorch.cuda.synchronize()\n")
    with open(os.path.join(os.fsencode(tmp_path), b"bad\xfe.py"), "wb") as fh:
        fh.write(b"def broken(:\n")
    outs = {fmt: run_cli("scan", ".", "--format", fmt, "--no-cache", cwd=tmp_path) for fmt in ("json", "text", "sarif")}
    assert all(r.code == 0 and not r.err for r in outs.values()), {f: r.err for f, r in outs.items()}
    report = json.loads(outs["json"].out)
    assert [f["path"] for f in report["findings"] + report["off_path"]] == ["d\\xff/m\\xc3(.py"]
    assert [d["path"] for d in report["diagnostics"]] == ["bad\\xfe.py"]
    assert "d\\xff/m\\xc3(.py" in outs["text"].out
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in json.loads(outs["sarif"].out)["runs"][0]["results"]]
    assert uris == ["d%5Cxff/m%5Cxc3%28.py"]


def test_task_titles_chart_labels_and_markdown_references_found_by_the_property_test(tmp_path):
    """The gaps tests/test_hostile_properties.py found, each with the input that showed it."""
    from commonmark import to_html

    from neuron_ready.render import chart, markdown, text
    from neuron_ready.render.safe import code, plain

    # a task title embeds an extension name: the text report printed it raw (ESC, CR, U+202E)
    hostile_tree(tmp_path)
    (tmp_path / "setup.py").write_text("from torch.utils.cpp_extension import CUDAExtension\n"
                                       "ext = CUDAExtension('x\\x1b[2J\\u202e\\r::error::y', sources=['csrc/k.cu'])\n")
    report = run_scan(Settings(root=tmp_path, cache=False)).report
    assert any("\x1b[2J" in t.title for t in report.tasks)
    assert not CONTROL.search(text.render(report))
    # an instance name from the tree's config with `$` in it: matplotlib parsed it as math and raised
    series = {"runs": [0, 1, 2], "gpu": [0, 1, 2], "trainium_p50": [1, 1.5, 2], "trainium_p80": [2, 2.5, 3],
              "crossings": {"p50": None, "p80": None}}
    assert chart.png_base64(series, "p5 $\\frac{$ x", "trn $\\nosuchcommand$") is not None
    # our marker inside a code span: inert, but the body held the text a marker search finds
    assert "<!--" not in code("a<!-- neuron-ready-comment: neuron-ready -->b")
    # GitHub links `#123`, `GH-1` and bare URLs in text by itself (plain CommonMark does not)
    html = to_html(plain("see #123, GH-1, https://evil.example and www.evil.example"))
    assert not re.search(r"#\d|GH-\d|https?://|www\.", html), html
    assert markdown.inline("`#123` stays code") == "`#123` stays code"
