"""Device matching is exact (issue 32): every device string of the corpus, read from the traces'
``deviceProperties`` with plain json (not traceview's loader), names the entry expected for it
below, an expectation written by reading the strings against the device table's entries; and a
name that merely contains an entry's name (a GH200 is not an H200) matches nothing."""

from __future__ import annotations

import gzip
import json

import pytest
from corpus import CORPUS, SKIP_REASON

from traceview.devices import find_device, load_devices

# Every (deviceProperties name, SM count) of the corpus -> the devices.toml entry it is.
EXPECTED = {
    ("NVIDIA A100-PG509-200", 108): "A100 SXM4 40GB",
    ("NVIDIA A100-SXM4-80GB", 108): "A100 SXM4 80GB",
    ("NVIDIA A100 80GB PCIe", 108): "A100 PCIe 80GB",
    ("Tesla V100-SXM2-32GB", 80): "Tesla V100 SXM2",
    ("Tesla V100-SXM2-16GB", 80): "Tesla V100 SXM2",
    ("Tesla V100-DGXS-32GB", 80): "Tesla V100 SXM2",
    ("Quadro GP100", 56): "Quadro GP100",
    ("NVIDIA H100", 132): "H100 NVL",
    ("NVIDIA H100 80GB HBM3", 132): "H100 SXM5 80GB",
    ("NVIDIA GeForce RTX 2080 Ti", 68): "GeForce RTX 2080 Ti",
    ("NVIDIA GeForce RTX 4090", 128): "GeForce RTX 4090",
    ("NVIDIA RTX A4000", 48): "RTX A4000",
    ("NVIDIA B200", 148): "B200 (HGX)",
    ("NVIDIA B300 SXM6 AC", 148): "B300 (HGX, Blackwell Ultra)",
    ("AMD Radeon Graphics", 104): "Instinct MI210 / MI250 GCD",
    ("AMD Instinct MI300X", 304): "Instinct MI300X",
    ("AMD Instinct MI300X VF", 304): "Instinct MI300X",
}


def _corpus_devices() -> dict[tuple[str, int | None], list[str]]:
    """Each device string of the corpus (every deviceProperties entry) -> the files holding it."""
    found: dict[tuple[str, int | None], list[str]] = {}
    for path in sorted(CORPUS.glob("*/*.json.gz")):
        with gzip.open(path) as fh:
            props = json.load(fh).get("deviceProperties") or []
        for p in props:
            key = (p.get("name"), p.get("numSms"))
            found.setdefault(key, []).append(path.relative_to(CORPUS).as_posix())
    return found


def test_every_corpus_device_string_matches_its_own_entry():
    if not CORPUS.is_dir():
        pytest.skip(SKIP_REASON)
    found = _corpus_devices()
    got = {key: (d.name if (d := find_device(*key)) else None) for key in found}
    listing = "\n".join(
        f"{name!r} ({sms} SMs, {len(found[name, sms])} devices) -> {got[name, sms]}"
        for name, sms in sorted(found, key=str)
    )
    print(listing)  # the list the issue asks for, shown with -s or on failure
    assert set(found) == set(EXPECTED), f"a corpus device string not in EXPECTED (or gone):\n{listing}"
    assert got == EXPECTED, listing


@pytest.mark.parametrize(
    "name, sms, entry",
    [
        ("NVIDIA GH200 480GB", 132, None),  # a Grace Hopper: not an H200 SXM
        ("NVIDIA H200", 132, "H200 SXM"),
        ("NVIDIA H200 NVL", 132, None),  # another board, other figures
        ("NVIDIA H100 NVL", 132, "H100 NVL"),
        ("NVIDIA H100 80GB HBM3", 132, "H100 SXM5 80GB"),
        ("NVIDIA A10", 72, "A10"),
        ("NVIDIA A100-SXM4-40GB", 108, "A100 SXM4 40GB"),
        ("NVIDIA L4", 58, "L4"),
        ("NVIDIA L40S", 142, "L40S"),
        ("NVIDIA GeForce RTX 4090 D", 114, None),
        ("NVIDIA GeForce RTX 3090 Ti", 84, None),
        ("  nvidia h200 ", 132, "H200 SXM"),  # case and surrounding spaces do not count
        ("AMD Radeon Graphics", 12, None),  # an APU: the MI250 entry needs its 104 CUs
    ],
)
def test_a_name_must_match_an_entry_whole(name, sms, entry):
    d = find_device(name, sms)
    assert (d.name if d else None) == entry


def test_every_entry_matches_the_names_its_pattern_spells():
    """No entry is shadowed: each pattern's first alternative, taken literally where it has no
    regex syntax, finds that entry and not one tried before it."""
    for d in load_devices():
        first = d.match.split("|")[0]
        if any(ch in first for ch in "()[]?*+\\$^"):
            continue
        got = find_device(first, d.sms)
        assert got is not None and got.name == d.name, (first, got)


def test_a_name_that_is_not_text_is_unknown():
    assert find_device(200, 132) is None  # type: ignore[arg-type]
    assert find_device(["NVIDIA H200"], 132) is None  # type: ignore[arg-type]
