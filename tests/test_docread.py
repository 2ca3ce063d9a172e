"""basekit.docread: the bounded reader every document from a user, tree or series goes through."""
from __future__ import annotations

import os

import pytest
import yaml
from hypothesis import given, strategies as st

from support.fuzzing import FUZZ, one_input
from basekit.docread import (BadInput, finite_number, load_json, load_json_text, load_yaml,
                          load_yaml_text, read_regular, read_text)


def _laughs(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "build_variables.bzl"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="not a regular file") as e:  # no writer: a wait would hang
        read_regular(fifo)
    assert e.value.where == str(fifo)


def test_directories_and_devices_are_refused(tmp_path):
    with pytest.raises(BadInput, match="not a regular file"):
        read_regular(tmp_path)
    with pytest.raises(BadInput, match="not a regular file"):
        read_regular("/dev/zero")


def test_size_bound_and_missing_file(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(BadInput, match="too large"):
        read_regular(big, max_bytes=1024)
    assert read_regular(big, max_bytes=4096) == b"x" * 2048
    with pytest.raises(BadInput, match="cannot read"):
        read_regular(tmp_path / "missing")


def test_invalid_utf8_names_the_byte(tmp_path):
    f = tmp_path / "rules.yaml"
    f.write_bytes(b"a: 1\nb: \xff\n")
    with pytest.raises(BadInput, match=r"not valid UTF-8 \(byte 8\)"):
        read_text(f)


def test_billion_laughs_is_refused_before_it_is_built():
    with pytest.raises(BadInput, match="expands to more than"):
        load_yaml_text(_laughs(), "rules.yaml")
    # a few shared anchors well under the bound still load
    assert load_yaml_text(_laughs(2), "ok.yaml")["a2"][0][0] == ["x"] * 9


@pytest.mark.parametrize("doc", ["[" * 100_000 + "]" * 100_000,
                                 "{a: " * 100_000 + "1" + "}" * 100_000,
                                 "".join(f"{' ' * i}- \n" for i in range(2000))],
                         ids=["flow-lists", "flow-mappings", "block-lists"])
def test_deep_yaml_is_refused_with_a_line(doc):
    # tdev's own bound or the YAML library's (newer libyaml refuses deep nesting itself): either
    # way one line of bad input naming the file, never a RecursionError or a hang
    with pytest.raises(BadInput, match="nest") as e:
        load_yaml_text(doc, "p.yaml")
    assert str(e.value).startswith("p.yaml") and "\n" not in str(e.value)


def test_yaml_syntax_error_names_the_line(tmp_path):
    f = tmp_path / "vendor.yaml"
    f.write_text("a: 1\nb: [1, 2\n")
    with pytest.raises(BadInput) as e:
        load_yaml(f)
    assert str(e.value).startswith(f"{f}:") and "invalid YAML" in str(e.value)


def test_yaml_is_safe_only():
    with pytest.raises(BadInput):
        load_yaml_text("a: !!python/object/apply:os.system ['true']", "x.yaml")


@pytest.mark.parametrize("text, problem", [
    ('{"size": -Infinity}', "Infinity"), ('{"size": NaN}', "NaN"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"), ('{"a": ', "invalid JSON"),
], ids=["infinity", "nan", "deep", "truncated"])
def test_json_refusals(text, problem):
    with pytest.raises(BadInput, match=problem):
        load_json_text(text, "MANIFEST.json")


def test_json_file_round_trip(tmp_path):
    f = tmp_path / "m.json"
    f.write_text('{"files": [1, 2.5, "x"]}')
    assert load_json(f) == {"files": [1, 2.5, "x"]}
    f.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(BadInput, match="UTF-8"):
        load_json(f)


def test_finite_number():
    assert finite_number(3) and finite_number(2.5)
    assert not any(finite_number(v) for v in (True, float("inf"), float("nan"), "3", None))


_yaml_atoms = st.sampled_from(["a", "1", "-", ": ", "[", "]", "{", "}", ",", "&x ", "*x", "\n",
                               "  ", "'", '"', "!!str ", "? ", "|", ">", "#", "---\n", "\t"])


@FUZZ
@given(st.lists(_yaml_atoms, max_size=200).map("".join))
def test_fuzz_yaml_gives_a_value_or_bad_input(text):
    with one_input("yaml"):
        try:
            load_yaml_text(text, "fuzz.yaml")
        except BadInput:
            pass


@FUZZ
@given(st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=3), c, max_size=4)),
       st.integers(0, 40))
def test_fuzz_json_gives_a_value_or_bad_input(value, cut):
    import json
    text = json.dumps(value)
    text = text[: len(text) - cut] if cut else text
    with one_input("json"):
        try:
            load_json_text(text, "fuzz.json")
        except BadInput:
            pass


def test_yaml_loader_is_the_safe_one():
    assert load_yaml_text("a: [1, 2]", "x") == yaml.safe_load("a: [1, 2]")
