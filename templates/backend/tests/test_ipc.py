"""Device tensors shared between processes (the package's ipc.py, the runtime's IPC calls):
sent to a child process through torch.multiprocessing, as a Queue item or a Process argument,
the child works on the same device memory, so what it changes is seen here; what cannot be
shared is refused in one line."""
import pytest
import torch
import torch.multiprocessing as mp
from multiprocessing.reduction import ForkingPickler

from conftest import DEVICE, pkg

CTX = mp.get_context("spawn")  # forked children may not use the device (torch.cuda's rule)
TIMEOUT = 300


def _add_from_queue(inbox, outbox):  # the child: changes what it received, reports what it saw
    t, host = inbox.get()
    before = t.cpu().tolist()
    t.add_(1)
    host.add_(1)  # a CPU tensor in shared memory, beside it: torch's own reducers still serve it
    outbox.put((t.device.type, t.dtype, before, t.cpu().tolist()))


def _add_each(pipe):  # the child: several tensors in one message
    tensors = pipe.recv()
    for t in tensors:
        t.add_(1)
    pipe.send([t.cpu().tolist() for t in tensors])


def _send_on(pipe):  # the child: a received tensor may not be sent on
    t = pipe.recv()
    try:
        ForkingPickler.dumps(t)
        pipe.send("sent")
    except Exception as e:  # noqa: BLE001  (what was said, whatever it was)
        pipe.send(f"{type(e).__name__}: {e}")


def _exchange(target, message):
    """What a child answers to one message sent through a pipe (pickled here, so a tensor that
    cannot be sent fails the test at once)."""
    here, there = CTX.Pipe()
    child = CTX.Process(target=target, args=(there,))
    child.start()
    there.close()  # the child's end: a child that dies ends the pipe here (EOFError)
    try:
        here.send(message)
        answered = here.poll(TIMEOUT)
        answer = here.recv() if answered else None
    except EOFError:
        _finish(child)  # fails with the child's exit code
        raise
    except BaseException:
        child.kill()  # it would wait for the message forever
        raise
    if not answered:
        child.kill()
        pytest.fail("the child did not answer")
    _finish(child)
    return answer


def _mul_argument(t, outbox):
    t.mul_(-2)
    outbox.put(t.cpu().tolist())


def _finish(process) -> None:
    process.join(TIMEOUT)
    if process.is_alive():
        process.kill()
        pytest.fail("the child did not finish")
    assert process.exitcode == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_a_tensor_sent_through_a_queue_is_changed_there_and_seen_here(dtype):
    base = torch.arange(12, device=DEVICE).to(dtype).view(3, 4)
    view = base[1:, 1::2]  # an offset and strides: the child sees the same elements
    inbox, outbox = CTX.Queue(), CTX.Queue()
    child = CTX.Process(target=_add_from_queue, args=(inbox, outbox))
    child.start()
    host = torch.zeros(3).share_memory_()
    inbox.put((view, host))
    device_type, got_dtype, before, after = outbox.get(timeout=TIMEOUT)
    _finish(child)
    expected = torch.arange(12).to(dtype).view(3, 4)
    assert (device_type, got_dtype) == (DEVICE, dtype)
    assert before == expected[1:, 1::2].tolist()
    expected[1:, 1::2] += 1
    assert after == expected[1:, 1::2].tolist()
    assert base.cpu().tolist() == expected.tolist()  # only the view's elements changed, here too
    assert host.tolist() == [1.0, 1.0, 1.0]


def test_a_tensor_passed_to_a_process_is_changed_there_and_seen_here():
    t = torch.ones(5, device=f"{DEVICE}:{pkg.device.device_count() - 1}")
    outbox = CTX.Queue()
    child = CTX.Process(target=_mul_argument, args=(t, outbox))
    child.start()
    assert outbox.get(timeout=TIMEOUT) == [-2.0] * 5
    _finish(child)
    assert t.cpu().tolist() == [-2.0] * 5 and t.device.index == pkg.device.device_count() - 1


def test_a_tensor_over_a_storage_sliced_from_another_is_shared_at_its_place():
    """A storage sliced from another starts inside the allocation: the child sees and changes
    the slice's elements, not the allocation's first ones."""
    base = torch.arange(16, dtype=torch.float32, device=DEVICE)
    inner = torch.empty(0, device=DEVICE).set_(base.untyped_storage()[32:64])  # elements 8..15
    assert inner.untyped_storage().data_ptr() == base.data_ptr() + 32
    inbox, outbox = CTX.Queue(), CTX.Queue()
    child = CTX.Process(target=_add_from_queue, args=(inbox, outbox))
    child.start()
    inbox.put((inner, torch.zeros(3).share_memory_()))
    _, _, before, after = outbox.get(timeout=TIMEOUT)
    _finish(child)
    assert before == [float(i) for i in range(8, 16)]
    assert after == [float(i) + 1 for i in range(8, 16)]
    assert base.cpu().tolist() == [float(i) for i in range(8)] + [float(i) + 1 for i in range(8, 16)]


def test_results_of_operators_share_their_memory_many_in_one_message():
    """Results of the device's operators (where the vendor's kernels allocate them, memory the
    device adopted from the vendor's allocator) are shared like tensors the device allocated;
    several may sit in one allocation of that allocator, which the child then maps once."""
    x = torch.arange(8, dtype=torch.float32, device=DEVICE)
    results = [x + 1, x * 2, (x - 3)[2:6], x.to(torch.int32)]
    expected = [r.cpu() for r in results]
    seen = _exchange(_add_each, results)
    assert seen == [(e + 1).tolist() for e in expected]
    assert [r.cpu().tolist() for r in results] == [(e + 1).tolist() for e in expected]
    assert x.cpu().tolist() == [float(i) for i in range(8)]


def test_a_received_tensor_is_not_sent_on():
    said = _exchange(_send_on, torch.ones(4, device=DEVICE))
    assert "received from another process is not sent on" in said


def test_what_cannot_be_shared_is_refused_in_one_line():
    with pytest.raises(RuntimeError, match=f"Cannot pickle {DEVICE} storage"):
        ForkingPickler.dumps(torch.ones(2, device=DEVICE).untyped_storage())
    leaf = torch.ones(2, device=DEVICE, requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf tensor which requires_grad"):
        ForkingPickler.dumps(leaf * 2)
