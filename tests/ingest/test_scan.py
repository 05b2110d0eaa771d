"""The block scanner against json.loads: the same events and top-level values for any cut of
the bytes into blocks, and a refusal of what is not a complete JSON object or array."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracegraph.ingest.scan import ScanError, TopLevel, scan_events

KEEP = frozenset({"distributedInfo", "schemaVersion"})

# text heavy in the bytes the scan must get right inside strings
tricky_text = st.text(alphabet=st.sampled_from('ab"\\,:[]{} \n\té'), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | tricky_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(tricky_text, inner, max_size=4),
    max_leaves=12,
)
events = st.lists(st.dictionaries(tricky_text, json_values, max_size=5), max_size=12)


def _scan(doc: bytes, block: int) -> tuple[list[object], TopLevel]:
    blocks = [doc[i : i + block] for i in range(0, len(doc), block)]
    top = TopLevel()
    found: list[object] = []
    for array in scan_events(blocks, KEEP, top):
        found.extend(json.loads(array))
    return found, top


@settings(max_examples=400, deadline=None)
@given(
    trace_events=events,
    other=st.dictionaries(tricky_text, json_values, max_size=3),
    info=json_values,
    block=st.integers(1, 64),
    indent=st.sampled_from([None, 1]),
    events_first=st.booleans(),
)
def test_object_documents_scan_as_json_loads_reads_them(
    trace_events, other, info, block, indent, events_first
) -> None:
    other = {k: v for k, v in other.items() if k not in KEEP and k != "traceEvents"}
    document = {"traceEvents": trace_events} if events_first else {}
    document |= {**other, "distributedInfo": info}
    if not events_first:
        document["traceEvents"] = trace_events
    found, top = _scan(json.dumps(document, indent=indent).encode(), block)
    assert found == trace_events
    assert top.has_events and not top.bare_array
    assert json.loads(top.values["distributedInfo"]) == info
    assert set(top.values) == {"distributedInfo"}


@settings(max_examples=200, deadline=None)
@given(trace_events=events, block=st.integers(1, 64))
def test_a_bare_array_is_its_events(trace_events, block) -> None:
    found, top = _scan(json.dumps(trace_events).encode(), block)
    assert found == trace_events and top.bare_array


def test_a_document_without_events_says_so() -> None:
    found, top = _scan(b'{"traceEvents": null, "schemaVersion": 1}', 5)
    assert found == [] and not top.has_events
    assert top.values == {"traceEvents": b"null", "schemaVersion": b"1"}


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (b"", "no JSON object or array"),
        (b"   ", "no JSON object or array"),
        (b'"text"', "not a JSON object or array"),
        (b'{"traceEvents": [{"a": 1}', "ends early"),
        (b'{"traceEvents": [{"a": "1}]}', "ends early"),
        (b'{"traceEvents": []} x', "data after the end"),
        (b'{"traceEvents": []}}', "data after the end|unbalanced"),
        (b'{"traceEvents": [}]]}', "data after the end|unbalanced"),
        (b"{1: 2}", "top-level key"),
        (b'{"traceEvents": [{"a": 1}], "traceEvents": [{"b": 2}]}', "two top-level"),
        (b'{"traceEvents": [{"a": 1},   ]}', "empty element|"),
        (b'{"traceEvents": [  ,{"a": 1}]}', "empty element|"),
        (b'[{"a": 1},,{"b": 2}]', "empty element|"),
    ],
)
def test_what_is_no_complete_document_is_refused(doc: bytes, problem: str) -> None:
    """Refused by the scan, whatever the cut into blocks; where the pattern allows "" the
    scan may pass it on as it came for the JSON decoder to refuse (so: not valid JSON)."""
    for block in (1, 3, 1000):
        try:
            arrays = list(scan_events(_blocks(doc, block), KEEP, TopLevel()))
        except ScanError as exc:
            assert re.search(problem, str(exc)), (block, str(exc))
            continue
        assert problem.endswith("|"), (block, "not refused")
        with pytest.raises(json.JSONDecodeError):
            for array in arrays:
                json.loads(array)


def _blocks(doc: bytes, block: int) -> list[bytes]:
    return [doc[i : i + block] for i in range(0, len(doc), block)]
