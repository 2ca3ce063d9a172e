"""torch.autocast on the device: matmuls in the lower precision type, fp32 ops in float32."""
import torch

from conftest import DEVICE, pkg

amp = pkg.device.amp


def test_supported_dtypes():
    assert amp.DEFAULT_DTYPE in pkg.device.get_amp_supported_dtype()
    assert torch.get_autocast_dtype(DEVICE) == amp.DEFAULT_DTYPE


def test_autocast_runs_matmuls_in_lower_precision():
    a = torch.randn(8, 8, device=DEVICE)
    with torch.autocast(DEVICE, dtype=amp.DEFAULT_DTYPE):
        assert torch.is_autocast_enabled(DEVICE)
        y = torch.mm(a, a)
        z = a @ a
    assert y.dtype == amp.DEFAULT_DTYPE and z.dtype == amp.DEFAULT_DTYPE
    assert torch.mm(a, a).dtype == torch.float32
    torch.testing.assert_close(y.float().cpu(), (a.cpu() @ a.cpu()), atol=0.5, rtol=0.05)


def test_autocast_runs_fp32_ops_in_float32():
    h = torch.randn(16, device=DEVICE).to(amp.DEFAULT_DTYPE)
    with amp.autocast():
        y = torch.exp(h)
        s = torch.softmax(h, dim=0)
    assert y.dtype == torch.float32 and s.dtype == torch.float32
    assert torch.exp(h).dtype == amp.DEFAULT_DTYPE
