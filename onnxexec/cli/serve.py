"""`onnxexec serve MODEL.gguf`: the OpenAI-compatible HTTP server (onnxexec/serve)."""

from __future__ import annotations

import click

from onnxexec.cli.common import verbose_option


@click.command("serve")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--ctx",
    "n_ctx",
    default=4096,
    show_default=True,
    type=click.IntRange(1),
    help="Context per slot (KV positions).",
)
@click.option(
    "--parallel",
    default=4,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Slots: requests decoded together in one batched pass.",
)
@click.option("--threads", default=0, type=click.IntRange(0), help="0 = all cores.")
@click.option(
    "--api-key",
    default=None,
    envvar="ONNXEXEC_API_KEY",
    help="Require 'Authorization: Bearer KEY' (env ONNXEXEC_API_KEY).",
)
@click.option(
    "--queue",
    default=16,
    show_default=True,
    type=click.IntRange(0),
    help="Requests waiting for a slot before answering 429.",
)
@click.option(
    "--embedding-model",
    type=click.Path(exists=True, dir_okay=False),
    help="ONNX sentence-embedding model for /v1/embeddings.",
)
@click.option(
    "--tokenizer",
    type=click.Path(exists=True, dir_okay=False),
    help="The embedding model's tokenizer.json.",
)
@click.option("--alias", default=None, help="Model id reported by /v1/models.")
@click.option("--cors-origin", multiple=True, help="Allow this origin (CORS is off by default).")
@click.option(
    "--ray",
    "on_ray",
    is_flag=True,
    help="Deploy on Ray Serve (the 'ray' extra); an ONNX MODEL is served at POST /v1/infer.",
)
@click.option(
    "--replicas",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="--ray: replicas (fixed).",
)
@click.option("--min-replicas", type=click.IntRange(0), help="--ray: autoscaling lower bound.")
@click.option("--max-replicas", type=click.IntRange(1), help="--ray: autoscaling upper bound.")
@click.option("--address", default=None, help="--ray: the cluster (auto, ray://HOST:10001).")
@verbose_option
def serve_cmd(
    model: str,
    host: str,
    port: int,
    n_ctx: int,
    parallel: int,
    threads: int,
    api_key: str | None,
    queue: int,
    embedding_model: str | None,
    tokenizer: str | None,
    alias: str | None,
    cors_origin: tuple[str, ...],
    on_ray: bool,
    replicas: int,
    min_replicas: int | None,
    max_replicas: int | None,
    address: str | None,
) -> None:
    """Serve MODEL.gguf over OpenAI's HTTP API (chat, completions, embeddings) and a chat page."""
    try:
        import uvicorn

        from onnxexec.serve import ServeConfig, create_app
    except ImportError as e:
        raise click.ClickException(
            f"serve needs the 'serve' extra ({e.name} is missing): pip install 'onnxexec[serve]'"
        ) from None
    if embedding_model and not tokenizer:
        raise click.UsageError("--embedding-model needs --tokenizer tokenizer.json")
    cfg = ServeConfig(
        model=model,
        n_ctx=n_ctx,
        parallel=parallel,
        threads=threads,
        api_key=api_key,
        queue=queue,
        embedding_model=embedding_model,
        tokenizer=tokenizer,
        model_alias=alias,
        cors_origins=cors_origin,
    )
    click.echo(f"onnxexec: serving {model} on http://{host}:{port}/", err=True)
    if on_ray:
        try:
            from onnxexec.ray.serving import serve_model
        except ImportError as e:
            raise click.ClickException(
                f"--ray needs the 'ray' extra ({e.name} is missing): pip install 'onnxexec[ray]'"
            ) from None
        serve_model(
            model,
            config=cfg,
            host=host,
            port=port,
            replicas=replicas,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            threads=threads or 1,
            address=address,
        )
        return
    uvicorn.run(create_app(cfg), host=host, port=port, log_level="warning")


COMMANDS = [serve_cmd]
