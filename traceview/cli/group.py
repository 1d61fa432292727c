"""The ``traceview`` command group every command module registers itself on."""

from __future__ import annotations

import click

from ..read.compiled import describe


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
# the decoder is part of the version: a bug report then says whether the compiled one ran
@click.version_option(package_name="traceview", message=f"%(prog)s %(version)s\n{describe()}")
def main():
    """Analyse saved PyTorch profiler traces (Chrome/Kineto JSON, plain or gzip).

    Exit status: 0 success, 1 a trace that can't be read (or a selection that
    matches nothing), 2 a usage error, 3 an internal error.
    """
