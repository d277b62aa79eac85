"""What a release spends is what `plan` prints and what the ledger reserves (one computation)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from dppca_dask import load_result
from dppca_dask._rformat import format_r_scalar
from dppca_dask.cli import main
from dppca_dask.io.datasets import write_demo_dataset
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.pipeline.runner import execute, plan_run
from dppca_dask.privacy.accounting import ledger_totals
from dppca_dask.privacy.composition import compose
from dppca_dask.privacy.plan import records_match
from tests.helpers import figures_not_rendered

REPO = Path(__file__).resolve().parents[1]
SCREE_CONTROLS = yaml.safe_load((REPO / "configs" / "scree.yaml").read_text())["scree"]["controls"]

CASES = {
    "scree-three-methods": ("scree", {"scree": {"k": 3, "method": ["clipped", "pmwm", "huber"],
                                                "controls": SCREE_CONTROLS}}),
    "scree-huber-empirical-centre": ("scree", {"scree": {"k": 2, "method": ["huber"],
                                                         "controls": SCREE_CONTROLS,
                                                         "center": "empirical"}}),
    "score-two-methods": ("score", {"score": {"method": ["add", "sparse"], "plots": False}}),
    "pca-all-methods": ("pca", {"pca": {"k": 3, "scree_method": ["clipped", "pmwm", "huber"],
                                        "scree_control": SCREE_CONTROLS,
                                        "score_method": ["add", "sparse"], "plots": False}}),
    "loading": ("loading", {}),
    "score-smooth-frame": ("score", {"score": {"frame": "smooth", "plots": False}}),
    "pca-empirical-centre-huber": ("pca", {"pca": {"k": 2, "scree_method": ["huber"],
                                                   "scree_control": SCREE_CONTROLS,
                                                   "center": "empirical", "plots": False}}),
    "covariance-pace-ggm": ("covariance", {"covariance": {"bounds": 8.0}}),
    "covariance-ssp": ("covariance", {"covariance": {"bounds": 8.0, "method": "ssp"}}),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return Path(write_demo_dataset(tmp_path_factory.mktemp("data") / "gau.zarr",
                                   n_per_group=100))


@pytest.mark.parametrize("case", list(CASES))
def test_plan__spend_equals_release_ledger_and_reservation(tmp_path, store, case, ledger_path):
    task, extra = CASES[case]
    cfg = {"input": {"path": str(store), "array": "X"}, "task": task,
           "privacy": {"eps": 1.5, "delta": 1e-5},
           "cluster": {"kind": "local", "n_workers": 1, "processes": False},
           "output": {"directory": str(tmp_path / "out"), "formats": ["zarr"]},
           "rng": 4, **extra}
    config = RunConfig.from_dict(cfg)
    plan = plan_run(config)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    printed = CliRunner().invoke(main, ["plan", str(path)])
    assert printed.exit_code == 0, printed.output
    assert (f"this release spends in total (basic composition): eps = "
            f"{format_r_scalar(plan.spend.eps)} ; delta = {format_r_scalar(plan.spend.delta)}"
            in printed.output)
    with warnings.catch_warnings(), figures_not_rendered():  # spend only: no pixels needed
        warnings.simplefilter("ignore")
        outcome = execute(config, progress=False)
    result = outcome.result
    spent = result.metadata["ledger_total"]  # zCDP (covariance): the (eps, delta) converted
    if task != "covariance":
        assert spent == pytest.approx(ledger_totals(result.ledger), rel=1e-12)
    assert spent["eps"] == pytest.approx(plan.spend.eps, rel=1e-12)
    assert spent["delta"] == pytest.approx(plan.spend.delta, rel=1e-12)
    assert records_match(plan.release, result.ledger) == []
    as_json = CliRunner().invoke(main, ["plan", "--json", str(path)])
    assert as_json.exit_code == 0, as_json.output
    planned = json.loads(as_json.stdout)  # warnings go to stderr
    assert len(planned["records"]) == len(plan.release.records)
    written = load_result(Path(outcome.directory) / f"{task}.zarr").metadata["ledger_total"]
    assert set(planned["total"]) == set(written)
    for key, value in planned["total"].items():
        assert value == pytest.approx(written[key], rel=1e-12)
    (reservation,) = Ledger(ledger_path).reservations()  # the deployment's ledger (conftest)
    assert (reservation.eps, reservation.delta) == (plan.spend.eps, plan.spend.delta)
    assert reservation.planned == tuple(r.as_dict() for r in plan.release.records)
    assert reservation.status == "released" and len(reservation.records) == len(result.ledger)
    # the cap is checked on the tight figure: the reservation's planned records compose to the
    # same tight epsilon as the released ones (every public field the composition uses is planned)
    delta = 2 * plan.spend.delta if plan.spend.delta > 0 else 1e-6
    assert compose(reservation.planned).tight_eps(delta) == pytest.approx(
        compose(reservation.records).tight_eps(delta), rel=1e-12)
