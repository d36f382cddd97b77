"""Download source distributions of real GPU-era packages into a cache outside the repository,
scan each with neuron-ready, and print a Markdown summary (docs/real-code.md records the results).

    python scripts/scan_real_code.py                  # all packages
    python scripts/scan_real_code.py flash-attn timm  # some
    NEURON_READY_REAL_CACHE=/tmp/real python scripts/scan_real_code.py

Not part of CI: it needs the package index and takes minutes. No third-party code is committed.
"""

from __future__ import annotations

import hashlib
import json
import os
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
PACKAGES = [
    ("flash-attn", "2.8.3.post2", "kernel library"),
    ("mamba-ssm", "2.3.2.post1", "kernel library"),
    ("causal-conv1d", "1.7.0", "kernel library"),
    ("xformers", "0.0.35", "kernel library"),
    ("liger-kernel", "0.8.5", "kernel library"),
    ("bitsandbytes", "0.42.0", "kernel library"),
    ("deepspeed", "0.19.8", "kernel library"),
    ("torch-scatter", "2.1.2", "kernel library"),
    ("transformers", "5.24.0", "training code"),
    ("timm", "1.0.31", "training code"),
    ("peft", "0.21.2", "training code"),
    ("lightning", "2.6.6", "training code"),
    ("trl", "1.16.0", "training code"),
]

CACHE = Path(os.environ.get("NEURON_READY_REAL_CACHE", Path.home() / ".cache" / "neuron-ready" / "real-code"))


def fetch(name: str, version: str) -> Path:
    """The unpacked sdist, downloaded once from PyPI's JSON API (pip download would try to build
    metadata, which needs each package's build dependencies, e.g. torch for xformers)."""
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
    dest = CACHE / "src" / f"{name}-{version}"
    if not dest.exists():
        dest.mkdir(parents=True)
        if archive.suffix == ".zip":
            zipfile.ZipFile(archive).extractall(dest)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(dest, filter="data")
    children = [p for p in dest.iterdir() if p.is_dir()]
    return children[0] if len(children) == 1 else dest


def scan(src: Path, name: str) -> dict:
    out = CACHE / "reports" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "neuron_ready", "scan", str(src), "--format", "json", "-o", str(out), "--isolated"],
        check=True,
    )
    return json.loads(out.read_text())


def main(argv: list[str]) -> int:
    wanted = [p for p in PACKAGES if not argv or p[0] in argv]
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
        print(f"scanned {name} {version}", file=sys.stderr)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
