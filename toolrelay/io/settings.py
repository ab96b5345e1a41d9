"""Settings of the gateway and of toolrelay's own rounds.

Precedence, highest first: explicit values (command-line flags), environment
variables ``TOOLRELAY_*``, the config file (YAML or JSON, given by ``--config``
or ``TOOLRELAY_CONFIG``), defaults. The config file may hold several backends
and per-model overrides; the flat ``backend``/``backend_kind``/``tool_mode``
settings describe the default (first) backend.
"""

from __future__ import annotations

import dataclasses
import json
import os
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from toolrelay.formats import format_names
from toolrelay.io.models import ModelNames, parse_alias
from toolrelay.io.urls import redact_url
from toolrelay.profiles import get_profile

BackendKind = Literal["auto", "openai", "vllm", "sglang", "ollama", "lmstudio", "llamacpp"]
ToolMode = Literal["auto", "native", "rescue"]
StuckMode = Literal["enforce", "observe", "off"]
# What the gateway does with a tool call that does not fit its tool's schema:
# ask the model once to correct it, pass it on with a warning, or nothing.
ValidateMode = Literal["repair", "warn", "off"]
# Constrained decoding: auto (what the backend kind takes and has not refused),
# off, or one constraint kind only (toolrelay.constrain.ConstraintKind).
ConstrainMode = Literal["auto", "off", "json_schema", "grammar", "structural_tag"]


def _yaml_off(value: Any) -> Any:
    # YAML 1.1 (PyYAML) reads a bare `off` as false.
    return "off" if value is False else value


ConstrainSetting = Annotated[ConstrainMode, BeforeValidator(_yaml_off)]
# What the Messages and Responses fronts do with a tool only the vendor's own
# servers run (web search, code interpreter, hosted MCP, ...): leave it out of
# what the model sees, with a warning, or refuse the request.
BuiltinTools = Literal["drop", "error"]

DEFAULT_BACKEND_URL = "http://127.0.0.1:8000/v1"
_MAX_CACHED_MODELS = 1024


def _seed_env(name: str) -> Any:
    """Seed 002's environment name for a setting (``LLM_TOOLS_FILE``), and ours
    (``TOOLRELAY_TOOLS_FILE``); the config file and the flags use the field name."""
    return AliasChoices(f"LLM_{name.upper()}", f"TOOLRELAY_{name.upper()}")


def _known_format(name: str) -> str:
    known = ["auto", *format_names()]
    if name not in known:
        raise ValueError(f"unknown format {name!r}; known formats: {', '.join(known)}")
    return name


FormatName = Annotated[str, AfterValidator(_known_format)]


def _key_list(value: Any) -> Any:
    """Keys as a list: the environment gives them comma-separated."""
    if isinstance(value, str):
        return [key.strip() for key in value.split(",") if key.strip()]
    return value


ApiKeys = Annotated[list[str], NoDecode, BeforeValidator(_key_list)]


def _url_list(value: Any) -> Any:
    """URLs as a list: the environment gives them comma-separated or as a JSON list."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        return json.loads(value)
    return _key_list(value)


def _alias_list(value: Any) -> Any:
    """Aliases as a list, each checked: the environment gives them comma-separated."""
    value = _key_list(value)
    if isinstance(value, list):
        for alias in value:
            if isinstance(alias, str):
                parse_alias(alias)
    return value


Aliases = Annotated[list[str], NoDecode, BeforeValidator(_alias_list)]


def _aliases_from_models(data: Any) -> Any:
    """A ``models:`` entry whose value is a name (``claude-*: qwen3-coder``) is an
    alias; it comes after the ``--model-alias`` ones, which win."""
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        return data
    models = dict(data["models"])
    names = {client: model for client, model in models.items() if isinstance(model, str)}
    if not names:
        return data
    given = _key_list(data.get("model_alias") or [])
    return {
        **data,
        "models": {k: v for k, v in models.items() if k not in names},
        "model_alias": [*given, *(f"{client}={model}" for client, model in names.items())],
    }


def _known_profile(name: str) -> str:
    get_profile(name)  # a ValueError naming the valid ones
    return name


ProfileName = Annotated[str, AfterValidator(_known_profile)]


def _force_manual_tools(data: Any) -> Any:
    """Seed 000's ``force_manual_tools: true`` is ``tool_mode: rescue`` (tools in
    the prompt, calls parsed from the text); ``false`` changes nothing."""
    if not isinstance(data, dict) or "force_manual_tools" not in data:
        return data
    data = dict(data)
    forced = data.pop("force_manual_tools")
    if not isinstance(forced, bool):
        raise ValueError("force_manual_tools must be true or false")
    if forced:
        if data.get("tool_mode") not in (None, "rescue"):
            raise ValueError(f"force_manual_tools: true contradicts tool_mode: {data['tool_mode']}")
        data["tool_mode"] = "rescue"
    return data


class ModelOverride(BaseModel):
    """Per-model settings; unset fields fall back to the backend's or the global ones."""

    model_config = ConfigDict(extra="forbid")
    _manual = model_validator(mode="before")(_force_manual_tools)

    backend: str | None = None
    # Several backends serving the model, balanced (docs/backends.md); beside ``backend``.
    backends: list[str] = Field(default_factory=list)
    tool_mode: ToolMode | None = None
    format: FormatName | None = None
    omit_tool_choice: bool | None = None
    profile: ProfileName | None = None
    stuck: StuckMode | None = None
    stuck_polling_exempt: bool | None = None
    finish_reason_named: Literal["stop", "tool_calls"] | None = None
    validation: ValidateMode | None = None
    constrain: ConstrainSetting | None = None
    # False: rounds with tools are asked without streaming (the client still gets
    # a stream), for a server whose streamed tool parsing loses or cuts calls.
    stream_tools: bool | None = None
    # True: the chat template opens the reasoning, so answers start inside it (text
    # before the closing tag is reasoning); None: read from the template, or learned.
    reasoning_open: bool | None = None
    builtin_tools: BuiltinTools | None = None


class BackendConfig(BaseModel):
    """One model server, addressed like the openai SDK's ``base_url``."""

    model_config = ConfigDict(extra="forbid")
    _manual = model_validator(mode="before")(_force_manual_tools)

    name: str = "default"
    url: str = DEFAULT_BACKEND_URL
    kind: BackendKind = "auto"
    api_key: str | None = None
    tool_mode: ToolMode = "auto"
    omit_tool_choice: bool = False
    # The text format and sampling profile of this backend's models, unless a
    # model's own entry names one.
    format: FormatName | None = None
    profile: ProfileName | None = None
    # Models served by this backend; a request naming one of them is routed here.
    # None listed: it serves every model no backend lists.
    models: list[str] = Field(default_factory=list)
    # Its share of the traffic among the backends of a model (docs/backends.md).
    weight: float = Field(default=1.0, gt=0)


class _ConfigFileSource(PydanticBaseSettingsSource):
    """Values from the config file, below the environment in precedence."""

    def __init__(self, settings_cls: type[BaseSettings], path: str | None) -> None:
        super().__init__(settings_cls)
        self._data = load_config_file(path) if path else {}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


def load_config_file(path: str) -> dict[str, Any]:
    """Read a YAML or JSON config file into a mapping (JSON is valid YAML, but
    a ``.json`` file gets the stricter parser and its clearer errors)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        # A ValueError, like every other bad setting: the CLI reports it without a traceback.
        raise ValueError(f"config file {path} does not parse: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"config file {path}: the top level must be a mapping")
    return data


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="TOOLRELAY_", extra="forbid", env_nested_delimiter="__", populate_by_name=True
    )

    backend: str = Field(default=DEFAULT_BACKEND_URL, description="the default backend's base URL")
    backend_kind: BackendKind = Field(
        default="auto",
        description="the default backend's kind; auto detects Ollama, llama.cpp, LM Studio",
    )
    api_key: str | None = Field(
        default=None,
        description="bearer token for the default backend (else the client's is passed on)",
    )
    api_keys: ApiKeys = Field(
        default_factory=list,
        description="the gateway's own keys, comma-separated: clients must send one "
        "(Authorization: Bearer KEY or x-api-key); none: no key asked",
    )
    tool_mode: ToolMode = Field(
        default="auto", description="native or rescue tool calling, or auto"
    )
    omit_tool_choice: bool = Field(
        default=False, description="never send tool_choice to the backend"
    )
    model: str | None = Field(
        default=None,
        description="the catch-all: requests for a model no alias matches and no backend "
        "lists go to this model",
    )
    model_alias: Aliases = Field(
        default_factory=list,
        description="CLIENT=BACKEND model aliases, comma-separated; CLIENT may be a glob "
        "(claude-*=qwen3-coder)",
    )
    workers: int = Field(
        default=1, ge=1, description="gateway processes sharing the port (toolrelay serve)"
    )
    host: str = Field(default="127.0.0.1", description="address to listen on")
    # Checked here: the socket layer would silently bind 70000 as 4464.
    port: int = Field(default=8787, ge=0, le=65535, description="port to listen on")
    config: str | None = Field(default=None, description="a YAML or JSON config file")
    format: FormatName = Field(
        default="auto", description="the tool-call text format to parse (auto tries all)"
    )
    profile: ProfileName | None = Field(default=None, description="default sampling profile")
    finish_reason_named: Literal["stop", "tool_calls"] = Field(
        default="tool_calls",
        description="finish_reason for a named tool_choice (stop copies OpenAI)",
    )
    stuck_mode: StuckMode = Field(default="enforce", description="loop protection")
    stuck_polling_exempt: bool = Field(
        default=True, description="polling tools get the stuck detector's polling budget"
    )
    validation: ValidateMode = Field(
        default="repair",
        description="tool calls that do not fit their schema: repair (re-ask once), warn, off",
    )
    constrain: ConstrainSetting = Field(
        default="auto",
        description="constrained decoding of tool calls: auto (what the backend takes), "
        "off, or only json_schema, grammar or structural_tag",
    )
    builtin_tools: BuiltinTools = Field(
        default="drop",
        description="tools only OpenAI's or Anthropic's servers run (web_search, ...): "
        "drop (left out, with a warning) or error (a 400)",
    )
    capability_ttl: float = Field(
        default=600.0, description="seconds a probed or learned fact about a model is trusted"
    )
    learn_facts: bool = Field(
        default=True,
        description="keep what answers show about a model (a refusal of tools, lost "
        "streamed calls, text calls); false: each lesson serves its own request only",
    )
    fact_recheck_requests: int = Field(
        default=50,
        ge=1,
        description="a model whose streams are held (they lost a call) streams again "
        "after this many requests, to re-check",
    )
    fact_recheck_seconds: float = Field(
        default=300.0,
        gt=0,
        description="... or after this many seconds, whichever comes first",
    )
    timeout: float = Field(
        default=600.0, description="seconds to wait for the backend's answer or next streamed chunk"
    )
    connect_timeout: float = Field(default=10.0, description="seconds to connect to the backend")
    total_timeout: float = Field(
        default=600.0,
        gt=0,
        description="seconds one backend request may take in all, streamed or not (then 504)",
    )
    max_response_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="a backend answer (or stream) larger than this is a 502",
    )
    max_line_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1024,
        description="a streamed line from a backend longer than this is a 502",
    )
    follow_redirects: bool = Field(
        default=False,
        description="follow a backend's redirects (off: a redirect is a 502 naming it)",
    )
    pool_size: int = Field(default=1024, ge=1, description="concurrent requests to each backend")
    pool_queue: int = Field(
        default=1024,
        ge=0,
        description="requests that may wait for a backend slot; more get a 503 with Retry-After",
    )
    pool_timeout: float = Field(
        default=30.0,
        gt=0,
        description="seconds a request may wait for a backend slot (then 503 with Retry-After)",
    )
    keepalive_interval: float = Field(
        default=10.0, description="seconds of backend silence before an SSE keep-alive comment"
    )
    max_body_bytes: int = Field(
        default=32 * 1024 * 1024, description="larger request bodies get a 413"
    )
    responses_store: int = Field(
        default=1000,
        ge=0,
        description="responses kept in memory for /v1/responses' previous_response_id (0: none)",
    )
    responses_ttl: float = Field(
        default=86400.0,
        gt=0,
        description="seconds a stored response is kept in Redis (with TOOLRELAY_REDIS_URL)",
    )
    redis_url: str | None = Field(
        default=None,
        description="share learned facts and the /api/tools override between replicas "
        "through this Redis, e.g. redis://127.0.0.1:6379/0 (none: each process keeps its own)",
    )
    redis_resync: float = Field(
        default=10.0,
        gt=0,
        description="seconds between full reads of the shared state from Redis "
        "(changes arrive at once by pub/sub; this repairs a missed message)",
    )
    # Declarative HTTP tools (seed 002, docs/agent.md).
    tools_enabled: bool | None = Field(
        default=None,
        validation_alias=_seed_env("tools_enabled"),
        description="run HTTP tools (unset: when a tools file is given)",
    )
    tools_file: str = Field(
        default="",
        validation_alias=_seed_env("tools_file"),
        description="JSON array of HTTP tool definitions, read once at startup",
    )
    tool_max_iterations: int = Field(
        default=4,
        ge=0,
        validation_alias=_seed_env("tool_max_iterations"),
        description="tool rounds per turn, then one round without tools",
    )
    tool_timeout_secs: float = Field(
        default=15.0,
        gt=0,
        validation_alias=_seed_env("tool_timeout_secs"),
        description="timeout of one tool HTTP request",
    )
    tool_follow_redirects: bool = Field(
        default=False,
        description="follow an HTTP tool's redirects within its URL's origin (scheme, host, "
        "port; never elsewhere); off: a redirect is an error result",
    )
    tool_result_max_chars: int = Field(
        default=2000,
        ge=1,
        validation_alias=_seed_env("tool_result_max_chars"),
        description="tool results are cut to this many characters",
    )
    # MCP servers whose tools the agent runs beside the HTTP tools (docs/mcp.md).
    mcp_config: str | None = Field(
        default=None,
        description='a JSON file of MCP servers, {"mcpServers": {...}} as Claude Desktop, '
        "Claude Code and Cursor write it",
    )
    mcp_servers: dict[str, Any] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("mcpServers", "TOOLRELAY_MCP_SERVERS"),
        description="MCP servers given here (mcpServers: in the config file, or JSON), "
        "beside those of mcp_config",
    )
    mcp_optional: bool = Field(
        default=False,
        description="an MCP server that fails to start is a warning and its tools are absent "
        "(else it stops the start)",
    )
    mcp_tool_names: Literal["auto", "prefixed"] = Field(
        default="auto",
        description="MCP tools keep their names unless taken, then SERVER__tool (auto), "
        "or are always SERVER__tool (prefixed)",
    )
    mcp_startup_timeout: float = Field(
        default=30.0, gt=0, description="seconds an MCP server may take to start and answer"
    )
    admin_token: str | None = Field(
        default=None,
        description="bearer token GET and POST /api/tools and DELETE /api/facts require, when set",
    )
    tools_api_open: bool = Field(
        default=False,
        description="allow POST /api/tools without an admin token on a bind beyond loopback "
        "(else toolrelay serve refuses to start that way)",
    )
    inspector: bool = Field(
        default=False,
        description="serve the request inspector at /ui (its API at /ui/api/...), guarded "
        "by the admin token or the API keys",
    )
    inspector_requests: int = Field(
        default=200, ge=1, description="requests the inspector keeps in memory (oldest dropped)"
    )
    inspector_entry_bytes: int = Field(
        default=262144,
        ge=1024,
        description="bytes of bodies, chunks and text the inspector keeps per request",
    )
    otel: bool = Field(
        default=False,
        description="export OpenTelemetry traces (the toolrelay[otel] extra; also on when "
        "OTEL_EXPORTER_OTLP_ENDPOINT is set)",
    )
    session_max_turns: int = Field(
        default=20, ge=1, description="turns a /ws conversation keeps (oldest dropped first)"
    )
    backends: list[BackendConfig] = Field(
        default_factory=list, description="several backends (config file only)"
    )
    backend_replicas: Annotated[list[str], NoDecode, BeforeValidator(_url_list)] = Field(
        default_factory=list,
        description="more base URLs serving the same models as the default backend "
        "(serve --backend repeated; comma-separated), balanced with it",
    )
    sticky: Literal["off", "conversation", "header"] = Field(
        default="off",
        description="keep a conversation on one backend of its model (its prompt cache): "
        "by its first messages, or by the sticky_header",
    )
    sticky_header: str = Field(
        default="x-toolrelay-session", description="the header sticky=header reads"
    )
    health_interval: float = Field(
        default=5.0,
        ge=0,
        description="seconds between active health checks of models' backends when a model "
        "has several (0: passive checks only)",
    )
    backend_failures: int = Field(
        default=1, ge=1, description="failures in a row that take a backend out"
    )
    backend_backoff: float = Field(
        default=2.0, gt=0, description="seconds a failed backend stays out (doubled per failure)"
    )
    backend_backoff_max: float = Field(
        default=60.0, gt=0, description="the longest a failed backend stays out, in seconds"
    )
    quality_routing: bool = Field(
        default=False,
        description="give less traffic to a backend whose tool calls come out bad much more "
        "often than its peers' (docs/backends.md)",
    )
    models: dict[str, ModelOverride] = Field(
        default_factory=dict, description="per-model settings (config file only)"
    )
    _aliases_in_models = model_validator(mode="before")(_aliases_from_models)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        init_kwargs = getattr(init_settings, "init_kwargs", {})
        path = init_kwargs.get("config") or os.environ.get("TOOLRELAY_CONFIG")
        return (init_settings, env_settings, _ConfigFileSource(settings_cls, path))

    @model_validator(mode="after")
    def _model_backends_exist(self) -> Settings:
        # Routing falls back to the default backend, so a misspelt name would
        # silently send the model's requests to the wrong server.
        names = [b.name for b in self.backend_configs()]
        if len(set(names)) != len(names):
            raise ValueError(f"backends: two have the same name ({', '.join(names)})")
        for model, override in self.models.items():
            named = [override.backend] if override.backend is not None else []
            for name in [*named, *override.backends]:
                if name not in names:
                    field = "backend" if name in named else "backends"
                    raise ValueError(
                        f"models.{model}.{field}: no backend is named {name!r} "
                        f"(backends: {', '.join(names)})"
                    )
        return self

    @cached_property
    def _lookups(self) -> _Lookups:
        # A cached_property lives in the instance's __dict__: read as fast as a
        # field, where a pydantic private attribute costs a __getattr__ call (µs).
        return _Lookups()

    @cached_property
    def kept_round_options(self) -> dict[tuple[str, str | None], dict[str, Any]]:
        """What ``round_options`` worked out, by model and backend name (None: the
        model's own backend), for a reader that must not pay a Python frame a
        request: read ``(model, None)`` here before calling it, copy what is found
        (the kept dict is shared)."""
        return self._lookups.options

    @cached_property
    def model_names(self) -> ModelNames:
        """Client model names to backend ones: the aliases and the ``model`` catch-all."""
        return ModelNames(map(parse_alias, self.model_alias), self.model)

    @property
    def tools_active(self) -> bool:
        """Whether the tools file is read: ``LLM_TOOLS_ENABLED``, else a file is named."""
        if self.tools_enabled is not None:
            return self.tools_enabled
        return bool(self.tools_file.strip())

    def backend_configs(self) -> list[BackendConfig]:
        """The configured backends; the flat settings make the default one when the
        file lists none (or when ``--backend`` was given explicitly). An empty
        ``backend`` and no list: none at all (the LLM is disabled)."""
        if not self.backends and not self.backend.strip():
            return []
        flat = BackendConfig(
            name="default",
            url=self.backend,
            kind=self.backend_kind,
            api_key=self.api_key,
            tool_mode=self.tool_mode,
            omit_tool_choice=self.omit_tool_choice,
        )
        replicas = [
            flat.model_copy(update={"name": f"default-{n}", "url": url})
            for n, url in enumerate(self.backend_replicas, start=2)
        ]
        if not self.backends:
            return [flat, *replicas]
        if "backend" in self.model_fields_set:
            taken = {"default", *(b.name for b in replicas)}
            return [flat, *replicas, *(b for b in self.backends if b.name not in taken)]
        return list(self.backends)

    def backend_configs_for(self, model: str) -> list[BackendConfig]:
        """The backends that serve ``model``, balanced: those its entry names, else
        those listing it, else the first, with every other backend that lists no
        model when the first lists none either (``--backend`` repeated: all)."""
        configs = self.backend_configs()
        override = self.override_for(model)
        named = [override.backend] if override.backend is not None else []
        named += override.backends
        if named:
            return [c for c in configs if c.name in named]
        listing = [c for c in configs if model in c.models]
        if listing:
            return listing
        if configs and not configs[0].models:
            return [c for c in configs if not c.models]
        return configs[:1]

    def override_for(self, model: str) -> ModelOverride:
        return self.models.get(model) or _NO_OVERRIDE

    def backend_config_for(self, model: str) -> BackendConfig | None:
        """The first backend serving ``model`` (:meth:`backend_configs_for`); None
        when none is configured."""
        routes = self._lookups.routes
        if model not in routes:
            routes[model] = next(iter(self.backend_configs_for(model)), None)
        return routes[model]

    def round_options(self, model: str, backend: BackendConfig | None = None) -> dict[str, Any]:
        """The options of a ``RoundRequest`` for ``model``: its config entry's, else
        its backend's (``backend``, else its first), else the global settings (a
        request may still choose its own)."""
        options = self._lookups.options
        key = (model, backend.name if backend is not None else None)
        cached = options.get(key)
        if cached is None:
            if len(options) >= _MAX_CACHED_MODELS:
                options.clear()  # names a client made up: the cache stays small
            cached = options[key] = self._round_options(model, backend)
        return dict(cached)  # the caller adds the request's own choices to it

    def _round_options(self, model: str, backend: BackendConfig | None = None) -> dict[str, Any]:
        override = self.override_for(model)
        backend = backend or self.backend_config_for(model)
        return {
            "format": override.format or (backend and backend.format) or self.format,
            "tool_mode": override.tool_mode,
            "omit_tool_choice": override.omit_tool_choice,
            "profile": override.profile or (backend and backend.profile) or self.profile,
            "finish_reason_named": override.finish_reason_named or self.finish_reason_named,
            "validate": override.validation or self.validation,
            "constrain": override.constrain or self.constrain,
            "stream_tools": override.stream_tools is not False,
            "reasoning_open": override.reasoning_open,
        }

    def builtin_tools_for(self, model: str) -> BuiltinTools:
        """What to do with a vendor-hosted tool in a request for ``model``."""
        return self.override_for(model).builtin_tools or self.builtin_tools

    def public_dict(self) -> dict[str, Any]:
        """The settings in force, without secrets (for ``/health``)."""
        # MCP servers' env and headers hold secrets: /health shows the servers' states instead.
        hidden = {"api_key", "api_keys", "admin_token", "backends", "mcp_servers"}
        if self.backends and "backend" not in self.model_fields_set:
            # The config file's backends are in force: the flat default-backend
            # settings describe no backend and would only mislead.
            hidden |= {"backend", "backend_kind", "tool_mode", "omit_tool_choice"}
        data = self.model_dump(mode="json", exclude=hidden)
        data["api_keys"] = len(self.api_keys)  # how many, never which
        if "backend" in data:
            data["backend"] = redact_url(data["backend"])
        if self.redis_url:
            data["redis_url"] = redact_url(self.redis_url)
        data["backends"] = [
            {**b.model_dump(mode="json", exclude={"api_key"}), "url": redact_url(b.url)}
            for b in self.backend_configs()
        ]
        return data


_NO_OVERRIDE = ModelOverride()


@dataclasses.dataclass
class _Lookups:
    """What the settings work out once and every request reads: the settings never change."""

    # model -> its backend's config
    routes: dict[str, BackendConfig | None] = dataclasses.field(default_factory=dict)
    # round_options per model and backend
    options: dict[tuple[str, str | None], dict[str, Any]] = dataclasses.field(default_factory=dict)


def environment_help() -> str:
    """Every setting with its environment variable, default and meaning, for ``--help``."""
    rows = []
    for name, field in Settings.model_fields.items():
        if name in ("backends", "models"):
            continue
        default = field.get_default(call_default_factory=True)
        shown = (
            "none"
            if default is None
            else str(default).lower()
            if isinstance(default, bool)
            else str(default)
        )
        rows.append((f"TOOLRELAY_{name.upper()}", shown, field.description or ""))
    width = max(len(row[0]) for row in rows)
    return "\n".join(
        f"  {env:<{width}}  {meaning} (default: {default})" for env, default, meaning in rows
    )


def describe_error(error: ValidationError) -> str:
    """A pydantic error about settings as one line per setting, naming where it can
    be set and what it accepts, without pydantic's links."""
    lines = []
    for problem in error.errors(include_url=False):
        location = ".".join(str(part) for part in problem["loc"])
        top = str(problem["loc"][0]) if problem["loc"] else ""
        where = (
            f"{location} (TOOLRELAY_{top.upper()}, or {top} in the config file)"
            if top in Settings.model_fields and len(problem["loc"]) == 1
            else f"{location} (config file)"
            if location
            else "settings"
        )
        message = str(problem["msg"]).removeprefix("Value error, ")
        given = problem.get("input")
        shown = f"; got {given!r}" if top and not isinstance(given, dict | list) else ""
        lines.append(f"{where}: {message}{shown}")
    return "\n".join(lines)
