"""Typed config reading: a YAML document into a frozen dataclass, bad input as one line naming
the file, the YAML line, the key path and the problem.

A schema is a dataclass. Field types: ``str``, ``int``, ``bool``, ``float``, ``tuple[X, ...]``
(a YAML list), ``Literal[...]`` (choices), ``Mapping[str, X]``, a nested dataclass,
``X | None``, and ``Any`` (taken as written). A field without a default is required; a YAML
``null`` for a field with a default (and a type that is not ``X | None``) means the default.
``conf()`` adds what a type cannot say: the YAML ``key`` (when it is no Python name), a
``check`` (a function that returns the value, normalised where that helps, or raises
``ValueError`` with the problem), and ``one_or_many`` (a single string stands for a list of one).

Example::

    @dataclass(frozen=True)
    class Rule:
        name: str
        match: tuple[str, ...] = conf(one_or_many=True)
        mode: Literal["hook", "remove"] = "hook"
        weight: int = conf(1, check=positive)

    @dataclass(frozen=True)
    class Layout:
        rules: tuple[Rule, ...]
        env: Mapping[str, str] = conf(default_factory=dict)

    layout = read_config(Layout, "layout.yaml")

and what a user reads for bad input (``basekit.errors.InputError``, exit code 2)::

    layout.yaml:4: rules[1].mdoe: unknown key (did you mean 'mode'?)
    layout.yaml:5: rules[1].match[0]: expected a string, got int
    layout.yaml:6: rules[1].mode: expected one of hook, remove, got 'delete'
    layout.yaml:2: rules[0]: missing key 'name'

The document is read within ``basekit.docread``'s bounds (regular file, size, depth, aliases)
and parsed once; line numbers are looked up from the composed nodes only when there is an
error, so a good document costs no more than ``yaml.load``. Hand-written: cattrs and
pydantic convert as well, but neither reports YAML lines, and both are dependencies (pydantic a
compiled one) for about two hundred lines.

Generic layer: imports nothing but ``basekit``.
"""
from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Literal, NoReturn, TypeVar, Union

import yaml

from basekit import docread
from basekit.errors import InputError, one_line

T = TypeVar("T")
KeyPath = tuple[Union[str, int], ...]
_META = "basekit.config"


def conf(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING,
         key: str | None = None, check: Callable[[Any], Any] | None = None,
         one_or_many: bool = False) -> Any:
    """A dataclass field with config options (see the module docstring)."""
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata={_META: (key, check, one_or_many)})


def reads_version(supported: int) -> Callable[[int], int]:
    """A ``conf(check=...)`` for a file's ``version`` key: the one version this reader reads."""
    def check(value: int) -> int:
        if value != supported:
            raise ValueError(f"version {value}; this reader reads {supported}")
        return value
    return check


@dataclass(frozen=True)
class _Field:
    name: str
    key: str
    type: Any
    required: bool
    check: Callable[[Any], Any] | None
    one_or_many: bool


@lru_cache(maxsize=None)
def _fields(schema: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(schema)
    out = []
    for f in dataclasses.fields(schema):
        if not f.init:
            continue
        key, check, one_or_many = f.metadata.get(_META, (None, None, False))
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append(_Field(f.name, key or f.name, hints[f.name], required, check, one_or_many))
    return tuple(out)


# --- messages --------------------------------------------------------------------------------

_NAMES = {str: ("a string", "strings"), int: ("an integer", "integers"), bool: ("true or false", "booleans"),
          float: ("a number", "numbers"), Any: ("anything", "values")}


def describe(tp: Any, plural: bool = False) -> str:
    """What a value of type ``tp`` is, as a message says it: "a list of strings"."""
    if tp in _NAMES:
        return _NAMES[tp][plural]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return "one of " + ", ".join(map(str, args))
    if origin is tuple:
        return ("lists" if plural else "a list") + " of " + describe(args[0], True)
    if origin in (dict, Mapping):
        return ("mappings" if plural else "a mapping") + " of names to " + describe(args[1], True)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a, plural) for a in args if a is not type(None)) + " or null"
    return "mappings" if plural else "a mapping" if dataclasses.is_dataclass(tp) else "anything"


def kind(value: Any) -> str:
    """The YAML kind of ``value``: string, int, float, bool, list, mapping, null."""
    if value is None:
        return "null"
    return {str: "string", bool: "bool", int: "int", float: "float", list: "list",
            dict: "mapping"}.get(type(value), type(value).__name__)


def dotted(path: KeyPath) -> str:
    """``rules[1].match`` for ("rules", 1, "match")."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


# --- documents -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Document:
    """A loaded YAML document (``data``), its composed ``node`` (None for data that came
    otherwise) and ``where`` it came from; ``fail`` names the YAML line of a key path."""
    data: Any
    where: str
    node: yaml.Node | None = None

    def _nodes(self, path: KeyPath) -> list[yaml.Node]:
        """The file's nodes along ``path``, as far as the file has it."""
        node, out = self.node, []
        for part in path:
            if isinstance(node, yaml.MappingNode):
                pair = next(((k, v) for k, v in node.value if getattr(k, "value", None) == str(part)), None)
                node = pair[1] if pair else None
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
            else:
                node = None
            if node is None:
                break
            out.append(node)
        return out

    def line(self, path: KeyPath) -> int | None:
        nodes = self._nodes(path)
        if nodes:
            return nodes[-1].start_mark.line + 1
        return None if self.node is None else self.node.start_mark.line + 1

    def of_kind(self, path: KeyPath, keys: Iterable[str], data: Any) -> bool:
        """Whether the file reads as a document of the expected kind, so that its keys may be
        quoted: the file holds ``path`` (below the top, whose every key was a known one), or
        its mapping at the top holds one of ``keys`` (``data``, the merged mapping, stands in
        where the document has no nodes)."""
        if self.node is None:
            return bool(path) or (isinstance(data, dict) and any(k in data for k in keys))
        if path:
            return len(self._nodes(path)) == len(path)
        return isinstance(self.node, yaml.MappingNode) and not set(keys).isdisjoint(
            getattr(k, "value", None) for k, _ in self.node.value)

    def fail(self, path: KeyPath, problem: str, *, at: KeyPath | None = None) -> NoReturn:
        """Bad input naming the line of ``at`` (default ``path``), the key ``path``, ``problem``."""
        line = self.line(path if at is None else at)
        where = f"{self.where}:{line}" if line else self.where
        raise InputError(where, f"{dotted(path)}: {problem}" if path else problem)

    def read(self, schema: type[T], path: KeyPath = ()) -> T:
        """The value at ``path`` (default: the whole document) converted to ``schema``."""
        value = self.data
        for part in path:
            value = value[part]
        return _convert(self, schema, value, path)


def load_document_text(text: str, where: str) -> Document:
    """The YAML document in ``text`` within ``docread``'s bounds, parsed once, nodes kept."""
    with docread.yaml_errors(where):
        docread.check_yaml_bounds(text, where, docread.MAX_DEPTH, docread.MAX_NODES)
        loader = docread.YamlLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    return Document(data, where, node)


def load_document(path: str | os.PathLike, *, what: str = "YAML file") -> Document:
    """The YAML document in the regular file ``path`` (see ``load_document_text``)."""
    return load_document_text(docread.read_text(path, what=what), os.fsdecode(path))


def read_config(schema: type[T], path: str | os.PathLike, *, what: str = "YAML file") -> T:
    """The YAML file ``path`` as a ``schema`` value; InputError names file, line, key and problem."""
    return load_document(path, what=what).read(schema)


def convert(schema: type[T], data: Any, where: str) -> T:
    """Already loaded ``data`` as a ``schema`` value (errors name ``where`` without a line)."""
    return Document(data, where).read(schema)


# --- conversion ------------------------------------------------------------------------------

def _convert(doc: Document, tp: Any, value: Any, path: KeyPath) -> Any:
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return _dataclass(doc, tp, value, path)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"config schemas support X | None only, not {tp}")
        if inner[0] in _NAMES and not _is(inner[0], value):
            doc.fail(path, f"expected {describe(tp)}, got {kind(value)}")
        return _convert(doc, inner[0], value, path)
    if origin is Literal:
        if value in args and type(value) in map(type, args):
            return value
        doc.fail(path, f"expected {describe(tp)}, got {one_line(repr(value))[:80]}")
    if origin is tuple and isinstance(value, list):
        return tuple(_convert(doc, args[0], v, path + (i,)) for i, v in enumerate(value))
    if origin in (dict, Mapping) and isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                doc.fail(path, f"key {one_line(repr(k))[:80]} is not a string")
        return {k: _convert(doc, args[1], v, path + (k,)) for k, v in value.items()}
    if tp in _NAMES and _is(tp, value):
        return float(value) if tp is float else value
    if origin is None and tp not in _NAMES:
        raise TypeError(f"config schemas cannot hold {tp}")
    doc.fail(path, f"expected {describe(tp)}, got {kind(value)}")


def _is(tp: type, value: Any) -> bool:
    if tp is float:
        return docread.finite_number(value)
    return isinstance(value, tp) and (tp is bool or not isinstance(value, bool))


def _dataclass(doc: Document, schema: type, value: Any, path: KeyPath) -> Any:
    if not isinstance(value, dict):
        doc.fail(path, f"expected a mapping, got {kind(value)}")
    fields = _fields(schema)
    known = [f.key for f in fields]
    for k in value:
        if k not in known:
            _unknown_key(doc, path, k, known, value)
    kwargs = {}
    for f in fields:
        v = value.get(f.key)
        if f.key not in value or (v is None and not f.required and not _optional(f.type)):
            if f.required:
                doc.fail(path, f"missing key '{f.key}'")
            continue
        if f.one_or_many and isinstance(v, str):
            v = [v]
        v = _convert(doc, f.type, v, path + (f.key,))
        if f.check is not None:
            try:
                v = f.check(v)
            except ValueError as e:
                doc.fail(path + (f.key,), str(e))
        kwargs[f.name] = v
    return schema(**kwargs)


# a key quoted in a message: a name, as config keys are
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")


def _unknown_key(doc: Document, path: KeyPath, key: Any, known: list[str], mapping: dict) -> NoReturn:
    """Bad input for ``key``, not one of ``known``. The key is quoted only when it is a name and
    the file reads as a document of this kind (:meth:`Document.of_kind`), or the key is a near
    miss of a known one: a file that is something else (``/etc/shadow`` given as a profile) is
    named with its line, never quoted."""
    import difflib  # only on this path: every scan reads its rules through here
    name = isinstance(key, str) and _NAME.match(key) is not None
    close = difflib.get_close_matches(key, known, n=1) if name else []
    listed = "known: " + ", ".join(known)
    of_kind = doc.of_kind(path, known, mapping)
    if name and (close or of_kind):
        doc.fail(path + (key,), f"unknown key ({f'did you mean {close[0]!r}?' if close else listed})")
    at = path + (str(key),)
    if of_kind:
        doc.fail(path, f"an unknown key that is not a name (not quoted; {listed})", at=at)
    doc.fail(path, f"not a document of this kind: none of its keys is known (not quoted; {listed})",
             at=at)


def _optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType) and type(None) in typing.get_args(tp)


__all__ = ["Document", "KeyPath", "conf", "convert", "describe", "dotted", "kind", "load_document",
           "load_document_text", "read_config"]
