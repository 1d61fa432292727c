"""Temporary files removed when SIGTERM or SIGHUP ends the process, as Ctrl-C removes them.

Standard library only, and importing nothing of traceview: both the writers (``atomic``) and the
replay records (``replay``, which ``atomic`` imports) register their temporary files here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading


def remove(path) -> None:
    """Remove a file or folder (a folder's link: the link), whatever is left of it."""
    with contextlib.suppress(OSError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)


# SIGTERM and SIGHUP remove temporary files, as Ctrl-C does (its KeyboardInterrupt runs the
# writers' ``finally``). Their default action ends the process on the spot; while a temporary file
# exists, a handler removes it first and then lets the signal end the process as it would have
# (same exit status). Signals a program already handles or ignores are left to it.
_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
_LIVE: set[str] = set()  # temporary files and folders that exist now
_SAVED: dict[int, object] = {}  # signal -> its handler before ours
_ARMED: list[bool] = []  # one per open block of ``armed`` on the main thread: handlers stay meanwhile


def track(name) -> None:
    """Remove ``name`` if SIGTERM or SIGHUP ends the process before ``untrack(name)``."""
    _LIVE.add(str(name))
    _install()


def untrack(name) -> None:
    _LIVE.discard(str(name))
    _uninstall()


@contextlib.contextmanager
def armed():
    """The handlers in place for the whole block, whatever is tracked. Only the main thread can
    set a handler: a thread that makes a temporary file (the second trace of a diff read on its
    own thread, written into the cache) relies on the main thread having armed them before it
    started. Elsewhere than the main thread this does nothing."""
    main = threading.current_thread() is threading.main_thread()
    if main:
        _ARMED.append(True)
    _install()
    try:
        yield
    finally:
        if main:
            _ARMED.pop()
        _uninstall()


def _install() -> None:
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        return
    for sig in _SIGNALS:
        if sig not in _SAVED and signal.getsignal(sig) == signal.SIG_DFL:
            _SAVED[sig] = signal.signal(sig, _on_signal)


def _uninstall() -> None:
    if _LIVE or _ARMED or threading.current_thread() is not threading.main_thread():
        return
    for sig, old in _SAVED.items():
        signal.signal(sig, old)  # type: ignore[arg-type]
    _SAVED.clear()


def _on_signal(signum, _frame) -> None:
    while _LIVE:  # a thread may add one while another is removed (a removal lets go of the GIL)
        with contextlib.suppress(KeyError):
            _remove_under_writer(_LIVE.pop())
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)  # ends the process with the signal's own status


def _remove_under_writer(name: str) -> None:
    """``remove(name)``, where another thread may still be writing into the folder ``name``: it is
    renamed first, so that no file can be added to it by that name while it is removed (a file
    added half way through would keep the folder)."""
    if os.path.isdir(name) and not os.path.islink(name):
        gone = f"{name}_gone"
        with contextlib.suppress(OSError):
            os.rename(name, gone)
            name = gone
    for _ in range(3):  # a file whose creation was under way at the rename may land after a pass
        remove(name)
        if not os.path.lexists(name):
            break


@contextlib.contextmanager
def temporary(path):
    """Register ``path`` (a temporary file or folder the caller made) for removal on SIGTERM or
    SIGHUP while the block runs; the caller removes or renames it as usual."""
    track(path)
    try:
        yield path
    finally:
        untrack(path)
