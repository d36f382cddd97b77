"""The click group and the one place where errors become one-line messages and exit codes.

Exit codes: 0 done, 1 a --fail-on threshold was met, 2 usage or configuration error (and output
that cannot be written, e.g. a full disk), 3 internal error (a bug; NEURON_READY_DEBUG=1 shows the
traceback), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import errno
import importlib
import os
import re
import sys
import tempfile

import click

from .. import __version__
from ..baseline import ReportFileError
from ..catalog import CatalogError
from ..config import ConfigError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
_OUTPUT_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


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
            sys.stdout.flush()  # a full disk shows here, not as a warning at interpreter exit
        except click.exceptions.Abort:  # click's form of Ctrl-C: not "fail-on met" (1)
            click.echo("neuron-ready: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
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
            sys.exit(EXIT_INTERRUPTED)
        except OSError as e:
            if e.errno not in _OUTPUT_FULL or os.environ.get("NEURON_READY_DEBUG"):
                raise
            try:  # what is still buffered would fail again at exit: let it go nowhere
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except (OSError, ValueError):
                pass
            click.echo(f"neuron-ready: error: cannot write the output: {e.strerror or e}", err=True)
            sys.exit(EXIT_USAGE)
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


def check_api_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--api-url (or $GITHUB_API_URL): an http(s) URL with a host, or empty for the default."""
    from urllib.parse import urlsplit

    if not value:
        return value
    try:
        parts = urlsplit(value)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 1) > 0
    except ValueError:  # e.g. a port that is not a number, or out of range
        ok = False
    if not ok:
        raise click.BadParameter(f"{value!r} is not an http(s) URL like https://api.github.com", ctx, param)
    return value


def check_repo(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--repo (or $GITHUB_REPOSITORY): OWNER/NAME, or empty for "not given"."""
    if value and not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", value):
        raise click.BadParameter(f"{value!r} is not OWNER/NAME", ctx, param)
    return value


def check_file(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A file option that may come from an environment variable: empty is "not given"."""
    if value and not os.path.isfile(value):
        raise click.BadParameter(f"no such file: {value}", ctx, param)
    return value


def exit_on_fail(ctx: click.Context, reasons: list[str], fail_on: list[str] | None = None, analysed: bool = True) -> None:
    """Exit 1 with the reasons on stderr when a --fail-on threshold is met. A report that analysed
    nothing cannot pass a gate: with --fail-on it is a usage error (exit 2), never a green run."""
    if fail_on and not analysed:
        raise UserError("--fail-on: nothing was analysed (no Python, notebook or native source), so there is "
                        "nothing to judge; check the path, --exclude and --max-file-size")
    if reasons:
        click.echo("neuron-ready: --fail-on met: " + "; ".join(reasons), err=True)
        ctx.exit(1)


def use_color(flag: bool | None, output: str | None) -> bool:
    """--color/--no-color first, then NO_COLOR (https://no-color.org), then FORCE_COLOR, else
    colour only when writing to a terminal."""
    if flag is not None:
        return flag
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return output in (None, "-") and sys.stdout.isatty()


def write_output(text: str, output: str | None, color: bool = False) -> None:
    """Standard output or FILE (its missing folders are created, as Ruff's --output-file does).
    `color` keeps the ANSI codes click would strip from a pipe or a file."""
    if output is None or output == "-":
        click.echo(text, nl=False, color=color or None)
        return
    if not color:
        text = click.unstyle(text)
    path = os.path.abspath(output)
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.isfile(path) and os.path.exists(path):  # /dev/null, a FIFO: write in place
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            return
        # a full disk must leave the old file, not a truncated one: write beside it, then rename
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=os.path.dirname(path))
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise UserError(f"cannot write {output}: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
