"""Download source distributions of real GPU-era packages into a cache outside the repository,
scan each with neuron-ready, and print two Markdown tables: the effort calibration (expected class
against the scan's, docs/effort-model.md section 6) and what each scan found (docs/lab/real-code.md).

    python scripts/scan_real_code.py                  # all packages
    python scripts/scan_real_code.py flash-attn timm  # some
    NEURON_READY_REAL_CACHE=/tmp/real python scripts/scan_real_code.py

A package already unpacked in the cache is scanned without asking the index again.

Not part of CI: it needs the package index and takes minutes. No third-party code is committed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from collections import Counter
from pathlib import Path

# (distribution, pinned version, what a port should look like)
KERNELS, TRAINING = ("month-plus",), ("days", "weeks")
# A model zoo scanned whole (every model at once) is a reference row, not a calibration target:
# one team ports the models it trains (the ENTRY_ROWS below).
EXPECTED = {"kernel library": KERNELS, "training code": TRAINING, "model zoo": ()}
# Extra calibration rows, as a team that trains one model would scan: (label, distribution, folder
# to scan (relative to the unpacked sdist; "" = all of it), training entry points (--entry)).
ENTRY_ROWS = [
    ("transformers: Llama, the model folder", "transformers", "src/transformers/models/llama", []),
    ("transformers: Llama, from modeling_llama.py with all it imports", "transformers", "",
     ["src/transformers/models/llama/modeling_llama.py"]),
    ("transformers: BERT, the model folder", "transformers", "src/transformers/models/bert", []),
    ("timm: ResNet, from resnet.py with all it imports", "timm", "", ["timm/models/resnet.py"]),
]
PACKAGES = [
    ("flash-attn", "2.8.3.post2", "kernel library"),
    ("mamba-ssm", "2.3.2.post1", "kernel library"),
    ("causal-conv1d", "1.7.0", "kernel library"),
    ("xformers", "0.0.35", "kernel library"),
    ("liger-kernel", "0.8.5", "kernel library"),
    ("bitsandbytes", "0.42.0", "kernel library"),
    ("deepspeed", "0.19.8", "kernel library"),
    ("torch-scatter", "2.1.2", "kernel library"),
    ("transformers", "5.24.0", "model zoo"),
    ("timm", "1.0.31", "training code"),
    ("peft", "0.21.2", "training code"),
    ("lightning", "2.6.6", "training code"),
    ("trl", "1.16.0", "training code"),
]

CACHE = Path(os.environ.get("NEURON_READY_REAL_CACHE", Path.home() / ".cache" / "neuron-ready" / "real-code"))


def fetch(name: str, version: str) -> Path:
    """The unpacked sdist, downloaded once from PyPI's JSON API (pip download would try to build
    metadata, which needs each package's build dependencies, e.g. torch for xformers)."""
    dest = CACHE / "src" / f"{name}-{version}"
    if not dest.exists():
        archive = _download(name, version)
        dest.mkdir(parents=True)
        if archive.suffix == ".zip":
            zipfile.ZipFile(archive).extractall(dest)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(dest, filter="data")
    children = [p for p in dest.iterdir() if p.is_dir()]
    return children[0] if len(children) == 1 else dest


def _download(name: str, version: str) -> Path:
    sdists = CACHE / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    index = f"https://pypi.org/pypi/{name}/json"
    with urllib.request.urlopen(index, timeout=60) as r:
        info = json.load(r)
    (entry,) = [u for u in info["releases"].get(version, []) if u["packagetype"] == "sdist"]
    archive = sdists / entry["filename"]
    if not archive.exists():
        tmp = archive.with_suffix(".part")
        url = urllib.parse.urljoin(index, entry["url"])  # mirrors may serve relative links
        with urllib.request.urlopen(url, timeout=600) as r, open(tmp, "wb") as fh:
            shutil.copyfileobj(r, fh)
        if hashlib.sha256(tmp.read_bytes()).hexdigest() != entry["digests"]["sha256"]:
            tmp.unlink()
            raise RuntimeError(f"{entry['filename']}: sha256 mismatch")
        tmp.rename(archive)
    return archive


def scan(src: Path, label: str, entries: list[str] = ()) -> dict:
    out = CACHE / "reports" / f"{re.sub(r'[^A-Za-z0-9.]+', '-', label).strip('-')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    extra = [a for e in entries for a in ("--entry", e)]
    subprocess.run(
        [sys.executable, "-m", "neuron_ready", "scan", str(src), "--format", "json", "-o", str(out), "--isolated", *extra],
        check=True,
    )
    return json.loads(out.read_text())


def calibration_row(label: str, kind: str, report: dict) -> str:
    """Expected class against the scan's, with what drives the estimate."""
    e = report["summary"]["effort"]
    expected = EXPECTED[kind]
    reach = report.get("reach", {})
    mode = "entries: " + ", ".join(reach.get("entries", [])[:2]) if reach.get("mode") == "entries" else reach.get("mode", "")
    if len(reach.get("entries", [])) > 2:
        mode += f" (+{len(reach['entries']) - 2})"
    tasks = {t["id"]: t for t in report.get("tasks", [])}
    drivers = "; ".join(f"{tasks[d]['title']} ({tasks[d]['person_days']['likely']:.1f})" for d in e.get("drivers", [])[:2] if d in tasks)
    escaped = drivers.replace("|", "\\|")
    ok = "" if not expected else "✓" if e["class"] in expected else "✗"
    return (f"| {label} | {' or '.join(expected) or '(reference)'} | **{e['class']}** {ok} | {e['p50']:.1f} / {e['p80']:.1f} | {report['summary']['score']} "
            f"| {len(report['findings'])} / {len(report.get('off_path', []))} | {len(report.get('tasks', []))} | {mode} "
            f"| {escaped} |")


def main(argv: list[str]) -> int:
    wanted = [p for p in PACKAGES if not argv or p[0] in argv]
    calibration = ["| scan | expected | class | P50 / P80 person-days | score | findings on / off the path | tasks | training path | top drivers (likely person-days) |",
                   "|---|---|---|---|---|---|---|---|---|"]
    rows = ["| package | kind | files | findings (fallback) | top rules | class | P50 / P80 person-days | diagnostics |",
            "|---|---|---|---|---|---|---|---|"]
    for name, version, kind in wanted:
        try:
            src = fetch(name, version)
        except (OSError, RuntimeError, ValueError) as e:
            rows.append(f"| {name} {version} | {kind} | download failed: {e} | | | | | |")
            continue
        report = scan(src, name)
        s = report["summary"]
        rules = Counter(f["rule"] for f in report["findings"])
        top = ", ".join(f"{r}×{n}" for r, n in rules.most_common(5))
        e = s["effort"]
        rows.append(
            f"| {name} {version} | {kind} | {s['files_scanned']} | {s['findings']} ({s['fallback_findings']}) | {top} "
            f"| {e['class']} | {e['p50']:.1f} / {e['p80']:.1f} | {s['diagnostics']} |"
        )
        calibration.append(calibration_row(f"{name} {version}", kind, report))
        for label, dist, folder, entries in ENTRY_ROWS:
            if dist == name:
                calibration.append(calibration_row(label, "training code", scan(src / folder, label, entries)))
        print(f"scanned {name} {version}", file=sys.stderr)
    print("\n".join(calibration))
    print()
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
