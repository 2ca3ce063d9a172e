"""Quantized tensors on the device, through a CPU fallback: quantize_per_tensor of a device
tensor, dequantize, int_repr, per-channel quantization and a quantized linear give the CPU's
results on every route quantize_per_tensor may take, the quantized tensor stays on the device
(moving it there and back keeps its integers and quantizer), and the capability list names the
quantized dtypes the device holds (the sub-byte ones are refused with one line)."""
import pytest
import torch

from conftest import DEVICE, pkg

routing = pkg.routing
QDTYPES = [torch.qint8, torch.quint8, torch.qint32]


def values(n=64, seed=28):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed)) * 3


class Routed:
    def __init__(self, op, backend):
        self.op, self.backend = op, backend

    def __enter__(self):
        self.before = routing.current_routes().get(self.op)
        if self.backend is None:
            routing.clear_route(self.op)
        else:
            routing.set_route(self.op, self.backend, source="test")

    def __exit__(self, *exc):
        routing.clear_route(self.op)
        if self.before is not None:
            routing.set_route(self.op, self.before.requested, self.before.source)


@pytest.mark.parametrize("route", [None, "cpu", "vendor"])
@pytest.mark.parametrize("dtype", QDTYPES)
def test_quantize_dequantize_round_trip_equals_the_cpu(dtype, route):
    x = values()
    scale, zero_point = 0.05, (0 if dtype == torch.qint8 else 10)
    expected = torch.quantize_per_tensor(x, scale, zero_point, dtype)
    with Routed("quantize_per_tensor", route):
        q = torch.quantize_per_tensor(x.to(DEVICE), scale, zero_point, dtype)
    assert q.is_quantized and q.device.type == DEVICE and q.dtype == dtype
    assert q.qscheme() == torch.per_tensor_affine
    assert q.q_scale() == expected.q_scale() and q.q_zero_point() == expected.q_zero_point()
    rep = q.int_repr()
    assert rep.device.type == DEVICE and torch.equal(rep.cpu(), expected.int_repr())
    deq = q.dequantize()
    assert deq.device.type == DEVICE and torch.equal(deq.cpu(), expected.dequantize())
    back = q.cpu()
    assert back.is_quantized and torch.equal(back.int_repr(), expected.int_repr())


def test_a_cpu_quantized_tensor_moves_to_the_device_and_back():
    q = torch.quantize_per_tensor(values(), 0.1, 3, torch.quint8)
    on_device = q.to(DEVICE)
    assert on_device.is_quantized and on_device.device.type == DEVICE
    assert (on_device.q_scale(), on_device.q_zero_point()) == (0.1, 3)
    assert torch.equal(on_device.cpu().int_repr(), q.int_repr())
    view = on_device.view(8, 8)[2]  # views of a quantized device tensor
    assert torch.equal(view.int_repr().cpu(), q.view(8, 8)[2].int_repr())
    assert torch.equal(view.unsqueeze(0).squeeze(0).int_repr().cpu(), view.int_repr().cpu())
    expected = q.clone()
    torch.relu_(expected.view(8, 8)[2])
    torch.relu_(view)  # in place on a view: the device tensor's own memory changes
    assert torch.equal(on_device.cpu().int_repr(), expected.int_repr())
    empty = torch.empty_like(on_device)
    assert empty.is_quantized and empty.device.type == DEVICE and empty.shape == q.shape
    assert torch.equal(on_device.clone().cpu().int_repr(), expected.int_repr())


def test_per_channel_quantization_equals_the_cpu():
    w = values(12).view(3, 4)
    scales, zero_points = torch.tensor([0.1, 0.2, 0.05]), torch.tensor([0, 1, -2])
    expected = torch.quantize_per_channel(w, scales, zero_points, 0, torch.qint8)
    q = torch.quantize_per_channel(w.to(DEVICE), scales.to(DEVICE), zero_points.to(DEVICE), 0,
                                   torch.qint8)
    assert q.device.type == DEVICE and q.qscheme() == torch.per_channel_affine
    assert torch.equal(q.int_repr().cpu(), expected.int_repr())
    assert torch.equal(q.dequantize().cpu(), expected.dequantize())


def test_a_quantized_linear_equals_the_cpu():
    from torch.ao.nn.quantized import functional as qF

    torch.manual_seed(28)
    x, w, b = torch.randn(5, 8), torch.randn(6, 8), torch.randn(6)
    qx = torch.quantize_per_tensor(x, 0.05, 64, torch.quint8)
    qw = torch.quantize_per_tensor(w, 0.02, 0, torch.qint8)
    expected = qF.linear(qx, qw, b, scale=0.1, zero_point=64)
    out = qF.linear(qx.to(DEVICE), qw.to(DEVICE), b.to(DEVICE), scale=0.1, zero_point=64)
    assert out.is_quantized and out.device.type == DEVICE
    assert torch.equal(out.int_repr().cpu(), expected.int_repr())
    assert (out.q_scale(), out.q_zero_point()) == (0.1, 64)


@pytest.mark.skipif(not hasattr(torch.accelerator, "get_device_capability"),
                    reason="no torch.accelerator.get_device_capability in this torch (from 2.10)")
def test_the_capability_list_names_the_quantized_dtypes():
    dtypes = torch.accelerator.get_device_capability(f"{DEVICE}:0")["supported_dtypes"]
    assert set(QDTYPES) <= dtypes
    assert not dtypes & {torch.quint4x2, torch.quint2x4}


def test_sub_byte_quantized_tensors_are_one_line():
    with pytest.raises(NotImplementedError) as e:
        torch._empty_affine_quantized((4,), scale=0.1, zero_point=0, dtype=torch.quint4x2,
                                      device=DEVICE)
    message = str(e.value)
    assert message.startswith(f"{DEVICE}: quantized QUInt4x2 tensors"), message
    assert "\n" not in message
