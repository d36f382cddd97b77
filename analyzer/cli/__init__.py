"""The command-line interface: one module per command, assembled here."""

from .base import main
from .breakeven import breakeven_cmd
from .ci import ci_cmd
from .comment import comment_cmd
from .diff import diff_cmd
from .hook import hook_cmd
from .rules import rules_cmd
from .scan import scan
from .trace import trace_cmd

main.add_command(scan)
main.add_command(rules_cmd)
main.add_command(diff_cmd)
main.add_command(ci_cmd)
main.add_command(comment_cmd)
main.add_command(hook_cmd)
main.add_command(trace_cmd)
main.add_command(breakeven_cmd)

__all__ = ["main"]
