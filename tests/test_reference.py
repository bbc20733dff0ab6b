"""The contract: the generator's structure and determinism, and the gates on real factorizations."""

import math

import pytest
import torch

import reference as ref

N = 24
BATCH = 3


def _good(case="dense", n=N, batch=BATCH, cond=2, seed=7):
    A = ref.generate_input(batch, n, cond, seed, case, device="cpu")
    H, tau = torch.geqrf(A)
    return A, H, tau


@pytest.mark.parametrize("case", ref.CASES)
@pytest.mark.parametrize("n", [1, 2, 5, 17, 33])
def test_geqrf_passes_every_case_kind(case, n):
    A, H, tau = _good(case, n=n)
    result = ref.check_details(A, (H, tau))
    assert result.ok, result.message
    assert result.factor_margin < 1 and result.orth_margin < 1
    ok, message = ref.check_implementation(A, (H, tau))
    assert ok and message.startswith("ok: batch=3 n=%d" % n)


@pytest.mark.parametrize("case", ref.CASES)
def test_generator_is_deterministic_per_seed(case):
    a = ref.generate_input(4, 20, 2, 11, case, device="cpu")
    b = ref.generate_input(4, 20, 2, 11, case, device="cpu")
    c = ref.generate_input(4, 20, 2, 12, case, device="cpu")
    assert a.dtype == torch.float32 and a.is_contiguous() and a.shape == (4, 20, 20)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_case_name_is_case_insensitive_and_unknown_is_an_error():
    assert torch.equal(ref.generate_input(2, 8, 1, 3, "DENSE", device="cpu"),
                       ref.generate_input(2, 8, 1, 3, "dense", device="cpu"))
    with pytest.raises(ValueError, match="unknown case 'spiral'"):
        ref.generate_input(2, 8, 1, 3, "spiral", device="cpu")


def test_dense_column_scaling_matches_the_contract():
    gen = torch.Generator("cpu")
    gen.manual_seed(5)
    raw = torch.randn((2, 16, 16), dtype=torch.float32, generator=gen)
    expected = raw * torch.logspace(0, -3, 16, dtype=torch.float32)
    assert torch.equal(ref.generate_input(2, 16, 3, 5, device="cpu"), expected)
    assert torch.equal(ref.generate_input(2, 16, 0, 5, device="cpu"), raw)


def test_structures():
    n = 64
    rankdef = ref.generate_input(2, n, 0, 1, "rankdef", device="cpu")
    assert torch.count_nonzero(rankdef[..., 3 * n // 4:]) == 0
    assert torch.count_nonzero(rankdef[..., : 3 * n // 4]) > 0

    upper = ref.generate_input(2, n, 1, 1, "upper", device="cpu")
    assert torch.equal(upper, torch.triu(upper))

    diagonal = ref.generate_input(2, n, 0, 1, "diagonal", device="cpu")
    assert torch.equal(diagonal, torch.diag_embed(torch.diagonal(diagonal, dim1=-2, dim2=-1)))
    assert torch.all(torch.diagonal(diagonal, dim1=-2, dim2=-1).abs() > 0)

    band = ref.generate_input(2, n, 0, 1, "band", device="cpu")
    bw = max(2, min(32, n // 32))
    i = torch.arange(n)
    outside = (i[:, None] - i[None, :]).abs() > bw
    assert torch.count_nonzero(band[:, outside]) == 0

    clustered = ref.generate_input(2, n, 0, 1, "clustered", device="cpu")
    col = clustered.abs().amax(dim=-2)  # largest entry per column
    assert torch.all(col[:, n // 2 + 2:] < 100 * ref.EPS32)
    assert torch.all(col[:, : n // 2 - 2] > 1e-3)

    nearrank = ref.generate_input(2, n, 0, 1, "nearrank", device="cpu")
    tail = n - 3 * n // 4
    diff = nearrank[..., 3 * n // 4:] - nearrank[..., :tail]
    assert diff.abs().max() < 1e-3 and diff.abs().max() > 0

    rowscale = ref.generate_input(2, n, 0, 1, "rowscale", device="cpu")
    row = rowscale.abs().amax(dim=-1)
    assert row[:, -1].max() < 1e-3 * row[:, 0].min()

    collinear = ref.generate_input(2, n, 0, 1, "nearcollinear", device="cpu")
    assert (collinear - collinear[..., :1]).abs().max() < 1e-2


def test_mixed_batch_is_not_all_one_profile():
    """With batch >= 2 a mixed batch holds a dense matrix and at least one other profile."""
    for seed in range(5):
        A = ref.generate_input(2, 32, 0, seed, "mixed", device="cpu")
        dense = ref.generate_input(2, 32, 0, seed, "dense", device="cpu")
        assert not torch.equal(A, dense), seed


def test_mixed_profiles_leave_their_structure():
    n = 64
    A = ref.generate_input(64, n, 0, 21, "mixed", device="cpu")
    rankdef_like = [i for i in range(64) if torch.count_nonzero(A[i, :, 3 * n // 4:]) == 0]
    band_like = [i for i in range(64) if torch.count_nonzero(torch.triu(A[i], 3)) == 0]
    assert rankdef_like, "a 64-matrix mixed batch should draw at least one rankdef matrix"
    assert band_like, "a 64-matrix mixed batch should draw at least one band matrix"
    assert len(rankdef_like) < 64


# ---- the gates catch each kind of wrong answer ----------------------------------------------

def _fails(A, output, *words):
    ok, message = ref.check_implementation(A, output)
    assert not ok, message
    for w in words:
        assert w in message, message
    return message


def test_wrong_tau_sign_fails():
    A, H, tau = _good()
    _fails(A, (H, -tau), "orthogonal")


def test_wrong_tau_scale_fails():
    A, H, tau = _good()
    _fails(A, (H, tau * 1.01), "orthogonal")


def test_perturbed_R_fails_with_worst_matrix():
    A, H, tau = _good()
    H = H.clone()
    H[1] += torch.triu(torch.full_like(H[1], 1e-3)) * H[1].abs().max()
    message = _fails(A, (H, tau), "factor residual", "matrix 1", "scaled residual")


def test_R_sign_flip_fails():
    """Writing beta on a trivial reflector flips a row of R: QᵀA ≠ R."""
    A = ref.generate_input(1, 8, 0, 1, "upper", device="cpu")
    H, tau = torch.geqrf(A)
    H = H.clone()
    H[0, 0, :] = -H[0, 0, :]
    _fails(A, (H, tau), "factor residual")


def test_leakage_below_the_diagonal_fails():
    A, H, tau = _good()
    H = H.clone()
    H[0] += torch.tril(torch.full_like(H[0], 1e-3), -1)
    _fails(A, (H, tau))


def test_non_orthogonal_q_fails():
    A, H, tau = _good()
    _fails(A, (H, tau * 0.5), "Q not orthogonal", "allowed")


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_fails(bad):
    A, H, tau = _good()
    H2 = H.clone()
    H2[0, 3, 2] = bad
    _fails(A, (H2, tau), "H contains NaN or Inf")
    tau2 = tau.clone()
    tau2[0, 0] = bad
    _fails(A, (H, tau2), "tau contains NaN or Inf")


# ---- the output's form: the contest's checker, rule by rule -----------------------------------
# Each row: the rule, an output built from a good (H, tau), whether the contest's checker accepts it,
# and a word its message must carry when refused. tests/test_parity.py runs the same rows through the
# contest's own reference.py and asserts the same verdicts.

class _Parameterish(torch.Tensor):
    """A plain subclass of torch.Tensor (no overrides)."""


def form_cases():
    def nan_at(t, index):
        t = t.clone()
        t[index] = float("nan")
        return t

    return [
        # (id, build(H, tau) -> output, contest accepts?, words in our message)
        ("tuple-accepted", lambda H, tau: (H, tau), True, ()),
        ("list-refused: the contest requires a tuple", lambda H, tau: [H, tau], False, ("tuple (H, tau)",)),
        ("namedtuple-accepted: any tuple instance", lambda H, tau: _Pair(H, tau), True, ()),
        ("three-refused: length must be 2", lambda H, tau: (H, tau, tau), False, ("tuple (H, tau)",)),
        ("one-refused: length must be 2", lambda H, tau: (H,), False, ("tuple (H, tau)",)),
        ("bare-tensor-refused", lambda H, tau: H, False, ("tuple (H, tau)",)),
        ("parameter-accepted: any torch.Tensor instance",
         lambda H, tau: (torch.nn.Parameter(H, requires_grad=False), torch.nn.Parameter(tau)), True, ()),
        ("subclass-accepted: any torch.Tensor instance",
         lambda H, tau: (H.as_subclass(_Parameterish), tau), True, ()),
        ("numpy-refused: must be a torch.Tensor", lambda H, tau: (H.numpy(), tau), False, ("H must be a torch.Tensor",)),
        ("H-shape-refused", lambda H, tau: (H[:, :-1], tau), False, ("H has shape",)),
        ("tau-shape-refused", lambda H, tau: (H, tau[:, :-1]), False, ("tau has shape",)),
        ("H-batch-refused", lambda H, tau: (H[:1], tau[:1]), False, ("H has shape",)),
        ("H-float64-refused", lambda H, tau: (H.double(), tau), False, ("H has dtype torch.float64",)),
        ("tau-float16-refused", lambda H, tau: (H, tau.half()), False, ("tau has dtype torch.float16",)),
        ("H-device-refused", lambda H, tau: (H.to("meta"), tau), False, ("H is on meta",)),
        ("H-nan-refused", lambda H, tau: (nan_at(H, (0, 1, 1)), tau), False, ("H contains NaN or Inf",)),
        ("tau-inf-refused", lambda H, tau: (H, tau.clone().fill_(float("inf"))), False, ("tau contains NaN or Inf",)),
        ("H-before-tau: H's NaN is named before tau's shape",
         lambda H, tau: (nan_at(H, (0, 0, 0)), tau[:, :-1]), False, ("H contains NaN or Inf",)),
        ("non-contiguous-accepted: no contiguity rule",
         lambda H, tau: (H.mT.contiguous().mT, tau), True, ()),
        ("wrong-values-refused: gates", lambda H, tau: (H, -tau), False, ("orthogonal",)),
    ]


class _Pair(tuple):
    def __new__(cls, H, tau):
        return super().__new__(cls, (H, tau))


@pytest.mark.parametrize("name, build, accepted, words", form_cases(), ids=[c[0].split(":")[0] for c in form_cases()])
def test_output_form_rule_agrees_with_the_contests_checker(name, build, accepted, words):
    A, H, tau = _good()
    ok, message = ref.check_implementation(A, build(H, tau))
    assert ok == accepted, message
    for word in words:
        assert word in message, message
    if not accepted:
        assert "\n" not in message


def test_zero_matrix_passes_only_with_a_zero_residual():
    """The contest's gate is ``residual > rtol · ‖A‖₁``: for A = 0 only an exact zero residual passes."""
    A = torch.zeros(2, 6, 6)
    H, tau = torch.geqrf(A)
    assert ref.check_implementation(A, (H, tau))[0]
    H = H.clone()
    H[0, 0, 0] = 1e-30
    ok, message = ref.check_implementation(A, (H, tau))
    assert not ok and "factor residual" in message


def test_band_is_masked_by_multiplication_negative_zeros_included():
    """The contest multiplies by the band mask: a negative entry outside the band becomes -0.0."""
    A = ref.generate_input(3, 70, 0, 5, "band", device="cpu")
    bw = max(2, min(32, 70 // 32))
    i = torch.arange(70)
    outside = (i[:, None] - i[None, :]).abs() > bw
    zeros = A[:, outside]
    assert torch.all(zeros == 0)
    assert torch.signbit(zeros).any() and (~torch.signbit(zeros)).any()


def test_scaled_residual_definition():
    A, H, tau = _good(n=16)
    r = ref.check_details(A, (H, tau))
    assert r.factor_scaled >= 0 and r.orth_scaled >= 0
    assert math.isclose(r.factor_margin, r.factor_scaled / ref.FACTOR_RTOL, rel_tol=1e-9)
    assert math.isclose(r.orth_margin, r.orth_scaled / ref.ORTH_RTOL, rel_tol=1e-9)
