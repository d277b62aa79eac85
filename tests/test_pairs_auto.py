"""pairs='auto' and 'blocks' through the estimators (issue 14 item 1)."""

from __future__ import annotations

import numpy as np
import pytest

from dppca_dask import clipped_control, dp_pca, privacy_control, spherical_kendall
from dppca_dask.pca.loading import AUTO_MAX_WORK, resolve_pairs


def test_resolve_pairs__auto_switches_at_the_public_work_threshold():
    p = 50
    n_max = int((1 + np.sqrt(1 + 8 * AUTO_MAX_WORK / p)) / 2)  # largest n with the work in budget
    assert resolve_pairs("auto", n_max, p)[0] == "all"
    assert resolve_pairs("auto", n_max + 1, p)[0] == "blocks"
    assert resolve_pairs("all", 10**9, p) == ("all", "pairs='all' as given")
    assert "5e+11" in resolve_pairs("auto", 10**7, p)[1]


def test_dp_pca__auto_on_small_data_is_all_pairs_bit_for_bit():
    X = np.random.default_rng(1).normal(size=(300, 4)) * [3.0, 2.0, 1.0, 0.5]
    kw = {"privacy": privacy_control(eps=0.9, delta=1e-5), "k": 2, "rng": 4,
          "scree_control": clipped_control(C_clip=30)}
    auto, full = dp_pca(X, pairs="auto", **kw), dp_pca(X, pairs="all", **kw)
    np.testing.assert_array_equal(auto.directions.values, full.directions.values)
    np.testing.assert_array_equal(auto.scree.scree.values, full.scree.scree.values)


def _top(k: np.ndarray) -> np.ndarray:
    return np.linalg.eigh(k)[1][:, -1]


@pytest.mark.parametrize("seed", [0, 1])
def test_blocks__top_direction_within_sin_theta_005_of_all_pairs_on_a_spiked_model(seed):
    # Spiked model: variance 4 along one direction, 1 elsewhere; eps = infinity (no noise).
    rng = np.random.default_rng(seed)
    p, n = 10, 20000
    v = rng.normal(size=p)
    v /= np.linalg.norm(v)
    X = rng.normal(size=(n, p)) + rng.normal(size=(n, 1)) * np.sqrt(3.0) * v
    full = _top(spherical_kendall(X).values)
    blocks = _top(spherical_kendall(X, pairs="blocks", pair_block=512).values)
    sin_theta = np.sqrt(max(0.0, 1.0 - float(full @ blocks) ** 2))
    assert sin_theta < 0.05
