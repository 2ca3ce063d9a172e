"""`tdev scaffold --update DIR`: a vendor's edits to a generated package (a HAL function, a route,
an added test) survive a template change, which is applied; the same lines changed both ways give
a conflict file and exit 1 with the vendor's lines kept; `--force` on the edited package refuses
and names the files. A copy of templates/ is pointed at with $TDEV_TEMPLATES; no build needed."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tdev.cli.main import main
from tdev.scaffold.scaffold import TEMPLATES_ENV, scaffold, template_root
from tdev.scaffold.update import (ADDED, CONFLICT, DELETED, EDITED, KEPT, MERGED, REMOVED,
                                  UNCHANGED, UPDATED, merge_file)
from tdev.scaffold.userwork import BASE, MARKER, sha256

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane

HAL = "csrc/runtime/HAL.cpp"
ROUTES = "torch_sim/backends.conf"
VENDOR_LINE = "  // acme: retried twice on our boards\n"


def run(capsys, *argv):
    code = main(["scaffold", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def tpl(tmp_path, monkeypatch) -> Path:
    """A copy of templates/ that the scaffold renders from."""
    copy = tmp_path / "templates"
    shutil.copytree(template_root().parent, copy,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    monkeypatch.setenv(TEMPLATES_ENV, str(copy))
    return copy


@pytest.fixture
def pkg(tmp_path, tpl) -> Path:
    out = tmp_path / "torch_sim"
    scaffold("sim", out=out)
    return out


def edit_hal_function(pkg: Path) -> str:
    """Adds a line at the top of the body of the first top-level function of HAL.cpp after its
    anonymous namespace; returns that function's signature line."""
    path = pkg / HAL
    lines = path.read_text().splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("}  // namespace"))
    at = next(i for i in range(start + 1, len(lines))
              if re.match(r"[A-Za-z].*\)( noexcept)? \{$", lines[i].rstrip("\n")))
    lines.insert(at + 1, VENDOR_LINE)
    path.write_text("".join(lines))
    return lines[at]


def edit_route(pkg: Path) -> str:
    """Routes the first operator of backends.conf to another backend; returns the new line."""
    path = pkg / ROUTES
    text = path.read_text()
    m = re.search(r"^(\S+) = (\w+)$", text, re.M)
    assert m, "backends.conf routes no operator"
    line = f"{m.group(1)} = {'cpu' if m.group(2) != 'cpu' else 'vendor'}"
    path.write_text(text[:m.start()] + line + text[m.end():])
    return line


def append_to_template(tpl: Path, rel: str, line: str) -> None:
    path = tpl / "backend" / rel
    path.write_text(path.read_text() + line)


def test_update_keeps_the_vendors_edits_and_applies_the_template_change(capsys, pkg, tpl):
    signature = edit_hal_function(pkg)
    route = edit_route(pkg)
    (pkg / "tests" / "test_acme.py").write_text("def test_acme():\n    assert True\n")
    append_to_template(tpl, "csrc/runtime/HAL.cpp.j2", "// HAL template v2\n")
    append_to_template(tpl, "README.md.j2", "Template v2.\n")
    (tpl / "backend" / "tests" / "test_upstream.py").write_text("def test_new():\n    pass\n")

    code, out, err = run(capsys, "--update", str(pkg))
    assert code == 0, err
    hal = (pkg / HAL).read_text()
    assert signature + VENDOR_LINE in hal  # the vendor's edit, in place
    assert hal.endswith("// HAL template v2\n")  # the template change, merged in
    assert re.search(rf"^{re.escape(route)}$", (pkg / ROUTES).read_text(), re.M)
    assert (pkg / "tests" / "test_acme.py").read_text().startswith("def test_acme")
    assert (pkg / "README.md").read_text().endswith("Template v2.\n")
    assert (pkg / "tests" / "test_upstream.py").is_file()
    assert f"merged with your edits: {HAL}" in out and f"your edits kept: {ROUTES}" in out
    assert "added: tests/test_upstream.py" in out and "tests/test_acme.py" in out
    # the base is now the new render, recorded with its sha256: a second update changes nothing
    marker = json.loads((pkg / MARKER).read_text())
    base = (pkg / BASE / HAL).read_bytes()
    assert base.endswith(b"// HAL template v2\n") and VENDOR_LINE.encode() not in base
    assert marker["sha256"][HAL] == sha256(base) and "tests/test_upstream.py" in marker["files"]
    code, out, err = run(capsys, "--update", str(pkg), "--json")
    assert code == 0, err
    assert {f["status"] for f in json.loads(out)["files"]} == {"edited"}  # nothing rewritten
    assert VENDOR_LINE in (pkg / HAL).read_text()


def test_a_conflicting_edit_writes_a_conflict_file_keeps_the_vendors_lines_and_exits_1(
        capsys, pkg, tpl):
    hal = pkg / HAL
    lines = hal.read_text().splitlines(keepends=True)
    lines[0] = "// ACME's own HAL header\n"
    hal.write_text("".join(lines))
    template = tpl / "backend" / "csrc/runtime/HAL.cpp.j2"
    text = template.read_text()
    first = text.index("// {{") if "// {{" in text else 0  # the header comment's first line
    template.write_text(text[:first] + "// HAL header v2\n" + text[first:] + "// HAL end v2\n")

    code, out, err = run(capsys, "--update", str(pkg))
    assert code == 1
    assert f"{HAL} (see {HAL}.conflict)" in err
    merged = hal.read_text()
    assert merged.startswith("// ACME's own HAL header\n")  # the vendor's line, kept
    assert merged.endswith("// HAL end v2\n")  # the change that does not conflict, applied
    conflict = (pkg / f"{HAL}.conflict").read_text()
    assert "<<<<<<< yours" in conflict and "// ACME's own HAL header" in conflict
    assert "// HAL header v2" in conflict and ">>>>>>> new render" in conflict
    # unresolved conflicts stop the next update; once resolved (file deleted) it runs again
    code, _, err = run(capsys, "--update", str(pkg))
    assert code == 2 and f"{HAL}.conflict" in err and err.count("\n") == 1
    (pkg / f"{HAL}.conflict").unlink()
    code, _, err = run(capsys, "--update", str(pkg))
    assert code == 0, err
    assert hal.read_text().startswith("// ACME's own HAL header\n")


def test_force_on_an_updated_edited_package_refuses_and_names_the_files(capsys, pkg, tpl):
    edit_hal_function(pkg)
    edit_route(pkg)
    append_to_template(tpl, "csrc/runtime/HAL.cpp.j2", "// HAL template v2\n")
    assert run(capsys, "--update", str(pkg))[0] == 0
    code, _, err = run(capsys, "--vendor", "sim", "--out", str(pkg), "--force")
    assert code == 2 and err.count("\n") == 1
    assert HAL in err and ROUTES in err
    assert VENDOR_LINE in (pkg / HAL).read_text()


def test_force_discarding_changes_rewrites_the_base_copies(capsys, pkg, tpl):
    edit_hal_function(pkg)
    append_to_template(tpl, "csrc/runtime/HAL.cpp.j2", "// HAL template v2\n")
    code, _, err = run(capsys, "--vendor", "sim", "--out", str(pkg), "--force",
                       "--discard-changes")
    assert code == 0, err
    marker = json.loads((pkg / MARKER).read_text())
    for rel in marker["files"]:
        assert (pkg / BASE / rel).read_bytes() == (pkg / rel).read_bytes()
        assert sha256((pkg / rel).read_bytes()) == marker["sha256"][rel]


def test_without_the_base_copies_an_edited_changed_file_is_a_whole_file_conflict(
        capsys, pkg, tpl):
    """The base copies gone (and the templates changed): no vendor line is lost; unedited files
    are still updated (their sha256 matches the marker)."""
    edit_hal_function(pkg)
    shutil.rmtree(pkg / ".tdev-scaffold")
    append_to_template(tpl, "csrc/runtime/HAL.cpp.j2", "// HAL template v2\n")
    append_to_template(tpl, "README.md.j2", "Template v2.\n")
    before = (pkg / HAL).read_text()
    code, _, err = run(capsys, "--update", str(pkg))
    assert code == 1 and HAL in err
    assert (pkg / HAL).read_text() == before
    assert (pkg / "README.md").read_text().endswith("Template v2.\n")
    assert "// HAL template v2" in (pkg / f"{HAL}.conflict").read_text()


def test_removed_templates_remove_unedited_files_and_keep_edited_ones(capsys, pkg, tpl):
    tests = sorted(p for p in (tpl / "backend" / "tests").glob("test_*") if p.is_file())
    gone, edited = tests[0], tests[1]
    out_edited = pkg / "tests" / edited.name.removesuffix(".j2")
    out_edited.write_text(out_edited.read_text() + "# acme\n")
    gone.unlink()
    edited.unlink()
    code, out, err = run(capsys, "--update", str(pkg))
    assert code == 0, err
    assert not (pkg / "tests" / gone.name.removesuffix(".j2")).exists()
    assert out_edited.read_text().endswith("# acme\n")
    assert f"kept (you edited them): tests/{out_edited.name}" in out
    marker = json.loads((pkg / MARKER).read_text())
    assert f"tests/{out_edited.name}" not in marker["files"]  # the vendor's file now


def test_update_bad_input_is_one_line_and_exit_2(capsys, tmp_path, pkg):
    for argv, message in ((["--update", str(tmp_path / "nope")], "not a directory"),
                          (["--update", str(tmp_path)], "not a tdev scaffold output"),
                          (["--update", str(pkg), "--force"], "--force does not apply")):
        code, _, err = run(capsys, *argv)
        assert code == 2 and message in err and err.count("\n") == 1, (argv, err)


@pytest.mark.parametrize("base, yours, new, generated, status, content", [
    (b"a\n", b"a\n", b"a\n", True, UNCHANGED, b"a\n"),
    (b"a\n", b"a\n", b"b\n", True, UPDATED, b"b\n"),
    (b"a\n", b"y\n", b"a\n", True, EDITED, b"y\n"),
    (b"a\nb\nc\n", b"y\nb\nc\n", b"a\nb\nz\n", True, MERGED, b"y\nb\nz\n"),
    (b"a\n", b"y\n", b"z\n", True, CONFLICT, b"y\n"),
    (None, b"y\n", b"z\n", False, CONFLICT, b"y\n"),  # a file of yours where a new one goes
    (None, None, b"z\n", False, ADDED, b"z\n"),
    (b"a\n", b"a\n", None, True, REMOVED, None),
    (b"a\n", b"y\n", None, True, KEPT, b"y\n"),
    (b"a\n", None, b"a\n", True, DELETED, None),
    (b"a\n", None, b"z\n", True, CONFLICT, None),
])
def test_merge_file_outcomes(base, yours, new, generated, status, content):
    m = merge_file(base, yours, new, generated)
    assert (m.status, m.content) == (status, content)
    assert bool(m.conflicts) == (status == CONFLICT)
