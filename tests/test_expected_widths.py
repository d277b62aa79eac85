"""Expected interval widths before any data is read (``dppca-dask plan``, ``plan --json``,
:func:`dppca_dask.expected_widths`): they are the widths the released intervals then have."""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from dppca_dask import (
    clipped_control,
    dp_covariance,
    dp_pca,
    expected_widths,
    privacy_control,
)
from dppca_dask.cli import main
from dppca_dask.covariance.estimator import plan_covariance
from dppca_dask.pca.pca import plan_pca
from dppca_dask.privacy.budget import resolve_budget
from dppca_dask.privacy.zcdp import resolve_zcdp
from tests.helpers import write_store

N, P = 1500, 5


def _data() -> np.ndarray:
    return np.random.default_rng(12).normal(size=(N, P)) * [3.0, 2.0, 1.0, 0.7, 0.3]


def test_expected_widths__are_the_released_widths():
    """The scree half-width is that of every released value above its interval's 0; the add
    histogram's that of every cell released above 0; the noise-norm bound the loading
    release's; the frame's resolution share that of the released frame (ranged)."""
    x = _data()
    privacy = privacy_control(eps=8.0, delta=1e-5)
    control = clipped_control(C_clip=36.0)
    budget = resolve_budget(privacy, owner="dp_pca")
    plan = plan_pca(N, P, budget, k=3, controls={"clipped": control}, score_methods=("add",))
    expected = expected_widths(plan, n=N, p=P, bins=(10, 10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = dp_pca(x, privacy=privacy, k=3, scree_control=control, score_method="add",
                     bins=10, rng=3)
    scree = fit.scree.dataset
    lo, hi = scree["scree_lower"].values[0], scree["scree_upper"].values[0]
    inside = lo > 0
    assert inside.any()
    np.testing.assert_allclose((hi - lo)[inside] / 2,
                               expected.parts["scree"]["clipped"]["half_width"], rtol=1e-9)
    score = fit.score.dataset
    c_lo, c_hi = score["count_lower"].values[0], score["count_upper"].values[0]
    released = c_lo > 0
    assert released.any()
    half = expected.parts["histograms"]["add"]["half_width_counts"]
    assert np.all((c_hi - c_lo)[released] / 2 == half)
    directions = expected.parts["directions"]
    loading = fit.loading.dataset["angle_upper_guaranteed"].attrs["noise_norm_bound"]
    assert loading == pytest.approx(directions["noise_norm_bound"], rel=1e-12)
    frame = fit.score.frame
    share = expected.parts["frame"]["limits_relative_to_radius"]
    for a in range(2):  # the centre's cell is ~1e-7 |c|: the radius cell dominates
        assert score["frame_resolution"].values[a] == pytest.approx(
            share * frame.radius[a], rel=1e-3)


def test_expected_widths__covariance_entries_and_the_direction_table():
    x = _data()
    radius = 12.0
    zcdp = resolve_zcdp(rho=0.5, owner="dp_covariance")
    plan = plan_covariance(P, zcdp, method="ssp", clip="row", radius=radius)
    expected = expected_widths(plan, n=N, p=P, clip="row", bounds=np.full(P, radius))
    fit = dp_covariance(x, rho=0.5, method="ssp", clip="row", radius=radius, rng=1)
    ds = fit.dataset
    half = (ds["covariance_upper"].values - ds["covariance_lower"].values) / 2
    cov = expected.parts["covariance"]
    assert cov["unit"] == "input units^2"
    assert np.median(np.diag(half)) == pytest.approx(cov["entry_half_width_diagonal"], rel=1e-6)
    off = half[~np.eye(P, dtype=bool)]
    assert np.median(off) == pytest.approx(cov["entry_half_width_off_diagonal"], rel=1e-6)
    private = expected_widths(plan_covariance(P, zcdp, method="auto"), n=N, p=P, clip="row")
    assert private.parts["covariance"]["unit"] == "R^2"
    # directions: the guaranteed bound needs gaps above 2b; the approximate one shrinks as 1/gap
    budget = resolve_budget(privacy_control(eps=1.0, delta=1e-5), owner="dp_pca")
    table = expected_widths(plan_pca(N, P, budget, k=2, controls={"clipped": clipped_control(
        C_clip=36.0)}), n=N, p=P).parts["directions"]
    rows = table["angles"]
    assert [r["gap"] for r in rows] == sorted(r["gap"] for r in rows)
    assert all(a["degrees"] > b["degrees"] for a, b in itertools.pairwise(rows))
    assert all(r["guaranteed_degrees"] >= r["degrees"] for r in rows)
    assert table["identifiable_gap"] < table["identifiable_gap_guaranteed"]


def test_cli_plan__prints_and_serialises_the_expected_widths(tmp_path):
    data = tmp_path / "data.zarr"
    write_store(data, _data(), names=list("abcde"), chunk=500)
    cfg = {
        "input": {"path": str(data), "array": "X"},
        "task": "pca",
        "privacy": {"eps": 1.0, "delta": 1e-5},
        "pca": {"k": 3, "scree_control": {"clipped": {"C_clip": 36.0}}},
        "output": {"directory": str(tmp_path / "out")},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    text = CliRunner().invoke(main, ["plan", str(path)])
    assert text.exit_code == 0, text.output
    assert "Expected interval widths (95%, from the plan's noise scales" in text.output
    assert "  scree (clipped, 3 components): each value +- " in text.output
    assert "angle bound by eigengap: gap 0.005:" in text.output
    out = CliRunner().invoke(main, ["plan", str(path), "--json"])
    assert out.exit_code == 0, out.output
    widths = json.loads(out.output)["expected_widths"]
    assert widths["level"] == 0.95
    assert {"directions", "scree", "histograms", "frame"} <= set(widths)
    assert not (tmp_path / "out").exists()
