"""Chat prompts from the model's `tokenizer.chat_template` (Jinja2, sandboxed).

Templates are untrusted model data, so they run in jinja2's
ImmutableSandboxedEnvironment with the variables HF's apply_chat_template passes:
messages, bos_token, eos_token, add_generation_prompt, raise_exception, strftime_now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from onnxexec.errors import OnnxExecError

# Used when a model ships no template: ChatML, as llama.cpp falls back to.
CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + "
    "'<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class ChatTemplateError(OnnxExecError):
    """The template failed to render or called raise_exception()."""


def _raise(message: str) -> None:
    raise ChatTemplateError(f"chat template: {message}")


def _env() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    env.filters["tojson"] = _tojson
    return env


def _tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False) -> str:
    import json

    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)


def render_chat(
    template: str | None,
    messages: Sequence[Mapping[str, Any]],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
    **extra: Any,
) -> str:
    """The prompt text for `messages` ([{role, content}, ...])."""
    for i, m in enumerate(messages):
        if "role" not in m or "content" not in m:
            raise ChatTemplateError(f"message {i} needs 'role' and 'content'")
    try:
        tmpl = _env().from_string(template or CHATML)
        return tmpl.render(
            messages=[dict(m) for m in messages],
            bos_token=bos_token,
            eos_token=eos_token,
            add_generation_prompt=add_generation_prompt,
            **extra,
        )
    except ChatTemplateError:
        raise
    except TemplateError as e:
        raise ChatTemplateError(f"chat template: {e}") from e
