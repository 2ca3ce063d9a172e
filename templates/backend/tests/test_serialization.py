"""torch.save / torch.load of device tensors: device, dtype, strides, values, views and backend
metadata (csrc/aten/BackendMeta.cpp) kept."""
import collections
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
    # plain keys, as other backends write them
    assert torch._utils.get_tensor_metadata(x) == {"compressed": True, "private_format": True}


def test_backend_metadata_takes_plain_keys_as_other_backends_do():
    x = torch.randn(2, device=DEVICE)
    torch._utils.set_tensor_metadata(x, {"version_number": True, "format_number": True,
                                         "off": False})
    assert _ops().get_backend_meta(x) == ["format_number", "version_number"]
    assert torch._utils.get_tensor_metadata(x) == {"format_number": True, "version_number": True}
    # the device-prefixed form is read as the same names; torch's own conj stays torch's
    z = torch.randn(2, dtype=torch.complex64, device=DEVICE)
    torch._utils.set_tensor_metadata(z, {f"{DEVICE}.private_format": True, "conj": True})
    assert _ops().get_backend_meta(z) == ["private_format"] and z.is_conj()
    (y,) = _round_trip([x])
    assert _ops().get_backend_meta(y) == ["format_number", "version_number"]
    with pytest.raises(RuntimeError, match="'conj' is torch's own"):
        _ops().set_backend_meta(x, ["conj"])


def test_backend_metadata_is_for_device_tensors_only():
    with pytest.raises(RuntimeError, match=f"backend metadata is for {DEVICE} tensors, got a cpu"):
        _ops().set_backend_meta(torch.zeros(1), ["x"])


class _Forged:
    """Pickles as a tensor of `size` elements over `storage` (what a corrupted or hostile
    checkpoint holds): torch.load rebuilds it with _rebuild_tensor_v2, as any tensor."""

    def __init__(self, storage, size, offset=0):
        self.storage, self.size, self.offset = storage, size, offset

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2,
                (self.storage, self.offset, (self.size,), (1,), False, collections.OrderedDict()))


def _typed(t):
    return torch.TypedStorage(wrap_storage=t.untyped_storage(), dtype=t.dtype, _internal=True)


@pytest.mark.parametrize("size, offset", [(1001, 0), (5000, 0), (1000, 1), (1, 1000)])
def test_a_checkpoint_tensor_larger_than_its_storage_is_refused_as_on_the_cpu(size, offset):
    """The CPU refuses such a tensor; the device must not load it padded to fit."""
    for device in ("cpu", DEVICE):
        storage = _typed(torch.arange(1000.0, device=device))
        with pytest.raises(RuntimeError, match="not resizable"):
            _round_trip(_Forged(storage, size, offset))


@pytest.mark.parametrize("size, offset", [(1000, 0), (10, 990), (0, 1000)])
def test_a_checkpoint_tensor_within_its_storage_loads_as_on_the_cpu(size, offset):
    cpu = _round_trip(_Forged(_typed(torch.arange(1000.0)), size, offset))
    loaded = _round_trip(_Forged(_typed(torch.arange(1000.0, device=DEVICE)), size, offset))
    assert loaded.device.type == DEVICE and torch.equal(loaded.cpu(), cpu)


def test_loaded_device_storages_are_not_resizable_like_loaded_cpu_ones():
    cpu = _round_trip(torch.arange(10.0))
    loaded = _round_trip(torch.arange(10.0, device=DEVICE))
    for t in (cpu, loaded):
        assert not t.untyped_storage().resizable()
        with pytest.raises(RuntimeError, match="not resizable"):
            t.resize_(20)
        t.resize_(5)  # within the storage: allowed
    assert torch.equal(loaded.cpu(), cpu)
    mapped = _round_trip(torch.arange(4.0), map_location=DEVICE)
    assert mapped.device.type == DEVICE and mapped.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
