"""GPU-only: the host's time of ways to allocate an entry's new outputs H [b, n, n] and tau [b, n] on CUDA, µs a
call (best of 5 runs of 20 000 calls, no synchronize inside), and of one Triton-free launch for scale
(docs/perf.md, "v71").

    python docs/prepared/alloc_bench.py [B:N ...]      (default 20:32 40:176)
"""
import sys
import timeit

import torch


def variants(A):
    b, n = A.shape[0], A.shape[-1]
    k = b * n * n
    at = (k + 31) // 32 * 32

    def two():
        return torch.empty_like(A), A.new_empty(b, n)

    def strided():
        out = A.new_empty(at + b * n)
        return out.as_strided((b, n, n), (n * n, n, 1)), out.as_strided((b, n), (n, 1), at)

    def sliced():
        out = A.new_empty(at + b * n)
        return out[:k].view(b, n, n), out[at:].view(b, n)

    def split():
        H, _, tau = A.new_empty(at + b * n).split((k, at - k, b * n))
        return H.view(b, n, n), tau.view(b, n)

    pool = [None, 0]

    def pooled():  # views of the next part of a pool of 48 calls' outputs
        if not pool[1]:
            pool[0], pool[1] = A.new_empty(48 * (at + b * n)), 48
        pool[1] -= 1
        base = pool[1] * (at + b * n)
        return pool[0].as_strided((b, n, n), (n * n, n, 1), base), pool[0].as_strided((b, n), (n, 1), base + at)

    def one_only():
        return A.new_empty(at + b * n)

    def fill():  # one small kernel launched by torch, for scale
        return A.new_empty(b, n).zero_()

    return two, strided, sliced, split, pooled, one_only, fill


for case in sys.argv[1:] or ["20:32", "40:176"]:
    b, n = (int(v) for v in case.split(":"))
    A = torch.randn(b, n, n, device="cuda")
    row = f"b{b} n{n}:"
    for f in variants(A):
        for _ in range(2000):
            f()
        torch.cuda.synchronize()
        us = min(timeit.repeat(f, number=20000, repeat=5)) / 20000 * 1e6
        torch.cuda.synchronize()
        row += f" | {f.__name__} {us:.2f}"
    print(row, flush=True)
