"""GPU-only (collected where CUDA exists): the entry's prepared call paths give the plain path's numbers.

On a GPU, ``custom_kernel`` keeps one prepared chain per (batch, n, device, alignment of A): a graph replay
(``_GraphedQR``) or launches made straight from the recorded compiled kernels (``_DirectQR``).  Each is checked
against the same kernels launched through Triton's own path (``_factor``), on several inputs of one shape, on an
input whose data is not 16-byte aligned, and for a fresh output every call with the input left untouched; and
calls from several host threads at once never share a chain (a call finding another one running is refused);
a call cut short between launches leaves no chain behind.
"""

import threading
import time
from pathlib import Path

import pytest
import torch

import reference
from conftest import load_module

ROOT = Path(__file__).resolve().parents[2]
sub = load_module(ROOT / "submission.py")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

# (batch, n, the prepared path): one launch; a latency-bound chain; a large input launched directly (n 600: padded
# to 608); split panels, latency-bound (as it is) and large (padded to 1104).
SHAPES = [(20, 32, "_DirectQR"), (40, 176, "_GraphedQR"), (30, 600, "_DirectQR"), (2, 1100, "_GraphedQR"),
          (9, 1100, "_GraphedQR")]


def _plain(A):
    H, tau = sub._outputs(A)
    sub._factor(A, H, tau)
    return H, tau


@pytest.mark.parametrize("batch,n,path", SHAPES)
def test_prepared_path_matches_the_plain_launches(batch, n, path):
    for seed in (1, 2, 3):  # the first call prepares, the later ones replay
        A = reference.generate_input(batch, n, 2, seed, "mixed", device="cuda")
        before = A.clone()
        H, tau = sub.custom_kernel(A)
        H_plain, tau_plain = _plain(A)
        assert torch.equal(A, before)
        assert reference.check_implementation(A, (H, tau))[0]
        if n <= sub.MAX_REGISTER_PANEL_ROWS:  # (split panels add their partial sums atomically, in any order)
            assert torch.equal(H, H_plain) and torch.equal(tau, tau_plain)
    key = (batch, n, A.device, True)
    assert type(sub._prepared[key]).__name__ == path
    H2, _ = sub.custom_kernel(A)
    assert H2.data_ptr() != H.data_ptr()


def test_outputs_of_many_calls_stay_their_own():
    # Many calls back to back of one prepared chain, whose own buffers every call reuses: every call's outputs
    # stay its input's factorization after all the later calls.
    inputs = [reference.generate_input(20, 32, 2, 100 + i, "dense", device="cuda") for i in range(120)]
    outputs = [sub.custom_kernel(A) for A in inputs]
    for A, (H, tau) in zip(inputs, outputs):
        H_plain, tau_plain = _plain(A)
        assert torch.equal(H, H_plain) and torch.equal(tau, tau_plain)
    assert len({t.data_ptr() for out in outputs for t in out}) == 2 * len(outputs)
    # n32 b20's outputs come from a pool (_OutputPool): once the caller lets them go, at most the pool's current
    # chunk stays.
    del outputs
    pool = sub._prepared[(20, 32, inputs[0].device, True)].outputs
    before = torch.cuda.memory_allocated()
    for _ in range(3 * pool.calls):
        sub.custom_kernel(inputs[0])
    assert torch.cuda.memory_allocated() - before <= pool.calls * (pool.h + pool.t) * 4 <= sub.POOL_CHUNK_BYTES


def test_a_padded_chain_keeps_nothing_of_an_earlier_call():
    # n = 600 is not a multiple of ROW_MULTIPLE: the chain factors a zero-padded copy in a buffer it keeps for
    # every call.  A call on NaNs fills the padding with NaNs; the next call must find it zero again.
    batch, n = 30, 600
    assert n % sub.ROW_MULTIPLE
    sub.custom_kernel(torch.full((batch, n, n), float("nan"), device="cuda"))
    A = reference.generate_input(batch, n, 2, 9, "dense", device="cuda")
    H, tau = sub.custom_kernel(A)
    H_plain, tau_plain = _plain(A)
    assert torch.equal(H, H_plain) and torch.equal(tau, tau_plain)


@pytest.mark.parametrize("batch,n,path", SHAPES[:3])
def test_unaligned_input_gets_its_own_chain(batch, n, path):
    storage = torch.empty(batch * n * n + 1, dtype=torch.float32, device="cuda")
    A = storage[1:].view(batch, n, n)  # 4 bytes past a 16-byte boundary
    A.copy_(reference.generate_input(batch, n, 2, 5, "dense", device="cuda"))
    assert A.data_ptr() % 16 != 0
    out = sub.custom_kernel(A)
    assert reference.check_implementation(A, out)[0]
    assert (batch, n, A.device, False) in sub._prepared


def test_a_call_while_another_runs_is_refused():
    # The token a call holds while it runs a prepared chain (here taken by hand, as another thread's call would).
    A = reference.generate_input(30, 600, 2, 1, "dense", device="cuda")
    sub._token.pop()
    try:
        with pytest.raises(RuntimeError, match="running on another host thread"):
            sub.custom_kernel(A)
    finally:
        sub._token.append(True)
    assert reference.check_implementation(A, sub.custom_kernel(A))[0]


def test_a_call_cut_short_between_launches_is_not_replayed():
    # b30 n600 runs with flags: a call interrupted between two launches leaves its chain's counters short of the
    # join that clears them.  The entry drops that chain; the next call prepares a fresh one and is right.
    A = reference.generate_input(30, 600, 2, 7, "dense", device="cuda")
    H, tau = sub.custom_kernel(A)
    key = (30, 600, A.device, True)
    chain = sub._prepared[key]
    half = len(chain.records) // 2
    _, arguments, own = chain.records[half]

    def interrupted(*args):
        raise KeyboardInterrupt

    chain.records[half] = (interrupted, arguments, own)
    with pytest.raises(KeyboardInterrupt):
        sub.custom_kernel(A)
    assert key not in sub._prepared
    H2, tau2 = sub.custom_kernel(A)
    assert sub._prepared[key] is not chain
    assert torch.equal(H2, H) and torch.equal(tau2, tau)


def test_calls_from_several_threads_never_share_a_chain():
    # b30 n600 runs with flags: its chain's counters (and buffers) serve every call of that shape, so calls from
    # four host threads at once must not interleave their launches.  Each thread calls the entry 8 times on its own
    # input: a call either returns that input's output from one thread alone, bit for bit, or is refused with the
    # token's error; and the GPU's work must end (no hang).
    inputs = [reference.generate_input(30, 600, 2, seed, "dense", device="cuda") for seed in range(4)]
    alone = [sub.custom_kernel(A) for A in inputs]
    outputs = [[] for _ in inputs]
    refused, errors = [], []

    def calls(i):
        for _ in range(8):
            try:
                outputs[i].append(sub.custom_kernel(inputs[i]))
            except RuntimeError as exc:
                (refused if "another host thread" in str(exc) else errors).append(exc)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    threads = [threading.Thread(target=calls, args=(i,), daemon=True) for i in range(len(inputs))]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60  # the calls take well under a second
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not errors and not any(thread.is_alive() for thread in threads)
    done = torch.cuda.Event()
    done.record()
    while not done.query():
        assert time.monotonic() < deadline + 30, "the GPU's work did not end: interleaved chains waiting on each other"
        time.sleep(0.01)
    assert sum(map(len, outputs)) + len(refused) == 32 and any(outputs)
    for (H, tau), returned in zip(alone, outputs):
        for H_i, tau_i in returned:
            assert torch.equal(H_i, H) and torch.equal(tau_i, tau)
