"""Inputs the long fuzz run (tests/fuzz_long.py, 50,000 per parser on 32 cores) found, kept as
plain regression tests: each raised an exception other than the reader's bad-input error."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from basekit.docread import BadInput
from tdev.patch.diff import PatchFormatError
from tdev.patch.series import load_series
from tdev.scaffold.profiles import ProfileError, load_profile, resolve_vendor
from tdev.scan.rules import RulesError, load_rules
from wrapped_cmake.errors import InputError
from wrapped_cmake.profile import BUILTIN_DIR, parse_profile
from tdev.extract.manifest import load_manifest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("doc", ["&a [*a]\n", "walk: &a {extend: *a}\n"], ids=["list", "mapping"])
def test_a_recursive_alias_in_rules_is_bad_input(tmp_path, doc):
    """Was: ValueError('Circular reference detected') from the rules digest."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(doc)
    with pytest.raises(RulesError, match="recursive YAML alias"):
        load_rules(rules)


def test_a_patch_name_that_is_not_utf8_is_bad_input(tmp_path):
    """Was: UnicodeEncodeError (a lone surrogate in a diff --git name)."""
    (tmp_path / "1.patch").write_bytes("diff --git a/x.c a/\ud800\n".encode("utf-8", "surrogatepass"))
    (tmp_path / "series").write_text("1.patch\n")
    with pytest.raises(PatchFormatError) as e:
        load_series(tmp_path)
    assert "\n" not in str(e.value)


def test_a_profile_key_with_a_line_break_is_named_on_one_line(tmp_path):
    """Was: a two-line ProfileError (the key '\\n\\n  ' printed as it is)."""
    chip = tmp_path / "chip.yaml"
    chip.write_text(resolve_vendor("ascend").read_text() + "? '\n\n  '\n: null\n")
    with pytest.raises(ProfileError) as e:
        load_profile(str(chip))
    assert "\n" not in str(e.value) and "unknown key" in str(e.value)


def test_wrapped_cmake_profile_with_compilers_not_a_mapping_is_bad_input(tmp_path):
    """Was: AttributeError ('list' object has no attribute 'items')."""
    doc = yaml.safe_load((BUILTIN_DIR / "cuda.yaml").read_text())
    doc["compilers"] = ["nvcc"]
    bad = tmp_path / "cuda.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError, match="compilers: expected a mapping"):
        parse_profile(bad)


def test_manifest_torch_source_is_not_expanded_as_a_home_directory(tmp_path):
    """Was: RuntimeError('Could not determine home directory') for torch_source '~0' (in
    wrapped-cmake's own manifest reader, since replaced by tdev's one manifest model)."""
    manifest = tmp_path / "MANIFEST.json"
    manifest.write_text(json.dumps({"schema": 1, "tool": "tdev extract",
                                    "torch": {"version": "2.6.0", "commit": None},
                                    "layout": {}, "counts": {}, "torch_source": "~0",
                                    "files": []}))
    assert load_manifest(tmp_path).torch_tree() == tmp_path / "~0"


def test_bad_input_is_always_one_line():
    assert str(BadInput("a\nb.yaml", "key '\n' unknown")) == "a\\nb.yaml: key '\\n' unknown"
