"""POST /v1/embeddings through the openai client.

ONNX (--embedding-model): a random BertModel exported by torch; the oracle runs the same
file in onnxruntime, tokenizes with `tokenizers` and mean-pools / normalizes in float64
numpy. GGUF: the pooled final-norm hidden state m must satisfy mean_t(logits_t) = m @ W^T
(W = the tied output matrix, dequantized by gguf-py), i.e. point the same way.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.integration.serve._embedding_model import build_model, build_tokenizer
from tests.integration.serve.conftest import need_serve_extra, running_server, smollm2_path

need_serve_extra()
openai = pytest.importorskip("openai", reason="the openai client is not installed")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the oracle) is not installed")
pytest.importorskip("tokenizers", reason="the tokenizers package is not installed")
pytest.importorskip("transformers", reason="transformers builds the test model")

TEXTS = ["the cat sat on the mat", "hello world", "a big red dog ran"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("emb")
    tok = build_tokenizer(d / "tokenizer.json")
    from tokenizers import Tokenizer

    model = build_model(d / "bert.onnx", Tokenizer.from_file(str(tok)).get_vocab_size())
    return model, tok


@pytest.fixture(scope="module")
def client(files):
    from onnxexec.serve import ServeConfig

    model, tok = files
    cfg = ServeConfig(
        model=str(smollm2_path()),
        n_ctx=128,
        parallel=1,
        embedding_model=str(model),
        tokenizer=str(tok),
    )
    with running_server(cfg) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=600)


def test_onnx_embeddings_match_onnxruntime_mean_pooling(client, files):
    from tokenizers import Tokenizer

    model, tok = files
    r = client.embeddings.create(model="bert.onnx", input=TEXTS)
    got = np.array([d.embedding for d in r.data])
    enc = Tokenizer.from_file(str(tok)).encode_batch(TEXTS)
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    want = []
    for e in enc:  # one text at a time: no padding in the oracle
        ids = np.array([e.ids], np.int64)
        h = sess.run(
            None,
            {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids),
            },
        )[0][0].astype(np.float64)
        m = h.mean(axis=0)
        want.append(m / np.linalg.norm(m))
    np.testing.assert_allclose(got, np.array(want), atol=2e-5)
    assert r.usage.prompt_tokens == sum(len(e.ids) for e in enc)
    assert r.model == "bert.onnx"
    floats = client.embeddings.create(model="bert.onnx", input=TEXTS[0], encoding_format="float")
    np.testing.assert_allclose(floats.data[0].embedding, got[0], atol=1e-7)


def test_gguf_embedding_is_the_pooled_final_hidden_state(client):
    import gguf

    from onnxexec.llm import LLM

    path = smollm2_path()
    text = "The quick brown fox jumps over the lazy dog."
    r = client.embeddings.create(model=path.name, input=text)
    e = np.array(r.data[0].embedding, dtype=np.float64)
    assert np.linalg.norm(e) == pytest.approx(1.0, abs=1e-5)
    llm = LLM(path, n_ctx=128)
    ids = llm.tokenizer.encode(text, add_special=True, parse_special=True)
    assert r.usage.prompt_tokens == len(ids)
    mean_logits = llm.eval(ids, all_logits=True).astype(np.float64).mean(axis=0)
    t = next(t for t in gguf.GGUFReader(str(path)).tensors if t.name == "token_embd.weight")
    w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)  # (V, D)
    proj = w @ e
    cos = proj @ mean_logits / (np.linalg.norm(proj) * np.linalg.norm(mean_logits))
    assert cos > 0.999
    other = client.embeddings.create(model=path.name, input="Completely different words")
    assert float(np.dot(other.data[0].embedding, e)) < 0.999
