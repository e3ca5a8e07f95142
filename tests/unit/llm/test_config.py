"""ModelConfig from synthetic GGUF metadata: each architecture, defaults, errors."""

from __future__ import annotations

import math

import pytest

from onnxexec.errors import ModelLoadError
from onnxexec.llm.config import RopeStyle, config_from_metadata, swa_pattern


def meta(arch: str, **extra) -> dict:
    md = {
        "general.architecture": arch,
        f"{arch}.block_count": 4,
        f"{arch}.context_length": 2048,
        f"{arch}.embedding_length": 512,
        f"{arch}.feed_forward_length": 1024,
        f"{arch}.attention.head_count": 8,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-6,
        "tokenizer.ggml.tokens": ["a"] * 100,
    }
    md.update({k.format(arch=arch): v for k, v in extra.items()})
    return md


def test_llama_defaults_follow_llama_cpp():
    c = config_from_metadata(meta("llama"))
    assert (c.n_layer, c.n_embd, c.n_head, c.n_ff, c.n_ctx_train) == (4, 512, 8, 1024, 2048)
    assert c.n_head_kv == 8  # head_count_kv defaults to head_count
    assert c.head_dim == 64 and c.rope_dims == 64  # n_embd / n_head
    assert c.rope_base == 10000.0 and c.rope_freq_scale == 1.0
    assert c.rope_style is RopeStyle.NORM
    assert c.n_vocab == 100  # from the token list
    assert c.scale == pytest.approx(1 / 8)
    assert not (c.qkv_bias or c.qk_norm or c.post_norms or c.q_prescale)
    assert c.ffn_act == "silu" and c.embd_scale == 1.0
    assert not any(c.is_swa_layer(i) for i in range(4))


def test_n_vocab_argument_wins_over_token_list():
    assert config_from_metadata(meta("llama"), n_vocab=77).n_vocab == 77


def test_qwen2_qwen3_flags_and_neox():
    q2 = config_from_metadata(meta("qwen2", **{"{arch}.attention.head_count_kv": 2}))
    assert q2.qkv_bias and not q2.qk_norm and q2.rope_style is RopeStyle.NEOX
    assert q2.n_head_kv == 2
    q3 = config_from_metadata(
        meta("qwen3", **{"{arch}.attention.key_length": 128, "{arch}.attention.value_length": 128})
    )
    assert q3.qk_norm and not q3.qkv_bias and q3.head_dim == 128 and q3.rope_dims == 128
    assert q3.scale == pytest.approx(1 / math.sqrt(128))


def test_gemma3_sliding_window_pattern_and_scales():
    c = config_from_metadata(
        meta(
            "gemma3",
            **{
                "{arch}.attention.sliding_window": 512,
                "{arch}.rope.freq_base": 1e6,
                "{arch}.block_count": 12,
            },
        )
    )
    assert c.sliding_window == 512
    # default pattern 6: every 6th layer (5, 11) is global
    assert [c.is_swa_layer(i) for i in range(12)] == [i % 6 != 5 for i in range(12)]
    assert c.rope_base == 1e6 and c.rope_base_swa == 10000.0
    assert c.embd_scale == pytest.approx(math.sqrt(512))
    assert c.q_prescale and c.scale == pytest.approx(1 / 8)
    assert c.qk_norm and c.post_norms and c.ffn_act == "gelu_tanh"
    assert c.final_softcap == 0.0


def test_gemma3_without_window_has_no_swa_layers():
    c = config_from_metadata(meta("gemma3"))
    assert c.sliding_window == 0 and not any(c.is_swa_layer(i) for i in range(4))


def test_gemma3_27b_attention_scale_uses_n_embd_over_n_head():
    c = config_from_metadata(
        meta("gemma3", **{"{arch}.block_count": 62, "{arch}.attention.key_length": 128})
    )
    assert c.scale == pytest.approx(1 / math.sqrt(512 / 8))


def test_swa_pattern_forms():
    assert swa_pattern(4, 2) == (True, False, True, False)
    assert swa_pattern(3, 0) == (True, True, True)
    assert swa_pattern(3, [True, False, True, True]) == (True, False, True)
    with pytest.raises(ModelLoadError, match="entries"):
        swa_pattern(3, [True])


def test_rope_linear_scaling_factor():
    c = config_from_metadata(
        meta("llama", **{"{arch}.rope.scaling.type": "linear", "{arch}.rope.scaling.factor": 4.0})
    )
    assert c.rope_freq_scale == 0.25
    with pytest.raises(ModelLoadError, match="rope scaling type 'yarn'"):
        config_from_metadata(
            meta("llama", **{"{arch}.rope.scaling.type": "yarn", "{arch}.rope.scaling.factor": 4.0})
        )


def test_unknown_arch_is_rejected():
    with pytest.raises(ModelLoadError, match="unsupported architecture 'falcon'"):
        config_from_metadata(meta("falcon"))
    with pytest.raises(ModelLoadError, match="unsupported architecture 'None'"):
        config_from_metadata({})


@pytest.mark.parametrize(
    "key",
    [
        "{arch}.block_count",
        "{arch}.embedding_length",
        "{arch}.attention.head_count",
        "{arch}.feed_forward_length",
        "{arch}.context_length",
        "{arch}.attention.layer_norm_rms_epsilon",
    ],
)
def test_missing_required_key_is_named(key):
    md = meta("qwen2")
    del md[key.format(arch="qwen2")]
    with pytest.raises(ModelLoadError, match=key.format(arch="qwen2").replace(".", r"\.")):
        config_from_metadata(md)


def test_inconsistent_heads_and_rope_dims_are_rejected():
    with pytest.raises(ModelLoadError, match="head_count_kv"):
        config_from_metadata(meta("llama", **{"{arch}.attention.head_count_kv": 3}))
    with pytest.raises(ModelLoadError, match=r"rope\.dimension_count 32"):
        config_from_metadata(meta("llama", **{"{arch}.rope.dimension_count": 32}))
