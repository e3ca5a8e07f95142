"""`onnxexec` command group. Errors print one line to stderr and exit 1;
`--verbose` (on the group or a command) adds the traceback."""

from __future__ import annotations

import sys
import traceback
from typing import Any

import click

from onnxexec import __version__
from onnxexec.cli.common import debug_from_env, verbose_option


class _Group(click.Group):
    """Turns any exception from a command into one stderr line and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("onnxexec: interrupted", err=True)
            sys.exit(130)
        except Exception as e:
            verbose = ctx.obj.get("verbose", False) if isinstance(ctx.obj, dict) else False
            if verbose:
                traceback.print_exc()
            msg = " ".join(str(e).split()) or type(e).__name__
            click.echo(f"onnxexec: error: {msg}", err=True)
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="onnxexec")
@verbose_option
@click.pass_context
def cli(ctx: click.Context) -> None:
    """onnxexec: run and understand ONNX and GGUF models."""
    ctx.ensure_object(dict)
    debug_from_env()


def _register() -> None:
    import importlib

    for mod in (
        "run",
        "info",
        "conformance",
        "generate",
        "bench",
        "as_onnxruntime",
        "cache",
        "serve",
        "warmup",
        "batch",
    ):
        try:
            m = importlib.import_module(f"onnxexec.cli.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"onnxexec.cli.{mod}":
                raise
            continue
        for cmd in getattr(m, "COMMANDS", ()):
            cli.add_command(cmd)


_register()


def main() -> None:
    cli(obj={})


if __name__ == "__main__":
    main()
