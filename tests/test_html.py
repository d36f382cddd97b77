"""`scan --format html`: one self-contained offline page, escaped, deterministic, with the break-even
chart drawn by matplotlib; rendered for real in headless Chromium where it is installed."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cli import run_cli
from conftest import FIXTURES
from neuron_ready.catalog import load_catalog
from neuron_ready.render import chart, common

RULE_IDS = [r.id for r in load_catalog()]

WORKLOAD = (
    "[tool.neuron-ready.workload]\n"
    'gpu-instance = "p5.48xlarge"\ntrainium-instance = "trn1.32xlarge"\n'
    "gpu-hours-per-run = 100\nrelative-throughput = 0.8\nruns-per-month = 4\n"
)
EVIL = "<img src=x onerror=alert(1)>"


class Tags(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> Tags:
    t = Tags()
    t.feed(page)
    return t


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """The CUDA extension fixture with a workload, and a training file whose name and code carry HTML."""
    root = tmp_path_factory.mktemp("html") / "repo"
    shutil.copytree(FIXTURES / "cuda_extension", root)
    (root / "pyproject.toml").write_text(WORKLOAD, encoding="utf-8")
    (root / f"{EVIL}.py").write_text("import torch\nx = torch.zeros(3).cuda()\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def page(repo) -> str:
    r = run_cli("scan", "repo", "--format", "html", "-o", "report.html", cwd=repo.parent)
    assert r.code == 0, r.err
    return (repo.parent / "report.html").read_text(encoding="utf-8")


def test_page_has_the_estimate_drivers_breakeven_and_tables(repo, page):
    data = run_cli("scan", "repo", "--format", "json", cwd=repo.parent)
    doc = json.loads(data.out)
    s, e = doc["summary"], doc["summary"]["effort"]
    text = " ".join(parse(page).text)
    assert f"{s['score']}/100" in text and e["class"] in text
    assert f"{e['p50']:.1f} / {e['p80']:.1f}" in text
    for task in doc["tasks"]:
        assert task["id"] not in page  # titles, not ids
    assert "<li>Port CUDA extension <code>fusedops._C</code>" in page  # the first driver; code spans as <code>
    assert doc["breakeven"]["summary"] in text
    off = sum(1 for f in doc["off_path"] if f["context"] == "off-path")
    assert "Must-port findings" in text and f"Off the training path ({off})" in text
    assert "no build compiles it" in text  # the off-path reason column
    assert f"{doc['breakeven']['breakeven_runs']:.1f}" in text


def test_page_is_self_contained_and_offline(page):
    tags = parse(page).tags
    names = {t for t, _ in tags}
    assert not names & {"script", "link", "iframe", "object", "embed"}
    for tag, attrs in tags:
        for key in ("src", "href", "srcset", "action"):
            if key in attrs and not (tag == "a" and key == "href"):  # a link a reader follows fetches nothing
                assert attrs[key].startswith("data:"), (tag, key, attrs[key][:60])
    assert {a["href"] for t, a in tags if t == "a"} <= {*(common.rule_url(r) for r in RULE_IDS), common.EFFORT_DOCS}
    assert "@import" not in page and "url(" not in page  # nothing fetched from CSS either
    (img,) = [a for t, a in tags if t == "img"]
    png = base64.b64decode(img["src"].removeprefix("data:image/png;base64,"))
    from PIL import Image

    im = Image.open(io.BytesIO(png))
    assert im.format == "PNG" and im.size == (800, 420)
    colors = {c for _, c in im.convert("RGB").getcolors(1 << 20)}
    assert (0xC0, 0x39, 0x2B) in colors and (0x1F, 0x6F, 0xB2) in colors  # the GPU and Trainium lines


def test_user_text_is_escaped(page):
    assert EVIL not in page and "onerror" not in [k for _, a in parse(page).tags for k in a]
    assert "&lt;img src=x onerror=alert(1)&gt;.py" in page  # the file name, shown as text
    assert EVIL + ".py" in " ".join(parse(page).text)


def test_same_tree_same_bytes(repo, page):
    r = run_cli("scan", "repo", "--format", "html", cwd=repo.parent)
    assert r.code == 0 and r.out == page
    assert str(repo.parent) not in page  # no absolute path


def test_without_a_workload_the_page_says_how_to_get_the_breakeven():
    r = run_cli("scan", str(FIXTURES / "mainstream"), "--format", "html", "--isolated")
    assert r.code == 0, r.err
    tags = parse(r.out)
    assert not [t for t, _ in tags.tags if t == "img"]
    assert "No workload configured" in " ".join(tags.text)


def test_without_matplotlib_the_page_says_how_to_get_the_chart(repo, tmp_path):
    blocked = tmp_path / "blocked"
    (blocked / "matplotlib").mkdir(parents=True)
    (blocked / "matplotlib" / "__init__.py").write_text("raise ImportError('matplotlib blocked for this test')\n")
    r = run_cli("scan", "repo", "--format", "html", cwd=repo.parent, env={"PYTHONPATH": str(blocked)})
    assert r.code == 0, r.err
    assert "<img" not in r.out and chart.INSTALL_HINT.replace("'", "&#x27;") in r.out
    assert "Break-even: " in r.out  # the numbers are still there


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_chromium_renders_the_page(repo, page, tmp_path):
    html_file = repo.parent / "report.html"
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*base, "--dump-dom", html_file.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = " ".join(parse(dom.stdout).text)
    assert "Trainium port readiness" in text and "/100" in text and "Break-even" in text
    shot = tmp_path / "shot.png"
    r = subprocess.run([*base, "--window-size=1200,1100", f"--screenshot={shot}", html_file.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    from PIL import Image

    im = Image.open(shot).convert("RGB")
    assert im.size == (1200, 1100)
    colors = dict((c, n) for n, c in im.getcolors(1 << 22))
    assert len(colors) > 50  # not a blank page
    # the chart was decoded and painted: both lines' colours cover real areas of the screenshot
    assert colors.get((0xC0, 0x39, 0x2B), 0) > 200 and colors.get((0x1F, 0x6F, 0xB2), 0) > 200
