"""The click group and the one place where errors become one-line messages and exit codes.

Exit codes: 0 done, 1 a --fail-on threshold was met, 2 usage or configuration error,
3 internal error (a bug; NEURON_READY_DEBUG=1 shows the traceback).
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from .. import __version__
from ..baseline import ReportFileError
from ..catalog import CatalogError
from ..config import ConfigError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UserError(Exception):
    """A problem with what the user asked for: one line, exit 2."""


def split_list(values: tuple[str, ...]) -> list[str]:
    """Options that may be repeated or comma-separated: --select NR10,NR11 --select device."""
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


class Group(click.Group):
    # name -> "module:attribute": a command's module (and what it imports) loads only when that
    # command runs, so `scan` does not pay for the GitHub client or the trace machinery.
    lazy: dict[str, str] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy:
            module, attr = self.lazy[name].split(":")
            self.add_command(getattr(importlib.import_module(module, __package__), attr), name)
        return super().get_command(ctx, name)

    def main(self, args=None, prog_name=None, **extra):  # noqa: D401 - click's signature
        try:
            rv = super().main(args=args, prog_name=prog_name or "neuron-ready", standalone_mode=False, **extra)
        except click.exceptions.Abort:
            click.echo("neuron-ready: aborted", err=True)
            sys.exit(EXIT_FAIL)
        except click.ClickException as e:
            e.show()
            sys.exit(EXIT_USAGE if e.exit_code == 2 or isinstance(e, click.UsageError) else e.exit_code)
        except (ConfigError, CatalogError, UserError, ReportFileError) as e:
            click.echo(f"neuron-ready: error: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except BrokenPipeError:
            sys.stderr.close()  # the reader went away (e.g. `| head`); nothing more to say
            sys.exit(EXIT_OK)
        except KeyboardInterrupt:
            click.echo("neuron-ready: interrupted", err=True)
            sys.exit(130)
        except Exception as e:  # noqa: BLE001 - the last line of defence: never a traceback
            if os.environ.get("NEURON_READY_DEBUG"):
                raise
            click.echo(
                f"neuron-ready: internal error: {type(e).__name__}: {e} "
                "(please report it; NEURON_READY_DEBUG=1 shows the traceback)",
                err=True,
            )
            sys.exit(EXIT_INTERNAL)
        sys.exit(rv if isinstance(rv, int) else EXIT_OK)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="neuron-ready")
def main() -> None:
    """How much work is it to move this PyTorch training code from NVIDIA GPUs to AWS Trainium,
    and when does the port pay back?

    \b
    neuron-ready scan ./repo               findings, effort class and readiness score
    neuron-ready fix --diff ./repo         rewrite the CUDA plumbing into device-agnostic PyTorch
    neuron-ready rules [NR1001]            the rule catalog, or one rule's page
    neuron-ready trace pkg.model:build     the model's real aten ops, forward and backward
    neuron-ready diff base.json head.json  what a change adds and removes
    neuron-ready hook FILES...             the pre-commit hook
    neuron-ready ci                        what the GitHub Action runs
    neuron-ready comment body.md           create or update the sticky PR comment
    neuron-ready breakeven --report F ...  when the port pays for itself
    """


def exit_on_fail(ctx: click.Context, reasons: list[str]) -> None:
    """Exit 1 with the reasons on stderr when a --fail-on threshold is met."""
    if reasons:
        click.echo("neuron-ready: --fail-on met: " + "; ".join(reasons), err=True)
        ctx.exit(1)


def write_output(text: str, output: str | None) -> None:
    if output is None or output == "-":
        click.echo(text, nl=False)
        return
    path = os.path.abspath(output)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
    except OSError as e:
        raise UserError(f"cannot write {output}: {e.strerror or e}") from None
