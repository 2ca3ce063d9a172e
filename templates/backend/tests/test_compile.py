"""torch.compile on the device ({pkg}/compile.py): dynamo knows the device, the device's own
backend and inductor (every operator left to the device's ATen kernels) give eager's results,
forward and backward."""
import pytest
import torch
import torch.nn as nn
from torch._dynamo.device_interface import get_interface_for_device

from conftest import DEVICE, pkg


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))


def _run(model: nn.Module, x: torch.Tensor):
    out = model(x)
    out.square().sum().backward()
    return out.detach().cpu(), [p.grad.cpu() for p in model.parameters()]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_importing_the_package_does_not_import_dynamo():
    """torch.compile's registrations wait for torch._dynamo (over a second to import): the
    package, loaded on every `import torch`, must not pull it in."""
    import subprocess
    import sys
    code = ("import sys, torch, {pkg}; print('torch._dynamo' in sys.modules); "
            "import torch._dynamo.device_interface as d; "
            "print(d.get_interface_for_device({dev!r}).__module__)").format(pkg=pkg.__name__, dev=DEVICE)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", f"{pkg.__name__}.compile"]


def test_dynamo_has_the_devices_interface():
    iface = get_interface_for_device(DEVICE)
    assert iface.device_count() == pkg.device.device_count()
    assert iface.current_device() == pkg.device.current_device()
    assert iface.is_available() and not iface.is_triton_capable()


@pytest.mark.parametrize("how", [{"backend": DEVICE},
                                 {"options": {"fallback_by_default": True}}],
                         ids=["device_backend", "inductor_aten"])
def test_compiled_model_equals_eager(how):
    x = torch.randn(5, 8, device=DEVICE)
    eager_model, compiled_model = _model().to(DEVICE), _model().to(DEVICE)
    ref, ref_grads = _run(eager_model, x)
    compiled = torch.compile(compiled_model, **how)
    out, grads = _run(compiled, x)
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)
    again = compiled(x + 1).detach().cpu()  # the same graph, new values
    torch.testing.assert_close(again, eager_model(x + 1).detach().cpu())

