"""Port one source file's text with a profile: the pure core of `tdev port`.

Names (identifiers and ``::``-qualified names) are rewritten whole where the profile says:
in code always, in comments and string literals only when its ``rewrite_in`` lists them.
``#include`` header names are mapped whole (``headers``), or resolved against the extraction
and renamed like the file they name. Each change is a ``Change`` (line, old, new, the profile
entry), the evidence the manifest and ``--dry-run`` show."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

from .fastnames import FastNames
from .lexer import (CHAR, COMMENT, INCLUDE, STRING, Region, include_horizon, names_pattern, reference_regions,
                    region_at, regions)
from .profile import Profile, Rule, globs


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
        headers = dict(profile.headers)
        names = {}
        for k, rule in profile.names.items():  # path-like names are header names too
            for lead in ("include <", 'include "'):  # a derived entry written with its directive
                if k.startswith(lead) and rule.target.startswith(lead):
                    headers.setdefault(k[len(lead):], Rule(k[len(lead):], rule.target[len(lead):], rule.origin))
            if k.startswith("<") and k.endswith(">") and rule.target.startswith("<"):
                headers.setdefault(k[1:-1], Rule(k[1:-1], rule.target[1:-1], rule.origin))
            if ("/" in k or k.endswith((".h", ".cuh", ".hpp"))) and "::" not in k and " " not in k:
                headers.setdefault(k, rule)
            if not k.startswith(("include <", 'include "')):
                names[k] = rule
        return cls(profile, FastNames(names, profile.prefixes), names, headers)

    def _replace_name(self, word: str) -> tuple[str, Rule] | None:
        rule = self.profile.names.get(word)
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
        for old, new in math.get("map", {}).items():
            key, pos = old + "(", 0
            if key not in text:
                continue
            line, counted = 1, 0
            while (pos := text.find(key, pos)) >= 0:
                line += text.count("\n", counted, pos)
                counted = pos
                changes.append(Change(line, old, new, "device_math"))
                pos += len(key)
            text = text.replace(key, new + "(")
    inc = prof.device_include
    if inc and (any(w in text for w in inc.get("when", ())) or any(
            w in text and re.search(rf"(?<!\w){re.escape(w)}\b\w*\(", text) for w in inc.get("when_called", ()))) \
            and not porter.included(text):
        text = f"#include {inc['include']}\n" + text
        changes.append(Change(1, "", f"#include {inc['include']}", "device_include"))
    if prof.banner and globs(prof.banner_files)(base):
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
