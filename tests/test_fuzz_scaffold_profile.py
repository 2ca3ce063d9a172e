"""Fuzzing the vendor-profile loader (``profiles.load_profile``: read, merge with the defaults,
validate): mutations of the shipped ``templates/vendors/*.yaml`` (values of other types, keys
removed, added or renamed, containers wrapped or nested deeply, text-level damage) either load
as a profile or raise ``ProfileError`` (the scaffold's bad-input error), within the time bound.

Long run: ``TDEV_FUZZ_EXAMPLES=50000 python3 -m pytest -q -s tests/test_fuzz_scaffold_profile.py``.
"""
from __future__ import annotations

import copy
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from support.fuzzing import FUZZ, one_input
from tdev.scaffold.profiles import ProfileError, VendorProfile, available_vendors, load_profile
import pytest

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane

SHIPPED = {name: yaml.safe_load(path.read_text()) for name, path in available_vendors().items()}


def _keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [str(k) for k in value] + [k for v in value.values() for k in _keys(v)]
    if isinstance(value, list):
        return [k for v in value for k in _keys(v)]
    return []


def _scalars(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _scalars(v)]
    if isinstance(value, list):
        return [s for v in value for s in _scalars(v)]
    return [value]


# keys and values of the real profiles: mutations that use them reach deeper validation
NAMES = sorted({k for doc in SHIPPED.values() for k in _keys(doc)})
SCALARS = sorted({str(s) for doc in SHIPPED.values() for s in _scalars(doc)})

scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(SCALARS),
    st.sampled_from(NAMES), st.text(max_size=40),
    st.sampled_from(["../x.h", "a b", "int*", "void (*)(void)", "*/", '"', "{{ x }}", "1e400",
                     "nullptr", "out_ptr", "CPU", "CUDA", "host_alias", "adopt", "cpu", ""]))
value = st.recursive(scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=8),
                                                 inner, max_size=4)), max_leaves=12)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys / indexes) into ``doc``, the root included."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _set(doc: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    _get(doc, path[:-1])[path[-1]] = new
    return doc


@st.composite
def mutation(draw) -> tuple[str, str]:
    """(kind, YAML text) of one mutated shipped profile."""
    name = draw(st.sampled_from(sorted(SHIPPED)))
    doc = copy.deepcopy(SHIPPED[name])
    kinds = []
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        target = _get(doc, path)
        kind = draw(st.sampled_from(["replace", "delete", "add", "rename", "wrap",
                                     "duplicate"]))
        if kind == "replace":
            doc = _set(doc, path, draw(value))
        elif kind == "delete" and path:
            parent = _get(doc, path[:-1])
            del parent[path[-1]]
        elif kind == "add" and isinstance(target, dict):
            target[draw(st.sampled_from(NAMES) | st.text(max_size=8))] = draw(value)
        elif kind == "add" and isinstance(target, list):
            target.insert(draw(st.integers(0, len(target))), draw(value))
        elif kind == "rename" and isinstance(target, dict) and target:
            old = draw(st.sampled_from(sorted(target, key=str)))
            target[draw(st.sampled_from(NAMES))] = target.pop(old)
        elif kind == "wrap":
            doc = _set(doc, path, draw(st.sampled_from([[target], {"x": target}])))
        elif kind == "duplicate" and path:
            other = draw(st.sampled_from(paths))
            doc = _set(doc, path, copy.deepcopy(_get(doc, other)) if other[:len(path)] != path
                       else target)
        kinds.append(kind)
    if draw(st.integers(0, 5)) == 0:  # last (the chain is too deep for the helpers above)
        path = draw(st.sampled_from(_paths(doc)))
        depth = draw(st.sampled_from([10, 63, 65, 1000, 20000]))
        doc = _set(doc, path, _deep(depth, draw(st.booleans())))
        kinds.append(f"nest{depth}")
    text = _dump(doc)
    if draw(st.integers(0, 9)) == 0:  # text-level damage: YAML syntax errors, tabs, anchors
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["\t", ":", "- ", "[", "{", "&a ", "*a ", "!!python/object:os.system ", "\x00", "\n  ", "'"])) + text[at:]
        kinds.append("text")
    return "+".join(kinds), text


def _deep(depth: int, lists: bool) -> Any:
    """A ``depth``-deep chain built without recursion."""
    inner: Any = "x"
    for _ in range(depth):
        inner = [inner] if lists else {"k": inner}
    return inner


def _dump(doc: Any) -> str:
    try:
        return yaml.safe_dump(doc, sort_keys=False, width=200)
    except (RecursionError, yaml.YAMLError):
        # too deep for PyYAML's emitter: spell the chain in flow style ourselves
        return _flow(doc)


def _flow(doc: Any) -> str:
    parts: list[str] = []
    stack: list[Any] = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and item in ("]", "}", ", "):
            parts.append(item)
        elif isinstance(item, list):
            parts.append("[")
            stack.append("]")
            for i, v in reversed(list(enumerate(item))):
                stack.append(v)
                if i:
                    stack.append(", ")
        elif isinstance(item, dict):
            parts.append("{")
            stack.append("}")
            for i, (k, v) in reversed(list(enumerate(item.items()))):
                stack.append(v)
                stack.append(f"{yaml.safe_dump(k).strip().removesuffix('...').strip()}: ")
                if i:
                    stack.append(", ")
        elif isinstance(item, str) and item.endswith(": "):
            parts.append(item)
        else:
            parts.append(yaml.safe_dump(item, default_flow_style=True).strip()
                         .removesuffix("...").strip())
    return "".join(parts) + "\n"


OUTCOMES: Counter = Counter()


@FUZZ
@given(mutation())
def test_mutated_profiles_load_or_are_refused_as_bad_input(case):
    kind, text = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chip.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        with one_input(f"profile mutated by {kind}"):
            try:
                result = load_profile(str(path))
            except ProfileError as e:
                assert str(e).startswith(str(path)), e  # names the file
                assert "\n" not in str(e), e  # one line
                OUTCOMES["refused"] += 1
            else:
                assert isinstance(result, VendorProfile)
                OUTCOMES["loaded"] += 1


def teardown_module(module):
    total = sum(OUTCOMES.values())
    print(f"\nprofile fuzz: {total} inputs, {OUTCOMES['loaded']} loaded, "
          f"{OUTCOMES['refused']} refused as bad input, 0 other exceptions")
