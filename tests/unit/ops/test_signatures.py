"""Every handler's signature is the spec: registered at a real schema version, with
exactly the schema's attributes as keyword-only parameters."""

from __future__ import annotations

import onnx
import pytest

from onnxexec.ops.contrib import ORT_DEFAULT_DOMAIN_OPS
from onnxexec.ops.registry import all_handlers

SPEC_DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview.training")
# ops onnxruntime adds to the default domain: test_contrib_signatures checks them
HANDLERS = [
    h
    for h in all_handlers()
    if h.domain in SPEC_DOMAINS and (h.op_type, h.since) not in ORT_DEFAULT_DOMAIN_OPS
]


@pytest.mark.parametrize("h", HANDLERS, ids=[h.qualname for h in HANDLERS])
def test_handler_matches_schema(h):
    try:
        schema = onnx.defs.get_schema(h.op_type, h.since, h.domain)
    except onnx.defs.SchemaError:
        pytest.fail(f"{h.qualname}: no ONNX schema at or below that version")
    assert schema.since_version == h.since, (
        f"{h.qualname}: registered at {h.since}, but the schema in force there is "
        f"version {schema.since_version}"
    )
    if not h.accepts_any_attribute:
        assert set(h.attributes) == set(schema.attributes), (
            f"{h.qualname}: keyword-only attributes {sorted(h.attributes)} "
            f"!= schema attributes {sorted(schema.attributes)}"
        )
        required = {k for k, a in schema.attributes.items() if a.required}
        assert h.required_attributes == required, (
            f"{h.qualname}: required attributes differ from the spec"
        )
