"""Re-read the hand audits (docs/calibration/audit.json for round 1, auditN.json for round N) against the latest calibration reports.

    python scripts/audit_recheck.py            # after scripts/calibrate.py wrote the reports
    python scripts/audit_recheck.py --rounds 17   # round 17 judged reports scanned with --use-label-api

The audit judged each must-port finding of one scan by hand (TRUE, mis-weighted, FALSE). A later
model moves findings in and out of the must-port part; this prints, per verdict, how many audited
findings are still must-port, and the TRUE share among the audited findings that remain. Findings
that became must-port since the audit carry no verdict and are counted apart: the share is a
statement about the audited set, not a new audit.

A must-port finding with `part_of` is a site: a further line of an edit another finding counts, listed
under that finding and no longer an item of its own. It counts here as moved out, to "site" (and the
audited findings that became sites are counted apart, by verdict): an audit judges items.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("NEURON_READY_REAL_CACHE", "/work/cache/real"))
REPORTS = Path(os.environ.get("NEURON_READY_REPORTS", str(CACHE / "reports")))
# round 1 is audit.json, round N auditN.json: every round committed, in order
AUDITS = tuple(str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs" / "calibration").glob("audit*.json"),
                                                         key=lambda p: int(p.stem[len("audit"):] or 1)))


def rounds_of(text: str | None) -> set[int]:
    """`--rounds 1-16,18`: the rounds to reread (every round when not given)."""
    if not text:
        return set(range(1, len(AUDITS) + 1))
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", help="rounds to reread, e.g. 1-16 (default: all); round 17 judged "
                        "reports scanned with the labels' api calls as entries (calibrate.py --use-label-api)")
    args = parser.parse_args(argv)
    chosen = rounds_of(args.rounds)
    audit = []
    for n, path in enumerate(AUDITS, start=1):  # round 1 judged 13 reports; rounds 2 and 3 sampled all 39 anew
        if n not in chosen:
            continue
        for a in json.loads((ROOT / path).read_text(encoding="utf-8")):
            audit.append(dict(a, round=n))
    by_repo: dict[str, list[dict]] = collections.defaultdict(list)
    for a in audit:
        by_repo[a["repo"]].append(a)
    kept: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    moved: collections.Counter = collections.Counter()  # (verdict, new context)
    by_round: collections.Counter = collections.Counter()  # (round, verdict) still must-port
    unaudited = 0
    rows = []
    true_left = []  # TRUE findings no longer must-port: each one is a regression to read
    for repo in sorted(by_repo):
        path = REPORTS / f"{repo}.json"
        if not path.exists():
            print(f"{repo}: no report at {path}", file=sys.stderr)
            continue
        report = json.loads(path.read_text(encoding="utf-8"))
        where = collections.defaultdict(list)
        for f in report.get("findings", []) + report.get("off_path", []):
            ctx = "site" if f.get("part_of") and f.get("context") == "step" else f.get("context") or "off-path"
            where[(f["rule"], f["path"].split("/", 1)[-1], f["line"])].append(ctx)
            where[(f["rule"], f["path"], f["line"])].append(ctx)
        audited = set()
        repo_kept = collections.Counter()
        for a in by_repo[repo]:
            ctx = (where.get((a["rule"], a["path"], a["line"])) or ["gone"])[0]
            audited.add((a["rule"], a["path"], a["line"]))
            total[a["verdict"]] += 1
            if ctx == "step":
                kept[a["verdict"]] += 1
                by_round[(a["round"], a["verdict"])] += 1
                repo_kept[a["verdict"]] += 1
            else:
                moved[(a["verdict"], ctx)] += 1
                if a["verdict"] == "TRUE":
                    true_left.append(f"  {repo} {a['rule']} {a['path']}:{a['line']} -> {ctx} (round {a['round']})")
        new = sum(1 for f in report.get("findings", [])
                  if (f["rule"], f["path"], f["line"]) not in audited and not f.get("part_of"))
        unaudited += new
        rows.append(f"| {repo} | {len(by_repo[repo])} | {sum(repo_kept.values())} | {repo_kept['TRUE']} | {new} |")
    print("| repo | audited | still must-port items | of which TRUE | must-port items, not audited |")
    print("|---|---:|---:|---:|---:|")
    print("\n".join(rows))
    print()
    for verdict in ("TRUE", "mis-weighted", "FALSE"):
        print(f"{verdict}: {kept[verdict]} of {total[verdict]} still must-port items")
    remaining = sum(kept.values())
    if remaining:
        print(f"TRUE share among audited findings still must-port: {kept['TRUE']}/{remaining} "
              f"({100 * kept['TRUE'] / remaining:.0f} %); must-port findings with no verdict: {unaudited}")
    for n, path in enumerate(AUDITS, start=1):
        if n not in chosen:
            continue
        left = sum(v for (r, _), v in by_round.items() if r == n)
        print(f"round {n} ({path.rsplit('/', 1)[-1]}): {by_round[(n, 'TRUE')]} TRUE of {left} still must-port")
    sites = {v: n for (v, c), n in moved.items() if c == "site"}
    print("now sites (must-port, but a further line of an edit another finding counts; not items):",
          ", ".join(f"{v}: {sites.get(v, 0)}" for v in ("TRUE", "mis-weighted", "FALSE")),
          f"({sum(n for v, n in sites.items() if v != 'TRUE')} non-TRUE)")
    print("moved out, by verdict and new context:",
          ", ".join(f"{v} -> {c}: {n}" for (v, c), n in sorted(moved.items())))
    if true_left:
        print("TRUE findings no longer must-port items:")
        print("\n".join(sorted(true_left)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
