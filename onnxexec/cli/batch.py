"""`onnxexec batch`: score a data set with an ONNX model, embed texts or generate answers
for a prompt file with a GGUF model, on Ray Data (the `onnxexec[ray]` extra)."""

from __future__ import annotations

import click

from onnxexec.cli.common import sampling_fields, sampling_options, verbose_option
from onnxexec.errors import OnnxExecError

MAX_LISTED_ERRORS = 20


def _columns(value: str | None) -> dict[str, str]:
    """'in=col,in2=col2' -> {'in': 'col', 'in2': 'col2'}."""
    out: dict[str, str] = {}
    for part in (value or "").split(","):
        if not part.strip():
            continue
        name, sep, col = part.partition("=")
        if not sep or not name.strip() or not col.strip():
            raise click.BadParameter(f"expected INPUT=COLUMN, got '{part}'", param_hint="--columns")
        out[name.strip()] = col.strip()
    return out


@click.command("batch")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option(
    "--input", "data", required=True, help="Parquet/CSV/JSONL file, directory or glob; or an .npz."
)
@click.option(
    "--output",
    "output",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory for the Parquet shards.",
)
@click.option(
    "--address",
    default=None,
    help="Ray cluster: auto, ray://HOST:10001 or HOST:PORT. Default: start Ray locally.",
)
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(1))
@click.option(
    "--concurrency",
    default=None,
    type=click.IntRange(1),
    help="Model actors. Default: cluster CPUs / threads per worker.",
)
@click.option("--threads-per-worker", default=1, show_default=True, type=click.IntRange(1))
@click.option(
    "--shard-rows",
    default=None,
    type=click.IntRange(1),
    help="Rows per output shard (the unit of --resume). Default: 64 batches; GGUF: 1.",
)
@click.option(
    "--columns",
    default=None,
    help="Input to column: in=col,... (GGUF: prompt=col or messages=col; embedding: text=col).",
)
@click.option(
    "--resume", is_flag=True, help="Finish an interrupted job: skip the shards already in OUTPUT."
)
@click.option(
    "--tokenizer",
    default=None,
    type=click.Path(dir_okay=False),
    help="tokenizer.json: MODEL is a sentence-embedding ONNX model.",
)
@click.option(
    "--max-length",
    default=512,
    show_default=True,
    type=click.IntRange(1),
    help="Embedding: truncate texts to this many tokens.",
)
@click.option(
    "-n",
    "--max-tokens",
    default=128,
    show_default=True,
    type=click.IntRange(0),
    help="GGUF: tokens to generate per row.",
)
@click.option("--stop", multiple=True, help="GGUF: stop when this string is generated.")
@sampling_options
@click.option("--ctx", "n_ctx", default=None, type=click.IntRange(1), help="GGUF: context size.")
@verbose_option
def batch_cmd(
    model,
    data,
    output,
    address,
    batch_size,
    concurrency,
    threads_per_worker,
    shard_rows,
    columns,
    resume,
    tokenizer,
    max_length,
    max_tokens,
    stop,
    temperature,
    top_k,
    top_p,
    min_p,
    repeat_penalty,
    presence_penalty,
    frequency_penalty,
    seed,
    n_ctx,
):
    """Run MODEL over every row of --input on Ray; write Parquet shards to --output.

    ONNX: model inputs come from columns of the same name (or --columns); the outputs
    are new columns. GGUF: each row's `prompt` (or chat `messages`) gets `text`,
    `prompt_tokens`, `completion_tokens` and `finish_reason`. With --tokenizer: an
    `embedding` column (mean pooling). Every row keeps its index in `_row`; a row that
    fails gets its reason in `_error` and the job goes on.
    """
    try:
        from onnxexec.ray.batch import run_batch
    except ModuleNotFoundError as e:
        if e.name not in ("ray", "pyarrow") and not str(e.name).startswith("ray."):
            raise
        raise OnnxExecError(
            f"onnxexec batch needs Ray ({e.name} is missing): pip install 'onnxexec[ray]'"
        ) from None
    sampling = sampling_fields(
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        min_p=min_p,
        repeat_penalty=repeat_penalty,
        presence_penalty=presence_penalty,
        frequency_penalty=frequency_penalty,
        seed=seed,
    )
    s = run_batch(
        model,
        data,
        output,
        address=address,
        batch_size=batch_size,
        concurrency=concurrency,
        threads_per_worker=threads_per_worker,
        shard_rows=shard_rows,
        resume=resume,
        columns=_columns(columns),
        tokenizer=tokenizer,
        max_length=max_length,
        sampling=sampling,
        max_tokens=max_tokens,
        stop=stop,
        n_ctx=n_ctx,
    )
    for line in s.errors[:MAX_LISTED_ERRORS]:
        click.echo(f"onnxexec: failed {line}", err=True)
    if len(s.errors) > MAX_LISTED_ERRORS:
        click.echo(f"onnxexec: ... and {len(s.errors) - MAX_LISTED_ERRORS} more", err=True)
    rate = s.rows / s.seconds if s.seconds > 0 else 0.0
    click.echo(
        f"{s.rows} rows in {s.shards_written} shards written to {s.output} "
        f"({s.shards_skipped} already done), {len(s.errors)} failed rows, "
        f"{s.seconds:.1f} s ({rate:.1f} rows/s)",
        err=True,
    )


COMMANDS = [batch_cmd]
