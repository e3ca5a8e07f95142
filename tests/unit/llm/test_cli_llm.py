"""`onnxexec generate / chat / perplexity / info` on a tiny GGUF."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from onnxexec.cli.main import cli
from tests.unit.llm._tiny import write_tiny_gguf
from tests.unit.llm.test_perplexity import TEXT


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("cli") / "tiny.gguf", "llama")


def run(*args, stdin=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=stdin, obj={})


def test_generate_json(model):
    r = run(
        "generate", model, "-p", "the cat", "-n", "5", "--temperature", "0", "--json", "--ctx", "64"
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(doc) >= {"text", "tokens", "prompt_tokens", "prefill_tok_s", "decode_tok_s"}
    assert len(doc["tokens"]) <= 5 and doc["prompt_tokens"][0] == 1  # BOS
    again = json.loads(
        run("generate", model, "-p", "the cat", "-n", "5", "--temp", "0", "--json", "--ctx", "64")
        .stdout.strip()
        .splitlines()[-1]
    )
    assert again["tokens"] == doc["tokens"]


def test_generate_streams_text(model):
    r = run("generate", model, "-p", "the", "-n", "4", "--temperature", "0", "--ctx", "32")
    assert r.exit_code == 0 and "generated:" in r.stderr


def test_chat_keeps_the_cache_between_turns(model):
    r = run(
        "chat",
        model,
        "-n",
        "3",
        "--temperature",
        "0",
        "--ctx",
        "128",
        stdin="hello there\nand again\n",
    )
    assert r.exit_code == 0, r.output
    notes = [line for line in r.stderr.splitlines() if "new prompt tokens" in line]
    assert len(notes) == 2
    assert notes[0].split("[")[1].startswith(tuple("123456789")) and " 0 from cache" in notes[0]
    assert " 0 from cache" not in notes[1]  # the first turn is reused


def test_perplexity(model, tmp_path):
    f = tmp_path / "t.txt"
    f.write_text(TEXT)
    r = run("perplexity", model, "-f", f, "--ctx", "16")
    assert r.exit_code == 0, r.output
    assert r.stdout.strip().startswith("Final estimate: PPL = ")
    assert float(r.stdout.split("=")[1]) > 1.0
    missing = run("perplexity", model, "-f", tmp_path / "nope.txt")
    assert missing.exit_code != 0


def test_info_gguf_with_graph(model):
    r = run("info", model, "--graph")
    assert r.exit_code == 0, r.output
    assert "general.architecture = 'llama'" in r.stdout
    assert "onnxexec::KVAttention" in r.stdout and "token_embd.weight" in r.stdout
