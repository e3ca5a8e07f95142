"""`onnxexec cache info|clear`: the per-user store of compiled kernels."""

from __future__ import annotations

import click

from onnxexec.cli.common import verbose_option


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


@click.group("cache")
def cache() -> None:
    """The store of compiled kernels (ONNXEXEC_CACHE_DIR, else $XDG_CACHE_HOME/onnxexec,
    else ~/.cache/onnxexec)."""


@cache.command("info")
@verbose_option
def info_cmd() -> None:
    """Where the store is, its permissions, size and entries per configuration."""
    from onnxexec.runtime import kernel_store as inventory

    s = inventory.info()
    click.echo(f"path: {s.root}")
    if not s.exists:
        click.echo("state: missing (created on the first compile)")
        return
    state = "user-only, in use" if s.usable else "NOT USED: writable by others or not yours"
    click.echo(f"permissions: {s.mode} ({state})")
    click.echo(f"size: {_size(s.size)} in {sum(c.files for c in s.configs)} files")
    shown = set()
    for c in s.configs:
        mark = (
            "current" if c.current else "older sources" if c.same_config else "other configuration"
        )
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(c.by_kind.items()))
        files = f"{c.files} file" + ("" if c.files == 1 else "s")
        click.echo(f"  {c.kind}/{c.name} ({mark}): {files}, {_size(c.size)}; {kinds}")
        config = c.name.split("/")[0]
        if c.config and config not in shown:  # once per configuration
            shown.add(config)
            cfg = c.config
            click.echo(
                f"    numba {cfg.get('numba')} llvmlite {cfg.get('llvmlite')} "
                f"python {str(cfg.get('python', '')).split()[0]} isa {cfg.get('isa')} "
                f"NUMBA_* {cfg.get('numba_settings')}"
            )


@cache.command("clear")
@click.option("--stale", is_flag=True, help="Only entries of other configurations.")
@verbose_option
def clear_cmd(stale: bool) -> None:
    """Delete the stored kernels (they are compiled again when next needed)."""
    from onnxexec.runtime import kernel_store as inventory

    removed, freed = inventory.clear(stale_only=stale)
    click.echo(f"removed {removed} folders, {_size(freed)}")


COMMANDS = [cache]
