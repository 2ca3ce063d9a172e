"""The renderer: one template tree -> a new directory, atomically; strict about names; careful
about what it replaces."""
from __future__ import annotations

import json

import pytest

from tdev.scaffold.render import MARKER, RenderError, render_files, render_tree


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "tpl"
    (root / "__pkg__").mkdir(parents=True)
    (root / "__pkg__" / "__init__.py.j2").write_text('NAME = "{{ name }}"\n')
    (root / "README.md.j2").write_text("# {{ name }}\n{% if extra %}extra{% endif %}\n")
    (root / "only_if.txt.j2").write_text("{% if extra %}present{% endif %}\n")
    (root / "static.bin").write_bytes(b"\x00\x01raw {{ not rendered }}")
    return root


CTX = {"name": "pkg_a", "extra": False}
VARS = {"pkg": "pkg_a"}


def test_renders_paths_templates_and_copies_other_files(tree, tmp_path):
    out = tmp_path / "out"
    result = render_tree(tree, CTX, out, VARS, marker={"vendor": "x"})
    assert result.files == ["README.md", "pkg_a/__init__.py", "static.bin"]
    assert (out / "pkg_a" / "__init__.py").read_text() == 'NAME = "pkg_a"\n'
    assert (out / "static.bin").read_bytes() == b"\x00\x01raw {{ not rendered }}"
    assert not (out / "only_if.txt").exists()  # rendered empty: not written
    marker = json.loads((out / MARKER).read_text())
    assert marker["vendor"] == "x" and marker["files"] == result.files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "tpl"]  # no staging left


def test_undefined_names_are_errors_not_empty_strings(tree, tmp_path):
    with pytest.raises(RenderError, match=r"README\.md\.j2: 'extra' is undefined"):
        render_files(tree, {"name": "x"}, VARS)
    (tree / "bad.j2").write_text("{% if %}\n")
    with pytest.raises(RenderError, match=r"bad\.j2:1: template syntax error"):
        render_files(tree, CTX, VARS)


def test_a_failed_render_leaves_nothing_behind(tree, tmp_path):
    (tree / "zz.j2").write_text("{{ missing }}")
    with pytest.raises(RenderError):
        render_tree(tree, CTX, tmp_path / "out", VARS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tpl"]


def test_existing_directories(tree, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    render_tree(tree, CTX, empty, VARS)  # an empty directory is fine
    assert (empty / "README.md").is_file()
    with pytest.raises(RenderError, match="not empty .*--force"):
        render_tree(tree, CTX, empty, VARS)
    result = render_tree(tree, dict(CTX, extra=True), empty, VARS, force=True)
    assert result.replaced and (empty / "only_if.txt").read_text() == "present"
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(RenderError, match="not a tdev scaffold output"):
        render_tree(tree, CTX, precious, VARS, force=True)
    assert (precious / "thesis.tex").read_text() == "years of work"
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(RenderError, match="not a directory"):
        render_tree(tree, CTX, afile, VARS, force=True)


def test_path_variables_cannot_escape_the_output(tree, tmp_path):
    with pytest.raises(RenderError, match="'..' refused"):
        render_files(tree, CTX, {"pkg": "../evil"})


def test_the_context_is_one_frozen_value_with_each_name_once(tmp_path):
    """build_context: a frozen ScaffoldContext, read as a mapping of its fields by the
    renderer; the old repeated keys (ns = package, prefix = macro) are gone."""
    import dataclasses

    from tdev.scaffold.context import ScaffoldContext
    from tdev.scaffold.profiles import load_profile
    from tdev.scaffold.scaffold import build_context, template_root

    ctx = build_context(load_profile("metax"), "torch_r", "rdev")
    assert isinstance(ctx, ScaffoldContext)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.package = "other"  # type: ignore[misc]
    assert {"ns", "prefix", "macro"}.isdisjoint(ctx)
    assert dict(ctx)["package"] == ctx.package == "torch_r" and ctx.env_prefix == "TORCH_R"
    assert ctx.path_vars == {"pkg": "torch_r", "runtime_header": "mcr/mc_runtime.h"}
    with pytest.raises(KeyError):
        ctx["ns"]
    files = render_files(template_root(), ctx, ctx.path_vars)
    assert b"#define BACKEND_NS torch_r\n" in files["csrc/runtime/Config.h"]
    assert build_context(load_profile("metax"), "torch_metax", "metax").env_prefix == \
        load_profile("metax").env_prefix
