"""tdev.route.record: the routable operator calls of a model run, replayable as tune cases.
Recorded here on the CPU (a device type like any other for the recorder)."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from tdev.route.cases import aten_overload, dump_cases, load_cases, make_args
from tdev.route.record import RecordError, conf_name, load_callable, record, routable


def model_step():
    torch.manual_seed(0)
    lin, norm = nn.Linear(16, 8), nn.LayerNorm(8)
    x = torch.randn(4, 16)
    tokens = torch.tensor([1, 3, 2, 7])
    for _ in range(2):  # the same calls twice
        y = torch.softmax(norm(lin(x)), dim=-1)
        loss = F.cross_entropy(y, tokens)
        loss.backward()
        _ = x.t().contiguous().view(-1)  # views and copies are not routes


@pytest.fixture(scope="module")
def recorded():
    return record(model_step, "cpu", core_ops=("view",))


def test_compute_operators_are_recorded_with_their_shapes(recorded):
    ops = {c.op for c in recorded.cases}
    assert {"addmm", "native_layer_norm", "_softmax", "nll_loss_forward",
            "native_layer_norm_backward", "mm"} <= ops
    assert not ops & {"t", "view", "transpose", "expand", "_unsafe_view", "detach"}
    addmm = next(c for c in recorded.cases if c.op == "addmm")
    assert addmm.label == "8 float32, 4x16 float32, 16x8 float32"
    assert addmm.args[2]["stride"] == [1, 16]  # the weight's transpose, as it was called
    assert addmm.calls == 2


def test_identical_calls_are_counted_once_most_frequent_first(recorded):
    keys = [(c.op, repr(c.args), repr(c.kwargs)) for c in recorded.cases]
    assert len(keys) == len(set(keys))
    calls = [c.calls for c in recorded.cases]
    assert calls == sorted(calls, reverse=True) and calls[0] >= 2


def test_integer_tensors_keep_their_value_range(recorded):
    nll = next(c for c in recorded.cases if c.op == "nll_loss_forward")
    target = nll.args[1]
    assert target["dtype"] == "int64" and target["high"] == 8  # max value 7, plus one


def test_recorded_cases_replay(recorded, tmp_path):
    path = tmp_path / "rec.yaml"
    path.write_text(dump_cases(recorded.cases, "test"))
    for i, case in enumerate(load_cases(path)):
        args, kwargs = make_args(case, torch.device("cpu"), torch.Generator().manual_seed(i))
        aten_overload(case.op)(*args, **kwargs)


def test_what_is_routable():
    assert conf_name(torch.ops.aten.add.Tensor) == "add.Tensor"
    assert conf_name(torch.ops.aten.mm.default) == "mm"
    assert routable(torch.ops.aten.mm.default)
    assert routable(torch.ops.aten.add_.Tensor)  # in place: writes, not a view
    assert not routable(torch.ops.aten.transpose.int)  # a view
    assert not routable(torch.ops.aten.mm.default, core_ops=("mm",))
    assert not routable(torch.ops.aten.copy_.default)  # composite: no kernel of its own


def test_calls_without_a_device_tensor_are_not_recorded():
    result = record(lambda: torch.ones(3) + 1, "meta")
    assert result.cases == [] and result.dropped == {}


def test_unsupported_arguments_are_reported_not_recorded():
    x, g = torch.empty(8), torch.Generator()
    result = record(lambda: x.bernoulli_(0.5, generator=g), "cpu")
    assert result.cases == []
    assert result.dropped == {"bernoulli_.float: Generator": 1}


def test_the_model_function_is_found_by_name():
    assert load_callable("torch.nn.functional:relu") is F.relu
    with pytest.raises(RecordError, match="expected MODULE:FUNCTION"):
        load_callable("torch.nn.functional.relu")
    with pytest.raises(RecordError, match="no_such_module"):
        load_callable("no_such_module:f")
    with pytest.raises(RecordError, match="not callable"):
        load_callable("torch:__version__")
