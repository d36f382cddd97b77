"""Break-even: prices x hours x relative throughput -> saving per run, port cost, runs and months to pay back.

    GPU cost per run      = GPU price/h x GPU instances x GPU hours per run
    Trainium hours        = GPU hours per run / relative throughput
    Trainium cost per run = Trainium price/h x Trainium instances x Trainium hours
    saving per run        = GPU cost per run - Trainium cost per run
    port cost             = person-days x day rate
    break-even runs       = port cost / saving per run   (never when the saving is not positive)
    break-even months     = break-even runs / runs per month

Inputs come from `[tool.neuron-ready.workload]` and flags (flags win); prices from pricing.py unless
given. Pure arithmetic: renderers format the dictionaries returned here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .config import ConfigError, number_problem, workload_problem
from .numbers import money as _usd
from .pricing import CURRENCY, REGION, lookup

DEFAULT_DAY_RATE = 1200.0  # USD per loaded engineer-day; docs/effort-model.md explains the figure
DEFAULT_HORIZON_MONTHS = 12.0  # the port must pay back within this many months for a "trainium" verdict
SENSITIVITY_THROUGHPUT = (0.5, 0.75, 1.0, 1.25, 1.5)
DEFAULT_RUNS_GRID = (1.0, 2.0, 4.0, 8.0)


@dataclass
class Workload:
    gpu_price: float
    trainium_price: float
    gpu_hours_per_run: float
    gpu_instances: int = 1
    trainium_instances: int = 1
    relative_throughput: float = 1.0
    runs_per_month: float | None = None
    day_rate: float = DEFAULT_DAY_RATE
    horizon_months: float = DEFAULT_HORIZON_MONTHS
    pricing: str = "on-demand"
    gpu_instance: str | None = None
    trainium_instance: str | None = None
    gpu_price_source: str = ""
    trainium_price_source: str = ""


# ------------------------------------------------------------------------------------------ inputs


def workload_number(values: dict, key: str, *, integer: bool = False, positive: bool = True, minimum: float | None = None):
    v = values.get(key)
    if v is None:
        return None
    problem = number_problem(v, integer=integer, positive=positive, minimum=minimum)
    if problem:
        raise ConfigError(f"workload {key}: {problem}")
    return int(v) if integer else float(v)


def _price(values: dict, side: str, pricing: str) -> tuple[float, str | None, str]:
    flag = f"--{side}-price"
    price = workload_number(values, f"{side}-price")
    name = values.get(f"{side}-instance")
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"workload {side}-instance: expected an instance name, got {name!r}")
    if price is not None:
        return price, name, f"{flag} {price:g} {CURRENCY}/h"
    label = "GPU" if side == "gpu" else "Trainium"
    if not name:
        example = "p5.48xlarge" if side == "gpu" else "trn1.32xlarge"
        raise ConfigError(f"no {label} price: pass --{side}-instance NAME (e.g. {example}) or {flag} USD-per-hour "
                          f"({side}-instance or {side}-price in [tool.neuron-ready.workload])")
    _, p = lookup(name, "gpu" if side == "gpu" else "trainium", pricing, flag)
    return p.usd, name, f"{name} {pricing} {p.usd:g} {CURRENCY}/h in {REGION} ({p.date}; {p.source})"


def workload_from(values: dict) -> Workload:
    """A Workload from dashed keys (config values overlaid with flags). Raises ConfigError."""
    pricing = values.get("pricing", "on-demand")
    problem = workload_problem("pricing", pricing)
    if problem:
        raise ConfigError(f"workload pricing: {problem}")
    hours = workload_number(values, "gpu-hours-per-run")
    if hours is None:
        raise ConfigError("no GPU hours per run: pass --gpu-hours-per-run H (wall-clock hours of one training run on "
                          "the GPU cluster; gpu-hours-per-run in [tool.neuron-ready.workload])")
    gpu_price, gpu_name, gpu_src = _price(values, "gpu", pricing)
    trn_price, trn_name, trn_src = _price(values, "trainium", pricing)
    day_rate = workload_number(values, "day-rate", positive=False, minimum=0.0)
    horizon = workload_number(values, "horizon-months")
    return Workload(
        gpu_price=gpu_price,
        trainium_price=trn_price,
        gpu_hours_per_run=hours,
        gpu_instances=workload_number(values, "gpu-instances", integer=True) or 1,
        trainium_instances=workload_number(values, "trainium-instances", integer=True) or 1,
        relative_throughput=workload_number(values, "relative-throughput") or 1.0,
        runs_per_month=workload_number(values, "runs-per-month"),
        day_rate=DEFAULT_DAY_RATE if day_rate is None else day_rate,
        horizon_months=horizon or DEFAULT_HORIZON_MONTHS,
        pricing=pricing,
        gpu_instance=gpu_name,
        trainium_instance=trn_name,
        gpu_price_source=gpu_src,
        trainium_price_source=trn_src,
    )


def configured(values: dict) -> bool:
    """A workload is configured once it says how long a run takes; the rest is then required."""
    return values.get("gpu-hours-per-run") is not None


# ------------------------------------------------------------------------------------------ arithmetic


def per_run(w: Workload, relative_throughput: float | None = None) -> tuple[float, float, float]:
    """(GPU cost, Trainium cost, Trainium hours) of one run."""
    r = w.relative_throughput if relative_throughput is None else relative_throughput
    gpu = w.gpu_price * w.gpu_instances * w.gpu_hours_per_run
    trn_hours = w.gpu_hours_per_run / r
    return gpu, w.trainium_price * w.trainium_instances * trn_hours, trn_hours


def payback(port_cost: float, saving: float, runs_per_month: float | None, horizon_months: float) -> dict:
    """`verdict` is "gpu" when the port never pays back or pays back only after the horizon,
    "trainium" when it pays back within it, and None without a run rate: there is then no time
    horizon, only a number of runs (`verdict_text` says which)."""
    runs = port_cost / saving if saving > 0 else None
    months = runs / runs_per_month if runs is not None and runs_per_month else None
    if saving <= 0:
        verdict, text = "gpu", "gpu: Trainium never pays back"
    elif months is None:
        verdict, text = None, f"pays back after {runs:,.1f} runs"
    elif months <= horizon_months:
        verdict, text = "trainium", "trainium"
    else:
        verdict, text = "gpu", "gpu"
    return {"port_cost": port_cost, "breakeven_runs": runs, "breakeven_months": months, "verdict": verdict,
            "verdict_text": text}


def compute(w: Workload, p50: float, p80: float) -> dict:
    """The break-even at the P50 and the P80 effort, with every input used."""
    gpu, trn, trn_hours = per_run(w)
    saving = gpu - trn
    at50 = payback(p50 * w.day_rate, saving, w.runs_per_month, w.horizon_months)
    at80 = payback(p80 * w.day_rate, saving, w.runs_per_month, w.horizon_months)
    out = {
        "gpu_cost_per_run": gpu,
        "trainium_cost_per_run": trn,
        "saving_per_run": saving,
        "trainium_hours_per_run": trn_hours,
        **at50,
        "p80": at80,
        "person_days": {"p50": p50, "p80": p80},
        "inputs": asdict(w),
    }
    return _rounded(out)


def sensitivity(w: Workload, person_days: float, runs_grid: tuple[float, ...] | None = None,
                throughputs: tuple[float, ...] = SENSITIVITY_THROUGHPUT) -> dict:
    """Break-even months (or runs, without a run rate) over relative throughput x runs per month."""
    if runs_grid is None:
        k = w.runs_per_month
        runs_grid = tuple(sorted({k / 2, k, 2 * k, 4 * k})) if k else DEFAULT_RUNS_GRID
    rows = []
    for r in throughputs:
        gpu, trn, _ = per_run(w, r)
        cells = []
        for k in runs_grid:
            res = payback(person_days * w.day_rate, gpu - trn, k, w.horizon_months)
            cells.append(None if res["breakeven_months"] is None else round(res["breakeven_months"], 2))
        rows.append({"relative_throughput": r, "breakeven_months": cells})
    return {"person_days": round(person_days, 2), "runs_per_month": list(runs_grid), "rows": rows}


def summary_line(result: dict) -> str:
    """One line for the scan summary."""
    runs = result["breakeven_runs"]
    if runs is None:
        return (f"Break-even: never (Trainium costs {_usd(-result['saving_per_run'])} more per run than the GPU)")
    months = result["breakeven_months"]
    when = f" ≈ {months:.1f} months" if months is not None else ""
    r80 = result["p80"]["breakeven_runs"]
    verdict = f" · verdict: {result['verdict']}" if result["verdict"] else " · no verdict without runs per month"
    return (f"Break-even: {runs:.1f} runs{when} at P50 ({r80:.1f} runs at P80); saves {_usd(result['saving_per_run'])} "
            f"per run after a {_usd(result['port_cost'])} port{verdict}")


def _rounded(d):
    if isinstance(d, dict):
        return {k: _rounded(v) for k, v in d.items()}
    if isinstance(d, float):
        return round(d, 4)
    return d


def cumulative(result: dict, points: int = 2) -> dict:
    """Cumulative cost against runs for the chart: the GPU line, Trainium with the P50 and the P80
    port cost, and the runs axis long enough to show the P80 crossing (or 12 runs when never)."""
    gpu, trn = result["gpu_cost_per_run"], result["trainium_cost_per_run"]
    r50, r80 = result["breakeven_runs"], result["p80"]["breakeven_runs"]
    crossings = [r for r in (r50, r80) if r is not None]
    last = max(12.0, math.ceil(1.5 * max(crossings))) if crossings else 12.0
    runs = [last * i / (points - 1) for i in range(points)]
    return {
        "runs": runs,
        "gpu": [gpu * n for n in runs],
        "trainium_p50": [result["port_cost"] + trn * n for n in runs],
        "trainium_p80": [result["p80"]["port_cost"] + trn * n for n in runs],
        # (runs, cost) where Trainium with the port catches up with the GPU
        "crossings": {"p50": None if r50 is None else (r50, gpu * r50), "p80": None if r80 is None else (r80, gpu * r80)},
    }
