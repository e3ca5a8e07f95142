"""String ops, TfIdfVectorizer and ImageDecoder, against hand-computed values,
Python's own string functions, onnxruntime (TfIdf) and Pillow (ImageDecoder)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxexec.runtime.session import InferenceSession

from ._node import run_node


def _s(*values: str) -> np.ndarray:
    return np.array(values, dtype=object)


def _run(op, x, opset=20, n_outputs=1, **attrs):
    return run_node(op, [x], n_outputs, opset, **attrs)


def test_string_normalizer_stopwords_then_case():
    x = _s("Monday", "tuesday", "MONDAY", "wed")
    y = _run("StringNormalizer", x, 10, stopwords=["monday"], case_change_action="UPPER")[0]
    np.testing.assert_array_equal(y, _s("TUESDAY", "WED"))  # case-insensitive by default
    y = _run(
        "StringNormalizer",
        x,
        10,
        stopwords=["monday"],
        is_case_sensitive=1,
        case_change_action="LOWER",
    )[0]
    np.testing.assert_array_equal(y, _s("monday", "tuesday", "monday", "wed"))


def test_string_normalizer_all_dropped_keeps_rank():
    y = _run("StringNormalizer", np.array([["a", "b"]], object), 10, stopwords=["a", "b"])[0]
    assert y.shape == (1, 1) and y[0, 0] == ""
    y = _run("StringNormalizer", _s("a"), 10, stopwords=["a"])[0]
    assert y.shape == (1,) and y[0] == ""


@pytest.mark.parametrize(
    ("pattern", "values", "want"),
    [
        (r"\d+", ["123", "12a", ""], [True, False, False]),
        (r"[[:alpha:]]+[[:digit:]]\z", ["abc1", "ab12"], [True, False]),  # RE2 POSIX class, \z
        (r"\Qa.b\E", ["a.b", "axb"], [True, False]),  # RE2 literal quoting
        (r"(?i)hello", ["HeLLo", "hello!"], [True, False]),
        (r"www\.[\w.]+\.(com|org)", ["www.onnx.org", "www.x.net"], [True, False]),
    ],
)
def test_regex_full_match(pattern, values, want):
    x = np.array(values, dtype=object).reshape(1, -1)
    y = _run("RegexFullMatch", x, pattern=pattern)[0]
    assert y.dtype == np.bool_ and y.shape == x.shape
    np.testing.assert_array_equal(y[0], want)


@pytest.mark.parametrize(
    ("values", "attrs"),
    [
        (["a  b", " c d ", ""], {}),  # no delimiter: whitespace runs, empty parts dropped
        (["a,,b", ",c"], {"delimiter": ","}),  # consecutive delimiters give empty strings
        (["a b c d"], {"maxsplit": 2}),
        (["a--b--c", "x"], {"delimiter": "--", "maxsplit": 1}),
    ],
)
def test_string_split_matches_python_split(values, attrs):
    x = np.array(values, dtype=object)
    parts, counts = _run("StringSplit", x, n_outputs=2, **attrs)
    want = [v.split(attrs.get("delimiter"), attrs.get("maxsplit", -1)) for v in values]
    width = max(len(w) for w in want)
    np.testing.assert_array_equal(counts, [len(w) for w in want])
    np.testing.assert_array_equal(
        parts, np.array([w + [""] * (width - len(w)) for w in want], object)
    )


def test_string_split_empty_input_keeps_shape():
    parts, counts = _run("StringSplit", np.empty((2, 0), object), n_outputs=2)
    assert parts.shape == (2, 0, 0) and counts.shape == (2, 0) and counts.dtype == np.int64


def test_string_concat_broadcasts():
    x = np.array([["a", "b"], ["c", "d"]], object)
    y = np.array(["1", "é"], object)
    z = run_node("StringConcat", [x, y], opset=20)[0]
    np.testing.assert_array_equal(z, np.array([["a1", "bé"], ["c1", "dé"]], object))


def _tfidf(x, **attrs):
    elem = T.STRING if x.dtype == object else T.INT64
    node = helper.make_node("TfIdfVectorizer", ["X"], ["Y"], **attrs)
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", elem, None)],
        [helper.make_tensor_value_info("Y", T.FLOAT, None)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 8
    return m.SerializeToString()


def test_tfidf_counts_skip_grams_by_hand():
    # pool: unigrams 2, 3 and the bigram (2, 4), in output columns 0, 1, 2
    x = np.array([2, 4, 2, 9, 4], np.int64)
    attrs = dict(
        mode="TF",
        min_gram_length=1,
        max_gram_length=2,
        max_skip_count=1,
        ngram_counts=[0, 2],
        ngram_indexes=[0, 1, 2],
        pool_int64s=[2, 3, 2, 4],
    )
    y = InferenceSession(_tfidf(x, **attrs)).run(None, {"X": x})[0]
    # unigram 2 twice (counted once per position, not per skip); (2, 4) at x[0:2] with
    # skip 0 and at x[2], x[4] with skip 1
    np.testing.assert_array_equal(y, [2, 0, 2])
    attrs["mode"], attrs["weights"] = "TFIDF", [0.5, 2.0, 4.0]  # weights follow pool order
    y = InferenceSession(_tfidf(x, **attrs)).run(None, {"X": x})[0]
    np.testing.assert_allclose(y, [1.0, 0.0, 8.0])
    attrs["mode"] = "IDF"
    y = InferenceSession(_tfidf(x, **attrs)).run(None, {"X": x})[0]
    np.testing.assert_allclose(y, [0.5, 0.0, 4.0])


@pytest.mark.parametrize("seed", range(8))
def test_tfidf_matches_onnxruntime(seed):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(seed)
    strings = seed % 2 == 0
    vocab = ["a", "b", "c"] if strings else [1, 2, 3]
    max_g = 1 + seed % 3
    pool, counts = [], []
    for n in range(1, max_g + 1):
        counts.append(len(pool))
        for g in {tuple(rng.choice(vocab, n).tolist()) for _ in range(3)}:
            pool.extend(g)
    bounds = zip(counts, [*counts[1:], len(pool)], strict=True)
    k = sum((e - s) // n for n, (s, e) in enumerate(bounds, 1))
    attrs = dict(
        mode=["TF", "IDF", "TFIDF"][seed % 3],
        min_gram_length=1 + seed % max_g,
        max_gram_length=max_g,
        max_skip_count=seed % 3,
        ngram_counts=counts,
        ngram_indexes=[int(v) for v in rng.permutation(k)],
        weights=[float(v) for v in rng.random(k)],
    )
    attrs["pool_strings" if strings else "pool_int64s"] = pool
    x = np.array(rng.choice(vocab, size=(3, 7)).tolist(), dtype=object if strings else np.int64)
    model = _tfidf(x, **attrs)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    np.testing.assert_allclose(InferenceSession(model).run(None, {"X": x})[0], ref, rtol=1e-6)


@pytest.mark.parametrize("fmt", ["PNG", "BMP", "TIFF"])
@pytest.mark.parametrize("pixel_format", ["RGB", "BGR", "Grayscale"])
def test_image_decoder_lossless_formats_round_trip(fmt, pixel_format):
    image_mod = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    buf = io.BytesIO()
    image_mod.fromarray(rgb).save(buf, format=fmt)
    data = np.frombuffer(buf.getvalue(), dtype=np.uint8)
    y = run_node("ImageDecoder", [data], opset=20, pixel_format=pixel_format)[0]
    assert y.dtype == np.uint8
    if pixel_format == "Grayscale":
        # ITU-R 601-2 luma, as Pillow's convert("L") computes it in fixed point
        r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
        luma = (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16
        np.testing.assert_array_equal(y[..., 0], luma.astype(np.uint8))
        assert y.shape == (7, 5, 1)
    else:
        np.testing.assert_array_equal(y, rgb if pixel_format == "RGB" else rgb[..., ::-1])


def test_image_decoder_rejects_garbage():
    with pytest.raises(Exception, match="cannot decode"):
        run_node("ImageDecoder", [np.frombuffer(b"not an image", np.uint8)], opset=20)
