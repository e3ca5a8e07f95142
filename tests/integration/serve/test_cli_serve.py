"""`onnxexec serve` options (no server is started: click's runner, bad arguments only)."""

from __future__ import annotations

from click.testing import CliRunner

from onnxexec.cli.main import cli
from tests.integration.serve.conftest import need_serve_extra

need_serve_extra()


def test_help_lists_the_options():
    r = CliRunner().invoke(cli, ["serve", "--help"])
    assert r.exit_code == 0
    for opt in (
        "--host",
        "--port",
        "--ctx",
        "--parallel",
        "--threads",
        "--api-key",
        "--embedding-model",
        "--tokenizer",
        "--queue",
    ):
        assert opt in r.output


def test_embedding_model_needs_a_tokenizer(tmp_path):
    model = tmp_path / "m.gguf"
    emb = tmp_path / "e.onnx"
    model.write_bytes(b"")
    emb.write_bytes(b"")
    r = CliRunner().invoke(cli, ["serve", str(model), "--embedding-model", str(emb)])
    assert r.exit_code != 0 and "--tokenizer" in r.output


def test_missing_model_file_is_a_usage_error(tmp_path):
    r = CliRunner().invoke(cli, ["serve", str(tmp_path / "nope.gguf")])
    assert r.exit_code == 2 and "does not exist" in r.output
