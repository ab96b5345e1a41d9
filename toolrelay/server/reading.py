"""What every front reads the same way: the model, toolrelay's own request
options, the round (built by :func:`toolrelay.io.round.build_round`), and the
checks of one field, whose errors name it as the OpenAI API does
(``'n' must be an integer.``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, NoReturn, get_args

from toolrelay.errors import RequestError
from toolrelay.io.round import RoundRequest, build_round
from toolrelay.io.settings import ConstrainMode, Settings, ValidateMode
from toolrelay.profiles import get_profile
from toolrelay.server.errors import invalid
from toolrelay.stuck import Mode, parse_mode
from toolrelay.types import DeclaredTools

# Final, as every constant here: read where it stands (docs/compiled.md).
_VALIDATE_MODES: Final = get_args(ValidateMode)
_CONSTRAIN_MODES: Final = get_args(ConstrainMode)
# toolrelay's own request fields: read here, never sent to a backend.
OWN_FIELDS: Final = frozenset(
    {"toolrelay_profile", "toolrelay_stuck_mode", "toolrelay_validate", "toolrelay_constrain"}
)


@dataclass(frozen=True)
class OwnOptions:
    """toolrelay's own request options, read the same way by every front."""

    stuck_mode: Mode | None
    # The round's options: the model's configured ones with the request's own
    # choices in them (``profile``, ``validate``, ``constrain``), looked up once
    # for the reading and the round.
    round_options: dict[str, Any]

    # Written out, as a frozen dataclass's generated one sets the fields: that one
    # (and a named tuple's ``__new__``) is Python even compiled (setup.py), an
    # interpreted frame for every request (tests/core/test_written_inits.py).
    def __init__(self, stuck_mode: Mode | None, round_options: dict[str, Any]) -> None:
        object.__setattr__(self, "stuck_mode", stuck_mode)
        object.__setattr__(self, "round_options", round_options)


def model_name(body: dict[str, Any], settings: Settings) -> str:
    """The model the backend is asked for: the request's, through the aliases and
    the ``--model`` catch-all (:mod:`toolrelay.io.models`)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        if settings.model is None:
            raise invalid("'model' is required and must be a non-empty string.", "model")
        return settings.model
    return settings.model_names.backend_name(model)


def own_options(
    body: dict[str, Any], settings: Settings, model: str, stuck_header: str | None
) -> OwnOptions:
    """The sampling profile, the stuck detector's mode (the body field, else the
    header), the validation mode and constrained decoding, from any front's body,
    else the settings."""
    # A copy of its own (completed below) of the options round_options keeps for
    # the model, read here first: the method is a Python frame every request.
    kept = settings.kept_round_options.get((model, None))
    configured = dict(kept) if kept is not None else settings.round_options(model)
    # Most bodies choose none of the fields: each is then the model's own, not
    # looked up in the body (checked as a choice is all the same).
    chosen = not OWN_FIELDS.isdisjoint(body)
    profile = (chosen and optional(body, "toolrelay_profile", str)) or configured["profile"]
    if profile is not None:
        try:
            get_profile(profile)
        except ValueError as exc:
            raise invalid(str(exc), "toolrelay_profile") from None
    stuck_mode: Mode | None = None
    requested_mode = (chosen and optional(body, "toolrelay_stuck_mode", str)) or stuck_header
    if requested_mode is not None:
        try:
            stuck_mode = parse_mode(requested_mode)
        except ValueError as exc:
            raise invalid(str(exc), "toolrelay_stuck_mode") from None
    validate = (chosen and optional(body, "toolrelay_validate", str)) or configured["validate"]
    if validate not in _VALIDATE_MODES:
        raise invalid(
            f"'toolrelay_validate' must be one of {', '.join(_VALIDATE_MODES)}.",
            "toolrelay_validate",
        )
    constrain = (chosen and optional(body, "toolrelay_constrain", str)) or configured["constrain"]
    if constrain not in _CONSTRAIN_MODES:
        raise invalid(
            f"'toolrelay_constrain' must be one of {', '.join(_CONSTRAIN_MODES)}.",
            "toolrelay_constrain",
        )
    if chosen:  # else they are the configured ones already
        configured.update(profile=profile, validate=validate, constrain=constrain)
    return OwnOptions(stuck_mode, configured)


def make_round(
    backend_body: dict[str, Any],
    settings: Settings,
    options: OwnOptions,
    auth: str | None,
    declared: DeclaredTools | None = None,
) -> RoundRequest:
    """The round for a Chat Completions body (checked, ``model`` set, toolrelay's
    own fields removed), with the model's configured options; ``declared``: its
    ``tools`` as the front already read them."""
    try:
        return build_round(
            settings, backend_body, auth=auth, declared=declared, configured=options.round_options
        )
    except RequestError as exc:
        raise invalid(str(exc), exc.param) from None


def optional(body: dict[str, Any], key: str, kind: type, prefix: str = "") -> Any:
    """``body[key]`` when it is of ``kind`` (``prefix`` + ``key`` names it), None when
    absent or null; else a 400 naming it."""
    value = body.get(key)
    if value is None:
        return None
    # bool is an int in Python; JSON keeps them apart.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        wrong(prefix + key, _KIND_NAMES[kind])
    return value


_KIND_NAMES: Final[dict[type, str]] = {
    bool: "a boolean",
    dict: "an object",
    int: "an integer",
    str: "a string",
}


def wrong(param: str, expected: str) -> NoReturn:
    """A 400 saying what ``param`` must be."""
    raise invalid(f"'{param}' must be {expected}.", param)
