"""Random numbers on the device: manual_seed reproduces, generator state round-trips."""
import subprocess
import sys

import pytest
import torch

from conftest import DEVICE, pkg

dev = pkg.device


def draw():
    return (torch.randn(64, device=DEVICE).cpu(), torch.rand(8, device=DEVICE).cpu(),
            torch.randint(0, 100, (8,), device=DEVICE).cpu(),
            torch.nn.functional.dropout(torch.ones(32, device=DEVICE), 0.5).cpu())


def test_manual_seed_reproduces():
    dev.manual_seed(1234)
    first = draw()
    second = draw()
    dev.manual_seed(1234)
    again = draw()
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    assert not torch.equal(first[0], second[0])
    assert dev.initial_seed() == 1234


def test_torch_manual_seed_seeds_the_device():
    torch.manual_seed(99)
    a = torch.randn(16, device=DEVICE).cpu()
    torch.manual_seed(99)
    assert torch.equal(torch.randn(16, device=DEVICE).cpu(), a)


def test_rng_state_round_trips():
    dev.manual_seed(7)
    state = dev.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() > 0
    a = torch.randn(32, device=DEVICE).cpu()
    dev.set_rng_state(state)
    assert torch.equal(torch.randn(32, device=DEVICE).cpu(), a)
    states = dev.get_rng_state_all()
    assert len(states) == dev.device_count()
    dev.set_rng_state_all(states)


def test_device_generator_objects():
    g = torch.Generator(device=DEVICE)
    assert g.device.type == DEVICE
    g.manual_seed(5)
    a = torch.randn(10, device=DEVICE, generator=g).cpu()
    g.manual_seed(5)
    assert torch.equal(torch.randn(10, device=DEVICE, generator=g).cpu(), a)
    assert g.initial_seed() == 5


def test_seed_picks_a_new_seed():
    s1 = dev.seed()
    s2 = dev.seed()
    assert s1 != s2 and dev.initial_seed() == s2
    dev.seed_all()


def test_offset_resumes_the_seeds_sequence():
    """get_offset: 32-bit numbers drawn since seeding; set_offset after the same seed resumes
    there (as torch.cuda's Philox offset), across the engine's 624-number state blocks too."""
    dev.manual_seed(11)
    assert dev.get_offset() == 0
    torch.rand(10, device=DEVICE)
    offset = dev.get_offset()
    assert offset >= 10
    after = draw()
    torch.rand(5000, device=DEVICE)
    assert dev.get_offset() >= offset + 5000
    dev.manual_seed(11)
    dev.set_offset(offset)
    assert dev.get_offset() == offset
    for a, b in zip(after, draw()):
        assert torch.equal(a, b)


def test_offset_of_a_generator_object():
    g = torch.Generator(device=DEVICE)
    g.manual_seed(3)
    assert g.get_offset() == 0
    torch.rand(700, generator=g, device=DEVICE)
    offset = g.get_offset()
    expected = torch.rand(5, generator=g, device=DEVICE).cpu()
    g.manual_seed(3)
    g.set_offset(offset)
    assert torch.equal(torch.rand(5, generator=g, device=DEVICE).cpu(), expected)
    assert g.get_offset() > offset


SET_HUGE_OFFSETS = """
import torch
module = getattr(torch, "{device}")
gen = torch.Generator(device="{device}")
for offset in (2**62, 2**64 - 1, 10**12):
    for set_offset in (module.set_offset, gen.set_offset):
        try:
            set_offset(offset)
            print("accepted", offset)
        except RuntimeError as e:
            print(str(e).splitlines()[0])
"""


def test_huge_offsets_are_refused_in_one_line_not_replayed():
    """set_offset replays the seed's sequence: an offset beyond what get_offset can find again
    is refused (the timeout turns an endless replay into a failure)."""
    try:
        p = subprocess.run([sys.executable, "-c", SET_HUGE_OFFSETS.format(device=DEVICE)],
                           capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("set_offset of a huge offset did not return")
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert len(lines) == 6
    for line, offset in zip(lines, [2**62, 2**62, 2**64 - 1, 2**64 - 1, 10**12, 10**12]):
        assert line.startswith(f"{DEVICE}: generator offset {offset} is out of range (at most "), line



@pytest.mark.parametrize("offset", [2**64 + 5, 2**64, -1, -(2**64) + 3])
def test_an_offset_outside_64_bits_is_refused_not_wrapped(offset):
    """An offset is a count below 2**64: a larger or negative one is refused in one line naming
    it (taken modulo 2**64 it would silently resume the sequence somewhere else)."""
    dev.manual_seed(21)
    torch.rand(3, device=DEVICE)
    before = dev.get_offset()
    with pytest.raises(RuntimeError) as e:
        dev.set_offset(offset)
    assert str(e.value).startswith(f"{DEVICE}: generator offset {offset} is out of range"), e.value
    assert dev.get_offset() == before


@pytest.mark.parametrize("size", [1, 3, 15, 16, 33])
def test_normal_draws_replay_by_offset(size):
    """Like torch.cuda's Philox offset, the offset alone says where the sequence stands: after
    set_offset(k), randn gives the same values each time, whatever was drawn before (no normal
    sample is carried from one call to the next outside the offset)."""
    dev.manual_seed(5)
    offsets, values = [], []
    for _ in range(4):
        offsets.append(dev.get_offset())
        values.append(torch.randn(size, device=DEVICE).cpu())
    for offset, expected in reversed(list(zip(offsets, values))):
        for _ in range(2):
            dev.manual_seed(5)
            dev.set_offset(offset)
            assert torch.equal(torch.randn(size, device=DEVICE).cpu(), expected), (size, offset)
