"""templates/backend/template.yaml: which files a profile gets (only_if), the route backends and
the core operators, read by tdev.scaffold.templateconf; a bad one is one line naming the file."""
from __future__ import annotations

from pathlib import Path

import pytest

from basekit.errors import InputError
from tdev.scaffold.render import render_files
from tdev.scaffold.scaffold import build_context, template_root
from tdev.scaffold.profiles import load_profile
from tdev.scaffold.templateconf import load_template_conf


def tree(root: Path, conf: str, files: dict[str, str]) -> Path:
    for rel, text in {"template.yaml": conf, **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


CONF = """\
route_backends: [fast, slow]
core_ops: ops/core.yaml
only_if:
  extra/*: flag
  gated.txt.j2: flag and level > 1
"""
FILES = {"ops/core.yaml": "view: view\nset_.source_Storage: set_source_storage\n",
         "always.txt": "x\n", "gated.txt.j2": "{{ level }}\n", "extra/a.txt": "a\n",
         "extra/deeper/b.txt": "b\n"}


@pytest.mark.parametrize("flag, level, expected", [
    (True, 2, ["always.txt", "extra/a.txt", "extra/deeper/b.txt", "gated.txt"]),
    (True, 1, ["always.txt", "extra/a.txt", "extra/deeper/b.txt"]),
    (False, 5, ["always.txt", "extra/deeper/b.txt"]),  # "*" stays within one directory
])
def test_only_if_decides_which_files_are_rendered_and_the_conf_is_not_copied(
        tmp_path, flag, level, expected):
    root = tree(tmp_path / "t", CONF, FILES)
    conf = load_template_conf(root)
    assert conf.route_backends == ("fast", "slow")
    assert conf.core_ops == (("view", "view"), ("set_.source_Storage", "set_source_storage"))
    files = render_files(root, {"flag": flag, "level": level}, {})
    assert sorted(files) == expected


@pytest.mark.parametrize("conf, files, message", [
    (CONF.replace("extra/*", "extras/*"), FILES, "only_if.extras/*: matches no file of the tree"),
    (CONF, {**FILES, "ops/core.yaml": "view: 'not an identifier'\n"},
     "view: 'not an identifier' is not a C identifier"),
    (CONF, {**FILES, "ops/core.yaml": "- view\n"}, "expected a mapping of operator: C++ kernel"),
    (CONF.replace("ops/core.yaml", "../core.yaml"), FILES, "core_ops: '../core.yaml' is not"),
    (CONF.replace("route_backends: [fast, slow]", "route_backends: [fast, 'a b']"), FILES,
     "route_backends: 'a b' is not a C identifier"),
])
def test_a_bad_template_conf_is_one_line_naming_the_file(tmp_path, conf, files, message):
    root = tree(tmp_path / "t", conf, files)
    with pytest.raises(InputError) as e:
        load_template_conf(root)
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert str(root) in str(e.value)


def test_a_condition_naming_no_context_value_is_an_error_not_false(tmp_path):
    root = tree(tmp_path / "t", CONF.replace("flag and level > 1", "flga"), FILES)
    with pytest.raises(InputError, match=r"template.yaml: only_if.gated.txt.j2: 'flga': .*flga"):
        render_files(root, {"flag": True, "level": 2}, {})


def test_the_shipped_tree_gives_each_profile_its_files():
    """sim bundles the simulator and boxes vendor kernels; ascend has a native collective
    library and no vendor kernels; the conf and its data files reach no package."""
    conf = load_template_conf(template_root())
    assert conf.route_backends == ("flaggems", "vendor", "cpu")
    assert ("native_dropout", "native_dropout") in conf.core_ops
    for vendor, present, absent in (
            ("sim", ["csrc/simulator/sim_memory.cpp", "csrc/aten/Boxing.cpp"],
             ["csrc/distributed/Collectives.cpp"]),
            ("ascend", ["csrc/distributed/Collectives.cpp", "torch_ascend/distributed.py"],
             ["csrc/simulator/sim_memory.cpp", "csrc/aten/Boxing.cpp"])):
        profile = load_profile(vendor)
        ctx = build_context(profile, profile.package, profile.device)
        files = render_files(template_root(), ctx, ctx.path_vars)
        assert set(present) <= set(files) and not set(absent) & set(files), vendor
        assert "template.yaml" not in files and "csrc/aten/core_ops.yaml" not in files
