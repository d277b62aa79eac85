"""Each estimator's options are parsed once into a frozen, validated object (issue 29 item 1):
one run checks every estimator option exactly once -- the CLI's task, the Python API -- and the
options object is shared by the plan and the fit.

Counted: every call of the option checkers of :mod:`dppca_dask._validation` (parse_real, parse_int,
parse_bool, parse_choice, parse_axes, ...) and of the estimators' own (resolve_controls,
check_scree_args, resolve_k, resolve_pairs, parse_bins, parse_center, parse_v_dp, ...), keyed by
(checker, owner, parameter). Not counted: the figures' plot controls (``*PlotControl``) and the
synthetic samples' ``SamplingControl``, which post-processing validates per figure call.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from click.testing import CliRunner

from dppca_dask import clipped_control, dp_pca, dp_scree, privacy_control
from dppca_dask._validation import counting_checks
from dppca_dask.cli import main
from dppca_dask.pca.options import PCAOptions, ScreeOptions
from dppca_dask.pca.pca import expected_reads
from dppca_dask.pipeline.config import load_config
from dppca_dask.pipeline.runner import plan_run

POST_PROCESSING = ("PlotControl", "SamplingControl", ".sample")


def _estimator_checks(counter):
    return {key: n for key, n in counter.items()
            if not any(part in key[1] for part in POST_PROCESSING)}


def _config(tmp_path, store, task: str) -> str:
    sections = {
        "pca": "pca:\n  k: 3\n  bins: 6\n  scree_method: [clipped, pmwm]\n  scree_control:\n"
               "    clipped: {C_clip: 40}\n    pmwm: {a: 0, b: 40, trim_const: 5, eta: 0.01}\n"
               "  pairs: auto\n  plots: false\n",
        "scree": "scree:\n  k: 3\n  method: [clipped, huber]\n  controls:\n"
                 "    clipped: {C_clip: 40}\n    huber: {k_min_m2: -5, k_max_m2: 8, m2_frac: 0.25}\n",
        "score": "score:\n  bins: [6, 5]\n  method: [add, geometric]\n",
        "loading": "loading:\n  pairs: blocks\n  pair_block: 50\n",
        "covariance": "covariance:\n  bounds: 8.0\n  method: ssp\n",
    }
    path = tmp_path / f"{task}.yaml"
    path.write_text(f"input:\n  path: {store}\ntask: {task}\nprivacy:\n  eps: 2.0\n"
                    f"  delta: 1.0e-5\n{sections[task]}output:\n  directory: {tmp_path}/out_{task}\n"
                    "budget_ledger:\n  enabled: false\ncluster:\n  kind: local\n  n_workers: 1\n"
                    "  processes: false\n  dashboard: false\n")
    return str(path)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    import zarr

    x = np.random.default_rng(3).normal(size=(300, 4)) * [3.0, 2.0, 1.0, 0.5]
    path = tmp_path_factory.mktemp("options") / "x.zarr"
    zarr.create_array(str(path), data=x, chunks=(100, 4))
    return path


@pytest.mark.parametrize("task", ["pca", "scree", "score", "loading", "covariance"])
def test_options__one_cli_run_checks_every_option_once(tmp_path, store, task):
    config = _config(tmp_path, store, task)
    with counting_checks() as counter:
        done = CliRunner().invoke(main, ["run", config, "--set", "rng=7", "-q"])
    assert done.exit_code == 0, done.output
    checks = _estimator_checks(counter)
    assert checks, "no checker was counted: the test would pass vacuously"
    twice = {key: n for key, n in checks.items() if n > 1}
    assert not twice, f"checked more than once in one run: {twice}"


def test_options__one_api_call_checks_every_option_once():
    x = np.random.default_rng(0).normal(size=(200, 4)) * [3.0, 2.0, 1.0, 0.5]
    with counting_checks() as counter:
        dp_pca(x, privacy=privacy_control(eps=3, delta=1e-5), k=3, bins=5, rng=1,
               scree_control=clipped_control(C_clip=40))
    checks = _estimator_checks(counter)
    assert ("resolve_controls", "dp_pca", "control") in checks
    assert {key: n for key, n in checks.items() if n > 1} == {}


def test_options__the_counter_sees_a_checker_run_twice():
    with counting_checks() as counter:
        ScreeOptions.parse("dp_scree", mono=True, control=clipped_control(C_clip=1.0))
        ScreeOptions.parse("dp_scree", mono=True, control=clipped_control(C_clip=1.0))
    assert counter[("parse_bool", "dp_scree", "mono")] == 2


def test_options__frozen_and_declarative():
    options = PCAOptions.parse("dp_pca", k=3, axes=(2, 1), scree_methods=["clipped"],
                               control=clipped_control(C_clip=10.0), bins=4)
    assert (options.axes, options.bins, options.scree_methods) == ((2, 1), (4, 4), ("clipped",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.k = 4  # type: ignore[misc]
    assert {"calibration", "axes", "bins", "mono", "pairs"} <= set(PCAOptions.CONSTRAINTS)
    setup = options.bind(1000, 5)
    assert (setup.k, setup.m_bins, setup.pairs) == (3, (4, 4), "all")
    with pytest.raises(ValueError, match="'X' parameter of dp_pca must have at least two"):
        options.bind(1000, 1)  # p < 2: the score part needs two columns


def test_options__the_plan_reads_the_options_of_the_run(tmp_path, store):
    plan = plan_run(load_config(_config(tmp_path, store, "pca")))
    assert isinstance(plan.setup.options, PCAOptions)
    assert plan.setup.pairs == "all" and "pairs='auto' -> all" in plan.setup.pairs_why
    assert plan.release.passes == expected_reads(scree_methods=["clipped", "pmwm"])


def test_options__errors_name_the_estimators_parameter():
    with pytest.raises(ValueError, match="'mono' parameter of dp_scree must be a bool"):
        dp_scree(np.zeros((5, 2)), privacy=privacy_control(eps=1, delta=1e-5), mono="yes")


# -- presets (issue 30 item 3): the defaults are the recommended configuration ------------------

SEED = {"calibration": "classical", "sensitivity": "seed", "score_methods": ("add",),
        "frame": "durfee"}
RECOMMENDED = {"calibration": "analytic", "sensitivity": "tight",
               "score_methods": ("geometric",), "frame": "auto"}


def test_presets__the_defaults_are_the_recommended_configuration():
    from dppca_dask.pca.options import PRESETS

    assert dict(PRESETS["recommended"]) == RECOMMENDED
    assert dict(PRESETS["seed"]) == SEED
    parsed = PCAOptions.parse("dp_pca", control=clipped_control(C_clip=1.0))
    fields = {f.name: f.default for f in dataclasses.fields(PCAOptions)}
    for name, value in RECOMMENDED.items():  # the class defaults and a bare parse agree
        assert getattr(parsed, name) == value
        assert fields[name] == value or name == "score_methods"
    seed = PCAOptions.parse("dp_pca", preset="seed", control=clipped_control(C_clip=1.0))
    assert {name: getattr(seed, name) for name in SEED} == SEED


def test_presets__an_explicit_option_wins_and_a_bad_preset_is_named():
    seed = PCAOptions.parse("dp_pca", preset="seed", calibration="analytic",
                            control=clipped_control(C_clip=1.0))
    assert (seed.calibration, seed.sensitivity, seed.frame) == ("analytic", "seed", "durfee")
    with pytest.raises(ValueError, match="'preset' parameter of dp_pca must be"):
        PCAOptions.parse("dp_pca", preset="R", control=clipped_control(C_clip=1.0))


def test_presets__each_entry_point_plans_the_presets_noise():
    """The Python API's default plan is the explicit recommended one, ``preset="seed"`` the
    seed's (the σ of every record differs between the two)."""
    from dppca_dask.pca.pca import plan_pca
    from dppca_dask.privacy.budget import resolve_budget

    budget = resolve_budget(privacy_control(eps=2, delta=1e-5), owner="dp_pca")
    controls = {"clipped": clipped_control(C_clip=40)}
    args = {"k": 3, "controls": controls}
    explicit = {"calibration": "analytic", "sensitivity": "tight",
                "score_methods": ("geometric",), "frame": "auto"}
    default = plan_pca(1000, 5, budget, **args).records
    assert default == plan_pca(1000, 5, budget, **args, **explicit).records
    seed = plan_pca(1000, 5, budget, **args, preset="seed").records
    assert seed == plan_pca(1000, 5, budget, **args, calibration="classical",
                            sensitivity="seed", score_methods=("add",), frame="durfee").records
    assert seed != default


def test_presets__sklearn_passes_the_preset():
    from dppca_dask.sklearn import DPPCA

    x = np.random.default_rng(0).normal(size=(300, 4)) * [3.0, 2.0, 1.0, 0.5]
    kw = {"eps": 2, "delta": 1e-5, "scree_control": clipped_control(C_clip=40),
          "random_state": 1}
    fitted = {preset: DPPCA(2, preset=preset, **kw).fit(x).result_ for preset in
              ("recommended", "seed")}
    assert fitted["recommended"].metadata["calibration"] == "analytic"
    assert fitted["seed"].metadata["calibration"] == "classical"
    assert DPPCA(2, **kw).get_params()["preset"] == "recommended"


def test_presets__a_config_section_takes_the_seed_preset(tmp_path, store):
    path = tmp_path / "seed.yaml"
    text = open(_config(tmp_path, store, "pca")).read()
    path.write_text(text.replace("pca:\n", "pca:\n  preset: seed\n  frame: capped\n", 1))
    options = plan_run(load_config(str(path))).setup.options
    assert (options.calibration, options.sensitivity, options.score_methods, options.frame) == (
        "classical", "seed", ("add",), "capped")  # the explicit key wins
    options = plan_run(load_config(_config(tmp_path, store, "pca"))).setup.options
    assert (options.calibration, options.sensitivity, options.score_methods, options.frame) == (
        "analytic", "tight", ("geometric",), "auto")
