"""Property: whatever a pull request names its files, directories, kernels and extensions, whatever
string literals its gates compare with, whatever its README launches and its config says, every
renderer shows that text inert. Small trees built from hostile atoms (markup, code fences, links to
javascript:, mentions, issue references, line breaks, terminal escapes, bidi controls, very long
names, file names that are not UTF-8) are scanned for real, then each output is checked the way its
reader would read it: the HTML parsed, the Markdown rendered as GitHub does, the SARIF validated."""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import warnings
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli import run_cli
from commonmark import live_markup, to_html
from neuron_ready.baseline import diff_reports
from neuron_ready.config import Settings, load_settings
from neuron_ready.engine import run_scan
from neuron_ready.github import comment_body, is_ours, marker, valid_at_of
from neuron_ready.model import Report
from neuron_ready.render import markdown, render
from neuron_ready.render.breakeven import render_text as breakeven_text
from test_sarif import sarif_validator

ATOMS = [
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", '"><svg onload=alert(1)>', "' onmouseover='x",
    "[x](javascript:alert(1))", "](javascript:alert(1))", "![i](https://evil.example/p.png)", "<https://evil.example>",
    "`", "``", "```", "~~~", "@octocat", "@org/team", "#123", "GH-1", "org/repo#7", "https://evil.example/x", "www.evil.example", "\n", "\r", "\r\n", "\x1b[31m", "\x1b[2J",
    "\x1b]8;;https://evil.example\x1b\\", "\x9b31m", "\u202e", "\u2066", "\u2028", "\x07", "\x08", "\x7f",
    "::error::pwned", "##[error]pwned", "<!-- neuron-ready-comment: neuron-ready -->", "-->", "|", "**", "__",
    "&amp;", "&#x3c;", "\\", "$", "${{ secrets.X }}", "# heading", "\t",
]
# Text without NUL (no file name or source can hold it) and without lone surrogates (no text can).
SAFE_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
hostile = st.lists(st.one_of(st.sampled_from(ATOMS), st.text(SAFE_CHARS, max_size=4)), min_size=1, max_size=5).map("".join)
long_name = st.integers(100, 180).map(lambda n: "n" * n)
# C identifiers the kernel scanner reads; `__x__` is Markdown emphasis
kernel_name = st.sampled_from(["__bold__", "_x_", "k", "scale__init__"]) | st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,40}", fullmatch=True)


def _file_name(text: str, suffix: str) -> str:
    """A name the file system takes: no `/`, at most 255 bytes."""
    name = text.replace("/", "_")
    name = name if name.strip(".") else "_" + name  # not "", "." or "..": a name, not a step
    while len((name + suffix).encode("utf-8")) > 255:
        name = name[:-1]
    return name + suffix


def _toml(text: str) -> str:
    """A TOML basic string: quotes, backslashes and controls other than tab escaped."""
    return '"' + "".join(f"\\u{ord(c):04x}" if c in '"\\' or (ord(c) < 0x20 and c != "\t") or c == "\x7f" else c
                         for c in text) + '"'


KERNEL = "#include <cuda_runtime.h>\n__global__ void {name}(float* x, int n) {{\n  int i = threadIdx.x;\n  if (i < n) x[i] *= 2;\n}}\n"


TRITON = """\
import triton
import triton.language as tl
@triton.jit
def {name}(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, x * {k}, mask=offs < n)
"""


def build_tree(root: Path, names: list[str], literal: str, kernel: str, config: str, raw_name: bool) -> None:
    """A training script whose gate compares with a hostile literal, launched from a README with
    hostile arguments; a script and a folder named by hostile text; a kernel copied twice (one is
    `copy_of` the other) and built by a CUDA extension with a hostile name; Triton kernels with a
    hostile name in a hostile path; a workload whose instance names are hostile; a file that does
    not parse; and, as Linux allows, names whose bytes are not UTF-8."""
    script, folder, ext_name, broken = names
    root.mkdir(parents=True)
    (root / "train.py").write_text(
        "import torch\n"
        "attn_backend = 'default'\n"
        "def step(x):\n"
        f"    if attn_backend == {literal!r}:\n"
        "        torch.cuda.synchronize()\n"
        "    return x.cuda()\n"
        "if __name__ == '__main__':\n"
        "    step(torch.zeros(1))\n", encoding="utf-8")
    hostile_script = _file_name(script, ".py")
    (root / hostile_script).write_text("import torch\ntorch.cuda.synchronize()\n", encoding="utf-8")
    kdir = _file_name(folder, "")
    sources = [f"{copy}/{kdir}/k.cu" for copy in ("csrc", "third/csrc")]
    for src in sources:
        (root / src).parent.mkdir(parents=True)
        (root / src).write_text(KERNEL.format(name=kernel), encoding="utf-8")
    header = re.sub(r'["\r\n\u2028\u2029]', " ", literal)  # a header name: one line, no quote
    (root / "near.cu").write_text(f'#include "{header}.cuh"\n#include <cub/{header}>\n'
                                  + KERNEL.format(name=kernel + "_v2").replace("*= 2", "*= 3"), encoding="utf-8")
    (root / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
        f"setup(ext_modules=[CUDAExtension({ext_name!r}, {sources + ['near.cu']!r})])\n", encoding="utf-8")
    (root / kdir / "ops").mkdir(parents=True)
    (root / kdir / "ops" / "tri.py").write_text(TRITON.format(name=kernel, k=2) + TRITON.format(name=kernel + "_b", k=3),
                                                encoding="utf-8")
    # the entry's reason names the README that launches it: one in the hostile folder
    (root / kdir / "README.md").write_text(f"# demo\n\n```bash\npython train.py --note {shlex.quote(literal)}\n```\n",
                                           encoding="utf-8")
    (root / "README.md").write_text(f"# demo\n\n```bash\npython {shlex.quote(hostile_script)}\n```\n", encoding="utf-8")
    (root / "run.sh").write_text(f"#!/bin/sh\ntorchrun --nproc_per_node=8 {shlex.quote(hostile_script)} {shlex.quote(literal)}\n",
                                 encoding="utf-8")
    (root / "pyproject.toml").write_text(
        "[project]\nname = \"demo\"\n[tool.neuron-ready.workload]\n"
        f"gpu-instance = {_toml(config)}\ngpu-price = 40\ntrainium-instance = {_toml(config[::-1])}\n"
        "trainium-price = 20\ngpu-hours-per-run = 100\nruns-per-month = 2\n", encoding="utf-8")
    (root / _file_name(broken, ".py")).write_text(f"def broken(:\n    {literal!r}\n", encoding="utf-8")
    if raw_name:
        os.makedirs(os.path.join(os.fsencode(root), b"d\xff\xfe<b>"), exist_ok=True)
        with open(os.path.join(os.fsencode(root), b"d\xff\xfe<b>", b"m\xc3(.py"), "wb") as fh:
            fh.write(b"import torch\ntorch.cuda.synchronize()\n")


# ---------------------------------------------------------------------------------------------
# What each reader must not find


CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
OUR_TAGS = {"html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "h3", "p", "div", "small", "code", "ol",
            "li", "table", "thead", "tbody", "tr", "th", "td", "a", "span", "strong", "img", "footer", "pre", "sub"}
OUR_ATTRS = {"lang", "charset", "name", "content", "class", "href", "alt", "src"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in OUR_TAGS:
            self.problems.append(f"<{tag}>")
        for k, v in attrs:
            if k not in OUR_ATTRS:
                self.problems.append(f"<{tag} {k}=>")
            elif k == "href" and not (v or "").startswith("https://github.com/neuron-ready/neuron-ready/"):
                self.problems.append(f"href={v!r}")
            elif k == "src" and not (v or "").startswith("data:image/png;base64,"):
                self.problems.append(f"src={v!r}")

    def handle_comment(self, data):
        self.problems.append(f"<!--{data}-->")


def check_html(page: str) -> None:
    tags = _Tags()
    tags.feed(page)
    tags.close()
    assert tags.problems == [], tags.problems
    assert not CONTROL.search(page)


def check_markdown(body: str) -> None:
    """As GitHub reads the comment: our marker stays the only marker, nothing else becomes markup,
    no line is a workflow command, every table row stays one row."""
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    full = comment_body(body, "neuron-ready", when)
    assert is_ours({"body": full, "user": {"login": "bot"}}, "neuron-ready", "bot") and valid_at_of(full) == when
    assert full.count(marker("neuron-ready")) == 1 and "<!--" not in body
    html = to_html(full)
    assert live_markup(html, ours=2) == [], body
    # what GitHub links by itself in text (not in code): mentions, issue references, bare URLs
    text = re.sub(r"<code>.*?</code>|<[^>]*>", "", html, flags=re.S)
    assert not re.search(r"(?<![\w\u200b])#\d|(?i:\bgh-\d|\b(?:https?|ftp)://|\bwww\.)", text), text
    assert not CONTROL.search(body.replace("\n", "")), body
    assert not [line for line in body.splitlines() if line.lstrip().startswith(("::", "##["))]
    for table in re.findall(r"<table>.*?</table>", html, flags=re.S):
        columns = len(re.findall(r"<th[ >]", table))
        assert all(len(re.findall(r"<td[ >]", row)) == columns for row in re.findall(r"<tbody>.*?</tbody>", table, flags=re.S)[0]
                   .split("<tr>")[1:]), table


def check_text(out: str) -> None:
    assert not CONTROL.search(out), [line for line in out.splitlines() if CONTROL.search(line)]
    assert not [line for line in out.splitlines() if line.lstrip().startswith(("::", "##["))]


URI = re.compile(r"[A-Za-z0-9\-._~/%!$&'()*+,;=:@]*")


def check_sarif(text: str, report: Report) -> None:
    doc = json.loads(text)
    sarif_validator().validate(doc)
    run = doc["runs"][0]
    locations = [loc for r in run["results"] for loc in r["locations"]]
    locations += [loc for n in run["invocations"][0]["toolExecutionNotifications"] for loc in n["locations"]]
    uris = [loc["physicalLocation"]["artifactLocation"]["uri"] for loc in locations]
    assert uris and all(URI.fullmatch(u) for u in uris), uris
    paths = {posixpath.join(report.root, p) for p in [f.path for f in report.findings] + [d.path for d in report.diagnostics]}
    assert {unquote(u) for u in uris} <= paths  # percent-encoded, and decodes to the reported path


# ---------------------------------------------------------------------------------------------


def _settings(root: str, jobs: int) -> Settings:
    """The tree's own config (its workload), no cache."""
    s = load_settings(Path(root))
    s.cache, s.jobs = False, jobs
    return s


def scan_and_check(base: Path, names: list[str], literal: str, kernel: str, config: str, raw_name: bool) -> None:
    root = base / "repo"
    build_tree(root, names, literal, kernel, config, raw_name)
    cwd = os.getcwd()
    os.chdir(base)  # the report's root is relative, as in CI: SARIF URIs carry it
    try:
        report = run_scan(_settings("repo", jobs=1)).report
        again = run_scan(_settings("repo", jobs=2)).report
        (base / "empty").mkdir()
        empty = run_scan(Settings(root=Path("empty"), cache=False, jobs=1)).report
    finally:
        os.chdir(cwd)
    assert report.findings and report.diagnostics and report.tasks and report.extra.get("breakeven")
    # the texts under test reached the report: a gate on the literal, an entry with its reason
    assert literal == "default" or any("attn_backend ==" in p.gate for p in report.opt_in)
    assert report.extra["reach"]["entry_reasons"]

    with warnings.catch_warnings(record=True) as caught:  # a warning would echo the tree's text to stderr
        warnings.simplefilter("always")
        out = {fmt: render(report, fmt) for fmt in ("text", "json", "sarif", "markdown", "html")}
    assert not caught, [str(w.message) for w in caught]
    assert render(again, "json") == out["json"]  # byte-deterministic, whatever the worker count
    data = json.loads(out["json"])
    assert data["findings"] and {f["path"] for f in data["findings"]} == {f.path for f in report.findings}
    check_text(out["text"])
    be = report.extra["breakeven"]
    check_text(breakeven_text(be, be["sensitivity"]))  # `neuron-ready breakeven`
    check_html(out["html"])
    check_sarif(out["sarif"], report)
    check_markdown(out["markdown"])
    check_markdown(markdown.render_diff(diff_reports(empty, report), report.diagnostics))

    # the real command line, as a terminal or a CI log sees it
    cli = run_cli("scan", "repo", "--format", "text", "--no-cache", cwd=base)
    assert cli.code == 0 and "Traceback" not in cli.err, cli.err
    check_text(cli.out)


@given(names=st.lists(hostile | long_name, min_size=4, max_size=4), literal=hostile, kernel=kernel_name, config=hostile.map("p5 ".__add__),
       raw_name=st.booleans())
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_hostile_names_and_texts_stay_inert_in_every_renderer(tmp_path_factory, names, literal, kernel, config, raw_name):
    scan_and_check(tmp_path_factory.mktemp("hostile"), names, literal, kernel, config, raw_name)
