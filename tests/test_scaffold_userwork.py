"""`tdev scaffold --force` never loses a vendor's work: the marker records what scaffold wrote
(template digest, resolved profile, each file's sha256); edited files (or an added one where the
new render writes) make --force refuse, naming them, unless --discard-changes; every other added
file is always kept; a kill during
the replacement leaves the old package or the new one."""
from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tdev.cli.main import main
from tdev.scaffold.profiles import parse_profile, vendors_dir
from tdev.scaffold.render import MARKER, render_files
from tdev.scaffold.scaffold import build_context, scaffold, template_root

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane


def run(capsys, *argv):
    code = main(["scaffold", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def pkg(tmp_path) -> Path:
    out = tmp_path / "torch_metax"
    scaffold("metax", out=out)
    return out


def test_force_refuses_an_edited_generated_file_and_names_it(capsys, pkg):
    ops = pkg / "csrc" / "aten" / "Ops.cpp"
    ops.write_text(ops.read_text() + "// my fix, two days of work\n")
    code, _, err = run(capsys, "--vendor", "metax", "--out", str(pkg), "--force")
    assert code == 2 and err.count("\n") == 1
    assert "csrc/aten/Ops.cpp" in err and "--discard-changes" in err
    assert ops.read_text().endswith("// my fix, two days of work\n")


def test_force_keeps_added_files_and_names_them(capsys, pkg):
    """Files the user added (a build's outputs, notes, new sources) never stop --force: they are
    carried into the new package and named."""
    (pkg / "NOTES.md").write_text("my notes")
    (pkg / "build" / "temp").mkdir(parents=True)
    (pkg / "build" / "temp" / "HAL.o").write_bytes(b"\x7fELF")
    (pkg / "csrc" / "aten" / "MyKernel.cpp").write_text("// mine")
    code, out, err = run(capsys, "--vendor", "metax", "--out", str(pkg), "--force")
    assert code == 0, err
    assert "NOTES.md" in out and "build/" in out and "csrc/aten/MyKernel.cpp" in out
    assert "build/temp/HAL.o" not in out  # a directory scaffold never wrote is named once
    assert (pkg / "NOTES.md").read_text() == "my notes"
    assert (pkg / "build" / "temp" / "HAL.o").read_bytes() == b"\x7fELF"
    assert (pkg / "csrc" / "aten" / "MyKernel.cpp").read_text() == "// mine"


def test_force_refuses_an_added_file_where_the_new_render_writes_one(capsys, pkg):
    marker = json.loads((pkg / ".tdev-scaffold.json").read_text())
    victim = next(f for f in marker["files"] if f.endswith("Ops.cpp"))
    marker["files"].remove(victim)
    marker["sha256"].pop(victim, None)
    (pkg / ".tdev-scaffold.json").write_text(json.dumps(marker))
    (pkg / victim).write_text("// mine, not scaffold's")
    code, _, err = run(capsys, "--vendor", "metax", "--out", str(pkg), "--force")
    assert code == 2 and err.count("\n") == 1 and victim in err
    assert (pkg / victim).read_text() == "// mine, not scaffold's"


def test_discard_changes_replaces_edits_and_keeps_added_files(capsys, pkg):
    ops = pkg / "csrc" / "aten" / "Ops.cpp"
    original = ops.read_bytes()
    ops.write_text("// broken")
    (pkg / "NOTES.md").write_text("my notes")
    (pkg / "build").mkdir()
    (pkg / "build" / "HAL.o").write_bytes(b"\x7fELF")
    code, out, err = run(capsys, "--vendor", "metax", "--out", str(pkg), "--force",
                         "--discard-changes", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["discarded"] == ["csrc/aten/Ops.cpp"]
    assert report["kept"] == ["NOTES.md", "build/"]
    assert ops.read_bytes() == original
    assert (pkg / "NOTES.md").read_text() == "my notes"
    assert (pkg / "build" / "HAL.o").read_bytes() == b"\x7fELF"
    # the kept files are the user's, not scaffold's: the next --force keeps and names them again
    code, out, err = run(capsys, "--vendor", "metax", "--out", str(pkg), "--force")
    assert code == 0 and "NOTES.md" in out and "build/" in out


def test_discard_changes_needs_force(capsys, pkg):
    code, _, err = run(capsys, "--vendor", "metax", "--out", str(pkg), "--discard-changes")
    assert code == 2 and "--discard-changes" in err and "--force" in err


def test_caches_do_not_count_as_user_work(capsys, pkg):
    cache = pkg / "tests" / "__pycache__"
    cache.mkdir()
    (cache / "conftest.cpython-311.pyc").write_bytes(b"pyc")
    code, out, err = run(capsys, "--vendor", "metax", "--out", str(pkg), "--force")
    assert code == 0, err
    assert "replaced" in out


def test_a_file_already_equal_to_the_new_render_is_not_a_change(capsys, pkg):
    """An edit that the new render makes anyway loses nothing (e.g. an older marker)."""
    marker = json.loads((pkg / MARKER).read_text())
    marker["sha256"]["README.md"] = "0" * 64  # as if scaffold had written something else
    (pkg / MARKER).write_text(json.dumps(marker))
    code, _, err = run(capsys, "--vendor", "metax", "--out", str(pkg), "--force")
    assert code == 0, err


def test_marker_records_template_profile_and_file_digests(pkg):
    marker = json.loads((pkg / MARKER).read_text())
    assert marker["schema"] == 2
    for rel in marker["files"]:
        assert marker["sha256"][rel] == sha((pkg / rel).read_bytes()), rel
    assert sorted(marker["sha256"]) == marker["files"]
    tpl = sorted(p for p in template_root().rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert len(marker["template_sha256"]) == 64
    profile = marker["profile_info"]
    assert profile["name"] == "metax" and len(profile["sha256"]) == 64
    canonical = json.dumps(profile["resolved"], separators=(",", ":"))
    assert profile["sha256"] == sha(canonical.encode())
    assert tpl  # the digest covers a real tree


def test_marker_is_enough_to_regenerate_the_old_render(pkg):
    """What a later `--update` (3-way merge) needs as its base: the same template tree and the
    recorded profile content give back byte-identical files."""
    marker = json.loads((pkg / MARKER).read_text())
    profile = parse_profile(Path(marker["profile"]), marker["profile_info"]["resolved"])
    context = build_context(profile, marker["package"], marker["device"])
    again = render_files(template_root(), context, context.path_vars)
    assert {rel: sha(data) for rel, data in again.items()} == marker["sha256"]


def test_profile_digest_follows_the_profile_content(tmp_path):
    text = (vendors_dir() / "sim.yaml").read_text()
    assert "\ndescription: " in text
    a = tmp_path / "a.yaml"
    a.write_text(text)
    b = tmp_path / "b.yaml"
    b.write_text(text.replace("\ndescription: ", "\ndescription: changed ", 1))
    ra = scaffold(str(a), out=tmp_path / "pa")
    rb = scaffold(str(b), out=tmp_path / "pb")
    da = json.loads((ra.out / MARKER).read_text())["profile_info"]["sha256"]
    db = json.loads((rb.out / MARKER).read_text())["profile_info"]["sha256"]
    assert da != db


KILL_SCRIPT = """
import os, shutil, signal, sys
from basekit import trees
from tdev.scaffold import render, userwork
from tdev.scaffold.scaffold import scaffold

vendor, out, point = sys.argv[1:]


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def wrap(module, name, when):
    real = getattr(module, name)

    def hooked(*args, **kwargs):
        if when == "before":
            die()
        result = real(*args, **kwargs)
        die()
        return result
    setattr(module, name, hooked)


where, _, name = point.partition(":")
module = {"trees": trees, "userwork": userwork, "render": render}[name.split(".")[0]]
wrap(module, name.split(".")[1], where)
scaffold(vendor, out=out, force=True, discard_changes=True)
"""

# (where the run is killed, whether the new package is in place afterwards)
KILL_POINTS = [
    ("after:userwork.link_or_copy", False),  # carrying the user's files into the staging tree
    ("before:trees.exchange", False),
    ("after:trees.exchange", True),  # swapped; the old tree not yet deleted
]


def _state(out: Path) -> str:
    """The vendor of the package in ``out`` when every file matches its marker."""
    marker = json.loads((out / MARKER).read_text())
    for rel, digest in marker["sha256"].items():
        if sha((out / rel).read_bytes()) != digest:
            return f"{rel} does not match the marker"
    return marker["vendor"]


@pytest.mark.parametrize("point, new", KILL_POINTS)
def test_a_kill_during_force_leaves_the_old_package_or_the_new_one(tmp_path, point, new):
    out = tmp_path / "pkg"
    scaffold("metax", out=out, name="torch_chip", device="chip")
    (out / "NOTES.md").write_text("mine")
    p = subprocess.run([sys.executable, "-c", KILL_SCRIPT, "ascend", str(out), point],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert _state(out) == ("ascend" if new else "metax")
    assert (out / "NOTES.md").read_text() == "mine"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "pkg"]
    assert all(n.startswith(".pkg.") for n in leftovers), leftovers
