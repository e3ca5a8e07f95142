"""Fixtures of the tests/unit/ folders these integration tests came from."""

from tests.unit.llm.conftest import *  # noqa: F403
