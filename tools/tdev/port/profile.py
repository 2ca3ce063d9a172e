"""Port profiles: what `tdev port --to NAME` renames, as data (``profiles/NAME.yaml``, or a
user's own file by path).

Every entry keeps the file and line it came from, which the porter records as the evidence of
each change. Refused with ``file:line``: an unknown key, a value of the wrong type, a name or
header mapped twice to different targets (``names``, ``prefixes``, ``headers``), a path
replacement that collides (two entries for one text), a file class that names no table the
profile has or gives a key twice.

``classes`` scope tables to files by their path in PyTorch (the extraction's MANIFEST.json
records it), as hipify classes PyTorch's files: a class's names go before the profile's
(``match: names``), or replace them and are matched as text anywhere, inside identifiers,
comments and strings (``match: text``); ``banner: false`` leaves the banner off its files."""
from __future__ import annotations

import fnmatch
import functools
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from basekit.docread import BadInput, check_yaml_bounds, load_json, read_text, yaml_errors

PROFILE_DIR = "profiles"
SUPPORTED = 1
MAX_PROFILE_BYTES = 8 * 1024 * 1024
REGIONS = ("code", "comments", "strings")
NAME_RE = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*(?:::)?|[\w./<>\"= -]+")


class ProfileError(BadInput):
    """A port profile that cannot be used."""


@dataclass(frozen=True)
class Rule:
    """One mapping entry: ``source -> target`` and where it is written."""
    source: str
    target: str
    origin: str  # "file:line", or the derived table's name


MATCHES = ("names", "text")
CLASS_KEYS = {"name", "pytorch_paths", "except", "ignore_case", "table", "names", "match", "banner"}


@dataclass(frozen=True)
class FileClass:
    """Files chosen by their PyTorch path (shell globs, ``*`` across directories, as hipify's
    ``fnmatch``), less ``except``; the names they are ported with, and how."""
    name: str
    origin: str  # "file:line" of the class
    paths: tuple[str, ...]
    except_: tuple[str, ...] = ()
    ignore_case: bool = False
    table: dict[str, str] = field(default_factory=dict, repr=False)  # a derived table: name -> target
    table_origin: str = ""
    own: dict[str, Rule] = field(default_factory=dict, repr=False)  # the class's own entries (after the table's)
    match: str = "names"  # or "text": substrings anywhere, leftmost then longest
    banner: bool = True

    @property
    def has_names(self) -> bool:
        return bool(self.table or self.own)

    @functools.cached_property
    def names(self) -> dict[str, Rule]:
        """The class's names (made when a file of the class is ported)."""
        origin = self.table_origin
        return {**{k: Rule(k, v, origin) for k, v in self.table.items()}, **self.own}

    def target(self, text: str) -> tuple[str, str]:
        """The target of one of the class's names, and the entry it comes from."""
        rule = self.own.get(text)
        return (rule.target, rule.origin) if rule is not None else (self.table[text], self.table_origin)

    @functools.cached_property
    def heads(self) -> tuple[str, ...]:
        """The text before the first wildcard of each of ``paths`` (lower case where case is
        ignored): a path that starts with none is not in the class (most paths)."""
        return tuple(_head(g.lower() if self.ignore_case else g) for g in self.paths)

    @functools.cached_property
    def _match(self):
        """``paths`` and ``except`` as one pattern each (compiled when a path starts with a head)."""
        fold = str.lower if self.ignore_case else str
        return tuple(re.compile("|".join(f"(?:{fnmatch.translate(fold(g))})" for g in gs) or r"(?!x)x").match
                     for gs in (self.paths, self.except_))

    def holds(self, pytorch_path: str) -> bool:
        path = pytorch_path.lower() if self.ignore_case else pytorch_path
        if not path.startswith(self.heads):
            return False
        inside, out = self._match
        return inside(path) is not None and out(path) is None


def _head(glob: str) -> str:
    """The text before a glob's first wildcard."""
    return glob[:min([i for i in map(glob.find, "*?[") if i >= 0], default=len(glob))]


@dataclass(frozen=True)
class Profile:
    name: str
    path: str
    sources: tuple[str, ...]  # where the tables come from, for a reader
    names: dict[str, Rule]  # identifiers and qualified names, whole
    prefixes: dict[str, Rule]  # identifier prefixes (an identifier that starts with one)
    headers: dict[str, Rule]  # whole header names of #include
    rewrite_in: frozenset[str]
    port_files: tuple[str, ...]  # globs (file names) of the files ported
    keep: tuple[str, ...]  # globs (paths) copied unported
    path_replace: tuple[Rule, ...]  # substrings of directory and file names
    extensions: dict[str, str]
    banner: str
    banner_files: tuple[str, ...]
    device_include: dict[str, Any] = field(default_factory=dict)
    device_math: dict[str, Any] = field(default_factory=dict)
    include_prefixes: tuple[str, ...] = ()  # spellings renamed even when the file is not in the extraction
    include_rename: str = "resolved"  # or "prefixes": only spellings under include_prefixes (and quoted)
    keep_unchanged_names: bool = False  # a file the port leaves as it is keeps its name in its directory
    classes: tuple[FileClass, ...] = ()
    digest: str = ""

    def classes_of(self, pytorch_path: str | None) -> tuple[FileClass, ...]:
        """The classes that hold a file (by its PyTorch path; none without one)."""
        if not pytorch_path or not self.classes:
            return ()
        return tuple(c for c in self.classes if c.holds(pytorch_path))

    def ports(self, rel: str) -> bool:
        base = rel.rsplit("/", 1)[-1]
        return globs(self.port_files)(base) is not None and globs(self.keep)(rel) is None

    def rename(self, rel: str) -> str:
        """The ported path of ``rel`` (directories and file names, then the extension)."""
        head, _, base = rel.rpartition("/")
        stem, dot, ext = base.rpartition(".") if "." in base else (base, "", "")
        ext = self.extensions.get(dot + ext, dot + ext)
        for r in self.path_replace:
            head, stem = head.replace(r.source, r.target), stem.replace(r.source, r.target)
        return (head + "/" if head else "") + stem + ext


@functools.lru_cache(maxsize=None)
def globs(patterns: tuple[str, ...]):
    """One compiled match for a list of shell globs (``fnmatchcase`` rules)."""
    return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in patterns) or r"(?!x)x").match


KEYS = {"version", "name", "sources", "derived", "names", "prefixes", "headers", "rewrite_in",
        "port_files", "keep", "paths", "banner", "banner_files", "device_include", "device_math",
        "includes", "keep_unchanged_names", "classes"}


def shipped(name: str) -> Path:
    return Path(str(resources.files("tdev.port") / PROFILE_DIR / f"{name}.yaml"))


def shipped_names() -> list[str]:
    d = Path(str(resources.files("tdev.port") / PROFILE_DIR))
    return sorted(p.stem for p in d.glob("*.yaml"))


def find(to: str) -> Path:
    """A shipped profile's name, or a path to a YAML file."""
    if "/" not in to and not to.endswith((".yaml", ".yml")):
        p = shipped(to)
        if not p.is_file():
            raise ProfileError(to, f"no such port profile (shipped: {', '.join(shipped_names())}; "
                                   "or give a path to a YAML file)")
        return p
    return Path(to)


class _Reader:
    def __init__(self, path: Path):
        import yaml

        self.path = os.fsdecode(path)
        text = read_text(path, max_bytes=MAX_PROFILE_BYTES, what="the port profile")
        with yaml_errors(self.path):
            check_yaml_bounds(text, self.path, 16, 200_000)
            root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        self.text = text
        if root is None or root.tag != "tag:yaml.org,2002:map":
            raise ProfileError(self.path, "a port profile is a mapping")
        self.top = self.mapping(root, "the profile")

    def at(self, node) -> str:
        return f"{self.path}:{node.start_mark.line + 1}"

    def fail(self, node, problem: str):
        raise ProfileError(self.at(node), problem)

    def mapping(self, node, what: str, *, unique_values: bool = False) -> dict[str, tuple[Any, Any]]:
        """key -> (value node, key node); a key twice is refused, naming both lines."""
        if node.tag != "tag:yaml.org,2002:map":
            self.fail(node, f"{what} must be a mapping")
        out: dict[str, tuple[Any, Any]] = {}
        for k, v in node.value:
            key = self.scalar(k, what)
            if key in out:
                first = out[key][1].start_mark.line + 1
                if self.scalar(out[key][0], what) if unique_values else True:
                    self.fail(k, f"{what}: {key!r} is given twice (first at line {first})"
                              + (f": maps onto two targets" if unique_values else ""))
            out[key] = (v, k)
        return out

    def scalar(self, node, what: str) -> str:
        if node.tag == "tag:yaml.org,2002:map" or node.tag == "tag:yaml.org,2002:seq":
            self.fail(node, f"{what}: expected a text")
        return str(node.value)

    def strings(self, node, what: str) -> tuple[str, ...]:
        if node.tag != "tag:yaml.org,2002:seq":
            self.fail(node, f"{what} must be a list")
        return tuple(self.scalar(n, what) for n in node.value)

    def rules(self, key: str, check=None, node=None) -> dict[str, Rule]:
        if node is None and key not in self.top:
            return {}
        out: dict[str, Rule] = {}
        for src, (v, k) in self.mapping(self.top[key][0] if node is None else node, key, unique_values=True).items():
            dst = self.scalar(v, key)
            if check and (problem := check(src, dst)):
                self.fail(k, f"{key}: {src!r}: {problem}")
            out[src] = Rule(src, dst, self.at(k))
        return out

    def plain(self, key: str) -> Any:
        import yaml

        node = self.top.get(key, (None,))[0]
        return None if node is None else yaml.load(yaml.serialize(node), Loader=yaml.SafeLoader)


def _name_problem(src: str, dst: str) -> str | None:
    if not NAME_RE.fullmatch(src) or not src.strip():
        return "not a name (an identifier, or names joined by ::)"
    if not dst.strip() and dst != "":
        return "an empty target"
    return None


def load(path: str | os.PathLike) -> Profile:
    import hashlib

    r = _Reader(Path(path))
    for key, (_, knode) in r.top.items():
        if key not in KEYS:
            r.fail(knode, f"unknown key {key!r} (known: {', '.join(sorted(KEYS))})")
    version = r.plain("version")
    if version != SUPPORTED:
        raise ProfileError(r.path, f"version must be {SUPPORTED}, got {version!r}")
    names: dict[str, Rule] = {}
    tables: dict[str, tuple[dict[str, str], str]] = {}
    if "derived" in r.top:
        rel = r.scalar(r.top["derived"][0], "derived")
        if "/" in rel or rel.startswith("."):
            r.fail(r.top["derived"][0], "derived: a file name beside the profile")
        derived, tables = _derived(Path(r.path).parent / rel)
        names.update(derived)
    own = r.rules("names", _name_problem)
    names.update(own)  # the profile's own entries win over a derived table
    paths = r.mapping(r.top["paths"][0], "paths") if "paths" in r.top else {}
    replace = []
    if "replace" in paths:
        seen: dict[str, Any] = {}
        for item in paths["replace"][0].value if paths["replace"][0].tag.endswith("seq") else \
                r.fail(paths["replace"][0], "paths.replace must be a list of [from, to]"):
            pair = r.strings(item, "paths.replace")
            if len(pair) != 2 or not pair[0]:
                r.fail(item, "paths.replace: each entry is [from, to]")
            if pair[0] in seen:
                r.fail(item, f"paths.replace: {pair[0]!r} is replaced twice (first at line "
                             f"{seen[pair[0]].start_mark.line + 1}): maps onto two targets")
            seen[pair[0]] = item
            replace.append(Rule(pair[0], pair[1], r.at(item)))
    extensions = {k: r.scalar(v, "paths.extensions") for k, (v, _) in
                  r.mapping(paths["extensions"][0], "paths.extensions", unique_values=True).items()} \
        if "extensions" in paths else {}
    rewrite_in = frozenset(r.plain("rewrite_in") or ["code"])
    if not rewrite_in <= set(REGIONS) or "code" not in rewrite_in:
        r.fail(r.top["rewrite_in"][0], f"rewrite_in: a list of {', '.join(REGIONS)} that holds code")
    inc = r.plain("includes") or {}
    if not isinstance(inc, dict) or inc.get("rename", "resolved") not in ("resolved", "prefixes"):
        r.fail(r.top["includes"][0], "includes: {rename: resolved|prefixes, prefixes: [...]}")
    lst = lambda k: r.strings(r.top[k][0], k) if k in r.top else ()  # noqa: E731
    return Profile(
        name=str(r.plain("name") or Path(r.path).stem), path=r.path, sources=lst("sources"),
        names=names, prefixes=r.rules("prefixes", _name_problem), headers=r.rules("headers"),
        rewrite_in=rewrite_in, port_files=lst("port_files"), keep=lst("keep"), path_replace=tuple(replace),
        extensions=extensions, banner=str(r.plain("banner") or ""), banner_files=lst("banner_files"),
        device_include=r.plain("device_include") or {},
        device_math=_math(r),
        include_prefixes=tuple(inc.get("prefixes", ())), include_rename=str(inc.get("rename", "resolved")),
        keep_unchanged_names=bool(r.plain("keep_unchanged_names")),
        classes=_classes(r, tables),
        digest=hashlib.sha256(r.text.encode() + b"".join(
            (Path(r.path).parent / r.scalar(r.top["derived"][0], "d")).read_bytes() for _ in
            (["derived"] if "derived" in r.top else []))).hexdigest())


def _derived(path: Path) -> tuple[dict[str, Rule], dict[str, tuple[dict[str, str], str]]]:
    """The derived file's names, and its per-file-class tables (``tables``: {table: {name: target}},
    with the name of each table's origin)."""
    doc = load_json(path, what="a derived port table")
    if not isinstance(doc, dict) or not isinstance(doc.get("names"), dict):
        raise ProfileError(path, "a derived table has 'names': {name: [target, table, tags]}")
    out = {}
    for src, row in doc["names"].items():
        if not (isinstance(row, list) and row and isinstance(row[0], str)):
            raise ProfileError(path, f"{src!r}: expected [target, table, tags]")
        out[src] = Rule(src, row[0], f"{path.name}: {row[1] if len(row) > 1 else 'table'}")
    tables = doc.get("tables") or {}
    for table, rows in tables.items() if isinstance(tables, dict) else [("tables", None)]:
        if not isinstance(rows, dict) or not all(isinstance(v, str) and k for k, v in rows.items()):
            raise ProfileError(path, f"tables: {table!r}: expected {{name: target}}")
    return out, {k: (v, f"{path.name}: tables.{k}") for k, v in tables.items()}


def _classes(r: _Reader, tables: dict[str, tuple[dict[str, str], str]]) -> tuple[FileClass, ...]:
    """``classes``: a list of {name, pytorch_paths, except, ignore_case, table, names, match, banner}."""
    if "classes" not in r.top:
        return ()
    node = r.top["classes"][0]
    if not node.tag.endswith(":seq"):
        r.fail(node, "classes must be a list of mappings")
    out: list[FileClass] = []
    seen: dict[str, Any] = {}
    for item in node.value:
        keys = r.mapping(item, "classes")
        for key, (_, knode) in keys.items():
            if key not in CLASS_KEYS:
                r.fail(knode, f"classes: unknown key {key!r} (known: {', '.join(sorted(CLASS_KEYS))})")
        if "name" not in keys:
            r.fail(item, "classes: a class has a name")
        name = r.scalar(keys["name"][0], "classes: name")
        if name in seen:
            r.fail(item, f"classes: {name!r} is given twice (first at line {seen[name].start_mark.line + 1})")
        seen[name] = item
        lst = lambda k: r.strings(keys[k][0], f"classes: {k}") if k in keys else ()  # noqa: E731
        if not lst("pytorch_paths"):
            r.fail(item, f"classes: {name!r}: pytorch_paths: a list of globs (PyTorch paths)")
        match = r.scalar(keys["match"][0], "classes: match") if "match" in keys else "names"
        if match not in MATCHES:
            r.fail(keys["match"][0], f"classes: {name!r}: match is one of {', '.join(MATCHES)}")
        table, origin = {}, ""
        if "table" in keys:
            which = r.scalar(keys["table"][0], "classes: table")
            if which not in tables:
                r.fail(keys["table"][0], f"classes: {name!r}: no table {which!r} in the derived file "
                                         f"(it has: {', '.join(sorted(tables)) or 'none'})")
            table, origin = tables[which]
        own: dict[str, Rule] = {}
        if "names" in keys:
            check = (lambda s, d: None if s else "an empty name") if match == "text" else _name_problem
            own = r.rules(f"classes: {name}: names", check, keys["names"][0])
        flag = lambda k, default: _flag(r, keys, k, default)  # noqa: E731
        out.append(FileClass(name, r.at(item), lst("pytorch_paths"), lst("except"), flag("ignore_case", False),
                             table, origin, own, match, flag("banner", True)))
    return tuple(out)


def _flag(r: _Reader, keys: dict, key: str, default: bool) -> bool:
    if key not in keys:
        return default
    value = r.scalar(keys[key][0], f"classes: {key}")
    if value not in ("true", "false"):
        r.fail(keys[key][0], f"classes: {key} is true or false")
    return value == "true"


def _math(r: _Reader) -> dict[str, Any]:
    """``device_math``: files, except, and ``map`` (or ``derived: true``: the derived table's)."""
    math = dict(r.plain("device_math") or {})
    if math.pop("derived", False):
        node = r.top["derived"][0] if "derived" in r.top else r.fail(r.top["device_math"][0], "no derived table")
        math["map"] = {**load_json(Path(r.path).parent / r.scalar(node, "derived"))["math"], **math.get("map", {})}
    return math


def load_named(to: str) -> Profile:
    return load(find(to))
