"""The released score frame: :class:`Frame`, per-axis centre and radius, and its inflation.

:mod:`dppca_dask.pca.frame` releases it (docs/design/frame.md); a score result rebuilds it from its
stored metadata (:attr:`dppca_dask.results.score.ScoreResult.frame`) and the plots draw within it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["INFLATE", "Frame"]

INFLATE = 0.20
"""The frame's limits are centre ± (1 + INFLATE)·radius per axis."""


@dataclass(frozen=True)
class Frame:
    """A released frame: per-axis centre and radius; limits are centre ± (1 + inflate)·radius.

    ``scale``: the capped frame's private S per axis (its radius lies in [S, U·S]); kept on the
    driver for checks, not written to results.
    """

    method: str
    center: tuple[float, float]
    radius: tuple[float, float]
    inflate: float = INFLATE
    scale: tuple[float, float] | None = None

    def limits(self, axis: int) -> tuple[float, float]:
        half = (1.0 + self.inflate) * self.radius[axis]
        return (self.center[axis] - half, self.center[axis] + half)

    @property
    def xlim(self) -> tuple[float, float]:
        return self.limits(0)

    @property
    def ylim(self) -> tuple[float, float]:
        return self.limits(1)
