"""The contest's contract for batched QR: inputs, the reference kernel, and the checker.

A submission defines ``custom_kernel(A) -> (H, tau)``.  ``A`` is a contiguous float32 tensor
``[batch, n, n]``; the result is ``torch.geqrf``'s compact Householder form: R on and above the
diagonal of ``H``, the reflectors' vectors below it (``v[k] = 1`` implicit), ``tau`` ``[batch, n]``,
so that ``Q = H_0 H_1 … H_{n-1}`` with ``H_k = I - tau_k v_k v_kᵀ`` and ``Qᵀ A = R``.

``generate_input`` reproduces the contest's generator bit for bit on the same device, so a local run
sees the tensors the ranked run sees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

EPS32 = torch.finfo(torch.float32).eps
FACTOR_RTOL = 20  # ‖R − QᵀA‖₁ ≤ FACTOR_RTOL · n · eps32 · ‖A‖₁, per matrix
ORTH_RTOL = 100  # ‖QᵀQ − I‖₁ ≤ ORTH_RTOL · n · eps32, worst matrix of the batch

# The profiles a "mixed" batch draws from, in the order they are applied, and their weights.
MIXED_PROFILES = ("dense", "rankdef", "nearrank", "clustered", "band", "rowscale", "nearcollinear")
MIXED_WEIGHTS = (6, 1, 1, 1, 1, 1, 1)
CASES = ("dense", "upper", "diagonal", "rankdef", "nearrank", "clustered", "band", "nearcollinear",
         "rowscale", "mixed")


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------

def _column_scaling(a: torch.Tensor, cond: int) -> torch.Tensor:
    """Scale column j by 10^(-cond·j/(n-1)): condition number about 10^cond."""
    if cond:
        n = a.shape[-1]
        return a * torch.logspace(0, -cond, n, dtype=torch.float32, device=a.device)
    return a.contiguous()


def _rank(n: int) -> int:
    return max(1, 3 * n // 4)


def _dense(a, cond, gen):
    return _column_scaling(a, cond)


def _upper(a, cond, gen):
    n = a.shape[-1]
    a = torch.triu(a)
    a.diagonal(dim1=-2, dim2=-1).add_(torch.linspace(1.0, 0.25, n, dtype=torch.float32, device=a.device))
    return _column_scaling(a, cond)


def _diagonal(a, cond, gen):
    batch, n = a.shape[0], a.shape[-1]
    d = torch.randn((batch, n), dtype=torch.float32, generator=gen, device=a.device)
    signs = torch.sign(d).clamp(min=0) * 2 - 1
    d = signs * torch.logspace(0, -max(cond, 2), n, dtype=torch.float32, device=a.device)
    return torch.diag_embed(d)


def _rankdef(a, cond, gen):
    a = a.clone()
    a[..., _rank(a.shape[-1]):] = 0
    return _column_scaling(a, cond)


def _nearrank(a, cond, gen):
    batch, n = a.shape[0], a.shape[-1]
    rank = _rank(n)
    tail = n - rank
    if tail > 0:
        noise = torch.randn((batch, n, tail), dtype=torch.float32, generator=gen, device=a.device)
        a = a.clone()
        a[..., rank:] = a[..., :tail] + 1e-5 * noise
    return _column_scaling(a, cond)


def _clustered(a, cond, gen):
    n = a.shape[-1]
    scales = torch.ones(n, dtype=torch.float32, device=a.device)
    scales[n // 2:] = 4 * EPS32
    if n >= 8:
        scales[max(0, n // 2 - 2):min(n, n // 2 + 2)] = math.sqrt(EPS32)
    return a * scales


def _band(a, cond, gen):
    n = a.shape[-1]
    bw = max(2, min(32, n // 32))
    idx = torch.arange(n, device=a.device)
    keep = (idx[:, None] - idx[None, :]).abs() <= bw
    a = a * keep  # by multiplication, as the contest does: entries outside the band are ±0.0
    a.diagonal(dim1=-2, dim2=-1).add_(torch.linspace(1.0, 0.5, n, dtype=torch.float32, device=a.device))
    return _column_scaling(a, cond)


def _nearcollinear(a, cond, gen):
    batch, n = a.shape[0], a.shape[-1]
    base = torch.randn((batch, n, 1), dtype=torch.float32, generator=gen, device=a.device)
    noise = torch.randn((batch, n, n), dtype=torch.float32, generator=gen, device=a.device)
    a = base.expand(batch, n, n) + 1e-4 * noise
    return _column_scaling(a, cond)


def _rowscale(a, cond, gen):
    n = a.shape[-1]
    return torch.logspace(0, -max(cond, 4), n, dtype=torch.float32, device=a.device).reshape(1, n, 1) * a


def _mixed(a, cond, gen):
    batch = a.shape[0]
    device = a.device
    weights = torch.tensor(MIXED_WEIGHTS, dtype=torch.float32, device=device)
    labels = torch.multinomial(weights, batch, replacement=True, generator=gen)
    if batch >= 2:
        if not bool((labels == 0).any()):
            labels[torch.randint(0, batch, (1,), generator=gen, device=device)] = 0
        elif bool((labels == 0).all()):
            pos = torch.randint(0, batch, (1,), generator=gen, device=device)
            labels[pos] = torch.randint(1, len(MIXED_PROFILES), (1,), generator=gen, device=device)
    a = a.clone()
    for label, profile in enumerate(MIXED_PROFILES):
        mask = labels == label
        if bool(mask.any()):
            a[mask] = _PROFILES[profile](a[mask], cond, gen)
    return a


_PROFILES = {
    "dense": _dense, "upper": _upper, "diagonal": _diagonal, "rankdef": _rankdef, "nearrank": _nearrank,
    "clustered": _clustered, "band": _band, "nearcollinear": _nearcollinear, "rowscale": _rowscale,
    "mixed": _mixed,
}


def generate_input(batch: int, n: int, cond: int, seed: int, case: str = "dense",
                   device: str | torch.device | None = None) -> torch.Tensor:
    """The contest's input for one case: contiguous float32 ``[batch, n, n]``.

    ``device`` defaults to the contest's choice (CUDA when available, else CPU); the same arguments on
    the same device give bit-identical tensors.
    """
    kind = str(case).lower()
    if kind not in _PROFILES:
        raise ValueError(f"unknown case {case!r}; expected one of {', '.join(CASES)}")
    if batch <= 0 or n <= 0:
        raise ValueError(f"batch and n must be positive, got batch={batch}, n={n}")
    if cond < 0:
        raise ValueError(f"cond must be non-negative, got {cond}")
    device = torch.device(device or default_device())
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    a = torch.randn((batch, n, n), dtype=torch.float32, generator=gen, device=device)
    return _PROFILES[kind](a, cond, gen).contiguous()


def ref_kernel(A: torch.Tensor):
    """The reference: LAPACK-style geqrf through torch."""
    return torch.geqrf(A)


# --------------------------------------------------------------------------------------------
# Checker
# --------------------------------------------------------------------------------------------

@dataclass
class CheckResult:
    ok: bool
    message: str
    factor_scaled: float | None = None  # worst ‖R − QᵀA‖₁ / (eps32·n·‖A‖₁)
    orth_scaled: float | None = None  # ‖QᵀQ − I‖₁ / (eps32·n), worst matrix
    factor_margin: float | None = None  # worst factor residual as a fraction of its gate (< 1 passes)
    orth_margin: float | None = None  # orthogonality residual as a fraction of its gate


def norm1(x: torch.Tensor) -> torch.Tensor:
    """Matrix 1-norm (largest column sum of absolute values) of each matrix in a batch, in float64.

    ``torch.linalg.matrix_norm(ord=1)``, the function the contest's checker uses, so both sum in the
    same order and a residual at the edge of a gate gets the same verdict from both."""
    return torch.linalg.matrix_norm(x.double(), ord=1, dim=(-2, -1))


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"tensor of shape {tuple(x.shape)}"
    return type(x).__name__


def output_problem(output, batch: int, n: int, device: torch.device, *, finite: bool = True) -> str | None:
    """Why ``output`` is not a well-formed ``(H, tau)``, or None: the contest's rules, in its order.

    A ``tuple`` (a list is refused) of two; then H, then tau, each: an instance of ``torch.Tensor``
    (subclasses such as ``nn.Parameter`` are accepted), the right shape, float32, on ``device``, and
    (with ``finite``) free of NaN and Inf. Contiguity and aliasing with the input are not rules.
    """
    if not isinstance(output, tuple) or len(output) != 2:
        return f"output must be a tuple (H, tau), got {_describe(output)}"
    for name, t, shape in (("H", output[0], (batch, n, n)), ("tau", output[1], (batch, n))):
        if not isinstance(t, torch.Tensor):
            return f"{name} must be a torch.Tensor, got {type(t).__name__}"
        if tuple(t.shape) != shape:
            return f"{name} has shape {tuple(t.shape)}, expected {shape}"
        if t.dtype != torch.float32:
            return f"{name} has dtype {t.dtype}, expected torch.float32"
        if t.device != device:
            return f"{name} is on {t.device}, expected {device}"
        if finite and not bool(torch.isfinite(t).all()):
            return f"{name} contains NaN or Inf"
    return None


@torch.no_grad()
def check_details(A: torch.Tensor, output) -> CheckResult:
    """Check ``output`` against the contract for input ``A``; gates in float64, as the contest does.

    The verdict follows the contest's checker rule by rule: the form (``output_problem``), Q and R
    finite, then ``‖R − QᵀA‖₁ > allowed`` for any matrix fails, then ``max ‖QᵀQ − I‖₁ > allowed``
    fails (strict comparisons, the same 1-norm). Both gates are always evaluated, so a failure
    message names every gate that failed, and the margins are reported either way.
    """
    batch, n = A.shape[0], A.shape[-1]
    problem = output_problem(output, batch, n, A.device)
    if problem:
        return CheckResult(False, problem)
    H, tau = output
    Q = torch.linalg.householder_product(H, tau)
    R = torch.triu(H)
    if not bool(torch.isfinite(Q).all()):
        return CheckResult(False, "Q = householder_product(H, tau) contains NaN or Inf")
    if not bool(torch.isfinite(R).all()):
        return CheckResult(False, "R = triu(H) contains NaN or Inf")

    # float64 products of finite float32 matrices cannot overflow: no further finiteness checks needed.
    A64, Q64, R64 = A.double(), Q.double(), R.double()
    P = Q64.transpose(-2, -1) @ A64
    a_norm = norm1(A64)
    unit = EPS32 * n

    factor_res = norm1(R64 - P)
    factor_allowed = FACTOR_RTOL * unit * a_norm
    factor_scaled = factor_res / (unit * a_norm.clamp(min=1e-30))
    factor_ratio = factor_res / factor_allowed.clamp(min=torch.finfo(torch.float64).tiny)
    # A zero matrix allows zero residual; a residual of zero against it passes.
    factor_ratio = torch.where(factor_res == 0, torch.zeros_like(factor_ratio), factor_ratio)
    factor_failed = factor_res > factor_allowed

    eye = torch.eye(n, dtype=torch.float64, device=A.device)
    orth_each = norm1(Q64.transpose(-2, -1) @ Q64 - eye)
    orth_res = float(orth_each.max())
    orth_allowed = ORTH_RTOL * unit
    orth_scaled = orth_res / unit

    worst = int(torch.argmax(torch.where(factor_failed, factor_ratio + 1, factor_ratio)))
    worst_scaled = float(factor_scaled.max())
    factor_margin = float(factor_ratio[worst])
    orth_margin = orth_res / orth_allowed

    failures = []
    if bool(factor_failed.any()):
        failures.append(
            f"factor residual too large: matrix {worst}: ‖R − QᵀA‖₁ = {float(factor_res[worst]):.3e} > "
            f"allowed {float(factor_allowed[worst]):.3e} (scaled residual {float(factor_scaled[worst]):.2f}, "
            f"rtol {FACTOR_RTOL})")
    if orth_res > orth_allowed:
        failures.append(
            f"Q not orthogonal: max ‖QᵀQ − I‖₁ = {orth_res:.3e} > allowed {orth_allowed:.3e} "
            f"(scaled residual {orth_scaled:.2f}, rtol {ORTH_RTOL})")
    if failures:
        return CheckResult(False, "; ".join(failures), worst_scaled, orth_scaled, factor_margin, orth_margin)

    recon = float((norm1(Q64 @ R64 - A64) / (unit * a_norm.clamp(min=1e-30))).max())
    leakage = float((norm1(torch.tril(P, -1)) / (unit * a_norm.clamp(min=1e-30))).max())
    message = (f"ok: batch={batch} n={n} factor_rtol={FACTOR_RTOL} orth_rtol={ORTH_RTOL} "
               f"scaled factor={worst_scaled:.3f} reconstruction={recon:.3f} "
               f"leakage={leakage:.3f} orthogonality={orth_scaled:.3f}")
    return CheckResult(True, message, worst_scaled, orth_scaled, factor_margin, orth_margin)


def check_implementation(A: torch.Tensor, output) -> tuple[bool, str]:
    """The contest's verdict: ``(ok, message)``."""
    result = check_details(A, output)
    return result.ok, result.message
