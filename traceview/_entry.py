"""The ``traceview`` command's entry point: catches Ctrl-C during start-up too.

Importing the commands imports pandas and numpy (about a second); a Ctrl-C in that time
would otherwise print a traceback. Once the commands run, ``cli.common.friendly`` handles it.
"""
from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130


def main():
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("traceview: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    cli_main()
