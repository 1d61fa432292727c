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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from traceview.errors import RuleError
from traceview.limits import name_view

DEFAULT_RULES_PATH = Path(__file__).parent / "rules" / "kernels.toml"
DEFAULT_WORDS_PATH = Path(__file__).parent / "rules" / "kernel_words.toml"

#: Output columns, in order. ``pass`` is a Python keyword, hence ``KernelClass.pass_``.
#: ``confidence``: "rule" (a library rule decided the category), "name" (a word of the name
#: did: a guess), None (nothing matched: category "other").
COLUMNS = ("category", "tensor_core", "attention_backend", "library", "precision", "pass", "rule",
           "confidence")
CONFIDENCES = ("rule", "name")
WORD_PREFIX = "name-word:"
_FIELDS = ("category", "tensor_core", "attention_backend", "library", "precision", "pass")
_RULE_KEYS = {"id", "pattern", "source", "note", "examples", "applies_to", *_FIELDS}
_TOP_KEYS = {"version", "categories", "precisions", "rule"}
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

    def with_overrides(self, user: "RuleSet") -> "RuleSet":
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
    doc = _read_toml(path)
    try:
        return _parse(doc, base, str(path))
    except ValueError as e:
        raise RuleError(f"{path}: {e}") from None


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise RuleError(f"{path}: cannot read rule file ({e.strerror or e})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise RuleError(f"{path}: not valid TOML ({e})") from None


def _parse(doc: dict, base: RuleSet | None, origin: str) -> RuleSet:
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise ValueError(f"unknown top-level key {sorted(unknown)[0]!r}")
    version = doc.get("version", base.version if base else None)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError("'version' must be an integer")
    own_cats = _str_list(doc, "categories")
    categories = _union(base.categories[:-1] if base else (), own_cats, ("other",))
    precisions = _union(base.precisions if base else (), _str_list(doc, "precisions"))
    raw = doc.get("rule", [])
    if not isinstance(raw, list) or not all(isinstance(r, dict) for r in raw):
        raise ValueError("'rule' must be an array of tables ([[rule]])")
    rules = tuple(_parse_rule(r, i, categories, precisions, origin) for i, r in enumerate(raw))
    dup = _first_duplicate(r.id for r in rules)
    if dup:
        raise ValueError(f"duplicate rule id {dup!r}")
    return RuleSet(rules=rules, version=version, categories=categories, precisions=precisions)


def _str_list(doc, key) -> tuple:
    val = doc.get(key, [])
    if not isinstance(val, list) or not all(isinstance(x, str) for x in val):
        raise ValueError(f"{key!r} must be a list of strings")
    return tuple(val)


def _first_duplicate(ids):
    seen = set()
    for i in ids:
        if i in seen:
            return i
        seen.add(i)
    return None


def _parse_rule(raw: dict, index: int, categories, precisions, origin) -> Rule:
    rid = raw.get("id")
    if not isinstance(rid, str) or not rid:
        raise ValueError(f"rule #{index + 1}: missing 'id'")
    where = f"rule {rid!r}"
    if rid.startswith(WORD_PREFIX):
        raise ValueError(f"{where}: ids starting with {WORD_PREFIX!r} are kept for the name tier")
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown field {sorted(unknown)[0]!r}")
    pattern = raw.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"{where}: missing 'pattern'")
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        raise ValueError(f"{where}: bad regex {pattern!r} ({e})") from None
    fields = {k: _check_field(where, k, raw[k], categories, precisions) for k in _FIELDS if k in raw}
    if not fields:
        raise ValueError(f"{where}: sets no field")
    applies = raw.get("applies_to")
    if applies is not None:
        applies = frozenset(_check_list(where, "applies_to", applies, categories))
    examples = raw.get("examples", [])
    if not isinstance(examples, list) or not all(isinstance(x, str) for x in examples):
        raise ValueError(f"{where}: 'examples' must be a list of strings")
    return Rule(rid, compiled, types.MappingProxyType(fields), applies, str(raw.get("source", "")), tuple(examples), origin)


def _check_list(where, key, val, allowed):
    if not isinstance(val, list) or not all(v in allowed for v in val):
        raise ValueError(f"{where}: {key!r} must list known categories, got {val!r}")
    return val


def _check_field(where, key, val, categories, precisions):
    if val == _NONE and key != "category":
        return _PINNED
    allowed = {"category": categories, "precision": precisions, "pass": _PASSES}.get(key)
    if key == "tensor_core":
        ok = isinstance(val, bool)
    elif allowed is not None:
        ok = val in allowed and val != "other"
    else:
        ok = isinstance(val, str) and bool(val)
    if not ok:
        raise ValueError(f"{where}: bad {key} {val!r}")
    return val


# ------------------------------------------------------------------ the name tier: loading

_WORD_TOP_KEYS = {"version", "tensor_core_words", "word"}
_WORD_KEYS = {"words", "category", "attention_backend", "source", "note", "examples"}
_WORD = re.compile(r"^[a-z]+$")  # tokens are lower-case letters only (see name_tokens)


def _load_words(path: Path, categories) -> WordTable:
    doc = _read_toml(path)
    try:
        return _parse_words(doc, categories)
    except ValueError as e:
        raise RuleError(f"{path}: {e}") from None


def _parse_words(doc: dict, categories) -> WordTable:
    unknown = set(doc) - _WORD_TOP_KEYS
    if unknown:
        raise ValueError(f"unknown top-level key {sorted(unknown)[0]!r}")
    entries = tuple(_parse_word(raw, i, categories) for i, raw in enumerate(doc.get("word", [])))
    dup = _first_duplicate(w for e in entries for w in e.words)
    if dup:
        raise ValueError(f"word {dup!r} appears twice")
    tc = _words_list(doc.get("tensor_core_words", []), "tensor_core_words")
    return WordTable(entries, frozenset(tc))


def _parse_word(raw: dict, index: int, categories) -> WordEntry:
    where = f"word entry #{index + 1}"
    unknown = set(raw) - _WORD_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown field {sorted(unknown)[0]!r}")
    words = _words_list(raw.get("words"), f"{where}: 'words'")
    if raw.get("category") not in categories or raw["category"] == "other":
        raise ValueError(f"{where}: bad category {raw.get('category')!r}")
    if not raw.get("source"):
        raise ValueError(f"{where}: missing 'source'")
    fields = [("category", raw["category"])]
    if "attention_backend" in raw:
        fields.append(("attention_backend", str(raw["attention_backend"])))
    return WordEntry(words, tuple(fields), str(raw["source"]), tuple(raw.get("examples", ())))


def _words_list(val, what) -> tuple:
    if not isinstance(val, list) or not val or not all(isinstance(w, str) and _WORD.match(w) for w in val):
        raise ValueError(f"{what} must be a non-empty list of lower-case words (letters only)")
    return tuple(val)


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
    out = set()
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
    for text in (_HEAD.match(clean).group(1), clean):
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
        category=val.get("category", "other"),
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
    table = classify_names(cat.categories, _resolve(rules))
    codes = np.asarray(cat.codes)  # -1 (missing name) -> NA via allow_fill
    out = kernels.copy()
    for col in COLUMNS:
        out[col] = table[col].array.take(codes, allow_fill=True)
    return out


def unclassified(kernels: pd.DataFrame, rules: RuleSet | None = None) -> pd.DataFrame:
    """Names no library rule matched, one table: tier "none" (no tier matched: category
    "other") first, then tier "name" (only the name tier matched; ``rule`` is the word,
    ``name-word:...``), each biggest GPU time first.

    Columns: name, count, total_ns, pct_of_gpu_time, tier, rule (None for tier "none").
    """
    if "confidence" not in kernels.columns:
        kernels = annotate(kernels, rules)
    total = kernels["dur_ns"].sum()
    pick = (kernels["category"] == "other") | (kernels["confidence"] == "name")
    k = kernels.loc[pick.fillna(False).astype(bool), ["name", "dur_ns", "rule"]]
    out = k.groupby(k["name"].astype(str), sort=False).agg(
        count=("dur_ns", "count"), total_ns=("dur_ns", "sum"), rule=("rule", "first"))
    out = out.rename_axis("name").reset_index()
    out["total_ns"] = out["total_ns"].astype("int64")
    out["pct_of_gpu_time"] = 100.0 * out["total_ns"] / total if total else 0.0
    out["rule"] = out["rule"].astype(object).where(out["rule"].notna(), None)
    out["tier"] = np.where(out["rule"].isna(), "none", "name")
    out = out[["name", "count", "total_ns", "pct_of_gpu_time", "tier", "rule"]]
    # "none" sorts after "name": descending puts the unmatched names first
    return out.sort_values(["tier", "total_ns"], ascending=False, ignore_index=True)
