"""`tdev route tune` and `tdev route record` against the sim package, built for real: routes
switched and timed on the device (vendor and cpu there; FlagGems reported unavailable), the
medians, the choice, the backends.conf written and read back by the package itself."""
from __future__ import annotations

import json

import pytest

from tdev.route.cases import load_cases

from support.route import SMALL_CASES, run_code, run_tdev, sim_python  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tuned(sim_python, tmp_path_factory):  # noqa: F811
    d = tmp_path_factory.mktemp("tune")
    (d / "small.yaml").write_text(SMALL_CASES)
    p = run_tdev(sim_python, "route", "tune", "--package", "torch_sim", "--shapes", "small.yaml",
                 "--backends", "vendor,cpu,flaggems", "--repeat", "4", "--rounds", "2",
                 "--out", "tuned.conf", "--json", cwd=d)
    assert p.returncode == 0, p.stderr[-4000:]
    return d, json.loads(p.stdout)


def test_every_case_is_timed_on_every_available_backend(tuned):
    _, result = tuned
    assert result["package"] == "torch_sim" and result["device"] == "sim:0"
    assert result["timer"] == "events"  # the sim's events time its streams
    rows = result["measurements"]
    assert [(m["op"], m["backend"]) for m in rows] == [
        (op, b) for op in ("add.Tensor", "_softmax", "mm") for b in ("vendor", "cpu", "flaggems")]
    for m in rows:
        if m["backend"] == "flaggems":
            assert m["error"] == "FlagGems is not installed or has no kernel for it"
        else:
            assert m["method"] == "events" and m["median_us"] > 0
            assert len(m["samples_us"]) == 2 * 4  # rounds x batches
            assert min(m["samples_us"]) <= m["median_us"] <= max(m["samples_us"])


def test_the_fastest_backend_is_chosen_from_the_weighted_medians(tuned):
    _, result = tuned
    for op, choice in result["choices"].items():
        mine = [m for m in result["measurements"] if m["op"] == op and "median_us" in m]
        totals = {}
        for m in mine:
            totals[m["backend"]] = totals.get(m["backend"], 0.0) + m["median_us"] * m["calls"]
        assert choice["totals_us"] == pytest.approx(totals)
        fastest = min(totals, key=totals.get)
        if choice["within_noise"]:  # no winner called: the first listed of those within noise
            assert fastest in choice["within_noise"] and choice["backend"] == choice["within_noise"][0]
        else:
            assert choice["backend"] == fastest
        assert "flaggems" in choice["reasons"] and "flaggems" not in totals
    mm = [m for m in result["measurements"] if m["op"] == "mm" and "median_us" in m]
    assert {m["calls"] for m in mm} == {3}


def test_the_written_conf_is_what_the_package_reads(tuned, sim_python):  # noqa: F811
    d, result = tuned
    text = (d / "tuned.conf").read_text()
    assert text.startswith("# backends.conf written by `tdev route tune`")
    routes = run_code(sim_python, """
        import json, torch_sim
        routes = torch_sim.routing.read_config("tuned.conf")
        torch_sim.routing.check_ops(routes)
        print(json.dumps({op: r.backend for op, r in routes.items()}))
    """, cwd=d)
    assert routes == {op: c["backend"] for op, c in result["choices"].items()}


def test_the_wall_clock_can_be_asked_for_and_routes_are_restored(sim_python, tmp_path):  # noqa: F811
    (tmp_path / "small.yaml").write_text(SMALL_CASES)
    out = run_code(sim_python, """
        import json, torch_sim
        from tdev.route.cases import load_cases
        from tdev.route.tune import tune
        routing = torch_sim.routing
        routing.set_route("mm", "cpu", "test")
        before = {op: (r.backend, r.source) for op, r in routing.current_routes().items()}
        result = tune("torch_sim", load_cases("small.yaml"), ("vendor", "cpu"), repeat=2,
                      rounds=1, timer="wall")
        after = {op: (r.backend, r.source) for op, r in routing.current_routes().items()}
        print(json.dumps({"same": before == after, "timer": result.timer,
                          "methods": sorted({m.timing.method for m in result.measurements})}))
    """, cwd=tmp_path)
    assert out == {"same": True, "timer": "wall", "methods": ["wall"]}


def test_record_a_model_step_then_tune_its_calls(sim_python, tmp_path):  # noqa: F811
    p = run_tdev(sim_python, "route", "record", "--package", "torch_sim", "--model",
                 "torch_sim.testing:example_step", "-o", "model.yaml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("recorded ")
    cases = load_cases(tmp_path / "model.yaml")
    ops = {c.op for c in cases}
    assert {"addmm", "native_layer_norm", "_softmax", "native_layer_norm_backward"} <= ops
    assert next(c for c in cases if c.op == "native_layer_norm").calls == 5  # 2 layers x 2 + 1
    p = run_tdev(sim_python, "route", "tune", "--package", "torch_sim", "--shapes",
                 "model.yaml", "--ops", "native_layer_norm,_softmax", "--backends", "vendor,cpu",
                 "--repeat", "2", "--rounds", "1", "--markdown", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    table = [line for line in p.stdout.splitlines() if line.startswith("| ")]
    assert table[0] == "| op | inputs | calls | vendor us | cpu us | chosen | timer |"
    assert {line.split(" | ")[0][2:] for line in table[1:]} == {"native_layer_norm", "_softmax"}


@pytest.mark.parametrize("args, message", [
    (["--package", "no_such_pkg"], "no_such_pkg: cannot import the package"),
    (["--package", "json"], "json: not a package generated by `tdev scaffold`"),
    (["--package", "torch_sim", "--backends", "gpu"], "unknown backend(s) gpu"),
    (["--package", "torch_sim", "--shapes", "missing.yaml"], "missing.yaml: cannot read"),
    (["--package", "torch_sim", "--shapes", "core.yaml"], "view: implemented by the device"),
    (["--package", "torch_sim", "--ops", "baddbmm"], "no case for baddbmm"),
])
def test_bad_input_is_one_line_and_exit_code_2(sim_python, tmp_path, args, message):  # noqa: F811
    (tmp_path / "core.yaml").write_text("cases: [{op: view, args: [{shape: [4]}, [2, 2]]}]\n")
    p = run_tdev(sim_python, "route", "tune", *args, cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tdev: ") and message in lines[0], p.stderr


def test_route_help_explains_the_verbs_and_exit_codes(sim_python):  # noqa: F811
    p = run_tdev(sim_python, "route", "tune", "--help")
    assert p.returncode == 0
    for text in ("--shapes", "--backends", "--timer", "--rounds", "exit codes", "record"):
        assert text in p.stdout


def test_the_table_shows_the_spread_and_names_ties(sim_python, tmp_path):  # noqa: F811
    """Every figure a user reads comes with its spread; a `(tie)` in the table comes with a
    note naming the backends within noise, and the conf line says so too."""
    import re

    (tmp_path / "small.yaml").write_text(SMALL_CASES)
    p = run_tdev(sim_python, "route", "tune", "--package", "torch_sim", "--shapes", "small.yaml",
                 "--backends", "vendor,cpu", "--repeat", "4", "--rounds", "2", "--out", "t.conf",
                 cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-4000:]
    lines = p.stdout.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("op "))
    rows = [ln for ln in lines[header + 1:] if ln.split()[0] in ("add.Tensor", "_softmax", "mm")]
    assert len(rows) == 3
    conf = (tmp_path / "t.conf").read_text()
    for row in rows:
        assert len(re.findall(r"\d+\.\d ±\d+\.\d%", row)) == 2, row  # vendor and cpu
        op = row.split()[0]
        tie = "(tie)" in row
        assert tie == any(ln.startswith(f"note: {op}: ") and "within noise" in ln for ln in lines)
        conf_line = next(ln for ln in conf.splitlines() if ln.startswith(f"{op} = "))
        assert ("# within noise:" in conf_line) == tie and "[" in conf_line
