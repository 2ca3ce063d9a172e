"""How far packed and per-sequence LSTM results lie apart on the GPU (test_nn's
test_variable_sequence_cuda_float32 allows 1e-5 and sees 1.28e-5 against tdev's libtorch_cuda).

The inputs and weights come from the CPU under fixed seeds, so every runtime computes the same
problem: the packed LSTM against one sequence at a time, for the test's lengths, with cuDNN on
and off and TF32 on and off. It prints the largest difference per setting. Run it under the
runtime under test and under the machine's own torch: the same figures on both mean the
environment (the cuDNN release), not tdev's build.
  python3 lstm_probe.py
"""
from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils import rnn as rnn_utils

LENGTHS = ([5], [10, 10, 6, 2, 2, 1, 1], [2, 1, 3, 2, 10, 5, 3])


def worst(lengths: list[int], sorted_: bool, proj: int, seed: int) -> float:
    g = torch.Generator().manual_seed(seed)
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=proj)
    with torch.no_grad():
        for p in lstm.parameters():
            p.copy_(torch.rand(p.shape, generator=g) * 0.6 - 0.3)
    lstm = lstm.cuda()
    twin = copy.deepcopy(lstm)
    x = torch.randn(max(lengths), len(lengths), 3, generator=g).cuda().requires_grad_()
    outs, hids = [], []
    for i, n in enumerate(lengths):
        o, h = twin(x[:n, i:i + 1])
        outs.append(torch.cat([o, o.new_zeros(max(lengths) - n, *o.shape[1:])]))
        hids.append(h)
    seq_out = torch.cat(outs, 1)
    seq_hid = [torch.cat(h, 1) for h in zip(*hids)]
    packed = rnn_utils.pack_padded_sequence(x, lengths, enforce_sorted=sorted_)
    p_out, p_hid = lstm(packed)
    unpacked, _ = rnn_utils.pad_packed_sequence(p_out)
    diffs = [(unpacked - seq_out).abs().max().item()]
    diffs += [(a - b).abs().max().item() for a, b in zip(p_hid, seq_hid)]
    seq_out.sum().backward()
    gx = x.grad.clone()
    x.grad = None
    unpacked.sum().backward()
    diffs.append((x.grad - gx).abs().max().item())
    diffs += [(a.grad - b.grad).abs().max().item() for a, b in zip(lstm.parameters(), twin.parameters())]
    return max(diffs)


def main() -> None:
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}")
    for cudnn in (True, False):
        for tf32 in (True, False):
            torch.backends.cudnn.enabled = cudnn
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            figures = [worst(list(n), s, p, seed) for seed in range(4) for n in LENGTHS
                       for s in (True, False) if not s or n == sorted(n, reverse=True)
                       for p in (0, 2)]
            over = sum(f > 1e-5 for f in figures)
            print(f"cudnn={cudnn} tf32={tf32}: largest difference {max(figures):.3g}, "
                  f"{over} of {len(figures)} cases over the test's 1e-5")


if __name__ == "__main__":
    main()
