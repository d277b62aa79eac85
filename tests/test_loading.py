"""dp_loading and spherical_kendall end to end (seeds/dp_loading.txt, SPEC_dppca.md §4)."""

from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from dppca_dask import (
    BudgetError,
    DuplicateObservationError,
    InputError,
    ParameterError,
    dp_loading,
    privacy_control,
    spherical_kendall,
)
from dppca_dask.pca.loading import kendall_sensitivity
from dppca_dask.pca.postprocess import ordered_eigh
from tests.helpers import brute_force

PRIV = privacy_control(eps=1.0, delta=1e-5)
HUGE = privacy_control(eps=1e24, delta=1e-5)  # honest σ ≈ Δ/√(2ε) at huge ε (analytic)


def _exact_kendall(x: np.ndarray) -> np.ndarray:
    s, m = brute_force(x)
    return s / m


def _assert_same_directions(got: np.ndarray, expected: np.ndarray, atol: float) -> None:
    signs = np.sign(np.einsum("ij,ij->j", got, expected))
    np.testing.assert_allclose(got * signs, expected, atol=atol)


@pytest.fixture
def spiked(global_seed) -> np.ndarray:
    rng = np.random.default_rng(global_seed)
    return rng.normal(size=(150, 5)) * np.array([5.0, 3.0, 2.0, 1.0, 0.5])


def test_spherical_kendall__trace_one_symmetric_psd(spiked):
    k = spherical_kendall(spiked).values
    assert np.trace(k) == pytest.approx(1.0, abs=1e-13)
    np.testing.assert_array_equal(k, k.T)
    assert np.linalg.eigvalsh(k).min() > -1e-14


@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_spherical_kendall__matches_double_loop(spiked, offset):
    x = spiked[:80] + offset
    expected = _exact_kendall(x)
    for cpp in (True, False):
        got = spherical_kendall(x, cpp_option=cpp, block_rows=17).values
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13)


def test_spherical_kendall__input_kinds_agree(spiked):
    expected = spherical_kendall(spiked).values
    frame = pd.DataFrame(spiked, columns=list("abcde"))
    for x in (
        frame,
        da.from_array(spiked, chunks=(23, 2)),
        xr.DataArray(spiked, dims=("obs", "var"), coords={"var": list("abcde")}),
    ):
        got = spherical_kendall(x, block_rows=40)
        np.testing.assert_allclose(got.values, expected, rtol=1e-12, atol=1e-15)
    assert list(spherical_kendall(frame)["variable"].values) == list("abcde")


def test_dp_loading__huge_eps_equals_nonprivate_kendall_eigenvectors(spiked):
    for offset in (0.0, 1e6):
        x = spiked + offset
        fit = dp_loading(x, privacy=HUGE, rng=0)
        _, expected = ordered_eigh(_exact_kendall(x[:150]))
        _assert_same_directions(fit.directions.values, expected, atol=1e-9)


def test_dp_loading__directions_orthonormal_and_labelled(spiked):
    fit = dp_loading(pd.DataFrame(spiked, columns=list("abcde")), privacy=PRIV, rng=1)
    v = fit.directions.values
    np.testing.assert_allclose(v.T @ v, np.eye(5), atol=1e-12)
    assert fit.directions.dims == ("variable", "component")
    assert list(fit.directions["variable"].values) == list("abcde")
    assert list(fit.directions["component"].values) == [f"PC{j}" for j in range(1, 6)]
    assert fit.nonprivate is None


def test_dp_loading__nonprivate_reference_sign_aligned(spiked):
    fit = dp_loading(spiked, privacy=privacy_control(eps=0.3, delta=1e-5), non_private=True, rng=4)
    inner = np.einsum("ij,ij->j", fit.directions.values, fit.nonprivate.values)
    assert (inner >= 0).all()
    _, basis = ordered_eigh(np.cov(spiked, rowvar=False))
    _assert_same_directions(fit.nonprivate.values, basis, atol=1e-10)
    assert fit.dataset["nonprivate_directions"].attrs["private"] == 0
    assert "Non-private reference: stored " in repr(fit)


def test_dp_loading__rng_reproducible_and_never_stored(spiked):
    a = dp_loading(spiked, privacy=PRIV, rng=12345)
    b = dp_loading(spiked, privacy=PRIV, rng=np.random.default_rng(12345))
    c = dp_loading(spiked, privacy=PRIV)
    np.testing.assert_array_equal(a.directions.values, b.directions.values)
    assert a.metadata["rng"]["seeded"] is True and c.metadata["rng"]["seeded"] is False
    assert a.metadata["rng"]["guarantee"].startswith("NOT PRIVATE")
    assert c.metadata["rng"]["guarantee"] == "private"
    assert "12345" not in json.dumps(a.metadata)
    assert "12345" not in str(a.dataset.attrs)


def test_dp_loading__ledger_and_budget_metadata(spiked):
    fit = dp_loading(spiked, privacy=privacy_control(eps=0.5, delta=1e-3), rng=0, preset="seed")
    (record,) = fit.ledger
    assert record.component == "loading"
    assert record.sensitivity == pytest.approx(4 / 150, rel=1e-8)  # + grid inflation
    assert record.eps == 0.5 and record.delta == 1e-3
    assert record.draws == 15
    meta = fit.metadata
    assert meta["n"] == 150 and meta["p"] == 5
    assert meta["ledger_total"] == {"eps": 0.5, "delta": 1e-3}
    assert meta["privacy"]["allocations"]["loading"]["eps"] == 0.5
    assert meta["calibration"] == "classical"


def test_dp_loading__analytic_calibration_less_noise(spiked):
    pc = privacy_control(eps=0.5, delta=1e-5)
    classical = dp_loading(spiked, privacy=pc, calibration="classical", rng=0).ledger[0]
    analytic = dp_loading(spiked, privacy=pc, calibration="analytic", rng=0).ledger[0]
    assert analytic.calibration == "analytic"
    assert analytic.scale < classical.scale


def test_dp_loading__absolute_budget(spiked):
    fit = dp_loading(spiked, privacy=privacy_control(loading=(0.7, 1e-6)), rng=0)
    assert fit.ledger[0].eps == 0.7


# --- bad inputs: each a clear error ---------------------------------------------------------
def test_dp_loading__duplicates_rejected_with_spec_message(spiked):
    x = spiked.copy()
    x[100] = x[7]
    with pytest.raises(DuplicateObservationError, match="^Cannot normalize a vector with zero"):
        dp_loading(x, privacy=PRIV, rng=0)
    with pytest.raises(DuplicateObservationError):
        dp_loading(da.from_array(x, chunks=(30, 5)), privacy=PRIV, rng=0)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_dp_loading__non_finite_rejected(spiked, bad):
    x = spiked.copy()
    x[3, 2] = bad
    with pytest.raises(InputError, match="finite"):
        dp_loading(x, privacy=PRIV, rng=0)
    with pytest.raises(InputError, match="finite"):
        dp_loading(da.from_array(x, chunks=(30, 5)), privacy=PRIV, rng=0)


def test_dp_loading__shape_errors():
    with pytest.raises(InputError, match="at least two rows"):
        dp_loading(np.ones((1, 3)), privacy=PRIV)
    with pytest.raises(InputError, match="at least one column"):
        dp_loading(np.ones((5, 0)), privacy=PRIV)


@pytest.mark.parametrize(
    "privacy", [None, {"eps": 1, "delta": 1e-5}, (1.0, 1e-5), 1.0, "eps=1"]
)
def test_dp_loading__bad_privacy_object(spiked, privacy):
    with pytest.raises(BudgetError, match="'privacy' parameter of dp_loading"):
        dp_loading(spiked, privacy=privacy)


def test_dp_loading__explicit_split_must_match(spiked):
    pc = privacy_control(eps=1, delta=1e-5, split={"loading": 0.5, "scree": 0.5})
    with pytest.raises(BudgetError, match=r"dp_loading needs privacy budgets for exactly \{loading\}"):
        dp_loading(spiked, privacy=pc)
    with pytest.raises(BudgetError, match="absolute budgets"):
        dp_loading(spiked, privacy=privacy_control(loading=(1, 1e-5), scree=(1, 1e-5)))


def test_dp_loading__missing_zarr_path(tmp_path):
    with pytest.raises(InputError, match="not found"):
        dp_loading(str(tmp_path / "nope.zarr"), privacy=PRIV)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"cpp_option": "yes"}, "'cpp_option' parameter of dp_loading must be a bool"),
        ({"non_private": 1}, "'non_private' parameter"),
        ({"calibration": "tight"}, "'calibration' parameter of dp_loading must be a str among"),
        ({"rng": -1}, "'rng' parameter"),
        ({"rng": "seed"}, "'rng' parameter"),
    ],
)
def test_dp_loading__bad_arguments(spiked, kwargs, match):
    with pytest.raises(ParameterError, match=match):
        dp_loading(spiked, privacy=PRIV, **kwargs)


def test_dp_loading__budget_refused_before_reading_data(tmp_path):
    # The budget is checked first: a path that does not exist is never opened.
    pc = privacy_control(eps=1, delta=1e-5, split={"loading": 0.5, "score": 0.5})
    with pytest.raises(BudgetError):
        dp_loading(str(tmp_path / "nope.zarr"), privacy=pc)


# --- pairs="blocks": the linear-time incomplete U-statistic -----------------------------------
def _groups(n: int, pair_block: int) -> list[int]:
    """The grouping rule written out independently: ceil(n/b) even groups, each >= 2 rows."""
    g = max(1, min(-(-n // pair_block), n // 2))
    return [n // g + (1 if k < n % g else 0) for k in range(g)]


def test_kendall_sensitivity__blocks_formula():
    for n, b in [(100, 25), (1000, 7), (10, 4), (5, 2), (1001, 1000), (50, 50), (2, 2)]:
        sizes = _groups(n, b)
        pairs = sum(s * (s - 1) // 2 for s in sizes)
        got = kendall_sensitivity(n, pairs="blocks", pair_block=b)
        assert got == pytest.approx(2 * (max(sizes) - 1) / pairs, rel=1e-15)
        assert got >= 4 / n * (1 - 1e-15)  # never below the full U-statistic's 4/n
        if len(set(sizes)) == 1:
            assert got == pytest.approx(4 / n, rel=1e-15)
    assert kendall_sensitivity(100, pairs="blocks", pair_block=1000) == 4 / 100


def test_kendall_sensitivity__blocks_bound_holds_for_a_replaced_row(spiked):
    # Replace one row by a far-away point: ‖K̂ − K̂'‖_F stays within the calibrated sensitivity.
    x = spiked[:90]
    n, b = len(x), 20
    bound = kendall_sensitivity(n, pairs="blocks", pair_block=b)
    k = spherical_kendall(x, pairs="blocks", pair_block=b).values
    for row in (0, 45, 89):
        y = x.copy()
        y[row] = 1e3 * np.ones(x.shape[1])
        k2 = spherical_kendall(y, pairs="blocks", pair_block=b).values
        assert np.linalg.norm(k - k2) <= bound


def test_spherical_kendall__blocks_mode_equals_group_average(spiked):
    x = spiked[:70] + 1e6
    sizes = _groups(70, 16)
    groups = np.split(x, np.cumsum(sizes)[:-1])
    sums = [brute_force(g) for g in groups]
    expected = sum(s for s, _ in sums) / sum(m for _, m in sums)
    for cpp in (True, False):
        got = spherical_kendall(x, cpp_option=cpp, pairs="blocks", pair_block=16).values
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13)
    assert np.trace(got) == pytest.approx(1.0, abs=1e-13)


def test_spherical_kendall__one_group_is_the_full_u_statistic(spiked):
    full = spherical_kendall(spiked).values
    one = spherical_kendall(spiked, pairs="blocks", pair_block=len(spiked)).values
    np.testing.assert_allclose(one, full, rtol=0, atol=1e-15)


@pytest.mark.parametrize("chunks", [1, 7, (3, 50, 1, 96), 150])
def test_spherical_kendall__blocks_mode_dask_equals_numpy(spiked, chunks):
    expected = spherical_kendall(spiked, pairs="blocks", pair_block=32).values
    x = da.from_array(spiked, chunks=(chunks, 5))
    got = spherical_kendall(x, pairs="blocks", pair_block=32).values
    np.testing.assert_array_equal(got, expected)  # grouping never depends on the chunking


def test_dp_loading__blocks_mode_ledger_and_metadata(spiked):
    fit = dp_loading(spiked, privacy=PRIV, pairs="blocks", pair_block=40, rng=3, preset="seed")
    (record,) = fit.ledger
    assert record.sensitivity == pytest.approx(
        kendall_sensitivity(150, pairs="blocks", pair_block=40), rel=1e-8)
    assert "pairs='blocks'" in record.note and "kendall_blocks_sensitivity.md" in record.note
    assert fit.metadata["pairs"] == "blocks" and fit.metadata["pair_block"] == 40
    assert fit.metadata["kendall_layout"]["pairs"] == 2 * (38 * 37 // 2) + 2 * (37 * 36 // 2)
    default = dp_loading(spiked, privacy=PRIV, rng=3, preset="seed")
    assert default.ledger[0].sensitivity == pytest.approx(4 / 150, rel=1e-8) and default.metadata["pairs"] == "all"
    assert record.scale > default.ledger[0].scale  # 150 = 38+38+37+37: unequal groups, > 4/n


def test_dp_loading__blocks_mode_huge_eps_recovers_block_kendall(spiked):
    fit = dp_loading(spiked, privacy=HUGE, pairs="blocks", pair_block=50, rng=0)
    k = spherical_kendall(spiked, pairs="blocks", pair_block=50).values
    _, expected = ordered_eigh(k)
    _assert_same_directions(fit.directions.values, expected, atol=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"pairs": "some"}, "'pairs' parameter of dp_loading must be a str among"),
        ({"pairs": None}, "'pairs' parameter"),
        ({"pair_block": 1}, r"'pair_block' parameter of dp_loading must be an int in the range \[2"),
        ({"pair_block": 2.5}, "'pair_block' parameter"),
        ({"pair_block": "4096"}, "'pair_block' parameter"),
        ({"pairs": "blocks", "pair_block": True}, "'pair_block' parameter"),
    ],
)
def test_dp_loading__bad_pairs_arguments(spiked, kwargs, match):
    with pytest.raises(ParameterError, match=match):
        dp_loading(spiked, privacy=PRIV, **kwargs)
    with pytest.raises(ParameterError):
        spherical_kendall(spiked, **kwargs)


# --- sensitivity="tight" (issue 9) ------------------------------------------------------------
def test_kendall_sensitivity__tight_is_seed_over_sqrt2():
    from dppca_dask.pca.loading import kendall_sensitivity

    assert kendall_sensitivity(100, bound="tight") == pytest.approx(2 * np.sqrt(2) / 100)
    for n, b in ((1000, 64), (10, 4), (12345, 999)):
        seed = kendall_sensitivity(n, pairs="blocks", pair_block=b)
        tight = kendall_sensitivity(n, pairs="blocks", pair_block=b, bound="tight")
        assert tight == pytest.approx(seed / np.sqrt(2))


def test_kendall_sensitivity__tight_bound_holds_on_neighbours(global_seed):
    """‖K̂(X) − K̂(X')‖_F ≤ 2√2/n for random and adversarial replace-one neighbours."""
    from dppca_dask.pca.loading import kendall_sensitivity
    from dppca_dask.privacy.audit import kendall_neighbours

    rng = np.random.default_rng(global_seed)
    cases = [kendall_neighbours(30, 3), kendall_neighbours(7, 2)]
    for _ in range(20):
        n, p = int(rng.integers(3, 25)), int(rng.integers(1, 5))
        x = rng.standard_t(2, size=(n, p))
        y = x.copy()
        y[rng.integers(n)] = rng.normal(size=p) * 10 ** rng.uniform(-2, 6)
        cases.append((x, y))
    worst = 0.0
    for x, y in cases:
        n = len(x)
        change = float(np.linalg.norm(spherical_kendall(x).values - spherical_kendall(y).values))
        assert change <= kendall_sensitivity(n, bound="tight") * (1 + 1e-9)
        worst = max(worst, change / kendall_sensitivity(n, bound="tight"))
    assert worst > 0.99  # the adversarial pair attains the bound: it cannot be lowered


def test_dp_loading__tight_sensitivity_less_noise(spiked):
    pc = privacy_control(eps=0.5, delta=1e-5)
    seed = dp_loading(spiked, privacy=pc, rng=0, sensitivity="seed")
    tight = dp_loading(spiked, privacy=pc, rng=0, sensitivity="tight")
    assert tight.ledger[0].scale == pytest.approx(seed.ledger[0].scale / np.sqrt(2))
    assert tight.ledger[0].sensitivity == pytest.approx(2 * np.sqrt(2) / 150)
    assert tight.metadata["sensitivity"] == "tight"
    with pytest.raises(ParameterError, match="'sensitivity' parameter of dp_loading"):
        dp_loading(spiked, privacy=pc, sensitivity="loose")


@pytest.mark.parametrize("owner", ["dp_scree", "dp_score", "dp_pca"])
def test_estimators__pass_tight_sensitivity_to_the_loading_release(spiked, owner):
    import dppca_dask

    fn = getattr(dppca_dask, owner)
    extra = {"control": {"C_clip": 50.0}} if owner == "dp_scree" else {}
    if owner == "dp_pca":
        extra = {"scree_control": {"C_clip": 50.0}}
    fits = [fn(spiked, privacy=privacy_control(eps=1.0, delta=1e-5), rng=0, sensitivity=s,
               **extra) for s in ("seed", "tight")]
    scales = [next(r.scale for r in f.ledger if r.component == "loading") for f in fits]
    assert scales[1] == pytest.approx(scales[0] / np.sqrt(2))
    with pytest.raises(ParameterError, match=f"'sensitivity' parameter of {owner}"):
        fn(spiked, privacy=privacy_control(eps=1.0, delta=1e-5), sensitivity=2, **extra)
