"""``toolrelay launch``: the settings it prints parse in each client's format, and the
launcher runs a program with them, in front of a real gateway and simulator.

The real clients run in tests/clients; here a small stand-in program on PATH
(named like the client) reports what it was given, so that the launcher's own
duties are checked quickly: the settings in the config home and the
environment, the gateway answering while the client runs, the client's exit
status passed on, the home deleted afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from toolrelay.cli.launch.clients import CLIENTS, toml_document
from toolrelay.simulator import Simulator, SimulatorConfig

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

GATEWAY = "http://127.0.0.1:9999"


def _print(client: str, *extra: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "toolrelay", "launch", "--print", client, "--gateway", GATEWAY,
         "--model", "qwen3-coder", *extra],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout


def test_print_codex_is_a_config_toml_with_a_responses_provider() -> None:
    config = tomllib.loads(_print("codex"))
    assert config["model"] == "qwen3-coder"
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == GATEWAY + "/v1"
    assert provider["wire_api"] == "responses"
    assert config["check_for_update_on_startup"] is False
    assert config["analytics"] == {"enabled": False}


def test_print_opencode_is_an_opencode_json_provider_entry() -> None:
    config = json.loads(_print("opencode"))
    provider_name, model = config["model"].split("/", 1)
    provider = config["provider"][provider_name]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"]["baseURL"] == GATEWAY + "/v1"
    assert model in provider["models"] and model == "qwen3-coder"
    assert config["autoupdate"] is False


def test_print_claude_is_shell_lines_a_shell_can_eval() -> None:
    text = _print("claude")
    shell = subprocess.run(
        ["bash", "-c", 'eval "$1" && env -0', "-", text],
        capture_output=True, text=True, timeout=30, check=True, env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    env = dict(line.split("=", 1) for line in shell.stdout.split("\0") if "=" in line)
    assert env["ANTHROPIC_BASE_URL"] == GATEWAY
    assert env["ANTHROPIC_MODEL"] == env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == "qwen3-coder"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["ANTHROPIC_AUTH_TOKEN"]


def test_print_llm_is_an_extra_openai_models_yaml() -> None:
    (entry,) = yaml.safe_load(_print("llm"))
    assert entry["model_name"] == "qwen3-coder"
    assert entry["api_base"] == GATEWAY + "/v1"
    assert entry["supports_tools"] is True


def test_print_without_a_model_asks_the_gateway_and_says_so_when_it_cannot() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolrelay", "launch", "--print", "codex", "--gateway",
         "http://127.0.0.1:9"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "cannot list the models at http://127.0.0.1:9/v1/models" in done.stderr
    assert "give --model NAME" in done.stderr


def test_a_model_name_with_quotes_and_odd_characters_survives_every_format() -> None:
    odd = 'we"ird \\ name\tü$(x)'
    assert tomllib.loads(_print("codex", "--model", odd))["model"] == odd
    assert json.loads(_print("opencode", "--model", odd))["model"].endswith(odd)
    text = _print("claude", "--model", odd)
    shell = subprocess.run(
        ["bash", "-c", 'eval "$1" && printf %s "$ANTHROPIC_MODEL"', "-", text],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert shell.stdout == odd


@given(
    st.dictionaries(
        st.text(min_size=1),
        st.one_of(st.text(), st.booleans(), st.integers(-(2**63), 2**63 - 1)),
        max_size=5,
    ),
    st.text(min_size=1),
)
def test_toml_writer_round_trips_through_tomllib(values: dict[str, object], table: str) -> None:
    document = {**values, "nested": {table: dict(values)}}
    assert tomllib.loads(toml_document(document)) == document


# --- the launcher itself, with a stand-in client


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    """A program called ``codex`` that reports its arguments, its config home and an
    answer of the gateway, then exits with status 3."""
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "codex"
    program.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys, tomllib, urllib.request\n"
        "home = os.environ['CODEX_HOME']\n"
        "config = tomllib.load(open(os.path.join(home, 'config.toml'), 'rb'))\n"
        "url = config['model_providers'][config['model_provider']]['base_url']\n"
        "models = json.load(urllib.request.urlopen(url + '/models'))\n"
        "print(json.dumps({'argv': sys.argv[1:], 'home': home, 'config': config,\n"
        "                  'models': [m['id'] for m in models['data']],\n"
        "                  'key': os.environ.get('TOOLRELAY_CLIENT_KEY')}))\n"
        "sys.exit(3)\n"
    )
    program.chmod(0o755)
    return folder


def test_launch_runs_the_client_with_its_settings_and_passes_on_its_status(
    stand_in: Path, tmp_path: Path
) -> None:
    scenario = {"models": ["sim-coder"], "rules": [{"answer": {"content": "hi"}}]}
    config = SimulatorConfig.load(scenario)
    with Simulator(config) as sim:
        done = subprocess.run(
            [sys.executable, "-m", "toolrelay", "launch", "codex", "--backend", sim.openai_url,
             "--", "exec", "--flag", "--", "two words"],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PATH": f"{stand_in}{os.pathsep}{os.environ['PATH']}",
                 "XDG_CACHE_HOME": str(tmp_path / "cache")},
        )  # fmt: skip
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    assert report["argv"] == ["exec", "--flag", "--", "two words"]
    assert report["config"]["model"] == "sim-coder"  # the backend's first model
    assert report["models"] == ["sim-coder"]  # the gateway answered while it ran
    assert report["key"]
    assert not Path(report["home"]).exists()  # the config home is gone
    assert "starting codex" in done.stderr


def test_launch_says_how_to_install_a_missing_client(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolrelay", "launch", "opencode", "--backend",
         "http://127.0.0.1:9/v1"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PATH": str(Path(sys.executable).parent)},
    )  # fmt: skip
    assert done.returncode == 127
    assert "npm install -g opencode-ai" in done.stderr


def test_every_client_has_a_print_form() -> None:
    assert sorted(CLIENTS) == ["claude", "codex", "llm", "opencode"]
