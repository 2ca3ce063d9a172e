"""Port one source file's text with a profile: the pure core of `tdev port`.

Names (identifiers and ``::``-qualified names) are rewritten whole where the profile says:
in code always, in comments and string literals only when its ``rewrite_in`` lists them.
``#include`` header names are mapped whole (``headers``), or resolved against the extraction
and renamed like the file they name. Each change is a ``Change`` (line, old, new, the profile
entry), the evidence the manifest and ``--dry-run`` show.

A file of a profile's class (``classes``, by its PyTorch path) is ported by a variant of the
porter: the class's names before the profile's, or (``match: text``) only the class's names,
replaced wherever their text is, then the includes of the text that gives."""
from __future__ import annotations

import bisect
import dataclasses
import functools
import re
from dataclasses import dataclass, field
from typing import Callable

from .fastnames import FastNames, Substrings
from .lexer import (CHAR, COMMENT, INCLUDE, STRING, Region, include_horizon, names_pattern, reference_regions,
                    region_at, regions, trie_pattern, word_char)
from .profile import FileClass, Profile, Rule, globs


@dataclass(frozen=True)
class Change:
    line: int
    old: str
    new: str
    origin: str  # the profile entry: file:line, a derived table, or "include" / "device"

    def to_json(self) -> list:
        return [self.line, self.old, self.new, self.origin]


# an include spelling -> the ported spelling when it names a file of the extraction (or one the
# build writes from a template there), else None
Resolver = Callable[[str, str, bool], "str | None"]


@dataclass(frozen=True)
class Porter:
    profile: Profile
    names: FastNames  # the fast path
    plain: dict[str, Rule]  # the names the text is searched for
    headers: dict[str, Rule]
    text: FileClass | None = None  # match: text: its names replaced anywhere (no other names, no headers)
    banner: bool = True
    variants: dict = field(default_factory=dict, compare=False, repr=False)  # per set of classes

    @functools.cached_property
    def substrings(self) -> Substrings:
        return Substrings([*self.text.table, *self.text.own] if self.text else ())

    @functools.cached_property
    def texts(self) -> re.Pattern:
        """The slow path of ``match: text``: one pattern (the tests hold ``Substrings`` to it)."""
        return re.compile(trie_pattern(t for t in [*self.text.table, *self.text.own] if t) if self.text else r"(?!x)x")

    @functools.cached_property
    def words(self) -> re.Pattern:
        """The slow path: one pattern (the tests hold the fast one to it)."""
        return names_pattern(self.plain, self.profile.prefixes)

    @functools.cached_property
    def _unless(self) -> re.Pattern | None:
        heads = "|".join(map(re.escape, self.profile.device_include.get("unless_included", ())))
        return re.compile(f'#include (?:<(?:{heads})>|"(?:{heads})")') if heads else None

    def included(self, text: str) -> bool:
        """Whether ``text`` includes one of ``device_include``'s ``unless_included`` headers."""
        return self._unless is not None and self._unless.search(text) is not None

    @classmethod
    def of(cls, profile: Profile) -> "Porter":
        names, headers = _split(profile.names, dict(profile.headers), overwrite=False)
        return cls(profile, FastNames(names, profile.prefixes), names, headers)

    def before(self, table: dict[str, Rule]) -> "Porter":
        """This porter with ``table``'s names before its own (its search for names where it
        searches for the same ones)."""
        names, headers = _split(table, dict(self.headers), overwrite=True)
        names = {**self.plain, **names}
        same = names.keys() == self.plain.keys()
        return Porter(self.profile, self.names if same else FastNames(names, self.profile.prefixes), names, headers)

    def for_classes(self, classes: tuple[FileClass, ...]) -> "Porter":
        """The porter of a file of these classes: the first class with names gives them; the
        banner is left off where a class says so."""
        if not classes:
            return self
        key = tuple(c.name for c in classes)
        got = self.variants.get(key)
        if got is None:
            banner = all(c.banner for c in classes)
            table = next((c for c in classes if c.has_names), None)
            if table is None:
                got = dataclasses.replace(self, banner=banner, variants={})
            elif table.match == "text":
                got = Porter(self.profile, FastNames((), ()), {}, {}, table, banner)
            else:
                got = dataclasses.replace(self.before(table.names), banner=banner)
            self.variants[key] = got
        return got

    def _replace_name(self, word: str) -> tuple[str, Rule] | None:
        rule = self.plain.get(word)
        if rule is not None:
            return rule.target, rule
        best = None
        for p, r in self.profile.prefixes.items():
            if word.startswith(p) and len(word) > len(p) and (best is None or len(p) > len(best.source)):
                best = r
        return None if best is None else (best.target + word[len(best.source):], best)

    def spans(self, text: str, slow: bool = False) -> list[tuple[int, int]]:
        return [m.span() for m in self.words.finditer(text)] if slow else self.names.find(text)

    def port(self, text: str, rel: str, resolve: Resolver,
             slow: bool = False) -> tuple[str, list[tuple[int, str, str, str]]]:
        """The ported text and its changes as (offset, old, new, origin)."""
        if self.text is not None:
            return self._port_text(text, rel, resolve, slow)
        prof = self.profile
        allowed = {COMMENT: "comments" in prof.rewrite_in, STRING: "strings" in prof.rewrite_in,
                   CHAR: "strings" in prof.rewrite_in, INCLUDE: False}
        # where names are rewritten everywhere, only the includes need the regions: they are
        # read up to the last "#include" (the same regions as reading the whole text); the slow
        # path reads the whole text one character at a time
        everywhere = all(allowed[k] for k in (COMMENT, STRING, CHAR))
        found = reference_regions(text) if slow else regions(text, include_horizon(text) if everywhere else None)
        starts = [r.start for r in found]
        edits: list[tuple[int, str, str, str]] = []
        taken = {inc.start for inc in found if inc.kind == INCLUDE and self._include(text, inc, rel, resolve, edits)}
        for a, b in self.spans(text, slow):
            where = region_at(starts, found, a)
            # a name inside a header name that no header rule or file took is rewritten as
            # text, like the rest of the directive
            if where is not None and not allowed[where.kind] and not (
                    where.kind == INCLUDE and where.start not in taken):
                continue
            word = text[a:b]
            got = self._replace_name(word)
            if got is not None:
                edits.append((a, word, got[0], got[1].origin))
        edits.sort()
        pieces, pos = [], 0
        for off, old, new, _ in edits:
            if off < pos:  # inside a header name mapped whole
                continue
            pieces.append(text[pos:off])
            pieces.append(new)
            pos = off + len(old)
        pieces.append(text[pos:])
        return "".join(pieces), [e for e in edits]

    def _port_text(self, text: str, rel: str, resolve: Resolver, slow: bool):
        """``match: text``: the texts replaced wherever they are, then the includes of the text
        that gives (as hipify does for such files); offsets are the original text's."""
        spans = [m.span() for m in self.texts.finditer(text)] if slow else self.substrings.find(text)
        target = self.text.target
        edits = [(a, old, *target(old)) for a, b in spans for old in (text[a:b],)]
        pieces, pos, ends, shifts, shift = [], 0, [], [], 0
        for a, old, new, _ in edits:
            pieces += [text[pos:a], new]
            pos = a + len(old)
            shift += len(new) - len(old)
            ends.append(a + shift + len(old))  # where the text after it starts, ported
            shifts.append(shift)
        pieces.append(text[pos:])
        ported = "".join(pieces)
        found = reference_regions(ported) if slow else regions(ported, include_horizon(ported))
        includes: list[tuple[int, str, str, str]] = []
        for inc in found:
            if inc.kind == INCLUDE:
                self._include(ported, inc, rel, resolve, includes)
        if not includes:
            return ported, edits
        out, pos = [], 0
        for off, old, new, _ in includes:
            out += [ported[pos:off], new]
            pos = off + len(old)
        out.append(ported[pos:])

        def original(off: int) -> int:  # an offset inside a replaced text: that text's
            i = bisect.bisect_right(ends, off)
            if i < len(edits) and off >= ends[i] - len(edits[i][2]):
                return edits[i][0]
            return off - (shifts[i - 1] if i else 0)

        return "".join(out), edits + [(original(off), old, new, origin) for off, old, new, origin in includes]

    def _include(self, text: str, inc: Region, rel: str, resolve: Resolver, edits: list) -> bool:
        """The header name's edit, if any; whether a header rule or a file took it (its spelling
        is then the rule's or the file's, even where that is the spelling it has)."""
        a, b = inc.header
        header = text[a:b]
        quoted = text[a - 1] == '"'
        rule = self.headers.get(header)
        if rule is not None:
            edits.append((a, header, rule.target, rule.origin))
            return True
        found = resolve(header, rel, quoted)
        if found is not None and found != header:
            edits.append((a, header, found, "include: renamed with the file it names"))
        return found is not None


_STD_CALL = re.compile(r"std::\w+\(")
_STD_NAME = re.compile(r"std::\w+")


@functools.lru_cache(maxsize=None)
def _call_pattern(word: str) -> re.Pattern:
    return re.compile(re.escape(word) + r"\b\w*\(")


def _called(word: str, text: str) -> bool:
    """``word`` called somewhere in ``text``: the name whole (no word character before it), then
    "(" (the pattern starts with the name, so the search skips to it)."""
    if word not in text:
        return False
    return any(m.start() == 0 or not word_char(text[m.start() - 1]) for m in _call_pattern(word).finditer(text))


def _split(table: dict[str, Rule], headers: dict[str, Rule],
           overwrite: bool) -> tuple[dict[str, Rule], dict[str, Rule]]:
    """A table's names, and its path-like names as header names too (added to ``headers``:
    over the entries there, or only where they have none)."""
    names = {}
    put = headers.__setitem__ if overwrite else headers.setdefault
    for k, rule in table.items():
        for lead in ("include <", 'include "'):  # a derived entry written with its directive
            if k.startswith(lead) and rule.target.startswith(lead):
                put(k[len(lead):], Rule(k[len(lead):], rule.target[len(lead):], rule.origin))
        if k.startswith("<") and k.endswith(">") and rule.target.startswith("<"):
            put(k[1:-1], Rule(k[1:-1], rule.target[1:-1], rule.origin))
        if ("/" in k or k.endswith((".h", ".cuh", ".hpp"))) and "::" not in k and " " not in k:
            put(k, rule)
        if not k.startswith(("include <", 'include "')):
            names[k] = rule
    return names, headers


def finish(porter: Porter, text: str, rel: str, dest: str) -> tuple[str, list[Change]]:
    """What a profile adds around a ported file, and its evidence (lines of the file before the
    port: nothing above adds or removes a line): device math, the device-code include, the
    banner (the banner first in the file)."""
    prof = porter.profile
    base = dest.rsplit("/", 1)[-1]
    changes: list[Change] = []
    math = prof.device_math
    if math and globs(tuple(math.get("files", ())))(base) and not globs(tuple(math.get("except", ())))(rel) \
            and "std::" in text:
        calls = {m.group() for m in _STD_CALL.finditer(text)}  # one pass for the std::name( keys
        for old, new in math.get("map", {}).items():
            key, pos = old + "(", 0
            if key not in calls if _STD_NAME.fullmatch(old) else key not in text:
                continue
            line, counted = 1, 0
            while (pos := text.find(key, pos)) >= 0:
                line += text.count("\n", counted, pos)
                counted = pos
                changes.append(Change(line, old, new, "device_math"))
                pos += len(key)
            text = text.replace(key, new + "(")
    inc = prof.device_include
    if inc and (any(w in text for w in inc.get("when", ()))
                or any(_called(w, text) for w in inc.get("when_called", ()))) and not porter.included(text):
        text = f"#include {inc['include']}\n" + text
        changes.append(Change(1, "", f"#include {inc['include']}", "device_include"))
    if prof.banner and porter.banner and globs(prof.banner_files)(base):
        text = prof.banner + "\n" + text
    changes.sort(key=lambda c: c.line)
    return text, changes


def lines_of(text: str, edits: list) -> list[Change]:
    """Offsets (in the text before the port) as line numbers."""
    out, line, pos = [], 1, 0
    for off, old, new, origin in sorted(edits, key=lambda e: e[0]):
        line += text.count("\n", pos, off)
        pos = max(pos, off)
        out.append(Change(line, old, new, origin))
    return out
