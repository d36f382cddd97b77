"""`neuron-ready trace MODULE:FACTORY`: run the model on fake tensors and judge its real aten ops.

The only command that executes user code, and only the factory the user names. torch is imported
here lazily (through ..trace), so the base install runs every other command without it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click

from ..discover import Discovery
from ..engine import active_catalog, run_scan
from ..report import build_report
from ..sources import FileResult
from ..trace.data import TraceRequest, TraceSetupError, parse_inputs
from ..trace.merge import merge, status_counts
from ..trace.ops import OpJudge, trace_findings, trace_summary
from .base import UserError
from .scan import build_settings, color_option, emit_report, report_options, scan_options


@click.command("trace")
@click.argument("factory", metavar="MODULE:FACTORY")
@click.option("--inputs", multiple=True, metavar="SPEC",
              help="Example inputs when the factory returns none: NAME:DTYPE[DIMS] (keyword) or DTYPE[DIMS] "
                   "(positional), e.g. 'input_ids:int64[8,2048]'; repeatable or space-separated.")
@click.option("--train/--no-train", default=True, show_default=True,
              help="Trace forward and backward from a loss (train mode), or forward only (eval mode).")
@click.option("--dynamic", is_flag=True, help="Make the batch and sequence dimensions of the inputs symbolic.")
@click.option("--scan", "scan_path", type=click.Path(path_type=Path), metavar="PATH",
              help="Also scan PATH statically and merge: static findings are marked confirmed, traced or not-traced.")
@click.option("--graph-breaks/--no-graph-breaks", default=True, show_default=True,
              help="Find TorchDynamo graph breaks with torch._dynamo.explain.")
@report_options
@scan_options
@color_option
@click.pass_context
def trace_cmd(ctx, factory, inputs, train, dynamic, scan_path, graph_breaks, fmt, output, fail_on, statistics, min_confidence,
              target, select, ignore, exclude, config_path, isolated, max_file_size, no_gitignore, color):
    """Trace a model's real aten graph, forward and backward, on fake tensors (no GPU, no weights).

    MODULE:FACTORY names a callable that returns the model, or (model, inputs): a module path
    (pkg.models:build), a file (path/to/model.py:build), or hf:CONFIG.json for a Hugging Face
    config file. Findings point at the user's own source lines.
    """
    if importlib.util.find_spec("torch") is None:
        raise UserError("`neuron-ready trace` needs PyTorch: pip install 'neuron-ready[trace]'")
    settings = build_settings((scan_path,) if scan_path else (), target, select, ignore, exclude, config_path,
                              isolated, max_file_size, no_gitignore, fail_on)
    try:
        request = TraceRequest(factory, Path(settings.root), parse_inputs(inputs), train, dynamic, graph_breaks)
        from ..trace.run import run_trace  # imports torch

        result = run_trace(request)
    except TraceSetupError as e:
        raise UserError(str(e)) from None
    if result.user_error and result.stopped is not None:  # no report: it would count ops of a run that failed
        site = result.stopped.site
        where = f" at {site.path}:{site.line}" + (f" in {site.function}" if site.function else "") if site else ""
        phase = "backward" if result.forward_done else "forward"
        raise UserError(f"the model's {phase} raised {result.stopped.message}{where}; fix the factory or --inputs and trace again")
    catalog = active_catalog(settings)
    judge = OpJudge(catalog)
    traced, suppressed = trace_findings(result, judge, settings.target, str(settings.root), settings.per_path_ignores)
    trace_result = FileResult(rel="", kind="trace", suppressed=suppressed)
    if scan_path:
        def extend(results: list[FileResult]) -> list[FileResult]:
            static = [f for r in results for f in r.findings]
            trace_result.findings = merge(static, traced, result, str(settings.root))
            return results + [trace_result]

        report = run_scan(settings, catalog, extend).report
    else:
        trace_result.findings = traced
        report = build_report(settings, catalog, Discovery(), [trace_result])
    summary = trace_summary(result, judge)
    summary["findings"] = status_counts(report.findings)
    report.extra["trace"] = summary
    emit_report(ctx, report, settings, fmt, output, color, None, min_confidence, statistics)
