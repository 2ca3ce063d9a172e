"""Quantized tensors on the device are not supported: one clear error naming the operator,
whether the operator reaches the Quantized<device> key (the CPU fallback's result is copied back
through empty_quantized) or the vendor's kernel returns a quantized tensor (a vendor route)."""
import re

import pytest
import torch

from conftest import DEVICE, PREFIX, pkg, run_python

UNSUPPORTED = f"{DEVICE}: quantized tensors are not supported on this device"
VENDOR_REFUSED = r"\(aten::quantize_per_tensor returned one through the vendor's kernels\)"
ON_THE_WAY_BACK = r"\(aten::empty_quantized on the Quantized" + DEVICE + r" key\)"


def test_empty_quantized_names_what_is_unsupported():
    with pytest.raises(NotImplementedError) as e:
        torch._empty_affine_quantized((2,), scale=0.1, zero_point=0, dtype=torch.quint8,
                                      device=DEVICE)
    message = str(e.value)
    assert message.startswith(f"{DEVICE}: quantized tensors are not supported on this device")
    assert "_empty_affine_quantized" in message and "\n" not in message


def test_quantize_per_tensor_of_a_device_tensor_is_refused_naming_the_operator():
    """Unlisted operators run with the vendor's kernels where the profile says so
    (vendor_kernels.fallback: vendor, as cuda): the vendor's quantized result is refused;
    else the CPU fallback's result is, on its way back (aten::empty_quantized)."""
    where = VENDOR_REFUSED if pkg._config.VENDOR_FALLBACK else ON_THE_WAY_BACK
    with pytest.raises(NotImplementedError, match=UNSUPPORTED + " " + where):
        torch.quantize_per_tensor(torch.randn(3, device=DEVICE), 0.1, 0, torch.quint8)


def test_a_vendor_route_refuses_the_quantized_result_of_the_vendors_kernel():
    """A vendor route (a profile without vendor kernels runs it on the CPU: refused on the way
    back); the device keeps working after the error."""
    p = run_python(f"""
        import torch
        try:
            torch.quantize_per_tensor(torch.randn(3, device="{DEVICE}"), 0.1, 0, torch.quint8)
            print("no error")
        except NotImplementedError as e:
            print(str(e).splitlines()[0])
        print(torch.ones(2, device="{DEVICE}").add(1).cpu().tolist())
        """, env={f"{PREFIX}_OP_quantize_per_tensor": "vendor"})
    assert p.returncode == 0, p.stderr
    refused, after = p.stdout.splitlines()
    where = VENDOR_REFUSED if pkg._config.HAS_VENDOR_KERNELS else ON_THE_WAY_BACK
    assert re.match(UNSUPPORTED + " " + where, refused), refused
    assert after == "[2.0, 2.0]"


def test_quantized_on_the_cpu_then_dequantized_to_the_device_works():
    q = torch.quantize_per_tensor(torch.tensor([0.5, -1.0]), 0.5, 0, torch.qint8)
    assert q.dequantize().to(DEVICE).cpu().tolist() == [0.5, -1.0]
