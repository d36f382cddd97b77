"""libcst's parser, as the scanner uses it. Imported on first use (see sources/__init__.py)."""

from __future__ import annotations

import libcst as cst

from . import Unparseable


def _validation_only(method) -> bool:
    code = getattr(method, "__code__", None)
    return code is not None and code.co_names == ("_validate",)


# libcst runs every node's _validate() as the node is constructed, also for the nodes its own
# parser builds: a check meant for hand-built trees (libcst's source says so) that costs a seventh
# of a scan, and on some valid code rejects what the parser accepted (LibCST#1061). Our parses skip
# it, as long as libcst's __post_init__ does nothing but validate.
_POST_INIT = cst.CSTNode.__post_init__
_SKIP_VALIDATION = _validation_only(_POST_INIT)


def _no_validation(self) -> None:
    pass


def parse_cst(text: str) -> cst.Module:
    try:
        if _SKIP_VALIDATION:
            cst.CSTNode.__post_init__ = _no_validation
            try:
                return cst.parse_module(text)
            finally:
                cst.CSTNode.__post_init__ = _POST_INIT
        return cst.parse_module(text)
    except cst.ParserSyntaxError as e:
        raise Unparseable(str(e.message), e.raw_line) from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - CSTValidationError, a Rust PanicException (a BaseException)
        raise Unparseable(f"{type(e).__name__}: {e}", 1) from None
