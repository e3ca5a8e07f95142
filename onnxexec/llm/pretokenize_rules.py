"""Which pre-tokenizer regexes each GGUF `tokenizer.ggml.pre` value selects.

Data only, transcribed from llama.cpp src/llama-vocab.cpp (llama_vocab::impl::load maps
the name to a LLAMA_VOCAB_PRE_TYPE_* and to vocab options; llm_tokenizer_bpe's
constructor maps the type to its regex list). The regexes are llama.cpp's adapted
forms (e.g. `(?i:'s|...)` rewritten as `'[sS]|...`), which pretokenize.py applies
with llama.cpp's own matching rules. Options:
  keep_spaces    clean_spaces = false (no " ," -> "," clean-up when decoding)
  ignore_merges  a pre-token that is itself a vocab entry is not BPE-merged
  add_bos        add_bos defaults to true (metadata add_bos_token still wins)
  no_bos         the default BOS id is dropped (chatglm)
  escape_ws      spaces become U+2581 before BPE (SentencePiece-style BPE)
  add_sep        add_sep defaults to true
"""

from __future__ import annotations

CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
# the regexes llama.cpp runs with a hand-written splitter (unicode.cpp) when the
# expression string is exactly one of these
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3 = (
    CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2 = (
    CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN35 = (
    CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
NEWLINES = r"[^\n]+|[\n]+"
AFMOE_DIGITS = r"\p{AFMoE_digits}"
TINY_AYA_DIGITS = r"\d{1,3}(?=(?:\d{3})*\b)"
KIMI_K2 = r"\p{Han}+"

_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
_CJK_KANA = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
_DEEPSEEK_LETTERS = (  # \s?[A-Za-z and the cased letters of other scripts]+
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293"
    "\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c"
    "\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0"
    "-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-"
    "\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b"
    "\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-"
    "\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113"
    "\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f"
    "\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3"
    "\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00"
    "-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-"
    "\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-"
    "\U000118df\U0001e900-\U0001e943]+"
)
_ASCII_PUNCT_WORD = r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"""
_DEEPSEEK3_MAIN = (
    _ASCII_PUNCT_WORD + r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLIT_CASE = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+<C>"
    r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*<C>"
)
_UPPER_LOWER = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+<C>"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*<C>"
)
_TAIL_SLASH = r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_NO_PUNCT_SPLIT = " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"
_OPT = CONTRACTIONS + "?"

REGEXES: dict[str, tuple[str, ...]] = {
    "default": (r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"),
    "llama3": (LLAMA3,),
    "dbrx": (LLAMA3,),
    "smaug": (LLAMA3,),
    "chatglm4": (LLAMA3,),
    "jais2": (
        CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)"
        r"|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}",
    ),
    "deepseek-llm": (
        "[\r\n]",
        _DEEPSEEK_LETTERS,
        "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
        r"\s+$",
        _CJK,
        r"\p{N}+",
    ),
    "deepseek3-llm": (r"\p{N}{1,3}", _CJK_KANA, _DEEPSEEK3_MAIN),
    "spark2_5": (
        r"\p{N}{1,3}",
        _CJK_KANA,
        _ASCII_PUNCT_WORD + r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]"
        r"|\s+(?!\S)|\s+",
        r"\p{N}",
    ),
    "youtu": (
        "[\uac00-\ud7a3\u3131-\u318e]+"
        "|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b\uff0c\u3001-\u303f\ufe30-\ufe4f]+"
        "|[\u3105-\u312f]+|" + _CJK_KANA,
        _UPPER_LOWER.replace("<C>", _OPT) + r"|\p{N}" + _TAIL_SLASH,
    ),
    "deepseek-coder": ("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK, r"\p{N}"),
    "falcon": (r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"),
    "starcoder": (r"\p{N}", GPT2),
    "gpt2": (GPT2,),
    "qwen2": (QWEN2,),
    "qwen35": (QWEN35,),
    "poro": (_NO_PUNCT_SPLIT,),
    "viking": (_NO_PUNCT_SPLIT, r"\p{N}"),
    "tekken": (_SPLIT_CASE.replace("<C>", "") + r"|\p{N}" + _TAIL_SLASH,),
    "chameleon": (
        r"<sentinel:[0-9]+>",
        r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
        r"([\t\n]|    |  )",
        r"\p{N}",
        r"[\p{P}!-/:-@\[-`{-~]",
        GPT2,
    ),
    "gpt-4o": (_SPLIT_CASE.replace("<C>", _OPT) + r"|\p{N}{1,3}" + _TAIL_SLASH,),
    "granite-emb-multi": (
        _SPLIT_CASE.replace("<C>", _OPT).replace(r"(?=[\p{L}])", r"(?=[\p{L}\p{M}])")
        + r"|\p{N}{1,3}"
        + _TAIL_SLASH,
    ),
    "tiny-aya": (TINY_AYA_DIGITS, _UPPER_LOWER.replace("<C>", _OPT) + r"|\p{N}{1,3}" + _TAIL_SLASH),
    "kimi-k2": (KIMI_K2,),
    "superbpe": (r"\p{N}+", r"(?=(\d{3})+(?!\d))"),
    "bailingmoe": (
        r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
    ),
    "seed-coder": (
        CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "ufakzeka": (
        r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "afmoe": (
        AFMOE_DIGITS,
        "[\u4e00-\u9fff\u3400-\u4dbf\u8c48-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f\u2f00-\u2fdf\u0e40-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f\ua9e0-\ua9ff"
        "\uac00-\ud7af\u1100-\u11ff]+",
        _DEEPSEEK3_MAIN,
    ),
    "laguna": (NEWLINES, QWEN2),
    "exaone-moe": (
        CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+",
    ),
    "gemma4": (NEWLINES,),
    "minicpm5": (
        r"\p{N}{1,3}",
        CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "whitespace": (r"\S+",),
}

# tokenizer.ggml.pre -> (regex list key, options); "" (missing) means "default"
_GROUPS: tuple[tuple[str, str, str], ...] = (
    # names, regex key, options
    ("default", "default", ""),
    ("minicpm5", "minicpm5", "ignore_merges"),
    (
        "llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano",
        "llama3",
        "ignore_merges add_bos",
    ),
    ("deepseek-llm", "deepseek-llm", "keep_spaces"),
    ("deepseek-coder", "deepseek-coder", "keep_spaces"),
    ("deepseek-v3 hunyuan-dense hy_v4 joyai-llm", "deepseek3-llm", "keep_spaces"),
    ("spark2_5", "spark2_5", "keep_spaces"),
    ("youtu", "youtu", "keep_spaces ignore_merges"),
    ("falcon", "falcon", ""),
    (
        "mpt olmo jais gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum "
        "modern-bert exaone4",
        "gpt2",
        "",
    ),
    ("trillion granite-docling", "gpt2", "keep_spaces"),
    ("jina-v1-en jina-v2-code roberta-bpe", "gpt2", "add_sep"),
    ("jais-2", "jais2", ""),
    ("gemma4 granite-embed-multi-311m", "gemma4", "escape_ws"),
    ("sarvam-moe", "gemma4", "escape_ws keep_spaces"),
    ("whitespace", "whitespace", ""),
    ("starcoder refact codeshell exaone minerva-7b mellum2", "starcoder", ""),
    ("command-r smollm", "starcoder", "keep_spaces"),
    ("qwen2 deepseek-r1-qwen kormo f2llmv2 hunyuan solar-open grok-2", "qwen2", "keep_spaces"),
    ("stablelm2 megrez", "qwen2", ""),
    ("qwen35", "qwen35", "keep_spaces"),
    ("dbrx", "dbrx", ""),
    ("smaug-bpe", "smaug", ""),
    ("poro-chat", "poro", "keep_spaces"),
    ("bloom gpt3-finnish", "poro", ""),
    ("chatglm-bpe", "chatglm4", "no_bos"),
    ("glm4 glm5", "chatglm4", "no_bos ignore_merges"),
    ("viking", "viking", "keep_spaces"),
    ("tekken", "tekken", "keep_spaces ignore_merges add_bos"),
    ("chameleon", "chameleon", "add_bos keep_spaces"),
    ("gpt-4o llama4 kanana2 talkie minimax-m2", "gpt-4o", "keep_spaces"),
    ("granite-embed-multi-97m", "granite-emb-multi", "keep_spaces ignore_merges"),
    ("tiny_aya cohere2moe", "tiny-aya", "keep_spaces"),
    ("superbpe", "superbpe", "keep_spaces"),
    ("bailingmoe bailingmoe2 llada-moe", "bailingmoe", "keep_spaces"),
    ("seed-coder", "seed-coder", "keep_spaces"),
    ("kimi-k2", "kimi-k2", "keep_spaces"),
    ("ufakzeka", "ufakzeka", "keep_spaces"),
    ("afmoe", "afmoe", "keep_spaces"),
    ("laguna", "laguna", "keep_spaces"),
    ("exaone-moe", "exaone-moe", ""),
)

PRE_TOKENIZERS: dict[str, tuple[str, frozenset[str]]] = {
    name: (key, frozenset(opts.split())) for names, key, opts in _GROUPS for name in names.split()
}
