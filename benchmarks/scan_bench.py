"""Scan speed and memory on real code, against bare libcst and TorchFix; docs/lab/performance.md
publishes the figures.

    python benchmarks/scan_bench.py                      # torch and transformers, TorchFix on torch/nn
    python benchmarks/scan_bench.py --corpus torch       # one corpus
    python benchmarks/scan_bench.py --corpus torch-subset --no-torchfix   # issue 17's mid-size tree
    python benchmarks/scan_bench.py --torchfix-full      # TorchFix on the whole torch tree (~15 min)
    NEURON_READY_BENCH_CACHE=/tmp/bench python benchmarks/scan_bench.py --out results.md

Corpora, fetched at run time and never committed (kept in $NEURON_READY_BENCH_CACHE, default
~/.cache/neuron-ready-bench):
- the Python sources of the installed torch==2.13.0 wheel (site-packages/torch/**/*.py, copied);
- torch-subset: of those, torch/{nn,distributed,optim,amp,cuda} (549 files, 21 MB), a mid-size
  tree where a re-scan's fixed costs show;
- the transformers sdist at a pinned version (`pip download --no-deps --no-binary :all:`).

Each command runs under `/usr/bin/time -v` (wall time, CPU time, and the peak RSS of the largest
single process); the memory of the whole process tree (a scan forks workers) is sampled from
/proc/PID/smaps_rollup every 0.1 s: summed PSS (shared pages divided among the processes that map
them: the memory the tree holds) and summed RSS (shared pages counted once per process). Measured per corpus, in one run on one machine:
- bare: `libcst.parse_module` over the same Python files the scan reads, one process, one core;
- cold: `neuron-ready scan` with an empty cache directory, default --jobs (all cores);
- warm: the same command again, over the cache it wrote: an unchanged tree, its report from the
  whole-report cache;
- index: the same again with the report entries removed: every file by its stat (stat index),
  its result from the content cache, the report built;
- hook (torch-subset): `neuron-ready hook FILE` on one file, its first run and again unchanged
  (median of 5), against `python -c "import click, libcst"` (median of 5);
- jobs1: `--jobs 1 --no-cache`;
- TorchFix 0.7.0 (its own venv; created in the cache unless --torchfix names an executable) on
  torch/nn, with our cold scan of the same subset, or on the whole tree with --torchfix-full.
The cold, warm, index and jobs1 reports of a corpus must be byte for byte the same; the script says so or fails.
Not part of CI: it needs the package index and takes several minutes.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

TORCH_VERSION = "2.13.0"
TRANSFORMERS_VERSION = "5.24.0"
TORCHFIX_VERSION = "0.7.0"
CACHE = Path(os.environ.get("NEURON_READY_BENCH_CACHE")
             or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neuron-ready-bench")

# Targets of issue 5 (ratios within one run); issue 17 keeps the cold scan at 0.5x.
MAX_COLD_OVER_BARE = 0.5
MIN_TORCHFIX_OVER_COLD = 20.0
MAX_WARM_OVER_COLD = 0.05
# Issue 17: an unchanged re-scan of the whole torch tree; a one-file hook against bare imports.
MAX_WARM_OVER_COLD_TORCH = 0.02
MAX_HOOK_OVER_IMPORTS = 1.0
SUBSET = ("nn", "distributed", "optim", "amp", "cuda")
HOOK_FILE = "torch/optim/sgd.py"
REPEAT = 5
MAX_PEAK_BYTES = 10**9  # 1 GB, read strictly: 954 MiB

BARE_PARSE = """
import sys, libcst
failed = 0
for path in open(sys.argv[1], encoding="utf-8").read().splitlines():
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        libcst.parse_module(data)
    except Exception:
        failed += 1
print(f"{failed} files failed to parse", file=sys.stderr)
"""


# ------------------------------------------------------------------------------------------ corpora


def torch_corpus() -> Path:
    """site-packages/torch/**/*.py of the installed wheel, copied once (the scan must not see the
    rest of site-packages, and default excludes skip site-packages)."""
    installed = importlib.metadata.version("torch")
    if installed.split("+")[0] != TORCH_VERSION:  # the CPU build says 2.13.0+cpu
        sys.exit(f"scan_bench: torch {installed} is installed; the corpus is torch=={TORCH_VERSION}")
    spec = importlib.util.find_spec("torch")
    src = Path(spec.origin).parent
    dest = CACHE / "corpus" / f"torch-{TORCH_VERSION}"
    if not (dest / ".complete").exists():
        shutil.rmtree(dest, ignore_errors=True)
        for path in sorted(src.rglob("*.py")):
            target = dest / "torch" / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        (dest / ".complete").write_text("")
    return dest


def torch_subset_corpus() -> Path:
    """torch/{nn,distributed,optim,amp,cuda} of the torch corpus (issue 17's 549-file tree)."""
    full = torch_corpus()
    dest = CACHE / "corpus" / f"torch-subset-{TORCH_VERSION}"
    if not (dest / ".complete").exists():
        shutil.rmtree(dest, ignore_errors=True)
        for part in SUBSET:
            shutil.copytree(full / "torch" / part, dest / "torch" / part)
        (dest / ".complete").write_text("")
    return dest


def transformers_corpus() -> Path:
    sdists = CACHE / "sdists"
    name = f"transformers-{TRANSFORMERS_VERSION}"
    archive = sdists / f"{name}.tar.gz"
    if not archive.exists():
        sdists.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        f"transformers=={TRANSFORMERS_VERSION}", "-d", str(sdists)], check=True)
    dest = CACHE / "corpus" / name
    if not (dest / ".complete").exists():
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")
        (dest / ".complete").write_text("")
    return dest / name


def torchfix_executable(given: str | None) -> Path:
    if given:
        return Path(given)
    venv = CACHE / f"venv-torchfix-{TORCHFIX_VERSION}"
    exe = venv / "bin" / "torchfix"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"torchfix=={TORCHFIX_VERSION}"], check=True)
    return exe


def python_files(root: Path) -> tuple[list[str], int]:
    """The Python files a scan of root reads (discovery as the scan does it), and all its files."""
    from neuron_ready.config import load_settings
    from neuron_ready.engine import find_files

    jobs = find_files(load_settings(root, isolated=True)).jobs
    return [j.path for j in jobs if j.kind == "python"], len(jobs)


def parse_shares(root: Path, files: list[str]) -> dict:
    """What the scan hands to libcst: files with a trigger string of the catalog (the text
    prefilter), and of those, the files and bytes left after the ast screen cuts what no rule
    can match (sources/screen.py)."""
    import ast
    import warnings

    from neuron_ready.catalog import load_catalog
    from neuron_ready.sources import ScanContext, module_name_of
    from neuron_ready.sources.pyindex import passes_prefilter
    from neuron_ready.sources.screen import reduce_source

    index = ScanContext(load_catalog(), "native").index
    shares = {"prefilter": 0, "parsed": 0, "parsed_bytes": 0, "bytes": 0}
    for f in files:
        text = Path(f).read_text(encoding="utf-8", errors="replace")
        shares["bytes"] += len(text)
        if not passes_prefilter(text, index):
            continue
        shares["prefilter"] += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                reduced = reduce_source(text, ast.parse(text), index, *module_name_of(Path(f).relative_to(root).as_posix()))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            reduced = None
        if reduced is None or reduced.matchable:
            shares["parsed"] += 1
            shares["parsed_bytes"] += len(reduced.text if reduced is not None else text)
    return shares


def compile_package() -> None:
    """Byte-compile neuron_ready as `pip install` does: a checkout run with PYTHONDONTWRITEBYTECODE=1
    (as in some CI images) would otherwise compile every module on every run."""
    import compileall

    import neuron_ready

    compileall.compile_dir(str(Path(neuron_ready.__file__).parent), quiet=1)


# ------------------------------------------------------------------------------------------ measuring


@dataclass
class Run:
    label: str
    wall: float  # seconds
    cpu: float  # user + system seconds, all processes
    max_rss: int  # bytes, the largest single process (GNU time)
    tree_rss: int  # bytes, summed RSS of the process tree at its sampled peak (counts shared pages twice)
    tree_pss: int  # bytes, summed PSS of the process tree at its sampled peak
    out: Path | None = None


def _tree_memory(root_pid: int) -> tuple[int, int]:
    """(summed RSS, summed PSS) of a process and its descendants, in bytes. Forked workers share
    the parent's pages, which RSS counts once per process; PSS divides each shared page among
    the processes that map it, so its sum is the memory the tree really holds."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        children.setdefault(int(stat[stat.rindex(b")") + 2 :].split()[1]), []).append(int(entry))
    rss = pss = 0
    todo = [root_pid]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith(b"Pss:"):
                        pss += int(line.split()[1]) * 1024
        except OSError:
            continue
    return rss, pss


def measure(label: str, cmd: list[str], out: Path | None = None, env: dict | None = None, cwd: Path | None = None) -> Run:
    with tempfile.NamedTemporaryFile(suffix=".time", delete=False) as fh:
        timing = Path(fh.name)
    full_env = dict(os.environ, NEURON_READY_DEBUG="1", **(env or {}))
    p = subprocess.Popen(["/usr/bin/time", "-v", "-o", str(timing), *cmd], env=full_env, cwd=cwd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = [0, 0]

    def sample() -> None:
        while p.poll() is None:
            rss, pss = _tree_memory(p.pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = p.communicate()
    sampler.join()
    fields = {}
    for line in timing.read_text().splitlines():
        key, _, value = line.strip().rpartition(": ")
        fields[key] = value
    timing.unlink()
    if p.returncode not in (0, 1):  # TorchFix exits 1 when it reports something
        sys.exit(f"scan_bench: {label} failed ({p.returncode}): {err[-2000:]}")
    h, _, rest = fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"].rpartition(":")
    wall = float(rest) + sum(float(x) * 60 ** (i + 1) for i, x in enumerate(reversed(h.split(":"))) if x)
    cpu = float(fields["User time (seconds)"]) + float(fields["System time (seconds)"])
    run = Run(label, wall, cpu, int(fields["Maximum resident set size (kbytes)"]) * 1024, peak[0], peak[1], out)
    print(f"  {label:<34} {run.wall:8.1f} s wall {run.cpu:8.1f} s cpu  peak PSS {run.tree_pss / 2**20:6.0f} MiB, "
          f"RSS {run.tree_rss / 2**20:.0f} MiB (largest process {run.max_rss / 2**20:.0f} MiB)", file=sys.stderr)
    for line in err.splitlines():  # warnings, and where results came from (NEURON_READY_DEBUG)
        if line.startswith("neuron-ready:"):
            print(f"    {line}", file=sys.stderr)
    return run


def measure_median(label: str, cmd: list[str], cwd: Path, env: dict | None = None) -> Run:
    """The run of median wall time out of REPEAT (a fraction of a second is noisy on a shared machine)."""
    runs = sorted((measure(label, cmd, env=env, cwd=cwd) for _ in range(REPEAT)), key=lambda r: r.wall)
    return runs[REPEAT // 2]


def scan_cmd(root: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "neuron_ready", "scan", str(root), "--isolated", "--format", "json",
            "-o", str(out), *extra]


def bench_corpus(name: str, root: Path, work: Path, torchfix: Path | None, torchfix_full: bool) -> dict:
    files, all_files = python_files(root)
    size = sum(os.path.getsize(f) for f in files)
    parsed = parse_shares(root, files)
    print(f"{name}: {len(files)} Python files ({size / 2**20:.1f} MiB) of {all_files} files the scan reads; "
          f"{parsed['prefilter']} contain a trigger string; libcst parses {parsed['parsed']} "
          f"({parsed['parsed_bytes'] / max(parsed['bytes'], 1):.0%} of the bytes)", file=sys.stderr)
    listing = work / f"{name}.files"
    listing.write_text("\n".join(files) + "\n", encoding="utf-8")
    cache = work / f"{name}-cache"
    runs = {
        "bare": measure("bare libcst.parse_module, 1 core", [sys.executable, "-c", BARE_PARSE, str(listing)]),
        "cold": measure("scan, cold cache", scan_cmd(root, work / f"{name}-cold.json", "--cache-dir", str(cache)), work / f"{name}-cold.json"),
        "warm": measure("scan, warm cache (unchanged tree)", scan_cmd(root, work / f"{name}-warm.json", "--cache-dir", str(cache)), work / f"{name}-warm.json"),
    }
    for reports_dir in cache.glob("reports-v*"):
        shutil.rmtree(reports_dir)
    runs |= {
        "index": measure("scan, warm cache, no report entry", scan_cmd(root, work / f"{name}-index.json", "--cache-dir", str(cache)), work / f"{name}-index.json"),
        "jobs1": measure("scan --jobs 1 --no-cache", scan_cmd(root, work / f"{name}-jobs1.json", "--jobs", "1", "--no-cache"), work / f"{name}-jobs1.json"),
    }
    reports = {k: r.out.read_bytes() for k, r in runs.items() if r.out is not None}
    identical = len(set(reports.values())) == 1
    if not identical:
        kept = CACHE / "differing" / name
        kept.mkdir(parents=True, exist_ok=True)
        for k, data in reports.items():
            (kept / f"{k}.json").write_bytes(data)
        sys.exit(f"scan_bench: {name}: the cold, warm, index and --jobs 1 reports differ (kept in {kept})")
    summary = json.loads(reports["cold"])["summary"]
    result = {"name": name, "files": len(files), "all_files": all_files, "bytes": size, "runs": runs, "parsed": parsed,
              "findings": summary["findings"], "diagnostics": summary.get("diagnostics"), "identical": identical}
    if name == "torch-subset":
        env = {"NEURON_READY_CACHE_DIR": str(work / f"{name}-hook-cache")}
        hook = [sys.executable, "-m", "neuron_ready", "hook", HOOK_FILE, "--isolated"]
        result["hook"] = {
            "imports": measure_median('python -c "import click, libcst"', [sys.executable, "-c", "import click, libcst"], root),
            "first": measure("hook, one file, first run", hook, env=env, cwd=root),
            "again": measure_median("hook, one file, unchanged", hook, root, env),
        }
    return result
    if torchfix is not None:
        subset = root if torchfix_full else root / "torch" / "nn"
        sub_files, _ = python_files(subset)
        result["torchfix_scope"] = ("the whole tree" if torchfix_full else "torch/nn") + f", {len(sub_files)} Python files"
        result["torchfix"] = measure(f"TorchFix {TORCHFIX_VERSION} ({'all' if torchfix_full else 'torch/nn'})", [str(torchfix), str(subset)])
        result["ours_on_subset"] = (runs["cold"] if torchfix_full else
                                    measure("scan torch/nn, cold cache", scan_cmd(subset, work / f"{name}-nn.json", "--no-cache")))
    return result


# ------------------------------------------------------------------------------------------ reporting


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    return (f"{model}, {len(os.sched_getaffinity(0))} cores available, {mem / 2**20:.1f} GiB RAM, "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
            f"libcst {importlib.metadata.version('libcst')}, neuron-ready {importlib.metadata.version('neuron-ready')}")


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def table(results: list[dict], load_before: str, load_after: str) -> str:
    lines = [f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {machine()}.",
             f"Load average (1, 5, 15 min) before: {load_before}; after: {load_after}.", "",
             "| corpus | run | wall s | CPU s | peak PSS, all processes | peak RSS, all processes | largest process |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        runs = dict(r["runs"])
        if "torchfix" in r:
            runs["torchfix"] = r["torchfix"]
            runs["ours_on_subset"] = r["ours_on_subset"]
        runs |= r.get("hook", {})
        for run in runs.values():
            lines.append(f"| {r['name']} | {run.label} | {run.wall:.1f} | {run.cpu:.1f} | "
                         f"{run.tree_pss / 2**20:.0f} MiB | {run.tree_rss / 2**20:.0f} MiB | {run.max_rss / 2**20:.0f} MiB |")
    lines += ["", "| corpus | Python files / all files; pass the text prefilter; parsed by libcst (share of bytes) | target | measured | |",
              "|---|---|---|---:|---|"]
    for r in results:
        runs = r["runs"]
        cold, warm, bare = runs["cold"].wall, runs["warm"].wall, runs["bare"].wall
        peak = max(x.tree_pss for x in runs.values() if x.label.startswith("scan"))
        max_warm = MAX_WARM_OVER_COLD_TORCH if r["name"] == "torch" else MAX_WARM_OVER_COLD
        p = r["parsed"]
        files = (f"{r['files']} / {r['all_files']}; {p['prefilter']}; {p['parsed']} "
                 f"({p['parsed_bytes'] / max(p['bytes'], 1):.0%})")
        rows = [
            (f"cold scan / bare libcst parse ≤ {MAX_COLD_OVER_BARE:.1f}", f"{cold / bare:.2f}", cold / bare <= MAX_COLD_OVER_BARE),
            (f"warm (unchanged tree) / cold ≤ {max_warm:.0%}", f"{warm / cold:.1%}", warm / cold <= max_warm),
            ("warm, no report entry (stat index) / cold (for reference)", f"{runs['index'].wall / cold:.1%}", None),
            ("peak memory (PSS, all processes) < 1 GB (954 MiB)", f"{peak / 2**20:.0f} MiB", peak < MAX_PEAK_BYTES),
            ("--jobs 1 / bare libcst parse (for reference)", f"{runs['jobs1'].wall / bare:.2f}", None),
        ]
        if "hook" in r:
            h = r["hook"]
            ratio = h["again"].wall / h["imports"].wall
            rows.append((f"one-file hook, unchanged / `import click, libcst` ≤ {MAX_HOOK_OVER_IMPORTS:.1f} (medians of {REPEAT})",
                         f"{ratio:.2f}", ratio <= MAX_HOOK_OVER_IMPORTS))
            rows.append(("one-file hook, first run / `import click, libcst` (for reference)",
                         f"{h['first'].wall / h['imports'].wall:.2f}", None))
        if "torchfix" in r:
            ratio = r["torchfix"].wall / r["ours_on_subset"].wall
            rows.append((f"TorchFix / our cold scan ≥ {MIN_TORCHFIX_OVER_COLD:.0f}x ({r['torchfix_scope']})",
                         f"{ratio:.1f}x", ratio >= MIN_TORCHFIX_OVER_COLD))
        for what, value, ok in rows:
            lines.append(f"| {r['name']} | {files} | {what} | {value} | {'' if ok is None else verdict(ok)} |")
    lines += ["", "Reports byte for byte identical (cold, warm, warm without report entry, --jobs 1): "
              + ", ".join(f"{r['name']} {'yes' if r['identical'] else 'NO'}" for r in results) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="torch,torch-subset,transformers", help="torch, torch-subset, transformers (comma-separated)")
    ap.add_argument("--torchfix", metavar="EXE", help=f"a torchfix {TORCHFIX_VERSION} executable (default: a venv in the cache)")
    ap.add_argument("--no-torchfix", action="store_true", help="skip the TorchFix comparison")
    ap.add_argument("--torchfix-full", action="store_true", help="TorchFix on the whole torch tree, not torch/nn")
    ap.add_argument("--out", type=Path, help="write the Markdown table here too")
    args = ap.parse_args(argv)
    corpora = {"torch": torch_corpus, "torch-subset": torch_subset_corpus, "transformers": transformers_corpus}
    wanted = [c.strip() for c in args.corpus.split(",") if c.strip()]
    if unknown := [c for c in wanted if c not in corpora]:
        ap.error(f"unknown corpus {unknown[0]}")
    roots = {c: corpora[c]() for c in wanted}
    compile_package()
    torchfix = None if args.no_torchfix or "torch" not in wanted else torchfix_executable(args.torchfix)
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    results = []
    with tempfile.TemporaryDirectory(prefix="nr-bench-") as tmp:
        for name, root in roots.items():
            results.append(bench_corpus(name, root, Path(tmp), torchfix if name == "torch" else None, args.torchfix_full))
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    text = table(results, " ".join(load_before), " ".join(load_after))
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
