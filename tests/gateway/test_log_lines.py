"""The access log's line and the records' times, written the cheap way, are the
lines logging's own machinery writes (``logging.Formatter``, a template and a
mapping): checked on generated fields and times."""

from __future__ import annotations

import logging
import time
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.server import envelope
from toolrelay.server.logs import NOTES, _JsonFormatter, _TextFormatter

# The access line as it was written through the record's own formatting.
_TEMPLATE = (
    "%(method)s %(path)s model=%(model)s mode=%(mode)s %(status)s %(duration_ms)sms %(request_id)s"
)
_FIELDS = ("method", "path", "model", "mode", "status", "duration_ms", "request_id")


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


_WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    method=st.sampled_from(["GET", "POST", "DELETE"]),
    path=_WORDS,
    notes=st.fixed_dictionaries({}, optional={"model": _WORDS, "mode": _WORDS}),
    status=st.integers(100, 599),
    request_id=st.from_regex(r"[\w.:/=+%-]{1,20}", fullmatch=True),
)
def test_the_access_line_is_the_templates(
    method: str, path: str, notes: dict[str, str], status: int, request_id: str
) -> None:
    kept = _Kept()
    # A logger of its own: what other tests (or libraries they load) did to the
    # logging tree, a logger disabled by a configuration, does not reach it.
    log = logging.Logger("toolrelay.access", logging.INFO)
    log.addHandler(kept)
    disabled = logging.root.manager.disable
    logging.disable(logging.NOTSET)
    try:
        with patch.object(envelope, "access_log", log):
            scope = {"method": method, "path": path, NOTES: notes}
            envelope._log(scope, status, time.perf_counter(), request_id.encode())
    finally:
        logging.disable(disabled)
    (record,) = kept.records
    fields = {name: getattr(record, name) for name in _FIELDS}
    assert fields["model"] == notes.get("model", "-") and fields["path"] == path
    assert record.getMessage() == _TEMPLATE % fields


# Times over a few days, in runs within one second and jumps back and forth.
_TIMES = st.lists(
    st.tuples(st.integers(1_700_000_000, 1_700_300_000), st.floats(0, 0.999999)), max_size=30
)


@settings(max_examples=200, deadline=None)
@given(_TIMES)
def test_record_times_are_the_formatters(times: list[tuple[int, float]]) -> None:
    reference = logging.Formatter("%(asctime)s %(message)s")
    cheap = [_TextFormatter("%(asctime)s %(message)s"), _JsonFormatter("{asctime}", style="{")]
    record = logging.makeLogRecord({"msg": "x"})
    for second, fraction in [(s, f) for s, f in times for _ in range(2)]:
        record.created = second + fraction
        record.msecs = fraction * 1000
        for formatter in cheap:
            assert formatter.formatTime(record) == reference.formatTime(record)
