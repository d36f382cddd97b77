"""scripts/calibrate.py end to end on one tiny fixture (fixtures/mainstream): an sdist served by a
real HTTP server on 127.0.0.1, the same tree as a GitHub-style cached entry, an absent one, a
checksum that does not match, and a report whose JSON has grown a must-port split."""

import copy
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "calibrate.py"
FIXTURE = REPO / "fixtures" / "mainstream"
sys.path.insert(0, str(SCRIPT.parent))
import calibrate  # noqa: E402


def _sdist() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(FIXTURE, arcname="tiny-pkg-1.0")
    return buf.getvalue()


@pytest.fixture(scope="module")
def index():
    """A PyPI-shaped JSON API serving one sdist of the fixture."""
    archive = _sdist()
    meta = {"releases": {"1.0": [{"packagetype": "sdist", "filename": "tiny-pkg-1.0.tar.gz",
                                  "url": "/files/tiny-pkg-1.0.tar.gz",
                                  "digests": {"sha256": hashlib.sha256(archive).hexdigest()}}]}}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = {"/pypi/tiny-pkg/json": json.dumps(meta).encode(), "/files/tiny-pkg-1.0.tar.gz": archive}.get(self.path)
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/pypi", hashlib.sha256(archive).hexdigest()
    server.shutdown()


def _labels(path: Path, sha256: str) -> Path:
    path.write_text(f"""
method = "test"
[[repo]]
id = "tiny-sdist"
source = "pypi:tiny-pkg==1.0"
sha256 = "{sha256}"
group = "mainstream-trainer"
expected = "days"
rationale = "A. B."
must_port = "x"
labelled_on = "2026-11-26"

[[repo]]
id = "tiny-gh"
source = "github:example/tiny@0123"
group = "mainstream-trainer"
expected = "month-plus"
entry = "train.py (python train.py)"
rationale = "A. B."
must_port = "x"
labelled_on = "2026-11-26"
files = [{{ path = "train.py", commit = "0123" }}]

[[repo]]
id = "absent-gh"
source = "github:example/absent@4567"
group = "cuda-only-program"
expected = "month-plus"
rationale = "A. B."
must_port = "x"
labelled_on = "2026-11-26"
files = [{{ path = "main.cu", commit = "89ab" }}, {{ path = "Makefile" }}]
""", encoding="utf-8")
    return path


def _run(cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NEURON_READY_REAL_CACHE": str(cache)}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600)


def _direct_scan(tree: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "neuron_ready", "scan", str(tree), "--isolated", "--format", "json", "-q", "--jobs", "1"],
                       capture_output=True, text=True, timeout=600)
    return json.loads(r.stdout)


def _row(text: str, entry: str) -> list[str]:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(f"| {entry} |")]
    return [c.strip() for c in line.strip("|").split("|")]


def test_fetches_scans_and_compares(tmp_path, index):
    url, sha = index
    cache = tmp_path / "cache"
    shutil.copytree(FIXTURE, cache / "tiny-gh")
    labels = _labels(tmp_path / "labels.toml", sha)
    r = _run(cache, "--labels", str(labels), "--index-url", url, "--jobs", "1")
    assert r.returncode == 0, r.stderr
    got = _direct_scan(FIXTURE)["summary"]["effort"]
    # the sdist was downloaded, checked and unpacked into the cache
    assert (cache / "src" / "tiny-pkg-1.0" / "tiny-pkg-1.0" / "train.py").is_file()
    for entry, expected in (("tiny-sdist", "days"), ("tiny-gh", "month-plus")):
        row = _row(r.stdout, entry)
        assert row[2:5] == [expected, f"**{got['class']}**", f"{got['p50']:.1f} / {got['p80']:.1f}"]
        off = calibrate.classes_off(expected, got["class"])
        assert row[5] == {0: "✓", 1: "✗", 2: "✗✗"}[off]
    absent = _row(r.stdout, "absent-gh")
    assert absent[3] == "—" and absent[6].startswith("missing: not in")
    assert "  - example/absent main.cu @ 89ab" in r.stdout
    assert "  - example/absent Makefile @ the stored version" in r.stdout
    assert "tiny-gh into" not in r.stdout  # present entries need no manifest
    hits = sum(calibrate.classes_off(e, got["class"]) == 0 for e in ("days", "month-plus"))
    two_off = sum(calibrate.classes_off(e, got["class"]) == 2 for e in ("days", "month-plus"))
    assert f"Hits: {hits} / 2 scanned ({50 * hits} %); two classes off: {two_off}; not scanned: 1. Estimate compared: whole." in r.stdout


def test_a_checksum_that_differs_from_the_label_stops_the_entry(tmp_path, index):
    url, _ = index
    cache = tmp_path / "cache"
    labels = _labels(tmp_path / "labels.toml", "0" * 64)
    r = _run(cache, "--labels", str(labels), "--index-url", url, "tiny-sdist")
    assert r.returncode == 0, r.stderr
    assert "sha256 differs from the label's 000000000000" in _row(r.stdout, "tiny-sdist")[6]
    assert not (cache / "src" / "tiny-pkg-1.0").exists()
    assert "Hits: 0 / 0 scanned; two classes off: 0; not scanned: 1." in r.stdout


@pytest.mark.parametrize("content, message", [
    ("[[repo]]\nid = 'x'\n", "entry x lacks source"),
    ("[[repo\n", "error: "),
])
def test_a_bad_label_file_is_a_one_line_usage_error(tmp_path, content, message):
    labels = tmp_path / "labels.toml"
    labels.write_text(content, encoding="utf-8")
    r = _run(tmp_path / "cache", "--labels", str(labels))
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_an_unknown_entry_id_is_a_usage_error(tmp_path, index):
    r = _run(tmp_path / "cache", "--labels", str(_labels(tmp_path / "labels.toml", index[1])), "no-such-entry")
    assert r.returncode == 2 and r.stderr.strip() == f"error: no entry no-such-entry in {tmp_path / 'labels.toml'}"


def test_the_must_port_part_is_compared_when_the_report_has_it():
    report = _direct_scan(FIXTURE)
    whole = report["summary"]["effort"]
    grown = copy.deepcopy(report)
    grown["summary"]["must_port"] = {"class": "weeks", "p50": 7.3, "p80": 9.5, "drivers": whole["drivers"][:1]}
    repo = {"id": "tiny", "group": "mainstream-trainer", "expected": "weeks"}
    text = calibrate.table([calibrate.Row(repo, grown)])
    assert _row(text, "tiny")[3:6] == ["**weeks**", "7.3 / 9.5", "✓"]
    assert "Estimate compared: must-port." in text
    # the older contract (no split) still reads
    assert calibrate.estimate(report) == (whole, "whole")


def test_label_entries_become_entry_files_only_for_python_files_in_the_tree():
    repo = {"entry": "train.py (python train.py)"}
    assert calibrate.label_entry(repo, FIXTURE) == str(FIXTURE / "train.py")
    assert calibrate.label_entry({"entry": "(library: Trainer)"}, FIXTURE) is None
    assert calibrate.label_entry({"entry": "train_gpt2.cu (make train_gpt2cu)"}, FIXTURE) is None
    assert calibrate.label_entry({"entry": "missing.py"}, FIXTURE) is None
    assert calibrate.label_entry({}, FIXTURE) is None
