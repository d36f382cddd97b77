"""Draw a hand-audit sample from calibration reports, before anyone reads code (written for round 4).

    python scripts/audit_sample.py REPORTS_DIR [REPORTS_DIR ...] --out DIR [--round N] [--per-repo 5] [--parts 2]

Per repository (one <id>.json report each): its must-port items (context "step", no `part_of`: a
site, a further line of an edit another finding counts, is judged with that finding and never drawn
on its own) in report order, minus those audited in earlier rounds (docs/calibration/audit*.json, matched by repo, rule, path and
line), every k-th from the first with k = ceil(n / per_repo). Repositories are dealt to the parts in
turn (sorted by id), so each auditor gets whole repositories. Writes sample<N>-<a|b|...>.json and
sample<N>-meta.json ([id, n, k, drawn] per repository). Deterministic: the same reports, the same sample.
"""

from __future__ import annotations

import argparse
import json
import math
import string
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def audited() -> set[tuple[str, str, str, int]]:
    seen = set()
    for p in sorted((ROOT / "docs" / "calibration").glob("audit*.json")):
        for a in json.loads(p.read_text(encoding="utf-8")):
            seen.add((a["repo"], a["rule"], a["path"], int(a["line"])))
    return seen


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--per-repo", type=int, default=5)
    ap.add_argument("--parts", type=int, default=2)
    ap.add_argument("--round", type=int, default=4, help="the audit round: names the sample files")
    args = ap.parse_args()
    seen = audited()
    reports = {}
    for folder in args.reports:
        for p in sorted(folder.glob("*.json")):
            reports.setdefault(p.stem, p)
    parts: list[list[dict]] = [[] for _ in range(args.parts)]
    meta = []
    for n_repo, (repo, path) in enumerate(sorted(reports.items())):
        r = json.loads(path.read_text(encoding="utf-8"))
        step = [f for f in r["findings"] if f.get("context") == "step" and not f.get("part_of")
                and (repo, f["rule"], f["path"], int(f["line"])) not in seen]
        k = math.ceil(len(step) / args.per_repo) if step else 0
        drawn = step[::k] if k else []
        meta.append([repo, len(step), k, len(drawn)])
        for f in drawn:
            parts[n_repo % args.parts].append({
                "repo": repo, "rule": f["rule"], "path": f["path"], "line": f["line"], "message": f["message"],
                "scope": f.get("scope"), "reached_via": f.get("reached_via"), "root": r.get("root")})
    args.out.mkdir(parents=True, exist_ok=True)
    for name, part in zip(string.ascii_lowercase, parts):
        (args.out / f"sample{args.round}-{name}.json").write_text(json.dumps(part, indent=1) + "\n", encoding="utf-8")
    (args.out / f"sample{args.round}-meta.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")
    print(f"{sum(len(p) for p in parts)} findings from {sum(1 for m in meta if m[3])} repositories: "
          + ", ".join(f"{len(p)}" for p in parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
