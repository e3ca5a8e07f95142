"""`onnxexec run MODEL`: run once (or --repeat times) and summarise the outputs."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click
import numpy as np

from onnxexec.cli.common import verbose_option
from onnxexec.errors import InvalidFeedError

if TYPE_CHECKING:  # onnx and the session load on use: `onnxexec generate` skips them
    from onnxexec.runtime.session import InferenceSession


def summarize(name: str, v: Any) -> str:
    if isinstance(v, list):
        return f"{name}: sequence of {len(v)}"
    if v is None:
        return f"{name}: (empty optional)"
    if isinstance(v, dict):
        return f"{name}: map of {len(v)}"
    a = np.asarray(v)
    head = f"{name}: {a.dtype}{list(a.shape)}"
    if a.size == 0:
        return head + "  (empty)"
    if a.dtype.kind in "biuf" or a.dtype.name in ("bfloat16", "float16"):
        f = a.astype(np.float64)
        return f"{head}  min {f.min():.6g}  mean {f.mean():.6g}  max {f.max():.6g}"
    if a.dtype == object:
        return f"{head}  first {a.reshape(-1)[0]!r}"
    return head


def build_feed(
    sess: InferenceSession,
    inputs: tuple[str, ...],
    inputs_npz: str | None,
    dims: tuple[str, ...],
    seed: int,
) -> tuple[dict[str, Any], list[str]]:
    from onnxexec.cli.feeds import load_array_file, load_npz, parse_pairs, synthesize

    dim_sizes = {}
    for k, v in parse_pairs(dims, "--dim").items():
        try:
            dim_sizes[k] = int(v)
        except ValueError:
            raise InvalidFeedError(f"--dim {k}={v}: size must be an integer") from None
    feed: dict[str, Any] = {}
    if inputs_npz:
        feed.update(load_npz(inputs_npz))
    for name, path in parse_pairs(inputs, "--input").items():
        feed[name] = load_array_file(path, name)
    declared = {v.name: v for v in sess.runtime_inputs}
    unknown = [k for k in feed if k not in {v.name for v in sess.graph_inputs}]
    if unknown:
        raise InvalidFeedError(
            f"unknown input name(s) {unknown}; the model's inputs are {list(declared)}"
        )
    notes = []
    rng = np.random.default_rng(seed)
    for name, vi in declared.items():
        if name not in feed:
            feed[name] = synthesize(vi, dim_sizes, rng)
            v = feed[name]
            desc = f"{v.dtype}{list(v.shape)}" if isinstance(v, np.ndarray) else type(v).__name__
            notes.append(f"input '{name}' not given: synthesised random {desc}")
    return feed, notes


@click.command("run")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option(
    "--input",
    "-i",
    "inputs",
    multiple=True,
    metavar="NAME=FILE",
    help="Feed NAME from a .npy, .npz or TensorProto .pb file.",
)
@click.option(
    "--inputs", "inputs_npz", metavar="FILE.npz", help="Feed every input named in an .npz archive."
)
@click.option(
    "--dim",
    "dims",
    multiple=True,
    metavar="NAME=SIZE",
    help="Size of a symbolic dimension for synthesised inputs (default 1).",
)
@click.option("--output", "-o", "output", metavar="OUT.npz", help="Save outputs to an .npz.")
@click.option(
    "--repeat",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Run N times and print latency min/median/p90.",
)
@click.option(
    "--threads", default=0, type=click.IntRange(0), help="Intra-op threads (0 = all cores)."
)
@click.option("--seed", default=0, show_default=True, help="Seed for synthesised inputs.")
@click.option(
    "--profile",
    "profile",
    metavar="TRACE.json",
    help="Write a chrome-trace profile (one event per node).",
)
@verbose_option
def run_cmd(
    model: str,
    inputs: tuple[str, ...],
    inputs_npz: str | None,
    dims: tuple[str, ...],
    output: str | None,
    repeat: int,
    threads: int,
    seed: int,
    profile: str | None,
) -> None:
    """Run MODEL once and print each output's dtype, shape and min/mean/max."""
    from onnxexec.runtime.options import SessionOptions
    from onnxexec.runtime.session import InferenceSession

    opts = SessionOptions(intra_op_num_threads=threads)
    if profile:
        opts.enable_profiling = True
    t0 = time.perf_counter()
    sess = InferenceSession(model, opts)
    t_create = time.perf_counter() - t0
    feed, notes = build_feed(sess, inputs, inputs_npz, dims, seed)
    for n in notes:
        click.echo(n, err=True)
    times = []
    outs: list[Any] = []
    for _ in range(repeat):
        t = time.perf_counter()
        outs = sess.run(None, feed)
        times.append(time.perf_counter() - t)
    names = [o.name for o in sess.get_outputs()]
    for name, v in zip(names, outs, strict=True):
        click.echo(summarize(name, v))
    ms = np.array(times) * 1e3
    click.echo(f"session creation {t_create * 1e3:.1f} ms", err=True)
    if repeat > 1:
        click.echo(
            f"latency over {repeat} runs: min {ms.min():.3f} ms  median "
            f"{np.median(ms):.3f} ms  p90 {np.percentile(ms, 90):.3f} ms"
        )
    else:
        click.echo(f"latency {ms[0]:.3f} ms", err=True)
    if output:
        # Any: np.savez's stub types **kwds as if a key could be its allow_pickle flag
        arrays: dict[str, Any] = {
            n: v for n, v in zip(names, outs, strict=True) if isinstance(v, np.ndarray)
        }
        np.savez(output, **arrays)
        click.echo(f"saved {len(arrays)} output(s) to {output}", err=True)
    if profile and sess.profiler is not None:
        click.echo(sess.profiler.format_table())
        path = sess.profiler.write(profile)
        click.echo(f"profile written to {path}", err=True)


COMMANDS = [run_cmd]
