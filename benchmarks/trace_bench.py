"""Benchmark `neuron-ready trace` on Llama-shaped 7B and 70B models (benchmarks/llama_shaped.py).

Each measurement runs in a fresh process: the whole command as a user runs it (interpreter start,
imports, building the model on fake tensors, forward + backward, the graph-break analysis in its
forked child, the report), timed from the worker's first line. Peak memory is the maximum resident
set size of the main process and, separately, of the graph-break child (fork shares pages, so their
sum overstates the total). The load average at the start says how busy the machine was.

    python benchmarks/trace_bench.py                     # 7b and 70b, one run each
    python benchmarks/trace_bench.py --sizes 7b --repeat 3
    python benchmarks/trace_bench.py --baseline          # also a bare make_fx of the 7B joint graph
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402 - the clock starts before any import
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
INPUTS = "input_ids:int64[8,2048] labels:int64[8,2048]"


def _usage() -> dict:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "wall_s": round(time.perf_counter() - START, 2),
        "cpu_s": round(me.ru_utime + me.ru_stime, 2),
        "child_cpu_s": round(kids.ru_utime + kids.ru_stime, 2),
        "peak_rss_mb": round(me.ru_maxrss / 1024),
        "child_peak_rss_mb": round(kids.ru_maxrss / 1024),
    }


def worker(size: str, graph_breaks: bool) -> dict:
    """One `neuron-ready trace` run, in this process."""
    from neuron_ready.cli import main

    out = Path(tempfile.mkdtemp()) / "report.json"
    args = ["trace", f"benchmarks/llama_shaped.py:llama_{size}", "--inputs", INPUTS, "--format", "json", "-o", str(out)]
    if not graph_breaks:
        args.append("--no-graph-breaks")
    try:
        main(args)
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    measured = _usage()
    trace = json.loads(out.read_text())["trace"]
    return {
        "size": size, **measured, "parameters": trace["parameters"], "aten_calls": trace["ops"]["calls"],
        "complete": trace["complete"], "graph_breaks": trace["graph_breaks"]["status"],
    }


def baseline() -> dict:
    """A bare make_fx of the 7B joint graph under FakeTensorMode, for comparison."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from neuron_ready.trace.run import graph_op_counts, make_fx_joint_graph

    sys.path.insert(0, str(REPO / "benchmarks"))
    import llama_shaped

    with FakeTensorMode():
        model = llama_shaped.llama_7b()
        args = (torch.empty(8, 2048, dtype=torch.long), torch.empty(8, 2048, dtype=torch.long))
        calls = sum(graph_op_counts(make_fx_joint_graph(model, args)).values())
    return {"size": "7b make_fx", **_usage(), "aten_calls": calls}


def run(kind: str, size: str, graph_breaks: bool) -> dict:
    load = os.getloadavg()[0]
    cmd = [sys.executable, __file__, "--worker", kind, "--sizes", size] + ([] if graph_breaks else ["--no-graph-breaks"])
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"worker failed: {p.stderr.strip()}")
    return {**json.loads(p.stdout.strip().splitlines()[-1]), "load_1min": round(load, 2)}


def table(rows: list[dict]) -> str:
    head = "| model | wall s | CPU s (main + child) | peak RSS MB (main / child) | aten calls | load avg |"
    lines = [head, "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['size']} | {r['wall_s']} | {r['cpu_s']} + {r['child_cpu_s']} | "
            f"{r['peak_rss_mb']} / {r['child_peak_rss_mb']} | {r['aten_calls']:,} | {r['load_1min']} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="7b,70b")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--baseline", action="store_true", help="also time a bare make_fx of the 7B joint graph")
    ap.add_argument("--no-graph-breaks", action="store_true")
    ap.add_argument("--worker", choices=["trace", "make_fx"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker == "trace":
        print(json.dumps(worker(a.sizes, not a.no_graph_breaks)))
        return
    if a.worker == "make_fx":
        print(json.dumps(baseline()))
        return
    rows = []
    for size in a.sizes.split(","):
        for _ in range(a.repeat):
            rows.append(run("trace", size, not a.no_graph_breaks))
            print(json.dumps(rows[-1]), file=sys.stderr)
    if a.baseline:
        rows.append(run("make_fx", "7b", False))
    print(table(rows))


if __name__ == "__main__":
    main()
