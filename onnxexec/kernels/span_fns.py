"""Each native job kind's span kernel as a C-callable function, loaded the first time
a job of that kind is posted (native/parallel.py calls it through its address).

The pool's dispatch loop used to call every kind's kernel directly, so its compiled
code held all of them (attention, taps, im2row and packed GEMM spans in a MobileNetV2
process that runs none): loading it cost 10 MB of a 150 MB peak RSS more than
loading the kernels the model uses one by one. Behind one address per kind, the loop
is a few hundred bytes and a process loads only the kernels it runs.

Each wrapper rebuilds the job's slot arrays from their addresses: ARG_SLOTS int64
arguments (ctrl[ARGS:BOUNDS]) and FLOAT_SLOTS float64 ones (fctrl).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from onnxexec.kernels import objload as nb
from onnxexec.kernels.attn.mha_job import attn_span
from onnxexec.kernels.conv.conv_rows import im2row_span
from onnxexec.kernels.conv.depthwise_planes import dw_span
from onnxexec.kernels.conv.direct_job import direct_job
from onnxexec.kernels.conv.im2col_job import im2col_span
from onnxexec.kernels.conv.pointwise_packed import pointwise_job
from onnxexec.kernels.conv.pointwise_t import pwt_job
from onnxexec.kernels.conv.pool2d_kernels import maxpool_span
from onnxexec.kernels.conv.taps_job import taps_span
from onnxexec.kernels.linalg.blas import gemm_span
from onnxexec.kernels.linalg.sgemm_packed import packed_job
from onnxexec.kernels.objload import cfunc

ARG_SLOTS: Final = 24  # parallel.BOUNDS - parallel.ARGS
FLOAT_SLOTS: Final = 4  # parallel's fctrl


def _sig(types: Any) -> Any:
    return types.void(
        types.CPointer(types.int64), types.CPointer(types.float64), types.int64, types.int64
    )


def _gemm(ap, fp, s0, s1):
    gemm_span(nb.carray(ap, (ARG_SLOTS,)), nb.carray(fp, (FLOAT_SLOTS,)), s0, s1)


def _packed(ap, fp, s0, s1):
    packed_job(nb.carray(ap, (ARG_SLOTS,)), nb.carray(fp, (FLOAT_SLOTS,)), s0, s1)


def _dw(ap, fp, s0, s1):
    dw_span(nb.carray(ap, (ARG_SLOTS,)), nb.carray(fp, (FLOAT_SLOTS,)), s0, s1)


def _im2col(ap, fp, s0, s1):
    im2col_span(nb.carray(ap, (ARG_SLOTS,)), nb.carray(fp, (FLOAT_SLOTS,)), s0, s1)


def _im2row(ap, fp, s0, s1):
    im2row_span(nb.carray(ap, (ARG_SLOTS,)), nb.carray(fp, (FLOAT_SLOTS,)), s0, s1)


def _taps(ap, fp, s0, s1):
    taps_span(nb.carray(ap, (ARG_SLOTS,)), nb.carray(fp, (FLOAT_SLOTS,)), s0, s1)


def _attn(ap, fp, s0, s1):
    attn_span(nb.carray(ap, (ARG_SLOTS,)), nb.carray(fp, (FLOAT_SLOTS,)), s0, s1)


def _pw(ap, fp, s0, s1):
    pointwise_job(nb.carray(ap, (ARG_SLOTS,)), nb.carray(fp, (FLOAT_SLOTS,)), s0, s1)


def _direct(ap, fp, s0, s1):
    direct_job(nb.carray(ap, (ARG_SLOTS,)), nb.carray(fp, (FLOAT_SLOTS,)), s0, s1)


def _pwt(ap, fp, s0, s1):
    pwt_job(nb.carray(ap, (ARG_SLOTS,)), nb.carray(fp, (FLOAT_SLOTS,)), s0, s1)


def _pool(ap, fp, s0, s1):
    maxpool_span(nb.carray(ap, (ARG_SLOTS,)), nb.carray(fp, (FLOAT_SLOTS,)), s0, s1)


# kind (parallel.KIND_*) -> its span kernel's wrapper
WRAPPERS: Final[dict[int, Callable[..., None]]] = {
    1: _gemm,
    2: _packed,
    3: _dw,
    4: _im2col,
    5: _im2row,
    6: _taps,
    7: _attn,
    8: _pw,
    9: _direct,
    10: _pool,
    11: _pwt,
}
_compiled: dict[int, int] = {}


def address(kind: int) -> int:
    """The C address of kind's span kernel, compiled (or loaded from numba's cache)
    at its first use."""
    fn = _compiled.get(kind)
    if fn is None:
        fn = _compiled[kind] = cfunc(_sig, nopython=True, cache=True)(WRAPPERS[kind]).address
    return fn
