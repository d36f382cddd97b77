"""`neuron-ready breakeven`: when does the port pay for itself? Prices x hours x throughput vs port cost."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .. import breakeven as be
from ..config import PRICINGS, ConfigError, load_settings
from ..pricing import NATIVE_TRAINIUM
from ..render.breakeven import instances_text, render_text
from .base import UserError, split_list, write_output

# Flag (python name) -> workload key in [tool.neuron-ready.workload].
_FLAGS = {
    "gpu_instance": "gpu-instance", "trainium_instance": "trainium-instance", "gpu_price": "gpu-price",
    "trainium_price": "trainium-price", "gpu_instances": "gpu-instances", "trainium_instances": "trainium-instances",
    "pricing": "pricing", "gpu_hours_per_run": "gpu-hours-per-run", "relative_throughput": "relative-throughput",
    "runs_per_month": "runs-per-month", "day_rate": "day-rate", "person_days": "person-days",
    "horizon_months": "horizon-months",
}


def read_report(path: Path, include: list[str] = ()) -> tuple[float, float, str | None]:
    """P50 and P80 person-days and the target of a `neuron-ready scan --format json` report: its
    must-port part, plus the opt-in features named in `include` ("all" for every one). A feature adds
    its own P50 and P80: summed percentiles, a little above what one joint simulation would give."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"--report {path}: cannot read it: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"--report {path}: not JSON ({e})") from None
    try:
        effort = data["summary"]["effort"]
        p50, p80 = float(effort["p50"]), float(effort["p80"])
    except (KeyError, TypeError, ValueError):
        raise UserError(f"--report {path}: not a neuron-ready scan report (no summary.effort.p50 / p80); "
                        "write one with `neuron-ready scan --format json -o scan.json`") from None
    if include:
        parts = {str(p.get("name")): p for p in data.get("opt_in") or [] if isinstance(p, dict)}
        unknown = sorted(set(include) - set(parts) - {"all"})
        if unknown:
            raise UserError(f"--include-opt-in: {path} has no opt-in feature named {', '.join(unknown)} "
                            f"(its features: {', '.join(sorted(parts)) or 'none'})")
        for name, part in sorted(parts.items()):
            if "all" in include or name in include:
                try:
                    p50, p80 = p50 + float(part["p50"]), p80 + float(part["p80"])
                except (KeyError, TypeError, ValueError):
                    raise UserError(f"--report {path}: opt-in feature {name!r} has no p50 / p80") from None
    if data["summary"].get("score", 0) is None:
        raise UserError(f"--report {path}: the scan analysed nothing, so it has no effort estimate")
    target = data.get("target")
    return p50, p80, target if isinstance(target, str) else None


def target_warning(target: str, instance: str | None) -> str | None:
    """A Trainium instance the scanned target cannot run on (TorchNeuron needs Trn2/Trn3)."""
    if target == "native" and instance and not instance.startswith(NATIVE_TRAINIUM) and instance.startswith("trn"):
        return (f"{instance} is a Trn1 instance, which the native target (TorchNeuron) does not support: "
                "price a trn2/trn3 instance, or scan with --target xla")
    return None


@click.command("breakeven")
@click.option("--gpu-instance", metavar="NAME", help="GPU instance type from the pricing catalog (e.g. p5.48xlarge).")
@click.option("--trainium-instance", metavar="NAME", help="Trainium instance type (e.g. trn1.32xlarge).")
@click.option("--gpu-price", type=float, metavar="USD", help="GPU price per instance-hour (overrides the catalog).")
@click.option("--trainium-price", type=float, metavar="USD", help="Trainium price per instance-hour (overrides the catalog).")
@click.option("--gpu-instances", type=int, metavar="N", help="GPU instances in the cluster (default 1).")
@click.option("--trainium-instances", type=int, metavar="M", help="Trainium instances in the cluster (default 1).")
@click.option("--pricing", type=click.Choice(PRICINGS), help="Which catalog price to use (default on-demand).")
@click.option("--gpu-hours-per-run", type=float, metavar="H", help="Wall-clock hours of one training run on the GPU cluster.")
@click.option("--relative-throughput", type=float, metavar="R", help="Trainium cluster throughput as a fraction of the GPU cluster's (default 1.0).")
@click.option("--runs-per-month", type=float, metavar="K", help="Training runs per month (for months to break even).")
@click.option("--person-days", type=float, metavar="D", help="Port effort in person-days (instead of --report).")
@click.option("--report", "report_path", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="A `scan --format json` report: use its P50 and P80 effort (the must-port part).")
@click.option("--include-opt-in", "include_opt_in", multiple=True, metavar="FEATURE,...|all",
              help="With --report: add these opt-in features' effort (the ones you will keep).")
@click.option("--day-rate", type=float, metavar="USD", help=f"Loaded engineer cost per day (default {be.DEFAULT_DAY_RATE:g}).")
@click.option("--horizon-months", type=float, metavar="M", help=f"The port must pay back within this many months (default {be.DEFAULT_HORIZON_MONTHS:g}).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", metavar="FILE", help="Write to FILE instead of standard output.")
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), help="Config file with [tool.neuron-ready.workload].")
@click.option("--isolated", is_flag=True, help="Ignore configuration files.")
@click.option("--list-instances", is_flag=True, help="Print the pricing catalog (instances, prices, dates, sources) and exit.")
def breakeven_cmd(report_path, include_opt_in, fmt, output, config_path, isolated, list_instances, **flags):
    """When does porting to Trainium pay for itself? Inputs come from [tool.neuron-ready.workload]
    and these flags (flags win); prices from the dated pricing catalog unless given.

    \b
    neuron-ready scan --target xla --format json -o scan.json   # trn1 runs the xla target
    neuron-ready breakeven --report scan.json --gpu-instance p5.48xlarge \\
        --trainium-instance trn1.32xlarge --gpu-hours-per-run 100 --relative-throughput 0.8 --runs-per-month 4
    """
    if list_instances:
        write_output(instances_text(), output)
        return
    settings = load_settings(Path("."), config_path, isolated)
    target = settings.target
    values = dict(settings.workload)
    for name, key in _FLAGS.items():
        if flags.get(name) is not None:
            values[key] = flags[name]
    if include_opt_in and report_path is None:
        raise UserError("--include-opt-in needs --report (the features and their effort come from a scan report)")
    if report_path is not None and flags.get("person_days") is not None:
        raise UserError("give the effort once: --report FILE or --person-days D, not both")
    given = {key for name, key in _FLAGS.items() if flags.get(name) is not None}
    try:
        if report_path is not None:
            p50, p80, target = read_report(report_path, split_list(include_opt_in))
            target = target or settings.target
        elif values.get("person-days") is not None:
            p50 = p80 = be.workload_number(values, "person-days", positive=False, minimum=0.0)
        else:
            raise UserError("no port effort: pass --report scan.json (a `neuron-ready scan --format json` report) or --person-days D")
        workload = be.workload_from(values)
    except ConfigError as e:
        # the config's values were checked (with file and line) when it was read: a bad value here is a flag's
        key = next((k for k in given if str(e).startswith(f"workload {k}:")), None)
        if key is None:
            raise
        raise UserError(f"--{str(e).removeprefix('workload ')}") from None
    warning = target_warning(target, workload.trainium_instance)
    if warning:
        click.echo(f"neuron-ready: warning: {warning}", err=True)
    result = be.compute(workload, p50, p80)
    sens = be.sensitivity(workload, p50)
    if fmt == "json":
        text = json.dumps({**result, "sensitivity": sens}, indent=2) + "\n"
    else:
        text = render_text(result, sens)
    write_output(text, output)
