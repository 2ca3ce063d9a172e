"""Quantized tensors on the device are not supported: one clear error naming the operator."""
import pytest
import torch

from conftest import DEVICE


def test_empty_quantized_names_what_is_unsupported():
    with pytest.raises(NotImplementedError) as e:
        torch._empty_affine_quantized((2,), scale=0.1, zero_point=0, dtype=torch.quint8,
                                      device=DEVICE)
    message = str(e.value)
    assert message.startswith(f"{DEVICE}: quantized tensors are not supported on this device")
    assert "_empty_affine_quantized" in message and "\n" not in message


def test_quantize_per_tensor_of_a_device_tensor_names_empty_quantized():
    with pytest.raises(NotImplementedError, match=r"not supported .*\(aten::empty_quantized"):
        torch.quantize_per_tensor(torch.randn(3, device=DEVICE), 0.1, 0, torch.quint8)


def test_quantized_on_the_cpu_then_dequantized_to_the_device_works():
    q = torch.quantize_per_tensor(torch.tensor([0.5, -1.0]), 0.5, 0, torch.qint8)
    assert q.dequantize().to(DEVICE).cpu().tolist() == [0.5, -1.0]
