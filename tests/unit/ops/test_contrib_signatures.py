"""Every com.microsoft handler (and each default-domain op only onnxruntime defines)
against the schema onnxruntime registers: same attribute names, the same required
ones, and the default onnxruntime's schema states where it states one. onnx ships no
schemas for these ops, so onnxruntime's (docs/ContribOperators.md) is the spec."""

from __future__ import annotations

import inspect

import pytest

from onnxexec.ops.contrib import MS_DOMAIN, ORT_DEFAULT_DOMAIN_OPS
from onnxexec.ops.registry import all_handlers

onnx = pytest.importorskip("onnx")
pybind = pytest.importorskip("onnxruntime.capi.onnxruntime_pybind11_state")

HANDLERS = [
    h
    for h in all_handlers()
    if h.domain == MS_DOMAIN or (h.domain == "" and (h.op_type, h.since) in ORT_DEFAULT_DOMAIN_OPS)
]
_SCHEMAS = {(s.domain, s.name, s.since_version): s for s in pybind.get_all_operator_schema()}


def _default(attr):
    raw = attr._default_value
    if not raw:
        return None
    value = onnx.helper.get_attribute_value(onnx.AttributeProto.FromString(raw))
    return value.decode() if isinstance(value, bytes) else value


def test_contrib_handlers_exist():
    # the table below must not pass by being empty
    assert len(HANDLERS) >= 19


@pytest.mark.parametrize("h", HANDLERS, ids=[h.qualname for h in HANDLERS])
def test_contrib_handler_matches_onnxruntime_schema(h):
    schema = _SCHEMAS.get((h.domain, h.op_type, h.since))
    assert schema is not None, f"{h.qualname}: onnxruntime registers no schema at that version"
    assert set(h.attributes) == set(schema.attributes), (
        f"{h.qualname}: keyword-only attributes {sorted(h.attributes)} "
        f"!= onnxruntime's {sorted(schema.attributes)}"
    )
    required = {k for k, a in schema.attributes.items() if a.required}
    assert h.required_attributes == required, f"{h.qualname}: required attributes differ"
    params = inspect.signature(h.fn).parameters
    for name, attr in schema.attributes.items():
        want = _default(attr)
        if want is None:  # the schema states none; the handler takes the doc's default
            continue
        got = params[name].default
        if isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-6), f"{h.qualname}: default of {name}"
        else:
            assert got == want, f"{h.qualname}: default of {name} is {got!r}, not {want!r}"
    # a variadic schema input (QLinearConcat's triples) is one *args parameter
    par = inspect.Parameter
    kinds = (par.POSITIONAL_ONLY, par.POSITIONAL_OR_KEYWORD, par.VAR_POSITIONAL)
    n_inputs = sum(p.kind in kinds for p in params.values())
    assert n_inputs == len(schema.inputs), f"{h.qualname}: {n_inputs} inputs, schema has"
