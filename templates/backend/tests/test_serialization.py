"""torch.save / torch.load of device tensors: device, dtype, strides, values, views and backend
metadata (csrc/aten/BackendMeta.cpp) kept."""
import io

import pytest
import torch

from conftest import DEVICE, pkg


def _round_trip(obj, **load):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_device_tensor_round_trip_keeps_device_dtype_strides_and_values(dtype):
    base = (torch.randn(3, 5) * 10).to(dtype)
    x = base.to(DEVICE).t()  # a non-contiguous view
    y = _round_trip(x)
    assert y.device == x.device and y.dtype == dtype
    assert y.shape == x.shape and y.stride() == x.stride() and not y.is_contiguous()
    assert torch.equal(y.cpu(), base.t())


def test_views_of_one_storage_stay_one_storage():
    x = torch.arange(12.0, device=DEVICE)
    a, b = _round_trip([x[:6], x[6:].view(2, 3)])
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    a.add_(100)
    assert b.cpu().tolist() == [[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]]
    assert a.cpu().tolist() == [100.0 + i for i in range(6)]


def test_state_dict_round_trip_and_map_location_to_the_cpu():
    model = torch.nn.Linear(3, 2).to(DEVICE)
    state = _round_trip(model.state_dict())
    assert all(t.device.type == DEVICE for t in state.values())
    on_cpu = _round_trip(model.state_dict(), map_location="cpu")
    torch.testing.assert_close(on_cpu["weight"], model.weight.detach().cpu())


def _ops():
    return getattr(torch.ops, pkg.__name__)


def test_backend_metadata_set_get_and_kept_through_save_and_load():
    x = torch.randn(2, 3, device=DEVICE)
    assert _ops().get_backend_meta(x) == []
    _ops().set_backend_meta(x, ["private_format", "compressed", "private_format"])
    assert _ops().get_backend_meta(x) == ["compressed", "private_format"]
    y, plain = _round_trip([x, torch.ones(1, device=DEVICE)])
    assert _ops().get_backend_meta(y) == ["compressed", "private_format"]
    assert _ops().get_backend_meta(plain) == []
    assert torch.equal(y.cpu(), x.cpu())
    assert torch._utils.get_tensor_metadata(x) == {f"{DEVICE}.compressed": True,
                                                   f"{DEVICE}.private_format": True}


def test_backend_metadata_is_for_device_tensors_only():
    with pytest.raises(RuntimeError, match=f"backend metadata is for {DEVICE} tensors, got a cpu"):
        _ops().set_backend_meta(torch.zeros(1), ["x"])
