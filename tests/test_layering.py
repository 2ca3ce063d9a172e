"""The layering of the house (issue 14, "Layering" and "Two readers of one file"):

* ``wrapped_cmake``, the generic CMake wrapper, imports nothing from ``tdev``: read from the
  import graph (every ``import``/``from`` of every module, those inside functions included, and
  ``importlib.import_module``/``__import__`` calls with a literal name), not by convention;
* the generic layer tdev builds on (``basekit``: errors, docread, fs, globs, diff3)
  import nothing of the layers above them, and bad input has one error base;
* one manifest model: extract (replacing a tree it wrote), ``tdev extract --verify`` and the
  standalone build all read MANIFEST.json through ``tdev.extract.manifest.load_manifest``;
* the build of an extraction is found through the ``wrapped_cmake.sources`` entry point, and
  without it the same command line says what is missing in one line.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import tdev.extract.manifest as manifest_module
from tdev.cli.main import main as tdev_main
from wrapped_cmake import sources
from wrapped_cmake.cli import main as wcmake_main

from support.extract import make_tree

REPO = Path(__file__).resolve().parents[1]
WRAPPED_CMAKE = REPO / "wrapped_cmake"
TDEV = REPO / "tools" / "tdev"


def module_name(path: Path, root: Path, package: str) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [package, *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, module: str) -> set[str]:
    """Every module name ``path`` imports (relative imports resolved), wherever the import
    statement stands, plus literal names given to ``importlib.import_module``/``__import__``."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[:len(base) - node.level + (1 if is_pkg else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)  # `from tdev import x`
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def graph(root: Path, package: str) -> dict[str, set[str]]:
    return {module_name(p, root, package): imports_of(p, module_name(p, root, package))
            for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_import_graph_reader_sees_imports_inside_functions(tmp_path):
    """The reader itself: an import hidden in a function, a relative one and import_module."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text("def f():\n    from tdev.patch import series\n"
                              "    from . import other\n"
                              "    import importlib; importlib.import_module('tdev.globs')\n")
    got = graph(pkg, "pkg")["pkg.m"]
    assert {"tdev.patch", "tdev.patch.series", "pkg", "pkg.other", "tdev.globs"} <= got


def test_wrapped_cmake_imports_nothing_from_tdev():
    g = graph(WRAPPED_CMAKE, "wrapped_cmake")
    assert len(g) >= 15 and "wrapped_cmake.cli" in g and "wrapped_cmake.sources" in g
    offenders = {m: sorted(i for i in imps if within(i, "tdev")) for m, imps in g.items()}
    assert not {m: i for m, i in offenders.items() if i}


def test_generic_layers_import_nothing_above_them():
    """basekit (errors, docread, fs, globs, diff3) imports neither tdev nor wrapped_cmake."""
    g = graph(REPO / "basekit", "basekit")
    assert {"basekit.errors", "basekit.docread", "basekit.fs", "basekit.globs", "basekit.diff3"} <= set(g)
    for m, imps in g.items():
        above = sorted(i for i in imps if within(i, "tdev") or within(i, "wrapped_cmake"))
        assert not above, f"{m} imports {above}"


def test_one_error_base_for_bad_input():
    from basekit.docread import BadInput
    from basekit.errors import InputError
    from wrapped_cmake.errors import InputError as WrappedInputError
    assert BadInput is InputError is WrappedInputError


def test_no_second_manifest_reader():
    """wrapped_cmake defines no manifest reader; in tdev only tdev.extract.manifest has one."""
    for root, package in ((WRAPPED_CMAKE, "wrapped_cmake"), (TDEV, "tdev")):
        for p in sorted(root.rglob("*.py")):
            tree = ast.parse(p.read_text(), str(p))
            readers = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                       and "manifest" in n.name and n.name.startswith(("load", "read", "parse"))]
            if module_name(p, root, package) != "tdev.extract.manifest":
                assert not readers, f"{p}: {readers}"


@pytest.fixture
def counted_loader(monkeypatch):
    """``load_manifest`` wrapped: the directories it was called for, in order."""
    calls: list[Path] = []
    real = manifest_module.load_manifest

    def recording(out):
        calls.append(Path(out).resolve())
        return real(out)

    monkeypatch.setattr(manifest_module, "load_manifest", recording)
    return calls


def test_extract_verify_and_the_build_read_the_one_manifest_model(tmp_path, counted_loader, capsys):
    # --json: extract_cmd.render binds sys.stdout at import, which pytest's capture replaces
    tree = make_tree(tmp_path / "pytorch")
    ext = tmp_path / "third_device" / "torch_cuda"
    assert tdev_main(["extract", str(tree), "--out", str(ext), "--json"]) == 0
    assert counted_loader == []  # a fresh output: nothing to read yet

    def read_by(step) -> None:
        before = len(counted_loader)
        step()
        assert counted_loader[before:] and set(counted_loader[before:]) == {ext.resolve()}

    # extract again: replacing a tree it wrote reads (and checks) that tree's manifest
    read_by(lambda: tdev_main(["extract", str(tree), "--out", str(ext), "--json"]) == 0 or pytest.fail())
    read_by(lambda: tdev_main(["extract", "--verify", "--out", str(ext)]) == 0 or pytest.fail())
    capsys.readouterr()
    # the build, through wrapped-cmake's command line and the source builder it finds
    read_by(lambda: wcmake_main(["build", "--backend", "cuda", "--source", str(ext), "--plan",
                                 "--json"]) == 0 or pytest.fail())
    report = json.loads(capsys.readouterr().out)
    assert report["manifest"] == str(ext.resolve() / "MANIFEST.json")


def test_the_build_is_found_through_the_entry_point():
    found = [b for b in sources.installed() if b.name == "torch_cuda"]
    assert found and found[0].backend == "cuda"
    assert type(found[0]).__module__ == "tdev.cli.build_cmd"


def test_without_a_source_builder_an_extraction_says_so(tmp_path, monkeypatch, capsys):
    tree = make_tree(tmp_path / "pytorch")
    ext = tmp_path / "torch_cuda"
    assert tdev_main(["extract", str(tree), "--out", str(ext), "--json"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(sources, "registered", lambda: [])  # as without tdev installed
    assert wcmake_main(["build", "--backend", "cuda", "--source", str(ext)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no source builder is installed" in err and str(ext) in err
    with pytest.raises(SystemExit) as e:  # --plan is the builder's own option: none without it
        wcmake_main(["build", "--backend", "cuda", "--source", str(ext), "--plan"])
    assert e.value.code == 2 and "unrecognized arguments: --plan" in capsys.readouterr().err


def test_a_builder_named_in_the_environment_without_installed_metadata(monkeypatch):
    """A checkout on PYTHONPATH (the GPU machine has no pip metadata): $WCMAKE_SOURCES names it."""
    monkeypatch.setattr(sources, "distributions", lambda: [])
    monkeypatch.delenv(sources.ENV, raising=False)
    assert sources.installed() == []
    monkeypatch.setenv(sources.ENV, "tdev.cli.build_cmd:SOURCE")
    assert [b.name for b in sources.installed()] == ["torch_cuda"]
    monkeypatch.setenv(sources.ENV, "no_such_module:SOURCE")
    with pytest.raises(sources.InputError, match="WCMAKE_SOURCES: no_such_module:SOURCE cannot"):
        sources.installed()


def test_importing_every_wrapped_cmake_module_loads_no_tdev():
    """The same at run time: every module of wrapped_cmake imported in a fresh process."""
    import subprocess
    import sys
    names = sorted(n for n in graph(WRAPPED_CMAKE, "wrapped_cmake") if n != "wrapped_cmake.__main__")
    code = ("import importlib, sys\n"
            f"for n in {names!r}:\n    importlib.import_module(n)\n"
            "print(sorted(m for m in sys.modules if m == 'tdev' or m.startswith('tdev.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ---- the generic layer does not know its client --------------------------------------------
# names of tdev (its package, commands, options, variables, the extraction's markers) that
# wrapped_cmake, a CMake wrapper any project may use, must not contain: a source builder
# registers its own options (wrapped_cmake.sources). Not listed: PyTorch's own names
# (torch_cuda, TORCH_CUDA_ARCH_LIST), which the cuda profile needs.
CLIENT_NAMES = ("tdev", "MANIFEST.json", "standalone", "extraction", "--plan", "--targets")


def test_wrapped_cmake_names_no_tdev_option_marker_or_package():
    files = [p for p in sorted(WRAPPED_CMAKE.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    assert any(p.suffix == ".yaml" for p in files) and any(p.name == "cli.py" for p in files)
    found = [f"{p.relative_to(REPO)}:{n}: {name}"
             for p in files for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
             for name in CLIENT_NAMES if name.lower() in line.lower()]
    assert not found, "\n".join(found)


# ---- nothing shipped exists for the tests' sake ---------------------------------------------
SHIPPED = {"basekit": REPO / "basekit", "wrapped_cmake": WRAPPED_CMAKE, "tdev": TDEV}
# shipped modules no entry point, command or generated package imports, and why each ships
NOT_IMPORTED = {
    "tdev.data": "the shipped YAML (rules, layout, link-check data), read through importlib.resources",
    "tdev.standalone.stage1_scripts.torchgen_driver": "run by the stage-1 python, never imported by tdev",
    "tdev.standalone.cudac": "the real _CUDAC's sources and CMake arguments, for the overlay's "
                             "cudac/CMakeLists.txt; no command builds it yet (tests/test_cudac_real.py does)",
}


def shipped_graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for package, root in SHIPPED.items():
        g.update(graph(root, package))
    return g


def product_roots(modules: set[str]) -> set[str]:
    """Where the product starts: the console scripts and entry points (pyproject.toml), every
    `tdev` command module, `python -m` modules, and what a generated package imports."""
    import re
    import tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    targets = list(project["scripts"].values())
    targets += [v for group in project.get("entry-points", {}).values() for v in group.values()]
    roots = {t.split(":")[0] for t in targets}
    from tdev.cli.main import COMMANDS
    roots |= {f"tdev.cli.{m}" for m in COMMANDS.values()}  # imported by name in tdev.cli.main
    for package, root in SHIPPED.items():
        for p in root.rglob("*.py"):
            if p.name == "__main__.py" or re.search(r"__name__ == [\"']__main__[\"']", p.read_text()):
                roots.add(module_name(p, root, package))
    for p in (REPO / "templates").rglob("*"):
        if p.is_file():
            roots |= set(re.findall(r"(?m)^\s*(?:from|import)\s+((?:tdev|wrapped_cmake|basekit)[\w.]*)",
                                    p.read_text(errors="replace")))
    return roots


def reachable(g: dict[str, set[str]], roots: set[str]) -> set[str]:
    def module(name: str) -> str | None:  # `from a.b import c`: c may be a name, not a module
        parts = name.split(".")
        return next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in g), None)

    seen: set[str] = set()
    todo = [m for m in map(module, roots) if m]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += [".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 1)]  # its packages
            todo += [t for t in map(module, g[m]) if t]
    return seen


def test_the_reachability_reader_follows_packages_names_and_stops(tmp_path):
    g = {"a": set(), "a.cli": {"a.core.run"}, "a.core": set(), "a.core.run": {"b"}, "b": set(),
         "a.only_tests": set()}
    assert reachable(g, {"a.cli"}) == {"a", "a.cli", "a.core", "a.core.run", "b"}


def test_nothing_shipped_is_imported_only_by_tests_or_benchmarks():
    """Every module of basekit, wrapped_cmake and tdev is reached from the product (its entry
    points, commands and generated packages) through the import graph, or is listed above
    with the reason it ships; test support lives in tests/support."""
    g = shipped_graph()
    assert {"tdev.cli.main", "wrapped_cmake.cli", "basekit.errors"} <= set(g)
    roots = product_roots(set(g))
    assert {"tdev.cli.main", "wrapped_cmake.cli", "tdev.cli.scan_cmd", "wrapped_cmake.extension"} <= roots
    unreached = set(g) - reachable(g, roots)
    users = {m: sorted(str(p.relative_to(REPO)) for p in sorted([*REPO.glob("tests/**/*.py"),
                                                                   *REPO.glob("benchmarks/**/*.py")])
                      if m in imports_of(p, "tests"))
             for m in unreached - set(NOT_IMPORTED)}
    assert not users, "shipped but imported only by tests or benchmarks (or nothing): " + \
        "; ".join(f"{m} <- {', '.join(u) or 'nothing'}" for m, u in sorted(users.items()))
    assert set(NOT_IMPORTED) <= set(g) and not set(NOT_IMPORTED) & (set(g) - unreached), \
        "an exception that is no longer one: take it out of NOT_IMPORTED"
