"""scikit-learn estimators: :class:`DPPCA` (private directions and scree values) and
:class:`DPCovariance` (private second-moment matrix). Needs the ``sklearn`` extra
(``pip install "dppca_dask[sklearn]"``).

Both follow scikit-learn's estimator contract: ``__init__`` stores its parameters unchanged,
``get_params``/``set_params`` come from :class:`~sklearn.base.BaseEstimator`, every parameter is
checked at ``fit`` with the package's one-line errors, and ``fit(X, y=None)`` returns ``self``
with the fitted attributes ending in ``_``.

Privacy
-------
* **Every** ``fit`` is a differentially private release of ``X``: it spends the budget of
  ``eps``/``delta`` (or ``privacy``, or ``rho`` for :class:`DPCovariance`) again. A grid search
  or cross-validation fits once per candidate and fold, and those releases compose. ``ledger=``
  (an :func:`~dppca_dask.ledger_accountant`) or ``with dppca_dask.accounting(dataset=...)``
  reserves each fit in the persistent budget ledger before any data is read, with its cap check.
* ``random_state`` is scikit-learn's name for the package's ``rng`` (:func:`dppca_dask.privacy.rng.as_rng`):
  ``None`` (default, OS entropy: use it for real releases), an int (reproducible noise, the
  release is marked *seeded*; the seed is never stored), a SeedSequence or a Generator. Note
  that :func:`~sklearn.base.clone` copies a Generator with its state, so clones draw the same
  noise. A legacy ``numpy.random.RandomState`` is refused.
* Fitted attributes are the released values (and post-processing of them); ``result_`` keeps
  the package's result object with its ledger (``result_.ledger``).
* Preprocessing in a :class:`~sklearn.pipeline.Pipeline` is **not** private: a
  :class:`~sklearn.preprocessing.StandardScaler` before ``DPPCA`` fits the data's mean and
  standard deviation exactly and uses them. For a private pipeline scale by public constants.

DPPCA
-----
``fit`` runs :func:`~dppca_dask.dp_scree` (the loading release -- noisy spherical Kendall
directions -- and a private scree release on them, the budget halved between the two unless
``privacy`` splits it): ``components_`` (k × p) are the private directions,
``explained_variance_`` the private scree values (the variance along each direction; with
``mono`` non-negative and non-increasing). No private mean of ``X`` is released: spherical
Kendall directions do not need one, so there is **no** ``mean_``, and :meth:`DPPCA.transform`
returns the **uncentred** scores ``X @ components_.T`` -- the scores that
:func:`~dppca_dask.dp_score` bins (``x_iᵀv``). The scree release centres the scores on its own
centre (``result_.center``: private by default; ``None`` for the empirical centre, which is
not released). ``transform`` is post-processing of the fitted release together with the new
data: its output is **not** a private release of that data. There is no
``explained_variance_ratio_``: no private total variance is released (the PVE over the k
released components is ``result_.pve``). Dask arrays, Dask DataFrames and Zarr/Parquet paths
are passed to the package unchanged (out of core; no ``feature_names_in_``); ``transform`` of a
dask array is lazy.

DPCovariance
------------
``fit`` runs :func:`~dppca_dask.dp_covariance`: ``covariance_`` is the private
**second-moment** matrix XᵀX/n of ``X`` clipped to the public ``bounds`` (not centred: centre
the data by public constants first). ``location_`` is set only when a private mean is
released -- PACE-GGM with ``mean="measure"``: the noisy column means of the clipped data
(``covariance_`` stays the second moment; ``covariance_ - outer(location_, location_)`` is a
centred estimate by post-processing).

Skipped scikit-learn checks
---------------------------
:func:`sklearn_expected_failed_checks` lists the checks of
:func:`sklearn.utils.estimator_checks.check_estimator` that contradict the method (pass it as
``expected_failed_checks``); every other check passes (``tests/test_sklearn.py``). For
:class:`DPPCA`:

* ``check_positive_only_tag_during_fit`` -- it fits the iris data, which hold a repeated row;
  the spherical-Kendall release rejects duplicate observations
  (:class:`~dppca_dask.DuplicateObservationError`: the pair term of two equal rows is
  undefined), whatever the sign of the values. Negative values are accepted (tested).

One feature (``check_fit2d_1feature``) is refused with scikit-learn's message, as that check
allows: PCA directions need p ≥ 2.

:class:`DPCovariance` skips none.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

try:
    from sklearn.base import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
        BaseEstimator,
        ClassNamePrefixFeaturesOutMixin,
        TransformerMixin,
    )
    from sklearn.utils.validation import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
        check_is_fitted,
        validate_data,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("dppca_dask.sklearn needs scikit-learn >= 1.6: "
                      "pip install 'dppca_dask[sklearn]'") from exc

from dppca_dask._validation import bad_param, parse_choice, parse_int
from dppca_dask.covariance.estimator import dp_covariance, parse_clip, resolve_preset
from dppca_dask.errors import BudgetError, InputError
from dppca_dask.graph.kendall_layout import DEFAULT_PAIR_BLOCK
from dppca_dask.pca.scree import dp_scree
from dppca_dask.pca.scree_controls import resolve_controls
from dppca_dask.privacy.budget import PrivacyControl, privacy_control

__all__ = ["DPCovariance", "DPPCA", "sklearn_expected_failed_checks"]

_SCREE_METHODS = ("clipped", "pmwm", "huber")

# check name -> why it contradicts the method (module docstring, "Skipped scikit-learn checks").
_DPPCA_EXPECTED_FAILURES = {
    "check_positive_only_tag_during_fit": (
        "it fits the iris data, which hold a repeated row: the spherical-Kendall release "
        "rejects duplicate observations (DuplicateObservationError), not negative values"),
}


def sklearn_expected_failed_checks(estimator: Any) -> dict[str, str]:
    """The checks of ``check_estimator`` that contradict the method, with the reason.

    For ``parametrize_with_checks(..., expected_failed_checks=sklearn_expected_failed_checks)``
    or ``check_estimator(est, expected_failed_checks=sklearn_expected_failed_checks(est))``.

    Examples
    --------
    >>> sorted(sklearn_expected_failed_checks(DPPCA()))
    ['check_positive_only_tag_during_fit']
    >>> sklearn_expected_failed_checks(DPCovariance())
    {}
    """
    return dict(_DPPCA_EXPECTED_FAILURES) if isinstance(estimator, DPPCA) else {}


def _out_of_core(X: Any) -> bool:
    """Inputs handed to the package as they are: dask collections and paths/URLs."""
    if isinstance(X, str | os.PathLike):
        return True
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "ndim")


def _rng(random_state: Any, owner: str) -> Any:
    if isinstance(random_state, np.random.RandomState):
        raise bad_param("random_state", owner, "None, an int, a SeedSequence or a Generator "
                        "(numpy.random.RandomState is not supported)", random_state)
    return random_state


def _frame(est: Any, values: np.ndarray) -> Any:
    """``values`` with the fitted column names, so the result names its variables."""
    names = getattr(est, "feature_names_in_", None)
    if names is None:
        return values
    import pandas as pd

    return pd.DataFrame(values, columns=[str(n) for n in names])


class DPPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Differentially private PCA: private directions and scree values (:func:`~dppca_dask.dp_scree`).

    See the module docstring (:mod:`dppca_dask.sklearn`) for what is private, the centring of
    :meth:`transform` and the checks skipped.

    Parameters
    ----------
    n_components
        k, the number of directions and scree values (1 ≤ k ≤ p); ``None``: min(p, 10).
    eps, delta
        Total budget of each fit, halved between the directions and the scree values.
    privacy
        Instead of ``eps``/``delta``: a :func:`~dppca_dask.privacy_control` for {loading, scree}.
    scree_method
        ``"clipped"`` (default), ``"pmwm"`` or ``"huber"`` (one).
    scree_control
        Its control (:func:`~dppca_dask.clipped_control` ...; its data-scale parameters, such
        as ``C_clip``, are required).
    center, mono, calibration, sensitivity, preset, cpp_option, pairs, pair_block
        As for :func:`~dppca_dask.dp_scree`: ``calibration`` and ``sensitivity`` default to the
        preset's, ``preset="recommended"`` (analytic, tight); ``preset="seed"`` gives the R
        package's classical calibration and 4/n.
    random_state
        The package's ``rng``: ``None`` (default), an int, a SeedSequence or a Generator.
    ledger
        An accountant (:func:`~dppca_dask.ledger_accountant`) that reserves every fit.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The private directions (orthonormal rows).
    explained_variance_ : ndarray of shape (n_components,)
        The private scree values.
    explained_variance_interval_ : ndarray of shape (2, n_components)
        Lower and upper ends of the 95 % intervals (simultaneous over the components) of the
        noise-free scree values; NaN for ``huber``. Post-processing: they cover the noise, not
        the sampling variability (:func:`~dppca_dask.results.scree_utility.scree_intervals`).
    explained_variance_ratio_interval_ : ndarray of shape (2, n_components)
        The same for the PVE over the k components (Fieller intervals, simultaneous).
    explained_variance_sampling_sd_ : ndarray of shape (n_components,)
        A different question: each scree value's sampling sd if the scores were Gaussian,
        ``sqrt(2/(m - 1))`` times the value (m the rows averaged); not in the intervals above.
    components_angle_bound_ : ndarray of shape (n_components,)
        95 % bounds (degrees, simultaneous over the components) on the angle between each
        private direction and the noise-free one: the loading release's parametric bootstrap
        from the public noise law (approximate; above 30 features the guaranteed Davis-Kahan
        bound; docs/intervals.md); 90 where the direction is not identifiable at this budget.
    components_identifiable_ : ndarray of shape (n_components,)
        Whether each bound is below 45 degrees (bool; False where the bound is NaN).
    n_components_, n_features_in_, feature_names_in_
        k, p and the column names (DataFrame input only).
    result_ : ScreeResult
        The package's result (ledger, PVE, centre, ``summary()``, ``plot()``, ``to_zarr()``).

    Examples
    --------
    >>> from dppca_dask import clipped_control
    >>> X = np.random.default_rng(0).normal(size=(400, 4)) * [3.0, 2.0, 1.0, 0.5]
    >>> est = DPPCA(2, eps=4, delta=1e-5, calibration="analytic",
    ...             scree_control=clipped_control(C_clip=40), random_state=1).fit(X)
    >>> est.components_.shape, est.explained_variance_.shape, est.transform(X).shape
    ((2, 4), (2,), (400, 2))
    >>> bool(est.explained_variance_[0] > est.explained_variance_[1])
    True
    """

    def __init__(
        self,
        n_components: int | None = None,
        *,
        eps: float | None = None,
        delta: float | None = None,
        privacy: PrivacyControl | None = None,
        scree_method: str = "clipped",
        scree_control: Any = None,
        center: Any = "private",
        mono: bool = True,
        calibration: str | None = None,
        sensitivity: str | None = None,
        preset: str = "recommended",
        cpp_option: bool = True,
        pairs: str = "all",
        pair_block: int = DEFAULT_PAIR_BLOCK,
        random_state: Any = None,
        ledger: Any = None,
    ) -> None:
        self.n_components = n_components
        self.eps = eps
        self.delta = delta
        self.privacy = privacy
        self.scree_method = scree_method
        self.scree_control = scree_control
        self.center = center
        self.mono = mono
        self.calibration = calibration
        self.sensitivity = sensitivity
        self.preset = preset
        self.cpp_option = cpp_option
        self.pairs = pairs
        self.pair_block = pair_block
        self.random_state = random_state
        self.ledger = ledger

    def _privacy(self) -> PrivacyControl:
        name = type(self).__name__
        if self.privacy is not None:
            if self.eps is not None or self.delta is not None:
                raise BudgetError(f"{name}: give either eps and delta or privacy, not both.")
            if not isinstance(self.privacy, PrivacyControl):
                raise bad_param("privacy", name, "a privacy_control(...) object", self.privacy,
                                cls=BudgetError)
            return self.privacy
        if self.eps is None or self.delta is None:
            raise BudgetError(f"{name} needs a privacy budget: give eps and delta (or "
                              "privacy=privacy_control(...)). No data was read.")
        return privacy_control(eps=self.eps, delta=self.delta)

    def fit(self, X: Any, y: Any = None) -> DPPCA:
        """Release private directions and scree values of ``X`` (one release; ``y`` is ignored)."""
        name = type(self).__name__
        method = parse_choice(self.scree_method, "scree_method", name, _SCREE_METHODS)
        if self.scree_control is None:  # the message names this estimator's parameter
            resolve_controls((method,), None, owner=name)
        privacy = self._privacy()
        rng = _rng(self.random_state, name)
        k = self.n_components
        if _out_of_core(X):
            data = X
            if k is not None:
                k = parse_int(k, "n_components", name, low=1)
        else:
            data = _frame(self, validate_data(self, X, dtype=np.float64, ensure_min_samples=2,
                                              ensure_min_features=2))
            if k is not None:
                k = parse_int(k, "n_components", name, low=1, high=int(data.shape[1]))
        # dp_scree checks the options it shares with this estimator (one message format)
        options: dict[str, Any] = {
            "method": method, "control": self.scree_control, "mono": self.mono,
            "cpp_option": self.cpp_option, "calibration": self.calibration,
            "center": self.center, "sensitivity": self.sensitivity, "preset": self.preset,
            "pairs": self.pairs,
            "pair_block": self.pair_block, "ledger": self.ledger,
        }
        result = dp_scree(data, privacy=privacy, k=k, rng=rng, **options)
        directions = result.directions.transpose("variable", "component").values
        # one method: its row of (method or mechanism, component), whatever the first dim's name
        scree = result.scree.transpose(..., "component").values.reshape(-1, result.k)
        self.components_ = np.ascontiguousarray(directions.T, dtype=np.float64)
        self.explained_variance_ = np.asarray(scree[0], dtype=np.float64)
        ds = result.dataset
        def first_row(name: str) -> np.ndarray:  # one method's row, (method, component)
            return np.asarray(ds[name].transpose(..., "component").values.reshape(
                -1, result.k)[0], dtype=np.float64)

        self.explained_variance_interval_ = np.vstack(  # (lower, upper) x component
            [first_row("scree_lower"), first_row("scree_upper")])
        self.explained_variance_ratio_interval_ = np.vstack(
            [first_row("pve_lower"), first_row("pve_upper")])
        self.explained_variance_sampling_sd_ = first_row("scree_sampling_sd")
        self.components_angle_bound_ = (
            np.asarray(ds["angle_upper"].values, dtype=np.float64) if "angle_upper" in ds
            else np.full(result.k, np.nan))
        self.components_identifiable_ = self.components_angle_bound_ < 45.0
        self.n_components_ = int(result.k)
        if _out_of_core(X):
            self.n_features_in_ = int(directions.shape[0])
        self.result_ = result
        return self

    def transform(self, X: Any) -> Any:
        """Uncentred scores ``X @ components_.T`` (n × k): post-processing, not a release of X."""
        check_is_fitted(self, "components_")
        if isinstance(X, str | os.PathLike):
            raise InputError(f"{type(self).__name__}.transform takes an array (a dask array for "
                             f"data out of core), not a path. Got {str(X)!r}.")
        if _out_of_core(X):
            arr = X.to_dask_array(lengths=True) if hasattr(X, "to_dask_array") else X
            if arr.ndim != 2 or arr.shape[1] != self.n_features_in_:
                raise ValueError(f"X has shape {arr.shape}, but {type(self).__name__} is "
                                 f"expecting {self.n_features_in_} features as input.")
            return arr.astype(np.float64) @ self.components_.T
        Xv = validate_data(self, X, dtype=np.float64, reset=False)
        return Xv @ self.components_.T

    @property
    def _n_features_out(self) -> int:
        return int(self.n_components_)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


class DPCovariance(BaseEstimator):
    """Differentially private second-moment matrix (:func:`~dppca_dask.dp_covariance`).

    Parameters
    ----------
    rho
        Budget of each fit in ρ-zCDP; or ``eps`` and ``delta`` (converted).
    eps, delta
        An (ε, δ) budget instead of ``rho``.
    bounds
        With ``clip="box"``, the required public clipping bounds: a scalar, one per feature, or
        a mapping from feature name to bound (giving them selects ``clip="box"``). Never
        derived from the data.
    method, control
        ``"pace_ggm"``, ``"ssp"``, ``"diagonal"`` or ``"auto"`` (SSP plus shrinkage) and its
        control; None (default): the preset's.
    clip, radius
        ``"box"`` (each value clipped to its bound) or ``"row"`` (each row scaled to L2 norm at
        most ``radius``, a public number or ``"private"``; no ``bounds``); None (default): the
        preset's.
    preset
        ``"recommended"`` (default: ``method="auto", clip="row", radius="private"``, a private
        row-norm quantile from 10 % of the budget) or ``"seed"`` (the R package's
        ``method="pace_ggm", clip="box"``, with ``bounds``); see
        :func:`~dppca_dask.dp_covariance`.
    random_state
        The package's ``rng``: ``None`` (default), an int, a SeedSequence or a Generator.
    ledger
        An accountant (:func:`~dppca_dask.ledger_accountant`) that reserves every fit.

    Attributes
    ----------
    covariance_ : ndarray of shape (n_features, n_features)
        The private XᵀX/n of the clipped data (uncentred).
    covariance_interval_ : ndarray of shape (2, n_features, n_features)
        Lower and upper ends of the 95 % intervals (simultaneous over the entries) of the
        noise-free clipped XᵀX/n, from the measurements and their public noise; unmeasured
        entries get the public range. Post-processing: they cover the noise, not the sampling
        variability (:func:`~dppca_dask.results.covariance_intervals.covariance_intervals`).
    covariance_eigenvalue_interval_ : ndarray of shape (2, n_features)
        The same for its eigenvalues (decreasing), when every entry was measured (``ssp``,
        ``auto``); NaN otherwise.
    covariance_sampling_sd_ : ndarray of shape (n_features, n_features)
        A different question: each entry's sampling sd if the rows were Gaussian with mean 0;
        not in the intervals above.
    location_ : ndarray of shape (n_features,)
        Only with PACE-GGM's ``mean="measure"``: the private column means of the clipped data.
    n_features_in_, feature_names_in_
        p and the column names (DataFrame input only).
    result_ : CovarianceResult
        The package's result (ledger, measured entries, ``summary()``, ``to_zarr()``).

    Examples
    --------
    >>> X = np.random.default_rng(0).uniform(-1, 1, size=(500, 3))
    >>> est = DPCovariance(rho=1.0, random_state=1).fit(X)  # auto, private row-norm radius
    >>> est.covariance_.shape, bool(np.all(np.linalg.eigvalsh(est.covariance_) >= 0))
    ((3, 3), True)
    >>> seed = DPCovariance(rho=1.0, bounds=1.0, preset="seed", random_state=1).fit(X)
    >>> bool(np.all(np.linalg.eigvalsh(seed.covariance_) > 0))
    True
    """

    def __init__(
        self,
        *,
        rho: float | None = None,
        eps: float | None = None,
        delta: float | None = None,
        bounds: Any = None,
        method: str | None = None,
        control: Any = None,
        clip: str | None = None,
        radius: float | str | None = None,
        preset: str = "recommended",
        random_state: Any = None,
        ledger: Any = None,
    ) -> None:
        self.rho = rho
        self.eps = eps
        self.delta = delta
        self.bounds = bounds
        self.method = method
        self.control = control
        self.clip = clip
        self.radius = radius
        self.preset = preset
        self.random_state = random_state
        self.ledger = ledger

    def fit(self, X: Any, y: Any = None) -> DPCovariance:
        """Release the private second-moment matrix of ``X`` (one release; ``y`` is ignored)."""
        name = type(self).__name__
        method, clip, radius = resolve_preset(self.preset, method=self.method, clip=self.clip,
                                              bounds=self.bounds, radius=self.radius, owner=name)
        if clip != "box" or radius is not None:  # the clip, and row's radius
            parse_clip(clip, self.bounds, radius, (), name)
        elif self.bounds is None:
            raise bad_param("bounds", name, "public bounds (a positive number, one per feature "
                            "or a mapping from feature name to bound) with clip='box'", None)
        rng = _rng(self.random_state, name)
        data = X if _out_of_core(X) else _frame(self, validate_data(self, X, dtype=np.float64))
        options: dict[str, Any] = {"method": method, "control": self.control,
                                   "clip": clip, "radius": radius, "ledger": self.ledger}
        result = dp_covariance(data, rho=self.rho, eps=self.eps, delta=self.delta,
                               bounds=self.bounds, rng=rng, **options)
        self.covariance_ = np.asarray(result.covariance.values, dtype=np.float64)
        ds = result.dataset
        self.covariance_interval_ = np.stack([
            np.asarray(ds["covariance_lower"].values, dtype=np.float64),
            np.asarray(ds["covariance_upper"].values, dtype=np.float64)])
        p = self.covariance_.shape[0]
        self.covariance_eigenvalue_interval_ = (
            np.vstack([np.asarray(ds["covariance_eigenvalue_lower"].values, dtype=np.float64),
                       np.asarray(ds["covariance_eigenvalue_upper"].values, dtype=np.float64)])
            if "covariance_eigenvalue_lower" in ds else np.full((2, p), np.nan))
        self.covariance_sampling_sd_ = np.asarray(ds["covariance_sampling_sd"].values,
                                                  dtype=np.float64)
        if "mean_measurement" in result.dataset:  # a private mean was released
            self.location_ = np.asarray(result.dataset["mean_measurement"].values,
                                        dtype=np.float64)
        if _out_of_core(X):
            self.n_features_in_ = int(self.covariance_.shape[0])
        self.result_ = result
        return self

