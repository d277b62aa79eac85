"""Where a release was recorded, in words: the "Recorded in" line of the cards and summaries.

A Python-API release's metadata holds ``recorded_in`` (``kind``, ``persistent``, ``where``:
:func:`~dppca_dask.privacy.accountant.current_recording`); a release recorded only in the
in-memory session ledger gets the advice to record persistently. Results of ``dppca-dask run``
(and of versions before ``recorded_in``) do not state it: their summaries print no line, and the
card says so.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NOT_STATED", "PERSIST_ADVICE", "recorded_lines", "recorded_text"]

PERSIST_ADVICE = ("to keep it, record releases with `with dppca_dask.accounting(dataset=...):` "
                  "or ledger=dppca_dask.ledger_accountant(dataset=...)")

NOT_STATED = ("not stated in this result (a `dppca-dask run` release: its run's report.html "
              "names the ledger)")


def recorded_text(meta: dict[str, Any]) -> str | None:
    """Where the release was recorded, with the advice when that was not persistent; ``None``
    when its metadata does not say."""
    recorded = meta.get("recorded_in")
    if not isinstance(recorded, dict) or "where" not in recorded:
        return None
    text = str(recorded["where"])
    if recorded.get("persistent") is False:
        text += f"; {PERSIST_ADVICE}"
    return text


def recorded_lines(meta: dict[str, Any]) -> list[str]:
    """The summaries' one "Recorded in:" line (none when the metadata does not say)."""
    text = recorded_text(meta)
    return [] if text is None else [f"Recorded in: {text}"]
