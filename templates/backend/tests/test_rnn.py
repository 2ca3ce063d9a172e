"""nn.LSTM and nn.GRU on the device: the fused cells ATen calls for non-CPU devices, composed of
ordinary operators; forward and backward equal to the CPU's."""
import pytest
import torch

from conftest import DEVICE


def _run(layer: torch.nn.Module, x: torch.Tensor, hidden):
    out, state = layer(x, hidden)
    states = state if isinstance(state, tuple) else (state,)
    loss = out.square().sum() + sum(s.square().sum() for s in states)
    loss.backward()
    grads = [p.grad for p in layer.parameters()]
    return [out, *states, x.grad, *grads]


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("bias", [True, False])
def test_rnn_forward_and_backward_equal_cpu(kind, bias):
    torch.manual_seed(0)
    cpu = getattr(torch.nn, kind)(5, 7, num_layers=2, bias=bias, batch_first=True)
    dev = getattr(torch.nn, kind)(5, 7, num_layers=2, bias=bias, batch_first=True)
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEVICE)
    x = torch.randn(3, 4, 5)
    h = torch.randn(2, 3, 7)
    hidden = (h, torch.randn(2, 3, 7)) if kind == "LSTM" else h
    hidden_dev = tuple(t.to(DEVICE) for t in hidden) if kind == "LSTM" else h.to(DEVICE)
    expected = _run(cpu, x.clone().requires_grad_(), hidden)
    got = _run(dev, x.to(DEVICE).requires_grad_(), hidden_dev)
    for e, g in zip(expected, got):
        assert g.device.type == DEVICE
        torch.testing.assert_close(g.cpu(), e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell"])
def test_rnn_cells_equal_cpu(cell):
    torch.manual_seed(1)
    cpu = getattr(torch.nn, cell)(4, 6)
    dev = getattr(torch.nn, cell)(4, 6)
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEVICE)
    x = torch.randn(2, 4)
    expected = cpu(x)
    got = dev(x.to(DEVICE))
    for e, g in zip(expected if cell == "LSTMCell" else [expected],
                    got if cell == "LSTMCell" else [got]):
        torch.testing.assert_close(g.cpu(), e, rtol=1e-4, atol=1e-5)


def test_lstm_runs_under_inference_mode():
    lstm = torch.nn.LSTM(3, 4).to(DEVICE)
    with torch.inference_mode():
        out, _ = lstm(torch.randn(5, 2, 3, device=DEVICE))
    assert out.shape == (5, 2, 4) and out.device.type == DEVICE
