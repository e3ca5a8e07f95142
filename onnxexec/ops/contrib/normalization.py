"""com.microsoft SkipLayerNormalization, SkipSimplifiedLayerNormalization,
EmbedLayerNormalization and onnxruntime's default-domain SimplifiedLayerNormalization
(docs/ContribOperators.md). float32 over the last axis runs on kernels/math/norms.py's
layer_norm (the kernel of onnxexec::FusedLayerNorm / FusedRMSNorm); other dtypes and
axes on numpy in float32 (onnxruntime computes fp16 norms in float32 too)."""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.math.norms import layer_norm
from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.ops.registry import op

F32 = np.dtype(np.float32)


def _vec(v: np.ndarray | None, d: int) -> np.ndarray | None:
    """gamma / beta / bias as the kernel's (D,) (onnxruntime allows (1, D) too)."""
    return None if v is None else np.broadcast_to(v, (d,))


def _skip_norm(x, skip, gamma, beta, bias, epsilon, rms, outputs_used):
    """(Y, mean, inv_std_var, input_skip_bias_sum) of a skip norm; unused ones None."""
    used = tuple(outputs_used) + (False,) * (4 - len(outputs_used))
    d = x.shape[-1]
    gamma, beta, bias = (_vec(v, d) for v in (gamma, beta, bias))
    stats = used[1] or used[2]
    if x.dtype == F32 and skip.dtype == F32 and x.size and not stats:
        y, s = layer_norm(x, gamma, beta, skip, bias, epsilon, rms, used[3])
        return y, None, None, s
    s = x.astype(F32) + skip.astype(F32)  # skip may be (S, D) broadcast over batch
    if bias is not None:
        s = s + bias.astype(F32)
    mean = s.mean(-1, keepdims=True, dtype=np.float64).astype(F32)
    c = s if rms else s - mean
    if rms:  # onnxruntime's RMS kernel writes zeros to the mean output
        mean = np.zeros_like(mean)
    inv_std = (1 / np.sqrt((c * c).mean(-1, keepdims=True) + F32.type(epsilon))).astype(F32)
    y = c * inv_std * gamma.astype(F32)
    if beta is not None:
        y = y + beta.astype(F32)
    t = x.dtype
    return (
        y.astype(t),
        mean if used[1] else None,  # float32 for fp16 inputs too (type U)
        inv_std if used[2] else None,
        s.astype(t) if used[3] else None,
    )


@op("SkipLayerNormalization", 1, domain=MS_DOMAIN, wants=("outputs_used",))
def skip_layer_normalization(
    x: np.ndarray,
    skip: np.ndarray,
    gamma: np.ndarray,
    beta: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    epsilon: float = 1e-12,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple:
    """s = input (B, T, D) + skip + bias; Y = LayerNorm(s) * gamma + beta.

    Outputs (Y, mean (B, T, 1), inv_std_var (B, T, 1), s), the last three optional."""
    return _skip_norm(x, skip, gamma, beta, bias, epsilon, False, outputs_used)


@op("SkipSimplifiedLayerNormalization", 1, domain=MS_DOMAIN, wants=("outputs_used",))
def skip_simplified_layer_normalization(
    x: np.ndarray,
    skip: np.ndarray,
    gamma: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    epsilon: float = 1e-12,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple:
    """s = input (B, T, D) + skip + bias; Y = s / sqrt(mean(s^2) + eps) * gamma (RMS).

    Outputs (Y, mean, inv_std_var, s) as SkipLayerNormalization's."""
    return _skip_norm(x, skip, gamma, None, bias, epsilon, True, outputs_used)


@op("SimplifiedLayerNormalization", 1, wants=("outputs_used",))
def simplified_layer_normalization(
    x: np.ndarray,
    scale: np.ndarray,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
    stash_type: int = 1,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple:
    """RMS norm over axes [axis, rank): Y = X / sqrt(mean(X^2) + eps) * scale, and
    inv_std_var (D0..D(axis-1), 1...); onnxruntime's default-domain op (RMSNormalization
    before onnx had one)."""
    a = axis + x.ndim if axis < 0 else axis
    if not 0 <= a < x.ndim:
        raise ValueError(
            f"SimplifiedLayerNormalization: axis {axis} out of range for rank {x.ndim}"
        )
    want_inv = len(outputs_used) > 1 and outputs_used[1]
    d = int(np.prod(x.shape[a:], dtype=np.int64))
    if x.dtype == F32 and x.size and not want_inv and scale.size == d:
        y, _ = layer_norm(x.reshape(-1, d), scale.reshape(d), None, None, None, epsilon, True)
        return y.reshape(x.shape), None
    st = F32 if stash_type == 1 else x.dtype
    xf = x.astype(st)
    axes = tuple(range(a, x.ndim))
    inv = 1 / np.sqrt((xf * xf).mean(axis=axes, keepdims=True) + st.type(epsilon))
    y = (xf * inv * scale.astype(st)).astype(x.dtype)
    return y, (inv.astype(st) if want_inv else None)


@op("EmbedLayerNormalization", 1, domain=MS_DOMAIN, wants=("outputs_used",))
def embed_layer_normalization(
    input_ids: np.ndarray,
    segment_ids: np.ndarray | None,
    word_embedding: np.ndarray,
    position_embedding: np.ndarray,
    segment_embedding: np.ndarray | None,
    gamma: np.ndarray,
    beta: np.ndarray,
    mask: np.ndarray | None = None,
    position_ids: np.ndarray | None = None,
    *,
    epsilon: float = 1e-12,
    mask_index_type: int = 1,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple:
    """Embeddings: s = word[ids] + position[pos] + segment[seg] (B, T, D), then
    LayerNorm(s) * gamma + beta.

    Outputs (output, mask_index (B,) int32 = the count of mask's non-zeros per row
    (onnxruntime's 1-D right-padding index; zeros without a mask), embedding_sum s).
    position_ids (B, T) or (1, T), default 0..T-1."""
    b, t = input_ids.shape
    if position_ids is None:
        position_ids = np.arange(t)
    pos = np.broadcast_to(position_ids, (b, t))
    for name, ids, table in (
        ("input_ids", input_ids, word_embedding),
        ("position_ids", pos, position_embedding),
        ("segment_ids", segment_ids, segment_embedding),
    ):
        if ids is not None and table is not None and ids.size:
            lo, hi = int(ids.min()), int(ids.max())
            if lo < 0 or hi >= table.shape[0]:
                raise IndexError(
                    f"EmbedLayerNormalization: {name} holds {lo if lo < 0 else hi}, "
                    f"outside [0, {table.shape[0]})"
                )
    s = word_embedding[input_ids] + position_embedding[pos]
    if segment_ids is not None and segment_embedding is not None:
        s = s + segment_embedding[segment_ids]
    used = tuple(outputs_used) + (False,) * (3 - len(outputs_used))
    s = np.ascontiguousarray(s)
    if s.dtype == F32 and s.size:
        y, _ = layer_norm(s, _vec(gamma, s.shape[-1]), _vec(beta, s.shape[-1]), None, None, epsilon)
    else:
        y, *_ = _skip_norm(s, np.zeros_like(s), gamma, beta, None, epsilon, False, (True,))
    mask_index = None
    if used[1]:
        # onnxruntime's CPU kernel counts the mask's non-zeros whatever mask_index_type
        # says (the attribute only steers its CUDA kernel)
        mask_index = (
            np.zeros(b, np.int32)
            if mask is None
            else np.count_nonzero(mask, axis=1).astype(np.int32)
        )
    return y, mask_index, (s if used[2] else None)


@op("GroupNorm", 1, domain=MS_DOMAIN)
def group_norm(
    x: np.ndarray,
    gamma: np.ndarray,
    beta: np.ndarray,
    *,
    activation: int,
    groups: int,
    channels_last: int = 1,
    epsilon: float = 1e-5,
) -> np.ndarray:
    """X (N, H, W, C) (channels_last) or (N, C, H, W): each of `groups` channel groups
    normalized over its channels and positions, * gamma (C,) + beta (C,), then SiLU
    when activation is 1 (a CUDA-only op in onnxruntime)."""
    xc = x if channels_last else np.moveaxis(x, 1, -1)
    n, c = xc.shape[0], xc.shape[-1]
    if c % groups:
        raise ValueError(f"GroupNorm: {c} channels do not split into {groups} groups")
    g = xc.astype(F32).reshape(n, -1, groups, c // groups)
    mean = g.mean(axis=(1, 3), keepdims=True)
    var = ((g - mean) ** 2).mean(axis=(1, 3), keepdims=True)
    y = ((g - mean) / np.sqrt(var + F32.type(epsilon))).reshape(xc.shape)
    y = y * gamma.astype(F32) + beta.astype(F32)
    if activation == 1:
        y = y / (1 + np.exp(-y))
    y = y if channels_last else np.moveaxis(y, -1, 1)
    return np.ascontiguousarray(y).astype(x.dtype, copy=False)
