"""backends.conf routing: syntax, include, errors with file and line, env override, fallbacks
when FlagGems is absent, and the routes actually taken (seen through <PREFIX>_LOG_DISPATCH)."""
import shutil
from pathlib import Path

import pytest
import torch

from conftest import DEVICE, PREFIX, pkg, run_python

routing = pkg.routing
VENDOR = "vendor" if pkg.HAS_VENDOR_KERNELS else "cpu"  # what a vendor route runs on


def write(directory, name, text):
    path = directory / name
    path.write_text(text)
    return path


def test_lines_comments_and_include(tmp_path):
    base = write(tmp_path, "base.conf", "mm = cpu\nsum = vendor   # trailing comment\n")
    main = write(tmp_path, "main.conf", "# header\n\ninclude base.conf\nmm = flaggems\n")
    routes = routing.read_config(main)
    assert set(routes) == {"mm", "sum"}
    assert routes["mm"].backend == "flaggems" and routes["mm"].source == f"{main}:4"
    assert routes["sum"].backend == "vendor" and routes["sum"].source == f"{base}:2"


@pytest.mark.parametrize("text, line, message", [
    ("mm = cpu\nmm cpu\n", 2, "expected 'op = flaggems|vendor|cpu'"),
    ("mm = cpu extra\n", 1, "expected 'op = flaggems|vendor|cpu'"),
    ("\n\nmm = gpu\n", 3, "unknown backend 'gpu' for mm"),
    ("include missing.conf\n", 1, "include missing.conf: no such file"),
    ("include self.conf\n", 1, "include cycle"),
])
def test_config_errors_name_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, "self.conf", text)
    with pytest.raises(routing.RoutingError) as e:
        routing.read_config(path)
    assert str(e.value).startswith(f"{path}:{line}: ")
    assert message in str(e.value)


def test_unreadable_config(tmp_path):
    with pytest.raises(routing.RoutingError, match="nope.conf: cannot read"):
        routing.read_config(tmp_path / "nope.conf")


def test_unknown_and_core_operators_are_errors(tmp_path):
    path = write(tmp_path, "a.conf", "mm = cpu\nnot_an_op.Foo = cpu\n")
    with pytest.raises(routing.RoutingError, match=rf"a\.conf:2: unknown operator aten::not_an_op"):
        routing.check_ops(routing.read_config(path))
    path = write(tmp_path, "b.conf", "view = cpu\n")
    with pytest.raises(routing.RoutingError, match=r"b\.conf:1: view is implemented by the device"):
        routing.check_ops(routing.read_config(path))


def test_environment_overrides():
    routes = routing.env_routes({f"{PREFIX}_OP_add__Tensor": "cpu", f"{PREFIX}_OP_mm": "vendor",
                                 "UNRELATED": "x"})
    assert {op: r.backend for op, r in routes.items()} == {"add.Tensor": "cpu", "mm": "vendor"}
    assert routes["mm"].source == f"env {PREFIX}_OP_mm"
    with pytest.raises(routing.RoutingError, match=f"env {PREFIX}_OP_mm: unknown backend 'gpu'"):
        routing.env_routes({f"{PREFIX}_OP_mm": "gpu"})


def test_unavailable_backends_fall_back():
    routes = {op: routing.Route(op, b, b, "x:1") for op, b in
              [("mm", "flaggems"), ("add.Tensor", "vendor"), ("sum", "cpu")]}
    final, notes = routing.resolve(routes, None, has_vendor=True)
    assert {op: r.backend for op, r in final.items()} == {"mm": "vendor", "add.Tensor": "vendor",
                                                          "sum": "cpu"}
    assert notes == ["FlagGems is not installed: routed to flaggems, running on vendor: mm"]
    final, notes = routing.resolve(routes, {"mm": print}, has_vendor=False)
    assert {op: r.backend for op, r in final.items()} == {"mm": "flaggems", "add.Tensor": "cpu",
                                                          "sum": "cpu"}
    assert len(notes) == 1 and "add.Tensor" in notes[0]


PROGRAM = f"""
    import torch
    a = torch.tensor([1.0, 2.0], device="{DEVICE}")
    b = torch.tensor([3.0, 5.0], device="{DEVICE}")
    print("results", (a + b).tolist(), (a * b).tolist(), (a - b).tolist())
"""


def test_routes_follow_the_config_and_the_environment_override(tmp_path):
    conf = write(tmp_path, "r.conf", "add.Tensor = cpu\nmul.Tensor = vendor\nsub.Tensor = vendor\n")
    r = run_python(PROGRAM, env={f"{PREFIX}_BACKEND_CONFIG": str(conf),
                                 f"{PREFIX}_OP_sub__Tensor": "cpu",
                                 f"{PREFIX}_LOG_DISPATCH": "1"})
    assert r.returncode == 0, r.stderr
    assert "results [4.0, 7.0] [3.0, 10.0] [-2.0, -3.0]" in r.stdout
    err = r.stderr
    assert f"route add.Tensor -> cpu ({conf}:1)" in err
    assert f"route mul.Tensor -> {VENDOR} ({conf}:2" in err
    assert f"route sub.Tensor -> cpu (env {PREFIX}_OP_sub__Tensor)" in err
    assert "dispatch add.Tensor -> cpu" in err
    assert f"dispatch mul.Tensor -> {VENDOR}" in err
    assert "dispatch sub.Tensor -> cpu" in err


def test_without_log_dispatch_nothing_is_printed(tmp_path):
    conf = write(tmp_path, "r.conf", "add.Tensor = cpu\n")
    r = run_python(PROGRAM, env={f"{PREFIX}_BACKEND_CONFIG": str(conf)})
    assert r.returncode == 0, r.stderr
    assert "dispatch" not in r.stderr and "route " not in r.stderr


def test_an_invalid_config_fails_at_import_with_file_and_line(tmp_path):
    conf = write(tmp_path, "bad.conf", "mm = cpu\nthis is not a route\n")
    r = run_python("import torch", env={f"{PREFIX}_BACKEND_CONFIG": str(conf)})
    assert r.returncode != 0
    assert f"{conf}:2: expected 'op = flaggems|vendor|cpu'" in r.stderr
    r = run_python("import torch", env={f"{PREFIX}_BACKEND_CONFIG": str(tmp_path / "gone.conf")})
    assert r.returncode != 0 and "gone.conf: cannot read" in r.stderr


def one_line_refusal(r) -> str:
    """What `import torch` printed for a package that cannot load: one line, exit status 2."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"{pkg.__name__}: "), lines[0]
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("how", ["env", "file"])
def test_a_bad_route_setting_is_one_line_at_import_torch(tmp_path, how):
    if how == "env":
        env = {f"{PREFIX}_OP_add__Tensor": "gpu"}
        where = f"env {PREFIX}_OP_add__Tensor: unknown backend 'gpu'"
    else:
        conf = write(tmp_path, "bad.conf", "mm = cpu\nadd.Tensor = gpu\n")
        env = {f"{PREFIX}_BACKEND_CONFIG": str(conf)}
        where = f"{conf}:2: unknown backend 'gpu' for add.Tensor"
    line = one_line_refusal(run_python("import torch", env=env))
    assert where in line
    # imported by name, the package raises the routing error itself
    r = run_python(f"import torch, {pkg.__name__}",
                   env={**env, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 1 and "RoutingError" in r.stderr and where in r.stderr, r.stderr
    assert "circular import" not in r.stderr


def test_import_torch_in_the_package_source_folder_says_what_is_wrong(tmp_path):
    """A package installed from its source folder, and Python started in that folder: the
    folder's package (sources, no built _C) is found before the installed one."""
    source = tmp_path / "src"
    shutil.copytree(Path(pkg.__file__).parent, source / pkg.__name__,
                    ignore=shutil.ignore_patterns("_C*.so", "__pycache__"))
    (source / "setup.py").write_text("raise SystemExit('not run here')\n")
    line = one_line_refusal(run_python("import torch", cwd=source))
    assert f"{source / pkg.__name__} is the package's source folder" in line
    assert "circular import" not in line


def test_the_shipped_routes_do_not_warn_about_flaggems_at_import(tmp_path):
    code = f"""
        import warnings
        warnings.simplefilter("always")
        import torch, {pkg.__name__} as pkg
        print(sorted(pkg.get_op_routes()))
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "'mm'" in r.stdout  # the shipped routes were applied
    assert "FlagGems is not installed" not in r.stderr, r.stderr
    assert "routes fall back" not in r.stderr, r.stderr


def test_flaggems_routes_fall_back_with_one_warning_when_flaggems_is_absent(tmp_path):
    conf = write(tmp_path, "f.conf", "mm = flaggems\nbmm = flaggems\n")
    code = f"""
        import importlib.util, warnings
        warnings.simplefilter("always")
        assert importlib.util.find_spec("flag_gems") is None, "FlagGems is installed here"
        import {pkg.__name__} as pkg
        print(sorted((op, r.backend) for op, r in pkg.get_op_routes().items()))
        print(pkg.is_flaggems_enabled())
    """
    r = run_python(code, env={f"{PREFIX}_BACKEND_CONFIG": str(conf),
                              "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    if "FlagGems is installed here" in r.stderr:
        pytest.skip("FlagGems is installed")
    assert r.returncode == 0, r.stderr
    assert f"[('bmm', '{VENDOR}'), ('mm', '{VENDOR}')]" in r.stdout
    assert "False" in r.stdout
    warnings = [line for line in r.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warnings) == 1, r.stderr
    assert f"FlagGems is not installed: routed to flaggems, running on {VENDOR}: bmm, mm" in warnings[0]


FAKE_FLAGGEMS = '''
CALLS = []

def add(a, b, alpha=1):
    CALLS.append("add.Tensor")
    return (a.cpu() + alpha * b.cpu()).to(a.device)

_FULL_CONFIG = (("add.Tensor", add),)
'''


def test_flaggems_routes_reach_flaggems_kernels(tmp_path):
    (tmp_path / "flag_gems").mkdir()
    write(tmp_path / "flag_gems", "__init__.py", FAKE_FLAGGEMS)
    conf = write(tmp_path, "g.conf", "add.Tensor = flaggems\n")
    code = f"""
        import torch, flag_gems, {pkg.__name__} as pkg
        x = torch.ones(3, device="{DEVICE}")
        y = x + x
        print("sum", y.sum().item(), y.device.type, flag_gems.CALLS, pkg.is_flaggems_enabled())
    """
    r = run_python(code, env={f"{PREFIX}_BACKEND_CONFIG": str(conf), f"{PREFIX}_LOG_DISPATCH": "1"},
                   extra_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"sum 6.0 {DEVICE} ['add.Tensor'] True" in r.stdout
    assert "dispatch add.Tensor -> flaggems" in r.stderr


def test_routes_can_be_replaced_at_run_time():
    a = torch.tensor([1.0, 2.0], device=DEVICE)
    before = routing.current_routes().get("sub.Tensor")
    try:
        for backend in ("cpu", "vendor", "cpu"):
            r = routing.set_route("sub.Tensor", backend, source="test")
            assert r.backend == (VENDOR if backend == "vendor" else "cpu")
            assert routing.current_routes()["sub.Tensor"] == r
            assert (a - a * 3).tolist() == [-2.0, -4.0]
        assert routing.available_backends("sub.Tensor")[-1] == "cpu"
        assert ("vendor" in routing.available_backends("sub.Tensor")) == pkg.HAS_VENDOR_KERNELS
        with pytest.raises(routing.RoutingError, match="unknown backend 'gpu'"):
            routing.set_route("sub.Tensor", "gpu")
        routing.clear_route("sub.Tensor")
        assert "sub.Tensor" not in routing.current_routes()
        assert (a - a).tolist() == [0.0, 0.0]
    finally:
        if before is not None:
            routing.set_route("sub.Tensor", before.backend, before.source)


def test_a_replaced_route_is_the_one_taken(tmp_path):
    code = f"""
        import torch, {pkg.__name__} as pkg
        a = torch.tensor([1.0, 2.0], device="{DEVICE}")
        pkg.routing.set_route("add.Tensor", "cpu")
        print("one", (a + a).tolist())
        pkg.routing.set_route("add.Tensor", "vendor")
        print("two", (a + a).tolist())
    """
    r = run_python(code, env={f"{PREFIX}_LOG_DISPATCH": "1"})
    assert r.returncode == 0, r.stderr
    assert "one [2.0, 4.0]" in r.stdout and "two [2.0, 4.0]" in r.stdout
    log = [line for line in r.stderr.splitlines() if "dispatch add.Tensor" in line]
    assert log[-2:] == [f"[{pkg.__name__}] dispatch add.Tensor -> cpu",
                        f"[{pkg.__name__}] dispatch add.Tensor -> {VENDOR}"]
