"""basekit.config: YAML into a dataclass schema, bad input as one line with file, line, key path."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

import pytest

from basekit.config import conf, convert, load_document_text, read_config
from basekit.errors import InputError


def positive(v: int) -> int:
    if v < 1:
        raise ValueError("must be a positive integer")
    return v


@dataclass(frozen=True)
class Rule:
    name: str
    match: tuple[str, ...] = conf(one_or_many=True)
    mode: Literal["hook", "remove"] = "hook"
    weight: int = conf(1, check=positive)
    ratio: float = 0.5
    enabled: bool = True
    extra: Any = None


@dataclass(frozen=True)
class Doc:
    rules: tuple[Rule, ...]
    env: Mapping[str, str] = conf(default_factory=dict)
    source: str = conf("x", key="from")
    note: str | None = None


GOOD = """\
rules:
  - name: a
    match: [x/**, y]
    mode: remove
    weight: 3
    ratio: 2
    enabled: false
    extra: {anything: [1, 2]}
  - name: b
    match: z
env: {CC: gcc}
from: here
"""


def test_a_good_document_becomes_the_dataclass(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    doc = read_config(Doc, path)
    assert doc.rules[0] == Rule("a", ("x/**", "y"), "remove", 3, 2.0, False, {"anything": [1, 2]})
    assert doc.rules[1] == Rule("b", ("z",))  # one string for a list, defaults filled in
    assert isinstance(doc.rules[0].ratio, float)
    assert doc.env == {"CC": "gcc"} and doc.source == "here" and doc.note is None


def test_null_means_the_default_unless_the_field_is_optional():
    doc = convert(Doc, {"rules": [{"name": "a", "match": [], "weight": None}], "env": None,
                        "note": None}, "d")
    assert doc.rules[0].weight == 1 and doc.env == {} and doc.note is None


def _error(text: str) -> str:
    with pytest.raises(InputError) as e:
        load_document_text(text, "c.yaml").read(Doc)
    assert "\n" not in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("text, message", [
    ("rules:\n  - name: a\n    match: []\n    mdoe: hook\n",
     "c.yaml:4: rules[0].mdoe: unknown key (did you mean 'mode'?)"),
    ("rules:\n  - name: a\n    match: []\n    zzz: 1\n",
     "c.yaml:4: rules[0].zzz: unknown key (known: name, match, mode, weight, ratio, enabled, extra)"),
    ("rules:\n  - name: a\n    match: [x, 3]\n", "c.yaml:3: rules[0].match[1]: expected a string, got int"),
    ("rules:\n  - name: a\n    match: 7\n", "c.yaml:3: rules[0].match: expected a list of strings, got int"),
    ("rules:\n  - name: a\n    match: []\n    mode: delete\n",
     "c.yaml:4: rules[0].mode: expected one of hook, remove, got 'delete'"),
    ("rules:\n  - match: []\n", "c.yaml:2: rules[0]: missing key 'name'"),
    ("rules:\n  - name: a\n    match: []\n    weight: 0\n", "c.yaml:4: rules[0].weight: must be a positive integer"),
    ("rules:\n  - name: a\n    match: []\n    weight: true\n", "c.yaml:4: rules[0].weight: expected an integer, got bool"),
    ("rules:\n  - name: a\n    match: []\n    ratio: .inf\n", "c.yaml:4: rules[0].ratio: expected a number, got float"),
    ("rules:\n  - name: a\n    match: []\n    enabled: yes please\n", "rules[0].enabled: expected true or false, got string"),
    ("rules: []\nenv: {CC: 1}\n", "c.yaml:2: env.CC: expected a string, got int"),
    ("rules: []\nenv: [a]\n", "c.yaml:2: env: expected a mapping of names to strings, got list"),
    ("rules: []\nnote: [a]\n", "c.yaml:2: note: expected a string or null, got list"),
    ("- a\n", "c.yaml:1: expected a mapping, got list"),
    ("rules: [\n", "c.yaml:2: invalid YAML"),
    ("", "c.yaml: expected a mapping, got null"),
])
def test_bad_input_names_file_line_key_and_problem(text, message):
    assert message in _error(text)


def test_lines_follow_anchors_and_merge_keys():
    text = "base: &b {name: a, match: []}\nrules:\n  - <<: *b\n    mode: nope\n"

    @dataclass(frozen=True)
    class WithBase:
        rules: tuple[Rule, ...]
        base: Any = None

    with pytest.raises(InputError, match=r"c.yaml:4: rules\[0\].mode: expected one of hook, remove"):
        load_document_text(text, "c.yaml").read(WithBase)


def test_fail_names_the_line_of_any_key_path():
    doc = load_document_text("rules:\n  - name: a\n  - name: a\n", "c.yaml")
    with pytest.raises(InputError, match=r"^c.yaml:3: rules\[1\].name: two rules are named 'a'$"):
        doc.fail(("rules", 1, "name"), "two rules are named 'a'")
    with pytest.raises(InputError, match=r"^c.yaml:1: missing\[4\]: nope$"):
        doc.fail(("missing", 4), "nope")


def test_hostile_documents_are_refused_within_docread_bounds(tmp_path):
    deep = "a: " + "[" * 200 + "]" * 200 + "\n"
    with pytest.raises(InputError, match="nested deeper"):
        load_document_text(deep, "c.yaml")
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
    with pytest.raises(InputError, match="expands to more than"):
        load_document_text(laughs, "c.yaml")
    fifo = tmp_path / "fifo"
    import os
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_config(Doc, fifo)


def test_data_without_nodes_names_the_place_without_a_line():
    with pytest.raises(InputError, match=r"^layout: rules\[0\].name: expected a string, got int$"):
        convert(Doc, {"rules": [{"name": 1, "match": []}]}, "layout")


@pytest.mark.parametrize("text, message", [
    ("sets:\n  a:\n    stage: 3\n", ":3: sets.a.stage: expected one of 1, 2, got 3"),
    ("sets:\n  a:\n    stage: 1\n    requries: [b]\n", ":4: sets.a.requries: unknown key (did you mean 'requires'?)"),
    ("sets:\n  a:\n    stage: 1\n    requires: [b]\n", ":4: sets.a.requires: unknown set 'b'"),
    ("sets:\n  a:\n    stage: 1\n    buildable: false\n", ":3: sets.a: a set that is not buildable says why"),
])
def test_target_sets_are_read_through_the_config_reader(tmp_path, text, message):
    from pathlib import Path

    from tdev.standalone.targets import load_target_sets
    path = Path(tmp_path / "targets.yaml")
    path.write_text(text)
    with pytest.raises(InputError) as e:
        load_target_sets(path)
    assert str(e.value) == f"{path}{message}"
