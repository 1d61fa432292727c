"""Options, loading and error handling shared by every command."""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import click

from ..atomic import InputTargetError, OutputError, reading, refuse_inputs
from ..commands import COMMANDS, SELECT, refusal
from ..errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_UNREADABLE, EXIT_USAGE, LateNote, TraceviewError
from ..limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_RATIO
from ..options import LoadOptions
from ..render import FORMATS, OUTPUTS, format_for_path, render, write
from ..render.safe import visible
from ..selection import KINDS, Selection

#: how many lines this process said on stderr (``say``, and other Python warnings shown): an
#: output kept to be shown again (``cli.again``) must be one that said nothing
_SAID: list[int] = [0]


def said() -> int:
    """How many warnings and notes this process has said on stderr."""
    return _SAID[0]


def say(line: str) -> None:
    """The API's ``on_warning`` for every command: the load's warnings (and notes) on stderr, one
    line each. They quote names from the trace and file names: escaped like every output."""
    _SAID[0] += 1
    click.echo(visible(line), err=True)


@contextlib.contextmanager
def late_notes_said():
    """A ``LateNote`` issued meanwhile (a note on a trace after its load's warnings were said) is
    said as they are: ``warning: ...`` on stderr, escaped, every time; other Python warnings as
    before."""
    shown = warnings.showwarning

    def show(message, category, *args, **kwargs):
        if issubclass(category, LateNote):
            say(f"warning: {message}")
        else:
            _SAID[0] += 1
            shown(message, category, *args, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("always", LateNote)
        warnings.showwarning = show
        yield


def _inject(f, key: str, names: tuple, build):
    """Wrap command ``f`` so that the click values ``names`` reach it as one keyword ``key``:
    the object ``build(**values)``, built once, in place of the loose values."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        values = {n: kwargs.pop(n) for n in names if n in kwargs}
        return f(*args, **{key: build(**values)}, **kwargs)

    return wrapper


def _load_options(salvage=False, max_size=None, max_ratio=None, no_cache=False, rules=None, devices=None):
    return LoadOptions(
        rules=rules,
        devices=devices,
        salvage=salvage,
        max_bytes=DEFAULT_MAX_BYTES if max_size is None else max_size * 2**20,
        max_ratio=DEFAULT_MAX_RATIO if max_ratio is None else max_ratio,
        cache=False if no_cache else None,
    )


def load_options(f):
    """Options every command that reads traces takes, given to it as one ``options: LoadOptions``
    (with ``--devices`` where the command has it, see devices_option)."""
    opts = [
        click.option("--salvage", is_flag=True, help="Load a truncated trace up to the cut, with a warning."),
        click.option(
            "--max-size",
            type=click.IntRange(min=1),
            default=None,
            metavar="MIB",
            help="Refuse traces that decompress to more than MIB mebibytes (default 16384).",
        ),
        click.option(
            "--max-ratio",
            type=click.IntRange(min=1),
            default=None,
            metavar="N",
            help=f"Refuse a gzip trace that expands more than N times its compressed size, past "
            f"64 MiB of text (default {DEFAULT_MAX_RATIO}; real traces expand 10-40x, a gzip "
            f"bomb ~1000x).",
        ),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the columnar cache."),
        click.option(
            "--rules",
            type=click.Path(dir_okay=False),
            default=None,
            help="TOML file of kernel classification rules that override the defaults.",
        ),
    ]
    f = _inject(
        f, "options", ("salvage", "max_size", "max_ratio", "no_cache", "rules", "devices"), _load_options
    )
    for opt in reversed(opts):
        f = opt(f)
    return f


def select_options(f=None, *, only: tuple[str, ...] = SELECT):
    """``--step``, ``--annotation``, ``--device``, ``--stream``, ``--kind``, given to the command as
    one ``sel: Selection``. ``@select_options(only=("step", "device"))``: a command that cannot apply
    the others offers (and its --help lists) only these."""
    if f is None:
        return lambda g: select_options(g, only=only)
    opts = [
        click.option("--step", type=int, default=None, help="Only this ProfilerStep#N."),
        click.option(
            "--annotation", default=None, help="Only activities launched inside this record_function."
        ),
        click.option("--device", type=int, default=None, help="Only this GPU device."),
        click.option("--stream", type=int, default=None, help="Only this stream."),
        click.option(
            "--kind",
            type=click.Choice(KINDS),
            default=None,
            help="Only this kind of GPU activity (default: kernels, memcpys and memsets).",
        ),
    ]
    f = _inject(f, "sel", only, Selection)
    for name, opt in reversed(list(zip(SELECT, opts, strict=True))):
        if name in only:
            f = opt(f)
    return f


def command_options(name: str):
    """The arguments and options of command ``name``'s spec (``traceview.commands.COMMANDS``): its
    inputs (one trace, several, two), the selections it applies, the load options, and
    ``--devices`` where it shows efficiency."""
    spec = COMMANDS[name]

    def apply(f):
        if spec.devices:
            f = devices_option(f)
        f = load_options(f)
        if spec.select:
            f = select_options(f, only=spec.select)
        for arg, several in reversed(spec.arguments()):  # the first outermost: click lists it first
            f = click.argument(arg, nargs=-1, required=True)(f) if several else click.argument(arg)(f)
        return f

    return apply


def refuse(name: str, **values) -> None:
    """A usage error (exit 2) naming the options the user gave which this form of command ``name``
    cannot apply, by its spec's rules (the API refuses the same, in the same words); ``values``:
    the arguments and facts the rules ask about. An option is never dropped without a word."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = {
        p.name
        for p in ctx.command.params
        if p.name and ctx.get_parameter_source(p.name) not in (None, ParameterSource.DEFAULT)
    }
    broken = COMMANDS[name].refused(values, given)
    if broken is not None:
        raise click.UsageError(refusal(*broken, cli=True))


run_option = click.option(
    "--run",
    "run",
    is_flag=True,
    help="Treat the paths as one distributed run (summary: the rank traces of one job, a "
    "folder or the files; compare: each path one run's folder); ranks come from each "
    "trace's distributedInfo.",
)

recursive_option = click.option(
    "--recursive", "-r", is_flag=True, help="Also look for traces in the subfolders of a folder."
)


def _check_scheduler(_ctx, _param, value):
    """A malformed address is a usage error, told before any trace is read or connection tried."""
    if value is None:  # the default: nothing to check, and Dask's pipeline is not imported
        return None
    from ..scale import AddressError, check_address, connect_timeout

    try:
        connect_timeout()
    except TraceviewError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        return check_address(value)
    except AddressError as exc:
        raise click.BadParameter(str(exc)) from None


def dask_options(f):
    """``--workers N`` / ``--scheduler ADDRESS``: a run's rank files on Dask (ranks, summary --run,
    compare --run, diff RUN_A/ RUN_B/; one pipeline, traceview/scale.py); ``executor`` checks them."""
    f = click.option(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        callback=_check_scheduler,
        help="Use an existing Dask cluster (tcp://host:port); its workers must see the files at these "
        "paths. Connecting waits at most TRACEVIEW_DASK_TIMEOUT seconds (default: Dask's, 30).",
    )(f)
    return click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="Spread the ranks over a local Dask cluster of N worker processes.",
    )(f)


def executor(workers, scheduler) -> dict:
    """The keywords of the API's run functions for ``dask_options``: one of the two, or neither."""
    if workers is not None and scheduler is not None:
        raise click.UsageError("give --workers or --scheduler, not both")
    return {"workers": workers, "scheduler": scheduler}


@dataclass(frozen=True)
class Output:
    """Where and how a command's reports go, from ``--format``, ``--wide`` and ``-o/--output``."""

    fmt: str = "table"
    wide: bool = False  # tables: whole names, not fitted to the terminal
    path: str | None = None  # a file instead of stdout


def _output(fmt, wide, path) -> Output:
    """``--format`` given: it is the format, and a file name ending in another format's
    extension is a usage error (``-o x.csv --format json`` is a slip); not given: the
    format the file name's extension says (an unknown one is a usage error), else table.
    A file in a missing folder is refused here, before any trace is read."""
    named = format_for_path(path) if path is not None else None
    if fmt is None and path is not None and named is None:
        raise click.BadParameter(
            f"{visible(path)}: no format ends in {visible(Path(path).suffix or 'nothing')}; "
            f"name a file ending in {', '.join(_EXTENSIONS)} or give --format",
            param_hint="'-o' / '--output'",
        )
    if fmt is not None and named is not None and named != fmt:
        raise click.BadParameter(
            f"{visible(path)} names a {named} file but --format is {fmt}", param_hint="'-o' / '--output'"
        )
    if path is not None and not Path(path).parent.is_dir():
        raise OutputError(path, f"folder {Path(path).parent} does not exist")
    return Output(fmt or named or "table", wide, path)


_EXTENSIONS = [e for f in OUTPUTS.values() for e in f.extensions]


def format_option(f):
    """``--format``, ``--wide`` and ``-o/--output``, given to the command as one ``out`` (:class:`Output`)."""

    @functools.wraps(f)
    def wrapper(*args, fmt, wide, output, **kwargs):
        return f(*args, out=friendly(_output)(fmt, wide, output), **kwargs)

    opts = [
        click.option(
            "--format",
            "fmt",
            type=click.Choice(FORMATS),
            default=None,
            show_default="table",
            help="Output format (table fits the terminal: COLUMNS, else its width; markdown, json, "
            "csv and html are never shortened). With -o: the file name's extension, else table.",
        ),
        click.option(
            "--wide",
            is_flag=True,
            help="Table format: print whole names, not fitted to the terminal's width.",
        ),
        click.option(
            "-o",
            "--output",
            "output",
            type=click.Path(dir_okay=False),
            default=None,
            metavar="FILE",
            help="Write the output to FILE (whole or not at all) instead of stdout; a table in a file is "
            "never shortened.",
        ),
    ]
    for opt in reversed(opts):
        wrapper = opt(wrapper)
    return wrapper


def devices_option(f):
    """``--devices FILE`` on the commands that show efficiency; it travels in the LoadOptions."""
    return click.option(
        "--devices",
        metavar="FILE",
        default=None,
        help="TOML file of GPU peaks in the shape of traceview/rules/devices.toml: its devices "
        "are tried first and replace built-in ones of the same name.",
    )(f)


# The parameters through which commands name the files they read, and those they write: every
# command passes through ``friendly``, which refuses an output that is one of the inputs.
INPUT_PARAMS = ("trace", "traces", "paths", "a", "b", "candidate", "baseline", "checks")
OUTPUT_PARAMS = ("out", "output", "plot", "junit")
_GLOB = re.compile(r"[*?[]")  # a pattern some commands take for several traces (check's runs)


def command_inputs(values: dict) -> list:
    """The files a command reads, from its parameters: traces (a folder's trace files too), the
    baseline, and the rule, check and device files."""
    named: list = []
    for key in INPUT_PARAMS:
        value = values.get(key)
        named += list(value) if isinstance(value, (list, tuple)) else [value] if value is not None else []
    options = values.get("options")
    if isinstance(options, LoadOptions):
        named += [p for p in (options.rules, options.devices) if isinstance(p, (str, os.PathLike))]
    named = [p for p in named if isinstance(p, (str, os.PathLike))]
    named += [m for p in named if not os.path.exists(p) and _GLOB.search(os.fspath(p)) for m in glob.glob(p)]
    files = [p for p in named if not os.path.isdir(p)]
    folders = [p for p in named if os.path.isdir(p)]
    if folders:  # the trace files a folder holds: an output among them would be read, then replaced
        from ..discover import candidates

        for folder in folders:  # an empty or unreadable folder is left for the command to report
            with contextlib.suppress(TraceviewError, OSError):
                files += [c.path for c in candidates([folder], recursive=True)]
    return files


def command_outputs(values: dict) -> list:
    """The files a command was asked to write, from its parameters (None where not given)."""
    out = [values.get(key) for key in OUTPUT_PARAMS]
    return [o.path if isinstance(o, Output) else o for o in out if isinstance(o, (str, os.PathLike, Output))]


def guard_outputs(values: dict):
    """Refuse, before anything is read, an output that is the same file as an input (a link or
    a hard link to it too): one line, exit 2. Returns a context in which every write
    (``traceview.atomic``) refuses the inputs as well. Every command gets it through ``friendly``."""
    inputs = command_inputs(values)
    try:
        refuse_inputs(command_outputs(values), inputs)
    except InputTargetError as exc:
        click.echo(f"traceview: error: {visible(str(exc))}", err=True)
        sys.exit(EXIT_USAGE)
    return reading(inputs)


def friendly(f):
    """User-caused failures print one line and exit 1; bugs print one line and exit 3; Ctrl-C
    prints one line and exits 130 (128 + SIGINT, as shells do), not click's "Aborted!" and 1.
    An output that is one of the command's inputs is refused first (``guard_outputs``)."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        try:
            with guard_outputs(kwargs), late_notes_said():
                return f(*args, **kwargs)
        except TraceviewError as exc:
            click.echo(f"traceview: error: {visible(str(exc))}", err=True)  # names come from traces
            sys.exit(EXIT_UNREADABLE)
        except KeyboardInterrupt:
            lead = "\n" if sys.stderr.isatty() else ""  # a terminal shows ^C where the cursor was
            click.echo(f"{lead}traceview: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except BrokenPipeError:
            sys.exit(0)
        except Exception as exc:  # a bug, not the user's fault: say so in one line
            if os.environ.get("TRACEVIEW_DEBUG"):
                raise
            click.echo(
                f"traceview: internal error: {type(exc).__name__}: {visible(str(exc))} "
                "(set TRACEVIEW_DEBUG=1 for the traceback)",
                err=True,
            )
            sys.exit(EXIT_INTERNAL)

    return wrapper


def emit(reports, out: Output | str):
    """One report or a list of them as one document (several: one JSON document, one CSV,
    one HTML page) to ``out.path``, written atomically, else to stdout."""
    if isinstance(out, str):
        out = Output(out)
    if out.path is not None:
        click.echo(f"wrote {visible(str(write(reports, out.fmt, out.path)))}", err=True)
        return
    click.echo(render(reports, out.fmt, width=None if out.wide else -1), nl=False)
