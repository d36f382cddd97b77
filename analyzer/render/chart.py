"""The break-even chart as an inline PNG (base64), drawn with matplotlib from breakeven.cumulative.

matplotlib is an optional extra (`pip install 'neuron-ready[html]'`); without it `png_base64`
returns None and the HTML report says how to get the chart. Drawing only: the numbers come in.
"""

from __future__ import annotations

import base64
import io
import warnings

from .safe import visible

INSTALL_HINT = "pip install 'neuron-ready[html]'"
GPU_COLOR, TRN_COLOR = "#c0392b", "#1f6fb2"
LABEL_CHARS = 60  # an instance name longer than this is cut in the legend (the tables show it whole)


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _label(text: str) -> str:
    """Instance names come from the scanned tree's config: shown literally. matplotlib reads text
    between two `$` as math (a syntax error there is an exception at draw time)."""
    text = visible(text)
    text = text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"
    return text.replace("$", r"\$")


def png_base64(series: dict, gpu_label: str, trn_label: str) -> str | None:
    """The chart as base64 PNG bytes, or None when matplotlib is not installed."""
    gpu_label, trn_label = _label(gpu_label), _label(trn_label)
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)  # no display; the same bytes on every machine
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        return None
    fig = Figure(figsize=(8, 4.2), dpi=100)
    ax = fig.add_subplot()
    runs = series["runs"]
    ax.plot(runs, series["gpu"], color=GPU_COLOR, lw=2.2, label=f"{gpu_label}: cost per run x runs")
    ax.plot(runs, series["trainium_p50"], color=TRN_COLOR, lw=2.2, label=f"{trn_label}: port (P50) + cost per run x runs")
    ax.plot(runs, series["trainium_p80"], color=TRN_COLOR, lw=1.2, ls="--", label=f"{trn_label}: port at P80")
    ax.fill_between(runs, series["trainium_p50"], series["trainium_p80"], color=TRN_COLOR, alpha=0.18,
                    lw=0, label="P50-P80 port cost band")
    for key, marker in (("p50", "o"), ("p80", "s")):
        point = series["crossings"][key]
        if point is not None:
            ax.plot(*point, marker=marker, ms=9, color="black", zorder=5, ls="none",
                    label=f"break-even at {key.upper()}: {point[0]:.1f} runs")
            ax.annotate(f"{point[0]:.1f} runs", point, xytext=(8, -16), textcoords="offset points", fontsize=9)
    ax.set_xlabel("training runs")
    ax.set_ylabel("cumulative cost (USD)")
    ax.set_xlim(0, runs[-1])
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"${v:,.0f}"))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    buf = io.BytesIO()
    # A label too long to fit, or with a glyph the font lacks: the chart is still drawn; matplotlib's
    # warning would echo the tree's text to stderr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout()
        fig.savefig(buf, format="png", metadata={"Software": None})  # no version stamp: same tree, same bytes
    return base64.b64encode(buf.getvalue()).decode("ascii")
