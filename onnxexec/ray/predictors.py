"""Per-worker model runners for `onnxexec batch`: an arrow table in, output columns out.

Each predictor loads its model once (in a Ray actor, or in-process) and maps a table of
rows to new columns. `run_table` cuts the rows into batches, retries a failed batch and,
if it keeps failing, runs its rows one by one so that a poisoned row is reported in the
`_error` column (with its row index) instead of failing the whole job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnxexec.errors import OnnxExecError
from onnxexec.ray.sources import BatchInputError, column_to_numpy, to_arrow

ROW_COLUMN = "_row"
ERROR_COLUMN = "_error"

# onnxruntime's NodeArg.type spelling -> numpy dtype
ELEMENT_DTYPES = {
    "float": np.float32,
    "double": np.float64,
    "float16": np.float16,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "bool": np.bool_,
    "string": np.object_,
}


@dataclass(frozen=True)
class JobSpec:
    """What every worker needs to build its predictor (picklable, sent to the actors)."""

    model: str
    kind: str = "onnx"  # "onnx" | "gguf" | "embedding"
    batch_size: int = 64
    threads: int = 1
    columns: Mapping[str, str] = field(default_factory=dict)  # model input -> column
    tokenizer: str | None = None  # tokenizer.json for "embedding"
    max_length: int = 512  # embedding: truncate token sequences
    sampling: Mapping[str, Any] = field(default_factory=dict)  # SamplingParams fields
    max_tokens: int = 128
    stop: tuple[str, ...] = ()
    n_ctx: int | None = None
    passthrough: bool = True  # copy the input columns to the output
    retries: int = 1  # extra attempts for a failed batch before it is split into rows


def model_kind(model: str, tokenizer: str | None) -> str:
    if model.lower().endswith(".gguf"):
        return "gguf"
    return "embedding" if tokenizer else "onnx"


class Predictor:
    """Base: subclasses implement `predict(table) -> {column: arrow array}`."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec

    def predict(self, table: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _attempt(self, table: Any) -> dict[str, Any]:
        for attempt in range(self.spec.retries + 1):
            try:
                return self.predict(table)
            except Exception:
                if attempt == self.spec.retries:
                    raise
        raise AssertionError("unreachable")

    def run_table(self, table: Any, row_offset: int) -> Any:
        """Rows -> table of passthrough columns + outputs + `_row` + `_error`."""
        import pyarrow as pa

        parts: list[dict[str, Any]] = []
        errors: list[str | None] = []
        n = table.num_rows
        for s in range(0, n, self.spec.batch_size):
            chunk = table.slice(s, self.spec.batch_size)
            try:
                parts.append(self._attempt(chunk))
                errors += [None] * chunk.num_rows
                continue
            except Exception:
                pass  # the batch keeps failing: find the poisoned row(s) below
            for i in range(chunk.num_rows):  # isolate the poisoned row(s)
                try:
                    parts.append(self.predict(chunk.slice(i, 1)))
                    errors.append(None)
                except Exception as e:
                    parts.append({})
                    msg = " ".join(str(e).split()) or type(e).__name__
                    errors.append(f"row {row_offset + s + i}: {type(e).__name__}: {msg}")
        cols: dict[str, Any] = {}
        if self.spec.passthrough:
            cols.update({name: table.column(name) for name in table.column_names})
        names = list(dict.fromkeys(k for p in parts for k in p))
        for name in names:
            typ = next(p[name].type for p in parts if name in p)
            cols[name] = pa.concat_arrays(
                [p[name] if name in p else pa.nulls(_rows(p, parts), typ) for p in parts]
            )
        cols[ROW_COLUMN] = pa.array(np.arange(row_offset, row_offset + n, dtype=np.int64))
        cols[ERROR_COLUMN] = pa.array(errors, type=pa.string())
        return pa.table(cols)


def _rows(part: dict[str, Any], parts: list[dict[str, Any]]) -> int:
    # a failed part stands for exactly one row (failures are isolated row by row)
    return 1 if not part else len(next(iter(part.values())))


def make_session(model: str, threads: int) -> Any:
    import onnxexec

    opts = onnxexec.SessionOptions()
    opts.intra_op_num_threads = threads
    return onnxexec.InferenceSession(model, sess_options=opts)


class OnnxPredictor(Predictor):
    """ONNX model: model inputs from columns of the same name (or `columns`)."""

    def __init__(self, spec: JobSpec) -> None:
        super().__init__(spec)
        self.session = make_session(spec.model, spec.threads)
        self.inputs = self.session.get_inputs()
        self.output_names = [o.name for o in self.session.get_outputs()]

    def _feed(self, table: Any, arg: Any) -> np.ndarray:
        col = self.spec.columns.get(arg.name, arg.name)
        if col not in table.column_names:
            raise BatchInputError(
                f"model input '{arg.name}' has no column '{col}' in the data (columns: "
                f"{table.column_names}); map it with --columns {arg.name}=COLUMN"
            )
        try:
            arr = column_to_numpy(table.column(col))
        except BatchInputError as e:
            raise BatchInputError(f"column '{col}' for input '{arg.name}': {e}") from None
        dtype = ELEMENT_DTYPES.get(arg.type.removeprefix("tensor(").rstrip(")"), np.float32)
        try:  # csv/json numbers arrive as int64/double: cast within the same kind only
            arr = arr.astype(dtype, casting="same_kind", copy=False)
        except TypeError as e:
            raise BatchInputError(f"column '{col}' for input '{arg.name}': {e}") from None
        dims = list(arg.shape)[1:]
        if dims and all(isinstance(d, int) for d in dims):
            try:
                arr = arr.reshape(len(arr), *dims)
            except ValueError:
                raise BatchInputError(
                    f"column '{col}' holds rows of {arr.shape[1:]} values; model input "
                    f"'{arg.name}' wants {dims} per row"
                ) from None
        return arr

    def predict(self, table: Any) -> dict[str, Any]:
        feeds = {a.name: self._feed(table, a) for a in self.inputs}
        outs = self.session.run(self.output_names, feeds)
        return {
            name: to_arrow(np.asarray(o)) for name, o in zip(self.output_names, outs, strict=True)
        }


class EmbeddingPredictor(Predictor):
    """Sentence embedding: tokenizer.json (the `tokenizers` package) + an ONNX encoder,
    mean-pooled over the attention mask into an `embedding` column (as
    sentence-transformers' Pooling(mode='mean') does)."""

    def __init__(self, spec: JobSpec) -> None:
        super().__init__(spec)
        from tokenizers import Tokenizer

        self.session = make_session(spec.model, spec.threads)
        self.tokenizer = Tokenizer.from_file(str(spec.tokenizer))
        self.tokenizer.enable_truncation(spec.max_length)
        self.tokenizer.enable_padding()
        self.inputs = {a.name: a for a in self.session.get_inputs()}
        self.text_column = spec.columns.get("text", "text")

    def predict(self, table: Any) -> dict[str, Any]:
        if self.text_column not in table.column_names:
            raise BatchInputError(f"no text column '{self.text_column}' in {table.column_names}")
        texts = table.column(self.text_column).to_pylist()
        if any(not isinstance(t, str) for t in texts):
            raise BatchInputError(f"column '{self.text_column}' holds a non-string value")
        enc = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        known = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        missing = sorted(set(self.inputs) - set(known))
        if missing:
            raise BatchInputError(f"embedding model inputs {missing} are not tokenizer outputs")
        feeds = {
            n: known[n].astype(ELEMENT_DTYPES.get(a.type[7:-1], np.int64))
            for n, a in self.inputs.items()
        }
        hidden = np.asarray(self.session.run(None, feeds)[0])
        if hidden.ndim == 3:  # (B, T, D): mean over the real tokens only
            w = mask[:, :, None].astype(np.float64)
            pooled = (hidden * w).sum(axis=1) / np.maximum(w.sum(axis=1), 1.0)
            hidden = pooled.astype(np.float32)
        return {"embedding": to_arrow(hidden)}


class LLMPredictor(Predictor):
    """GGUF LLM: each row's `prompt` (or chat `messages`) -> text, token counts, finish
    reason. A batch's rows share one continuous-batching engine (llm/batching.py): each
    decode step is one pass over every row still generating, and at temperature 0 each
    row's tokens equal `onnxexec.llm.generate`'s for its prompt alone."""

    SLOTS = 4  # rows decoded together; each slot holds a KV cache of n_ctx positions

    def __init__(self, spec: JobSpec) -> None:
        super().__init__(spec)
        from onnxexec.llm.batching import BatchEngine
        from onnxexec.llm.model import LLM
        from onnxexec.llm.sampler import SamplingParams

        self.llm = LLM(spec.model, n_ctx=spec.n_ctx, threads=spec.threads)
        self.params = SamplingParams(**dict(spec.sampling))
        self.engine = BatchEngine(self.llm, slots=self.SLOTS)
        self.prompt_column = spec.columns.get("prompt", "prompt")
        self.messages_column = spec.columns.get("messages", "messages")

    def _prompt(self, row: dict[str, Any]) -> str:
        from onnxexec.llm.chat import render_chat

        prompt = row.get(self.prompt_column)
        if isinstance(prompt, str):
            return prompt
        messages = row.get(self.messages_column)
        if isinstance(messages, list) and messages:
            tok = self.llm.tokenizer
            piece = tok.token_to_piece
            return render_chat(
                self.llm.gguf.metadata.get("tokenizer.chat_template"),
                messages,
                bos_token=piece(tok.bos_id).decode() if tok.bos_id is not None else "",
                eos_token=piece(tok.eos_id).decode() if tok.eos_id is not None else "",
            )
        raise BatchInputError(
            f"row has neither a string '{self.prompt_column}' nor a list '{self.messages_column}'"
        )

    def predict(self, table: Any) -> dict[str, Any]:
        import pyarrow as pa

        rows = [_LLMRow(self, self._prompt(row)) for row in table.to_pylist()]
        if any(not row.ids for row in rows):
            raise BatchInputError("the prompt encodes to no tokens")
        by_id: dict[int, _LLMRow] = {}
        try:
            for row in rows:  # a prompt longer than the context raises here (ValueError)
                by_id[row.submit(self.engine)] = row
            while any(not row.done for row in rows):
                for ev in self.engine.step():
                    row = by_id[ev.request_id]
                    if not row.done:
                        row.feed(ev.token, ev.finish, ev.error)
                        if row.done and ev.finish is None:  # a stop string: stop decoding it
                            self.engine.cancel(ev.request_id)
        finally:
            for rid, row in by_id.items():
                if not row.done:
                    self.engine.cancel(rid)
            while self.engine.has_work():  # let cancelled requests leave their slots
                self.engine.step()
        return {
            "text": pa.array([r.text for r in rows], pa.string()),
            "prompt_tokens": pa.array([len(r.ids) for r in rows], pa.int64()),
            "completion_tokens": pa.array([len(r.tokens) for r in rows], pa.int64()),
            "finish_reason": pa.array([r.finish for r in rows], pa.string()),
        }


class _LLMRow:
    """One row's generation, finished as `onnxexec.llm.generation.stream` finishes it:
    the sampler sees the prompt and every generated token (llm.tokens there), a stop
    string ends the text before it, end-of-generation and length limits as there."""

    def __init__(self, pred: LLMPredictor, prompt: str) -> None:
        from onnxexec.llm.sampler import Sampler
        from onnxexec.llm.tokenizer import StreamDecoder

        tok = pred.llm.tokenizer
        self.ids = tok.encode(prompt, add_special=True, parse_special=True)
        self.max_tokens = pred.spec.max_tokens
        self.stop = tuple(pred.spec.stop)
        self.history = list(self.ids)
        self.sampler = Sampler(pred.params)
        self.decoder = StreamDecoder(tok)
        self.tokens: list[int] = []
        self.text = ""
        self.finish = ""
        self.done = False

    def sample(self, logits: np.ndarray) -> int:
        t = self.sampler(logits, self.history)
        self.history.append(t)
        return t

    def submit(self, engine: Any) -> int:
        from onnxexec.llm.batching import Request

        return int(engine.submit(Request(list(self.ids), self.max_tokens, self.sample)))

    def feed(self, token: int | None, finish: str | None, error: str | None) -> None:
        if finish == "error":
            raise OnnxExecError(f"generation failed: {error}")
        if token is not None:
            self.tokens.append(token)
            self.text += self.decoder.push(token)
            hits = [self.text.find(s) for s in self.stop if s in self.text]
            if hits:
                self.text = self.text[: min(hits)]
                self.finish, self.done = "stop", True
                return
        if finish is not None:
            self.text += self.decoder.flush()
            # OpenAI's vocabulary: the model stopped, or a length limit cut it
            self.finish, self.done = ("length" if finish == "length" else "stop"), True


def make_predictor(spec: JobSpec) -> Predictor:
    classes = {"onnx": OnnxPredictor, "gguf": LLMPredictor, "embedding": EmbeddingPredictor}
    if spec.kind not in classes:
        raise OnnxExecError(f"unknown batch model kind '{spec.kind}'")
    return classes[spec.kind](spec)
