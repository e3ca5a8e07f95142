"""`onnxexec bench MODEL`: latency side by side with an anchor engine."""

from __future__ import annotations

import os
import tempfile

import click
import numpy as np

from onnxexec.cli.common import verbose_option
from onnxexec.cli.run import build_feed


@click.command("bench")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option(
    "--vs",
    "vs",
    default="onnxruntime",
    show_default=True,
    help="Anchor engine to compare against ('none' to time onnxexec alone).",
)
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1))
@click.option("--runs", default=20, show_default=True, type=click.IntRange(1))
@click.option("--warmup", default=3, show_default=True, type=click.IntRange(0))
@click.option("--inputs", "inputs_npz", metavar="FILE.npz", help="Inputs (else synthesised).")
@click.option("--dim", "dims", multiple=True, metavar="NAME=SIZE")
@click.option("--no-memory", is_flag=True, help="Skip the peak-RSS child processes.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@verbose_option
def bench_cmd(
    model: str,
    vs: str,
    threads: int,
    runs: int,
    warmup: int,
    inputs_npz: str | None,
    dims: tuple[str, ...],
    no_memory: bool,
    as_json: bool,
) -> None:
    """Median latency, session creation, peak RSS and output agreement vs an anchor."""
    from onnxexec.benchmark.onnx_bench import bench_onnx, format_result, to_json
    from onnxexec.runtime.session import InferenceSession

    feed, notes = build_feed(InferenceSession(model), (), inputs_npz, dims, seed=0)
    for n in notes:
        click.echo(n, err=True)
    with tempfile.TemporaryDirectory() as tmp:
        feed_path = os.path.join(tmp, "feed.npz")
        np.savez(feed_path, **feed)
        r = bench_onnx(
            model,
            feed,
            threads=threads,
            runs=runs,
            warmup=warmup,
            vs=None if vs == "none" else vs,
            memory=not no_memory,
            feed_path=feed_path,
        )
    if as_json:
        click.echo(to_json(r))
    else:
        for line in format_result(r):
            click.echo(line)


COMMANDS = [bench_cmd]
