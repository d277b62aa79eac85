"""dp_scree: R reference numbers, spec oracles, Dask passes vs a plain reference, ε → ∞, results."""

from __future__ import annotations

import json
import math

import dask.array as da
import numpy as np
import pytest

from dppca_dask import (
    ScreeResult,
    clipped_control,
    dp_loading,
    dp_scree,
    huber_control,
    load_result,
    pmwm_control,
    privacy_control,
)
from dppca_dask.graph.scree_passes import (
    NumpyScoresBackend,
    Request,
    ScoresBackend,
    pair_block_bounds,
)
from dppca_dask.io.data import as_data
from dppca_dask.io.datasets import make_gau
from dppca_dask.pca.directions import parse_v_dp
from dppca_dask.pca.options import ScreeOptions
from dppca_dask.pca.postprocess import (
    monotone_scree,
    ordered_eigh,
    pava_nonincreasing,
    scree_to_pve,
)
from dppca_dask.pca.scree import fit_scree
from dppca_dask.pca.scree_methods import huber_defaults
from dppca_dask.privacy.budget import resolve_budget
from dppca_dask.privacy.rng import as_rng
from dppca_dask.testing import RRNG
from tests import _scree_reference as ref

R_SCREE_NP = [2.061105, 1.771498]
R_PVE_NP = [0.5377819, 0.4622181]
R_BASES = [1.2366998749, 1.2504031387]
R_NOISE_SD = 0.1198717252
R_RAW = [1.1695147, 1.2228114]
R_MONO = 1.196163


@pytest.fixture(scope="module")
def gau100() -> np.ndarray:
    """gau[1:100, ] regenerated exactly with the R RNG emulator (SPEC §12)."""
    frame = make_gau(1000, rng=RRNG(123))
    return frame.iloc[:100, :20].to_numpy()


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.normal(size=(61, 4)) * [3.0, 2.0, 1.0, 0.5] + [1.0, -2.0, 0.5, 0.0]


def _old_api(gau100: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The R old API's inputs: centred data and the covariance eigenvectors (g_dppca = FALSE)."""
    centred = gau100 - gau100.mean(axis=0)
    _, vectors = ordered_eigh(np.cov(centred, rowvar=False))
    return centred, vectors[:, :2]


# --- SPEC §16 and §0 item 3 -------------------------------------------------------------------


def test_pava__spec_oracles():
    assert pava_nonincreasing(np.array([3, 1, 2, 0.5])).tolist() == [3, 1.5, 1.5, 0.5]
    np.testing.assert_allclose(monotone_scree(np.array([1.1695147, 1.2228114])),
                               [R_MONO, R_MONO], atol=5e-8)
    assert monotone_scree(np.array([-1.0, 2.0, 1.0])).tolist() == [1.0, 1.0, 1.0]


def test_scree_to_pve__spec_oracles(gau100):
    centred, _ = _old_api(gau100)
    eig = ordered_eigh(np.cov(centred, rowvar=False))[0][:2]
    np.testing.assert_allclose(eig, R_SCREE_NP, atol=5e-7)
    np.testing.assert_allclose(scree_to_pve(eig), R_PVE_NP, atol=5e-8)
    assert scree_to_pve(np.zeros(3)).tolist() == [0, 0, 0]
    assert scree_to_pve(np.array([np.inf, 1.0])).tolist() == [0, 0]


def test_dp_scree__r_clipped_bases_and_noise_sd(gau100):
    """§16: bases 1.2366998749 / 1.2504031387 and noise sd 0.1198717252 (C = 3, ε = 2, δ = 1e-3)."""
    centred, vectors = _old_api(gau100)
    for backend in (NumpyScoresBackend(centred, vectors),
                    ScoresBackend(da.from_array(centred, chunks=(13, 20)), vectors)):
        (sums,) = backend.evaluate([Request("sum")])
        (clipped,) = backend.evaluate([Request("clipped", (sums / 100, 3.0))])
        np.testing.assert_allclose(100 / 99 * clipped / 100, R_BASES, rtol=0, atol=5e-11)
    fit = dp_scree(centred, privacy=privacy_control(loading=(1, 1e-5), scree=(2, 1e-3)), k=2,
                   control=clipped_control(C_clip=3), V_dp=vectors, center="empirical",
                   rng=RRNG(123), preset="seed")
    scales = [r.scale for r in fit.ledger if r.component == "scree"]
    # the exact grid mechanism calibrates for Δ + γ√d: the R σ up to a relative ~1e-7
    np.testing.assert_allclose(scales, [R_NOISE_SD] * 2, rtol=2e-7, atol=0)
    assert all(s >= R_NOISE_SD for s in scales)


def test_dp_scree__reproduces_r_old_api_example(gau100):
    """SPEC §0 item 3: dp_scree(gau[1:100,], k=2, "clipped", C_clip=3, eps=2, delta=1e-3) with
    set.seed(123) in the R package's old API.

    That call centres X by its column means, takes the non-private covariance eigenvectors as
    directions (g_dppca = FALSE, so nothing is spent on them and no random draw precedes the
    scree noise), spends all of (ε, δ) on the scree and centres the scores empirically. In this
    package that is ``dp_scree(X̃, V_dp=<covariance eigenvectors>, center="empirical")`` with the
    whole scree budget given absolutely (the loading allocation is only recorded as a prior
    release) and ``rng=RRNG(123)``.
    """
    centred, vectors = _old_api(gau100)
    fit = dp_scree(centred, privacy=privacy_control(loading=(1, 1e-5), scree=(2, 1e-3)), k=2,
                   method="clipped", control=clipped_control(C_clip=3), V_dp=vectors,
                   center="empirical", rng=RRNG(123), non_private=True, preset="seed")
    # The noise is exact discrete Gaussian now (docs/privacy.md), not R's rnorm stream: the raw
    # values are the R bases plus noise of the recorded sd (|z| < 5.33: two-sided alpha 1e-7).
    raw = fit.scree_raw.values[0]
    assert np.all(np.abs(raw - R_BASES) < 5.33 * R_NOISE_SD * (1 + 1e-6))
    np.testing.assert_allclose(fit.scree.values[0], monotone_scree(np.maximum(raw, 0.0)),
                               atol=1e-12)
    np.testing.assert_allclose(fit.pve.values[0], scree_to_pve(fit.scree.values[0]), atol=1e-12)
    np.testing.assert_allclose(fit.nonprivate["scree"].values, R_SCREE_NP, atol=5e-7)
    np.testing.assert_allclose(fit.nonprivate["pve"].values, R_PVE_NP, atol=5e-8)
    meta = fit.metadata
    assert meta["scree"]["outside_guarantee"] is True
    assert meta["scree"]["center"] == "empirical" and fit.center is None
    assert meta["privacy"]["allocations"]["loading"]["status"] == "prior"
    assert meta["ledger_total"] == {"eps": 2.0, "delta": 1e-3}


# --- the Dask passes against the plain reference -------------------------------------------------

CONTROLS = {
    "clipped": clipped_control(C_clip=12.0),
    "pmwm": pmwm_control(a=0.0, b=40.0, trim_const=3.3, eta=0.05, beta=1.01, split_mode=True),
    "huber": huber_control(k_min_m2=-6, k_max_m2=8, m2_frac=0.25, M=4),
}


def _reference(x, v, center, method, eps, delta, seed):
    rng = np.random.default_rng(seed)
    n, k = x.shape[0], v.shape[1]
    w_all = (x @ v - center) ** 2
    ctl = CONTROLS[method]
    out = []
    for comp in range(k):
        w = w_all[:, comp]
        if method == "clipped":
            out.append(ref.clipped(w, n, ctl.C_clip, eps / k, delta / k, rng))
        elif method == "pmwm":
            out.append(ref.pmwm(w, n, ctl.a, ctl.b, ctl.trim_const, ctl.eta, ctl.beta,
                                ctl.split_mode, eps / k, delta / k, rng))
        else:
            steps, blocks = huber_defaults(n, ctl)
            out.append(ref.huber(w, n, ctl.k_min_m2, ctl.k_max_m2, ctl.m2_frac, ctl.mu0,
                                 ctl.eta0, steps, blocks, eps / k, delta / k, rng))
    return np.array(out)


def _fit(x, v, *, methods, center, chunks, seed, lockstep=False, eps=8.0, non_private=False):
    src = as_data(da.from_array(x, chunks=(chunks, x.shape[1])), owner="dp_scree")
    plan = resolve_budget(privacy_control(loading=(1, 1e-6), scree=(eps, 1e-3)),
                          owner="dp_scree", prior=("loading",))
    options = ScreeOptions.parse("dp_scree", scree_methods=methods, control=CONTROLS,
                                 k=v.shape[1], mono=False, non_private=non_private,
                                 center=center, preset="seed")
    setup = options.bind(src.n, src.p, parse_v_dp(v, src, "dp_scree"))
    return fit_scree(src, plan, setup, as_rng(seed), lockstep=lockstep)


@pytest.mark.parametrize("method", ["clipped", "pmwm", "huber"])
@pytest.mark.parametrize("chunks", [1, 7, 30, 61])
def test_dp_scree__dask_equals_reference_under_awkward_chunkings(data, method, chunks):
    """Row-order steps (the PMWM half split at row 30, the Huber consecutive pairs of an odd n)
    give the reference's answer for single-row, uneven and one-block chunkings."""
    _, vectors = ordered_eigh(np.cov(data, rowvar=False))
    v = vectors[:, :2]
    constants = np.array([1.0, -2.0, 0.5, 0.0])
    fit = _fit(data, v, methods=(method,), center=constants, chunks=chunks, seed=11)
    expected = _reference(data, v, constants @ v, method, 8.0, 1e-3, 11)
    np.testing.assert_allclose(fit.scree_raw.values[0], expected, rtol=1e-9, atol=1e-12)


def test_dp_scree__huber_pairs_and_blocks_follow_row_order(data):
    assert pair_block_bounds(61, 4).tolist() == [0, 14, 28, 42, 60]
    assert pair_block_bounds(10, 20).tolist() == [0, 2, 4, 6, 8, 10]
    # The pass recuts the scores on those boundaries whatever the input chunks were.
    _, vectors = ordered_eigh(np.cov(data, rowvar=False))
    counts = []
    for chunks in (1, 5, 61):
        backend = ScoresBackend(da.from_array(data, chunks=(chunks, 4)), vectors[:, :2])
        (c,) = backend.evaluate([Request("m2", (np.zeros(2), -6, 8, pair_block_bounds(61, 4)))])
        counts.append(c)
    assert all((c == counts[0]).all() for c in counts) and counts[0].sum() == 8


@pytest.mark.parametrize("chunks", [1, 9, 61])
def test_dp_scree__private_center_same_for_any_chunking(data, chunks):
    _, vectors = ordered_eigh(np.cov(data, rowvar=False))
    v = vectors[:, :3]
    base = _fit(data, v, methods=("clipped",), center="private", chunks=61, seed=4)
    fit = _fit(data, v, methods=("clipped",), center="private", chunks=chunks, seed=4)
    np.testing.assert_allclose(fit.center.values, base.center.values, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fit.scree_raw.values, base.scree_raw.values, rtol=1e-9)
    assert fit.metadata["scree"]["center_release"]["radius"] == \
        base.metadata["scree"]["center_release"]["radius"]


def test_dp_scree__lockstep_shares_passes(data):
    _, vectors = ordered_eigh(np.cov(data, rowvar=False))
    v = vectors[:, :3]
    methods = ("clipped", "pmwm", "huber")
    kw = {"methods": methods, "center": "empirical", "chunks": 10, "seed": 2,
          "eps": 1e24}
    together = _fit(data, v, lockstep=True, **kw)
    apart = _fit(data, v, lockstep=False, **kw)
    steps = huber_defaults(61, CONTROLS["huber"])[0]
    # one centre pass, then the three methods' first passes together, then the Huber steps
    assert together.metadata["scree"]["passes"] == 1 + 1 + steps
    assert apart.metadata["scree"]["passes"] == 1 + 3 * (1 + 2 + 1 + steps)
    np.testing.assert_allclose(together.scree_raw.values, apart.scree_raw.values, rtol=1e-5)
    assert sorted(r.note for r in together.ledger) == sorted(r.note for r in apart.ledger)


# --- ε → ∞ --------------------------------------------------------------------------------------

WIDE = {
    "clipped": clipped_control(C_clip=1e4),
    "pmwm": pmwm_control(a=0, b=1e4, trim_const=1e-9, eta=0, split_mode=False),
    "huber": huber_control(k_min_m2=-20, k_max_m2=30, m2_frac=0.25),
}


@pytest.mark.parametrize("center", ["private", "empirical", "constants"])
def test_dp_scree__converges_to_nonprivate_as_eps_grows(center):
    rng = np.random.default_rng(5)
    x = rng.standard_t(df=6, size=(800, 5)) * [4.0, 2.0, 1.5, 1.0, 0.5] + 7.0
    const = np.full(5, 7.0)
    fit = dp_scree(x, privacy=privacy_control(eps=1e20, delta=1e-5), k=4, method=list(WIDE),
                   control=WIDE, rng=1, non_private=True,
                   center=const if center == "constants" else center)
    target = fit.nonprivate["direction_variance"].values
    if center == "constants":  # the mean square about the public centre, not about the mean
        offset = (x.mean(axis=0) - const) @ fit.directions.values
        target = target + 800 / 799 * offset**2
    raw = fit.scree_raw.values
    # clipped and pmwm: the (valid, analytic-at-large-ε) noise ~ 1/√ε vanishes. Huber's τ grows
    # like √ε, so with a σ that honestly meets (ε, δ) its gradient noise does not vanish: check it
    # against the recorded step sds instead (|error| ≤ 5.33·√Σσ², alpha ~1e-7, per component).
    np.testing.assert_allclose(raw[:2], np.tile(target, (2, 1)), rtol=1e-6)
    for comp in range(4):
        sds = [r.scale for r in fit.ledger
               if r.note.startswith(f"huber PC{comp + 1}: gradient step")]
        bound = 5.33 * 800 / 799 * math.sqrt(sum(v * v for v in sds)) + 1e-6 * target[comp]
        assert abs(raw[2][comp] - target[comp]) < bound


def test_dp_scree__equals_covariance_eigenvalues_with_covariance_directions():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(500, 4)) * [3.0, 2.0, 1.0, 0.5]
    _, vectors = ordered_eigh(np.cov(x, rowvar=False))
    fit = dp_scree(x, privacy=privacy_control(eps=1e20, delta=1e-5), V_dp=vectors,
                   method=["clipped", "pmwm"], control=WIDE, rng=2, non_private=True)
    np.testing.assert_allclose(fit.nonprivate["scree"].values,
                               np.sort(np.linalg.eigvalsh(np.cov(x, rowvar=False)))[::-1])
    np.testing.assert_allclose(fit.scree.values, np.tile(fit.nonprivate["scree"].values, (2, 1)),
                               rtol=1e-6)
    np.testing.assert_allclose(fit.pve.values, np.tile(fit.nonprivate["pve"].values, (2, 1)),
                               atol=1e-7)


# --- budget, directions, results ----------------------------------------------------------------


def test_dp_scree__spends_loading_then_scree_and_records_everything():
    x = np.random.default_rng(7).normal(size=(200, 5))
    fit = dp_scree(x, privacy=privacy_control(eps=2, delta=1e-4), k=3,
                   method=["clipped", "pmwm"],
                   control={"clipped": clipped_control(10),
                            "pmwm": {"a": 0, "b": 20, "trim_const": 5, "eta": 0.01}}, rng=3)
    meta = fit.metadata
    assert meta["privacy"]["allocations"]["loading"] == {"eps": 1.0, "delta": 5e-05,
                                                         "status": "spent"}
    assert meta["scree"]["allocations"]["center"] == {"eps": 0.2, "delta": 1e-05}
    assert meta["scree"]["allocations"]["each_method"] == pytest.approx(
        {"eps": 0.8, "delta": 4e-05})
    assert meta["scree"]["directions"] == "dp_loading"
    assert fit.directions.attrs["private"] == 1
    components = [r.component for r in fit.ledger]
    assert components[0] == "loading" and set(components[1:]) == {"scree"}
    # basic composition over what ran: loading + centre + two methods' full allocations
    assert meta["ledger_total"]["eps"] == pytest.approx(1.0 + 0.2 + 2 * 0.8)
    assert '"seed"' not in json.dumps(meta) and meta["rng"]["seeded"] is True
    assert fit.scree.dims == ("mechanism", "component") and fit.methods == ("clipped", "pmwm")
    assert list(fit.scree["component"].values) == ["PC1", "PC2", "PC3"]
    assert (np.diff(fit.scree.values, axis=1) <= 0).all()
    assert set(fit.pve.values.sum(axis=1).round(12)) <= {0.0, 1.0}  # all-zero scree: PVE zeros
    assert fit.nonprivate is None


def test_dp_scree__loading_result_as_v_dp_is_not_spent_again():
    x = np.random.default_rng(8).normal(size=(120, 4))
    loading = dp_loading(x, privacy=privacy_control(eps=1, delta=1e-5), rng=1)
    fit = dp_scree(x, privacy=privacy_control(eps=2, delta=1e-5), V_dp=loading,
                   control=clipped_control(8), rng=2)
    assert fit.k == 4
    np.testing.assert_array_equal(fit.directions.values, loading.directions.values)
    assert fit.ledger[0].status == "prior" and fit.ledger[0].eps == 1.0
    assert fit.metadata["ledger_total"]["eps"] == pytest.approx(1.0)


def test_dp_scree__default_k_and_matrix_v_dp():
    x = np.random.default_rng(9).normal(size=(80, 12))
    assert dp_scree(x, privacy=privacy_control(eps=1, delta=1e-5), control=clipped_control(5),
                    rng=1).k == 10
    v = np.linalg.qr(np.random.default_rng(1).normal(size=(12, 3)))[0]
    assert dp_scree(x, privacy=privacy_control(eps=1, delta=1e-5), control=clipped_control(5),
                    V_dp=v, rng=1, center=0.0).k == 3


def test_scree_result__round_trips_and_prints(tmp_path):
    x = np.random.default_rng(10).normal(size=(150, 3)) * [2.0, 1.0, 0.5]
    fit = dp_scree(x, privacy=privacy_control(eps=4, delta=1e-5), k=2,
                   method=["clipped", "huber"],
                   control={"clipped": clipped_control(20),
                            "huber": huber_control(k_min_m2=-8, k_max_m2=8, m2_frac=0.25)},
                   rng=4, non_private=True)
    for path in (fit.to_zarr(tmp_path / "s.zarr"), fit.to_netcdf(tmp_path / "s.nc")):
        back = load_result(path)
        assert isinstance(back, ScreeResult)
        np.testing.assert_array_equal(back.scree.values, fit.scree.values)
        np.testing.assert_array_equal(back.nonprivate["pve"].values, fit.nonprivate["pve"].values)
        assert back.methods == ("clipped", "huber") and back.metadata == fit.metadata
    text = repr(fit)
    assert text.splitlines()[:4] == [
        "Differentially Private Scree Values",
        "Data: 150 observations x 3 variables",
        "Components: 2 principal components",
        "Methods: clipped, huber",
    ]
    assert "Privacy budget: eps = 4 ; delta = 1e-05 per method (2 methods: each spends the scree share; the directions are shared)" in text
    assert "Spent by this release: eps = " in text
    assert text.endswith("Centering: private \nNon-private reference: stored ")
    summary = repr(fit.summary())
    assert summary.startswith("DP Scree Summary\n")
    assert "Non-private reference (NOT private):" in summary
    assert fit.dataset["scree_nonprivate"].attrs["description"].startswith("NOT PRIVATE")
