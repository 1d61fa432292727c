"""The ``traceview`` command's entry point.

Once the commands run, ``cli.common.friendly`` turns Ctrl-C into one line and exit 130; this
also covers the import of the commands themselves and click's parsing of the command line.
Ctrl-C in the first moment, while ``import traceview`` (pandas, numpy) runs before this module
is reached, still ends with Python's own KeyboardInterrupt report.
"""

from __future__ import annotations

import sys

from .errors import EXIT_INTERRUPTED


def main():
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        _interrupted()
    import click

    # click's own mode would turn a Ctrl-C that lands while it parses (before the command's
    # ``friendly`` runs) into "Aborted!" and exit 1; here every Ctrl-C is one line and 130
    try:
        code = cli_main.main(standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        _interrupted()
    except click.ClickException as exc:  # a usage error: click's message, its status (2)
        exc.show()
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)  # --help/--version: click's Exit status


def _interrupted():
    sys.stderr.write("traceview: interrupted\n")
    sys.exit(EXIT_INTERRUPTED)
