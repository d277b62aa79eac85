"""Expected scree noise relative to the estimand and the UtilityWarning criterion (issue 18 item 4):
dppca_dask/pca/scree_utility.py (plans) and dppca_dask/results/scree_utility.py (summaries)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dppca_dask import dp_scree, privacy_control
from dppca_dask.pca.scree_controls import clipped_control, huber_control, pmwm_control
from dppca_dask.pca.scree_utility import (
    argmax_probability,
    method_noise,
    noise_lines,
    unreliable_messages,
)
from dppca_dask.privacy.accounting import analytic_gaussian_sigma
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.results.scree_utility import released_noise_lines

DEMO_HUBER = huber_control(k_min_m2=-10, k_max_m2=15, m2_frac=0.25)
DEMO = {"clipped": clipped_control(150),
        "pmwm": pmwm_control(a=0, b=200, trim_const=10, eta=0.01, beta=1.01, split_mode=False),
        "huber": DEMO_HUBER}
# configs/scree.yaml on the demo data: n = 5000, scree eps = 0.5 of which 80 % per method, k = 5
DEMO_BUDGET = PrivacyBudget(0.4, 4e-6)


def test_method_noise__huber_at_the_demo_settings_is_unreliable():
    noise = method_noise("huber", DEMO_HUBER, n=5000, k=5, budget=DEMO_BUDGET,
                         calibration="analytic")
    assert noise.unreliable
    assert noise.bin_probability < 0.15
    assert noise.relative_sd == pytest.approx(0.647, abs=0.005)
    (message,) = unreliable_messages(["clipped", "pmwm", "huber"], DEMO, n=5000, k=5,
                                     budget=DEMO_BUDGET, calibration="analytic")
    assert message.startswith("scree method 'huber' is unreliable here")


def test_method_noise__clipped_and_pmwm_at_the_demo_settings_are_reliable():
    for name in ("clipped", "pmwm"):
        noise = method_noise(name, DEMO[name], n=5000, k=5, budget=DEMO_BUDGET,
                             calibration="analytic")
        assert not noise.unreliable, name
    clipped = method_noise("clipped", DEMO["clipped"], n=5000, k=5, budget=DEMO_BUDGET,
                           calibration="analytic")
    # sd = c(eps_l, delta_l) * C / (n - 1), c the analytic sigma per unit sensitivity
    want = analytic_gaussian_sigma(150 / 4999, 0.08, 8e-7)
    assert clipped.sd == pytest.approx(want, rel=1e-12)
    assert clipped.relative_sd == pytest.approx(4 * want / 150, rel=1e-12)


def test_method_noise__huber_with_a_large_budget_is_reliable():
    noise = method_noise("huber", DEMO_HUBER, n=50_000, k=5, budget=PrivacyBudget(25.6, 4e-6),
                         calibration="analytic")
    assert not noise.unreliable
    assert noise.bin_probability > 0.999


def test_argmax_probability__closed_forms():
    # 3 bins, nothing in the data (count 0): every bin equally likely -> the two "good" ones 2/3
    assert argmax_probability(0, 3, 1.0) == pytest.approx(2 / 3, abs=1e-4)
    assert argmax_probability(0, 26, 5.0) == pytest.approx(2 / 26, abs=1e-4)
    assert argmax_probability(10_000, 26, 1.0) == pytest.approx(1.0, abs=1e-9)
    probs = [argmax_probability(35, 26, b) for b in (1.0, 5.0, 25.0, 100.0)]
    assert probs == sorted(probs, reverse=True)


def test_noise_lines__plan_states_every_method_and_warns_for_huber():
    lines = noise_lines(["clipped", "pmwm", "huber"], DEMO, n=5000, k=5, budget=DEMO_BUDGET,
                        calibration="analytic")
    assert [line.split(":")[0].strip() for line in lines] == [
        "expected noise (clipped)", "expected noise (pmwm)", "expected noise (huber)",
        "UtilityWarning"]
    assert "of C_clip = 150 (public)" in lines[0] and "lambda not public" in lines[0]
    assert "U - L <= b - a" in lines[1] and "not public for other shapes" in lines[1]
    assert "m2 histogram" in lines[2] and "huber" in lines[3]


def _fit(eps: float, seed: int):
    x = np.random.default_rng(seed).normal(size=(2000, 4)) * [4.0, 2.0, 1.0, 0.5]
    controls = {"clipped": {"C_clip": 64.0},
                "pmwm": {"a": 0, "b": 100, "trim_const": 10, "eta": 0.01},
                "huber": {"k_min_m2": -10, "k_max_m2": 15, "m2_frac": 0.25}}
    return dp_scree(x, privacy=privacy_control(eps=eps, delta=1e-5), k=2,
                    method=["clipped", "pmwm", "huber"], control=controls,
                    calibration="analytic", sensitivity="tight", rng=seed)


def test_released_noise_lines__match_the_ledger_and_the_released_cut_offs():
    fit = _fit(2.0, 3)
    meta = fit.metadata
    raw = np.atleast_2d(fit.dataset["scree_raw"].values)
    lines = released_noise_lines(meta, raw.tolist())
    assert lines[0].startswith("Noise sd of each released value")
    clipped_sd = next(r.scale for r in fit.ledger if "clipped PC1" in (r.note or ""))
    assert f"PC1 {float(f'{clipped_sd:.3g}'):g}" in lines[1]
    per = meta["scree"]["allocations"]["per_component"]
    rel = meta["scree"]["releases"]["pmwm"]
    c = analytic_gaussian_sigma(1.0, per["eps"] / 2, per["delta"])
    n_m = 2000 // 2  # split_mode defaults to True: the mean set is the second half
    sd = c * (2000 / 1999) * (rel["upper"][0] - rel["lower"][0]) / n_m
    assert lines[2].startswith(f"  pmwm: PC1 {float(f'{sd:.3g}'):g}")
    # the summary keeps the seed's lines and appends these after them
    text = repr(fit.summary()).splitlines()
    end = text.index("The full values are available as .scree and .pve.")
    assert text[end + 1:end + 1 + len(lines)] == lines


def test_released_noise_lines__flag_unreliable_values():
    fit = _fit(0.05, 4)  # tiny budget: every method's noise dwarfs the values
    lines = released_noise_lines(fit.metadata,
                                 np.atleast_2d(fit.dataset["scree_raw"].values).tolist())
    flagged = [line for line in lines if line.startswith("  UtilityWarning:")]
    assert any("huber" in line for line in flagged)
    fit = _fit(1e6, 5)  # huge budget: nothing flagged
    lines = released_noise_lines(fit.metadata,
                                 np.atleast_2d(fit.dataset["scree_raw"].values).tolist())
    assert not [line for line in lines if "UtilityWarning" in line]


@pytest.mark.slow
def test_method_noise__clipped_prediction_matches_the_noise(global_seed):
    # The released clipped values minus the exact clipped means: sd = the predicted sd
    # (chi2 bound at alpha 1e-6 over 60 releases x 2 components). Both clipped means (about 600
    # and 350) lie many noise sds (14.6) above 0, where the raw release is floored: a floored
    # value would shrink its error and bias the chi2 statistic down.
    x = np.random.default_rng(global_seed).normal(size=(1000, 3)) * [30.0, 20.0, 0.5]
    v = np.eye(3)[:, :2]
    pc = privacy_control(eps=1.0, delta=1e-5)
    errs = []
    for seed in range(60):
        fit = dp_scree(x, privacy=pc, k=2, method="clipped", control={"C_clip": 1e3}, V_dp=v,
                       center=0.0, calibration="analytic", rng=global_seed * 1000 + seed)
        exact = (x @ v) ** 2
        errs.append(fit.dataset["scree_raw"].values.ravel()
                    - 1000 / 999 * np.minimum(exact, 1e3).mean(axis=0))
    per = fit.metadata["scree"]["allocations"]["per_component"]
    noise = method_noise("clipped", clipped_control(1e3), n=1000, k=2,
                         budget=PrivacyBudget(per["eps"] * 2, per["delta"] * 2),
                         calibration="analytic")
    z = np.concatenate(errs) / noise.sd
    lo, hi = stats.chi2.ppf([5e-7, 1 - 5e-7], z.size)
    assert lo < float(np.sum(z * z)) < hi


def test_dp_scree__warns_for_an_unreliable_method_before_reading_data():
    from dppca_dask.errors import UtilityWarning

    x = np.random.default_rng(0).normal(size=(500, 4)) * [4.0, 2.0, 1.0, 0.5]
    controls = {"clipped": {"C_clip": 64.0},
                "huber": {"k_min_m2": -10, "k_max_m2": 15, "m2_frac": 0.25}}
    with pytest.warns(UtilityWarning, match="scree method 'huber' is unreliable") as caught:
        dp_scree(x, privacy=privacy_control(eps=1.0, delta=1e-5), k=2,
                 method=["clipped", "huber"], control=controls, rng=1)
    assert [str(w.message) for w in caught if "clipped" in str(w.message)] == []
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UtilityWarning)
        dp_scree(x, privacy=privacy_control(eps=1e4, delta=1e-5), k=2, method="clipped",
                 control=controls["clipped"], calibration="analytic", rng=1)


def test_unreliable_messages__pmwm_range_below_its_cut_off_grid():
    """pmwm's cut-off grid ±(β^j − 1) is fixed in units of w (steps of 0.01 near 0): a range
    [a, b] narrower than 10 of its steps is flagged; the demo's [0, 200] is not."""
    small = {"pmwm": pmwm_control(a=0, b=0.05, trim_const=10, eta=0.01)}
    (message,) = unreliable_messages(["pmwm"], small, n=5000, k=2, budget=DEMO_BUDGET,
                                     calibration="analytic")
    assert message.startswith("scree method 'pmwm': its cut-off searches")
    assert not [m for m in unreliable_messages(["pmwm"], DEMO, n=5000, k=2, budget=DEMO_BUDGET,
                                               calibration="analytic") if "cut-off" in m]


@pytest.mark.parametrize(("scale", "shift", "warns"), [(1.0, 0.0, False), (2.0 ** -20, 0.0, True),
                                                        (1.0, 1e6, True)])
def test_dp_scree__warns_when_the_private_centre_noise_dominates(scale, shift, warns):
    """The private centre's radius grid starts at 0.1 in the scores' units and round 1 starts at
    0: scores with a spread of 2^-20 or 10^6 spreads from 0 get a centre whose noise variance
    exceeds 10 % of the released values (docs/performance.md §4d); unit data near 0 do not."""
    import warnings

    from dppca_dask.errors import UtilityWarning

    x = (np.random.default_rng(3).normal(size=(2000, 4)) * [4.0, 2.0, 1.0, 0.5] + shift) * scale
    control = {"C_clip": 64.0 * scale**2}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UtilityWarning)
        dp_scree(x, privacy=privacy_control(eps=1.0, delta=1e-5), k=2, method="clipped",
                 control=control, V_dp=np.eye(4)[:, :2], rng=1)
    centre = [w for w in caught if "private centre" in str(w.message)]
    assert bool(centre) == warns
