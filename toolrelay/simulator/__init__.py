"""The model-server simulator: a test double for a model, served over real HTTP.

No model runs behind it. It speaks OpenAI Chat Completions (``/v1``), Ollama
(``/api/chat``, ``/api/show``, ``/api/tags``), llama.cpp's ``/props`` and
LM Studio's ``/api/v1/models``, answers from a scenario (ordered rules, see
docs/simulator.md) and reproduces real servers' tool-calling failures behind
switches. Every answer's ``model`` starts with ``sim/``.

Starting one in a test (a free port on 127.0.0.1, a background thread)::

    from toolrelay.simulator import Simulator, SimulatorConfig

    config = SimulatorConfig.load(
        {"rules": [{"answer": {"tool_calls": [{"name": "f", "arguments": {"x": 1}}]}}]},
        swallow_streamed_calls=True,
    )
    with Simulator(config) as sim:          # or: async with Simulator(config) as sim
        client = openai.OpenAI(base_url=sim.openai_url, api_key="none")
        ...
        assert sim.requests[-1].body["tools"]   # what the "model" received

``SimulatorConfig()`` alone is the built-in weather demo with no failure
switch on; ``SimulatorConfig.load(path_or_dict, **switches)`` reads a
scenario (YAML, JSON or a dict), applies its ``settings`` and then the
keyword switches. ``Simulator(config, host=..., port=...)`` also has
``start() -> url`` and ``stop()`` for fixtures.
"""

from toolrelay.simulator.config import SimulatorConfig
from toolrelay.simulator.runner import Simulator, serve_forever
from toolrelay.simulator.scenario import Scenario, ScenarioError, default_scenario, load_scenario
from toolrelay.simulator.state import RecordedRequest

__all__ = [
    "RecordedRequest",
    "Scenario",
    "ScenarioError",
    "Simulator",
    "SimulatorConfig",
    "default_scenario",
    "load_scenario",
    "serve_forever",
]
