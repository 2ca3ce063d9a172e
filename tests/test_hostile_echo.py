"""A file that is not a document of the expected kind (``/etc/shadow`` given as a vendor profile,
rules, a layout, link-check groups, or named as a marker's profile) is refused with one line
naming the file and its line, never quoting its contents; a real document's unknown key is still
named (with a near miss suggested)."""
from __future__ import annotations

import difflib
import json
import re
import string
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from basekit.errors import InputError
from tdev.cli.main import main
from tdev.scan.rules import load_rules

SECRET = "$6$Zr0Ot.hash$QW9uZXRpbWVwYXNzd29yZGhhc2g"
SHADOW = f"root:{SECRET}:20228:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"


@pytest.fixture
def shadow(tmp_path) -> Path:
    p = tmp_path / "shadow"
    p.write_text(SHADOW)
    return p


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


COMMANDS = {
    "scaffold --vendor": lambda f, d: ["scaffold", "--vendor", str(f), "--out", str(d / "o")],
    "scan --rules": lambda f, d: ["scan", str(d), "--rules", str(f)],
    "extract --layout": lambda f, d: ["extract", str(d), "--dry-run", "--layout", str(f)],
    "link-check --groups": lambda f, d: ["link-check", "--libs", str(d / "x.so"), "--groups",
                                         str(f), "--subset", "--stage1-python", "/nonexistent"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_foreign_file_is_named_not_quoted(command, shadow, tmp_path, capsys):
    for d in ("torch", "c10"):  # the least a PyTorch checkout has
        (tmp_path / d).mkdir()
    (tmp_path / "x.so").write_bytes(b"")
    assert main(COMMANDS[command](shadow, tmp_path)) == 2
    line = one_line(capsys)
    assert line.startswith(f"tdev: {shadow}:1: "), line
    problem = line.removeprefix(f"tdev: {shadow}:1: ")
    assert SECRET not in problem and "root" not in problem and "daemon" not in problem, line


def test_marker_naming_a_foreign_profile_is_not_quoted(shadow, tmp_path, capsys):
    from tdev.scaffold.scaffold import scaffold
    from tdev.scaffold.userwork import MARKER

    out = tmp_path / "torch_sim"
    scaffold("sim", out=out)
    marker = json.loads((out / MARKER).read_text())
    marker["profile"] = str(shadow)
    marker.setdefault("profile_info", {})["given"] = "nosuch"
    (out / MARKER).write_text(json.dumps(marker))
    assert main(["scaffold", "--update", str(out)]) == 2
    line = one_line(capsys)
    assert f"{shadow}:1: " in line, line
    problem = line.split(f"{shadow}:1: ", 1)[1]
    assert SECRET not in problem and "root" not in problem and "daemon" not in problem, line


KNOWN_RULES = {"walk", "names", "build_files", "cpp", "cmake", "python", "version"}
KEYS = st.text(string.ascii_letters + string.digits + ":$*./ -", min_size=1, max_size=40).filter(
    lambda k: k.strip() == k and not k.startswith(("-", "*", "&", "!", "%", "@")))


@settings(max_examples=60, deadline=None)
@given(st.lists(KEYS, min_size=1, max_size=5, unique=True))
def test_no_key_of_a_foreign_mapping_is_quoted(tmp_path_factory, keys):
    """Whatever the keys, when none is a rules key nor a near miss of one (a near miss is a
    typo in a real document, named with "did you mean"), the message is the file, a line, the
    problem and the known keys: nothing of the file."""
    keys = [k for k in keys if k not in KNOWN_RULES and not difflib.get_close_matches(k, KNOWN_RULES, n=1)]
    if not keys:
        return
    f = tmp_path_factory.mktemp("k") / "r.yaml"
    f.write_text("".join(f"{json.dumps(k)}: x\n" for k in keys))
    with pytest.raises(InputError) as e:
        load_rules(f)
    assert re.fullmatch(rf"{re.escape(str(f))}:\d+: not a document of this kind: none of its keys "
                        r"is known \(not quoted; known: [a-z_, ]+\)", str(e.value)), str(e.value)


def test_real_document_still_names_its_unknown_key(tmp_path, capsys):
    f = tmp_path / "r.yaml"
    f.write_text("walk:\n  skip_dirs: [a]\nnmaes: {}\n")
    assert main(["scan", str(tmp_path), "--rules", str(f)]) == 2
    assert "nmaes: unknown key (did you mean 'names'?)" in one_line(capsys)
    f.write_text("walk:\n  skip_dirs: [a]\n  extra: 1\n")
    assert main(["scan", str(tmp_path), "--rules", str(f)]) == 2
    assert f"{f}:3: walk.extra: unknown key (known: " in one_line(capsys)


@pytest.mark.parametrize("text", ["x: !secrettag 1\n", "x: *secretalias\n", "x: !!secrettag 1\n"])
def test_yaml_error_does_not_quote_the_file(text, tmp_path):
    """What the YAML parser quotes of the file (a tag, an alias) is left out of the message."""
    f = tmp_path / "r.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as e:
        load_rules(f)
    assert str(e.value).startswith(f"{f}:1: invalid YAML (") and "secret" not in str(e.value)


@pytest.mark.parametrize("profile", ["d/" * 3000 + "p.yaml", "n" * 5000 + ".yaml"],
                         ids=["3000-levels", "5000-characters"])
def test_marker_profile_path_the_system_cannot_take_is_one_line(profile, tmp_path, capsys):
    """A marker's profile path is checked like a path given on the command line: 3,000 levels or
    5,000 characters are one line naming the marker's profile, not an ENAMETOOLONG traceback."""
    from tdev.scaffold.scaffold import scaffold
    from tdev.scaffold.userwork import MARKER

    out = tmp_path / "torch_sim"
    scaffold("sim", out=out)
    marker = json.loads((out / MARKER).read_text())
    marker["profile"] = profile
    marker.setdefault("profile_info", {})["given"] = "nosuch"
    (out / MARKER).write_text(json.dumps(marker))
    assert main(["scaffold", "--update", str(out)]) == 2
    line = one_line(capsys)
    assert re.search(r"path too (deep|long)|longer than 255 bytes", line), line
