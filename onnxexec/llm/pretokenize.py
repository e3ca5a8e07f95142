"""Split text into pre-tokens exactly as llama.cpp's unicode_regex_split does.

llama.cpp applies a list of regexes one after the other, each refining the previous
split: within every current fragment, each match and each unmatched stretch between
matches becomes a fragment of its own. Three ways of matching, reproduced here:

* Hand-written splitters for the common regexes (GPT-2, llama3, qwen2, qwen35,
  newline runs, AFMoE digits), chosen by exact string equality with the expression.
  Their results differ from a true regex engine at the edges (e.g. `\\s+(?!\\S)`), so
  they are ported step by step rather than replaced by `re`.
* A regex using \\p{..} runs through std::regex on a "collapsed" text: every
  codepoint >= 128 becomes one byte standing for its category (whitespace -> 0x0B,
  \\p{N} -> 0xD1, \\p{L} -> 0xD2, \\p{P} -> 0xD3, \\p{M} -> 0xD4, \\p{S} -> 0xD5,
  anything else -> 0xD0) and each \\p{X} in the regex becomes a class of that byte
  plus its ASCII members. \\p{Lu}, \\p{Ll}... all collapse to \\p{L}.
* Any other regex runs through std::wregex on the codepoints, with non-ASCII
  whitespace replaced by 0x0B (std::regex's \\s is ASCII-only).

std::regex (ECMAScript) and Python's `re` agree on these patterns once `$` is read as
"end of input" and \\s, \\d are ASCII-only (re.ASCII).
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable, Sequence

from onnxexec.llm import pretokenize_rules as rules
from onnxexec.llm.unicode_props import (
    LETTER,
    MARK,
    NUMBER,
    PUNCTUATION,
    SYMBOL,
    WHITESPACE,
    WHITESPACE_BIT,
    byte_encode,
    flags_list,
    tolower,
)

_CR, _LF, _SP, _APOS = 0x0D, 0x0A, 0x20, 0x27

# (codepoints, their flags, fragment lengths) -> new fragment lengths
Splitter = Callable[[list[int], list[int], list[int]], list[int]]


def _contraction_len(cps: list[int], pos: int, end: int, fold: bool) -> int:
    """Length of 's 't 'm 'd ('re 've 'll) at pos, 0 if none (unicode.cpp)."""
    if cps[pos] != _APOS or pos + 1 >= end:
        return 0
    n1 = tolower(cps[pos + 1]) if fold else cps[pos + 1]
    if n1 in (0x73, 0x74, 0x6D, 0x64):  # s t m d
        return 2
    if pos + 2 < end:
        n2 = tolower(cps[pos + 2]) if fold else cps[pos + 2]
        if (n1, n2) in ((0x72, 0x65), (0x76, 0x65), (0x6C, 0x6C)):  # re ve ll
            return 3
    return 0


def _split_gpt2(cps: list[int], fl: list[int], offsets: list[int]) -> list[int]:
    """unicode_regex_split_custom_gpt2: 's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+|
    ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+ ; flags past the fragment end are 0."""
    out: list[int] = []
    stop = WHITESPACE_BIT | LETTER | NUMBER
    start = 0
    for length in offsets:
        ini, end = start, start + length
        start = end
        pos = prev = ini
        while pos < end:
            c, f = cps[pos], fl[pos]
            n = _contraction_len(cps, pos, end, fold=False)
            if n:
                pos += n
            else:
                f2 = (fl[pos + 1] if pos + 1 < end else 0) if c == _SP else f
                run = 0
                if f2 & LETTER:
                    run = LETTER
                elif f2 & NUMBER:
                    run = NUMBER
                if run or (f2 and not f2 & stop):
                    pos += c == _SP
                    while f2 and (f2 & run if run else not f2 & stop):
                        pos += 1
                        f2 = fl[pos] if pos < end else 0
                else:
                    nws = 0
                    while pos + nws < end and fl[pos + nws] & WHITESPACE_BIT:
                        nws += 1
                    if nws > 1 and pos + nws < end:
                        pos += nws - 1  # \s+(?!\S): leave one space for the next word
                    elif nws > 0:
                        pos += nws
                    else:
                        pos += 1
            out.append(pos - prev)
            prev = pos
    return out


def _split_llama_like(
    cps: list[int], fl: list[int], offsets: list[int], letters: int, max_digits: int
) -> list[int]:
    """unicode_regex_split_custom_llama3 / _qwen2 / _qwen35:
    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?<letters>+|\\p{N}{1,max}|
    ?[^\\s<letters>\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"""
    out: list[int] = []
    not_punct = WHITESPACE_BIT | letters | NUMBER
    start = 0
    for length in offsets:
        ini, end = start, start + length
        start = end
        pos = prev = ini

        def emit(upto: int) -> None:
            nonlocal prev
            if upto > prev:
                out.append(upto - prev)
            prev = upto

        while pos < end:
            c, f = cps[pos], fl[pos]
            n = _contraction_len(cps, pos, end, fold=True)
            if n:
                pos += n
                emit(pos)
                continue
            nxt = fl[pos + 1] if pos + 1 < end else 0
            if not (c == _CR or c == _LF or f & NUMBER) and (f & letters or nxt & letters):
                pos += 1
                while pos < end and fl[pos] & letters:
                    pos += 1
                emit(pos)
                continue
            if f & NUMBER:
                first = pos
                while pos < end and fl[pos] & NUMBER:
                    pos += 1
                    if pos - first >= max_digits:
                        emit(pos)
                        first = pos
                emit(pos)
                continue
            f2 = nxt if c == _SP else f
            if f and not f2 & not_punct:  # llama.cpp tests `flags`, not `flags2`, here
                pos += c == _SP
                while f2 and not f2 & not_punct:
                    pos += 1
                    f2 = fl[pos] if pos < end else 0
                while pos < end and cps[pos] in (_CR, _LF):
                    pos += 1
                emit(pos)
                continue
            nws = 0
            last_rn = 0
            while pos + nws < end and fl[pos + nws] & WHITESPACE_BIT:
                if cps[pos + nws] in (_CR, _LF):
                    last_rn = pos + nws + 1
                nws += 1
            if last_rn:
                pos = last_rn  # \s*[\r\n]+
            elif nws > 1 and pos + nws < end:
                pos += nws - 1  # \s+(?!\S)
            elif nws:
                pos += nws  # \s+
            else:
                pos += 1
            emit(pos)
    return out


def _split_newlines(cps: list[int], fl: list[int], offsets: list[int]) -> list[int]:
    """[^\\n]+|[\\n]+ : alternating runs of newlines and of everything else."""
    out: list[int] = []
    start = 0
    for length in offsets:
        pos, end = start, start + length
        start = end
        while pos < end:
            is_nl = cps[pos] == _LF
            run = pos
            while pos < end and (cps[pos] == _LF) == is_nl:
                pos += 1
            out.append(pos - run)
    return out


def _split_digit_groups(cps: list[int], fl: list[int], offsets: list[int]) -> list[int]:
    """unicode_regex_split_custom_afmoe: a digit run splits into a leading 1-2 digits
    (length mod 3) then groups of 3. The text before a run is emitted together with
    the run's first group, as llama.cpp does."""
    out: list[int] = []
    start = 0
    for length in offsets:
        ini, end = start, start + length
        start = end
        pos = prev = ini
        while pos < end:
            if not fl[pos] & NUMBER:
                pos += 1
                continue
            first = pos
            while pos < end and fl[pos] & NUMBER:
                pos += 1
            cur = first
            rem = (pos - first) % 3
            for step in ([rem] if rem else []) + [3] * ((pos - first) // 3):
                cur += step
                out.append(cur - prev)
                prev = cur
        if prev < end:
            out.append(end - prev)
    return out


_CUSTOM: dict[str, Splitter] = {
    rules.GPT2: _split_gpt2,
    rules.LLAMA3: functools.partial(_split_llama_like, letters=LETTER, max_digits=3),
    rules.QWEN2: functools.partial(_split_llama_like, letters=LETTER, max_digits=1),
    rules.QWEN35: functools.partial(_split_llama_like, letters=LETTER | MARK, max_digits=1),
    rules.NEWLINES: _split_newlines,
    rules.AFMOE_DIGITS: _split_digit_groups,
    rules.TINY_AYA_DIGITS: _split_digit_groups,
}

# unicode_regex_split's k_ucat_* tables: \p{X} -> collapsed byte + ASCII members
_UCAT = {
    "N": NUMBER,
    "L": LETTER,
    "P": PUNCTUATION,
    "M": MARK,
    "S": SYMBOL,
    "Lu": LETTER,
    "Ll": LETTER,
    "Lt": LETTER,
    "Lm": LETTER,
    "Lo": LETTER,
}
_UCAT_BYTE = {NUMBER: "\xd1", LETTER: "\xd2", PUNCTUATION: "\xd3", MARK: "\xd4", SYMBOL: "\xd5"}
_UCAT_ASCII = {
    NUMBER: "0-9",
    LETTER: "A-Za-z",
    PUNCTUATION: "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}",
    MARK: "",
    SYMBOL: "\\$\\+<->^`\\|\\~",
}
_UCAT_KEYS = tuple("\\p{" + k + "}" for k in _UCAT)


def _collapse_regex(expr: str) -> str:
    """The regex over collapsed text (the loop in unicode_regex_split)."""
    if any(ord(ch) >= 128 for ch in expr):
        raise ValueError(f"regex mixes unicode categories and non-ASCII characters: {expr!r}")
    out: list[str] = []
    inside = False
    i = 0
    while i < len(expr):
        ch = expr[i]
        if ch == "[" and (i == 0 or expr[i - 1] != "\\"):
            inside = True
        elif inside and ch == "]" and expr[i - 1] != "\\":
            inside = False
        elif expr.startswith("\\p{", i) and i + 3 < len(expr):
            close = expr.find("}", i + 3)
            cat = _UCAT.get(expr[i + 3 : close]) if 0 <= close <= i + 10 else None
            if cat is not None:
                cls = _UCAT_BYTE[cat] + _UCAT_ASCII[cat]
                out.append(cls if inside else "[" + cls + "]")
                i = close + 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _ecma_to_python(expr: str) -> str:
    """ECMAScript `$` (outside a class) only matches at the end of input."""
    out: list[str] = []
    inside = escaped = False
    for ch in expr:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "[":
            inside = True
        elif ch == "]":
            inside = False
        elif ch == "$" and not inside:
            out.append(r"\Z")
            continue
        out.append(ch)
    return "".join(out)


@functools.cache
def _compile(expr: str, collapsed: bool) -> re.Pattern[str]:
    pattern = _ecma_to_python(_collapse_regex(expr) if collapsed else expr)
    if "\\p{" in pattern:
        raise ValueError(f"unsupported pre-tokenizer regex (unknown \\p class): {expr!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "possible nested set" notes
        return re.compile(pattern, re.ASCII)


def _split_regex(text: str, pattern: re.Pattern[str], offsets: list[int]) -> list[int]:
    """unicode_regex_split_stl: matches and the gaps between them become fragments."""
    out: list[int] = []
    start = 0
    for length in offsets:
        sub = text[start : start + length]
        done = 0
        for m in pattern.finditer(sub):
            if m.start() > done:
                out.append(m.start() - done)
            out.append(m.end() - m.start())  # may be 0, as in llama.cpp
            done = m.end()
        if done < length:
            out.append(length - done)
        start += length
    return out


def _collapsed_text(cps: list[int], fl: list[int]) -> str:
    chars = []
    for c, f in zip(cps, fl, strict=True):
        if c < 128:
            chars.append(chr(c))
        elif f & WHITESPACE_BIT:
            chars.append("\x0b")
        else:
            chars.append(_UCAT_BYTE.get(f & 0xFF, "\xd0"))
    return "".join(chars)


def regex_split(text: str, exprs: Sequence[str], byte_level: bool = True) -> list[str]:
    """Pre-tokens of `text` for llama.cpp's regex list `exprs` (unicode_regex_split).

    byte_level: return each pre-token's UTF-8 bytes in GPT-2's byte-to-unicode form.
    """
    cps = [ord(c) for c in text]
    fl = flags_list(cps)
    offsets = [len(cps)]
    collapsed: str | None = None
    wide: str | None = None
    for expr in exprs:
        custom = _CUSTOM.get(expr)
        if custom is not None:
            result = custom(cps, fl, offsets)
            if result:  # llama.cpp falls back to std::regex on an empty result
                offsets = result
                continue
        if any(k in expr for k in _UCAT_KEYS):
            if collapsed is None:
                collapsed = _collapsed_text(cps, fl)
            offsets = _split_regex(collapsed, _compile(expr, True), offsets)
        else:
            if wide is None:
                wide = "".join("\x0b" if c > 0x7F and c in WHITESPACE else chr(c) for c in cps)
            offsets = _split_regex(wide, _compile(expr, False), offsets)
    words: list[str] = []
    start = 0
    for length in offsets:
        words.append(text[start : start + length])
        start += length
    return [byte_encode(w) for w in words] if byte_level else words
