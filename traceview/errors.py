"""Exceptions a user can cause. Each message is one line naming the file and the problem."""

from __future__ import annotations


class TraceviewError(Exception):
    """Base of every error traceview raises on purpose; the CLI prints it and exits 1."""


class TraceReadError(TraceviewError):
    """The file could not be read as a trace (missing, empty, not JSON, truncated, corrupt)."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class NotATraceError(TraceReadError):
    """The file is readable JSON but not a profiler trace (no traceEvents, or no trace
    events in it). Separate from damage so that a folder scan can skip such files."""


class RuleError(TraceviewError):
    """A user-supplied classification rule file is malformed."""


class LateNote(UserWarning):
    """A note on a loaded trace that arises after its load's warnings were said (a cache entry's
    deferred table found damaged when first read, and rebuilt from the trace): kept on the Trace's
    ``warnings`` and issued as this Python warning, which the command line prints as its other
    warnings."""


class CheckRuleError(TraceviewError):
    """A ``traceview check`` rules file is malformed: ``FILE:LINE: problem``, a usage error (exit 2)."""


# The command line's exit statuses, one definition for every command (and the entry point).
EXIT_UNREADABLE = 1  # a TraceviewError: a trace that can't be read, a selection that matches nothing
EXIT_USAGE = 2  # a usage error
EXIT_INTERNAL = 3  # a bug
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as shells report it
