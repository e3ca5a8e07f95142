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
    default=None,
    help="Anchor engine to compare against: onnxruntime (ONNX models, the default), "
    "llama.cpp (GGUF models, the default), or 'none' to time onnxexec alone.",
)
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1))
@click.option("--runs", default=20, show_default=True, type=click.IntRange(1))
@click.option("--warmup", default=3, show_default=True, type=click.IntRange(0))
@click.option("--inputs", "inputs_npz", metavar="FILE.npz", help="Inputs (else synthesised).")
@click.option("--dim", "dims", multiple=True, metavar="NAME=SIZE")
@click.option("--no-memory", is_flag=True, help="Skip the peak-RSS child processes.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--prompt-len",
    default=128,
    show_default=True,
    type=click.IntRange(1),
    help="GGUF: prompt tokens to prefill.",
)
@click.option(
    "-n",
    "--n-decode",
    "n_decode",
    default=64,
    show_default=True,
    type=click.IntRange(1),
    help="GGUF: greedy tokens to decode.",
)
@click.option(
    "--rounds",
    default=3,
    show_default=True,
    type=click.IntRange(1),
    help="GGUF: interleaved prefill+decode rounds per engine.",
)
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
    prompt_len: int,
    n_decode: int,
    rounds: int,
) -> None:
    """Median latency, session creation, peak RSS and output agreement vs an anchor.

    For a .gguf model: prefill and decode tokens/s, time to first token, peak RSS and
    greedy agreement vs llama.cpp, and a per-op profile of one decode step.
    """
    if model.lower().endswith(".gguf"):
        _bench_gguf(
            model, vs or "llama.cpp", threads, prompt_len, n_decode, rounds, no_memory, as_json
        )
        return
    vs = vs or "onnxruntime"
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


def _bench_gguf(
    model: str,
    vs: str,
    threads: int,
    prompt_len: int,
    n_decode: int,
    rounds: int,
    no_memory: bool,
    as_json: bool,
) -> None:
    from onnxexec.benchmark.gguf_bench import bench_gguf, format_result, to_json

    r = bench_gguf(
        model,
        prompt_len=prompt_len,
        n_decode=n_decode,
        threads=threads,
        vs=None if vs == "none" else vs,
        rounds=rounds,
        memory=not no_memory,
    )
    click.echo(to_json(r) if as_json else "\n".join(format_result(r)))


COMMANDS = [bench_cmd]
