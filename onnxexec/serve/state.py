"""The loaded model behind the server: LLM, engine, scheduler, templates, grammar, embedders."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from onnxexec.llm.chat import render_chat
from onnxexec.serve.openai_schema import APIError, ChatRequest
from onnxexec.serve.tools import messages_with_tools, template_supports_tools

if TYPE_CHECKING:
    from onnxexec.llm.batching import BatchEngine
    from onnxexec.llm.model import LLM
    from onnxexec.llm.tokenizer import Tokenizer
    from onnxexec.serve.config import ServeConfig
    from onnxexec.serve.embeddings import GGUFEmbedder, OnnxEmbedder
    from onnxexec.serve.grammar import GrammarFactory
    from onnxexec.serve.scheduler import Scheduler


class ServerState:
    """Filled by `load` (run in a thread at startup); `ready` once it has finished."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.model_id = config.model_alias or os.path.basename(config.model)
        self.created = int(time.time())
        self.ready = False
        self.load_error: str | None = None
        self.llm: LLM
        self.tok: Tokenizer
        self.engine: BatchEngine
        self.scheduler: Scheduler
        self.template: str | None = None
        self.n_ctx = config.n_ctx
        self.gguf_embedder: GGUFEmbedder | None = None
        self.onnx_embedder: OnnxEmbedder | None = None
        self._grammar: GrammarFactory | None = None
        self._grammar_lock = threading.Lock()

    def load(self, loop: asyncio.AbstractEventLoop) -> None:
        from onnxexec.llm.batching import BatchEngine
        from onnxexec.llm.model import LLM
        from onnxexec.serve.embeddings import GGUFEmbedder, OnnxEmbedder
        from onnxexec.serve.scheduler import Scheduler

        c = self.config
        try:
            self.llm = LLM(c.model, n_ctx=c.n_ctx, threads=c.threads)
            self.tok = self.llm.tokenizer
            self.n_ctx = self.llm.n_ctx
            self.template = self.llm.gguf.metadata.get("tokenizer.chat_template")
            self.engine = BatchEngine(self.llm, c.parallel, n_ctx=self.n_ctx, chunk=c.chunk)
            self.gguf_embedder = GGUFEmbedder(self.llm, self.n_ctx)
            if c.embedding_model:
                if not c.tokenizer:
                    raise ValueError("--embedding-model needs --tokenizer tokenizer.json")
                self.onnx_embedder = OnnxEmbedder(c.embedding_model, c.tokenizer)
            self.scheduler = Scheduler(self.engine, loop)
            self.scheduler.start()
            self.ready = True
        except Exception as e:  # reported by /health and every endpoint
            self.load_error = f"{type(e).__name__}: {e}"

    def close(self) -> None:
        if self.ready:
            self.scheduler.close()

    def check_ready(self) -> None:
        if self.load_error:
            raise APIError(500, f"model failed to load: {self.load_error}", type_="server_error")
        if not self.ready:
            raise APIError(503, "Loading model", type_="unavailable_error")

    # -- prompts ---------------------------------------------------------------------

    def _special_text(self, tid: int | None) -> str:
        return "" if tid is None else self.tok.token_text(tid)

    def chat_prompt(self, req: ChatRequest) -> list[int]:
        messages = req.messages
        extra: dict[str, Any] = {}
        if req.tools and req.tool_choice != "none":
            if template_supports_tools(self.template):
                extra["tools"] = req.tools
            else:
                messages = messages_with_tools(messages, req.tools)
        bos = self._special_text(self.tok.bos_id)
        text = render_chat(
            self.template,
            messages,
            bos_token=bos,
            eos_token=self._special_text(self.tok.eos_id),
            add_generation_prompt=True,
            **extra,
        )
        # llama-server tokenizes the rendered prompt with special tokens parsed; a template
        # that writes BOS itself must not get a second one
        add_bos = not (bos and text.startswith(bos))
        return self.tok.encode(text, add_special=add_bos, parse_special=True)

    def text_prompt(self, prompt: str | list[int]) -> list[int]:
        if isinstance(prompt, str):
            return self.tok.encode(prompt, add_special=True, parse_special=True)
        bad = [t for t in prompt if not 0 <= t < self.tok.vocab_size]
        if bad:
            raise APIError(
                400, f"token id {bad[0]} is not in [0, {self.tok.vocab_size})", param="prompt"
            )
        return list(prompt)

    # -- grammar ---------------------------------------------------------------------

    def grammar(self) -> GrammarFactory:
        """The llguidance tokenizer for this vocabulary, built on first use (~0.5 s)."""
        with self._grammar_lock:
            if self._grammar is None:
                from onnxexec.serve.grammar import GrammarFactory

                eos = self.tok.eot_id if self.tok.eot_id is not None else self.tok.eos_id
                try:
                    self._grammar = GrammarFactory(
                        self.tok, eos if eos is not None else 0, sorted(self.tok.eog_ids)
                    )
                except ImportError:
                    raise APIError(
                        400, "structured output needs llguidance: pip install onnxexec[serve]"
                    ) from None
            return self._grammar
