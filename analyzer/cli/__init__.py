"""The command-line interface: one module per command, assembled here."""

from .base import main
from .rules import rules_cmd
from .scan import scan
from .trace import trace_cmd

main.add_command(scan)
main.add_command(rules_cmd)
main.add_command(trace_cmd)

__all__ = ["main"]
