"""The compiled decoder's join of a column's parts (``_cscan.join``, ``compiled.join_parts``).

The join moves the memory of the parts it alone holds into the result (on Linux, their pages:
mremap), so its checks are about ownership and bytes: the result is the parts' bytes one after
the other, exactly as ``np.concatenate`` gives them, whether each part gave its memory up (held
by nothing else) or was only copied from (held elsewhere too, and then left as it was); and the
columns of a trace read with it equal those of the plain copy (``columns.drain``). Parts of a
mebibyte and more take the page-moving path; smaller ones a plain copy.
"""

from __future__ import annotations

import numpy as np
import pytest

from traceview.read import chunks, compiled, read

pytestmark = pytest.mark.skipif(not compiled.available(), reason="the compiled decoder is not built")


def _text(n: int, first: int) -> bytes:
    """``n`` small X events, their times counting up from ``first``: the items of an array."""
    one = '{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":%d,"dur":1}'
    return ",".join(one % (first + i) for i in range(n)).encode()


def _ts_blocks(sizes: list[int]) -> list:
    """One scanned chunk per size: its ts column's Block (int64 per event)."""
    blocks, first = [], 0
    for n in sizes:
        text = _text(n, first)
        blocks.append(compiled._scan(text, 0, len(text))[3])
        first += n
    return blocks


@pytest.mark.parametrize(
    "sizes",
    [[1, 2, 3], [140_000, 140_000, 3], [140_000, 5, 140_000], [0, 140_000, 0, 140_000], [7]],
    ids=["small", "large", "mixed", "empty_parts", "one"],
)
@pytest.mark.parametrize(
    "held", [(), (0,), (1,), "all"], ids=["none_held", "first_held", "second_held", "all_held"]
)
def test_join_is_the_concatenation_and_leaves_held_parts(sizes, held):
    blocks = _ts_blocks(sizes)
    expected = np.concatenate([np.frombuffer(b, dtype=np.int64).copy() for b in blocks])
    assert expected.tolist() == [1000 * i for i in range(sum(sizes))]  # the times, in ns
    keep = list(range(len(blocks))) if held == "all" else [k for k in held if k < len(blocks)]
    views = {k: np.frombuffer(blocks[k], dtype=np.int64) for k in keep}  # held elsewhere too
    before = {k: v.copy() for k, v in views.items()}
    joined = np.frombuffer(compiled._join_blocks(blocks), dtype=np.int64)
    assert np.array_equal(joined, expected)
    for k, v in views.items():  # copied from, not taken: still readable, unchanged
        assert np.array_equal(v, before[k])
        assert len(memoryview(blocks[k])) == len(v) * 8
    for k in set(range(len(blocks))) - set(keep):  # taken: left empty
        assert len(memoryview(blocks[k])) == 0
    joined[:] = 7  # the result is writable, as numpy's own arrays


def test_join_refuses_what_is_not_blocks():
    with pytest.raises(TypeError):
        compiled._join_blocks([b"abc"])
    with pytest.raises(TypeError):
        compiled._join_blocks((_ts_blocks([1])[0],))


def test_join_parts_falls_back_to_the_copy():
    """Parts that are not whole Blocks (numpy's own arrays, a view of part of one, zeros that
    hold no memory) are joined by ``columns.drain``, as before."""
    blocks = _ts_blocks([3, 4])
    whole = np.frombuffer(blocks[0], dtype=np.int64)
    cases = [
        [np.arange(3), np.arange(4)],
        [whole[1:], np.frombuffer(blocks[1], dtype=np.int64)],
        [whole, np.broadcast_to(np.int64(0), 5)],
    ]
    for parts in cases:
        expected = np.concatenate([np.asarray(p) for p in parts])
        assert np.array_equal(compiled.join_parts(list(parts), np.int64), expected)


def test_trace_columns_equal_with_the_plain_copy(tmp_path, monkeypatch):
    """A trace of about 300k events in two chunks (parts over a mebibyte each: the page-moving
    path) reads the same columns whether its parts are joined by ``_cscan.join`` or copied."""
    events = b"[" + _text(310_000, 5) + b"]"
    path = tmp_path / "t.json"
    path.write_bytes(b'{"schemaVersion": 1, "traceEvents": ' + events + b"}")
    monkeypatch.setattr(chunks, "CHUNK_BYTES", len(events) // 2)
    moved = read(str(path), max_ratio=None)
    monkeypatch.setattr(compiled, "join_parts", lambda parts, dtype: compiled.drain(parts, dtype))
    copied = read(str(path), max_ratio=None)
    assert moved.decoder == copied.decoder == "compiled"
    assert moved.columns.keys() == copied.columns.keys()
    for key in ("ts_ns", "dur_ns"):
        assert np.array_equal(moved.columns[key], copied.columns[key])
    assert moved.columns["ts_ns"].tolist() == [(5 + i) * 1000 for i in range(310_000)]
    for key in (k for k in moved.columns if k.startswith("arg_") and hasattr(moved.columns[k], "mask")):
        assert np.array_equal(moved.columns[key].values, copied.columns[key].values)
        assert np.array_equal(moved.columns[key].mask, copied.columns[key].mask)


def test_the_collector_stays_off_while_any_load_pauses_it_and_comes_back_after():
    """Two loads on two threads (diff, ranks) each pause the garbage collector: it is off while
    either runs, and on again once both are done, whichever ends first."""
    import gc
    import threading

    from traceview.read.columns import gc_paused

    assert gc.isenabled()
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = []

    def a():
        with gc_paused():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b():
        a_in.wait(10)
        with gc_paused():
            b_in.set()
            a_out.wait(10)
            seen.append(gc.isenabled())  # A is done, B still loading

    threads = [threading.Thread(target=f) for f in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == [False]
    assert gc.isenabled()
