"""Exception types shared by every layer (no imports, so anything may raise them).

Two families live here. onnxruntime's own status classes (`Fail`, `InvalidArgument`,
... as `onnxruntime.capi.onnxruntime_pybind11_state` defines them: plain `Exception`
subclasses) and onnxexec's `OnnxExecError` family. Each onnxexec error also derives
from the onnxruntime class onnxruntime raises in the same situation, so an `except`
clause written for onnxruntime catches ours (a missing feed is an `InvalidArgument`
and a `ValueError`, as onnxruntime raises a `ValueError` for it).
"""

from __future__ import annotations


class Fail(Exception):
    """onnxruntime status FAIL (1)."""


class InvalidArgument(Exception):
    """onnxruntime status INVALID_ARGUMENT (2)."""


class NoSuchFile(Exception):
    """onnxruntime status NO_SUCHFILE (3)."""


class NoModel(Exception):
    """onnxruntime status NO_MODEL (4)."""


class EngineError(Exception):
    """onnxruntime status ENGINE_ERROR (5)."""


class RuntimeException(Exception):
    """onnxruntime status RUNTIME_EXCEPTION (6)."""


class InvalidProtobuf(Exception):
    """onnxruntime status INVALID_PROTOBUF (7)."""


class ModelLoaded(Exception):
    """onnxruntime status MODEL_LOADED (8)."""


class NotImplementedStatus(Exception):
    """onnxruntime status NOT_IMPLEMENTED (9); exported as `NotImplemented` by capi."""


class InvalidGraph(Exception):
    """onnxruntime status INVALID_GRAPH (10)."""


class EPFail(Exception):
    """onnxruntime status EP_FAIL (11)."""


class ModelLoadCanceled(Exception):
    """onnxruntime status MODEL_LOAD_CANCELED (12)."""


class ModelRequiresCompilation(Exception):
    """onnxruntime status MODEL_REQUIRES_COMPILATION (13)."""


class NotFound(Exception):
    """onnxruntime status NOT_FOUND (14)."""


class OnnxExecError(Exception):
    """Base class: every error onnxexec raises on purpose derives from this."""


class ModelLoadError(OnnxExecError, InvalidProtobuf):
    """A model file is malformed, or refers to data it may not read."""


class ModelFileNotFoundError(ModelLoadError, NoSuchFile, FileNotFoundError):
    """The model path does not exist (onnxruntime: NoSuchFile)."""


class UnsupportedOpError(OnnxExecError, NotImplementedStatus):
    """One or more (domain, op_type, opset) combinations have no handler."""


class InvalidGraphError(OnnxExecError, InvalidGraph):
    """The graph is structurally wrong: an undefined value, a bad attribute."""


class InvalidFeedError(OnnxExecError, InvalidArgument, ValueError):
    """A feed given to run() does not match the model's declared inputs."""


class NodeExecutionError(OnnxExecError, RuntimeException):
    """A handler failed; the message names the node, op, opset and input types."""


class RunTerminatedError(OnnxExecError, Fail):
    """RunOptions.terminate was set: the run stopped between two nodes."""


class ConfigError(OnnxExecError, RuntimeError):
    """A session/run option or provider request onnxruntime refuses with RuntimeError
    (an unknown config key, an unknown provider name, a logger severity out of range)."""


class GGUFError(ModelLoadError, ValueError):
    """A GGUF file or its metadata is malformed or unsupported (names the key, tensor,
    type or architecture). Also a ValueError: the tokenizer raised those before."""


class ContextLengthError(OnnxExecError, InvalidArgument, ValueError):
    """A prompt does not fit the context (the message names the limit)."""
