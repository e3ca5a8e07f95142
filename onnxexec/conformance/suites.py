"""The ONNX backend test suites as in-memory cases.

- node: generated from the onnx wheel's own case generators
  (`onnx.backend.test.case.node.collect_testcases`), not from data files.
- pytorch-converted, pytorch-operator, simple: model.onnx + test_data_set_*/*.pb
  folders shipped in `onnx/backend/test/data`.
- light: nine real CNNs with a reference output; inputs are generated exactly as
  onnx's runner does (`arange(n) / n` in the declared shape, runner.generate_dummy_data).
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from onnxexec.conformance.expected import SUITES


@dataclass
class Case:
    name: str
    suite: str
    model: onnx.ModelProto | None
    data_sets: list[tuple[list[Any], list[Any]]] = field(default_factory=list)
    rtol: float = 1e-3
    atol: float = 1e-7
    path: Path | None = None  # model file, loaded lazily for the file suites

    op: str = ""  # the op a node case tests; the suite name for model suites

    @property
    def op_type(self) -> str:
        return self.op or f"<{self.suite}>"

    def load(self) -> onnx.ModelProto:
        if self.model is None:
            assert self.path is not None
            self.model = onnx.load(str(self.path))
        return self.model


def _data_root() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def normalize(v: Any) -> Any:
    """TensorProto -> array; bytes strings -> str (onnxexec's string representation)."""
    if isinstance(v, onnx.TensorProto):
        v = numpy_helper.to_array(v)
    if isinstance(v, list | tuple):
        return [normalize(x) for x in v]
    if isinstance(v, np.ndarray) and v.dtype.kind in "OSU":
        flat = [
            x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else x
            for x in v.reshape(-1)
        ]
        return np.array(flat, dtype=object).reshape(v.shape)
    if isinstance(v, dict):
        return {k: normalize(x) for k, x in v.items()}
    return v


@cache
def _node_cases() -> tuple[Case, ...]:
    from onnx.backend.test.case import node

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        raw = node.collect_testcases(None)
    # The op under test: the single node's type; an *_expanded case (a function body
    # inlined into many nodes) takes the op of the case it expands.
    single = {c.name: c.model.graph.node[0].op_type for c in raw if len(c.model.graph.node) == 1}

    def op_of(c: Any) -> str:
        if c.name in single:
            return single[c.name]
        base = re.sub(r"_expanded(_ver\d+)?$", "", c.name)
        if base in single:
            return single[base]
        return c.model.graph.node[-1].op_type if c.model.graph.node else "?"

    return tuple(
        Case(
            c.name,
            "node",
            c.model,
            [([normalize(x) for x in i], [normalize(x) for x in o]) for i, o in c.data_sets],
            c.rtol,
            c.atol,
            op=op_of(c),
        )
        for c in raw
    )


def _load_pb(path: Path, tp: onnx.TypeProto) -> Any:
    data = path.read_bytes()
    kind = tp.WhichOneof("value")
    if kind == "sequence_type":
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return normalize(numpy_helper.to_list(seq))
    if kind == "optional_type":
        opt = onnx.OptionalProto()
        opt.ParseFromString(data)
        return normalize(numpy_helper.to_optional(opt))
    if kind == "map_type":
        m = onnx.MapProto()
        m.ParseFromString(data)
        return normalize(numpy_helper.to_dict(m))
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return normalize(numpy_helper.to_array(t))


def _folder_cases(suite: str) -> Iterator[Case]:
    root = _data_root() / suite
    for d in sorted(root.iterdir()):
        model_path = d / "model.onnx"
        if not model_path.is_file():
            continue
        model = onnx.load(str(model_path))
        inputs = [
            i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}
        ]
        data_sets = []
        for ds in sorted(d.glob("test_data_set_*")):
            n_in = len(list(ds.glob("input_*.pb")))
            n_out = len(list(ds.glob("output_*.pb")))
            ins = [_load_pb(ds / f"input_{i}.pb", inputs[i].type) for i in range(n_in)]
            outs = [
                _load_pb(ds / f"output_{i}.pb", model.graph.output[i].type) for i in range(n_out)
            ]
            data_sets.append((ins, outs))
        yield Case(d.name, suite, model, data_sets, 1e-3, 1e-7, model_path)


def _light_cases() -> Iterator[Case]:
    from onnx.backend.test.case import model as model_cases

    root = _data_root()
    for c in model_cases.collect_testcases():
        if not (c.url or "").startswith("onnx/backend/test/data/light/"):
            continue
        path = root / "light" / os.path.basename(c.url)
        yield Case(c.name, "light", None, [], c.rtol, c.atol, path)


def light_data(case: Case) -> list[tuple[list[Any], list[Any]]]:
    """Inputs as onnx's runner makes them; expected outputs from the shipped .pb files."""
    model = case.load()
    inits = {t.name for t in model.graph.initializer}
    ins = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim
        )
        n = int(np.prod(shape))
        ins.append((np.arange(n).reshape(shape) / n).astype(np.float32))
    assert case.path is not None
    prefix = str(case.path)[: -len(".onnx")]
    outs = [
        _load_pb(Path(f"{prefix}_output_{i}.pb"), o.type) for i, o in enumerate(model.graph.output)
    ]
    return [(ins, outs)]


def collect(suite: str = "all") -> list[Case]:
    """Cases of one suite, or of every suite for 'all'."""
    if suite == "all":
        return [c for s in SUITES for c in collect(s)]
    if suite == "node":
        return list(_node_cases())
    if suite == "light":
        return list(_light_cases())
    if suite in SUITES:
        return list(_folder_cases(suite))
    raise ValueError(f"unknown suite '{suite}'; choose from {', '.join(SUITES)} or all")
