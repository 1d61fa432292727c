"""The ``traceview`` command group every command module registers itself on."""

from __future__ import annotations

import click


def _version(ctx: click.Context, _param, value: bool) -> None:
    """``--version``: the version and, since it is part of it, the decoder (a bug report then says
    whether the compiled one ran). Looked up when asked: the decoder's module imports numpy."""
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import version

    from ..read.compiled import describe

    click.echo(f"{ctx.find_root().info_name} {version('traceview')}\n{describe()}", color=ctx.color)
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="Show the version and exit.",
)
def main():
    """Analyse saved PyTorch profiler traces (Chrome/Kineto JSON, plain or gzip).

    Exit status: 0 success, 1 a trace that can't be read (or a selection that
    matches nothing), 2 a usage error, 3 an internal error.
    """
