"""The input form (Panel widgets), in the R app's tabs: Data, Budget, Scree, Score.

Defaults follow the R app (``dppca_app``, docs/spec/SPEC_dppca.md §11) where this package has
the same setting -- k = 4, the PMWM and Huber controls, axes 1 and 2 -- and the CLI elsewhere:
one scree method (clipped: each method is another pass over the data), geometric score
histograms, the recommended analytic calibration with tight sensitivity. Total δ is reset to
10^-⌈log10 n⌉ when the dataset changes (n is public metadata), as in the R app.
"""

from __future__ import annotations

import math
from typing import Any

import panel as pn

from dppca_dask.app.catalogue import AppConfig, DatasetChoice
from dppca_dask.app.settings import CONTROL_FIELDS, SCORE_METHODS, SCREE_METHODS, FormValues

__all__ = ["SHARE_FORMAT", "UPLOAD", "Form"]

UPLOAD = "Upload a CSV or Parquet file ..."
_PMWM = {"a": 0.0, "b": 10.0, "trim_const": 10.0, "eta": 0.01, "beta": 1.001}
_HUBER: dict[str, float] = {"k_min_m2": -20, "k_max_m2": 20, "m2_frac": 0.25, "mu0": 0.0,
                            "eta0": 1.0}
_INTEGER = ("k_min_m2", "k_max_m2", "T", "M")


def _number(name: str, value: Any, *, integer: bool = False, width: int = 130,
            **kw: Any) -> Any:
    cls = pn.widgets.IntInput if integer else pn.widgets.FloatInput
    return cls(name=name, value=value, width=width, **kw)


SHARE_FORMAT = "0.[000]"
"""The budget shares as the inputs show them (numbro): at most three decimals, ``0.333`` rather
than ``0.333333333333``; the value kept is the exact one until it is edited."""


class Form:
    """The widgets and :meth:`values`, their :class:`FormValues`."""

    def __init__(self, app: AppConfig, choices: list[DatasetChoice]) -> None:
        self.app = app
        self.choices: dict[str, DatasetChoice | None] = {c.label: c for c in choices}
        if app.uploads:
            self.choices[UPLOAD] = None
        self.dataset = pn.widgets.Select(name="Dataset", options=list(self.choices), width=380)
        self.upload = pn.widgets.FileInput(accept=".csv,.parquet,.pq", visible=False)
        self.upload_group = pn.widgets.Select(name="Group column of the upload", options=[],
                                              visible=False, width=250)
        self.convert = pn.widgets.Button(name="Convert to Zarr and use", visible=False,
                                         button_type="default")
        self.columns = pn.widgets.MultiChoice(name="Numeric columns (empty: all)", options=[],
                                              width=380)
        self.group = pn.widgets.Checkbox(name="Use group labels when available", value=True)
        self.data_info = pn.pane.Markdown("", width=380)
        self.eps = _number("Total epsilon", 1.0, start=0.0)
        self.delta = _number("Total delta", 1e-4, start=0.0)
        self.split = pn.widgets.Checkbox(name="Split the total budget between loading, scree "
                                              "and score (else equal thirds)", value=False)
        self.shares = {part: _number(f"{part} share", 1 / 3, start=0.0, width=118,
                                     format=SHARE_FORMAT)
                       for part in ("loading", "scree", "score")}
        self.calibration = pn.widgets.Select(name="Calibration", value="analytic",
                                             options=["analytic", "classical"], width=130)
        self.sensitivity = pn.widgets.Select(name="Sensitivity", value="tight",
                                             options=["tight", "seed"], width=130)
        self.non_private = pn.widgets.Checkbox(
            name="Non-private reference panels (NOT PRIVATE)", value=False,
            visible=app.allow_non_private)
        self.k = _number("k (components)", 4, integer=True, start=1)
        self.scree_methods = pn.widgets.CheckBoxGroup(name="Scree methods", value=["clipped"],
                                                      options=list(SCREE_METHODS), inline=True)
        self.mono = pn.widgets.Checkbox(name="Monotone post-processing", value=True)
        self.controls: dict[str, dict[str, Any]] = {
            "clipped": {"C_clip": _number("C_clip", 3.0, start=0.0)},
            "pmwm": {**{k: _number(k, v) for k, v in _PMWM.items()},
                     "split_mode": pn.widgets.Checkbox(name="split_mode", value=True)},
            "huber": {k: _number(k, _HUBER.get(k), integer=k in _INTEGER)
                      for k in CONTROL_FIELDS["huber"]},
        }
        self.axis_x = _number("x axis PC", 1, integer=True, start=1)
        self.axis_y = _number("y axis PC", 2, integer=True, start=1)
        self.score_methods = pn.widgets.CheckBoxGroup(name="Score methods", value=["geometric"],
                                                      options=list(SCORE_METHODS), inline=True)
        self.bins_x = _number("bins x (empty: auto)", None, integer=True)
        self.bins_y = _number("bins y (empty: auto)", None, integer=True)
        self.sampling = pn.widgets.Select(name="Sampling", value="uniform",
                                          options=["uniform", "center"], width=130)
        self.sample_size = _number("sample size (empty: n)", None, integer=True)
        self.group_weights = pn.widgets.Select(
            name="Group weights", value="observed", width=380, options={
                "observed (NOT PRIVATE unless group sizes are public)": "observed",
                "private (noisy group sizes)": "private"})
        self.panels = pn.widgets.CheckBoxGroup(name="Panels", value=["score", "biplot"],
                                               options=["score", "biplot"], inline=True)

    @property
    def choice(self) -> DatasetChoice | None:
        return self.choices.get(self.dataset.value)

    def add_choice(self, choice: DatasetChoice) -> None:
        """Offer ``choice`` (a converted upload) and select it."""
        self.choices = {**{k: v for k, v in self.choices.items() if v is not None},
                        choice.label: choice, **({UPLOAD: None} if self.app.uploads else {})}
        self.dataset.options = list(self.choices)
        self.dataset.value = choice.label

    def show_dataset(self, choice: DatasetChoice, meta: dict[str, Any]) -> None:
        """New dataset: its columns, whether it has groups, δ = 10^-⌈log10 n⌉, its C_clip."""
        self.columns.options = list(meta["variables"])
        self.columns.value = []
        self.group.disabled = choice.group is None
        self.group.name = ("Use group labels (variable " f"{choice.group!r})" if choice.group
                           else "Use group labels (this dataset has none)")
        n = int(meta["n"])
        self.delta.value = 10.0 ** -math.ceil(math.log10(n)) if n > 1 else 1e-4
        self.controls["clipped"]["C_clip"].value = choice.C_clip
        self.data_info.object = (f"**{n} observations x {meta['p']} variables** (public "
                                 f"metadata; no values are read)  \n`{choice.path}`"
                                 + (f" [{choice.array}]" if choice.array else ""))

    def values(self) -> FormValues:
        shares = ({k: w.value for k, w in self.shares.items()} if self.split.value else None)
        axes = [self.axis_x.value, self.axis_y.value]
        bins = (None if self.bins_x.value is None and self.bins_y.value is None
                else [self.bins_x.value, self.bins_y.value])
        return FormValues(
            columns=list(self.columns.value) or None, group=bool(self.group.value),
            eps=self.eps.value, delta=self.delta.value, split=shares, k=self.k.value,
            scree_methods=list(self.scree_methods.value),
            controls={m: {k: w.value for k, w in ws.items()} for m, ws in self.controls.items()},
            mono=bool(self.mono.value), axes=axes, score_methods=list(self.score_methods.value),
            bins=bins, sampling_method=str(self.sampling.value),
            sample_size=self.sample_size.value, panels=list(self.panels.value),
            group_weights=str(self.group_weights.value),
            calibration=str(self.calibration.value), sensitivity=str(self.sensitivity.value),
            non_private=bool(self.non_private.value) and self.app.allow_non_private)

    def tabs(self) -> Any:
        """The inputs in the R app's tabs."""
        data = pn.Column(self.dataset, self.upload, pn.Row(self.upload_group, self.convert),
                         self.data_info, self.columns, self.group)
        budget = pn.Column(pn.Row(self.eps, self.delta), self.split,
                           pn.Row(*self.shares.values()),
                           pn.Row(self.calibration, self.sensitivity), self.non_private)
        cards = [pn.Card(pn.FlexBox(*ws.values()), title=f"{m} control", collapsed=m != "clipped",
                         width=400) for m, ws in self.controls.items()]
        scree = pn.Column(self.k, self.scree_methods, self.mono, *cards)
        score = pn.Column(pn.Row(self.axis_x, self.axis_y), self.score_methods,
                          pn.Row(self.bins_x, self.bins_y), pn.Row(self.sampling, self.sample_size),
                          self.group_weights, self.panels)
        return pn.Tabs(("Data", data), ("Budget", budget), ("Scree", scree), ("Score", score),
                       width=420)
