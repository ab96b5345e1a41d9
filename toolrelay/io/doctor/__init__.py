"""``toolrelay doctor``: why tool calling fails on a model server, and what to set.

:func:`examine` reads the backend's own description of itself, sends a short
fixed set of probe requests (:mod:`.probes`), and judges what came back
(:mod:`.diagnose`): the checks, the settings toolrelay will use for the model
and the server flags that fix what it recognised.
"""

from toolrelay.io.doctor.diagnose import Check, Diagnosis, Fix
from toolrelay.io.doctor.probes import PROBES, Observation, Probe
from toolrelay.io.doctor.report import ModelUnknown, Report, examine
from toolrelay.io.doctor.saving import save, snippet

__all__ = [
    "PROBES",
    "Check",
    "Diagnosis",
    "Fix",
    "ModelUnknown",
    "Observation",
    "Probe",
    "Report",
    "examine",
    "save",
    "snippet",
]
