"""Tokenizer parity with llama.cpp on its own test vocabularies.

For every models/ggml-vocab-*.gguf shipped with llama.cpp (fetched by
models/fetch_vocab_tests.py into ~/.cache/onnxexec/vocab or $ONNXEXEC_VOCAB_DIR),
each string of `<vocab>.inp` must encode (add_special=False, parse_special=False) to
exactly the ids of the matching line of `<vocab>.out`, which llama.cpp's
test-tokenizer-0 checks against. Vocabularies without test strings must load and
round-trip sample text. When llama-cpp-python is importable, ids are also compared
with llama.cpp itself on generated strings.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from functools import cache
from pathlib import Path

import pytest

from onnxexec.llm import Tokenizer, load_tokenizer

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SEP = "\n__ggml_vocab_test__\n"
# the vocabularies of llama-cpp-python 0.3.36's vendored llama.cpp (fetch_vocab_tests)
KNOWN = (
    "aquila",
    "baichuan",
    "bert-bge",
    "command-r",
    "deepseek-coder",
    "deepseek-llm",
    "falcon",
    "gemma-4",
    "gpt-2",
    "gpt-neox",
    "llama-bpe",
    "llama-spm",
    "mpt",
    "nomic-bert-moe",
    "phi-3",
    "qwen2",
    "qwen35",
    "refact",
    "starcoder",
)
UNSUPPORTED: dict[str, str] = {}  # vocab name -> why it is skipped
SAMPLES = (
    "Hello world",
    " Hello, world! It's 3.14159",
    "naïve café — 日本語のテキスト",
    "🦙 llamas\n\n\tand  spaces  ",
    "x = [i ** 2 for i in range(10)]  # squares",
)


def _fetch_module():
    spec = importlib.util.spec_from_file_location(
        "fetch_vocab_tests", REPO / "models" / "fetch_vocab_tests.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fetch_vocab_tests", mod)
    spec.loader.exec_module(mod)
    return mod


def _names() -> list[str]:
    found = set()
    folder = _fetch_module().vocab_dir()
    if folder.is_dir():
        found = {
            p.name[len("ggml-vocab-") : -len(".gguf")] for p in folder.glob("ggml-vocab-*.gguf")
        }
    return sorted(found | set(KNOWN))


@pytest.fixture(scope="session")
def vocab_dir() -> Path:
    mod = _fetch_module()
    try:
        return mod.fetch()
    except (RuntimeError, OSError) as e:  # no PyPI access: nothing to compare against
        pytest.skip(f"llama.cpp vocab test files unavailable ({e})")


@cache
def _tokenizer(path: str) -> Tokenizer:
    return load_tokenizer(path)


def read_cases(path: Path) -> list[tuple[str, list[int]]]:
    """test-tokenizer-0's reading of .inp/.out: one ids line per separated string."""
    raw = path.with_name(path.name + ".inp").read_bytes().decode("utf-8")
    inputs = raw.split(SEP)
    if inputs and inputs[-1] == "":
        inputs.pop()  # the file ends with a separator
    lines = path.with_name(path.name + ".out").read_text(encoding="utf-8").split("\n")
    return [(s, [int(x) for x in lines[i].split()]) for i, s in enumerate(inputs)]


def _roundtrips(tok: Tokenizer) -> bool:
    """decode(encode(s)) == s holds when no normalizer or space clean-up is involved."""
    v = tok.vocab
    return v.type.value == "spm" or (v.type.value == "bpe" and not v.clean_spaces)


@pytest.mark.parametrize("name", _names())
def test_vocab(name: str, vocab_dir: Path) -> None:
    path = vocab_dir / f"ggml-vocab-{name}.gguf"
    if not path.is_file():
        pytest.skip(f"{path.name} is not in this llama.cpp release")
    if name in UNSUPPORTED:
        pytest.skip(UNSUPPORTED[name])
    tok = _tokenizer(str(path))
    if not path.with_name(path.name + ".inp").is_file():
        for s in SAMPLES:
            ids = tok.encode(s, add_special=False)
            assert ids and all(0 <= i < tok.vocab_size for i in ids)
            if _roundtrips(tok):
                assert tok.decode(ids) == s
        return
    cases = read_cases(path)
    failures = []
    for text, expected in cases:
        got = tok.encode(text, add_special=False, parse_special=False)
        if got != expected:
            failures.append(f"{text!r}: expected {expected}, got {got}")
        elif _roundtrips(tok) and tok.decode(got) != text:
            failures.append(f"{text!r}: decodes to {tok.decode(got)!r}")
    assert not failures, f"{len(failures)}/{len(cases)} cases differ:\n" + "\n".join(failures)


def _random_text(rng: random.Random) -> str:
    pieces = [
        " ",
        "  ",
        "\n",
        "\t",
        "'s",
        "'LL",
        "don't",
        "Hello",
        "world",
        "123",
        "4567",
        "3.14",
        "!!",
        "...",
        "—",
        "é",
        "ß",
        "Ωμέγα",
        "привет",
        "日本語",
        "한국어",
        "🦙",
        "👍🏽",
        "\u200d",
        "\u00a0",
        "\r\n",
        "<|im_end|>",
        "<s>",
        "[CLS]",
        "<0x41>",
        "x",
    ]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))


@pytest.mark.parametrize("name", [n for n in KNOWN if n not in UNSUPPORTED])
def test_vocab_against_llama_cpp(name: str, vocab_dir: Path) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    path = vocab_dir / f"ggml-vocab-{name}.gguf"
    if not path.is_file():
        pytest.skip(f"{path.name} is not in this llama.cpp release")
    ref = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    tok = _tokenizer(str(path))
    rng = random.Random(name)
    bad = []
    for _ in range(300):
        s = _random_text(rng)
        for add_special, parse_special in ((False, False), (True, True)):
            # llama-cpp-python's add_bos is llama_tokenize's add_special
            want = ref.tokenize(s.encode(), add_bos=add_special, special=parse_special)
            got = tok.encode(s, add_special=add_special, parse_special=parse_special)
            if got != want:
                bad.append(f"{s!r} special={add_special}: want {want} got {got}")
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:20])
