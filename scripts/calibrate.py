"""Scan the labelled calibration set (docs/calibration/labels.toml) and print how the estimate
compares with each label: a Markdown table and a summary line.

    python scripts/calibrate.py                       # every entry
    python scripts/calibrate.py timm flash-attn       # some
    python scripts/calibrate.py --fetch-only          # download and unpack, scan nothing
    python scripts/calibrate.py --use-label-entry     # pass the label's entry as --entry
    python scripts/calibrate.py --use-label-api       # pass a library label's api calls as --entry
    NEURON_READY_REAL_CACHE=/tmp/real python scripts/calibrate.py

Entries are scanned as a user would: `neuron-ready scan PATH --isolated --format json`, with the
detected entry points unless --use-label-entry is given; with --use-label-api a library label's
`api` names (`gsplat:rasterization`) start the path where the user's job calls the library. Sources live in the cache
(NEURON_READY_REAL_CACHE, default /work/cache/real):
  pypi:    downloaded from the index once (CACHE/sdists), checked against the label's sha256,
           unpacked into CACHE/src/NAME-VERSION;
  debian:  unpacked from the orig tarball in CACHE/deb (`apt-get source --download-only`),
           checked against the label's sha256, into CACHE/<id>;
  github:  read from CACHE/<id>, fetched by hand (the label's `files` list is the manifest);
           an absent one is reported as missing with that manifest.
The estimate compared is summary.must_port when the report has it, else summary.effort.
Not part of CI: it needs the network and takes long. No third-party code is committed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from render_calibration_labels import CLASSES, LABELS, cell, load  # noqa: E402

CACHE = Path(os.environ.get("NEURON_READY_REAL_CACHE", "/work/cache/real"))
# Where the JSON reports go: a second checkout calibrates into its own folder, never over main's.
REPORTS = Path(os.environ.get("NEURON_READY_REPORTS", str(CACHE / "reports")))
INDEX = "https://pypi.org/pypi"


class Missing(Exception):
    """The entry's source is not in the cache and cannot be fetched from here."""


@dataclass
class Row:
    repo: dict
    report: dict | None = None
    problem: str = ""  # why there is no report (missing, download or scan failure)
    manifest: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------ sources

def _tree(dest: Path) -> Path:
    """The unpacked tree in dest: a single top folder (NAME-VERSION/ in an sdist) is stepped into."""
    children = list(dest.iterdir())
    return children[0] if len(children) == 1 and children[0].is_dir() else dest


def _unpack(archive: Path, dest: Path) -> Path:
    """The tree inside archive, unpacked once into dest."""
    if not dest.exists():
        tmp = dest.with_name(dest.name + ".part")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if archive.name.endswith(".zip"):
            zipfile.ZipFile(archive).extractall(tmp)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(tmp, filter="data")
        tmp.rename(dest)
    return _tree(dest)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _checked(archive: Path, expected: str | None) -> Path:
    if expected and _sha256(archive) != expected:
        raise Missing(f"{archive.name}: sha256 differs from the label's {expected[:12]}...")
    return archive


def fetch_pypi(spec: str, sha256: str | None, index: str) -> Path:
    """The unpacked sdist NAME==VERSION, downloaded once (PyPI's JSON API, not pip download,
    which would build metadata and so need each package's build dependencies)."""
    name, _, version = spec.partition("==")
    dest = CACHE / "src" / f"{name}-{version}"
    if dest.exists():
        return _tree(dest)
    sdists = CACHE / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    url = f"{index.rstrip('/')}/{name}/json"
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            info = json.load(r)
        files = [u for u in info["releases"].get(version, []) if u["packagetype"] == "sdist"]
        if not files:
            raise Missing(f"{name} {version}: no source distribution on the index")
        archive = sdists / files[0]["filename"]
        if not archive.exists():
            part = archive.with_name(archive.name + ".part")
            with urllib.request.urlopen(urllib.parse.urljoin(url, files[0]["url"]), timeout=600) as r, open(part, "wb") as fh:
                shutil.copyfileobj(r, fh)
            if _sha256(part) != files[0]["digests"]["sha256"]:
                part.unlink()
                raise Missing(f"{archive.name}: sha256 differs from the index's")
            part.rename(archive)
    except (OSError, urllib.error.URLError, ValueError, KeyError) as e:
        raise Missing(f"{name} {version}: download failed ({e})") from None
    return _unpack(_checked(archive, sha256), dest)


def fetch_debian(repo: dict) -> Path:
    """CACHE/<id>, unpacked from the package's orig tarball in CACHE/deb when not there yet."""
    dest = CACHE / repo["id"]
    if dest.exists():
        return _tree(dest)
    package, _, version = repo["source"].removeprefix("debian:").partition("=")
    upstream = version.split(":")[-1].rsplit("-", 1)[0]
    found = sorted((CACHE / "deb").glob(f"{package}_{upstream}.orig.tar.*"))
    if not found:
        raise Missing(f"no {package}_{upstream}.orig.tar.* in {CACHE / 'deb'}: run `apt-get source "
                      f"--download-only {package}={version}` there (needs a deb-src line)")
    return _unpack(_checked(found[0], repo.get("sha256")), dest)


def github_manifest(repo: dict) -> list[str]:
    """One line per file to fetch: repository, path, and the stored commit when the label pins one."""
    owner_repo = repo["source"].removeprefix("github:").partition("@")[0]
    return [f"{owner_repo} {f['path']} @ {f.get('commit') or 'the stored version'}" for f in repo.get("files", [])]


def source_tree(repo: dict, index: str) -> Path:
    kind = repo["source"].split(":", 1)[0]
    if kind == "pypi":
        return fetch_pypi(repo["source"].removeprefix("pypi:"), repo.get("sha256"), index)
    if kind == "debian":
        return fetch_debian(repo)
    if kind == "github":
        dest = CACHE / repo["id"]
        if not dest.is_dir() or not any(dest.iterdir()):
            raise Missing(f"not in {dest}: fetch the files of its manifest there")
        return dest  # laid out as in the repository: label paths start at its root
    raise Missing(f"unknown source kind {kind!r}")


# ------------------------------------------------------------------------------------------ scanning

def label_entry(repo: dict, tree: Path) -> str | None:
    """The label's entry as a file neuron-ready can take: its first word, when that is a Python
    file in the tree (library labels start with a parenthesis; native programs name a .cu/.c)."""
    first = (repo.get("entry") or "").split(" ", 1)[0]
    path = tree / first
    return str(path) if first.endswith(".py") and path.is_file() else None


def label_api(repo: dict) -> list[str]:
    """A library label's `api`: the calls its entry text names (`gsplat:rasterization`), each passed
    as an --entry so the path starts where the user's training job calls the library."""
    api = repo.get("api") or []
    return [a for a in api if isinstance(a, str) and ":" in a]


def scan(repo: dict, tree: Path, use_label_entry: bool, jobs: int | None, use_label_api: bool = False) -> dict:
    target = tree / repo.get("path", "")
    out = REPORTS / f"{re.sub(r'[^A-Za-z0-9.]+', '-', repo['id'])}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "neuron_ready", "scan", str(target), "--isolated", "--format", "json", "-o", str(out), "-q"]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    entry = label_entry(repo, tree) if use_label_entry else None
    if entry:
        cmd += ["--entry", entry]
    for name in label_api(repo) if use_label_api else ():
        cmd += ["--entry", name]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        lines = (r.stderr or r.stdout).strip().splitlines()
        raise RuntimeError(f"scan exited {r.returncode}: {lines[-1] if lines else 'no message'}")
    return json.loads(out.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------ the table

def estimate(report: dict) -> tuple[dict, str]:
    """The part of the estimate the label is compared with: the must-port part when the report
    splits it (summary.must_port, with its figures at the top or under `effort`), else the whole."""
    summary = report.get("summary", {})
    split = summary.get("must_port")
    if isinstance(split, dict):
        figures = split.get("effort", split)
        if isinstance(figures, dict) and figures.get("class") in CLASSES:
            return figures, "must-port"
    return summary["effort"], "whole"


def drivers(report: dict, figures: dict, limit: int = 2) -> str:
    tasks = {t["id"]: t for t in report.get("tasks", []) if isinstance(t, dict) and "id" in t}
    parts = []
    for d in figures.get("drivers", [])[:limit]:
        t = d if isinstance(d, dict) else tasks.get(d)
        if t:
            likely = t.get("person_days", {}).get("likely")
            parts.append(f"{t.get('title', t.get('id'))}" + (f" ({likely:.1f})" if isinstance(likely, (int, float)) else ""))
    return "; ".join(parts)


def classes_off(expected: str, got: str) -> int:
    return abs(CLASSES.index(expected) - CLASSES.index(got))


def table(rows: list[Row]) -> str:
    lines = ["| id | group | expected | got | P50 / P80 person-days | hit | top drivers (likely person-days) |",
             "|---|---|---|---|---|---|---|"]
    hits = two_off = scanned = 0
    parts_used = set()
    for row in rows:
        r = row.repo
        if row.report is None:
            lines.append(f"| {r['id']} | {r['group']} | {r['expected']} | — | — | — | {cell(row.problem)} |")
            continue
        figures, part = estimate(row.report)
        parts_used.add(part)
        got, off = figures["class"], classes_off(r["expected"], figures["class"])
        scanned += 1
        hits += off == 0
        two_off += off == 2
        mark = "✓" if off == 0 else "✗✗" if off == 2 else "✗"
        lines.append(f"| {r['id']} | {r['group']} | {r['expected']} | **{got}** | {figures['p50']:.1f} / {figures['p80']:.1f} "
                     f"| {mark} | {cell(drivers(row.report, figures))} |")
    missing = len(rows) - scanned
    share = f" ({100 * hits / scanned:.0f} %)" if scanned else ""
    lines.append("")
    lines.append(f"Hits: {hits} / {scanned} scanned{share}; two classes off: {two_off}; not scanned: {missing}. "
                 f"Estimate compared: {' and '.join(sorted(parts_used)) or 'none'}.")
    manifests = [row for row in rows if row.manifest and row.problem.startswith("missing")]
    if manifests:
        lines.append("")
        lines.append("Files to fetch for the entries not in the cache (repository, path, commit):")
        for row in manifests:
            lines.append(f"- {row.repo['id']} into {CACHE / row.repo['id']}:")
            lines.extend(f"  - {m}" for m in row.manifest)
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="entry ids to run (default: all)")
    parser.add_argument("--labels", type=Path, default=LABELS, help="label file (default: docs/calibration/labels.toml)")
    parser.add_argument("--use-label-entry", action="store_true", help="pass the label's entry to --entry")
    parser.add_argument("--use-label-api", action="store_true",
                        help="pass a library label's `api` names (module:function) to --entry")
    parser.add_argument("--fetch-only", action="store_true", help="download and unpack; scan nothing")
    parser.add_argument("--jobs", type=int, help="--jobs for each scan")
    parser.add_argument("--index-url", default=INDEX, help=f"PyPI JSON API base (default {INDEX})")
    parser.add_argument("-o", "--output", type=Path, help="write the table to this file too")
    args = parser.parse_args(argv)
    try:
        repos = load(args.labels)["repo"]
    except (OSError, ValueError, tomllib.TOMLDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    unknown = sorted(set(args.ids) - {r["id"] for r in repos})
    if unknown:
        print(f"error: no entry {', '.join(unknown)} in {args.labels}", file=sys.stderr)
        return 2
    rows = []
    for repo in repos:
        if args.ids and repo["id"] not in args.ids:
            continue
        row = Row(repo, manifest=github_manifest(repo) if repo["source"].startswith("github:") else [])
        rows.append(row)
        try:
            tree = source_tree(repo, args.index_url)
            if args.fetch_only:
                row.problem = f"fetched: {tree}"
                continue
            row.report = scan(repo, tree, args.use_label_entry, args.jobs, args.use_label_api)
        except Missing as e:
            row.problem = f"missing: {e}"
        except (RuntimeError, OSError, ValueError, KeyError) as e:
            row.problem = f"not scanned: {e}"
        print(f"{repo['id']}: {row.problem or estimate(row.report)[0]['class']}", file=sys.stderr, flush=True)
    text = table(rows)
    sys.stdout.write(text)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
