"""The ``traceview`` command's entry point.

A command line that ran before on the same inputs, with the same traceview, is answered from the
record of its output (``traceview.replay``) before pandas, numpy, click or any command is
imported; any other run is recorded when it may be replayed.

Once the commands run, ``cli.common.friendly`` turns Ctrl-C into one line and exit 130; this
also covers the import of the commands themselves, click's parsing of the command line and the
replay.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from .errors import EXIT_INTERRUPTED


def main():
    try:
        recorder = _replayed(sys.argv[1:])
    except KeyboardInterrupt:
        _interrupted()
    code: object = None  # _run ends in sys.exit: its status
    try:
        _run()
    except SystemExit as exc:
        if recorder is not None:
            recorder.finish(exc.code, _least())
        code = exc.code
    finally:
        if recorder is not None:
            recorder.stop()  # an exception that is not an exit: streams back, nothing recorded
    _leave(code)


def _leave(code) -> None:
    """End the process with ``code`` as the interpreter would, less its teardown: the threads
    are waited for, the atexit functions run (Dask's clusters, a fork pool, coverage) and stdout
    and stderr flushed, then the process ends without freeing every module and table one object
    at a time (~0.05 s after the imports alone, ~0.1 s with a 300 MB trace loaded). Under a
    profiler or a tracer, for an exit that is not a number, or where a flush fails, the
    interpreter ends it as always."""
    if not isinstance(code, int) or sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    try:
        # non-daemon threads joined, as at the interpreter's exit (its own step, not in the stubs)
        threading._shutdown()  # type: ignore[attr-defined]
    except KeyboardInterrupt:  # Ctrl-C while they finish: one line and 130, as everywhere
        if sys.stderr is not None:
            sys.stderr.write("traceview: interrupted\n")
        code = EXIT_INTERRUPTED
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: the descriptor was closed when the process started
                stream.flush()
    except (OSError, ValueError):  # a closed pipe: the interpreter says it, as it always did
        sys.exit(code)
    os._exit(code)


def _least() -> float | None:
    """The cache's threshold for storing a trace (a run on smaller files is not recorded either),
    or None when this run read no trace through the cache: it neither loaded one (the cache's
    module is not imported) nor showed what a trace's entry kept (``kept``)."""
    kept = sys.modules.get("traceview.kept")
    if "traceview.cache" not in sys.modules and (kept is None or not kept.served()):
        return None
    from .entry_files import min_bytes

    return min_bytes()


def _replayed(argv: list[str]):
    """Exit 0 here when the record of ``argv`` was replayed; else the Recorder of this run (its
    copy of stdout and stderr started), or None when it cannot be replayed later."""
    from . import replay

    if not all(hasattr(s, "buffer") for s in (sys.stdout, sys.stderr)):  # no streams of bytes to copy
        return None
    try:
        where = replay.folder()
        name = None if where is None else replay.key(argv)
    except Exception:
        return None
    if where is None or name is None:
        return None
    if replay.replay(name, where):
        sys.exit(0)
    recorder = replay.Recorder(name, where, argv)
    recorder.start()
    return recorder


def _run():
    # numpy asks the kernel for huge pages on every array of 4 MB or more (madvise); on machines
    # like this project's, faulting them in cost a diff of two 300 MB traces 0.3-0.5 s of system
    # time (benchmarks/bench_jobs.py). The command is its own process: it turns that off unless
    # the user chose (a library call inherits the user's setting: ``import traceview`` sets nothing)
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
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
