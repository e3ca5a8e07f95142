"""`onnxexec generate`, `chat` and `perplexity` for GGUF LLMs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from onnxexec.cli.common import sampling_fields, sampling_options, verbose_option
from onnxexec.errors import OnnxExecError


def _sampling_options(f):
    opts = [
        sampling_options,
        click.option(
            "--ctx",
            "n_ctx",
            default=4096,
            show_default=True,
            type=click.IntRange(1),
            help="Context size (KV cache positions).",
        ),
        click.option("--threads", default=0, type=click.IntRange(0), help="0 = all cores."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _params(**opts):
    from onnxexec.llm.sampler import SamplingParams

    return SamplingParams(**sampling_fields(**opts))


def _text(tok, token_id: int | None) -> str:
    if token_id is None or token_id < 0:
        return ""
    return tok.token_to_piece(token_id).decode("utf-8", errors="replace")


def _load(model: str, n_ctx: int, threads: int):
    from onnxexec.llm.model import LLM

    return LLM(model, n_ctx=n_ctx, threads=threads)


def _finish(res: Any, as_json: bool, tail: str) -> None:
    """End a generation: the JSON object (`--json`) or the streamed text's `tail` and
    newline on stdout; the token counts and speeds on stderr. `res` is a
    GenerationResult or a GenaiResult (the same fields)."""
    if as_json:
        out = {
            "text": res.text,
            "tokens": res.tokens,
            "prompt_tokens": res.prompt_tokens,
            "prefill_tok_s": round(res.prefill_tok_s, 2),
            "decode_tok_s": round(res.decode_tok_s, 2),
            "stop_reason": res.stop_reason,
        }
        click.echo(json.dumps(out))
    else:
        click.echo(tail)
    click.echo(
        f"prompt tokens: {len(res.prompt_tokens)}  generated: {len(res.tokens)}  "
        f"prefill {res.prefill_tok_s:.1f} tok/s  decode {res.decode_tok_s:.1f} tok/s",
        err=True,
    )


def _generate_genai(folder: str, prompt: str, n_predict: int, as_json: bool, threads: int) -> None:
    """Greedy generation from an onnxruntime-genai folder (genai_config.json + ONNX)."""
    from onnxexec.llm.genai import GenaiModel, GenaiResult

    model = GenaiModel(folder, threads=threads)
    res = GenaiResult()
    shown = ""
    for _ in model.stream_ids(model.encode(prompt), n_predict, res):
        if not as_json:
            # Decode the whole tail so multi-byte characters split over tokens print whole.
            text = model.decode(res.tokens)
            if not text.endswith("\ufffd"):
                sys.stdout.write(text[len(shown) :])
                sys.stdout.flush()
                shown = text
    _finish(res, as_json, res.text[len(shown) :])


@click.command("generate")
@click.argument("model", type=click.Path())
@click.option("-p", "--prompt", required=True, help="Prompt text (special tokens parsed).")
@click.option(
    "-n",
    "--n-predict",
    "n_predict",
    default=128,
    show_default=True,
    type=click.IntRange(0),
    help="Tokens to generate.",
)
@click.option("--stop", multiple=True, help="Stop when this string is generated.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@_sampling_options
@verbose_option
def generate_cmd(
    model,
    prompt,
    n_predict,
    stop,
    as_json,
    temperature,
    top_k,
    top_p,
    min_p,
    repeat_penalty,
    presence_penalty,
    frequency_penalty,
    seed,
    n_ctx,
    threads,
):
    """Generate text from PROMPT with a GGUF model, streaming it to stdout.

    MODEL may also be an onnxruntime-genai folder (genai_config.json, model.onnx,
    tokenizer.json): it is decoded greedily (the sampling options are ignored)."""
    from onnxexec.llm.genai import is_genai_folder

    if is_genai_folder(model):
        _generate_genai(model, prompt, n_predict, as_json, threads)
        return
    from onnxexec.llm.generation import GenerationResult, stream

    llm = _load(model, n_ctx, threads)
    params = _params(
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        min_p=min_p,
        repeat_penalty=repeat_penalty,
        presence_penalty=presence_penalty,
        frequency_penalty=frequency_penalty,
        seed=seed,
    )
    res = GenerationResult()
    for piece in stream(llm, prompt, n_predict, params, stop, res):
        if not as_json:
            sys.stdout.write(piece)
            sys.stdout.flush()
    _finish(res, as_json, "")


@click.command("chat")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--system", default=None, help="System message.")
@click.option(
    "-n",
    "--n-predict",
    "n_predict",
    default=512,
    show_default=True,
    type=click.IntRange(1),
    help="Max tokens per reply.",
)
@_sampling_options
@verbose_option
def chat_cmd(
    model,
    system,
    n_predict,
    temperature,
    top_k,
    top_p,
    min_p,
    repeat_penalty,
    presence_penalty,
    frequency_penalty,
    seed,
    n_ctx,
    threads,
):
    """Interactive chat using the model's chat template; the KV cache is kept between
    turns so each turn evaluates only its new tokens. Empty line or EOF ends it."""
    from onnxexec.llm.chat import render_chat
    from onnxexec.llm.generation import GenerationResult, stream

    llm = _load(model, n_ctx, threads)
    params = _params(
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        min_p=min_p,
        repeat_penalty=repeat_penalty,
        presence_penalty=presence_penalty,
        frequency_penalty=frequency_penalty,
        seed=seed,
    )
    tok = llm.tokenizer
    template = llm.gguf.metadata.get("tokenizer.chat_template")
    messages = [{"role": "system", "content": system}] if system else []
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            click.echo("> ", nl=False, err=True)
        line = sys.stdin.readline()
        if not line or not line.strip():
            break
        messages.append({"role": "user", "content": line.rstrip("\n")})
        prompt = render_chat(
            template, messages, bos_token=_text(tok, tok.bos_id), eos_token=_text(tok, tok.eos_id)
        )
        # The template already contains BOS where the model wants it.
        ids = tok.encode(prompt, add_special=False, parse_special=True)
        res = GenerationResult()
        for piece in stream(llm, ids, n_predict, params, (), res):
            sys.stdout.write(piece)
            sys.stdout.flush()
        click.echo("")
        click.echo(
            f"[{len(ids) - res.n_reused} new prompt tokens, {res.n_reused} from cache; "
            f"{res.decode_tok_s:.1f} tok/s]",
            err=True,
        )
        messages.append({"role": "assistant", "content": res.text})


@click.command("perplexity")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-f", "--file", "text_file", required=True, type=click.Path(dir_okay=False))
@click.option("--ctx", "n_ctx", default=512, show_default=True, type=click.IntRange(2))
@click.option("--threads", default=0, type=click.IntRange(0))
@verbose_option
def perplexity_cmd(model, text_file, n_ctx, threads):
    """Perplexity of MODEL on a text file, computed as llama.cpp's llama-perplexity."""
    from onnxexec.llm.evaluation import perplexity

    path = Path(text_file)
    if not path.is_file():
        raise OnnxExecError(f"text file not found: {path}")
    llm = _load(model, n_ctx, threads)
    ppl = perplexity(
        llm,
        path.read_text(encoding="utf-8", errors="replace"),
        n_ctx,
        on_chunk=lambda r: click.echo(f"[{r.index + 1}]{r.ppl_so_far:.4f}", err=True),
    )
    click.echo(f"Final estimate: PPL = {ppl:.4f}")


COMMANDS = [generate_cmd, chat_cmd, perplexity_cmd]
