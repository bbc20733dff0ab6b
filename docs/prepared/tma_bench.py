"""The far update's row loop with C read and written by TMA descriptors, against the entry's (session 42).

    python docs/prepared/tma_bench.py [tma]  # GPU: the TMA variants against the entry's kernel (submission.py)
    python docs/prepared/tma_bench.py v      # GPU: what V's loads cost (diagnostic variants, wrong results)
    python docs/prepared/tma_bench.py vn     # GPU: V's and the next panel's V's loads apart; the next V transposed
    python docs/prepared/tma_bench.py w      # GPU: the entry's kernel on 128-column tiles
    python tests/gpu/kernel_sass.py docs/prepared/tma_bench.py _update_tma --descriptor C_desc=fp32[1,32,64] \
        --descriptor H_desc=fp32[1,32,64] --pointers src,H,T_in,W_in,W_out,V_in:bf16,V_next:bf16 --const NB=64 \
        --const V_WIDTH=64 --const TILE_COLS=64 --const TILE_ROWS=32 --const CHUNK_ROWS=512 --const NEXT=True \
        --const BF16X3=True --max-registers 168   # offline: what the TMA kernel compiles to

Question: does the update reach more of the DRAM's bandwidth when its tile of C comes in by TMA (a copy engine
per multiprocessor: no registers, no threads, no address arithmetic while in flight) and goes out by TMA stores,
instead of cp.async / st.global from every thread?  Only C moves by descriptor; V's parts (from L2) stay as the
entry loads them.  Every variant gets the same inputs: one launch of the far update of the first panel (block) of
n512 b640 and of one part of n1024 b60 (30 matrices, see CASES), without flags, as ``_factor_blocked`` launches
it for these inputs (NB, tiles, chunks), timed alone with ``triton.testing.do_bench`` (5 interleaved rounds), its
output compared with the entry kernel's.
Out-of-bounds boxes read as zeros and are clipped on store, which stands for the entry's row and column masks: a
chunk's last step ends on its chunk (CHUNK_ROWS is a multiple of TILE_ROWS), so a box crosses only the matrix's
last row, and the store's descriptor ends at c_end.  With the CPU and TRITON_INTERPRET=1, ``bench`` checks the
variants on one small launch.  Measured in session 42 (docs/perf.md): every TMA variant slower; vn in session 43.
"""

import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from conftest import load_module  # noqa: E402

E = load_module(Path(__file__).resolve().parents[2] / "submission.py", "tma_entry")


@triton.jit
def _update_tma(C_desc, H_desc, src, H, T_in, W_in, W_out, V_in, V_next, n, k0, c_begin, c_end, tiles, chunks,
                in_chunks, slots, NB: tl.constexpr, V_WIDTH: tl.constexpr, TILE_COLS: tl.constexpr,
                TILE_ROWS: tl.constexpr, CHUNK_ROWS: tl.constexpr, NEXT: tl.constexpr, BF16X3: tl.constexpr,
                LOAD_TMA: tl.constexpr = True, STORE_TMA: tl.constexpr = True, ONCE_V: tl.constexpr = False,
                ONCE_N: tl.constexpr = False, NEXT_T: tl.constexpr = False):
    b, t, c = E._update_program(tiles, chunks)
    vc = tl.arange(0, NB)
    tc0 = c_begin + t * TILE_COLS
    tc = tc0 + tl.arange(0, TILE_COLS)
    W = tl.zeros([NB, TILE_COLS], dtype=tl.float32)
    for q in range(0, in_chunks):
        W += tl.load(E._W_part(W_in, b, q, slots, n, vc, tc), mask=tc[None, :] < c_end, other=0.0)
    T = tl.load(T_in + b * NB * NB + vc[:, None] * NB + vc[None, :])
    Z_hi, Z_lo = E._split(tl.dot(tl.trans(T), W, input_precision="tf32x3"), BF16X3)
    row_end = tl.minimum((c + 1) * CHUNK_ROWS, n - k0)
    W_next = tl.zeros([NB, TILE_COLS], dtype=tl.float32)
    b32 = b.to(tl.int32)
    # Diagnostics, wrong results: ONCE_V (ONCE_N) loads one step's parts of V (of the next panel's V) for every step.
    r_first = c * CHUNK_ROWS + tl.arange(0, TILE_ROWS)
    if ONCE_V:
        V_hi, V_lo = E._load_V_parts(V_in, b, n, r_first[:, None], vc[None, :], row_end, NB, V_WIDTH)
    if ONCE_N:
        Nt_hi, Nt_lo = E._load_V_parts(V_next, b, n, r_first[None, :] + NB, vc[:, None], row_end - NB, NB, NB)
    for r0 in range(c * CHUNK_ROWS, row_end, TILE_ROWS):
        rr = r0 + tl.arange(0, TILE_ROWS)
        if not ONCE_V:
            V_hi, V_lo = E._load_V_parts(V_in, b, n, rr[:, None], vc[None, :], row_end, NB, V_WIDTH)
        if LOAD_TMA:
            C = C_desc.load([b32, k0 + r0, tc0]).reshape(TILE_ROWS, TILE_COLS)
        else:
            C = tl.load(src + b * n * n + (k0 + rr[:, None]) * n + tc[None, :],
                        mask=(rr[:, None] < row_end) & (tc[None, :] < n), other=0.0)
        C -= E._dot_parts(V_hi, V_lo, Z_hi, Z_lo)
        if STORE_TMA:
            H_desc.store([b32, k0 + r0, tc0], C.reshape(1, TILE_ROWS, TILE_COLS))
        else:
            tl.store(H + b * n * n + (k0 + rr[:, None]) * n + tc[None, :], C,
                     mask=(rr[:, None] < row_end) & (tc[None, :] < c_end))
        if NEXT:
            if NEXT_T:  # V_next transposed, [batch, 2, NB, n]: V₁ᵀ's rows lie along memory
                r = rr[None, :] - NB
                at = V_next + b * 2 * NB * n + vc[:, None] * n + r
                ok = (r >= 0) & (r < row_end - NB)
                Nt_hi = tl.load(at, mask=ok, other=0.0)
                Nt_lo = tl.load(at + NB * n, mask=ok, other=0.0)
            elif not ONCE_N:
                Nt_hi, Nt_lo = E._load_V_parts(V_next, b, n, rr[None, :] - NB, vc[:, None], row_end - NB, NB, NB)
            C_hi, C_lo = E._split(C, BF16X3)
            W_next += E._dot_parts(Nt_hi, Nt_lo, C_hi, C_lo)
    if NEXT:
        tl.store(E._W_part(W_out, b, c, slots, n, vc, tc), W_next, mask=tc[None, :] < c_end)


# (n, batch, NB): the far update of the first panel (block) as _factor_blocked launches it on the H100 / H200 for
# n512 b640 (one part) and n1024 b60, whose chain runs in PARTS_OWN_SM parts of 30 matrices (sessions 42 and
# before timed one launch of all 60, which the chain never makes)
CASES = [(512, 640, 64), (1024, 60 // E.PARTS_OWN_SM, 32)]
# Each set's variants: the options of one launch of _update_tma (its switches, num_stages), or of the entry's
# _panel_update on tiles of other columns and warps (cols, warps, maxnreg).
VARIANT_SETS = dict(
    tma=dict(tma={}, tmaL=dict(STORE_TMA=False), tma2=dict(num_stages=2), tma4=dict(num_stages=4)),
    v=dict(same=dict(LOAD_TMA=False, STORE_TMA=False),
           vonce=dict(LOAD_TMA=False, STORE_TMA=False, ONCE_V=True, ONCE_N=True),
           vonceT=dict(ONCE_V=True, ONCE_N=True)),
    vn=dict(same=dict(LOAD_TMA=False, STORE_TMA=False), onceV=dict(LOAD_TMA=False, STORE_TMA=False, ONCE_V=True),
            onceN=dict(LOAD_TMA=False, STORE_TMA=False, ONCE_N=True),
            nextT=dict(LOAD_TMA=False, STORE_TMA=False, NEXT_T=True)),
    w=dict(c128w8=dict(cols=128, warps=8), c128w8r128=dict(cols=128, warps=8, maxnreg=128),
           c128w4=dict(cols=128, warps=4)))

def launches(n: int, batch: int, nb: int, device: str, variants: dict):
    """Inputs and the launches (the entry's and ``variants``') of the far update at k0 = 0 over columns [2 nb, n), their
    outputs, the bytes of C they move, and c_begin."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    g = torch.Generator(device="cpu").manual_seed(1)
    tile_cols, tile_rows = E.TRAILING_TILE_COLS, E.TRAILING_TILE_ROWS
    k0, c_begin, c_end = 0, 2 * nb, n
    tiles = E._cdiv(c_end - c_begin, tile_cols)
    programs = E.UPDATE_PROGRAMS_PER_SM * (torch.cuda.get_device_properties(0).multi_processor_count
                                           if device == "cuda" else 1)
    chunks, chunk_rows = E._row_chunks(n, k0, batch * tiles, programs)
    slots = E._chunks_asked(n, batch, programs)
    src = torch.randn(batch, n, n, generator=g).to(device)
    parts = torch.bfloat16 if device == "cuda" else torch.float32
    V = (torch.randn(batch, 2, n, nb, generator=g) * 0.1).to(device, parts)
    V_next = (torch.randn(batch, 2, n, nb, generator=g) * 0.1).to(device, parts)
    V_next_T = V_next.transpose(-1, -2).contiguous()  # [batch, 2, nb, n]
    T = torch.triu(torch.randn(batch, nb, nb, generator=g) * 0.1).to(device)
    W_in = torch.randn(batch * slots * nb * n, generator=g).to(device)
    outs = {name: (torch.zeros_like(src), torch.zeros(batch * slots * nb * n, device=device))
            for name in ["entry", *variants]}
    grid = (tiles * chunks * batch,)
    shapes = dict(NB=nb, V_WIDTH=nb, TILE_COLS=tile_cols, TILE_ROWS=tile_rows, CHUNK_ROWS=chunk_rows, NEXT=True,
                  BF16X3=True)
    counters = torch.zeros(1, dtype=torch.int32, device=device)

    def entry_with(name, cols, warps, maxnreg=None):
        """The entry's kernel on tiles of ``cols`` columns with ``warps`` warps."""
        H, W_out = outs[name]
        t = E._cdiv(c_end - c_begin, cols)
        ch, ch_rows = E._row_chunks(n, k0, batch * t, programs)

        def launch():
            E._panel_update[(t * ch * batch,)](
                src, H, W_in, W_in, T, T, W_in, W_out, V, V_next, n, k0, c_begin, c_end, t, ch, chunks, slots,
                counters, 0, BUILD_T=False, GRAM=False, FLAGS=False, PDL=False, num_warps=warps, maxnreg=maxnreg,
                **dict(shapes, TILE_COLS=cols, CHUNK_ROWS=ch_rows))
        return launch

    entry = entry_with("entry", tile_cols, E.UPDATE_WARPS, E.UPDATE_MAX_REGISTERS if chunks == 1 else None)

    box = [1, tile_rows, tile_cols]
    C_desc = TensorDescriptor(src, [batch, n, n], [n * n, n, 1], box)

    def variant(name, options):
        H_t, W_t = outs[name]
        H_desc = TensorDescriptor(H_t, [batch, n, c_end], [n * n, n, 1], box)
        next_parts = V_next_T if options.get("NEXT_T") else V_next

        def launch():
            _update_tma[grid](C_desc, H_desc, src, H_t, T, W_in, W_t, V, next_parts, n, k0, c_begin, c_end, tiles,
                              chunks, chunks, slots, num_warps=E.UPDATE_WARPS,
                              maxnreg=E.UPDATE_MAX_REGISTERS if chunks == 1 else None, **shapes, **options)
        return launch

    runs = dict(entry=entry, **{name: entry_with(name, **how) if "cols" in how else variant(name, how)
                                for name, how in variants.items()})
    moved = 2 * batch * n * (c_end - c_begin) * 4  # C read and written once
    return runs, outs, moved, c_begin


def bench(which: str) -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"{torch.cuda.get_device_name() if device == 'cuda' else 'cpu (interpreter)'}, Triton {triton.__version__}")
    for n, batch, nb in CASES if device == "cuda" else [(64, 2, 16)]:
        runs, outs, moved, c_begin = launches(n, batch, nb, device, VARIANT_SETS[which])
        H_e, W_e = outs["entry"]
        for name, run in list(runs.items()):
            try:
                run()
            except Exception as error:  # noqa: BLE001 - a variant that does not compile or launch
                print(f"n{n} b{batch} NB{nb}: {name} failed: {type(error).__name__}: {str(error)[:300]}")
                del runs[name]
                continue
            H_t, W_t = outs[name]
            dh = (H_e[:, :, c_begin:] - H_t[:, :, c_begin:]).abs().max().item()
            dw = (W_e - W_t).abs().max().item()
            print(f"n{n} b{batch} NB{nb} {name}: max |H diff| {dh:.3g} (of "
                  f"{H_e[:, :, c_begin:].abs().max().item():.3g}), max |W_out diff| {dw:.3g}", flush=True)
        if device != "cuda":
            continue
        times = {name: [] for name in runs}
        for _ in range(5):  # interleaved
            for name, run in runs.items():
                times[name].append(triton.testing.do_bench(run, warmup=25, rep=200))
        base = statistics.median(times["entry"])
        print(f"n{n} b{batch} NB{nb}: " + " | ".join(
            f"{name} {statistics.median(t) * 1e3:.1f} µs {moved / statistics.median(t) / 1e9:.2f} TB/s "
            f"{statistics.median(t) / base:.3f}" for name, t in times.items()), flush=True)
    return 0


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "tma"
    if which not in VARIANT_SETS:
        sys.exit(f"tma_bench.py: expected one of {', '.join(VARIANT_SETS)}, got {which!r}")
    sys.exit(bench(which))
