"""Operators unsafe to autocast are refused on the device as on CUDA; outside autocast they run."""
import pytest
import torch

from conftest import DEVICE


def _inputs():
    return torch.rand(4, device=DEVICE), torch.rand(4, device=DEVICE)


def test_binary_cross_entropy_is_refused_under_autocast():
    p, t = _inputs()
    with torch.autocast(DEVICE), pytest.raises(RuntimeError, match="unsafe to autocast"):
        torch.nn.functional.binary_cross_entropy(p, t)
    with torch.autocast(DEVICE), pytest.raises(RuntimeError, match="unsafe to autocast"):
        torch.nn.BCELoss()(p, t)


def test_binary_cross_entropy_runs_outside_autocast_and_with_logits_inside():
    p, t = _inputs()
    expected = torch.nn.functional.binary_cross_entropy(p.cpu(), t.cpu())
    torch.testing.assert_close(torch.nn.functional.binary_cross_entropy(p, t).cpu(), expected)
    with torch.autocast(DEVICE):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(p, t)
    assert loss.dtype == torch.float32 and loss.device.type == DEVICE
