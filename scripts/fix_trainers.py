"""Run `neuron-ready fix` on public trainers from PyPI sdists and print the table of docs/fix.md.

    python scripts/fix_trainers.py [--cache /work/cache/fix]

Each sdist is downloaded with `pip download --no-deps --no-binary :all:` into the cache (outside
the repository: third-party code is never committed), unpacked twice (as published, and to fix),
scanned, fixed (safe fixes), scanned again. Every fixed file is byte-compiled and imported in a
subprocess, as published and as fixed, so an import that fails for a missing dependency is told
apart from one the fix broke.
"""

from __future__ import annotations

import argparse
import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

TRAINERS = [
    ("open-clip-torch", "3.3.0", "src"),
    ("timm", "1.0.31", "."),
    ("stable-baselines3", "2.9.2", "."),
    ("torchdistill", "1.1.5", "."),
    ("denoising-diffusion-pytorch", "2.3.4", "."),
]
MECHANICAL = ("device", "distributed", "precision")
# The reasons `fix` prints, without the code they quote.
REASONS = [
    ("no automatic fix", "no fix for the rule"),
    ("its fix is unsafe", "unsafe fix (needs --unsafe-fixes)"),
    ("under `", "CUDA test with another branch"),
    ("it guards CUDA-only code", "CUDA test guarding CUDA code"),
    ("its answer is", "device query used as a value"),
    ("the test asks about CUDA itself", "test about CUDA itself"),
    ("compared (", "device compared with CUDA"),
    ("an argument of a CUDA-only call", "argument of a CUDA-only call"),
    ("chooses its value", "CUDA test with another branch"),
    ("builds a string", "string built from 'cuda'"),
    ("names a device index", "device index (`cuda:N`)"),
    ("passes a device", "device index (`cuda:N`)"),
    ("names backends per device", "per-device backend string"),
    ("inside a CUDA extension", "CUDA extension wrapper"),
    ("has no device-agnostic equivalent", "no torch.accelerator equivalent"),
    ("has no direct device-agnostic", "no torch.accelerator equivalent"),
    ("its value is used", "value used (cannot guard)"),
    ("passes a keyword argument", "keyword argument torch.accelerator lacks"),
    ("passes positional arguments", "positional autocast arguments"),
]


def nr(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NEURON_READY_CACHE_DIR=str(cwd / ".nr-cache"))
    return subprocess.run([sys.executable, "-m", "neuron_ready", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=1800)


def unpack(archive: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    (top,) = [p for p in dest.iterdir() if p.is_dir()]
    return top


def findings(tree: Path, work: Path) -> list[dict]:
    r = nr("scan", str(tree), "--format", "json", "--no-cache", "--quiet", cwd=work)
    report = json.loads(r.stdout)
    return report["findings"] + report["off_path"]


def import_error(root: Path, module: str, deps: Path | None) -> str:
    """The last line of the error importing `module` from `root` in a fresh interpreter, or ""."""
    code = f"import importlib, sys; sys.path.insert(0, {str(root)!r}); importlib.import_module({module!r})"
    env = dict(os.environ, PYTHONPATH=str(deps)) if deps else None
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root, env=env)
    if p.returncode == 0:
        return ""
    last = [line for line in p.stderr.strip().splitlines() if line.strip()]
    return last[-1] if last else f"exit {p.returncode}"


def module_of(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _norm(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text.lower())


def reason_of(text: str) -> str:
    for prefix, label in REASONS:
        if prefix in text:
            return label
    return text


def run_one(name: str, version: str, src: str, cache: Path, deps: Path | None = None) -> dict:
    def sdists() -> list[Path]:
        want = _norm(f"{name}-{version}-")
        return [p for p in cache.glob("*.tar.gz") if _norm(p.name).startswith(want)]

    found = sdists()
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        f"{name}=={version}", "-d", str(cache)], check=True)
        found = sdists()
    work = cache / "work" / f"{name}-{version}"
    orig = unpack(found[0], work / "orig")
    fixed = unpack(found[0], work / "fixed")
    before = findings(orig, work)
    r = nr("fix", str(fixed), cwd=work)
    if r.returncode != 0:
        raise SystemExit(f"{name}: fix failed: {r.stderr}")
    summary = re.search(r"Fixed (\d+) findings? in (\d+) files?; (\d+) left\.", r.stdout)
    left = Counter(reason_of(line.split(" left: ", 1)[1]) for line in r.stdout.splitlines() if " left: " in line)
    after = findings(fixed, work)
    changed = sorted(p for p in fixed.rglob("*.py") if p.read_bytes() != (orig / p.relative_to(fixed)).read_bytes())
    compiled = 0
    imports_ok, same_failure, broken = 0, Counter(), []
    for path in changed:
        py_compile.compile(str(path), doraise=True, cfile=str(work / "compiled.pyc"))
        compiled += 1
        module = module_of(path, fixed / src)
        err_fixed = import_error(fixed / src, module, deps)
        if not err_fixed:
            imports_ok += 1
            continue
        err_orig = import_error(orig / src, module, deps)
        if err_orig == err_fixed:
            same_failure[err_fixed.split(":")[0] + ": " + err_fixed.split(":", 1)[-1].strip()[:60]] += 1
        else:
            broken.append((module, err_orig, err_fixed))
    mech = [f for f in before if f["category"] in MECHANICAL]
    return {
        "name": f"{name} {version}",
        "before": len(before),
        "mechanical": len(mech),
        "fixed": int(summary.group(1)) if summary else 0,
        "files": int(summary.group(2)) if summary else 0,
        "after": len(after),
        "left_mechanical": len([f for f in after if f["category"] in MECHANICAL]),
        "left": left,
        "changed": len(changed),
        "compiled": compiled,
        "imports_ok": imports_ok,
        "same_failure": same_failure,
        "broken": broken,
    }


def table(rows: list[dict]) -> str:
    out = ["| Trainer (PyPI sdist) | Findings before (device/distributed/precision) | Fixed (files) | Findings after | Left in those categories, and why | Fixed files: compile / import |",
           "|---|---:|---:|---:|---|---|"]
    for r in rows:
        why = "; ".join(f"{n} {label}" for label, n in sorted(r["left"].items(), key=lambda kv: (-kv[1], kv[0])) if label != "no fix for the rule")
        nofix = r["left"].get("no fix for the rule", 0)
        why = (why + "; " if why else "") + f"{nofix} of rules without a fix (all categories)"
        imp = f"{r['compiled']}/{r['changed']} compile; {r['imports_ok']} import"
        if r["same_failure"]:
            imp += "; " + "; ".join(f"{n} fail as published too ({err})" for err, n in r["same_failure"].most_common())
        if r["broken"]:
            imp += f"; **{len(r['broken'])} broken by the fix**"
        out.append(f"| {r['name']} | {r['before']} ({r['mechanical']}) | {r['fixed']} ({r['files']}) | {r['after']} "
                   f"({r['left_mechanical']}) | {why} | {imp} |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default="/work/cache/fix", type=Path)
    ap.add_argument("--deps", type=Path, help="A folder of the trainers' own dependencies (pip install --no-deps --target DIR ...), put on the import path.")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    rows = [run_one(n, v, s, args.cache, args.deps) for n, v, s in TRAINERS]
    print(table(rows), end="")
    for r in rows:
        for module, a, b in r["broken"]:
            print(f"{r['name']}: {module}: as published: {a or 'imports'}; fixed: {b}", file=sys.stderr)


if __name__ == "__main__":
    main()
