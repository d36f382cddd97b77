"""Break-even: the arithmetic (hand-computed cases and properties), the pricing catalog, and the
`breakeven` command and the scan's break-even as a user runs them."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli import run_cli
from conftest import FIXTURES
from neuron_ready import breakeven as be
from neuron_ready.config import ConfigError
from neuron_ready.pricing import PRICINGS, load_pricing, lookup, parse_pricing


def workload(**kw) -> be.Workload:
    base = dict(gpu_price=55.04, trainium_price=21.50, gpu_hours_per_run=100.0, relative_throughput=0.8,
                runs_per_month=4.0, day_rate=1200.0)
    base.update(kw)
    return be.Workload(**base)


# ------------------------------------------------------------------------------------------ arithmetic


def test_known_answer_p5_vs_trn1():
    r = be.compute(workload(), p50=10.0, p80=15.0)
    assert r["gpu_cost_per_run"] == 5504.0  # 55.04 x 1 x 100
    assert r["trainium_hours_per_run"] == 125.0  # 100 / 0.8
    assert r["trainium_cost_per_run"] == 2687.5  # 21.50 x 1 x 125
    assert r["saving_per_run"] == 2816.5
    assert r["port_cost"] == 12000.0  # 10 x 1200
    assert r["breakeven_runs"] == round(12000 / 2816.5, 4) == 4.2606
    assert r["breakeven_months"] == round(12000 / 2816.5 / 4, 4) == 1.0652
    assert r["verdict"] == "trainium"
    assert r["p80"] == {"port_cost": 18000.0, "breakeven_runs": 6.3909, "breakeven_months": 1.5977, "verdict": "trainium",
                        "verdict_text": "trainium"}
    assert r["person_days"] == {"p50": 10.0, "p80": 15.0}


def test_known_answer_clusters():
    # 4 x p4d (21.96) for 50 h vs 2 x trn1.32xlarge (21.50) at half the throughput: 100 h
    r = be.compute(workload(gpu_price=21.96, gpu_instances=4, trainium_instances=2, gpu_hours_per_run=50.0,
                            relative_throughput=0.5, runs_per_month=None), 20.0, 30.0)
    assert r["gpu_cost_per_run"] == 4392.0 and r["trainium_cost_per_run"] == 4300.0
    assert r["saving_per_run"] == 92.0
    assert r["breakeven_runs"] == round(24000 / 92, 4) and r["breakeven_months"] is None
    # cheaper per run, but without a run rate there is no time horizon: no "trainium" verdict, only runs
    assert r["verdict"] is None and r["verdict_text"] == "pays back after 260.9 runs"
    assert r["p80"]["verdict"] is None and r["p80"]["verdict_text"] == "pays back after 391.3 runs"


def test_trainium_dearer_per_run_never_pays_back():
    r = be.compute(workload(relative_throughput=0.3), 10.0, 15.0)
    assert r["saving_per_run"] < 0
    assert r["breakeven_runs"] is None and r["breakeven_months"] is None and r["verdict"] == "gpu"
    assert r["p80"]["verdict"] == "gpu"


def test_horizon_decides_the_verdict():
    slow = be.compute(workload(runs_per_month=0.25), 10.0, 15.0)  # 4.26 runs at 0.25 a month: 17 months
    assert slow["breakeven_months"] > 12 and slow["verdict"] == "gpu"
    assert be.compute(workload(runs_per_month=0.25, horizon_months=24), 10.0, 15.0)["verdict"] == "trainium"


def test_sensitivity_grid():
    s = be.sensitivity(workload(), 10.0)
    assert s["runs_per_month"] == [2.0, 4.0, 8.0, 16.0]
    assert [row["relative_throughput"] for row in s["rows"]] == [0.5, 0.75, 1.0, 1.25, 1.5]
    at_08 = be.compute(workload(relative_throughput=1.0, runs_per_month=4.0), 10.0, 10.0)
    assert s["rows"][2]["breakeven_months"][1] == round(at_08["breakeven_months"], 2)
    # half the speed: 21.50 x 200 h = 4300 per run, saving 1204; 12000 / 1204 = 9.97 runs
    assert s["rows"][0]["breakeven_months"] == [4.98, 2.49, 1.25, 0.62]
    assert be.sensitivity(workload(trainium_price=30.0), 10.0)["rows"][0]["breakeven_months"] == [None] * 4  # 6000 > 5504


money = st.floats(0.1, 200.0, allow_nan=False)
ratio = st.floats(0.05, 5.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(money, money, st.floats(1.0, 1000.0), ratio, ratio, st.floats(0.0, 200.0))
def test_higher_throughput_never_delays_breakeven(gpu, trn, hours, r1, r2, days):
    lo, hi = sorted((r1, r2))
    a = be.compute(workload(gpu_price=gpu, trainium_price=trn, gpu_hours_per_run=hours, relative_throughput=lo), days, days)
    b = be.compute(workload(gpu_price=gpu, trainium_price=trn, gpu_hours_per_run=hours, relative_throughput=hi), days, days)
    assert b["saving_per_run"] >= a["saving_per_run"] - 1e-3
    if a["breakeven_runs"] is not None:
        assert b["breakeven_runs"] is not None and b["breakeven_runs"] <= a["breakeven_runs"] + 1e-3
    if a["verdict"] == "trainium":
        assert b["verdict"] == "trainium"


@settings(max_examples=100, deadline=None)
@given(money, st.integers(1, 8), st.floats(1.0, 1000.0), st.floats(0.0, 200.0))
def test_zero_saving_means_never(price, n, hours, days):
    # the same cluster cost per hour and the same speed: nothing to save
    w = workload(gpu_price=price, trainium_price=price, gpu_instances=n, trainium_instances=n,
                 gpu_hours_per_run=hours, relative_throughput=1.0)
    r = be.compute(w, days, days)
    assert r["saving_per_run"] == 0.0
    assert r["breakeven_runs"] is None and r["verdict"] == "gpu"


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 100.0), st.floats(0.0, 100.0))
def test_more_effort_never_pays_back_sooner(d1, d2):
    lo, hi = sorted((d1, d2))
    r = be.compute(workload(), lo, hi)
    assert r["breakeven_runs"] <= r["p80"]["breakeven_runs"]


# ------------------------------------------------------------------------------------------ inputs and prices


def test_workload_from_catalog_names():
    w = be.workload_from({"gpu-instance": "p5.48xlarge", "trainium-instance": "trn1.32xlarge",
                          "gpu-hours-per-run": 10, "pricing": "on-demand"})
    assert (w.gpu_price, w.trainium_price, w.day_rate, w.relative_throughput) == (55.04, 21.50, 1200.0, 1.0)
    assert "2026-06" in w.trainium_price_source and "usage.ai" in w.trainium_price_source
    w = be.workload_from({"gpu-instance": "p5.48xlarge", "trainium-instance": "trn1.32xlarge", "gpu-hours-per-run": 10,
                          "pricing": "reserved-1yr", "gpu-price": 40.0})
    assert w.gpu_price == 40.0 and w.trainium_price == 12.60 and w.gpu_instance == "p5.48xlarge"


@pytest.mark.parametrize("values,message", [
    ({"gpu-instance": "p5.48xlarge", "trainium-instance": "trn2.48xlarge", "gpu-hours-per-run": 1},
     "trn2.48xlarge has no published on-demand price in the pricing catalog (it has: none); pass --trainium-price"),
    ({"gpu-instance": "h100-box", "trainium-price": 20, "gpu-hours-per-run": 1}, "unknown GPU instance 'h100-box'"),
    ({"gpu-instance": "trn1.32xlarge", "trainium-price": 20, "gpu-hours-per-run": 1}, "is a trainium instance"),
    ({"gpu-price": 10, "trainium-price": 20}, "pass --gpu-hours-per-run"),
    ({"trainium-price": 20, "gpu-hours-per-run": 1}, "no GPU price: pass --gpu-instance NAME"),
    ({"gpu-price": 10, "trainium-price": 20, "gpu-hours-per-run": 1, "relative-throughput": 0}, "must be greater than 0"),
    ({"gpu-price": 10, "trainium-price": 20, "gpu-hours-per-run": 1, "gpu-instances": 1.5}, "whole number"),
    ({"gpu-instance": "p5en.48xlarge", "trainium-instance": "trn1.2xlarge", "gpu-hours-per-run": 1, "pricing": "spot"},
     "trn1.2xlarge has no published spot price"),
])
def test_workload_errors_say_what_to_pass(values, message):
    with pytest.raises(ConfigError) as e:
        be.workload_from(values)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_pricing_catalog_every_price_dated_and_sourced():
    catalog = load_pricing()
    assert {"trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "p4d.24xlarge", "p5.48xlarge",
            "p5en.48xlarge"} <= set(catalog)
    for inst in catalog.values():
        assert inst.accelerators >= 1 and inst.accelerator_memory_gib > 0
        for kind, p in inst.prices.items():
            assert kind in PRICINGS and p.usd > 0 and p.date[:4] >= "2023" and p.source
            if p.low is not None:
                assert p.low <= p.usd <= p.high
    assert catalog["trn2.48xlarge"].prices == {}
    assert catalog["p5.48xlarge"].prices["on-demand"].usd == 55.04  # after the June-2025 cut, not 98.32
    inst, price = lookup("trn1.32xlarge", "trainium", "spot", "--trainium-price")
    assert (price.low, price.usd, price.high) == (6.45, 8.60, 10.75)


@pytest.mark.parametrize("text,message", [
    ('[[instance]]\nname = "x"\nfamily = "tpu"\naccelerators = 1\naccelerator_memory_gib = 1\n', "family must be one of"),
    ('[[instance]]\nname = "x"\nfamily = "gpu"\naccelerators = 1\naccelerator_memory_gib = 1\n'
     '[instance.prices.on-demand]\nusd = 1.0\ndate = "June"\nsource = "s"\n', "date must be YYYY-MM"),
    ('[[instance]]\nname = "x"\nfamily = "gpu"\naccelerators = 1\naccelerator_memory_gib = 1\n'
     '[instance.prices.on-demand]\nusd = 1.0\ndate = "2026-01"\n', "needs a source"),
    ('[[instance]]\nname = "x"\nfamily = "gpu"\naccelerators = 0\naccelerator_memory_gib = 1\n', "accelerators must be"),
])
def test_pricing_validation(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_pricing(text, "p.toml")


# ------------------------------------------------------------------------------------------ commands

FLAGS = ["--gpu-instance", "p5.48xlarge", "--trainium-instance", "trn1.32xlarge", "--gpu-hours-per-run", "100",
         "--relative-throughput", "0.8", "--runs-per-month", "4"]


def test_breakeven_json_from_a_scan_report(tmp_path):
    scan = run_cli("scan", str(FIXTURES / "cuda_extension"), "--format", "json", "-o", str(tmp_path / "scan.json"), cwd=tmp_path)
    assert scan.code == 0, scan.err
    effort = json.loads((tmp_path / "scan.json").read_text())["summary"]["effort"]
    r = run_cli("breakeven", "--report", "scan.json", *FLAGS, "--format", "json", cwd=tmp_path)
    assert r.code == 0, r.err
    data = json.loads(r.out)
    for key in ("gpu_cost_per_run", "trainium_cost_per_run", "saving_per_run", "port_cost", "breakeven_runs",
                "breakeven_months", "verdict", "p80", "inputs", "sensitivity"):
        assert key in data
    assert data["person_days"] == {"p50": effort["p50"], "p80": effort["p80"]}
    assert data["port_cost"] == pytest.approx(effort["p50"] * 1200, abs=0.01)
    assert data["breakeven_runs"] == pytest.approx(effort["p50"] * 1200 / 2816.5, abs=1e-3)
    assert data["p80"]["breakeven_runs"] == pytest.approx(effort["p80"] * 1200 / 2816.5, abs=1e-3)
    assert data["inputs"]["gpu_instance"] == "p5.48xlarge"


def test_breakeven_text_has_the_sensitivity_table(tmp_path):
    r = run_cli("breakeven", "--person-days", "10", *FLAGS, cwd=tmp_path)
    assert r.code == 0, r.err
    assert "Saving per run" in r.out and "4.3 runs" in r.out and "1.1 months" in r.out
    assert "Sensitivity: break-even months at P50" in r.out
    table = r.out.split("Sensitivity")[1].splitlines()
    assert table[1].split() == ["2", "4", "8", "16"] and table[2].split() == ["0.5", "5.0", "2.5", "1.2", "0.6"]
    assert "Verdict: trainium" in r.out


@pytest.mark.parametrize("args,message", [
    (["--person-days", "10", "--gpu-instance", "p5.48xlarge", "--trainium-instance", "trn2.48xlarge", "--gpu-hours-per-run", "1"],
     "trn2.48xlarge has no published on-demand price"),
    (["--gpu-price", "10", "--trainium-price", "5", "--gpu-hours-per-run", "1"], "no port effort"),
    (["--person-days", "-3", "--gpu-price", "1", "--trainium-price", "1", "--gpu-hours-per-run", "1"],
     "error: --person-days: must be at least 0, got -3.0"),
    (["--person-days", "3", "--gpu-price", "1", "--trainium-price", "1", "--gpu-hours-per-run", "1", "--relative-throughput", "0"],
     "error: --relative-throughput: must be greater than 0"),
    # 1e308 made the costs inf, the saving nan, and wrote Infinity/NaN into JSON and $nan into text
    (["--person-days", "3", "--gpu-price", "1", "--trainium-price", "1", "--gpu-hours-per-run", "1e308"],
     "error: --gpu-hours-per-run: must be between 1e-06 and 1e+09, got 1e+308"),
    (["--person-days", "3", "--gpu-price", "1", "--trainium-price", "1", "--gpu-hours-per-run", "1",
      "--relative-throughput", "1e-320"], "error: --relative-throughput: must be between 1e-06 and 1e+09"),
    (["--report", "missing.json", "--gpu-price", "10", "--trainium-price", "5", "--gpu-hours-per-run", "1"], "--report missing.json: cannot read it"),
    (["--report", "bad.json", "--person-days", "3", "--gpu-price", "1", "--trainium-price", "1", "--gpu-hours-per-run", "1"], "not both"),
    (["--report", "bad.json", "--gpu-price", "1", "--trainium-price", "1", "--gpu-hours-per-run", "1"], "not a neuron-ready scan report"),
])
def test_breakeven_errors_are_one_line(tmp_path, args, message):
    (tmp_path / "bad.json").write_text('{"summary": {}}')
    r = run_cli("breakeven", *args, cwd=tmp_path)
    assert r.code == 2 and message in r.err and r.err.count("\n") == 1 and "Traceback" not in r.err


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-6, 1e9), st.floats(1e-6, 1e9), st.integers(1, 1_000_000_000), st.floats(1e-6, 1e9),
       st.floats(1e-6, 1e9), st.floats(0.0, 1e9))
def test_every_allowed_workload_gives_finite_numbers(gpu, trn, n, hours, ratio, days):
    import math

    r = be.compute(workload(gpu_price=gpu, trainium_price=trn, gpu_instances=n, trainium_instances=n,
                            gpu_hours_per_run=hours, relative_throughput=ratio), days, days)
    numbers = [v for v in r.values() if isinstance(v, float)]
    assert numbers and all(math.isfinite(v) for v in numbers), r


def test_workload_config_with_flags_overriding(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.neuron-ready.workload]\n"
        'gpu-instance = "p5.48xlarge"\ntrainium-instance = "trn1.32xlarge"\n'
        "gpu-hours-per-run = 100\nrelative-throughput = 0.8\nruns-per-month = 4\nperson-days = 10\nday-rate = 1000\n"
    )
    r = run_cli("breakeven", "--format", "json", cwd=tmp_path)
    data = json.loads(r.out)
    assert data["port_cost"] == 10000.0 and data["inputs"]["day_rate"] == 1000.0
    r = run_cli("breakeven", "--format", "json", "--day-rate", "1500", "--relative-throughput", "1", cwd=tmp_path)
    data = json.loads(r.out)
    assert data["port_cost"] == 15000.0 and data["trainium_cost_per_run"] == 2150.0


def test_bad_workload_config_names_file_and_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.neuron-ready.workload]\ngpu-hours-per-run = 10\nruns-per-month = -2\n")
    r = run_cli("breakeven", "--person-days", "1", cwd=tmp_path)
    assert r.code == 2 and "pyproject.toml:3:" in r.err and "runs-per-month: must be greater than 0" in r.err


def repo_with(tmp_path, fixture: str, pyproject: str):
    """A copy of a fixture repository with this pyproject.toml."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / fixture, root)
    (root / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return root


WORKLOAD = ("[tool.neuron-ready.workload]\n"
            'gpu-instance = "p5.48xlarge"\ntrainium-instance = "trn1.32xlarge"\n'
            "gpu-hours-per-run = 100\nrelative-throughput = 0.8\nruns-per-month = 4\n")


def test_scan_adds_breakeven_when_a_workload_is_configured(tmp_path):
    root = repo_with(tmp_path, "cuda_extension", WORKLOAD)
    r = run_cli("scan", str(root), "--format", "json", cwd=tmp_path)
    data = json.loads(r.out)
    b = data["breakeven"]
    assert b["port_cost"] == pytest.approx(data["summary"]["effort"]["p50"] * 1200, abs=0.01)
    assert b["verdict"] == "trainium" and math.isclose(b["saving_per_run"], 2816.5)
    text = run_cli("scan", str(root), cwd=tmp_path).out
    assert "Break-even: " in text and "verdict: trainium" in text
    plain = run_cli("scan", str(FIXTURES / "cuda_extension"), "--format", "json", "--isolated", cwd=tmp_path)
    assert "breakeven" not in json.loads(plain.out)


def test_scan_workload_without_a_price_names_the_config(tmp_path):
    root = repo_with(tmp_path, "mainstream", '[project]\nname = "x"\n\n'
                     + WORKLOAD.replace("trn1.32xlarge", "trn2.48xlarge"))
    r = run_cli("scan", str(root), cwd=tmp_path)
    assert r.code == 2 and r.err.count("\n") == 1 and "Traceback" not in r.err
    assert "pyproject.toml:4:" in r.err and "trn2.48xlarge has no published on-demand price" in r.err
    assert "trainium-price in [tool.neuron-ready.workload]" in r.err


def test_scan_markdown_comment_carries_the_breakeven_line(tmp_path):
    prices = WORKLOAD.replace('gpu-instance = "p5.48xlarge"', "gpu-price = 55.04")
    root = repo_with(tmp_path, "cuda_extension", prices.replace('trainium-instance = "trn1.32xlarge"', "trainium-price = 21.50"))
    body = run_cli("scan", str(root), "--format", "markdown", cwd=tmp_path).out
    data = json.loads(run_cli("scan", str(root), "--format", "json", cwd=tmp_path).out)
    runs = data["summary"]["effort"]["p50"] * 1200 / 2816.5
    assert f"Break-even: {runs:.1f} runs ≈ {runs / 4:.1f} months at P50" in body
    assert body.index("Break-even:") < body.index("**Top drivers**")


def test_breakeven_adds_the_opt_in_features_the_user_keeps(tmp_path):
    from cli import run_cli
    from conftest import FIXTURES

    report = tmp_path / "scan.json"
    assert run_cli("scan", str(FIXTURES / "ctx_optin_kernel"), "--isolated", "--format", "json", "-o", str(report)).code == 0
    doc = json.loads(report.read_text())
    feature = doc["opt_in"][0]
    args = ["breakeven", "--report", str(report), "--gpu-price", "10", "--trainium-price", "5",
            "--gpu-hours-per-run", "10", "--format", "json"]
    base = json.loads(run_cli(*args).out)
    kept = json.loads(run_cli(*args, "--include-opt-in", feature["name"]).out)
    day_rate = base["inputs"]["day_rate"]
    assert kept["port_cost"] == pytest.approx(base["port_cost"] + feature["p50"] * day_rate)
    bad = run_cli(*args, "--include-opt-in", "nope")
    assert bad.code == 2 and "no opt-in feature named nope" in bad.err and feature["name"] in bad.err
