"""Kernel taxonomy: read a GPU kernel's name and say what it does.

The knowledge lives in ``traceview/rules/kernels.toml`` (library rules: facts about how a
library names its kernels; see its header for how rules combine) and
``traceview/rules/kernel_words.toml`` (the name tier: words that say what a kernel does,
tried only when no library rule matched; a guess, marked ``confidence = "name"``); this
module only loads, validates and applies them. A trace has few distinct
kernel names and many launches, so everything classifies each distinct name once and
maps the result onto rows through categorical codes.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import numpy as np
import pandas as pd
from msgspec import UNSET, UnsetType

from traceview import schema
from traceview.errors import RuleError
from traceview.limits import name_view

DEFAULT_RULES_PATH = Path(__file__).parent / "rules" / "kernels.toml"
DEFAULT_WORDS_PATH = Path(__file__).parent / "rules" / "kernel_words.toml"

#: Output columns, in order. ``pass`` is a Python keyword, hence ``KernelClass.pass_``.
#: ``confidence``: "rule" (a library rule decided the category), "name" (a word of the name
#: did: a guess), None (nothing matched: category "other").
COLUMNS = (
    "category",
    "tensor_core",
    "attention_backend",
    "library",
    "precision",
    "pass",
    "rule",
    "confidence",
)
CONFIDENCES = ("rule", "name")
WORD_PREFIX = "name-word:"
_FIELDS = ("category", "tensor_core", "attention_backend", "library", "precision", "pass")
_PASSES = ("fwd", "bwd")
_NONE = "none"  # a field set to "none" is pinned to None: traits may not fill it
_PINNED = object()


@dataclass(frozen=True)
class KernelClass:
    """What one kernel name says. Fields are None where the name does not tell."""

    category: str
    tensor_core: bool | None = None
    attention_backend: str | None = None
    library: str | None = None
    precision: str | None = None
    pass_: str | None = None
    rule: str | None = None
    confidence: str | None = None


@dataclass(frozen=True)
class Rule:
    """One [[rule]] of a rule file; a *trait* when it sets no category."""

    id: str
    pattern: re.Pattern
    fields: Mapping[str, object]  # field -> value, _PINNED for "none"
    applies_to: frozenset | None = None
    source: str = ""
    examples: tuple = ()
    origin: str = ""

    @property
    def is_trait(self) -> bool:
        return "category" not in self.fields

    def __hash__(self):  # fields is a dict; identity within a RuleSet is enough
        return hash((self.id, self.pattern.pattern, self.origin))


@dataclass(frozen=True)
class WordEntry:
    """One [[word]] of the name tier: any of ``words`` gives these fields."""

    words: tuple
    fields: tuple  # (field, value) pairs: category, maybe attention_backend
    source: str = ""
    examples: tuple = ()


@dataclass(frozen=True)
class WordTable:
    """The name tier. Entries in file order; an earlier entry beats a later one."""

    entries: tuple = ()
    tensor_core_words: frozenset = frozenset()

    @functools.cached_property
    def lookup(self) -> dict:
        """word -> (entry index, word index, word); min() of hits picks the winner."""
        return {w: (i, j, w) for i, e in enumerate(self.entries) for j, w in enumerate(e.words)}

    def rule_ids(self) -> list:
        return [WORD_PREFIX + w for e in self.entries for w in e.words]


@dataclass(frozen=True)
class RuleSet:
    """An ordered list of rules plus the vocabulary they may use, and the name tier."""

    rules: tuple
    version: int = 1
    categories: tuple = ()
    precisions: tuple = ()
    words: WordTable = WordTable()
    _split: tuple = field(default=(), compare=False, repr=False)

    def __post_init__(self):
        cats = tuple(r for r in self.rules if not r.is_trait)
        traits = tuple(r for r in self.rules if r.is_trait)
        object.__setattr__(self, "_split", (cats, traits))

    def __hash__(self):
        return hash((self.rules, self.version, self.categories, self.precisions, self.words))

    def with_overrides(self, user: RuleSet) -> RuleSet:
        """User rules go first; a user rule with a default rule's id replaces it. User rules
        are library-tier rules, so they also beat every name-tier guess."""
        user_ids = {r.id for r in user.rules}
        kept = tuple(r for r in self.rules if r.id not in user_ids)
        return RuleSet(
            rules=user.rules + kept,
            version=self.version,
            categories=_union(self.categories[:-1], user.categories, ("other",)),
            precisions=_union(self.precisions, user.precisions),
            words=self.words,
        )

    def dtypes(self) -> dict:
        """Stable column dtypes, so tables classified with one RuleSet concatenate cleanly."""

        def vocab(key):
            ours = {r.fields[key] for r in self.rules if isinstance(r.fields.get(key), str)}
            words = {v for e in self.words.entries for k, v in e.fields if k == key}
            return sorted(ours | words)

        return {
            "category": pd.CategoricalDtype(list(self.categories)),
            "tensor_core": pd.BooleanDtype(),
            "attention_backend": pd.CategoricalDtype(vocab("attention_backend")),
            "library": pd.CategoricalDtype(vocab("library")),
            "precision": pd.CategoricalDtype(list(self.precisions)),
            "pass": pd.CategoricalDtype(list(_PASSES)),
            "rule": pd.CategoricalDtype([r.id for r in self.rules if not r.is_trait] + self.words.rule_ids()),
            "confidence": pd.CategoricalDtype(list(CONFIDENCES)),
        }


def _union(*seqs) -> tuple:
    return tuple(dict.fromkeys(x for s in seqs for x in s))


# ------------------------------------------------------------------ loading / validation


@functools.cache
def default_rules() -> RuleSet:
    """The rules shipped in traceview/rules/kernels.toml, with the name tier of kernel_words.toml."""
    rules = _load(DEFAULT_RULES_PATH, base=None)
    return dataclasses.replace(rules, words=_load_words(DEFAULT_WORDS_PATH, rules.categories))


def load_rules(path) -> RuleSet:
    """A user rule file (same format as kernels.toml; ``version`` optional).

    Combine with ``default_rules().with_overrides(load_rules(path))``.
    Raises RuleError naming the file and the problem.
    """
    return _load(Path(path), base=default_rules())


def rules_from(path=None) -> RuleSet:
    """Defaults, overridden by the user file at ``path`` when one is given."""
    return default_rules() if path is None else default_rules().with_overrides(load_rules(path))


def _load(path: Path, base: RuleSet | None) -> RuleSet:
    doc = schema.read(path, "rule file", RuleError)
    try:
        return _parse(doc, base, str(path))
    except schema.Invalid as e:
        raise RuleError(f"{path}: {e}") from None


_Text = Annotated[str, schema.NonEmpty]


class _RuleSpec(msgspec.Struct, forbid_unknown_fields=True):
    """One [[rule]] as written. UNSET: the rule leaves the field to traits; "none" pins it to None."""

    id: _Text
    pattern: _Text
    category: str | UnsetType = UNSET
    tensor_core: bool | Literal["none"] | UnsetType = UNSET
    attention_backend: _Text | UnsetType = UNSET
    library: _Text | UnsetType = UNSET
    precision: str | UnsetType = UNSET
    pass_: Literal["fwd", "bwd", "none"] | UnsetType = msgspec.field(default=UNSET, name="pass")
    applies_to: list[str] | None = None
    source: str = ""
    note: str = ""
    examples: list[str] = []


class _RuleFile(msgspec.Struct, forbid_unknown_fields=True):
    version: int | UnsetType = UNSET  # a user file may leave it out
    categories: list[str] = []
    precisions: list[str] = []
    rule: list[_RuleSpec] = []


_RULE_HINTS = {"tensor_core": 'allowed: true, false, "none"', "pass": 'allowed: "fwd", "bwd", "none"'}


def _parse(doc: dict, base: RuleSet | None, origin: str) -> RuleSet:
    spec = schema.convert(doc, _RuleFile, _RULE_HINTS)
    version = base.version if spec.version is UNSET and base else spec.version
    if version is UNSET:
        raise schema.problem("version", "missing (an integer)")
    categories = _union(base.categories[:-1] if base else (), spec.categories, ("other",))
    precisions = _union(base.precisions if base else (), spec.precisions)
    rules = tuple(
        _parse_rule(r, i, doc["rule"][i], categories, precisions, origin) for i, r in enumerate(spec.rule)
    )
    dup = _first_duplicate(r.id for r in rules)
    if dup:
        raise schema.problem("rule", f"duplicate rule id {dup!r}")
    return RuleSet(rules=rules, version=version, categories=categories, precisions=precisions)


def _first_duplicate(ids):
    seen = set()
    for i in ids:
        if i in seen:
            return i
        seen.add(i)
    return None


def _parse_rule(spec: _RuleSpec, index: int, raw: dict, categories, precisions, origin) -> Rule:
    """What a type cannot say: the id is not the name tier's, the regex compiles, the rule sets
    a field, its category and precision are declared ones."""

    def bad(key, text):
        path, label = schema.where("rule", index, raw, key)
        return schema.problem(path, text, label)

    if spec.id.startswith(WORD_PREFIX):
        raise bad("id", f"ids starting with {WORD_PREFIX!r} are kept for the name tier")
    try:
        compiled = re.compile(spec.pattern)
    except re.error as e:
        raise bad("pattern", f"bad regex {spec.pattern!r} ({e})") from None
    given = {k: getattr(spec, "pass_" if k == "pass" else k) for k in _FIELDS}
    fields = {k: _PINNED if v == _NONE and k != "category" else v for k, v in given.items() if v is not UNSET}
    if not fields:
        raise bad("", f"sets no field (one of {', '.join(_FIELDS)})")
    for key, known in (("category", categories), ("precision", precisions)):
        value = fields.get(key, _PINNED)
        if value is not _PINNED and (value not in known or value == "other"):
            raise bad(key, f"bad {key} {value!r}, not one of {_declared(known, key)}")
    unknown = [c for c in spec.applies_to or () if c not in categories]
    if unknown:
        raise bad(
            "applies_to", f"bad category {unknown[0]!r}, not one of {_declared(categories, 'category')}"
        )
    applies = frozenset(spec.applies_to) if spec.applies_to is not None else None
    return Rule(
        spec.id, compiled, types.MappingProxyType(fields), applies, spec.source, tuple(spec.examples), origin
    )


def _declared(known, key) -> str:
    """The allowed values, for an error line; a rule file may declare more."""
    plural = "categories" if key == "category" else "precisions"
    named = ", ".join(k for k in known if k != "other")
    return f"the {plural} declared ({named}; a rule file adds to '{plural}')"


# ------------------------------------------------------------------ the name tier: loading

_Word = Annotated[str, msgspec.Meta(pattern=r"^[a-z]+$")]  # tokens are lower-case letters (name_tokens)
_Words = Annotated[list[_Word], msgspec.Meta(min_length=1)]


class _WordSpec(msgspec.Struct, forbid_unknown_fields=True):
    """One [[word]] of kernel_words.toml."""

    words: _Words
    category: str
    source: _Text
    attention_backend: _Text | UnsetType = UNSET
    note: str = ""
    examples: list[str] = []


class _WordFile(msgspec.Struct, forbid_unknown_fields=True):
    tensor_core_words: _Words
    version: int = 1
    word: list[_WordSpec] = []


def _load_words(path: Path, categories) -> WordTable:
    doc = schema.read(path, "rule file", RuleError)
    try:
        return _parse_words(doc, categories)
    except schema.Invalid as e:
        raise RuleError(f"{path}: {e}") from None


def _parse_words(doc: dict, categories) -> WordTable:
    spec = schema.convert(doc, _WordFile)
    entries = tuple(_parse_word(w, i, doc["word"][i], categories) for i, w in enumerate(spec.word))
    dup = _first_duplicate(w for e in entries for w in e.words)
    if dup:
        raise schema.problem("word", f"word {dup!r} appears twice")
    return WordTable(entries, frozenset(spec.tensor_core_words))


def _parse_word(spec: _WordSpec, index: int, raw: dict, categories) -> WordEntry:
    if spec.category not in categories or spec.category == "other":
        path, _label = schema.where("word", index, raw, "category")
        raise schema.problem(
            path, f"bad category {spec.category!r}, not one of {_declared(categories, 'category')}"
        )
    fields = [("category", spec.category)]
    if spec.attention_backend is not UNSET:
        fields.append(("attention_backend", spec.attention_backend))
    return WordEntry(tuple(spec.words), tuple(fields), spec.source, tuple(spec.examples))


# ------------------------------------------------------------------ the name tier: matching

_ANON = re.compile(r"\(anonymous namespace\)::")
_CHUNK = re.compile(r"[A-Za-z]+")  # splits on _, ::, <, >, (, spaces, digits ...
_PIECE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")  # ... and at case changes
_HEAD = re.compile(r"^(?:void\s+)?([^<(]*)")  # the function's own (qualified) name
_MAX_JOIN = 4
_TC_GUESS = frozenset({"gemm", "conv"})  # as for library rules: tensor_core is a GEMM/conv fact


def name_tokens(name: str) -> list:
    """The words of a kernel name, lower-cased: split on everything but letters (``_``, ``::``,
    ``<``, digits, spaces) and at case changes. ``"RMSNormKernel<float>"`` -> rms, norm, kernel, float."""
    return [p.lower() for chunk in _CHUNK.findall(name) for p in _PIECE.findall(chunk)]


def _candidates(text: str) -> set:
    """Tokens, plus runs of case-change pieces joined back (``SoftMax`` -> soft, max, softmax),
    so a table word may be written as one word whichever way a name capitalises it."""
    out: set[str] = set()
    for chunk in _CHUNK.findall(text):
        pieces = [p.lower() for p in _PIECE.findall(chunk)]
        for i in range(len(pieces)):
            out.update("".join(pieces[i:j]) for j in range(i + 1, min(len(pieces), i + _MAX_JOIN) + 1))
    return out


def name_guess(name: str, words: WordTable | None = None) -> tuple | None:
    """(entry, word) the name tier gives ``name``, ignoring library rules; None if no word matches.

    The function's own name is read first, then the whole name (template arguments, parameter
    types); within each, the earliest entry of the word table wins."""
    words = default_rules().words if words is None else words
    clean = _ANON.sub("", name)
    head = _HEAD.match(clean)  # always matches (it may match nothing)
    for text in (head.group(1) if head else clean, clean):
        hits = [words.lookup[w] for w in _candidates(text) if w in words.lookup]
        if hits:
            i, _, word = min(hits)
            return words.entries[i], word
    return None


def _guess_fields(name: str, words: WordTable) -> dict:
    """explain()-style fields from the name tier. tensor_core is pinned to None unless the name
    says tensor cores (mma, wmma, tensorop, ...) on a gemm/conv guess."""
    hit = name_guess(name, words) if words.entries else None
    if hit is None:
        return {}
    entry, word = hit
    rid = WORD_PREFIX + word
    out = {k: (v, rid) for k, v in entry.fields}
    says_tc = out["category"][0] in _TC_GUESS and not words.tensor_core_words.isdisjoint(_candidates(name))
    out.setdefault("tensor_core", (True if says_tc else _PINNED, rid))
    return out


# ------------------------------------------------------------------ classification


def explain(name: str, rules: RuleSet | None = None) -> dict:
    """field -> (value, id of the rule that set it); the basis of classify() and the tests.
    A very long name is read on its head and tail (``limits.name_view``): every rule runs
    over it, so the work per name is bounded, not linear in a hostile name's length."""
    rules = _resolve(rules)
    name = name_view(name)
    cat_rules, traits = rules._split
    out = _first_rule(name, cat_rules) or _guess_fields(name, rules.words)
    category = out.get("category", ("other", None))[0]
    for r in traits:
        if r.applies_to is not None and category not in r.applies_to:
            continue
        missing = [k for k in r.fields if k not in out]
        if missing and r.pattern.search(name):
            out.update({k: (r.fields[k], r.id) for k in missing})
    return out


def _first_rule(name: str, cat_rules) -> dict:
    for r in cat_rules:
        if r.pattern.search(name):
            return {k: (v, r.id) for k, v in r.fields.items()}
    return {}


def _resolve(rules) -> RuleSet:
    """None -> defaults; a RuleSet as is; a path -> defaults overridden by that user file."""
    if rules is None:
        return default_rules()
    if isinstance(rules, RuleSet):
        return rules
    return default_rules().with_overrides(load_rules(rules))


def classify(name: str, rules: RuleSet | None = None) -> KernelClass:
    """Classify one kernel name (first matching library rule, else the name tier; then traits)."""
    got = explain(name, rules)
    val = {k: (None if v is _PINNED else v) for k, (v, _) in got.items()}
    rule = got["category"][1] if "category" in got else None
    return KernelClass(
        category=str(val.get("category", "other")),  # a text: the category is never pinned to none
        tensor_core=val.get("tensor_core"),
        attention_backend=val.get("attention_backend"),
        library=val.get("library"),
        precision=val.get("precision"),
        pass_=val.get("pass"),
        rule=rule,
        confidence=None if rule is None else ("name" if rule.startswith(WORD_PREFIX) else "rule"),
    )


def classify_names(names: Iterable, rules: RuleSet | None = None) -> pd.DataFrame:
    """One row per distinct name (index), the taxonomy COLUMNS with stable dtypes.

    ``rules``: None (defaults), a RuleSet, or the path of a user rule file (overrides defaults).
    """
    rules = _resolve(rules)
    distinct = pd.unique(pd.Series(list(names), dtype=object).dropna().astype(str))
    rows = [classify(n, rules) for n in distinct]
    data = {
        "category": [k.category for k in rows],
        "tensor_core": [k.tensor_core for k in rows],
        "attention_backend": [k.attention_backend for k in rows],
        "library": [k.library for k in rows],
        "precision": [k.precision for k in rows],
        "pass": [k.pass_ for k in rows],
        "rule": [k.rule for k in rows],
        "confidence": [k.confidence for k in rows],
    }
    dtypes = rules.dtypes()
    index = pd.Index(distinct, dtype=object, name="name")
    return pd.DataFrame({c: pd.array(data[c], dtype=dtypes[c]) for c in COLUMNS}, index=index)


def annotate(kernels: pd.DataFrame, rules: RuleSet | None = None) -> pd.DataFrame:
    """Copy of ``kernels`` with the taxonomy COLUMNS, classifying each distinct name once."""
    names = kernels["name"]
    cat = names.array if isinstance(names.dtype, pd.CategoricalDtype) else pd.Categorical(names)
    codes = np.asarray(cat.codes)
    # only the names in use: a trace's kernels share the categories of every event's name, most
    # of them CPU ops (174 of 461 names in the HTA control trace; classifying is ~1 ms a name)
    used = np.unique(codes[codes >= 0])
    table = classify_names(cat.categories[used], _resolve(rules))
    at = np.full(len(cat.categories) + 1, -1)  # code -> row of table; the extra -1 is code -1's
    at[used] = np.arange(len(used))
    rows = at[codes]  # -1 (missing name) -> NA via allow_fill
    out = kernels.copy()
    for col in COLUMNS:
        out[col] = table[col].array.take(rows, allow_fill=True)
    return out


def unclassified(kernels: pd.DataFrame, rules: RuleSet | None = None) -> pd.DataFrame:
    """Names no library rule matched, one table: tier "none" (no tier matched: category
    "other") first, then tier "name" (only the name tier matched; ``rule`` is the word,
    ``name-word:...``), each biggest GPU time first.

    Columns: name, count, total_ns, pct_time, tier, rule (None for tier "none").
    """
    if "confidence" not in kernels.columns:
        kernels = annotate(kernels, rules)
    total = kernels["dur_ns"].sum()
    pick = (kernels["category"] == "other") | (kernels["confidence"] == "name")
    k = kernels.loc[pick.fillna(False).astype(bool), ["name", "dur_ns", "rule"]]
    out = k.groupby(k["name"].astype(str), sort=False).agg(
        count=("dur_ns", "count"), total_ns=("dur_ns", "sum"), rule=("rule", "first")
    )
    out = out.rename_axis("name").reset_index()
    out["total_ns"] = out["total_ns"].astype("int64")
    out["pct_time"] = 100.0 * out["total_ns"] / total if total else 0.0
    out["rule"] = out["rule"].astype(object).where(out["rule"].notna(), None)
    out["tier"] = np.where(out["rule"].isna(), "none", "name")
    out = out[["name", "count", "total_ns", "pct_time", "tier", "rule"]]
    # "none" sorts after "name": descending puts the unmatched names first
    return out.sort_values(["tier", "total_ns"], ascending=False, ignore_index=True)
