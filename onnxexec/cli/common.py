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


SAMPLING_FIELDS = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "seed",
)


def sampling_options(f: Any) -> Any:
    """llama.cpp's sampling options (generate, chat, batch); the command receives them as
    keyword arguments named as SAMPLING_FIELDS (`sampling_params` turns them into the
    SamplingParams fields)."""
    opts = [
        click.option(
            "--temperature",
            "--temp",
            default=0.8,
            show_default=True,
            type=click.FloatRange(0),
            help="0 = greedy.",
        ),
        click.option("--top-k", default=40, show_default=True, type=click.IntRange(0)),
        click.option("--top-p", default=0.95, show_default=True, type=click.FloatRange(0, 1)),
        click.option("--min-p", default=0.05, show_default=True, type=click.FloatRange(0, 1)),
        click.option(
            "--repeat-penalty",
            default=1.0,
            show_default=True,
            type=click.FloatRange(0, min_open=True),
        ),
        click.option("--presence-penalty", default=0.0, show_default=True),
        click.option("--frequency-penalty", default=0.0, show_default=True),
        click.option("--seed", default=None, type=int, help="Seed for reproducible sampling."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def sampling_fields(**opts: Any) -> dict[str, Any]:
    """The sampling options' values as SamplingParams keyword arguments (top-p 0 = off)."""
    fields = {k: opts[k] for k in SAMPLING_FIELDS}
    fields["top_p"] = fields["top_p"] or 1.0
    return fields
