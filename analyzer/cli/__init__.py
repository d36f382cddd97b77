"""The command-line interface: one module per command, loaded when its command runs."""

from .base import main

main.lazy = {
    "scan": ".scan:scan",
    "rules": ".rules:rules_cmd",
    "diff": ".diff:diff_cmd",
    "ci": ".ci:ci_cmd",
    "comment": ".comment:comment_cmd",
    "hook": ".hook:hook_cmd",
    "trace": ".trace:trace_cmd",
    "breakeven": ".breakeven:breakeven_cmd",
    "fix": ".fix:fix_cmd",
}

__all__ = ["main"]
