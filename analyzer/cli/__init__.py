"""The command-line interface: one module per command, assembled here."""

from .base import main
from .breakeven import breakeven_cmd
from .rules import rules_cmd
from .scan import scan

main.add_command(scan)
main.add_command(rules_cmd)
main.add_command(breakeven_cmd)

__all__ = ["main"]
