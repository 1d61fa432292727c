"""The command's entry point: a Ctrl-C that lands while click parses the command line (before the
command's own handler runs) ends as every other Ctrl-C does, one line and exit 130, not click's
"Aborted!" and 1 (a fuzz campaign sent SIGINT 10 ms in: issue 38)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys, click
from traceview.cli import main
def interrupt(ctx, param, value):
    raise KeyboardInterrupt  # as SIGINT's default handler would, while click reads the options
main.command("parse-interrupted")(click.option("--x", callback=interrupt, expose_value=False)(lambda: None))
sys.argv = ["traceview", "parse-interrupted", "--x", "1"]
from traceview._entry import main as entry
entry()
"""


def test_ctrl_c_while_click_parses_is_one_line_and_130():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 130, (run.returncode, run.stderr)
    assert run.stderr.strip() == "traceview: interrupted" and "Aborted" not in run.stderr


def test_usage_errors_and_help_keep_clicks_statuses():
    bad = subprocess.run(
        [sys.executable, "-m", "traceview", "nosuch"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "No such command" in bad.stderr
    ok = subprocess.run(
        [sys.executable, "-m", "traceview", "--help"], capture_output=True, text=True, timeout=120
    )
    assert ok.returncode == 0 and ok.stdout.startswith("Usage: ")
