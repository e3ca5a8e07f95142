"""Exception types shared by every layer (no imports, so anything may raise them)."""

from __future__ import annotations


class OnnxExecError(Exception):
    """Base class: every error onnxexec raises on purpose derives from this."""


class ModelLoadError(OnnxExecError):
    """A model file is missing, malformed, or refers to data it may not read."""


class UnsupportedOpError(OnnxExecError):
    """One or more (domain, op_type, opset) combinations have no handler."""


class InvalidGraphError(OnnxExecError):
    """The graph is structurally wrong: an undefined value, a bad attribute."""


class InvalidFeedError(OnnxExecError):
    """A feed given to run() does not match the model's declared inputs."""


class NodeExecutionError(OnnxExecError):
    """A handler failed; the message names the node, op, opset and input types."""


class GGUFError(ModelLoadError, ValueError):
    """A GGUF file or its metadata is malformed or unsupported (names the key, tensor,
    type or architecture). Also a ValueError: the tokenizer raised those before."""
