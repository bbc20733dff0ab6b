"""Batched Householder QR in Triton: ``custom_kernel(A) -> (H, tau)`` in ``torch.geqrf``'s compact form.

Data layout.  ``A`` is float32 ``[batch, n, n]``, row-major, and is only read.  ``H`` (same shape) ends with R
on and above the diagonal and the reflector's vector ``v_k`` below it in column k (``v_k[k] = 1`` is implicit),
``tau[b, k]`` beside it, so that ``Q = H_0 … H_{n-1}``, ``H_k = I - tau_k v_k v_kᵀ`` and ``Qᵀ A = R``.  The first
panel and its update read A and write every entry of H; everything after works in place in H.
Triton compiles an integer argument knowing whether it is a multiple of 16, and moves a row 16 bytes at a time
only where it knows the row's start and every bound its mask compares with to be multiples of 4 elements: for n
not a multiple of ROW_MULTIPLE every access would be a float at a time.  A large input of such n is factored as
the top left corners of zero matrices of the next multiple m of ROW_MULTIPLE (``_factor_padded``: ``_pad``, the
chain, ``_unpad``): the zero rows below a matrix leave every reflector of its columns as it is, and the
reflectors of the zero columns are trivial (tau = 0), so the corner of the m x m factorization is the n x n one.

Algorithm (blocked compact-WY).  The columns are cut into panels of ``NB`` columns.  For the panel at column
``k0``:
  1. ``_factor_panel``: one program per matrix holds the panel ``H[k0:, k0:k0+NB]`` in registers and runs the
     panel's reflectors one by one (each applied to the panel columns on its right); it also builds T of the
     panel's compact WY form ``H_0 … H_{NB-1} = I - V T Vᵀ`` (T upper triangular), a column per reflector
     (``_T_column``) from the row of the Gram matrix VᵀV that each reflector yields for free (below).
     A panel taller than MAX_REGISTER_PANEL_ROWS (few large matrices: too many rows for one program) is split
     in row slices over several programs instead (``_reflect_split_panel``, one launch per reflector; the
     slices add their partial sums atomically into one buffer in global memory); it stores the Gram's rows,
     and T is built from them afterwards (``_store_T``).
  2. The update of the trailing columns C with the panel's compact WY form: ``C <- C - V (Tᵀ (Vᵀ C))``.
     ``_panel_products`` forms Vᵀ C and ``_panel_update`` the rest, each program on one tile of columns and
     one chunk of its rows; the rows are cut in chunks only as far as needed to give the GPU enough programs
     (few large matrices), and the chunks' parts of Vᵀ C meet in global memory.  A large input is bound by
     the update's memory traffic, so its update also forms the next panel's Vᵀ C while it holds the updated
     columns (``NEXT``): it first updates only the next panel's NB columns, the next panel is factored, and
     the update of the remaining columns then adds V₁ᵀ C for that panel (V₁ its reflectors) on the way, one
     read and one write of the trailing matrix per panel.  A latency-bound input keeps the plain order (the
     whole update, the next panel, its ``_panel_products``: three passes, but shorter launches on the
     critical path).  A large input's one products launch (the first panel's) takes tiles of
     PRODUCTS_TILE_COLS columns (V is read once per tile: wider tiles read it less often).  The two large
     products run on bf16 tensor cores, error-compensated (``_split``, ``_dot_parts``: each float32 operand
     split into a bf16 high and a bf16 low part, the three significant cross products summed in float32): each
     product is then exact to 3·2⁻¹⁶ of |a||b| instead of float32's 2⁻²⁴, at half the tensor-core cost of
     compensated tf32.  The residual gates grow with n and that error does not: from BF16X3_MIN_N on it stays
     below a tenth of them on every case kind; smaller matrices keep compensated tf32 (each operand split into
     two tf32 parts).  V is split once, by the kernel that finishes the panel: it stores V (1 on the diagonal,
     0 above) as its two parts beside H (``_store_V_parts``), and every update program loads the parts, so that
     the update's row loop splits only C.
  3. Where the matrices outnumber the multiprocessors (a large input of many matrices, register panels), steps 1
     and 2 work on blocks of BLOCK_PANELS = 2 panels: panel a is factored, panel b's NB columns are updated by
     it, panel b is factored, and ``_join_panels`` joins the two compact WY forms into the block's,
     ``H_a H_b = I - [V_a V_b] T [V_a V_b]ᵀ`` with ``T = [[T_a, -T_a (V_aᵀ V_b) T_b], [0, T_b]]``, which updates
     the rest: one read and one write of the trailing matrix per 2 NB columns, not per NB.  Each panel stores
     its V's parts straight into their place in the block's (rows V_WIDTH = 2 NB apart).  V_aᵀ V_b is summed
     from those parts by an extra column tile of the launch that first reads them (the update before, with its
     look-ahead; ``_gram_part``), a part per row chunk, so that the join is only two small products.
A small matrix (n <= SMALL_N_MAX) is factored whole by one warp (``_factor_small_matrix``): a column per thread,
so that a reflector's sums over rows are each thread's own, and its steps unrolled.
A small input (up to LATENCY_BOUND_BYTES; SPLIT_LATENCY_BOUND_BYTES where panels are split) cannot fill the
GPU: its time is the chain of launches and of reflectors, so it gets panels of NARROW_PANEL_WIDTH columns (half
the work per reflector, twice the update passes, which are cheap here); a large one is bound by the update's
memory traffic and gets PANEL_WIDTH.
Where the launches rather than the kernels set the time (a small input, or split panels with a launch per
reflector), the launch chain of a (batch, n, device) is captured once as a CUDA graph and replayed
(``_GraphedQR``); otherwise the first call records each launch's compiled kernel and arguments and the later
ones replay the records (``_DirectQR``): Triton's own launch path costs tens of microseconds of the host's time
per launch.  On Hopper and newer every kernel is a programmatic dependent launch: it starts while its
predecessor finishes and waits for it (``_follow``) before touching memory, which hides most of the launch
latency of a chain of short kernels.  A large input with register panels goes further (flags): there a kernel
waits not for the whole kernel before it but only for its own matrices' earlier programs, which count
themselves done per matrix in global memory (``_await``, ``_signal``, ``_join``), so each matrix moves through the
chain at its own pace and a launch's programs start while the last ones of the launch before still run.  Its
batch may also be cut in parts, each its own chain, their launches interleaved so that one part's panels run
beside another part's update (``_factor_in_parts``).

One reflector (``_reflector``), following the folded reductions of the design note: with the column
``x = P[j:, j]`` of the current panel P, ``alpha = x[0]``, ``d[c] = P[j, c]`` (the diagonal row) and
``m[c] = sum_{r>j} x[r] P[r, c]`` (so ``sigma = m[j] = |x[1:]|^2``), the reflector is
``beta = -sign(alpha) sqrt(alpha^2 + sigma)``, ``tau = (beta - alpha) / beta``, ``v[1:] = x[1:] / (alpha - beta)``
and its action on column c is ``P[:, c] -= tau v w[c]`` with ``w[c] = vᵀ P[:, c] = d[c] + m[c] / (alpha - beta)``.
A trivial reflector (``sigma == 0``) has ``tau = 0`` and leaves the column, diagonal included, as it is.
For the earlier columns c < j, which hold the finished vectors v_c, the same sum is ``w[c] = v_cᵀ v_j``: row j of
VᵀV comes with the reflector, and T needs no product of V with itself.

A panel's rows in registers.  A block of panel rows is loaded as a [rows, NB] tile and held as [rows, NB // 4, 4]
(the same registers): 16-byte loads give each thread runs of 4 consecutive columns, and the NB // 4 runs of a row
lie in consecutive lanes of one warp.  A tile's rows are a power of 2, a panel's need not be, and a padding row
costs a step what a panel row does: a register panel is held as a tuple of TILES tiles of an eighth of the power of
2 above its rows (``_panel_tiles``), whose folded sums are added before their one reduction.  Every reflector needs
its column x everywhere: the thread holding column j picks it from its run, and the other lanes of the row take it
from that lane by one shuffle (``_from_lane``), not by a sum over the row's lanes (three shuffles and additions per
row at NB = 32).  Triton lays the tile out this way only for a load it knows 16-byte aligned: the host passes
``SHUFFLE`` where it is (n % 16 == 0 and an aligned pointer) and the kernel marks the tile's pointers so
(``_panel_tile``); elsewhere (and under the interpreter) the column is summed over the row's lanes.  x, and the
reflector's scalars, are then carried as [rows, NB // 4] and [NB // 4] tensors whose entries along the runs are all
equal, so that a thread holds one of each per row, as a row vector would.
"""

import os

import torch
import triton
import triton.language as tl

SMALL_N_MAX = 32  # up to this n one warp factors the whole matrix, a column per thread
ROW_MULTIPLE = 16  # a large input whose n is not a multiple of this is factored padded to one with zeros
LATENCY_BOUND_BYTES = 32 * 2**20  # an input up to this size is latency-bound: narrow panels, a CUDA graph
# (where panels are split, n > MAX_REGISTER_PANEL_ROWS, only up to this size: above it the wider panels and the
# look-ahead pay for the split launches they add, 2 to 23 % faster from 18 MiB on but for n1200 b4, 3 % slower;
# docs/perf.md v75)
SPLIT_LATENCY_BOUND_BYTES = 16 * 2**20
NARROW_PANEL_WIDTH = 16  # (NB) panel width of a latency-bound input: a cheaper chain of reflectors;
PANEL_WIDTH = 32  # otherwise: half as many passes of the trailing update over memory
# A large input with register panels (n <= MAX_REGISTER_PANEL_ROWS) and more matrices than multiprocessors takes
# its panels in blocks of this many and updates the trailing matrix once per block (``_factor_blocked``): half the
# update's memory traffic for a longer chain per block, which pays where other matrices fill the GPU meanwhile
# (n512 b640: 8 % faster with blocks, then 4.5 % more with v66's join; n1024 b60, one matrix a multiprocessor:
# 20 % slower with v64's blocks, even with v66's: docs/perf.md v64, v66).
BLOCK_PANELS = 2
TRAILING_TILE_COLS = 64  # trailing columns per program of the update (and of a latency-bound input's products)
TRAILING_TILE_ROWS = 32  # rows per step of a pass over a tile (the row chunks are multiples)
PRODUCTS_TILE_COLS = 128  # trailing columns per products program of a large input (a power of 2)
MAX_REGISTER_PANEL_ROWS = 1024  # taller panels are split over several programs per matrix
# Rows per program of a split panel: 32, on one warp, so that a step exchanges nothing across warps (64 rows on
# one or two warps, 128 on two or four, and 16 were slower at n2048 and n4096: docs/perf.md "Split panels in
# slices of 32 rows").
SPLIT_PANEL_SLICE = 32
# Floats of a register panel per thread (which sets the program's warps).  Where the panel's chain of reflectors
# is the critical path (a latency-bound input, a split panel's slice) it is spread thin to shorten each step; a
# program that shares its multiprocessor with others (more matrices than multiprocessors) holds more per thread,
# so each reduction crosses fewer warps; one matrix per multiprocessor of a large input is in between (measured
# best of 32 / 64 / 128, docs/perf.md v32).
PANEL_FLOATS_PER_THREAD_LATENCY = 32
PANEL_FLOATS_PER_THREAD_OWN_SM = 64
PANEL_FLOATS_PER_THREAD_SHARED = 128
# A register panel's rows are held in tiles of this fraction of the power of 2 above them (a tensor's rows are a
# power of 2): at most that share of its registers and steps go to padding rows, against up to half in one tile.
PANEL_TILE_FRACTION = 8
UPDATE_WARPS = 4  # warps per program of the update's two kernels
# Registers per thread of an update program when the matrices alone give the launch many programs per
# multiprocessor (rows not cut in chunks): the fused update needs ~190, which lets two programs share a
# multiprocessor; capped, three do (50 % more loads in flight) for a few spilled registers.  A chunked launch
# is sized to about UPDATE_PROGRAMS_PER_SM programs per multiprocessor and keeps its registers.
UPDATE_MAX_REGISTERS = 168
# From this n on, the update's two products run in compensated bf16, below it in compensated tf32: the gates
# grow with n (20 n eps) and bf16's error does not (residual margins, CPU checks: about 8 / n of the gate,
# 0.14 at n = 64, 0.06 at n = 128); small inputs gain little from the faster products anyway.
BF16X3_MIN_N = 128
# The update's rows are split over programs until about this many share a multiprocessor.  Where panels are split
# (n > MAX_REGISTER_PANEL_ROWS) the update runs alone between the split panels' launches, and its chunked program
# holds 168 registers: three fit a multiprocessor, and three make n4096 b2's far update about one wave (four: 4 %
# slower on the evaluator's clock, docs/perf.md v73).  Elsewhere its programs share the device with register
# panels (flags) or are small (latency-bound inputs): four (n1024 b60 against two, three, six and eight; n352 b40
# against three).
UPDATE_PROGRAMS_PER_SM = 4
UPDATE_PROGRAMS_PER_SM_SPLIT = 3
# A large input with register panels runs with flags (see ``_factor_in_parts``), its batch in this many parts: two
# where every matrix's panel has a multiprocessor to itself (one part's panels then run beside the other part's
# update), one where the matrices outnumber the multiprocessors (measured best of 1 to 4, docs/perf.md v55).
PARTS_OWN_SM = 2
PARTS_SHARED = 1
# A directly launched call whose H is at most POOL_MAX_BYTES takes its outputs from a pool (``_OutputPool``), cut
# from one allocation of at most POOL_CHUNK_BYTES for up to POOL_CALLS calls: such a call (n32 b20) is host-bound,
# and two allocations are about 3.5 µs of its host's time.
POOL_MAX_BYTES = 2**18
POOL_CHUNK_BYTES = 4 * 2**20
POOL_CALLS = 64
# Under the Triton interpreter (CPU tests) two kernels take another route to the same numbers (_bf16_parts,
# _fold_sums).
_INTERPRETED = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") == "1")


@triton.jit
def _follow(PDL: tl.constexpr):
    """Programmatic dependent launch: wait until the previous kernel has finished and its writes are visible
    (before any access to memory), then let the next kernel launch at once, to wait in turn."""
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def _await(counters, b, wait, FLAGS: tl.constexpr):
    """With FLAGS, the launch order alone does not make a kernel wait for the one before it: each program waits
    until ``wait`` programs of its own matrix b have finished (``counters[b]``, see ``_signal``), which are its
    matrix's every program of the launches before, and lets the next kernel launch at once (as a programmatic
    dependent, it waits in turn).  Matrices thus move through the chain each at its own pace, and one launch's
    programs start while the last ones of the launch before still run (on other matrices)."""
    if FLAGS:
        if not _INTERPRETED:
            tl.extra.cuda.gdc_launch_dependents()
        _wait_for_count(counters, b, wait)


@triton.jit
def _wait_for_count(counters, b, count):
    """Wait until ``counters[b] >= count``: one thread's acquire loads, then a barrier, so that every thread's
    reads come after them."""
    while tl.atomic_add(counters + b, 0, sem="acquire") < count:
        pass
    tl.debug_barrier()


@triton.jit
def _signal(counters, b, FLAGS: tl.constexpr):
    """With FLAGS, count this program as finished for matrix b, after every thread's writes."""
    if FLAGS:
        tl.debug_barrier()
        tl.atomic_add(counters + b, 1, sem="release")


@triton.jit
def _join(counters, total, PDL: tl.constexpr):
    """The last launch of a chain with FLAGS: program b waits until its matrix's ``total`` programs have
    finished, so that whatever follows the chain finds every matrix done, and clears its count for the next
    call (the counts start at 0)."""
    _follow(PDL)
    b = tl.program_id(0)
    _wait_for_count(counters, b, total)
    tl.atomic_xchg(counters + b, 0, sem="relaxed")


@triton.jit
def _panel_columns(NB: tl.constexpr):
    """Column indices of a panel row held as [NB // 4, 4]: runs of 4 consecutive columns, the layout of a
    16-byte load (a thread holds a run, the runs of one row lie in NB // 4 consecutive lanes)."""
    return tl.arange(0, NB // 4)[:, None] * 4 + tl.arange(0, 4)[None, :]


@triton.jit
def _panel_tile(base, offsets, SHUFFLE: tl.constexpr):
    """Pointers ``base + offsets`` of a [rows, NB] tile of panel rows.  With SHUFFLE (n % 16 == 0, base 16-byte
    aligned) they are marked as such: every row's runs of 4 columns start on 4 elements' bytes (16 for float32),
    so that Triton moves the tile a run at a time, and lays it out as ``_from_lane`` needs, whatever it proved of
    the arguments itself (it compiles to the same code where it proved it).  V's parts are stored through the
    same marks (``_store_V_parts``), which keeps the panel in that layout."""
    pointers = base + offsets
    if SHUFFLE:
        RUN_BYTES: tl.constexpr = 4 * base.dtype.element_ty.primitive_bitwidth // 8
        pointers = tl.max_contiguous(tl.multiple_of(pointers, [RUN_BYTES, RUN_BYTES]), [1, 4])
    return pointers


@triton.jit
def _from_lane(x, group):
    """Every entry of x [..., G] replaced by the entry of the same row in column run ``group``: one shuffle.
    x must be laid out as a panel tile's runs are (its last dimension across G consecutive lanes, one entry a
    lane: lane = row lane * G + run), i.e. derived from a tile loaded with 16-byte loads, and not loaded itself."""
    G: tl.constexpr = x.shape[len(x.shape) - 1]
    source = tl.full(x.shape, 0, tl.int32) + group
    lanes = tl.full(x.shape, 32 - G, tl.int32)  # lane = (row lane) * G + run: keep the row lane, pick the run
    return tl.inline_asm_elementwise(
        "{ .reg .b32 l; mov.u32 l, %laneid; and.b32 l, l, $3; or.b32 l, l, $2; shfl.sync.idx.b32 $0, $1, l, 31, -1; }",
        "=f,f,r,r", [x, source, lanes], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _pick(X, cols, j, SHUFFLE: tl.constexpr):
    """Column j of X [..., G, 4] (a block of panel rows, or a row [G, 4]), as [..., G] with every entry equal.
    With SHUFFLE every lane offers its run's entry j mod 4 and the other lanes take the one of run j // 4 by one
    shuffle (X laid out as ``_from_lane`` needs); otherwise column j's entry is summed over the runs.  The entries
    are summed as integers (their bits; the others 0): x + 0 is x for integers, so the compiler drops the sum of a
    run where it knows j mod 4 (x + 0.0 is not x for floats: -0.0).  Exact either way."""
    bits = X.to(tl.int32, bitcast=True)
    if SHUFFLE:
        own = tl.sum(tl.where(tl.arange(0, 4) == j % 4, bits, 0), axis=len(X.shape) - 1)
        return _from_lane(own.to(tl.float32, bitcast=True), j // 4)
    else:
        own = tl.sum(tl.where(cols == j, bits, 0), axis=len(X.shape) - 1)
        own = tl.broadcast_to(tl.expand_dims(tl.sum(own, axis=len(own.shape) - 1), len(own.shape) - 1), own.shape)
        return own.to(tl.float32, bitcast=True)


@triton.jit
def _panel_reflector(d, m, j, cols, SHUFFLE: tl.constexpr):
    """Reflector j from the diagonal row d and folded sums m ([G, 4] each; alpha = d[j], sigma = m[j]): tau,
    scale, diagonal and pivot = alpha - diagonal (alpha - beta, 0 if trivial) as [G] vectors of equal entries,
    and w = d + m scale."""
    alpha = _pick(d, cols, j, SHUFFLE)
    tau, scale, diagonal = _reflector(alpha, _pick(m, cols, j, SHUFFLE))
    return tau, scale, diagonal, alpha - diagonal, d + m * scale[:, None]


@triton.jit
def _reflector(alpha, sigma):
    """Reflector j of a panel from ``alpha = x[0]`` and ``sigma = |x[1:]|^2`` (see the module docstring), scalars
    or vectors whose entries are all equal.  Returns ``tau``, ``scale`` (multiplies ``x[1:]`` into ``v[1:]``, and
    the folded sums m into w = d + m scale) and the new diagonal entry, shaped as alpha."""
    trivial = sigma == 0.0
    norm = tl.sqrt(alpha * alpha + sigma)
    beta = tl.where(alpha >= 0.0, -norm, norm)
    tau = tl.where(trivial, 0.0, (beta - alpha) / tl.where(trivial, 1.0, beta))
    scale = 1.0 / tl.where(trivial, 1.0, alpha - beta)
    diagonal = tl.where(trivial, alpha, beta)
    return tau, scale, diagonal


@triton.jit
def _fold_sums(tiles, xs, row_sets, j):
    """The diagonal row ``d = P[j, :]`` and folded sums ``m[c] = sum_{r>j} x[r] P[r, c]`` of the panel rows held
    as a tuple of tiles P [R, G, 4] (``row_sets`` their panel-row indices [R], ``xs`` their column j [R, G]);
    partial sums when the tiles are part of the panel.  The tiles' terms are added first (every tile has the
    same layout: a thread's own registers), then one reduction gives both: one exchange between the warps per
    reflector, not one a tile or a sum."""
    d_terms = tl.where(row_sets[0][:, None, None] == j, tiles[0], 0.0)
    m_terms = tl.where(row_sets[0][:, None] > j, xs[0], 0.0)[:, :, None] * tiles[0]
    for i in tl.static_range(1, len(tiles)):  # fma: the same rounding however the compiler would contract
        d_terms += tl.where(row_sets[i][:, None, None] == j, tiles[i], 0.0)
        m_terms = tl.fma(tl.where(row_sets[i][:, None] > j, xs[i], 0.0)[:, :, None], tiles[i], m_terms)
    if _INTERPRETED:  # the interpreter runs a reduction's own combine function in Python, element by element
        return tl.sum(d_terms, axis=0), tl.sum(m_terms, axis=0)
    else:
        return tl.reduce((d_terms, m_terms), 0, _add_pairs)


@triton.jit
def _add_pairs(d0, m0, d1, m1):
    return d0 + d1, m0 + m1


@triton.jit
def _reflect_rows(P, x, rows, cols, j, tau, scale, diagonal, pivot, w, SCALED: tl.constexpr):
    """Apply reflector j to a block of panel rows P [R, G, 4] (``x`` [R, G] its column j): columns c > j lose
    ``tau v w[c]``, taken as ``x (tau scale w[c])`` below row j (v = x scale there) and ``pivot (tau scale w[c])``
    on it (v = 1 = pivot scale), so that no row multiplies x by scale; columns c < j (earlier reflectors, R) are
    untouched.  Column j becomes (diagonal, v[1:]), or with SCALED false (diagonal, x[1:]): a register panel
    keeps its columns unscaled until its store (``_factor_panel``), where each is multiplied once.  Column j is
    then the update's own result everywhere but on row j: the update's factor of column j is 0, and P - x 0 is
    x there."""
    r = rows[:, None]
    below = r > j
    coefficient = tl.where(below, x, tl.where(r == j, pivot, 0.0))
    updated = P - coefficient[:, :, None] * ((tau * scale)[:, None] * tl.where(cols > j, w, 0.0))[None, :, :]
    if SCALED:
        column_j = tl.where(below, x * scale, tl.where(r == j, diagonal, x))
        return tl.where(cols[None, :, :] == j, column_j[:, :, None], updated)
    else:
        return tl.where((cols[None, :, :] == j) & (r[:, :, None] == j), diagonal[None, :, None], updated)


@triton.jit
def _unfolded(x):
    """x itself, through a move that LLVM cannot see into (ptxas drops it).  Selections made from x then stay
    selections of x: LLVM would otherwise fold a selection of a selection into one of the values x was selected
    from, and keep both sets of registers of a panel live at once (spilled)."""
    if _INTERPRETED:  # the interpreter runs no assembly
        return x
    else:
        return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _store_V_parts(V_out, b, n, P, rows, cols, inside, BF16X3: tl.constexpr, WIDTH: tl.constexpr):
    """Store V of the finished panel rows P [R, G, 4] (panel-relative ``rows``; the vectors below the diagonal, 1
    on it, 0 above) as its two parts (``_split``) into ``V_out`` [batch, 2, n, WIDTH] (WIDTH = NB, or a block's
    2 NB with ``V_out`` at the panel's place in the block), row r at r WIDTH (a row starts on a multiple of 4
    elements, so its runs are aligned as ``_panel_tile`` marks them, whatever the panel's own alignment: marked,
    the store keeps the panel in the layout of its load, so that it is factored the same way with and without
    SHUFFLE)."""
    R: tl.constexpr = P.shape[0]
    NB: tl.constexpr = P.shape[1] * P.shape[2]
    offsets = rows[:, None] * WIDTH + tl.arange(0, NB)[None, :]
    r = rows[:, None, None]
    V = tl.where(r > cols[None, :, :], P, tl.where(r == cols[None, :, :], 1.0, 0.0))
    hi, lo = _split(tl.reshape(V, [R, NB]), BF16X3)
    matrix = V_out + b * 2 * n * WIDTH
    tl.store(_panel_tile(matrix, offsets, True), hi, mask=inside)
    tl.store(_panel_tile(matrix + n * WIDTH, offsets, True), lo, mask=inside)


@triton.jit
def _T_column(T, g, tau, j, t_rows, cols):
    """Column j of T [NB, G, 4] (row t_rows[i], column cols[g, e]) of the compact WY form, given its columns
    before j: T[j, j] = tau_j and T[:j, j] = -tau_j T[:j, :j] g[:j], with g [G, 4] holding
    g[c] = v_cᵀ v_j = (VᵀV)[c, j] (entries c >= j are ignored) and tau [G] equal entries."""
    s = tl.sum(tl.sum(T * tl.where(cols < j, g, 0.0)[None, :, :], axis=2), axis=1)
    r = t_rows[:, None, None]
    t_col = tl.where(r == j, tau[None, :, None], tl.where(r < j, -tau[None, :, None] * s[:, None, None], 0.0))
    return tl.where(cols[None, :, :] == j, t_col, T)


@triton.jit
def _store_T(T_out, b, lower, taus, t_rows, cols):
    """T of the compact WY form from ``lower`` [NB, G, 4], the strictly lower triangle of VᵀV (row j holds
    (VᵀV)[j, :j]), and the taus [G, 4]."""
    NB: tl.constexpr = lower.shape[0]
    T = tl.zeros(lower.shape, dtype=tl.float32)
    for j in range(0, NB):
        g = tl.sum(tl.where(t_rows[:, None, None] == j, lower, 0.0), axis=0)
        T = _T_column(T, g, _pick(taus, cols, j, False), j, t_rows, cols)
    tl.store(T_out + b * NB * NB + t_rows[:, None, None] * NB + cols[None, :, :], T)


@triton.jit
def _panel_offsets(b, n, k0, rows, NB: tl.constexpr):
    """Offsets of the panel's rows ``rows`` (from k0 on) in matrix b, [len(rows), NB], and which are inside it."""
    flat = tl.arange(0, NB)
    inside = (rows[:, None] < n - k0) & (flat[None, :] < n - k0)
    return b * n * n + (k0 + rows[:, None]) * n + (k0 + flat[None, :]), inside


@triton.jit
def _factor_panel(src, H, tau_out, T_out, V_out, n, k0, counters, wait,
                  ROWS: tl.constexpr, TILES: tl.constexpr, NB: tl.constexpr, V_WIDTH: tl.constexpr,
                  WRITE_T: tl.constexpr, SHUFFLE: tl.constexpr, BF16X3: tl.constexpr, FLAGS: tl.constexpr,
                  PDL: tl.constexpr):
    """Factor the panel H[b, k0:, k0:k0+NB] of matrix b = program id, held whole in registers as TILES tiles of
    ROWS rows (TILES ROWS >= n - k0 rows: a tensor's rows are a power of 2, a panel's need not be, and a tile of
    padding rows costs what one of the panel's does), read from ``src`` (the input for the first panel, else H
    itself); write its taus and, if WRITE_T (the panel has trailing columns), the T of its compact WY form
    (``T_out`` [batch, NB, NB]), built a column per reflector (see ``_reflector``), and V's parts for the update
    (``V_out``, rows V_WIDTH apart, see ``_store_V_parts``)."""
    _follow(PDL)
    b = tl.program_id(0).to(tl.int64)
    _await(counters, b, wait, FLAGS)
    cols = _panel_columns(NB)
    n_cols = tl.minimum(n - k0, NB)
    tiles = ()
    row_sets = ()
    for i in tl.static_range(TILES):
        rows = i * ROWS + tl.arange(0, ROWS)
        offsets, inside = _panel_offsets(b, n, k0, rows, NB)
        tile = tl.load(_panel_tile(src, offsets, SHUFFLE), mask=inside, other=0.0)
        tiles += (tl.reshape(tile, [ROWS, NB // 4, 4]),)
        row_sets += (rows,)
    taus = tl.zeros(cols.shape, dtype=tl.float32)
    scales = tl.full(cols.shape, 1.0, dtype=tl.float32)
    t_rows = tl.arange(0, NB)
    T = tl.zeros([NB, NB // 4, 4], dtype=tl.float32)  # T[i, g, e] = T[i, 4 g + e]
    # With the loop unrolled by 4 the compiler knows which of a thread's 4 column registers can be column j: it
    # drops the selections of the other three (docs/perf.md v39).
    for j0 in range(0, n_cols, 4):
        for s in tl.static_range(4):
            j = j0 + s
            if j < n_cols:
                xs = ()
                for i in tl.static_range(TILES):
                    xs += (_pick(tiles[i], cols[None, :, :], j, SHUFFLE),)
                d, m = _fold_sums(tiles, xs, row_sets, j)
                tau, scale, diagonal, pivot, w = _panel_reflector(d, m, j, cols, SHUFFLE)
                reflected = ()
                for i in tl.static_range(TILES):
                    reflected += (_reflect_rows(tiles[i], xs[i], row_sets[i], cols, j, tau, scale, diagonal, pivot,
                                                w, False),)
                tiles = reflected
                taus = tl.where(cols == j, tau[:, None], taus)
                if WRITE_T:  # w[c] = x_cᵀ v_j for c < j: (VᵀV)[c, j] = scale_c w[c]
                    T = _T_column(T, w * scales, tau, j, t_rows, cols)
                scales = tl.where(cols == j, scale[:, None], scales)
    tl.store(tau_out + b * n + k0 + cols, taus, mask=cols < n_cols)
    if WRITE_T:
        tl.store(T_out + b * NB * NB + t_rows[:, None, None] * NB + cols[None, :, :], T)
    for i in tl.static_range(TILES):
        rows = row_sets[i]
        offsets, inside = _panel_offsets(b, n, k0, rows, NB)  # again: not held in registers through the loop
        # v_c[1:] = x_c[1:] scale_c, through _unfolded: V's parts are selected from these below
        P = _unfolded(tl.where(rows[:, None, None] > cols[None, :, :], tiles[i] * scales[None, :, :], tiles[i]))
        tl.store(_panel_tile(H, offsets, SHUFFLE), tl.reshape(P, [ROWS, NB]), mask=inside)
        if WRITE_T:
            _store_V_parts(V_out, b, n, P, rows, cols, inside, BF16X3, V_WIDTH)
    _signal(counters, b, FLAGS)


@triton.jit
def _join_panels(grams, T_a_in, T_b_in, T_out, in_chunks, slots, counters, wait, NB: tl.constexpr,
                 FLAGS: tl.constexpr, PDL: tl.constexpr):
    """The compact WY form of the block of two panels a, b of matrix b = program id, from the panels' own: with
    H_a = I - V_a T_a V_aᵀ and H_b likewise, H_a H_b = I - V T Vᵀ for V = [V_a V_b] and
    T = [[T_a, -T_a (V_aᵀ V_b) T_b], [0, T_b]].  V_aᵀ V_b is the sum of the ``in_chunks`` parts in ``grams``
    [batch, slots, NB, NB] (``_gram_part``, one a chunk of rows); T_a and T_b come from ``T_a_in`` and ``T_b_in``
    [batch, NB, NB], T goes to ``T_out`` [batch, 2 NB, 2 NB]."""
    _follow(PDL)
    b = tl.program_id(0).to(tl.int64)
    _await(counters, b, wait, FLAGS)
    WIDTH: tl.constexpr = 2 * NB
    vc = tl.arange(0, NB)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    for q in range(0, in_chunks):
        G += tl.load(grams + ((b * slots + q) * NB + vc[:, None]) * NB + vc[None, :])
    T_a = tl.load(T_a_in + (b * NB + vc[:, None]) * NB + vc[None, :])
    T_b = tl.load(T_b_in + (b * NB + vc[:, None]) * NB + vc[None, :])
    T_ab = -tl.dot(tl.dot(T_a, G, input_precision="ieee"), T_b, input_precision="ieee")
    T = T_out + b * WIDTH * WIDTH + vc[:, None] * WIDTH + vc[None, :]
    tl.store(T, T_a)
    tl.store(T + NB, T_ab)
    tl.store(T + NB * WIDTH, tl.zeros([NB, NB], dtype=tl.float32))
    tl.store(T + NB * WIDTH + NB, T_b)
    _signal(counters, b, FLAGS)


@triton.jit
def _pad(A, P, n, m, ROWS: tl.constexpr, COLS: tl.constexpr, PDL: tl.constexpr):
    """P[b] = [[A[b], 0], [0, 0]], m x m (``A`` [batch, n, n], ``P`` [batch, m, m]): program (b, i) writes rows
    [i ROWS, (i + 1) ROWS) of P[b], every column (so that nothing of an earlier call's P is left)."""
    _follow(PDL)
    b = tl.program_id(0).to(tl.int64)
    r = tl.program_id(1) * ROWS + tl.arange(0, ROWS)
    for c0 in range(0, m, COLS):
        c = c0 + tl.arange(0, COLS)
        x = tl.load(A + b * n * n + r[:, None] * n + c[None, :], mask=(r[:, None] < n) & (c[None, :] < n), other=0.0)
        tl.store(P + b * m * m + r[:, None] * m + c[None, :], x, mask=(r[:, None] < m) & (c[None, :] < m))


@triton.jit
def _unpad(P, P_tau, H, tau_out, n, m, ROWS: tl.constexpr, COLS: tl.constexpr, PDL: tl.constexpr):
    """H[b] = P[b][:n, :n] and tau[b] = P_tau[b][:n] (the inverse of ``_pad``, for the factored P): program
    (b, i) copies rows [i ROWS, (i + 1) ROWS) of matrix b, and program (b, 0) its taus."""
    _follow(PDL)
    b = tl.program_id(0).to(tl.int64)
    r = tl.program_id(1) * ROWS + tl.arange(0, ROWS)
    for c0 in range(0, n, COLS):
        c = c0 + tl.arange(0, COLS)
        inside = (r[:, None] < n) & (c[None, :] < n)
        x = tl.load(P + b * m * m + r[:, None] * m + c[None, :], mask=inside)
        tl.store(H + b * n * n + r[:, None] * n + c[None, :], x, mask=inside)
    if tl.program_id(1) == 0:
        for c0 in range(0, n, COLS):
            c = c0 + tl.arange(0, COLS)
            tl.store(tau_out + b * n + c, tl.load(P_tau + b * m + c, mask=c < n), mask=c < n)


@triton.jit
def _factor_small_matrix(src, H, tau_out, n, N: tl.constexpr):
    """Whole QR of a small matrix (n <= N <= 32) in one warp's registers, matrix b = program id.  The tile is laid
    out a column per thread (the layout ``tl.gather`` along the columns wants), so reflector j's sums over rows
    are each thread's own, the column j reaches every thread by one shuffle per row (``tl.gather``), and alpha and
    sigma by one each; the loop is unrolled (j known at compile time), so the row masks cost nothing and the
    rows above j are not touched.  Steps j >= n (n < N) leave the tile as it is: its padding is zero, so their
    reflectors are trivial and w = 0."""
    b = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, N)
    cols = tl.arange(0, N)
    inside = (rows[:, None] < n) & (cols[None, :] < n)
    offsets = b * n * n + rows[:, None] * n + cols[None, :]
    P = tl.load(src + offsets, mask=inside, other=0.0)
    taus = tl.zeros([N], dtype=tl.float32)
    for j in tl.static_range(N):
        X = tl.gather(P, tl.full([N, N], j, tl.int32), axis=1)  # X[r, c] = P[r, j]
        below = rows[:, None] > j
        d = tl.sum(tl.where(rows[:, None] == j, P, -0.0), axis=0)
        m = tl.sum(tl.where(below, X * P, -0.0), axis=0)
        at_j = tl.full([N], j, tl.int32)
        tau, scale, diagonal = _reflector(tl.gather(d, at_j, axis=0), tl.gather(m, at_j, axis=0))
        w = d + m * scale
        v = tl.where(below, X * scale[None, :], 1.0)  # v[j] = 1; rows above j are left as they are
        updated = P - v * (tau * tl.where(cols > j, w, 0.0))[None, :]  # the columns right of j
        column_j = tl.where(below, X * scale[None, :], diagonal[None, :])  # column j becomes (R[j, j], v[1:])
        P = tl.where(rows[:, None] >= j, tl.where(cols[None, :] == j, column_j, updated), P)
        taus = tl.where(cols == j, tau, taus)
    tl.store(H + offsets, P, mask=inside)
    tl.store(tau_out + b * n + cols, taus, mask=cols < n)


@triton.jit
def _reflect_split_panel(src, H, tau_out, sums, grams, V_out, n, k0, j, step, NB: tl.constexpr,
                         SLICE: tl.constexpr, SHUFFLE: tl.constexpr, BF16X3: tl.constexpr, STORE_V: tl.constexpr,
                         PDL: tl.constexpr):
    """Step j of a tall panel H[b, k0:, k0:k0+NB] whose rows are split in slices of SLICE rows over the
    programs (b, p) of one launch, read from ``src`` (the input in steps 0 and 1 of the first panel, else H
    itself).  The launch for step j (0 <= j <= NB) first finishes reflector j - 1: every program reads the
    folded sums of step j - 1 (d and m, added up by the previous launch), derives the same reflector from
    them and applies it to its own rows (program 0 writes its tau and its row of VᵀV's strictly lower triangle
    to ``grams`` [batch, NB, NB]); then, unless j == NB, it adds its slice's folded sums for reflector j.  The
    last launch (j == NB, STORE_V: only it carries that code) also stores its rows of V's parts for the update
    (``V_out``, see ``_store_V_parts``).
    ``sums`` [batch, 3, 2, NB] rotates over three buffers by ``step`` (counted over every split launch of the
    factorization): a launch reads buffer step - 1, adds into buffer step and clears buffer step + 1 (last read
    by the launch before), which the next launch adds into; the buffers start cleared."""
    _follow(PDL)
    b = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1)
    rows = p * SLICE + tl.arange(0, SLICE)
    cols = _panel_columns(NB)
    offsets, inside = _panel_offsets(b, n, k0, rows, NB)  # (a split panel has NB columns and more rows)
    P = tl.reshape(tl.load(_panel_tile(src, offsets, SHUFFLE), mask=inside, other=0.0), [SLICE, NB // 4, 4])
    slot = sums + b * 3 * 2 * NB
    if p == 0:
        tl.store(slot + ((step + 1) % 3) * 2 * NB + tl.arange(0, 2 * NB), tl.zeros([2 * NB], dtype=tl.float32))
    if j > 0:
        previous = slot + ((step + 2) % 3) * 2 * NB
        d = tl.load(previous + cols)
        m = tl.load(previous + NB + cols)
        tau, scale, diagonal, pivot, w = _panel_reflector(d, m, j - 1, cols, False)  # d, m loaded: not in P's lanes
        x = _pick(P, cols[None, :, :], j - 1, SHUFFLE)
        P = _reflect_rows(P, x, rows, cols, j - 1, tau, scale, diagonal, pivot, w, True)
        tl.store(_panel_tile(H, offsets, SHUFFLE), tl.reshape(P, [SLICE, NB]), mask=inside)
        if p == 0:
            tl.store(tau_out + b * n + k0 + cols, tl.broadcast_to(tau[:, None], cols.shape), mask=cols == j - 1)
            tl.store(grams + (b * NB + j - 1) * NB + cols, tl.where(cols < j - 1, w, 0.0))
    if STORE_V:
        _store_V_parts(V_out, b, n, P, rows, cols, inside, BF16X3, NB)
    if j < NB:
        d_part, m_part = _fold_sums((P,), (_pick(P, cols[None, :, :], j, SHUFFLE),), (rows,), j)
        current = slot + (step % 3) * 2 * NB
        tl.atomic_add(current + cols, d_part, sem="relaxed")
        tl.atomic_add(current + NB + cols, m_part, sem="relaxed")


@triton.jit
def _load_V_parts(V_in, b, n, r, c, row_end, NB: tl.constexpr, WIDTH: tl.constexpr):
    """The two parts of a block of a panel's V (NB columns) from ``V_in`` [batch, 2, n, WIDTH], as the panel
    stored them (``_store_V_parts``): rows ``r`` (panel-relative; rows outside [0, row_end) read as 0) and
    columns ``c``, broadcast to the block's shape: ``rr[:, None]`` and ``vc[None, :]`` give V's rows,
    ``rr[None, :]`` and ``vc[:, None]`` the same block transposed (loaded so, it goes to the tensor cores as it
    lies in memory)."""
    inside = (r >= 0) & (r < row_end) & (c < NB)
    at = V_in + b * 2 * n * WIDTH + r * WIDTH + c
    return tl.load(at, mask=inside, other=0.0), tl.load(at + n * WIDTH, mask=inside, other=0.0)


@triton.jit
def _update_program(tiles, chunks):
    """(matrix b, column tile t, row chunk c) of an update program.  The tile is the fastest-varying index, so
    the programs that run together are mostly the tiles of a few matrices, which read the same V (from L2)."""
    pid = tl.program_id(0)
    return (pid // (tiles * chunks)).to(tl.int64), pid % tiles, (pid // tiles) % chunks


@triton.jit
def _round_fraction(x, DROP: tl.constexpr):
    """float32 x rounded to the nearest float32 whose DROP lowest fraction bits are 0 (ties to even): x rounded
    to bfloat16 at DROP = 16, to tf32 at DROP = 13."""
    HALF: tl.constexpr = (1 << (DROP - 1)) - 1
    KEEP: tl.constexpr = 0xFFFFFFFF ^ ((1 << DROP) - 1)
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + HALF + ((bits >> DROP) & 1)) & KEEP
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _bf16_parts(x):
    """x = hi + lo + e with hi and lo bfloat16 (8 significant bits each) and |e| <= 2⁻¹⁶ |x|."""
    if _INTERPRETED:  # the interpreter multiplies bfloat16 tensors as raw 16-bit integers and truncates float32 ->
        # bfloat16: there the parts are kept in float32 (rounded by bit arithmetic), whose products are the same
        # exact numbers
        hi = _round_fraction(x, 16)
        lo = _round_fraction(x - hi, 16)
    else:
        hi = x.to(tl.bfloat16)
        lo = (x - hi.to(tl.float32)).to(tl.bfloat16)
    return hi, lo


@triton.jit
def _split(x, BF16X3: tl.constexpr):
    """float32 x as two parts for the tensor cores, x = hi + lo + e: bfloat16 parts (|e| <= 2⁻¹⁶ |x|), or else
    tf32 parts held in float32 (|e| <= 2⁻²² |x|)."""
    if BF16X3:
        return _bf16_parts(x)
    else:
        hi = _round_fraction(x, 13)
        return hi, _round_fraction(x - hi, 13)


@triton.jit
def _dot_parts(a_hi, a_lo, b_hi, b_lo):
    """a @ b from the parts of a and b (``_split``) to near float32 accuracy on tensor cores: hi·hi + hi·lo +
    lo·hi accumulated in float32 (the dropped lo·lo and the parts' rounding leave an error below 3·2⁻¹⁶ |a| |b|
    with bfloat16 parts; tf32 parts are exact as tf32 operands)."""
    return (tl.dot(a_hi, b_hi, input_precision="tf32") + tl.dot(a_hi, b_lo, input_precision="tf32")
            + tl.dot(a_lo, b_hi, input_precision="tf32"))


@triton.jit
def _W_part(W_parts, b, c, slots, n, vc, cols):
    """Addresses of rows ``vc`` and (absolute) columns ``cols`` of row chunk c's part of Vᵀ C for matrix b
    (``W_parts`` read as [batch, slots, NB, n]: a matrix's parts stay where they are whatever the chunks of the
    launch, so that with flags one matrix's launch cannot write where another matrix's is still read)."""
    return W_parts + ((b * slots + c) * vc.shape[0] + vc[:, None]) * n + cols[None, :]


@triton.jit
def _build_split_T(tau_in, grams, T_out, b, n, k0, vc, NB: tl.constexpr):
    """T of the split panel at k0 of matrix b, from its taus and the strictly lower triangle of its Gram
    matrix VᵀV (``grams`` [batch, NB, NB]); a register panel writes its T itself."""
    t_rows = tl.arange(0, NB)
    cols = _panel_columns(NB)
    lower = tl.load(grams + (b * NB + t_rows[:, None, None]) * NB + cols[None, :, :])
    _store_T(T_out, b, lower, tl.load(tau_in + b * n + k0 + cols), t_rows, cols)


@triton.jit
def _gram_part(V, grams, b, c, slots, n, r_begin, r_end, TILE_ROWS: tl.constexpr, NB: tl.constexpr):
    """Row chunk c's part of V_aᵀ V_b for the block of two panels whose V's parts are in ``V`` [batch, 2, n, 2 NB]
    (V_a its first NB columns, V_b the others): the sum over the block's rows [r_begin, r_end) (rows before 0 read
    as 0), from the parts as the update uses them (``_dot_parts``), into ``grams`` [batch, slots, NB, NB]."""
    vc = tl.arange(0, NB)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    for r0 in range(r_begin, r_end, TILE_ROWS):
        rr = r0 + tl.arange(0, TILE_ROWS)
        At_hi, At_lo = _load_V_parts(V, b, n, rr[None, :], vc[:, None], r_end, NB, 2 * NB)
        B_hi, B_lo = _load_V_parts(V + NB, b, n, rr[:, None], vc[None, :], r_end, NB, 2 * NB)
        G += _dot_parts(At_hi, At_lo, B_hi, B_lo)
    tl.store(grams + ((b * slots + c) * NB + vc[:, None]) * NB + vc[None, :], G)


@triton.jit
def _panel_products(src, tau_in, grams, T_out, V_in, W_out, n, k0, tiles, chunks, slots, counters, wait,
                    NB: tl.constexpr, V_WIDTH: tl.constexpr, TILE_COLS: tl.constexpr, TILE_ROWS: tl.constexpr,
                    CHUNK_ROWS: tl.constexpr, BUILD_T: tl.constexpr, GRAM: tl.constexpr, BF16X3: tl.constexpr,
                    FLAGS: tl.constexpr, PDL: tl.constexpr):
    """Vᵀ C of the panel at k0 (every panel of a latency-bound input; of a large input only the first, whose
    later panels' products come with the update before them, see ``_panel_update``, and a block's panel a):
    program (b, t, c) writes ``W_out[b, c]`` over its chunk of CHUNK_ROWS rows of the trailing tile
    C = src[b, k0:, c0:c0+TILE_COLS], V's parts from ``V_in`` (rows V_WIDTH apart).  After a split panel
    (BUILD_T) program (b, 0, 0) also builds its T.  For a block of two panels (GRAM) the launch has a tile more,
    whose programs (b, tiles, c) write chunk c's part of V_aᵀ V_b instead (``_gram_part``)."""
    _follow(PDL)
    b, t, c = _update_program(tiles + GRAM, chunks)
    _await(counters, b, wait, FLAGS)
    vc = tl.arange(0, NB)
    if BUILD_T:
        if (t == 0) & (c == 0):
            _build_split_T(tau_in, grams, T_out, b, n, k0, vc, NB)
    if GRAM:
        if t == tiles:
            _gram_part(V_in, grams, b, c, slots, n, c * CHUNK_ROWS, tl.minimum((c + 1) * CHUNK_ROWS, n - k0),
                       TILE_ROWS, NB // 2)
            _signal(counters, b, FLAGS)
            return
    tc = k0 + NB + t * TILE_COLS + tl.arange(0, TILE_COLS)
    row_end = tl.minimum((c + 1) * CHUNK_ROWS, n - k0)
    W = tl.zeros([NB, TILE_COLS], dtype=tl.float32)
    for r0 in range(c * CHUNK_ROWS, row_end, TILE_ROWS):
        rr = r0 + tl.arange(0, TILE_ROWS)
        Vt_hi, Vt_lo = _load_V_parts(V_in, b, n, rr[None, :], vc[:, None], row_end, NB, V_WIDTH)
        C = tl.load(src + b * n * n + (k0 + rr[:, None]) * n + tc[None, :],
                    mask=(rr[:, None] < row_end) & (tc[None, :] < n), other=0.0)
        C_hi, C_lo = _split(C, BF16X3)
        W += _dot_parts(Vt_hi, Vt_lo, C_hi, C_lo)
    tl.store(_W_part(W_out, b, c, slots, n, vc, tc), W, mask=tc[None, :] < n)
    _signal(counters, b, FLAGS)


@triton.jit
def _panel_update(src, H, tau_in, grams, T_in, T_next, W_in, W_out, V_in, V_next, n, k0, c_begin, c_end, tiles,
                  chunks, in_chunks, slots, counters, wait, NB: tl.constexpr, V_WIDTH: tl.constexpr,
                  TILE_COLS: tl.constexpr, TILE_ROWS: tl.constexpr, CHUNK_ROWS: tl.constexpr, NEXT: tl.constexpr,
                  BUILD_T: tl.constexpr, GRAM: tl.constexpr, BF16X3: tl.constexpr, FLAGS: tl.constexpr,
                  PDL: tl.constexpr):
    """Update of columns [c_begin, c_end) by the panel at k0: program (b, t, c) sums W = Vᵀ C over the
    ``in_chunks`` parts in ``W_in`` for its tile of TILE_COLS columns, and updates its chunk of the tile's rows,
    H <- C - V (Tᵀ W) with C read from ``src`` and V's parts from ``V_in`` (rows V_WIDTH apart).  With NEXT,
    the next panel (at k1 = k0 + NB) has already been factored and these are its trailing columns: from each
    updated block C' the program also adds V₁ᵀ C' (V₁ the next panel's reflectors, its parts from ``V_next``) into
    ``W_out[b, c]``, so the next update finds its Vᵀ C without another pass over the matrix; after a split next
    panel (BUILD_T) program (b, 0, 0) also builds its T into ``T_next``; where the next panel is a block of two
    (GRAM), the launch has a tile more, whose programs (b, tiles, c) write chunk c's part of its V_aᵀ V_b instead
    (``_gram_part``), beside the update rather than on the block's chain."""
    _follow(PDL)
    b, t, c = _update_program(tiles + GRAM, chunks)
    _await(counters, b, wait, FLAGS)
    vc = tl.arange(0, NB)
    if BUILD_T:
        if (t == 0) & (c == 0):
            _build_split_T(tau_in, grams, T_next, b, n, k0 + NB, vc, NB)
    if GRAM:
        if t == tiles:  # the next block's rows are these rows less NB
            _gram_part(V_next, grams, b, c, slots, n, c * CHUNK_ROWS - NB,
                       tl.minimum((c + 1) * CHUNK_ROWS, n - k0) - NB, TILE_ROWS, NB // 2)
            _signal(counters, b, FLAGS)
            return
    tc = c_begin + t * TILE_COLS + tl.arange(0, TILE_COLS)
    W = tl.zeros([NB, TILE_COLS], dtype=tl.float32)
    for q in range(0, in_chunks):
        W += tl.load(_W_part(W_in, b, q, slots, n, vc, tc), mask=tc[None, :] < c_end, other=0.0)
    T = tl.load(T_in + b * NB * NB + vc[:, None] * NB + vc[None, :])
    Z_hi, Z_lo = _split(tl.dot(tl.trans(T), W, input_precision="tf32x3"), BF16X3)
    row_end = tl.minimum((c + 1) * CHUNK_ROWS, n - k0)
    W_next = tl.zeros([NB, TILE_COLS], dtype=tl.float32)
    for r0 in range(c * CHUNK_ROWS, row_end, TILE_ROWS):
        rr = r0 + tl.arange(0, TILE_ROWS)
        V_hi, V_lo = _load_V_parts(V_in, b, n, rr[:, None], vc[None, :], row_end, NB, V_WIDTH)
        c_offsets = b * n * n + (k0 + rr[:, None]) * n + tc[None, :]
        c_ok = (rr[:, None] < row_end) & (tc[None, :] < c_end)
        C = tl.load(src + c_offsets, mask=c_ok, other=0.0)
        C -= _dot_parts(V_hi, V_lo, Z_hi, Z_lo)
        tl.store(H + c_offsets, C, mask=c_ok)
        if NEXT:  # the next panel's rows are these rows less NB (V₁ is 0 above its diagonal)
            Nt_hi, Nt_lo = _load_V_parts(V_next, b, n, rr[None, :] - NB, vc[:, None], row_end - NB, NB, NB)
            C_hi, C_lo = _split(C, BF16X3)
            W_next += _dot_parts(Nt_hi, Nt_lo, C_hi, C_lo)
    if NEXT:
        tl.store(_W_part(W_out, b, c, slots, n, vc, tc), W_next, mask=tc[None, :] < c_end)
    _signal(counters, b, FLAGS)


# The host's shape arithmetic runs on every call, a hundred times for a large input: plain integers, not
# ``triton.cdiv`` / ``triton.next_power_of_2``, whose constexpr wrappers cost microseconds a call
# (docs/perf.md v35).
def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_power_of_2(x: int) -> int:
    """The least power of 2 >= x (x >= 1)."""
    return 1 << (x - 1).bit_length()


def _panel_tile_rows(rows: int) -> int:
    """Rows of the register tile of a panel of ``rows`` rows (split over programs where above the limit)."""
    return max(16, _next_power_of_2(rows))


def _panel_warps(rows: int, width: int, floats_per_thread: int = PANEL_FLOATS_PER_THREAD_LATENCY) -> int:
    """Warps for a register tile of rows x width floats: about floats_per_thread per thread, 1 to 8 warps."""
    return max(1, min(8, rows * width // (32 * floats_per_thread)))


def _panel_tiles(rows: int, width: int, floats_per_thread: int) -> tuple[int, int, int]:
    """(tiles, rows a tile, warps) of a register panel of ``rows`` rows and ``width`` columns, as launched: the
    warps of its power-of-2 tile (``_panel_tile_rows``, ``_panel_warps``), and tiles of 1 / PANEL_TILE_FRACTION of
    that tile, so that at most that share of the panel's registers holds padding rows, and no fewer rows than the
    warps' lanes cover (128 // width rows a warp: a run of 4 columns a lane), so that every tile has the layout
    the shuffle needs (``_from_lane``); one tile where the tiles would be as tall as it."""
    whole = _panel_tile_rows(rows)
    warps = _panel_warps(whole, width, floats_per_thread)
    tile = max(16, whole // PANEL_TILE_FRACTION, 128 // width * warps)
    tiles = _cdiv(rows, tile)
    return (1, whole, warps) if tiles * tile == whole else (tiles, tile, warps)  # summed tiles cost a little more


def _launch_plainly(kernel, grid: tuple, *args, **options) -> None:
    """Launch a kernel through Triton's own call path (see ``_DirectQR`` for the other way)."""
    kernel[grid](*args, **options)


def _factor_small(A: torch.Tensor, H: torch.Tensor, tau: torch.Tensor, launch=_launch_plainly) -> None:
    """Whole-matrix QR of A into H: one warp per matrix (one launch: nothing to overlap with, so not a dependent
    launch)."""
    launch(_factor_small_matrix, (A.shape[0],), A, H, tau, A.shape[-1], N=_next_power_of_2(A.shape[-1]),
           num_warps=1)


def _chunks_asked(rows: int, programs: int, target: int) -> int:
    """Row chunks for ``programs`` tile programs over ``rows`` rows, so that about ``target`` programs share the
    work, before _row_chunks rounds the rows per chunk up to whole TRAILING_TILE_ROWS blocks.  The rounding only
    lowers the count, so this bounds the chunks of every launch over at most ``rows`` rows with at least
    ``programs`` programs (not the count of the whole block after rounding: a shorter block can round to more
    chunks than a taller one)."""
    return max(1, min(_cdiv(rows, TRAILING_TILE_ROWS), target // programs))


def _row_chunks(n: int, k0: int, programs: int, target: int):
    """Row chunks of the trailing block at k0 for ``programs`` tile programs: about ``target`` programs share
    the work (whole TRAILING_TILE_ROWS blocks per chunk).  Returns (chunks, rows per chunk)."""
    rows = n - k0
    chunk_rows = TRAILING_TILE_ROWS * _cdiv(_cdiv(rows, _chunks_asked(rows, programs, target)), TRAILING_TILE_ROWS)
    return _cdiv(rows, chunk_rows), chunk_rows


def _factor_blocked(A: torch.Tensor, H: torch.Tensor, tau: torch.Tensor, panel_width: int, max_register_rows: int,
                    update_programs: int, products_cols: int, look_ahead: bool, flags: bool = False,
                    block_panels: int = 1, launch=_launch_plainly) -> None:
    """Blocked QR of A into H.  Panel k is factored (in one program's registers up to max_register_rows rows,
    else split in slices of SPLIT_PANEL_SLICE rows over several programs, one launch per reflector) and its Vᵀ C
    formed; the update of its trailing columns then comes in one of two orders.  Plain: the whole update, then
    the next panel, then the next panel's Vᵀ C (on tiles of products_cols columns): three passes over the
    trailing matrix per panel, each launch short.  With look_ahead: the update of the next panel's NB columns
    first, so that the next panel can be factored, then the rest of the update, which also forms the next
    panel's Vᵀ C on the way (a read and a write per panel); the first panel's Vᵀ C keeps a launch of its own.
    The update's tiles have their rows split in chunks until about ``update_programs`` programs share the work.
    The first panel and its update read A and write every entry of H; everything after works in place in H.
    With ``block_panels`` = 2 (register panels only) all this is done for blocks of two panels instead: panel a is
    factored, panel b's columns are updated by it (products and update over those columns), panel b is factored,
    and ``_join_panels`` joins the two compact WY forms into the block's, which updates the trailing columns: one
    pass over the trailing matrix per block.  Every kernel is launched through ``launch`` (kernel, grid,
    arguments, options), as a programmatic dependent where the device has them.  With ``flags`` (register panels
    only) a launch does not wait for the one before it but for its own matrices' earlier programs (``_await``),
    and a last launch (``_join``) waits for them all."""
    if max_register_rows < panel_width:  # a split panel must have NB columns and a trailing block
        raise ValueError(f"max_register_rows {max_register_rows} < panel_width {panel_width}")
    if flags and _next_power_of_2(A.shape[-1]) > max_register_rows:
        raise ValueError(f"flags need register panels: n {A.shape[-1]} > max_register_rows {max_register_rows}")
    if block_panels not in (1, 2):
        raise ValueError(f"block_panels {block_panels} is not 1 or 2")
    if block_panels > 1 and _next_power_of_2(A.shape[-1]) > max_register_rows:
        raise ValueError(f"blocks of panels need register panels: n {A.shape[-1]} > max_register_rows "
                         f"{max_register_rows}")
    batch, n = A.shape[0], A.shape[-1]
    dev = A.device
    pdl = _dependent_launch(dev)
    own_sm = batch <= _multiprocessors(dev)  # every matrix's register panel can have a multiprocessor to itself
    # Then a register panel is launched plainly, once the update before it has finished, not as a dependent:
    # measured 3-6 % faster at n352 b40, within the noise elsewhere (docs/perf.md v35).  A guess at why:
    # dependents are placed while the update still holds most multiprocessors, so two panel programs (each its
    # matrix's whole critical path) can land on one.
    panel_launch = dict(PDL=False, launch_pdl=False) if own_sm else pdl
    floats_per_thread = (PANEL_FLOATS_PER_THREAD_LATENCY if _latency_bound(A)
                         else PANEL_FLOATS_PER_THREAD_OWN_SM if own_sm
                         else PANEL_FLOATS_PER_THREAD_SHARED)
    bf16x3 = n >= BF16X3_MIN_N
    slice_rows = min(SPLIT_PANEL_SLICE, max_register_rows)
    nb = panel_width * block_panels  # columns of a block (of one panel, or of block_panels)

    def shuffle(src: torch.Tensor) -> bool:
        """Whether every row of a panel read from src starts on 16 bytes (n % 16 == 0, src aligned), so that the
        kernel may load its tile 16 bytes at a time and take each column by a shuffle (``_panel_tile``)."""
        return dev.type == "cuda" and n % 16 == 0 and src.data_ptr() % 16 == 0

    def rows(k0: int) -> int:  # rows of the register tile of the panel at k0
        return _panel_tile_rows(n - k0)

    def split(k0: int) -> bool:  # then rows >= 2 NB, so n - k0 > NB: a full panel with a trailing block
        return rows(k0) > max_register_rows

    def update_shape(k0: int, c_begin: int, c_end: int, tile_cols: int = TRAILING_TILE_COLS):
        """(tiles, chunks, chunk rows) of an update over columns [c_begin, c_end) of the trailing block at k0."""
        tiles = _cdiv(c_end - c_begin, tile_cols)
        return (tiles, *_row_chunks(n, k0, batch * tiles, update_programs))

    # T of panel k in T[k % 2] (the update of panel k still reads it while panel k + 1 is factored), and the
    # parts of its Vᵀ C likewise in W[k % 2], [batch, slots, NB, n] each (slots: the most chunks any launch has,
    # see _chunks_asked), and V's two parts likewise in V_parts[k % 2] (see _store_V_parts):
    # bfloat16 on the GPU where the products are compensated bf16, else tf32 parts in float32 (and everything in
    # float32 under the interpreter, see _bf16_parts).
    T = torch.empty((2, batch, nb, nb), dtype=torch.float32, device=dev)
    parts_dtype = torch.bfloat16 if bf16x3 and dev.type == "cuda" else torch.float32
    # A block's V_b is 0 above panel b: nothing writes those 32 x 32 entries of the block's V parts (the same for
    # every block), so they are zeroed once.
    V_parts = (torch.zeros if block_panels > 1 else torch.empty)((2, batch, 2, n, nb), dtype=parts_dtype, device=dev)
    slots = _chunks_asked(n, batch, update_programs)
    # The Gram rows of a split panel, or a block's V_aᵀ V_b in parts (a row chunk each, see _gram_part).
    grams = torch.empty((batch, slots, panel_width, panel_width) if block_panels > 1 else (batch, nb, nb),
                        dtype=torch.float32, device=dev)
    W = torch.empty((2, batch * slots * nb * n), dtype=torch.float32, device=dev)
    # Folded sums of the split panels' reflectors (see _reflect_split_panel), and that kernel's launch count.
    sums = torch.zeros((batch, 3, 2, nb) if split(0) else (1,), dtype=torch.float32, device=dev)
    # A block's two panels a and b keep their own T here (their V's parts go straight into the block's).
    T_panels = torch.empty((2, batch, panel_width, panel_width) if block_panels > 1 else (2, 1), dtype=torch.float32,
                           device=dev)
    step = 0
    # With flags, the programs each matrix has finished (see _await), and the count the next launch waits for.
    counters = torch.zeros(batch if flags else 1, dtype=torch.int32, device=dev)
    finished = 0

    def order(per_matrix: int, options: dict) -> tuple:
        """The launch options and the flags' arguments (counters, wait) of the next launch, which has
        ``per_matrix`` programs for each matrix.  With flags the first launch still waits for the work before
        the chain (PDL), and every launch is a programmatic dependent."""
        nonlocal finished
        if not flags:
            return dict(options, FLAGS=False), (counters, 0)
        wait, finished = finished, finished + per_matrix
        return dict(PDL=pdl["PDL"] and wait == 0, launch_pdl=pdl["launch_pdl"], FLAGS=True), (counters, wait)

    def factor(k0: int, src: torch.Tensor, T_k: torch.Tensor, V_k: torch.Tensor, W_k: torch.Tensor) -> None:
        """Factor the block at k0 (of one panel, or of block_panels), writing its T and V's parts into T_k and V_k
        where it has trailing columns; W_k is free for the products of a block's panel a."""
        nonlocal step
        if split(k0):
            slices, warps = _cdiv(n - k0, slice_rows), _panel_warps(slice_rows, nb)
            for j in range(nb + 1):
                launch(_reflect_split_panel, (batch, slices),  # step 0 only reads; step 1 writes H first
                       src if j <= 1 else H, H, tau, sums, grams, V_k, n, k0, j, step, NB=nb, SLICE=slice_rows,
                       SHUFFLE=shuffle(src if j <= 1 else H), BF16X3=bf16x3, STORE_V=j == nb, num_warps=warps,
                       **pdl)
                step += 1
        elif block_panels == 1:
            register_panel(k0, src, T_k, V_k)
        else:  # panel a; its update of panel b's columns (from src, into H); panel b; the block's T and V
            b0, b_end = k0 + panel_width, min(k0 + nb, n)
            register_panel(k0, src, T_panels[0], V_k)  # V's parts straight into their places in the block's
            if b0 < n:
                chunks = products(k0, src, T_panels[0], V_k, W_k, panel_width, b_end, panel_width)
                update(k0, src, (T_panels[0], T_panels[0], W_k, W_k, V_k, V_k), b0, b_end, chunks, False,
                       panel_width, panel_width)
                register_panel(b0, H, T_panels[1], V_k[:, :, panel_width:, panel_width:])
            # The block's T into T_k comes later: join, after the launch that sums V_aᵀ V_b from V's parts.

    def join(T_k: torch.Tensor, in_chunks: int) -> None:
        """T of a block of two panels, from the parts of V_aᵀ V_b that the launch before wrote."""
        options, sync = order(1, pdl)
        launch(_join_panels, (batch,), grams, T_panels[0], T_panels[1], T_k, in_chunks, slots, *sync, NB=panel_width,
               num_warps=UPDATE_WARPS, **options)

    def register_panel(k0: int, src: torch.Tensor, T_k: torch.Tensor, V_k: torch.Tensor) -> None:
        """One panel of panel_width columns at k0 in a program's registers, T and V's parts where it has
        trailing columns."""
        tiles, tile_rows, warps = _panel_tiles(n - k0, panel_width, floats_per_thread)
        options, sync = order(1, panel_launch)
        launch(_factor_panel, (batch,), src, H, tau, T_k, V_k, n, k0, *sync, ROWS=tile_rows, TILES=tiles,
               NB=panel_width, V_WIDTH=nb, WRITE_T=k0 + panel_width < n, SHUFFLE=shuffle(src), BF16X3=bf16x3,
               num_warps=warps, **options)

    def products(k0: int, src: torch.Tensor, T_k: torch.Tensor, V_k: torch.Tensor, W_k: torch.Tensor,
                 width: int = nb, c_end: int = n, tile_cols: int = products_cols) -> int:
        """Vᵀ C of the panel (block) of ``width`` columns at k0 into W_k, over its trailing columns up to c_end;
        returns its chunks."""
        _, chunks, chunk_rows = update_shape(k0, k0 + width, c_end)  # rows cut as the update over these columns
        tiles = _cdiv(c_end - k0 - width, tile_cols)
        gram = block_panels > 1 and width == nb  # a block's products: its V_aᵀ V_b on the way
        options, sync = order((tiles + gram) * chunks, pdl)
        launch(
            _panel_products, ((tiles + gram) * chunks * batch,), src, tau, grams, T_k, V_k, W_k, n, k0, tiles, chunks,
            slots, *sync, NB=width, V_WIDTH=nb, TILE_COLS=tile_cols, TILE_ROWS=TRAILING_TILE_ROWS,
            CHUNK_ROWS=chunk_rows, BUILD_T=split(k0), GRAM=gram, BF16X3=bf16x3, num_warps=UPDATE_WARPS, **options)
        if gram:
            join(T_k, chunks)
        return chunks

    def update(k0: int, src: torch.Tensor, buffers: tuple, c_begin: int, c_end: int, in_chunks: int,
               next_products: bool, width: int = nb, tile_cols: int = TRAILING_TILE_COLS) -> int:
        """The update of columns [c_begin, c_end) by the panel (block) of ``width`` columns at k0; returns its
        chunks."""
        tiles, chunks, chunk_rows = update_shape(k0, c_begin, c_end, tile_cols)
        gram = next_products and block_panels > 1  # the next block's V_aᵀ V_b on the way
        options, sync = order((tiles + gram) * chunks, pdl)
        launch(
            _panel_update, ((tiles + gram) * chunks * batch,), src, H, tau, grams, *buffers, n, k0, c_begin, c_end,
            tiles, chunks, in_chunks, slots, *sync, NB=width, V_WIDTH=nb, TILE_COLS=tile_cols,
            TILE_ROWS=TRAILING_TILE_ROWS, CHUNK_ROWS=chunk_rows, NEXT=next_products,
            BUILD_T=next_products and split(k0 + width), GRAM=gram, BF16X3=bf16x3, num_warps=UPDATE_WARPS,
            maxnreg=UPDATE_MAX_REGISTERS if chunks == 1 else None, **options)
        if gram:
            join(buffers[1], chunks)  # the next block's T (T_next)
        return chunks

    factor(0, A, T[0], V_parts[0], W[0])
    if nb < n:
        chunks = products(0, A, T[0], V_parts[0], W[0])  # of the launch that wrote the current panel's Vᵀ C
    for k, k0 in enumerate(range(0, n - nb, nb)):  # panel (block) k, at k0, has trailing columns [k1, n)
        src = A if k0 == 0 else H
        k1 = k0 + nb
        T_next, W_next, V_next = T[(k + 1) % 2], W[(k + 1) % 2], V_parts[(k + 1) % 2]
        buffers = (T[k % 2], T_next, W[k % 2], W_next, V_parts[k % 2], V_next)  # in _panel_update's order
        if look_ahead:  # the next block's nb columns, in tiles of their width (not more: no idle columns)
            update(k0, src, buffers, k1, min(k1 + nb, n), chunks, False, tile_cols=min(nb, TRAILING_TILE_COLS))
        else:
            update(k0, src, buffers, k1, n, chunks, False)
        factor(k1, H, T_next, V_next, W_next)
        if k1 + nb < n:
            if look_ahead:
                chunks = update(k0, src, buffers, k1 + nb, n, chunks, True)
            else:
                chunks = products(k1, H, T_next, V_next, W_next)
    if flags:
        launch(_join, (batch,), counters, finished, num_warps=1, **pdl)


def _dependent_launch(device: torch.device) -> dict:
    """Launch options: programmatic dependent launch (Hopper and newer) lets each kernel of the chain start while
    its predecessor finishes; every kernel waits for it (``_follow``) before touching memory."""
    on = (device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9
          and hasattr(tl.extra.cuda, "gdc_wait"))  # older Triton releases lack grid dependency control
    return dict(PDL=on, launch_pdl=on)


def _multiprocessors(device: torch.device) -> int:
    """The device's multiprocessors (the interpreter runs one program at a time: one notional multiprocessor)."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1


def _update_programs(A: torch.Tensor, max_register_rows: int = MAX_REGISTER_PANEL_ROWS) -> int:
    """Programs that fill the device in the trailing update of A: UPDATE_PROGRAMS_PER_SM (_SPLIT where its first
    panel is split) a multiprocessor."""
    split = _panel_tile_rows(A.shape[-1]) > max_register_rows
    return (UPDATE_PROGRAMS_PER_SM_SPLIT if split else UPDATE_PROGRAMS_PER_SM) * _multiprocessors(A.device)


def _latency_bound(A: torch.Tensor) -> bool:
    """Whether the input is too small to fill the GPU, so that launches and the reflector chain set the time."""
    limit = LATENCY_BOUND_BYTES if A.shape[-1] <= MAX_REGISTER_PANEL_ROWS else SPLIT_LATENCY_BOUND_BYTES
    return A.numel() * A.element_size() <= limit


def _factor_in_parts(A: torch.Tensor, H: torch.Tensor, tau: torch.Tensor, parts: int, launch=_launch_plainly,
                     **blocked) -> None:
    """The blocked path with flags on ``parts`` parts of the batch, each its own chain, their launches
    interleaved: a part's launches up to and including a register panel, then the next part's, and so on
    (the chains' last launches, which join them, come last in that order).  With the flags a launch waits for
    its own part's earlier launches only, so one part's panels run beside another part's update."""
    batch = A.shape[0]
    bounds = [batch * i // parts for i in range(parts + 1)]
    chains = []
    for lo, hi in zip(bounds, bounds[1:]):
        groups = [[]]

        def collect(kernel, grid, *args, **options):
            if kernel is _join:
                groups.append([])
            groups[-1].append((kernel, grid, args, options))
            if kernel is _factor_panel:
                groups.append([])

        _factor_blocked(A[lo:hi], H[lo:hi], tau[lo:hi], flags=True, launch=collect, **blocked)
        chains.append(groups)
    for step in range(max(len(groups) for groups in chains)):
        for groups in chains:
            for kernel, grid, args, options in groups[step] if step < len(groups) else ():
                launch(kernel, grid, *args, **options)


def _factor(A: torch.Tensor, H: torch.Tensor, tau: torch.Tensor, launch=_launch_plainly) -> None:
    """QR of A into H and tau (A is left as it is), each kernel launched through ``launch``."""
    n = A.shape[-1]
    if n <= SMALL_N_MAX:
        _factor_small(A, H, tau, launch)
    elif n % ROW_MULTIPLE and not _latency_bound(A):
        # (Not a latency-bound input: its time is its chain of reflectors, which padding would only lengthen.)
        _factor_padded(A, H, tau, launch)
    else:
        _factor_chain(A, H, tau, launch)


def _factor_padded(A: torch.Tensor, H: torch.Tensor, tau: torch.Tensor, launch) -> None:
    """QR of A (n > SMALL_N_MAX) as the corners of zero matrices of the next multiple of ROW_MULTIPLE, whose
    accesses are 16 bytes wide (see the module's notes)."""
    batch, n = A.shape[0], A.shape[-1]
    m = _cdiv(n, ROW_MULTIPLE) * ROW_MULTIPLE
    P, P_tau = A.new_empty(batch, m, m), A.new_empty(batch, m)
    rows, cols, options = 16, 128, dict(num_warps=4, **_dependent_launch(A.device))
    launch(_pad, (batch, _cdiv(m, rows)), A, P, n, m, ROWS=rows, COLS=cols, **options)
    _factor_chain(P, P, P_tau, launch)
    launch(_unpad, (batch, _cdiv(n, rows)), P, P_tau, H, tau, n, m, ROWS=rows, COLS=cols, **options)


def _factor_chain(A: torch.Tensor, H: torch.Tensor, tau: torch.Tensor, launch) -> None:
    """QR of A (n > SMALL_N_MAX) into H, which may be A itself, by the blocked path."""
    n = A.shape[-1]
    small = _latency_bound(A)
    registers = n <= MAX_REGISTER_PANEL_ROWS
    blocked = dict(panel_width=NARROW_PANEL_WIDTH if small else PANEL_WIDTH, max_register_rows=MAX_REGISTER_PANEL_ROWS,
                   update_programs=_update_programs(A),
                   products_cols=TRAILING_TILE_COLS if small else PRODUCTS_TILE_COLS, look_ahead=not small,
                   block_panels=BLOCK_PANELS if registers and not small and A.shape[0] > _multiprocessors(A.device)
                   else 1)
    if not small and registers and _dependent_launch(A.device)["PDL"]:
        parts = PARTS_OWN_SM if A.shape[0] <= _multiprocessors(A.device) else PARTS_SHARED
        _factor_in_parts(A, H, tau, min(parts, A.shape[0]), launch, **blocked)
    else:
        _factor_blocked(A, H, tau, **blocked, launch=launch)


def _graphed(A: torch.Tensor) -> bool:
    """Whether to replay a captured launch chain rather than launch it: a chain of more than one launch (n >
    SMALL_N_MAX) that is latency-bound, or that has split panels (a launch per reflector)."""
    return A.shape[-1] > SMALL_N_MAX and (_latency_bound(A) or A.shape[-1] > MAX_REGISTER_PANEL_ROWS)


def _outputs(A: torch.Tensor):
    """New H and tau for the float32 A (``new_empty`` with plain sizes: the cheapest call for the host)."""
    return torch.empty_like(A), A.new_empty(A.shape[0], A.shape[1])


class _OutputPool:
    """New outputs of one (batch, n) for many calls, made in advance as views of one allocation: a call takes the
    next unused pair.  Each pair is handed out once, so every call's H and tau are memory of its own, and a chunk
    is freed when the last of its outputs is.  Each view starts 16 bytes aligned, as the recorded kernels were
    compiled for the first call's outputs."""

    def __init__(self, A: torch.Tensor, chunk_bytes: int = POOL_CHUNK_BYTES):
        self.batch, self.n = batch, n = A.shape[0], A.shape[-1]
        self.h, self.t = _cdiv(batch * n * n, 4) * 4, _cdiv(batch * n, 4) * 4  # floats a call, 16-byte multiples
        self.calls = max(1, min(POOL_CALLS, chunk_bytes // ((self.h + self.t) * A.element_size())))
        self.pairs = []

    def __call__(self, A: torch.Tensor):
        if not self.pairs:
            batch, n, h, t, calls = self.batch, self.n, self.h, self.t, self.calls
            chunk = A.new_empty(calls * (h + t))
            Hs = chunk.as_strided((calls, batch, n, n), (h, n * n, n, 1)).unbind(0)
            taus = chunk.as_strided((calls, batch, n), (t, n, 1), calls * h).unbind(0)
            self.pairs = list(zip(Hs, taus))[::-1]  # taken from the end
        return self.pairs.pop()


def qr_blocked(A: torch.Tensor, panel_width: int = PANEL_WIDTH, max_register_rows: int = MAX_REGISTER_PANEL_ROWS,
               update_programs: int | None = None, products_cols: int = PRODUCTS_TILE_COLS, look_ahead: bool = True,
               parts: int = 0, block_panels: int = 1):
    """The blocked path on its own, for any n, in either order of the update (tests use narrow panels to reach
    many panels at small n, and many update programs to split the update's rows); with parts >= 1, the batch in
    that many parts with flags (``_factor_in_parts``)."""
    if products_cols < 16 or products_cols & (products_cols - 1):
        raise ValueError(f"products_cols {products_cols} is not a power of 2 from 16 on")
    if not 0 <= parts <= A.shape[0]:
        raise ValueError(f"parts {parts} is not between 0 and the batch, {A.shape[0]}")
    H, tau = _outputs(A)
    blocked = dict(panel_width=panel_width, max_register_rows=max_register_rows,
                   update_programs=update_programs or _update_programs(A, max_register_rows),
                   products_cols=products_cols,
                   look_ahead=look_ahead, block_panels=block_panels)
    if parts:
        _factor_in_parts(A, H, tau, parts, **blocked)
    else:
        _factor_blocked(A, H, tau, **blocked)
    return H, tau


class _GraphedQR:
    """The launch chain of one (batch, n, device), captured once as a CUDA graph: the input is copied into a
    static buffer and factored into the graph's own H and tau, which are cloned out on every call."""

    def __init__(self, A: torch.Tensor):
        self.A = A.clone()
        self.H, self.tau = _outputs(A)
        _factor(self.A, self.H, self.tau)  # compiles every kernel outside the capture
        torch.cuda.synchronize(A.device)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            _factor(self.A, self.H, self.tau)

    def __call__(self, A: torch.Tensor):
        self.A.copy_(A)
        self.graph.replay()
        return self.H.clone(), self.tau.clone()


class _DirectQR:
    """The launch chain of one (batch, n, device, alignment of A), recorded on the first call and replayed on every
    later one without walking ``_factor`` again.  Triton's own launch path binds and specializes the arguments and
    looks the compiled kernel up on every launch (tens of microseconds of Python; about a hundred launches a call
    at n1024, more than the GPU's time on the late, short ones), and even a compiled kernel's launcher asks the
    driver about every tensor argument.  For one key the chain's kernels, grids, specializations and arguments are
    the same on every call but for where A, H and tau are: the first call compiles each launch and records its
    compiled launcher and arguments as plain numbers, device addresses included (the chain's own buffers T, W and
    the Gram rows are kept and reused by every call, as a graph's are), and a later call launches the records in
    order with its own A, H and tau put in, small outputs taken from a pool.  (The inputs with split panels, whose
    sums buffer must start at zero, are graphed instead.)"""

    def __init__(self, A: torch.Tensor):
        self.records = []  # per launch: (launcher, arguments with constexprs, [(position, which of A/H/tau, offset)])
        self.buffers = []  # the chain's own tensors, whose addresses the records hold
        self.outputs = _OutputPool(A) if A.numel() * A.element_size() <= POOL_MAX_BYTES else _outputs
        H, tau = _outputs(A)  # not the pool's: record tells A, H and tau apart by their storage, which a pair shares
        self.call = (A, H, tau)
        _factor(A, H, tau, self.record)
        del self.call

    def record(self, kernel, grid: tuple, *args, **options) -> None:
        """Compile, record and make one launch (the first call's)."""
        compiled = kernel.warmup(*args, grid=grid, **options)
        launcher = compiled[grid + (1,) * (3 - len(grid))]
        arguments, own = [], []
        for position, arg in enumerate(args):
            if isinstance(arg, torch.Tensor):
                storage = arg.untyped_storage().data_ptr()
                which = [i for i, t in enumerate(self.call) if t.untyped_storage().data_ptr() == storage]
                if which:
                    own.append((position, which[0], arg.data_ptr() - self.call[which[0]].data_ptr()))
                else:
                    self.buffers.append(arg)
                arg = arg.data_ptr()
            arguments.append(arg)
        arguments += [options[name] for name in kernel.arg_names[len(args):]]  # the launcher takes the constexprs
        self.records.append((launcher, arguments, tuple(own)))
        launcher(*arguments)

    def __call__(self, A: torch.Tensor):
        H, tau = self.outputs(A)
        pointers = (A.data_ptr(), H.data_ptr(), tau.data_ptr())
        for launcher, arguments, own in self.records:
            for position, which, offset in own:
                arguments[position] = pointers[which] + offset
            launcher(*arguments)
        return H, tau


_prepared = {}  # (batch, n, device, whether A is 16-byte aligned) -> a _GraphedQR or a _DirectQR
# A prepared chain's buffers (the graph's input and outputs, the direct chain's T, W and counters) serve one call at
# a time: two calls from two host threads at once would interleave their launches on the GPU's queue (the counters
# of two interleaved chains let programs start early, or hang).  A call takes the one token first, and a call that
# finds it taken is refused (list.pop and list.append are atomic).
_token = [True]


def custom_kernel(A: torch.Tensor):
    """QR of each matrix of the contiguous float32 batch ``A`` [batch, n, n]; returns new ``(H, tau)``."""
    if A.dim() != 3 or A.shape[-1] != A.shape[-2] or A.dtype != torch.float32:
        raise ValueError(f"expected float32 [batch, n, n], got {A.dtype} of shape {tuple(A.shape)}")
    A = A.contiguous()
    if not A.is_cuda:  # the Triton interpreter (CPU tests)
        H, tau = _outputs(A)
        _factor(A, H, tau)
        return H, tau
    # A compiled kernel assumes the alignment of the pointers it was compiled for (Triton specializes on it).
    key = (A.shape[0], A.shape[-1], A.device, A.data_ptr() % 16 == 0)
    try:
        _token.pop()
    except IndexError:
        raise RuntimeError("custom_kernel is running on another host thread: call it from one thread at a "
                           "time") from None
    try:
        if key not in _prepared:
            _prepared[key] = _GraphedQR(A) if _graphed(A) else _DirectQR(A)
        return _prepared[key](A)
    except BaseException:
        # A call cut short (an interrupt between two launches, an error) may leave its chain half launched, its
        # counters short of the join that clears them: the next call with this key prepares a fresh chain.
        _prepared.pop(key, None)
        raise
    finally:
        _token.append(True)
