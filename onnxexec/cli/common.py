"""Options shared by every command (kept apart from main.py, which imports the commands)."""

from __future__ import annotations

import logging
from typing import Any

import click


def set_verbose(ctx: click.Context, _param: Any, value: bool) -> bool:
    """Callback for commands' own --verbose flags."""
    if value:
        root = ctx.find_root()
        root.ensure_object(dict)
        root.obj["verbose"] = True
        log = logging.getLogger("onnxexec")
        if not log.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
            log.addHandler(handler)
        log.setLevel(logging.DEBUG)
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
