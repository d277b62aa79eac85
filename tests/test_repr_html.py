"""Notebook cards: every result's ``_repr_html_`` is well-formed HTML with the badge, the shape,
the budget and spend and the key table; text is escaped; no seed (issue 16 item 3)."""

from __future__ import annotations

from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from dppca_dask import (
    clipped_control,
    dp_covariance,
    dp_loading,
    dp_pca,
    dp_score,
    dp_scree,
    load_result,
    privacy_control,
)
from dppca_dask._rformat import format_r_scalar
from dppca_dask.results.base import Result
from dppca_dask.results.html import non_private_elements
from tests.helpers import example_results

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}
SEED = 987654321
PC = privacy_control(eps=4, delta=1e-4)


class Card(HTMLParser):
    """Parses a card, recording mismatched or unclosed tags, the text and the badge's text."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self.badges: list[str] = []
        self._in_badge = 0
        self.feed(markup)
        self.close()
        self.errors += [f"unclosed <{t}>" for t in self.stack]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in VOID:
            return
        self.stack.append(tag)
        if "dppca-badge" in (dict(attrs).get("class") or "").split():
            self._in_badge = len(self.stack)
            self.badges.append("")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        if self._in_badge == len(self.stack):
            self._in_badge = 0
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)
        if self._in_badge:
            self.badges[-1] += data

    @property
    def text(self) -> str:
        return "".join(self.chunks)


def _card(result: Result) -> Card:
    markup = result._repr_html_()
    assert isinstance(markup, str) and markup.startswith("<div")
    card = Card(markup)
    assert card.errors == [], card.errors
    assert card.tags[0][0] == "div" and not card.stack  # one element holds everything
    return card


@pytest.fixture(scope="module")
def examples() -> dict[str, Result]:
    return example_results()


@pytest.fixture(scope="module")
def private_fits() -> dict[str, Result]:
    """Fits without any non-private element (the covariance ones are in ``examples``): no seed,
    since a caller-seeded release is NOT PRIVATE."""
    x = np.random.default_rng(5).normal(size=(300, 4)) * [3.0, 2.0, 1.0, 0.5]
    an = {"calibration": "analytic", "rng": None}
    return {
        "loading": dp_loading(x, privacy=PC, **an),
        "scree": dp_scree(x, privacy=PC, k=2, control=clipped_control(C_clip=40), **an),
        "score": dp_score(x, privacy=PC, bins=(4, 3), **an),
        "pca": dp_pca(x, privacy=PC, k=2, bins=4, scree_control=clipped_control(C_clip=40),
                      **an),
    }


def _spend(result: Result) -> list[str]:
    """The spend as the card must state it: ε, δ (basic composition), or ρ for zCDP."""
    total = result.metadata["ledger_total"]
    if "rho" in total:
        return [f"ρ = {format_r_scalar(total['rho'])}"]
    return [f"ε = {format_r_scalar(total['eps'])}", f"δ = {format_r_scalar(total['delta'])}"]


def _key_value(result: Result) -> float:
    """One number of the kind's key table."""
    if result.kind == "loading":
        return float(result.directions.values[0, 0])
    if result.kind == "scree":
        return float(result.scree.values[-1, 0])
    if result.kind == "score":
        return float(result.frame.center[0])
    if result.kind == "pca":
        return float(result.scree.pve.values[0, 1])
    return float(result.covariance.values[0, 1])


def test_repr_html__every_result_is_well_formed_with_badge_spend_and_table(examples):
    for label, result in examples.items():
        card = _card(result)
        text = card.text
        assert len(card.badges) == 1, label
        meta = result.metadata
        assert f"n = {meta['n']}, p = {meta['p']}" in text, label
        assert result.kind in text
        for figure in _spend(result):
            assert figure in text, (label, figure)
        assert f"{_key_value(result):.4g}" in text, label
        assert "Budget" in text and "Spent" in text


@pytest.mark.parametrize("label", ["loading", "scree", "score", "pca", "covariance"])
def test_repr_html__non_private_result_shows_not_private(examples, label):
    result = examples[label]
    card = _card(result)
    assert card.badges == ["NOT PRIVATE"]
    assert non_private_elements(result)
    # the card names what is not private
    assert all(name in card.text for name in non_private_elements(result))


@pytest.mark.parametrize("label", ["loading", "scree", "score", "pca"])
def test_repr_html__private_result_shows_private(private_fits, label):
    card = _card(private_fits[label])
    assert card.badges == ["private"]
    assert "NOT PRIVATE" not in card.text


def test_repr_html__seeded_release_is_not_private():
    """A release whose generator the caller fixed can be recomputed from the seed."""
    x = np.random.default_rng(5).normal(size=(300, 4))
    for fit in (dp_loading(x, privacy=PC, calibration="analytic", rng=SEED),
                dp_covariance(x, rho=0.5, bounds=8.0, method="ssp",
                              rng=np.random.default_rng(SEED))):
        card = _card(fit)
        assert card.badges == ["NOT PRIVATE"]
        assert "seeded by the caller" in card.text
        assert fit.dataset.attrs["dppca_guarantee"].startswith("NOT PRIVATE: the noise generator")
        assert fit.metadata["rng"]["guarantee"] == fit.dataset.attrs["dppca_guarantee"]
    unseeded = dp_loading(x, privacy=PC, calibration="analytic")
    assert unseeded.dataset.attrs["dppca_guarantee"] == "private"


@pytest.mark.parametrize("label", ["covariance_ssp", "covariance_private"])
def test_repr_html__private_covariance_shows_private(examples, label):
    card = _card(examples[label])
    assert card.badges == ["private"] and "ρ = 0.5 (zCDP)" in card.text


def test_repr_html__empirical_centre_is_not_private():
    x = np.random.default_rng(6).normal(size=(200, 3))
    fit = dp_scree(x, privacy=PC, k=2, control=clipped_control(C_clip=40), center="empirical",
                   calibration="analytic", rng=1)
    assert fit.nonprivate is None  # no reference stored, yet the release is outside the guarantee
    card = _card(fit)
    assert card.badges == ["NOT PRIVATE"]
    assert "OUTSIDE the privacy guarantee" in card.text


def test_repr_html__observed_group_sizes_are_not_private():
    """Grouped fits store the observed group sizes, released without noise."""
    x = np.random.default_rng(7).normal(size=(200, 3))
    fit = dp_score(x, privacy=PC, bins=(4, 3), group=np.repeat(["a", "b"], 100),
                   calibration="analytic", rng=1)
    card = _card(fit)
    assert card.badges == ["NOT PRIVATE"]
    assert "group_size (unless group sizes are public)" in card.text


def test_repr_html__never_shows_the_seed():
    x = np.random.default_rng(5).normal(size=(300, 4)) * [3.0, 2.0, 1.0, 0.5]
    seed = 987654321
    fit = dp_loading(x, privacy=PC, calibration="analytic", rng=seed)
    assert fit.metadata["rng"]["seeded"] is True  # the fit was seeded
    assert str(seed) not in fit._repr_html_() and str(seed) not in fit.dataset.attrs["dppca_metadata"]


def test_repr_html__escapes_text():
    names = ["<script>alert(1)</script>", "a&b", '"q"', "plain"]
    frame = pd.DataFrame(np.random.default_rng(2).normal(size=(100, 4)), columns=names)
    fit = dp_loading(frame, privacy=PC, calibration="analytic", rng=3)
    markup = fit._repr_html_()
    card = _card(fit)
    assert "script" not in {tag for tag, _ in card.tags}
    assert "<script>" not in markup and "&lt;script&gt;" in markup
    for name in names:
        assert name in card.text


def test_repr_html__loaded_result_shows_the_same_card(examples, tmp_path):
    for label in ("scree", "pca"):
        path = examples[label].to_zarr(tmp_path / f"{label}.zarr")
        assert load_result(path)._repr_html_() == examples[label]._repr_html_()


def test_repr_html__every_result_shows_its_intervals(examples):
    """Each released value with an interval reads "value [lower, upper]", what the intervals
    cover is said, and every interval field is shown by a table or listed (issue 33 item 2)."""
    from dppca_dask.results.html_tables import datasets
    from dppca_dask.results.interval_fields import COVERS, interval_fields, interval_text

    for label, result in examples.items():
        text = _card(result).text
        fields = [f for _, ds in datasets(result) for f in interval_fields(ds)]
        assert fields, label
        assert COVERS in text, label
        assert "Other intervals" not in text, label  # every built-in family has its table
        if result.kind in ("scree", "pca"):
            scree = result.scree if result.kind == "pca" else result
            ds = scree.dataset.sel(mechanism="clipped")
            expected = interval_text(float(ds["pve"][0]), float(ds["pve_lower"][0]),
                                     float(ds["pve_upper"][0]))
            assert expected in text, (label, expected)
        if result.kind in ("loading", "pca"):
            assert "Noise of the directions" in text and "angle bound" in text, label
        if result.kind == "covariance":
            ds = result.dataset
            expected = interval_text(float(ds["covariance"][0, 1]),
                                     float(ds["covariance_lower"][0, 1]),
                                     float(ds["covariance_upper"][0, 1]))
            assert expected in text, (label, expected)
        if result.kind == "score":
            assert "distinguishable from empty" in text and "[95% interval]" in text, label


def test_repr_html__indistinguishable_values_are_grey(examples):
    """A cell is grey exactly when its interval reaches 0 (a scree value of pure noise)."""
    from dppca_dask.results.html_tables import datasets
    from dppca_dask.results.interval_fields import interval_fields, interval_rows

    fit = examples["covariance_ssp"]
    markup = fit._repr_html_()
    grey = markup.count("color: #8c8c8c")
    ds = datasets(fit)[0][1]
    flagged = 0
    for f in interval_fields(ds):
        _, rows = interval_rows(ds, f)
        flagged += sum(r.noise for r in rows)
    assert 0 < grey == flagged  # a 4 x 4 matrix and 4 eigenvalues: every cell is on the card


def test_repr_html__lists_interval_fields_without_a_table(examples):
    """An interval variable no table knows (found by its ``interval_level``) is listed, with
    its description and how many of its values are indistinguishable from noise."""
    loading = examples["loading"]
    ds = loading.dataset.copy()
    level = {"interval_level": 0.95, "long_name": "lower end of the 95% interval of the widget"}
    ds["widget_lower"] = ("component", np.array([-1.0, 0.5, 1.0, 2.0]), level)
    ds["widget_upper"] = ("component", np.array([1.0, 1.5, 3.0, 4.0]),
                          {**level, "long_name": "upper end of the 95% interval of the widget"})
    text = _card(type(loading)(ds)).text
    assert "Other intervals" in text
    assert "widget: 95% interval of the widget (from -1 to 4; 1 of 4 indistinguishable from " \
           "noise)" in text


def test_repr_html__store_without_intervals_shows_no_interval_text(examples):
    """Stores written before the intervals: no brackets, no coverage sentence."""
    from dppca_dask.results.interval_fields import COVERS

    scree = examples["scree"]
    ds = scree.dataset.drop_vars([n for n in scree.dataset.data_vars
                                  if "interval_level" in scree.dataset[n].attrs])
    text = _card(type(scree)(ds)).text
    assert COVERS not in text and "[95% interval]" not in text
