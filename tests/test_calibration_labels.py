"""The calibration labels (docs/calibration/labels.toml) and their rendered page stay in step."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RENDER = REPO / "scripts" / "render_calibration_labels.py"


def test_labels_md_is_rendered_from_labels_toml():
    r = subprocess.run([sys.executable, str(RENDER), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_label_file_covers_the_groups_issue_11_asks_for():
    sys.path.insert(0, str(RENDER.parent))
    try:
        from render_calibration_labels import load
    finally:
        sys.path.pop(0)
    repos = load()["repo"]
    groups = [r["group"] for r in repos]
    assert len(repos) >= 30
    assert groups.count("already-neuron-xla") >= 4
    assert groups.count("cuda-only-program") >= 2
    assert {"mainstream-trainer", "fine-tuning", "research-optional-kernels", "kernel-collection"} <= set(groups)
    assert all(len(r["rationale"].split(". ")) >= 2 for r in repos)
    assert all(r.get("sha256") for r in repos if r["source"].startswith(("pypi:", "debian:")))


def test_the_held_out_set_is_disjoint_from_the_calibration_set_and_pinned():
    sys.path.insert(0, str(RENDER.parent))
    try:
        from render_calibration_labels import load
    finally:
        sys.path.pop(0)
    seen = load()["repo"]
    name = lambda r: r["source"].split(":", 1)[1].split("==")[0].split("@")[0].lower()  # noqa: E731
    for file in ("holdout.toml", "holdout2.toml"):  # each set is new to every set before it
        held = load(REPO / "docs" / "calibration" / file)["repo"]
        assert len(held) >= 8
        assert not {r["id"] for r in held} & {r["id"] for r in seen}
        assert not {name(r) for r in held} & {name(r) for r in seen}  # no other version of a scanned package
        assert all(r.get("sha256") and r["source"].startswith("pypi:") for r in held)
        assert all(r["labelled_on"] and len(r["rationale"].split(". ")) >= 2 for r in held)
        seen = seen + held


def test_api_names_are_entries_of_library_labels_only():
    """`api` is what a library label's entry text names, in the form --entry takes (module:name)."""
    sys.path.insert(0, str(RENDER.parent))
    try:
        from render_calibration_labels import load
        from calibrate import label_api
    finally:
        sys.path.pop(0)
    from neuron_ready.reach import split_entry

    for file in ("labels.toml", "holdout.toml", "holdout2.toml"):
        for r in load(REPO / "docs" / "calibration" / file)["repo"]:
            api = r.get("api", [])
            assert not api or r["entry"].startswith("(library"), r["id"]
            assert label_api(r) == api, r["id"]
            for name in api:
                module, symbol = split_entry(name)
                assert symbol and symbol.split(".")[0] in r["entry"], (r["id"], name)  # named by the entry text
