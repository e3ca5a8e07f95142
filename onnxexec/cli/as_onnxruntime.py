"""`onnxexec as-onnxruntime -- python app.py ...`: run a program written for onnxruntime.

The command runs in a child process whose PYTHONPATH starts with a folder holding a
`sitecustomize.py` that installs onnxexec's import hook (onnxexec.as_onnxruntime), then
runs any sitecustomize it shadows. `import onnxruntime` in the program, and in Python
subprocesses it starts with the same environment, imports onnxexec. A program given as
`app.py` is run with this Python.
The exit code is the program's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import click

_SITECUSTOMIZE = """\
# written by `onnxexec as-onnxruntime`: make `import onnxruntime` import onnxexec
import os
import sys

from onnxexec.as_onnxruntime import install

install()
# then run the sitecustomize this one shadows (a venv's or the system's), if any
_here = os.path.dirname(os.path.abspath(__file__))
for _entry in sys.path:
    _cand = os.path.join(_entry or ".", "sitecustomize.py")
    if os.path.abspath(os.path.dirname(_cand)) != _here and os.path.isfile(_cand):
        with open(_cand) as _f:
            _code = compile(_f.read(), _cand, "exec")
        exec(_code, {"__name__": "sitecustomize", "__file__": _cand})
        break
"""


def command_line(args: tuple[str, ...]) -> list[str]:
    """The program's command line: a leading script path runs with this interpreter."""
    cmd = list(args)
    if cmd and cmd[0].endswith(".py"):
        cmd.insert(0, sys.executable)
    return cmd


@click.command(
    "as-onnxruntime",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("program", nargs=-1, required=True, type=click.UNPROCESSED)
def as_onnxruntime(program: tuple[str, ...]) -> None:
    """Run PROGRAM (e.g. `-- python app.py`) with onnxexec in onnxruntime's place."""
    package_root = str(Path(__file__).resolve().parents[2])
    with tempfile.TemporaryDirectory(prefix="onnxexec-as-ort-") as hook_dir:
        Path(hook_dir, "sitecustomize.py").write_text(_SITECUSTOMIZE)
        env = dict(os.environ)
        paths = [hook_dir, package_root, *filter(None, [env.get("PYTHONPATH")])]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        try:
            code = subprocess.call(command_line(program), env=env)
        except FileNotFoundError as e:
            raise click.ClickException(f"cannot run {program[0]!r}: {e.strerror}") from e
    sys.exit(code)


COMMANDS = [as_onnxruntime]
