"""`python -m onnxexec ...` is the `onnxexec` command."""

from __future__ import annotations

from onnxexec.cli.main import main

main()
