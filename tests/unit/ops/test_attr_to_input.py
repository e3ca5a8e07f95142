"""Attributes that became inputs across opsets give identical results.

Each case runs the same computation written the old way (attribute) and the new way
(input) at the opsets before and after the change, through onnxexec and onnxruntime:
every onnxexec result must equal onnxruntime's at the same opset, and all forms
must agree with each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from tests.unit.ops._node import run_node, run_ort

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)
POS = (RNG.random((2, 3, 4)) + 0.5).astype(np.float32)  # ReduceLogSum needs positive sums
Y1 = RNG.standard_normal((2, 1, 3, 1)).astype(np.float32)
IMG = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)


def i64(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


def f32(*v: float) -> np.ndarray:
    return np.array(v, np.float32)


def sc(v: float) -> np.ndarray:
    """A 0-d float32 tensor (Clip bounds, Dropout ratio)."""
    return np.array(v, np.float32)


@dataclass
class Form:
    """One way to write the node: (opset, inputs, attributes)."""

    opset: int
    inputs: list[np.ndarray | None]
    attrs: dict[str, Any] = field(default_factory=dict)
    # How many leading outputs to check against onnxruntime at this opset (None: all);
    # the rest are still checked against the other forms.
    ort_outputs: int | None = None


@dataclass
class Case:
    id: str
    op: str
    forms: list[Form]
    n_outputs: int = 1


REDUCE_18 = ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
             "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]  # fmt: skip

CASES = [
    # Split: `split` attribute (2, 11) -> input (13); num_outputs attribute (18)
    Case(
        "Split-sizes",
        "Split",
        [
            Form(2, [X], {"axis": 2, "split": [1, 3]}),
            Form(11, [X], {"axis": -1, "split": [1, 3]}),
            Form(13, [X, i64(1, 3)], {"axis": -1}),
            Form(18, [X, i64(1, 3)], {"axis": 2}),
        ],
        n_outputs=2,
    ),
    Case(
        "Split-equal",
        "Split",
        [
            Form(11, [X], {"axis": 2}),
            Form(13, [X], {"axis": 2}),
            Form(18, [X], {"axis": 2, "num_outputs": 2}),
        ],
        n_outputs=2,
    ),
    # Squeeze / Unsqueeze: `axes` attribute (1, 11) -> input (13)
    Case(
        "Squeeze",
        "Squeeze",
        [
            Form(1, [Y1], {"axes": [1, 3]}),
            Form(11, [Y1], {"axes": [-1, 1]}),
            Form(13, [Y1, i64(1, -1)]),
            Form(21, [Y1, i64(3, 1)]),
        ],
    ),
    Case("Squeeze-all", "Squeeze", [Form(11, [Y1]), Form(13, [Y1])]),
    Case(
        "Unsqueeze",
        "Unsqueeze",
        [
            Form(1, [X], {"axes": [0, 4]}),
            Form(11, [X], {"axes": [-1, 0]}),
            Form(13, [X, i64(0, -1)]),
            Form(21, [X, i64(4, 0)]),
        ],
    ),
    # ReduceSum: `axes` attribute (1, 11) -> input (13); the others at 18
    Case(
        "ReduceSum",
        "ReduceSum",
        [
            Form(1, [X], {"axes": [0, 2], "keepdims": 0}),
            Form(11, [X], {"axes": [0, -1], "keepdims": 0}),
            Form(13, [X, i64(0, -1)], {"keepdims": 0}),
        ],
    ),
    Case(
        "ReduceSum-all",
        "ReduceSum",
        [Form(11, [X]), Form(13, [X]), Form(13, [X, np.zeros(0, np.int64)])],
    ),
    *[
        Case(
            op,
            op,
            [
                Form(1, [POS], {"axes": [1]}),
                Form(13, [POS], {"axes": [-2]}),
                Form(18, [POS, i64(-2)]),
                Form(18, [POS, i64(1)], {"keepdims": 1, "noop_with_empty_axes": 0}),
            ],
        )
        for op in REDUCE_18
    ],
    # Pad: `paddings` (1), `pads`/`value` attributes (2) -> inputs (11); `axes` input (18)
    Case(
        "Pad-constant",
        "Pad",
        [
            # onnxruntime has no Pad-1 kernel: checked against the other forms only
            Form(1, [X], {"paddings": [0, 1, 0, 0, 0, 2], "value": 1.5}, ort_outputs=0),
            Form(2, [X], {"pads": [0, 1, 0, 0, 0, 2], "value": 1.5}),
            Form(11, [X, i64(0, 1, 0, 0, 0, 2), sc(1.5)]),
            Form(18, [X, i64(1, 0, 0, 2), sc(1.5), i64(1, 2)]),
            Form(21, [X, i64(0, 1, 0, 0, 0, 2), sc(1.5)]),
        ],
    ),
    *[
        Case(
            f"Pad-{mode}",
            "Pad",
            [
                Form(2, [X], {"pads": [0, 0, 2, 0, 0, 1], "mode": mode}),
                Form(11, [X, i64(0, 0, 2, 0, 0, 1)], {"mode": mode}),
                Form(18, [X, i64(2, 1), None, i64(-1)], {"mode": mode}),
            ],
        )
        for mode in ("reflect", "edge")
    ],
    # Clip: `min`/`max` attributes (1, 6) -> inputs (11, 12, 13)
    Case(
        "Clip",
        "Clip",
        [
            Form(6, [X], {"min": -0.5, "max": 0.75}),
            Form(11, [X, sc(-0.5), sc(0.75)]),
            Form(13, [X, sc(-0.5), sc(0.75)]),
        ],
    ),
    Case(
        "Clip-max-only",
        "Clip",
        [Form(6, [X], {"max": 0.25}), Form(11, [X, None, sc(0.25)])],
    ),
    # Slice: `starts`/`ends`/`axes` attributes (1) -> inputs (10), negative steps
    Case(
        "Slice",
        "Slice",
        [
            Form(1, [X], {"starts": [1, -3], "ends": [1000, -1], "axes": [1, 2]}),
            Form(10, [X, i64(1, -3), i64(1000, -1), i64(1, 2)]),
            Form(13, [X, i64(1, -3), i64(2**63 - 1, -1), i64(-2, -1), i64(1, 1)]),
        ],
    ),
    Case(
        "Slice-reverse",
        "Slice",
        [
            Form(10, [X, i64(-1), i64(-(2**63)), i64(2), i64(-1)]),
            Form(11, [X, i64(3), i64(-5), i64(-1), i64(-1)]),
            Form(13, [X, i64(-1), i64(-(2**63)), i64(2), i64(-1)]),
        ],
    ),
    # TopK: `k` attribute (1) -> input (10); largest/sorted attributes from 11
    Case(
        "TopK",
        "TopK",
        [
            Form(1, [X], {"k": 2, "axis": 1}),
            Form(10, [X, i64(2)], {"axis": 1}),
            Form(11, [X, i64(2)], {"axis": -2}),
            Form(24, [X, i64(2)], {"axis": 1, "largest": 1, "sorted": 1}),
        ],
        n_outputs=2,
    ),
    # Dropout (inference): `ratio` attribute (7, 10) -> inputs ratio/training_mode (12).
    # onnxruntime's Dropout-10 kernel returns an all-False mask in inference although
    # nothing is dropped (its Dropout-12+ and onnx's reference evaluator give all True):
    # that mask is checked against the opset-12+ forms only.
    Case(
        "Dropout",
        "Dropout",
        [
            Form(10, [X], {"ratio": 0.3}, ort_outputs=1),
            Form(7, [X], {"ratio": 0.3}, ort_outputs=1),  # mask is float32 before 10
            Form(12, [X, sc(0.3)]),
            Form(13, [X, sc(0.3), np.array(False)]),
            Form(22, [X, sc(0.3), np.array(False)]),
        ],
        n_outputs=2,
    ),
    Case("Dropout-y-only", "Dropout", [Form(7, [X], {"ratio": 0.3}), Form(12, [X])]),
    # Upsample: `scales` attribute (7) -> input (9); Resize-10 takes the same input
    Case(
        "Upsample-nearest",
        "Upsample",
        [
            Form(7, [IMG], {"scales": [1.0, 1.0, 2.0, 3.0]}),
            Form(9, [IMG, f32(1, 1, 2, 3)]),
        ],
    ),
    Case(
        "Upsample-linear",
        "Upsample",
        [
            Form(7, [IMG], {"scales": [1.0, 1.0, 2.0, 2.0], "mode": "linear"}),
            Form(9, [IMG, f32(1, 1, 2, 2)], {"mode": "linear"}),
        ],
    ),
    # Resize: scales as input 1 (10) -> input 2 after roi (11, 13); axes attribute (18)
    Case(
        "Resize-nearest",
        "Resize",
        [
            Form(10, [IMG, f32(1, 1, 2, 3)]),
            Form(
                11,
                [IMG, f32(), f32(1, 1, 2, 3)],
                {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
            ),
            Form(
                13,
                [IMG, None, f32(1, 1, 2, 3)],
                {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
            ),
            Form(
                18,
                [IMG, None, f32(2, 3)],
                {
                    "axes": [2, 3],
                    "coordinate_transformation_mode": "asymmetric",
                    "nearest_mode": "floor",
                },
            ),
        ],
    ),
    Case(
        "Resize-linear",
        "Resize",
        [
            Form(10, [IMG, f32(1, 1, 2, 2)], {"mode": "linear"}),
            Form(
                13,
                [IMG, None, f32(1, 1, 2, 2)],
                {"mode": "linear", "coordinate_transformation_mode": "asymmetric"},
            ),
            Form(
                19,
                [IMG, None, None, i64(6, 8)],
                {"mode": "linear", "coordinate_transformation_mode": "asymmetric", "axes": [2, 3]},
            ),
        ],
    ),
    # Reshape: `shape` attribute (1) -> input (5); Tile: tiles/axis inputs (1) -> repeats (6)
    Case(
        "Reshape",
        "Reshape",
        [
            Form(1, [X], {"shape": [4, 0, -1]}),
            Form(5, [X, i64(4, 0, -1)]),
            Form(21, [X, i64(4, 3, 2)]),
        ],
    ),
    Case(
        "Tile",
        "Tile",
        [
            Form(6, [X[0], i64(1, 2)]),
            Form(13, [X[0], i64(1, 2)]),
            # onnxruntime has no Tile-1 kernel: this form is checked against the others
            Form(1, [X[0], f32(2), f32(1)], ort_outputs=0),
        ],
    ),
]


def run_forms(case: Case, runner: Any, ort: bool = False) -> list[list[np.ndarray]]:
    outs = []
    for f in case.forms:
        if ort and f.ort_outputs == 0:
            outs.append([])
            continue
        outs.append(runner(case.op, f.inputs, case.n_outputs, opset=f.opset, **f.attrs))
    return outs


def equal(a: np.ndarray, b: np.ndarray, where: str) -> None:
    assert a.shape == b.shape, f"{where}: shape {a.shape} vs {b.shape}"
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=where)
    else:  # bool / integer outputs (TopK indices, Dropout masks) match exactly
        np.testing.assert_array_equal(a, b, err_msg=where)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_old_and_new_forms_agree_with_onnxruntime(case: Case) -> None:
    ours = run_forms(case, run_node)
    theirs = run_forms(case, run_ort, ort=True)
    first = ours[0]
    for form, mine, ref in zip(case.forms, ours, theirs, strict=True):
        where = f"{case.id} at opset {form.opset}"
        assert len(mine) == len(first) == case.n_outputs, where
        for k, a in enumerate(mine):
            if k < len(ref) and (form.ort_outputs is None or k < form.ort_outputs):
                assert a.dtype == ref[k].dtype, f"{where} output {k} dtype vs onnxruntime"
                equal(a, ref[k], f"{where} output {k} vs onnxruntime")
            # Dropout's mask was float before opset 10, bool after: compare values only.
            equal(a, first[k].astype(a.dtype), f"{where} output {k} vs opset {case.forms[0].opset}")
