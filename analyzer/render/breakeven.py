"""The break-even as text: per-run costs, port cost and break-even at P50 and P80, the verdict and
a sensitivity table. Formatting only: the numbers come from breakeven.compute / sensitivity."""

from __future__ import annotations

from ..numbers import money as _money
from ..pricing import CURRENCY, REGION, load_pricing
from .safe import visible


def _runs(r: float | None) -> str:
    return "never" if r is None else f"{r:,.1f} runs"


def _months(m: float | None) -> str:
    return "-" if m is None else f"{m:,.1f} months"


def render_text(result: dict, sens: dict) -> str:
    # instance names and price sources can come from the scanned tree's config: one line each
    w = {k: visible(v) if isinstance(v, str) else v for k, v in result["inputs"].items()}
    gpu_name = w["gpu_instance"] or "GPU"
    trn_name = w["trainium_instance"] or "Trainium"
    p80 = result["p80"]
    lines = [
        f"Break-even: {gpu_name} x{w['gpu_instances']} vs {trn_name} x{w['trainium_instances']} ({w['pricing']}), "
        f"{w['gpu_hours_per_run']:g} GPU hours per run, relative throughput {w['relative_throughput']:g}",
        "",
        f"  GPU cost per run        {_money(result['gpu_cost_per_run']):>14}   "
        f"{_money(w['gpu_price'])}/h x {w['gpu_instances']} x {w['gpu_hours_per_run']:g} h",
        f"  Trainium cost per run   {_money(result['trainium_cost_per_run']):>14}   "
        f"{_money(w['trainium_price'])}/h x {w['trainium_instances']} x {result['trainium_hours_per_run']:g} h "
        f"({w['gpu_hours_per_run']:g} h / {w['relative_throughput']:g})",
        f"  Saving per run          {_money(result['saving_per_run']):>14}",
        "",
        f"  {'':22}  {'P50':>14}   {'P80':>14}",
        f"  {'Port effort':22}  {result['person_days']['p50']:>11.1f} pd   {result['person_days']['p80']:>11.1f} pd",
        f"  {'Port cost':22}  {_money(result['port_cost']):>14}   {_money(p80['port_cost']):>14}   at {_money(w['day_rate'])} per day",
        f"  {'Break-even':22}  {_runs(result['breakeven_runs']):>14}   {_runs(p80['breakeven_runs']):>14}",
    ]
    if w["runs_per_month"]:
        lines.append(f"  {'':22}  {_months(result['breakeven_months']):>14}   {_months(p80['breakeven_months']):>14}   "
                     f"at {w['runs_per_month']:g} runs per month")
    lines += ["", f"Verdict: {result['verdict_text']} at P50, {p80['verdict_text']} at P80" + _why(result, w), ""]
    lines.append(f"Sensitivity: break-even months at P50 ({sens['person_days']:g} person-days); "
                 "rows: relative throughput, columns: runs per month")
    grid = sens["runs_per_month"]
    lines.append(f"  {'':>8}" + "".join(f"{k:>10g}" for k in grid))
    for row in sens["rows"]:
        cells = "".join(f"{'never' if m is None else f'{m:.1f}':>10}" for m in row["breakeven_months"])
        lines.append(f"  {row['relative_throughput']:>8g}{cells}")
    lines += ["", f"Prices ({CURRENCY}; catalog prices are {REGION}):", f"  GPU: {w['gpu_price_source']}",
              f"  Trainium: {w['trainium_price_source']}"]
    return "\n".join(lines) + "\n"


def _why(result: dict, w: dict) -> str:
    if result["saving_per_run"] <= 0:
        return " (Trainium costs more per run at this throughput: the port never pays back)"
    if result["breakeven_months"] is None:
        return " (cheaper per run; without --runs-per-month there is no time horizon to judge it against)"
    return f" (pays back within the {w['horizon_months']:g}-month horizon)" if result["verdict"] == "trainium" else \
        f" (pays back only after the {w['horizon_months']:g}-month horizon)"


def instances_text() -> str:
    """`breakeven --list-instances`: the pricing catalog with every price's date and source."""
    lines = [f"Pricing catalog: {CURRENCY} per instance-hour, Linux, {REGION}", ""]
    for inst in sorted(load_pricing().values(), key=lambda i: (i.family, i.name)):
        lines.append(f"{inst.name} ({inst.family}): {inst.accelerators} x {inst.accelerator}, "
                     f"{inst.accelerator_memory_gib:g} GiB accelerator memory" + (f"; {inst.note}" if inst.note else ""))
        if not inst.prices:
            lines.append("  no published price: pass --gpu-price / --trainium-price")
        for kind, p in inst.prices.items():
            spread = f" (observed {_money(p.low)}–{_money(p.high)})" if p.low is not None else ""
            lines.append(f"  {kind:<13} {_money(p.usd)}/h{spread}  {p.date}  {p.source}")
        lines.append("")
    return "\n".join(lines)
