"""Errors in the command line's terms: config keys and options, filled in from the fields of a
:class:`~dppca_dask.errors.DPPCAError` (no message text is parsed). The CLI prints every error
through :func:`cli_message`; the app shows its form's errors the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from dppca_dask.errors import API_WORDING, DPPCAError

__all__ = ["CliWording", "cli_message"]

_CONVERT_OPTIONS = {"fmt": "--format", "in_path": "SOURCE", "out_path": "TARGET",
                    "chunk_rows": "--chunk-rows", "columns": "--columns",
                    "group_column": "--group-column", "overwrite": "--overwrite"}
_CONTROL_OWNERS = {"clipped_control": "clipped", "pmwm_control": "pmwm",
                   "huber_control": "huber"}
_INPUT_KEYS = ("array", "columns", "group", "storage_options")
"""An estimator's data parameters a run config sets in its ``input`` section."""


@dataclass(frozen=True)
class CliWording:
    """Errors in the command line's terms (:class:`~dppca_dask.errors.Wording`): config keys
    and options, not the Python API's keyword arguments, filled in from the error's fields.

    ``task``: the run config's task, when known (names the section of a config key).

    Examples
    --------
    >>> from dppca_dask.errors import Fix, OutputExistsError, ParameterError
    >>> CliWording().say(OutputExistsError("Output 'o' already exists.",
    ...                                    fix=Fix((("overwrite",),), "True", "to replace it")))
    "Output 'o' already exists. Use --overwrite to replace it."
    >>> CliWording().say(ParameterError(owner="convert", parameter="fmt", rule="must be given"))
    'The --format option of convert must be given.'
    >>> CliWording("pca").say(ParameterError(owner="dp_pca", parameter="array",
    ...                                      rule="must name a variable", value="Y"))
    "The 'input.array' config key must name a variable. Got 'Y' instead."
    >>> CliWording("pca").say(ParameterError("Missing required control parameter(s): 'C_clip'.",
    ...     owner="dp_pca", fix=Fix((("scree_control", "clipped", "C_clip"),))))
    "Missing required control parameter(s): 'C_clip'. Set it in the config: pca.scree_control.clipped.C_clip (or --set pca.scree_control.clipped.C_clip=...)."
    """

    task: str | None = None

    def say(self, error: DPPCAError) -> str:
        """The one-line message of ``error`` on the command line."""
        return error.render(self)

    def _section(self) -> str:
        return "pca.scree_control" if self.task == "pca" else "scree.controls"

    def subject(self, owner: str, parameter: str) -> str:
        if owner == "convert" and parameter in _CONVERT_OPTIONS:
            option = _CONVERT_OPTIONS[parameter]
            return (f"The {option} argument of convert" if option.isupper()
                    else f"The {option} option of convert")
        if self.task is not None and owner in _CONTROL_OWNERS:
            return f"The '{self._section()}.{_CONTROL_OWNERS[owner]}.{parameter}' config key"
        if self.task is not None and owner == "privacy_control":
            return f"The 'privacy.{parameter}' config key"
        if self.task is not None and owner.startswith("dp_"):
            if parameter in ("eps", "delta"):
                return f"The 'privacy.{parameter}' config key"
            if parameter in _INPUT_KEYS:
                return f"The 'input.{parameter}' config key"
            if parameter == "X":
                return "The input data ('input.path')"
            return f"The '{self.task}.{parameter}' config key"
        return f"The {parameter!r} parameter of {owner}"

    def setting(self, owner: str, paths: tuple[tuple[str, ...], ...], value: str) -> str:
        if paths == (("overwrite",),):
            return "use --overwrite"
        if all(len(path) == 3 for path in paths):  # a control's fields: config keys
            keys = [f"{self._section()}.{path[1]}.{path[2]}" for path in paths]
            it = "it" if len(keys) == 1 else "them"
            return f"set {it} in the config: {', '.join(keys)} (or --set {keys[0]}=...)"
        return API_WORDING.setting(owner, paths, value)


def cli_message(error: DPPCAError, task: str | None = None) -> str:
    """``error``'s message on the command line (and in the app): :class:`CliWording`."""
    return CliWording(task).say(error)
