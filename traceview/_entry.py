"""The ``traceview`` command's entry point.

Once the commands run, ``cli.common.friendly`` turns Ctrl-C into one line and exit 130; this
also covers the import of the commands themselves. Ctrl-C in the first moment, while
``import traceview`` (pandas, numpy) runs before this module is reached, still ends with
Python's own KeyboardInterrupt report.
"""

from __future__ import annotations

import sys

from .errors import EXIT_INTERRUPTED


def main():
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("traceview: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    cli_main()
