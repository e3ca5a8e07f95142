"""Seeded mutators: raw bytes, GGUF records, metadata values and ONNX protos.

Every mutator takes a `random.Random`, so case i of a run is reproduced from the run
seed and i alone (see cases.py).
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any

from tests.fuzz.gguf_codec import ARRAY, GGUF, SCALAR, STRING, decode, encode

# values at the edges of the integer and float types a loader converts
INTS = [0, 1, -1, 2, 3, 7, 255, 256, 2**15, 2**16 - 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32]
INTS += [2**53 + 1, 2**62, 2**63 - 1, -(2**31), -(2**63)]
FLOATS = [0.0, -0.0, 1.0, -1.0, 1e-45, 1e-30, 1e30, 3.4e38, math.inf, -math.inf, math.nan]
_RANGES = {"B": (0, 255), "b": (-128, 127), "H": (0, 2**16 - 1), "h": (-(2**15), 2**15 - 1)}
_RANGES |= {"I": (0, 2**32 - 1), "i": (-(2**31), 2**31 - 1), "Q": (0, 2**64 - 1)}
_RANGES |= {"q": (-(2**63), 2**63 - 1)}


def mutate_bytes(rng: random.Random, data: bytes, hot: int | None = None) -> bytes:
    """1-4 edits: flip, set interesting byte, truncate, insert, delete, duplicate a slice.

    `hot`: edits land in data[:hot] (the header) 9 times in 10."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not b:
            b += bytes([rng.randrange(256)])
        end = hot if hot and hot <= len(b) and rng.random() < 0.9 else len(b)
        i = rng.randrange(max(end, 1))
        op = rng.randrange(7)
        if op == 0:
            b[i % len(b)] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i % len(b)] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif op == 2:
            del b[rng.randrange(len(b) + 1) :]
        elif op == 3:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 4:
            del b[i : i + rng.randint(1, 16)]
        elif op == 5:
            j = rng.randrange(len(b))
            b[i:i] = b[j : j + rng.randint(1, 64)]
        else:  # a 4- or 8-byte little-endian integer at i
            n = rng.choice([4, 8])
            v = rng.choice(INTS) % (1 << (8 * n))
            b[i : i + n] = v.to_bytes(n, "little")
    return bytes(b)


def mutate_value(rng: random.Random, vtype: int, value: Any) -> tuple[int, Any]:
    """A new (type, value) for one GGUF metadata entry: an edge value of the same type,
    another type, or an array grown, cut, emptied or retyped."""
    r = rng.random()
    if r < 0.15:  # another type altogether
        vtype = rng.choice([*SCALAR, STRING, ARRAY])
        return vtype, random_value(rng, vtype)
    if vtype in SCALAR:
        return vtype, _edge_scalar(rng, SCALAR[vtype])
    if vtype == STRING:
        return vtype, random_string(rng, value if isinstance(value, str) else "")
    etype, items = value
    items = list(items)
    op = rng.randrange(6)
    if op == 0:
        items = items[: rng.randrange(len(items) + 1)]
    elif op == 1:
        items = []
    elif op == 2 and items:
        i = rng.randrange(len(items))
        items[i] = _same_type(rng, etype, items[i])
    elif op == 3 and items:
        items += items[: rng.randint(1, 50)]
    elif op == 4:  # retype the elements
        etype = rng.choice([*SCALAR, STRING])
        items = [random_value(rng, etype) for _ in range(min(len(items), 300))]
    else:
        for _ in range(rng.randint(1, 5)):
            if items:
                i = rng.randrange(len(items))
                items[i] = _same_type(rng, etype, items[i])
    return ARRAY, (etype, items)


def _same_type(rng: random.Random, etype: int, v: Any) -> Any:
    """An edited array element that keeps the array's element type."""
    if etype in SCALAR:
        return _edge_scalar(rng, SCALAR[etype])
    if etype == STRING:
        return random_string(rng, v if isinstance(v, str) else "")
    return v


def _edge_scalar(rng: random.Random, code: str) -> Any:
    if code == "?":
        return rng.random() < 0.5
    if code in "fd":
        v = rng.choice(FLOATS) if rng.random() < 0.7 else rng.uniform(-1e6, 1e6)
        if code == "f" and math.isfinite(v) and abs(v) > 3.4e38:
            v = math.copysign(math.inf, v)
        return v
    lo, hi = _RANGES[code]
    v = rng.choice(INTS) if rng.random() < 0.7 else rng.randint(lo, min(hi, 10**6))
    return min(max(v, lo), hi)


def random_value(rng: random.Random, vtype: int) -> Any:
    if vtype in SCALAR:
        return _edge_scalar(rng, SCALAR[vtype])
    if vtype == STRING:
        return random_string(rng, "")
    etype = rng.choice([*SCALAR, STRING])
    return (etype, [random_value(rng, etype) for _ in range(rng.randint(0, 8))])


def random_string(rng: random.Random, base: str) -> str:
    """Empty, long, invalid UTF-8 (surrogate-escaped bytes), special-looking or edited."""
    op = rng.randrange(6)
    if op == 0:
        return ""
    if op == 1:
        return "x" * rng.choice([1000, 70000])
    if op == 2:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 12))).decode(
            "utf-8", "surrogateescape"
        )
    if op == 3:
        return rng.choice(["<0xZZ>", "<0x", "<s>", "</s>", "<|im_end|>", "▁", "Ġ", " ", "\0"])
    if op == 4 and base:
        i = rng.randrange(len(base))
        return base[:i] + chr(rng.randrange(0x110000 - 0x800)) + base[i + 1 :]
    return base[: rng.randrange(len(base) + 1)]


def mutate_gguf_struct(rng: random.Random, data: bytes) -> bytes:
    """1-3 record edits of a well-formed GGUF: a metadata value or type, a tensor's
    dims, type or offset, records dropped or duplicated, header counts, alignment."""
    g = decode(data)
    for _ in range(rng.randint(1, 3)):
        _edit_gguf(rng, g)
    return encode(g)


def _edit_gguf(rng: random.Random, g: GGUF) -> None:
    op = rng.randrange(10)
    if op <= 3 and g.kvs:
        kv = rng.choice(g.kvs)
        kv.vtype, kv.value = mutate_value(rng, kv.vtype, kv.value)
    elif op == 4 and g.kvs:
        g.kvs.remove(rng.choice(g.kvs))
    elif op == 5 and g.kvs:
        g.kvs.append(copy.deepcopy(rng.choice(g.kvs)))
        if rng.random() < 0.5:
            g.kvs[-1].key += rng.choice(["", "x", ".y"])
    elif op == 6 and g.tensors:
        t = rng.choice(g.tensors)
        r = rng.randrange(5)
        if r == 0 and t.ne:
            t.ne[rng.randrange(len(t.ne))] = rng.choice([0, 1, 2, 31, 32, 256, 2**32, 2**63 - 1])
        elif r == 1:
            t.ne = t.ne[: rng.randrange(len(t.ne) + 1)] or [rng.choice([0, 1, 64])]
        elif r == 2:
            t.ne = [*t.ne, rng.choice([1, 2, 0])]
        elif r == 3 and t.ne:
            t.ne[0], t.ne[-1] = t.ne[-1], t.ne[0]
        else:
            t.ne = [d * 2 for d in t.ne] if rng.random() < 0.5 else [max(d // 2, 0) for d in t.ne]
    elif op == 7 and g.tensors:
        t = rng.choice(g.tensors)
        t.ggml_type = rng.choice([0, 1, 2, 3, 6, 7, 8, 10, 12, 14, 15, 20, 24, 26, 28, 30, 39, 99])
    elif op == 8 and g.tensors:
        t = rng.choice(g.tensors)
        t.offset = rng.choice([0, 32, t.offset + 32, t.offset - 32, 2**63, len(g.data)]) % 2**64
    else:
        r = rng.randrange(4)
        if r == 0 and g.tensors:
            g.tensors.remove(rng.choice(g.tensors))
        elif r == 1:
            g.n_kv = rng.choice([0, len(g.kvs) + 1, 2**63, 2**64 - 1])
        elif r == 2:
            g.n_tensors = rng.choice([0, len(g.tensors) + 1, 2**40])
        else:
            g.set("general.alignment", 4, rng.choice([0, 1, 3, 16, 64, 2**31]))


def mutate_metadata(rng: random.Random, md: dict[str, Any]) -> dict[str, Any]:
    """Tokenizer metadata with 1-3 entries dropped, retyped or edited (decoded values,
    as read_gguf returns them)."""
    md = dict(md)
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(sorted(md))
        r = rng.randrange(8)
        if r == 0:
            del md[key]
        elif r == 1:
            md[key] = rng.choice([None, 0, -1, 2**40, "", "x", [], [1, 2], 1.5, True])
        elif isinstance(md[key], list):
            items = list(md[key])
            if items and r <= 4:
                for _ in range(rng.randint(1, 20)):
                    i = rng.randrange(len(items))
                    items[i] = _edit_item(rng, items[i])
            elif r == 5:
                items = items[: rng.randrange(len(items) + 1)]
            else:
                items = items + items[: rng.randint(1, 20)]
            md[key] = items
        else:
            md[key] = _edit_item(rng, md[key])
        if rng.random() < 0.05:
            md[
                "tokenizer.ggml." + rng.choice(["eos_token_id", "bos_token_id", "add_bos_token"])
            ] = rng.choice(INTS)
    return md


def _edit_item(rng: random.Random, v: Any) -> Any:
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return rng.choice(INTS) if rng.random() < 0.7 else v + rng.randint(-3, 3)
    if isinstance(v, float):
        return rng.choice(FLOATS)
    if isinstance(v, str):
        return random_string(rng, v)
    return v


def random_text(rng: random.Random, specials: list[str]) -> str:
    """Text for encode(): ASCII, any code point, lone surrogates, whitespace runs,
    special-token texts, or bytes decoded with surrogateescape."""
    parts = []
    for _ in range(rng.randint(0, 12)):
        r = rng.randrange(8)
        if r == 0:
            parts.append("".join(chr(rng.randrange(32, 127)) for _ in range(rng.randint(1, 20))))
        elif r == 1:
            parts.append("".join(chr(rng.randrange(0x110000)) for _ in range(rng.randint(1, 6))))
        elif r == 2:
            parts.append(rng.choice([" ", "  ", "\n", "\t", "\r\n", "\u3000", " " * 40]))
        elif r == 3 and specials:
            parts.append(rng.choice(specials))
        elif r == 4:
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
            parts.append(raw.decode("utf-8", "surrogateescape"))
        elif r == 5:
            parts.append(
                rng.choice(["'s", "'ll", "123456789", "ÀÉÎõü", "日本語", "🙂👍", "\u0301"])
            )
        elif r == 6:
            parts.append("".join(chr(rng.randrange(0xD800, 0xE000)) for _ in range(2)))
        else:
            parts.append("a" * rng.randint(1, 3000))
    return "".join(parts)


# -- ONNX -------------------------------------------------------------------------------


EXTERNAL_VALUES = ["abc", "-1", "1e3", "", str(2**70), "0", "4", "12", "../w.bin", "/etc/hostname"]
EXTERNAL_VALUES += ["missing.bin", "w.bin", "."]


def mutate_onnx_struct(rng: random.Random, data: bytes) -> bytes:
    """1-3 edits of a parsed ModelProto: attribute values and types, tensor dims, types
    and raw_data, node op/domain/inputs/outputs, value_info shapes, opsets, ir_version."""
    import onnx

    m = onnx.ModelProto()
    m.ParseFromString(data)
    for _ in range(rng.randint(1, 3)):
        _edit_onnx(rng, m)
    return m.SerializeToString()


def _graphs(g: Any) -> list[Any]:
    out = [g]
    for n in g.node:
        for a in n.attribute:
            if a.HasField("g"):
                out += _graphs(a.g)
            for sub in a.graphs:
                out += _graphs(sub)
    return out


def _edit_onnx(rng: random.Random, m: Any) -> None:
    g = rng.choice(_graphs(m.graph))
    op = rng.randrange(10)
    if op <= 2 and g.node:
        n = rng.choice(g.node)
        if n.attribute and rng.random() < 0.8:
            _edit_attr(rng, rng.choice(n.attribute))
        else:
            a = n.attribute.add()
            a.name = rng.choice(["axis", "pads", "strides", "kernel_shape", "group", "perm", "to"])
            a.type, a.i = 2, rng.choice(INTS) % 2**63
    elif op == 3 and g.initializer:
        t = rng.choice(g.initializer)
        r = rng.randrange(5)
        if r == 4 and t.external_data:
            e = rng.choice(t.external_data)
            e.value = rng.choice(EXTERNAL_VALUES)
        elif r == 0 and t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, 3, -1, 2**31, 2**62])
        elif r == 1:
            t.data_type = rng.choice([0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 16, 17, 21, 23, 99])
        elif r == 2:
            t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)]
        else:
            t.dims.append(rng.choice([1, 2, 0]))
    elif op == 4 and g.node:
        n = rng.choice(g.node)
        if rng.random() < 0.5:
            n.op_type = rng.choice(
                [
                    "Conv",
                    "MaxPool",
                    "Gather",
                    "Reshape",
                    "Transpose",
                    "Split",
                    "Concat",
                    "If",
                    "Loop",
                    "Slice",
                    "Resize",
                    "Einsum",
                    "TopK",
                    "Pad",
                    "Foo",
                    "",
                ]
            )
        else:
            n.domain = rng.choice(["", "com.microsoft", "ai.onnx.ml", "x.y"])
    elif op == 5 and g.node:
        n = rng.choice(g.node)
        names = [i.name for i in g.input] + [t.name for t in g.initializer] + [""]
        names += [o for k in g.node for o in k.output] + ["missing"]
        if n.input and rng.random() < 0.6:
            n.input[rng.randrange(len(n.input))] = rng.choice(names)
        elif rng.random() < 0.5:
            n.input.append(rng.choice(names))
        elif n.output:
            n.output[rng.randrange(len(n.output))] = rng.choice(names)
    elif op == 6 and (g.input or g.output):
        vi = rng.choice(list(g.input) + list(g.output))
        tt = vi.type.tensor_type
        if tt.shape.dim and rng.random() < 0.7:
            d = rng.choice(tt.shape.dim)
            d.dim_value = rng.choice([0, 1, 2, 7, 2**20, -3])
        else:
            tt.elem_type = rng.choice([0, 1, 2, 6, 7, 9, 10, 11, 16, 99])
    elif op == 7:
        if m.opset_import and rng.random() < 0.8:
            m.opset_import[0].version = rng.choice([1, 6, 9, 11, 13, 17, 21, 25, 99, 2**40])
        else:
            m.ir_version = rng.choice([0, 1, 3, 7, 10, 99])
    elif op == 8 and g.node:
        if rng.random() < 0.5:
            del g.node[rng.randrange(len(g.node))]
        else:
            g.node.append(copy.deepcopy(rng.choice(g.node)))
    elif g.output:
        if rng.random() < 0.5:
            g.output[0].name = rng.choice(["", "nope"] + [o for n in g.node for o in n.output])
        else:
            del g.output[rng.randrange(len(g.output))]


def _edit_attr(rng: random.Random, a: Any) -> None:
    r = rng.randrange(8)
    if r >= 6 and a.ints:  # small values, negative ones included: pads, axes, strides
        v = rng.choice([-3, -2, -1, 0, 1, 2, 3, 5])
        if r == 6:
            a.ints[rng.randrange(len(a.ints))] = v
        else:
            a.ints[:] = [v] * len(a.ints)
    elif r == 6:
        a.i = rng.choice([-3, -2, -1, 0, 1, 2, 3, 5])
    elif r == 0:
        a.i = rng.choice(INTS) % 2**63 * rng.choice([1, -1])
    elif r == 1:
        a.f = rng.choice(FLOATS)
    elif r == 2 and a.ints:
        a.ints[rng.randrange(len(a.ints))] = rng.choice(INTS) % 2**62 * rng.choice([1, -1])
    elif r == 3:
        del a.ints[rng.randrange(len(a.ints) + 1) :]
        a.ints.extend(rng.choice([[], [0], [-1, -1], [1, 2, 3, 4, 5], [2**40]]))
    elif r == 4:
        a.type = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 13])
    else:
        a.s = rng.choice([b"", b"\xff\xfe", b"NOTSET", b"constant", b"x" * 100])
