"""ImageDecoder: encoded image bytes -> (H, W, C) uint8.

Decoding uses Pillow, the decoder onnx's own backend cases were generated with
(onnx/backend/test/case/node/image_decoder.py), so JPEG output matches bit for
bit. Pillow is imported on first use so the rest of onnxexec does not need it.
"""

from __future__ import annotations

import io

import numpy as np

from onnxexec.ops.registry import op


@op("ImageDecoder", since=20)
def image_decoder(encoded_stream: np.ndarray, *, pixel_format: str = "RGB") -> np.ndarray:
    """1-D uint8 bytes of a JPEG/PNG/BMP/TIFF/WebP/PNM/JPEG 2000 file -> (H, W, 3|1) uint8.

    pixel_format RGB or BGR gives three channels, Grayscale one.
    """
    if pixel_format not in ("RGB", "BGR", "Grayscale"):
        raise ValueError(
            f"ImageDecoder: pixel_format must be RGB, BGR or Grayscale, got '{pixel_format}'"
        )
    if encoded_stream.dtype != np.uint8 or encoded_stream.ndim != 1:
        got = f"{encoded_stream.dtype}{list(encoded_stream.shape)}"
        raise ValueError(f"ImageDecoder: expected a 1-D uint8 tensor, got {got}")
    try:
        from PIL import Image
    except ImportError:
        raise RuntimeError("ImageDecoder needs Pillow: pip install pillow") from None
    try:
        img = Image.open(io.BytesIO(encoded_stream.tobytes()))
        img.load()
    except Exception as e:
        raise ValueError(f"ImageDecoder: cannot decode the image ({type(e).__name__}: {e})") from e
    if pixel_format == "Grayscale":
        return np.asarray(img.convert("L"), dtype=np.uint8)[:, :, None].copy()
    rgb = np.asarray(img.convert("RGB"), dtype=np.uint8)
    return np.ascontiguousarray(rgb[:, :, ::-1]) if pixel_format == "BGR" else rgb.copy()
