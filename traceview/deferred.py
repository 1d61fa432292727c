"""A field of a dataclass that may be handed a ``Deferred``: the value is made the first time the
field is read, once, whatever the thread, and kept.

A warm ``summary`` or ``diff`` reads a trace from the cache, and what its analyses ask of the
trace's events, ops and kernels tables is kept in the entry beside them. The cache hands the Trace
a ``Deferred`` of each, that reads and checks the table's file, as it does every table's, only if
something asks for it (``cache._DeferredTables``); a Region of every step cuts its ops and GPU
activities from them only when something reads those (``analyses.select.region``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


class Deferred:
    """A value made by ``make()`` on first use, made once: the first caller makes it while the
    others wait, then every caller gets that one value. ``make`` is let go once it has run (the
    bytes it holds go with it). ``length``: the value's ``len``, where it is known before it is made
    (a cached table's rows, kept in its entry), so that counting it reads nothing."""

    def __init__(self, make: Callable[[], Any], length: int | None = None):
        self._make: Callable[[], Any] | None = make
        self._lock = threading.Lock()
        self._value: Any = None
        self.length = length

    @property
    def made(self) -> bool:
        """Whether the value has been made (``make`` ran)."""
        return self._make is None

    def __reduce__(self):
        # a pickle or a copy holds the value made: a lock and a closure cannot be pickled
        return (_given, (self.value(),))

    def value(self) -> Any:
        with self._lock:
            if self._make is not None:
                self._value = self._make()
                self._make = None
            return self._value


def _given(value: Any) -> Any:
    return value


def stand_in(make: Callable[[], T]) -> T:
    """A ``Deferred`` of ``make()``, typed as its value: for a field that takes one in its place
    (``deferred_fields``), where the reader gets the value."""
    return cast(T, Deferred(make))


class DeferredField:
    """The descriptor of a dataclass field that may hold a ``Deferred``: reading the field gives the
    value (``Deferred.value``: made on the first read). The field keeps holding the ``Deferred``, so
    that copies of an object (``replaced``) share one, made once, and what is held (``held``) stays
    the same object whether or not it was read: the analyses' tables kept per region are told apart
    by it (``measure.derived.of_region``). A data descriptor, so the instance's own ``__dict__``
    entry (where the dataclass ``__init__`` puts the value, through ``__set__``) never shadows it.
    Set on the class after ``@dataclass`` ran (``deferred_fields``): the class attribute is then
    no default."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            raise AttributeError(self.name)
        value = obj.__dict__[self.name]
        return value.value() if isinstance(value, Deferred) else value

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.name] = value


def deferred_fields(*names: str):
    """A class decorator, above ``@dataclass``: the fields ``names`` may be handed a ``Deferred``
    (``DeferredField``), and a pickle or a copy of an instance holds them made (``made``)."""

    def wrap(cls):
        for name in names:
            setattr(cls, name, DeferredField(name))
        cls.__getstate__ = lambda self: made(self.__dict__)
        return cls

    return wrap


def held(obj, name: str) -> Any:
    """The field ``name`` of ``obj`` as held: a ``Deferred`` stays one (``dataclasses.replace`` would
    make it)."""
    return obj.__dict__[name]


def unmade(obj, name: str) -> bool:
    """Whether the field ``name`` of ``obj`` holds a ``Deferred`` not made yet (nothing read it)."""
    value = held(obj, name)
    return isinstance(value, Deferred) and not value.made


def length(obj, name: str) -> int:
    """``len`` of the field ``name`` of ``obj``: a ``Deferred`` not made yet that knows its length
    stays unmade (a notebook shows a cached Trace without reading its tables)."""
    value = held(obj, name)
    if isinstance(value, Deferred) and not value.made and value.length is not None:
        return value.length
    return len(getattr(obj, name))


def replaced(obj, **changes):
    """``dataclasses.replace(obj, **changes)``, a deferred field kept deferred (not made to be
    copied): the copy holds the very ``Deferred`` (``held``)."""
    kept = {f.name: held(obj, f.name) for f in dataclasses.fields(obj) if f.init and f.name not in changes}
    return type(obj)(**kept, **changes)


def made(state: dict) -> dict:
    """``state`` (an object's ``__dict__``) with every ``Deferred`` made: what a pickle or a copy
    holds (a lock and a closure cannot be pickled, and a copy should not share the making)."""
    return {k: v.value() if isinstance(v, Deferred) else v for k, v in state.items()}
