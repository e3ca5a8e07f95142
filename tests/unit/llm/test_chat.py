from __future__ import annotations

import pytest

from onnxexec.llm.chat import CHATML, ChatTemplateError, render_chat

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def test_chatml_fallback_renders_generation_prompt():
    out = render_chat(None, MSGS)
    assert out == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert render_chat(CHATML, MSGS, add_generation_prompt=False).endswith("Hi<|im_end|>\n")


def test_bos_and_raise_exception_are_available():
    tmpl = (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'tool' %}"
        "{{ raise_exception('no tools') }}{% endif %}{{ m['content'] }}{% endfor %}"
    )
    assert render_chat(tmpl, MSGS, bos_token="<s>") == "<s>Be brief.Hi"
    with pytest.raises(ChatTemplateError, match="no tools"):
        render_chat(tmpl, [{"role": "tool", "content": "x"}])


def test_template_cannot_reach_python_internals():
    evil = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(ChatTemplateError):
        render_chat(evil, MSGS)
