"""The generated packages' view operators, checked here on the CPU: every vendor's package
compiles its view unit and sends its fallback and routes through it, and the generated view test
(templates/backend/tests/view_cases.py) finds torch's view operators from the schemas, all of
them (cross-checked against the JIT's schema list), with a call the CPU accepts for most."""
from __future__ import annotations

import ast
import importlib.util
import re
import sys

import pytest
import torch

from tdev.scaffold.profiles import available_vendors
from tdev.scaffold.scaffold import scaffold, template_root

VENDORS = sorted(available_vendors())


@pytest.fixture(scope="module")
def view_cases():
    path = template_root() / "tests" / "view_cases.py"
    spec = importlib.util.spec_from_file_location("view_cases_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("views")
    return {v: scaffold(v, out=root / v) for v in VENDORS}


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_unit_is_built_and_views_come_before_any_kernel(generated, vendor):
    out = generated[vendor].out
    tree = ast.parse((out / "setup.py").read_text())
    sources = next(ast.literal_eval(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                   and any(getattr(t, "id", "") == "SOURCES" for t in n.targets))
    units = sorted(p.relative_to(out).as_posix() for p in (out / "csrc").rglob("*.cpp"))
    assert sorted(sources) == units  # a unit left out would leave run_as_view undefined
    fallback = (out / "csrc/aten/Fallback.cpp").read_text()
    body = fallback[fallback.index("void cpu_fallback("):]
    assert body.index("run_as_view(op, stack)") < body.index("at::native::cpu_fallback")
    boxing = out / "csrc/aten/Boxing.cpp"
    if boxing.exists():
        body = boxing.read_text()[boxing.read_text().index("void vendor_kernel("):]
        assert body.index("run_as_view(op, stack)") < body.index("op.callBoxed")


def _alias_returning_ops_from_jit() -> set[str]:
    """The other list of schemas torch keeps (the JIT's), restricted to the dispatcher's aten
    operators whose return aliases a tensor argument."""
    known = set(torch._C._dispatch_get_all_op_names())
    found = set()
    for s in torch._C._jit_get_all_schemas():
        full = s.name + (f".{s.overload_name}" if s.overload_name else "")
        if not s.name.startswith("aten::") or full not in known:
            continue
        text = str(s)
        args, _, rets = text.partition(") -> ")
        arg_sets = set(re.findall(r"Tensor\(([a-z])(?: -> \*)?\)", args))
        ret_sets = {x for m in re.findall(r"\(([a-z|]+)\)", rets) for x in m.split("|")}
        if arg_sets & ret_sets:
            found.add(full[6:])
    return found


def test_the_view_operators_are_all_found_in_the_schemas(view_cases):
    ops = view_cases.view_ops()
    names = {op.name for op in ops}
    views = {op.name for op in ops if not op.inplace or any(a.aliased for a in op.args)}
    assert _alias_returning_ops_from_jit() <= views
    assert {"view_as_real", "view_as_complex", "unfold", "split.Tensor", "diagonal",
            "transpose_", "as_strided_"} <= names
    assert not names & {"add.Tensor", "clone", "copy_", "contiguous_"}  # no alias, no view
    inplace = {op.name for op in ops if op.inplace}
    assert all(torch.Tag.inplace_view in op.overload.tags for op in ops if op.name in inplace)


def test_most_view_operators_get_a_call_the_cpu_accepts(view_cases):
    ops = view_cases.view_ops()
    found = {op.name: view_cases.find_case(op) for op in ops}
    covered = [n for n, (case, _) in found.items() if case is not None]
    assert len(covered) >= 0.75 * len(ops), {n: r for n, (c, r) in found.items() if c is None}
    assert all(reason for case, reason in found.values() if case is None)
    # a case is a real call: the CPU makes its result a view of an input where the op can
    case = found["unfold"][0]
    inputs, _, args, kwargs = case.call("cpu")
    out = view_cases.tensors_of(case.op.overload(*args, **kwargs))
    assert any(view_cases.shares(o, t) for o in out for t in inputs)
