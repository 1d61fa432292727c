"""Trace text is untrusted: no escape sequence, CR or bidi control reaches the terminal,
no CSV cell starts a formula, no markdown carries live HTML; JSON keeps the exact text
(issue #22, item 2).

A small synthetic trace carries the payloads in its kernel names, op name, user
annotation, variant label, device name and file name; every command that prints trace
text runs through the real CLI (click's CliRunner, and a subprocess on a pseudo-terminal
for the rich table) in table, markdown, CSV and JSON.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from synth import Builder, kineto, op, write

from traceview.cli import main
from traceview.render.safe import UNSAFE, defused, visible

# ---------------------------------------------------------------- the payloads

TERMINAL = (
    "sgemm\x1b]0;pwned\x07\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\\x1b[2J\rfake"
    "\u202eevil\x9b31m\x7f"
)
HYPERLINK = '=HYPERLINK("http://evil.example","x")'
CMD = "+cmd|' /C calc'!A0"
SUM = "@SUM(1+1)"
MINUS = "-2+3"
FULLWIDTH = "\uff1d1+1"
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
NEWLINE = "a|b\nc|d"
FORMULAS = (HYPERLINK, CMD, SUM, MINUS, FULLWIDTH)
KERNELS = (TERMINAL, *FORMULAS, SCRIPT, IMG, NEWLINE)
OP = "aten::mm\x1b[31m<script>x</script>\u2066"
LABEL = "=step\u2067|label"
DEVICE = "GPU\x1b]0;title\x07\u202e"
VARIANT = "run\x1b]0;t\x07\r"
FILE = "evil\x1b]0;file\x07\u202e.json.gz"

#: what no text output may contain raw (the rich table's own colours are checked apart)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _trace(path: Path, kernels=KERNELS, extra=()) -> str:
    b = Builder()
    for n in (1, 2):
        b.step(n, [op(OP, kernels=[(k, 10 + i) for i, k in enumerate(kernels)]), *extra], annotation=LABEL)
    return write(path, kineto(b.events, variant=VARIANT, device_name=DEVICE))


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """A: every payload; B: half of them, one more instance of others (diff has rows only
    in A, and negative changes)."""
    folder = tmp_path_factory.mktemp("hostile")
    a = _trace(folder / FILE)
    b = _trace(
        folder / "b.json.gz", kernels=KERNELS[::2], extra=[op("aten::add", kernels=[("add_kernel", 3)])]
    )
    (folder / "junk\x1b[2J\u202e.json").write_text('{"not": "a trace"}')
    return folder, a, b


def _run(*args, env=None):
    res = CliRunner().invoke(main, [*map(str, args), "--no-cache"], env={"COLUMNS": "80", **(env or {})})
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    return res


def _clean(text: str, where: str) -> None:
    bad = RAW.search(text)
    assert bad is None, (
        f"{where}: raw {bad.group()!r} at {bad.start()}: {text[max(0, bad.start() - 60) :][:120]!r}"
    )


def _commands(folder, a, b):
    return {
        "summary": ["summary", a],
        "kernels": ["kernels", a],
        "diff": ["diff", a, b],
        "compare": ["compare", a, b],
        "compare-folder": ["compare", folder],
        "timeline": ["timeline", a, "--plot", folder / "t.svg"],
    }


# ---------------------------------------------------------------- every text output


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json", "html"])
@pytest.mark.parametrize("command", ["summary", "kernels", "diff", "compare", "compare-folder", "timeline"])
def test_no_control_character_reaches_the_output(traces, command, fmt):
    folder, a, b = traces
    res = _run(*_commands(folder, a, b)[command], "--format", fmt)
    _clean(res.stdout, f"{command} --format {fmt} stdout")
    if command != "timeline":  # matplotlib's own font warnings: see test_timeline_stderr
        _clean(res.stderr, f"{command} --format {fmt} stderr")
    if fmt in ("table", "markdown", "csv"):  # the payload shows, escaped, as text one can read
        assert "\\x1b]0;" in res.stdout and ("\\u202e" in res.stdout or command == "timeline")


def test_warnings_name_files_escaped(traces):
    folder, _, _ = traces
    res = _run("compare", folder)
    assert "warning: skipped" in res.stderr and "junk\\x1b[2J\\u202e.json" in res.stderr
    _clean(res.stderr, "compare stderr")
    assert "evil\\x1b]0;file\\x07\\u202e.json.gz" in res.stdout or "run\\x1b]0;t\\x07\\r" in res.stdout


def test_timeline_stderr(traces):
    """The timeline's picture is drawn by matplotlib, which warns on stderr about each glyph
    it lacks, quoting it: a real process, so that Python's warnings reach stderr."""
    pytest.importorskip("matplotlib")
    folder, a, _ = traces
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "traceview",
            "timeline",
            a,
            "--plot",
            str(folder / "t2.svg"),
            "--format",
            "csv",
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert res.returncode == 0, res.stderr
    _clean(res.stdout, "timeline stdout")
    _clean(res.stderr, "timeline stderr")


def test_width_counts_the_escaped_text(traces):
    """Fitting measures what is shown: each plain-table line fits COLUMNS."""
    _, a, _ = traces
    for cols in ("60", "100"):
        res = _run("kernels", a, env={"COLUMNS": cols})
        # an info line's one-word value (the trace's path) stays whole, to be copied
        lines = [line for line in res.stdout.splitlines() if not line.startswith("trace: ")]
        assert max(len(line) for line in lines) <= int(cols), res.stdout


def test_rich_table_on_a_terminal(traces):
    """On a (pseudo) terminal the table is rich's: its colours only, every payload escaped."""
    pty = pytest.importorskip("pty")
    import termios

    _, a, _ = traces
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.ONLCR  # the terminal must not add its own \r to each newline
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "traceview", "kernels", a, "--no-cache"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    out = b"".join(chunks).decode("utf-8")
    assert "\x1b[" in out, "not rendered as a rich table"
    colours = re.sub(r"\x1b\[[0-9;]*m", "", out)  # rich's own styles (SGR) are allowed, nothing else
    _clean(colours, "rich table")
    assert "\\x1b]0;" in colours and "\\u202e" in colours


# ---------------------------------------------------------------- CSV


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_csv_cells_never_start_a_formula(traces):
    _, a, b = traces
    rows = _csv(_run("kernels", a, "--format", "csv").stdout)
    names = [r["name"] for r in rows]
    for payload in FORMULAS:
        assert "'" + visible(payload) in names, (payload, names)  # neutralised, still readable
    for row in rows:
        for value in row.values():
            assert (
                not value.startswith(("=", "+", "-", "@", "\t", "\r", "\uff1d"))
                or _number(value)
                or value == "-"
            )
    # a stacked (several-table) CSV: every cell, headers too
    for args in (["summary", a], ["diff", a, b], ["compare", a, b]):
        text = _run(*args, "--format", "csv").stdout
        for row in csv.reader(io.StringIO(text)):
            for value in row:
                assert not value.startswith(("=", "+", "@", "\t", "\r", "\uff1d")), (args, value)
                assert not value.startswith("-") or _number(value) or value == "-", (args, value)


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_csv_keeps_negative_numbers_numeric(traces):
    """diff's changes are negative where B has fewer: they stay plain numbers."""
    _, a, b = traces
    text = _run("diff", a, b, "--format", "csv").stdout
    negatives = [v for row in csv.reader(io.StringIO(text)) for v in row if v.startswith("-")]
    assert any(_number(v) for v in negatives) and all(_number(v) or v == "-" for v in negatives), negatives
    assert "'-" not in text.replace("'" + visible(MINUS), "").replace("'-N+N", "")
    assert "-" in negatives  # a lone "-" (the tables' "nothing") holds no formula: left as it is


def test_defused_rules():
    assert defused("=1+1") == "'=1+1" and defused("@A1") == "'@A1" and defused("+x") == "'+x"
    assert defused("\t=1") == "'\t=1" and defused("\r=1") == "'\r=1" and defused("\uff1d1") == "'\uff1d1"
    assert defused("-5") == "-5" and defused("-1.5e3") == "-1.5e3" and defused("+.5") == "+.5"
    assert defused("-2+3") == "'-2+3" and defused("-\u0663") == "'-\u0663"  # Arabic-Indic digit: not a number
    assert defused("sgemm") == "sgemm" and defused("-") == "-"


# ---------------------------------------------------------------- markdown


def test_markdown_has_no_live_html_and_one_row_per_kernel(traces):
    _, a, _ = traces
    md = _run("kernels", a, "--format", "markdown").stdout
    assert "<script" not in md and "<img" not in md and "&lt;script&gt;" in md
    lines = md.splitlines()
    start = lines.index("### kernels") + 2
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    assert len(table) == 2 + len(KERNELS), table  # header, rule, one row per kernel name
    cells = [len(re.findall(r"(?<!\\)\|", line)) for line in table]
    assert len(set(cells)) == 1, cells  # no name adds or removes a column


def test_markdown_links_are_not_live(tmp_path):
    path = _trace(tmp_path / "link.json.gz", kernels=("![x](http://evil.example/pixel.png)", "k"))
    md = _run("kernels", path, "--format", "markdown").stdout
    assert "](http" not in md and "]\\(http://evil.example/pixel.png)" in md


# ---------------------------------------------------------------- JSON and HTML


def test_json_keeps_the_exact_text(traces):
    _, a, _ = traces
    doc = json.loads(_run("kernels", a, "--format", "json").stdout)
    assert set(KERNELS) <= {r["name"] for r in doc["tables"]["kernels"]}
    assert OP in {r["launched_by"] for r in doc["tables"]["kernels"]}
    summary = json.loads(_run("summary", a, "--format", "json").stdout)
    assert summary["info"]["device"] == DEVICE and summary["info"]["label"] == VARIANT
    _clean(_run("summary", a, "--format", "json").stdout, "json")  # json.dumps writes \u001b itself


def test_html_escapes_controls_too(traces):
    _, a, _ = traces
    page = _run("kernels", a, "--format", "html").stdout
    _clean(page, "html")
    assert "<script>alert" not in page and "\\x1b]0;pwned\\x07" in page and "\\u202e" in page


def test_visible_escapes_and_is_idempotent():
    for ch in [
        "\x00",
        "\x07",
        "\x1b",
        "\r",
        "\n",
        "\t",
        "\x7f",
        "\x85",
        "\x9b",
        "\u061c",
        "\u200e",
        "\u200f",
        "\u202a",
        "\u202e",
        "\u2066",
        "\u2069",
        "\ud800",
    ]:
        shown = visible(f"a{ch}b")
        assert UNSAFE.search(shown) is None and shown.startswith("a\\") and shown.endswith("b"), repr(shown)
        assert visible(shown) == shown
    assert visible("\x1b") == "\\x1b" and visible("\u202e") == "\\u202e" and visible("\r\n") == "\\r\\n"
    name = "void at::native::kernel<float, 4>(float*, int) · ünïcode ✓ 東京"
    assert visible(name) == name  # printable text, any script, stays as it is
