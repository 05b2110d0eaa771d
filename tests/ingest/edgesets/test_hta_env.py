"""HTA environments: spec names, what gets installed, the cache marker, one-line build failures."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tracegraph.ingest.edgesets.errors import HtaEnvError
from tracegraph.ingest.edgesets.hta.env import MARKER, HtaEnv, _read_marker, ensure_env, parse_spec
from tracegraph.ingest.edgesets.hta.inputs import RankInput, RunNodes
from tracegraph.ingest.edgesets.hta.load import _labels, _original_ev_idx
from tracegraph.ingest.edgesets.hta.worker import _to_ns

from .conftest import SPECS, cache_root


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("HolisticTraceAnalysis==0.5.0", "hta-0.5.0"),
        ("holistic_trace_analysis == 0.2.0", "hta-0.2.0"),
        ("traceinsight==0.6.1", "traceinsight-0.6.1"),
    ],
)
def test_spec_names_the_edge_set(spec: str, name: str) -> None:
    assert parse_spec(spec).name == name


@pytest.mark.parametrize("spec", ["HolisticTraceAnalysis", "hta==0.5.0", "traceinsight>=0.6"])
def test_bad_specs_are_refused_in_one_line(spec: str) -> None:
    with pytest.raises(HtaEnvError) as info:
        parse_spec(spec)
    assert "\n" not in str(info.value) and spec in str(info.value)


def test_only_what_hta_needs_is_installed() -> None:
    old, new = parse_spec(SPECS["hta-0.5.0"]), parse_spec(SPECS["traceinsight-0.6.1"])
    assert "pandas<2.3" in old.dependencies() and "pandas<3" in new.dependencies()
    for spec in (old, new):
        assert not any(d.startswith(("jupyter", "pytest", "pydot")) for d in spec.dependencies())


def test_marker_that_does_not_match_means_rebuild(tmp_path: Path) -> None:
    spec = parse_spec(SPECS["hta-0.5.0"])
    env_dir = tmp_path / spec.name
    (env_dir / "bin").mkdir(parents=True)
    (env_dir / "bin" / "python").touch()
    assert _read_marker(env_dir, spec) is None  # half-built: no marker
    marker = {
        "format": 1,
        "spec": spec.requirement,
        "requirements": list(spec.dependencies()),
        "packages": {},
        "python": "3.11.7",
        "build_seconds": 1.0,
    }
    (env_dir / MARKER).write_text(json.dumps(marker))
    assert isinstance(_read_marker(env_dir, spec), HtaEnv)
    (env_dir / MARKER).write_text(json.dumps({**marker, "requirements": ["pandas"]}))
    assert _read_marker(env_dir, spec) is None


def test_cached_environment_is_reused(hta_envs: dict[str, HtaEnv]) -> None:
    began = time.perf_counter()
    for name, spec in SPECS.items():
        env = ensure_env(spec, cache_root())
        assert env.path == hta_envs[name].path and env.python.exists()
        assert env.packages[env.spec.distribution] == env.spec.version
    assert time.perf_counter() - began < 1.0


def test_failed_build_says_why_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    stages: list[str] = []
    with pytest.raises(HtaEnvError) as info:
        ensure_env("HolisticTraceAnalysis==0.0.0", tmp_path, lambda s, d, n: stages.append(s))
    message = str(info.value)
    assert "\n" not in message
    assert "installing HolisticTraceAnalysis==0.0.0 failed" in message
    assert stages and not (tmp_path / "hta-0.0.0").exists()


def test_weights_convert_to_exact_nanoseconds() -> None:
    assert _to_ns(35834) == 35_834_000
    assert _to_ns(np.int64(1 << 40)) == (1 << 40) * 1000
    assert _to_ns(12.0) == 12_000 and _to_ns(0.001) == 1 and _to_ns(2.5) == 2_500


def test_split_file_positions_map_back_to_original_ev_idx() -> None:
    item = RankInput(1, "merged.json", Path("rank-1.json"), np.array([4, 9, 17]))
    assert _original_ev_idx(pa.chunked_array([[2, 0]]), item).tolist() == [17, 4]
    whole = RankInput(1, "r.json", Path("r.json"), None)
    assert _original_ev_idx(pa.chunked_array([[2, 0]]), whole).tolist() == [2, 0]


def test_endpoint_labels_come_from_the_node_tables() -> None:
    nodes = RunNodes(
        "r", 0, {}, {}, np.array([3, 5, 9]),
        np.array(["Op", "Kernel", "Runtime"], dtype=object), {}, "2026-12-01T00:00:00+00:00", None,
    )  # fmt: skip
    assert _labels(np.array([9, 4, 3, 10]), nodes).tolist() == ["Runtime", "", "Op", ""]
