"""What each coding agent needs to talk to a toolrelay gateway, in its own config format.

Every client gets two things from here: the settings ``toolrelay launch`` writes
into a throw-away config home before starting it, and the text ``toolrelay
launch --print`` shows for users who run the gateway themselves. The keys come
from each client's own sources and packages (docs/clients.md says which
version); besides the gateway and the model they switch off the client's
telemetry, update checks and other calls home, which a local model does not
need and an offline machine cannot make.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# The key the clients send: they insist on one, the gateway asks for none unless
# TOOLRELAY_API_KEYS is set, and a backend without keys ignores it.
CLIENT_KEY = "toolrelay"
# The name the gateway has in the clients that keep a list of providers.
PROVIDER = "toolrelay"


@dataclass(frozen=True)
class Target:
    """Where the client should send its requests: the gateway's root URL and a model."""

    gateway: str
    model: str

    @property
    def openai_url(self) -> str:
        return self.gateway.rstrip("/") + "/v1"


@dataclass(frozen=True)
class Setup:
    """A client ready to start: its environment and the files of its config home."""

    env: dict[str, str]
    files: dict[str, str] = field(default_factory=dict)  # path in the home -> content
    # Variables of the user's environment that would send the client elsewhere
    # or hand a real account's credentials to the gateway.
    unset: tuple[str, ...] = ()


@dataclass(frozen=True)
class Client:
    name: str
    program: str
    install: str  # how a user gets ``program``
    printed_as: str  # what ``--print`` writes, for the help and the docs
    setup: Callable[[Target, Path], Setup]
    printed: Callable[[Target], str]


# --- Claude Code: environment variables, plus onboarding state in its config home.

_CLAUDE_QUIET = {
    # One switch for the update checks, telemetry, error reports and the
    # connectivity probes; the others say the same thing to older releases.
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
}


def _claude_env(target: Target) -> dict[str, str]:
    model = target.model
    return {
        "ANTHROPIC_BASE_URL": target.gateway.rstrip("/"),
        # A bearer token: unlike ANTHROPIC_API_KEY it needs no approval in the terminal.
        "ANTHROPIC_AUTH_TOKEN": CLIENT_KEY,
        # The main model, and the ones Claude Code picks by itself for side tasks
        # (titles, summaries, sub-agents): all the same backend model.
        "ANTHROPIC_MODEL": model,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        "ANTHROPIC_SMALL_FAST_MODEL": model,
        "CLAUDE_CODE_SUBAGENT_MODEL": model,
        **_CLAUDE_QUIET,
    }


def _claude_setup(target: Target, home: Path) -> Setup:
    # The first run's theme and login screens are skipped: the gateway is the login.
    state = {"hasCompletedOnboarding": True, "theme": "dark", "autoUpdates": False}
    return Setup(
        env={**_claude_env(target), "CLAUDE_CONFIG_DIR": str(home)},
        files={".claude.json": json.dumps(state, indent=2) + "\n"},
        unset=(
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
            "CLAUDE_CODE_USE_FOUNDRY",
        ),
    )


def _claude_printed(target: Target) -> str:
    return shell_exports(_claude_env(target))


# --- Codex CLI: config.toml in CODEX_HOME with a model provider of its own.


def _codex_config(target: Target) -> str:
    return toml_document(
        {
            "model": target.model,
            "model_provider": PROVIDER,
            "check_for_update_on_startup": False,
            "model_providers": {
                PROVIDER: {
                    "name": "toolrelay",
                    "base_url": target.openai_url,
                    "wire_api": "responses",
                    "env_key": "TOOLRELAY_CLIENT_KEY",
                },
            },
            "analytics": {"enabled": False},
            "feedback": {"enabled": False},
        }
    )


def _codex_setup(target: Target, home: Path) -> Setup:
    return Setup(
        env={"CODEX_HOME": str(home), "TOOLRELAY_CLIENT_KEY": CLIENT_KEY},
        files={"config.toml": _codex_config(target)},
    )


# --- opencode: a provider entry for @ai-sdk/openai-compatible in opencode.json.

_OPENCODE_QUIET = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    # The model catalogue from models.dev and the default auth plugins from npm.
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
}


def _opencode_config(target: Target) -> str:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "toolrelay",
                "options": {"baseURL": target.openai_url, "apiKey": CLIENT_KEY},
                "models": {target.model: {"name": target.model, "tool_call": True}},
            }
        },
        "model": f"{PROVIDER}/{target.model}",
        "small_model": f"{PROVIDER}/{target.model}",
        "autoupdate": False,
        "share": "disabled",
    }
    return json.dumps(config, indent=2) + "\n"


def _opencode_setup(target: Target, home: Path) -> Setup:
    return Setup(
        env={"OPENCODE_CONFIG": str(home / "opencode.json"), **_OPENCODE_QUIET},
        files={"opencode.json": _opencode_config(target)},
    )


# --- llm: an extra OpenAI-compatible model in LLM_USER_PATH, made the default.


def _llm_model_id(target: Target) -> str:
    return f"{PROVIDER}/{target.model}"


def _llm_models(target: Target) -> str:
    entry = {
        "model_id": _llm_model_id(target),
        "model_name": target.model,
        # With an api_base of its own the model needs no key from llm's keys.json.
        "api_base": target.openai_url,
        "supports_tools": True,
    }
    # JSON is YAML: one list with one mapping.
    return json.dumps([entry], indent=2) + "\n"


def _llm_setup(target: Target, home: Path) -> Setup:
    return Setup(
        env={"LLM_USER_PATH": str(home)},
        files={
            "extra-openai-models.yaml": _llm_models(target),
            "default_model.txt": _llm_model_id(target) + "\n",
        },
    )


CLIENTS: dict[str, Client] = {
    client.name: client
    for client in (
        Client(
            "claude",
            "claude",
            "npm install -g @anthropic-ai/claude-code",
            "shell lines: export ANTHROPIC_BASE_URL=… and the rest",
            _claude_setup,
            _claude_printed,
        ),
        Client(
            "codex",
            "codex",
            "npm install -g @openai/codex",
            "a config.toml for CODEX_HOME",
            _codex_setup,
            _codex_config,
        ),
        Client(
            "opencode",
            "opencode",
            "npm install -g opencode-ai",
            "an opencode.json (OPENCODE_CONFIG)",
            _opencode_setup,
            _opencode_config,
        ),
        Client(
            "llm",
            "llm",
            "pip install llm",
            "an extra-openai-models.yaml for LLM_USER_PATH",
            _llm_setup,
            _llm_models,
        ),
    )
}


# --- Writers for the formats above.

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def shell_exports(env: Mapping[str, str]) -> str:
    """``export NAME=value`` lines a POSIX shell can ``eval``."""
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())


def toml_document(table: Mapping[str, object]) -> str:
    """A TOML document of strings, booleans, integers and nested tables."""
    lines: list[str] = []
    _toml_table(lines, (), table)
    return "\n".join(lines).lstrip("\n") + "\n"


def _toml_table(lines: list[str], path: tuple[str, ...], table: Mapping[str, object]) -> None:
    values = [(key, value) for key, value in table.items() if not isinstance(value, Mapping)]
    tables = [(key, value) for key, value in table.items() if isinstance(value, Mapping)]
    if path and (values or not tables):  # an empty table is written too
        lines.extend(["", "[" + ".".join(toml_key(part) for part in path) + "]"])
    lines.extend(f"{toml_key(key)} = {toml_value(value)}" for key, value in values)
    for key, value in tables:
        assert isinstance(value, Mapping)
        _toml_table(lines, (*path, key), value)


def toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else toml_value(key)


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # A basic string: quotes, backslashes and control characters escaped,
        # the rest (non-ASCII included) as it is.
        escaped = "".join(
            f"\\u{ord(char):04x}"
            if ord(char) < 0x20 or ord(char) == 0x7F
            else "\\" + char
            if char in '"\\'
            else char
            for char in value
        )
        return f'"{escaped}"'
    raise TypeError(f"no TOML form for {type(value).__name__}")
