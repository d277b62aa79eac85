"""report.html's intervals section: every released value with an interval, its marker, and
what the intervals do not cover (issue 33 item 2)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from dppca_dask.report.html import render_report
from dppca_dask.report.intervals import HEAD_ROWS, interval_section
from dppca_dask.results.html_tables import datasets
from dppca_dask.results.interval_fields import (
    COVERS,
    NOISE,
    interval_fields,
    interval_rows,
    interval_text,
    repeats,
)
from tests.helpers import example_results


class Rows(HTMLParser):
    """The text of every table row of the section, cell by cell; and the tag balance."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.stack.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)

    def handle_data(self, data):
        if "td" in self.stack or "th" in self.stack:
            self.rows[-1][-1] += data


@pytest.fixture(scope="module")
def examples():
    return example_results()


def _section(result) -> str:
    page = render_report(result, figures=[])
    found = re.findall(r'<section id="intervals">(.*?)</section>', page, re.DOTALL)
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("label", ["loading", "scree", "score", "pca", "covariance",
                                   "covariance_ssp"])
def test_interval_section__every_value_with_its_interval_and_marker(examples, label):
    result = examples[label]
    body = _section(result)
    parsed = Rows(body)
    assert parsed.errors == [] and parsed.stack == []
    assert COVERS in body.replace("&#x27;", "'")
    cells = [" | ".join(r) for r in parsed.rows]
    seen: dict[str, object] = {}
    for _, ds in datasets(result):
        for field in interval_fields(ds):
            name = field.upper or field.lower or field.key
            if field.key in seen and repeats(seen[field.key], ds[name]):
                continue  # shown once, in the earlier part (dp_pca's scree repeats the angles)
            seen.setdefault(field.key, ds[name])
            dims, rows = interval_rows(ds, field)
            by_component = set(dims) <= {"mechanism", "component"}
            # cells (histograms, matrices): the values distinguishable from noise are listed
            signal = [r for r in rows if not r.noise]
            shown = rows if by_component else (signal or rows)[:HEAD_ROWS]
            assert shown, (label, field.key)
            for r in shown:
                # the row of this value: its coordinates, then its interval and its marker
                line = [c for c in cells if c.startswith(" | ".join(r.where) + " | ")]
                assert len(line) == 1, (label, field.key, r.where)
                if field.lower is not None and field.upper is not None:
                    assert interval_text(None, r.lower, r.upper) in line[0]
                assert line[0].endswith(NOISE if r.noise else "distinguishable"), line[0]
            if not by_component:
                assert f"{len(rows) - len(signal)} of {len(rows)} values " \
                       "indistinguishable from noise" in body
                if signal:  # no value of noise listed
                    for r in rows:
                        if r.noise:
                            assert not [c for c in cells
                                        if c.startswith(" | ".join(r.where) + " | ")], label


def test_interval_section__marks_the_directions_that_are_not_identifiable(examples):
    result = examples["loading"]
    ds = result.dataset
    body = _section(result)
    for comp, ident in zip(ds["component"].values, ds["direction_identifiable"].values,
                           strict=True):
        row = re.search(rf"<tr><td>{comp}</td>.*?</tr>", body).group(0)
        assert (NOISE in row) == (not ident)


def test_interval_section__absent_without_intervals(examples):
    """Stores written before the intervals: no section, the rest of the page unchanged."""
    scree = examples["scree"]
    ds = scree.dataset.drop_vars([n for n in scree.dataset.data_vars
                                  if "interval_level" in scree.dataset[n].attrs])
    old = type(scree)(ds)
    assert interval_section(old) is None
    assert 'id="intervals"' not in render_report(old, figures=[])
