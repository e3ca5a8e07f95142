"""Options shared by every command (kept apart from main.py, which imports the commands)."""

from __future__ import annotations

import logging
import os
from typing import Any

import click


def debug_logging() -> None:
    """Send the `onnxexec` logger's debug records to stderr.

    The library only logs (runtime/executor.py reads ONNXEXEC_DEBUG for what to log);
    configuring a handler is the application's job, and the CLI is the application.
    """
    log = logging.getLogger("onnxexec")
    if not log.handlers:
        handler = logging.StreamHandler()  # stderr: stdout stays the command's output
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.DEBUG)


def debug_from_env() -> None:
    """ONNXEXEC_DEBUG=1 (node names) or 2 (+ shapes, dtypes) logs without --verbose."""
    if os.environ.get("ONNXEXEC_DEBUG", "0").strip() not in ("", "0"):
        debug_logging()


def set_verbose(ctx: click.Context, _param: Any, value: bool) -> bool:
    """Callback for commands' own --verbose flags."""
    if value:
        root = ctx.find_root()
        root.ensure_object(dict)
        root.obj["verbose"] = True
        debug_logging()
    return value


verbose_option = click.option(
    "--verbose",
    "-v",
    is_flag=True,
    expose_value=False,
    callback=set_verbose,
    is_eager=True,
    help="Show tracebacks and debug logging.",
)
