"""`import onnxexec` installs no import hook and imports no kernel module or numba
(issue 21): kernels/__init__.py's numba hooks are installed by the first import of the
kernels package, i.e. when a session first needs a kernel module."""

from __future__ import annotations

import json
import subprocess
import sys


def test_import_onnxexec_has_no_import_side_effects() -> None:
    code = (
        "import json, sys\n"
        "hooks = list(sys.meta_path)\n"
        "import onnxexec\n"
        "print(json.dumps({'same_hooks': sys.meta_path == hooks,\n"
        "  'kernels': sorted(m for m in sys.modules if m.startswith('onnxexec.kernels')),\n"
        "  'numba': 'numba' in sys.modules}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"same_hooks": True, "kernels": [], "numba": False}
