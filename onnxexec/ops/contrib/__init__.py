"""onnxruntime's contrib ops (domain com.microsoft), as its transformer optimizer and
quantizers emit them; one module per family (activations, normalization, attention...).

The handler contract is the one of every op (STYLE.md section 3): register with
`@op(op_type, since, domain=MS_DOMAIN)`, inputs positional, attributes keyword-only
with the default onnxruntime's schema gives. onnx ships no schemas for this domain, so
tests/unit/ops/test_contrib_signatures.py compares each handler with the schema
onnxruntime registers (`onnxruntime.capi...get_all_operator_schema()`), whose text is
docs/ContribOperators.md in onnxruntime's repository.

onnxruntime also registers a few ops of the *default* domain that onnx's own opset
does not have, and its optimizer emits them: they are listed in ORT_DEFAULT_DOMAIN_OPS
so the onnx-schema test skips them and the contrib test checks them instead.
"""

from __future__ import annotations

from typing import Final

MS_DOMAIN: Final = "com.microsoft"

# (op_type, since) of default-domain handlers whose schema is onnxruntime's, not onnx's:
# LayerNormalization-1 (onnx's starts at 17; the optimizer fuses it at any opset) and
# SimplifiedLayerNormalization-1 (RMS norm; onnx has RMSNormalization only from 23).
ORT_DEFAULT_DOMAIN_OPS: Final = frozenset(
    {("LayerNormalization", 1), ("SimplifiedLayerNormalization", 1)}
)
