"""llm, smolagents and mini-swe-agent, as PyPI installs them, each in a venv of its own.

llm goes through ``toolrelay launch llm`` with a Python function of its own
(``--functions``); smolagents (a ``ToolCallingAgent`` with a file-reading
``@tool``) and mini-swe-agent (its ``bash`` tool, ``mini -y``) go through
``toolrelay serve``. The model calls the tool, the client runs it, and the
file's marker has to come back out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.support import (
    MODES,
    assert_read,
    gateway,
    installed,
    launch,
    make_task,
    run,
    scenario,
    simulator,
)

pytestmark = pytest.mark.timeout(1200)

_READ_FILE = """def read_file(path: str) -> str:
    "Read a text file and return what it holds."
    with open(path) as handle:
        return handle.read()
"""

_SMOLAGENTS = '''
import sys
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

@tool
def read_file(path: str) -> str:
    """Read a text file and return what it holds.

    Args:
        path: the file's path
    """
    with open(path) as handle:
        return handle.read()

model = OpenAIServerModel(model_id="sim-coder", api_base=sys.argv[1], api_key="toolrelay")
agent = ToolCallingAgent(tools=[read_file], model=model, max_steps=4, verbosity_level=0)
print("ANSWER:", agent.run(sys.argv[2]))
'''


@pytest.mark.parametrize("mode", MODES)
def test_llm_runs_its_function_through_launch(mode: str, tmp_path: Path) -> None:
    bin_dir = installed("llm")
    task = make_task(tmp_path)
    rules = scenario("read_file", {"path": "{path}"})
    with simulator(tmp_path, rules) as model_server:
        result = launch(
            "llm",
            model_server + "/v1",
            mode,
            ["--functions", _READ_FILE, task.question],
            folder=tmp_path,
            bin_dir=bin_dir,
        )
    assert_read(result, task, tmp_path)


@pytest.mark.parametrize("mode", MODES)
def test_smolagents_tool_calling_agent_runs_its_tool(mode: str, tmp_path: Path) -> None:
    bin_dir = installed("smolagents")
    task = make_task(tmp_path)
    # smolagents sends a tool's result back as a user message "Observation:\n…",
    # and ends with its own final_answer tool.
    rules = scenario(
        "read_file",
        {"path": "{path}"},
        result={"last_user": r"Observation:\s*(?P<observed>\S+)"},
        final=("final_answer", {"answer": "The file says: {observed}"}),
    )
    script = tmp_path / "agent.py"
    script.write_text(_SMOLAGENTS)
    with simulator(tmp_path, rules) as model_server, gateway(tmp_path, model_server, mode) as url:
        result = run(
            [str(bin_dir / "python"), str(script), url + "/v1", task.question], tmp_path, bin_dir
        )
    assert_read(result, task, tmp_path)


@pytest.mark.parametrize("mode", MODES)
def test_mini_swe_agent_runs_its_bash_tool(mode: str, tmp_path: Path) -> None:
    bin_dir = installed("mini-swe-agent")
    task = make_task(tmp_path)
    rules = scenario(
        "bash",
        {"command": "cat {path}"},
        final=("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}),
    )
    with simulator(tmp_path, rules) as model_server, gateway(tmp_path, model_server, mode) as url:
        command = [
            str(bin_dir / "mini"), "-y", "--exit-immediately", "-m", "openai/sim-coder",
            "-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={url}/v1",
            "-c", "model.model_kwargs.api_key=toolrelay",
            "-t", task.question, "-o", str(tmp_path / "trajectory.json"),
        ]  # fmt: skip
        result = run(
            command,
            tmp_path,
            bin_dir,
            cwd=tmp_path / "work",
            # Offline: the cost table in the package, not GitHub's; no first-run setup.
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            MSWEA_CONFIGURED="true",
            MSWEA_COST_TRACKING="ignore_errors",
            MSWEA_SILENT_STARTUP="1",
        )
    assert_read(result, task, tmp_path)
