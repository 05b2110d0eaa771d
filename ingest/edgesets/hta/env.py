"""One cached virtual environment per HTA release, so any version runs beside any other.

Both `HolisticTraceAnalysis` and its successor `traceinsight` install the module `hta`, and their
declared dependencies pull in jupyterlab. Each environment therefore gets the distribution with
`--no-deps` plus only what `hta.trace_analysis` imports and the critical path needs. A marker
file, written last, says the environment was built and verified; a folder without it is a
half-built environment and is removed and rebuilt.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ... import outputs
from ..errors import HtaEnvError

Progress = Callable[[str, int, int], None]

MARKER = "tracegraph-hta-env.json"
MARKER_FORMAT = 1
PIP_TIMEOUT_S = 1800

# Normalized distribution name → prefix of the edge-set name.
DISTRIBUTIONS = {"holistictraceanalysis": "hta", "traceinsight": "traceinsight"}
# What `import hta.trace_analysis` needs (yaml and psutil are not declared by HTA), plus pyarrow
# for the worker's Parquet output. plotly is imported at module level by HTA's analyzers.
BASE_REQUIREMENTS = ("networkx", "numpy", "pandas", "plotly", "psutil", "pyyaml", "pyarrow")
# HolisticTraceAnalysis' critical path fails under pandas 3 ("Cannot specify both 'axis' and
# 'index'/'columns'") and needs pandas < 2.3. traceinsight 0.6.1 under pandas 3 fails to load
# traces whose `index_correlation` column pandas downcasts to int8 (hta/common/trace.py:127,
# "Invalid value ... for dtype 'int8'"; pandas 2 upcasts with a warning), e.g. our synthetic ones.
EXTRA_PINS = {
    "holistictraceanalysis": {"pandas": "pandas<2.3"},
    "traceinsight": {"pandas": "pandas<3"},
}
VERIFY_SCRIPT = """
import importlib.metadata as m, json, platform, sys
import hta.trace_analysis
names = sys.argv[1:]
print(json.dumps({"python": platform.python_version(),
                  "packages": {n: m.version(n) for n in names}}))
"""

_SPEC = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([0-9][0-9A-Za-z.+!-]*)\s*$")


@dataclass(frozen=True)
class HtaSpec:
    """A pinned HTA release, e.g. `HolisticTraceAnalysis==0.5.0`."""

    distribution: str
    version: str

    @property
    def key(self) -> str:
        return re.sub(r"[-_.]+", "", self.distribution).lower()

    @property
    def name(self) -> str:
        """The edge-set name: `hta-0.5.0`, `traceinsight-0.6.1`."""
        return f"{DISTRIBUTIONS[self.key]}-{self.version}"

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    def dependencies(self) -> tuple[str, ...]:
        pins = EXTRA_PINS.get(self.key, {})
        return tuple(pins.get(r, r) for r in BASE_REQUIREMENTS)


@dataclass(frozen=True)
class HtaEnv:
    """A built and verified environment: its python runs `hta` of exactly `spec`."""

    spec: HtaSpec
    path: Path
    packages: dict[str, str]
    python_version: str
    build_seconds: float

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def default_cache_root() -> Path:
    """Where HTA environments are cached: $XDG_CACHE_HOME (or ~/.cache)/tracegraph/hta."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tracegraph" / "hta"


def parse_spec(spec: str) -> HtaSpec:
    """`NAME==VERSION` for a known HTA distribution; anything else is an HtaEnvError."""
    match = _SPEC.match(spec)
    if not match:
        raise HtaEnvError(f"HTA spec '{spec}' is not NAME==VERSION (e.g. traceinsight==0.6.1)")
    parsed = HtaSpec(match.group(1), match.group(2))
    if parsed.key not in DISTRIBUTIONS:
        known = ", ".join(["HolisticTraceAnalysis", "traceinsight"])
        raise HtaEnvError(f"HTA spec '{spec}': unknown distribution (known: {known})")
    return parsed


def cached_env(spec: str | HtaSpec, cache_root: Path) -> HtaEnv | None:
    """The environment for `spec` if it is already built under `cache_root` (else None)."""
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    return _read_marker(Path(cache_root).expanduser() / parsed.name, parsed)


def ensure_env(
    spec: str | HtaSpec,
    cache_root: Path,
    progress: Progress | None = None,
    base_python: Path | None = None,
) -> HtaEnv:
    """The cached environment for `spec` under `cache_root`, built and verified on first use."""
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    report = progress or (lambda stage, done, total: None)
    cache_root = Path(cache_root).expanduser()
    cache_root.mkdir(parents=True, exist_ok=True)
    env_dir = cache_root / parsed.name
    with _lock(cache_root / f".{parsed.name}.lock"):
        existing = _read_marker(env_dir, parsed)
        if existing is not None:
            return existing
        return _build(parsed, env_dir, Path(base_python or sys.executable), report)


def _read_marker(env_dir: Path, spec: HtaSpec) -> HtaEnv | None:
    """The environment its marker describes, if the marker matches what we would build now."""
    try:
        marker = json.loads((env_dir / MARKER).read_text())
    except (OSError, ValueError):
        return None
    expected = {
        "format": MARKER_FORMAT,
        "spec": spec.requirement,
        "requirements": list(spec.dependencies()),
    }
    if any(marker.get(k) != v for k, v in expected.items()):
        return None
    if not (env_dir / "bin" / "python").exists():
        return None
    return HtaEnv(
        spec, env_dir, dict(marker["packages"]), marker["python"], marker["build_seconds"]
    )


def _build(spec: HtaSpec, env_dir: Path, base_python: Path, report: Progress) -> HtaEnv:
    start = time.perf_counter()
    steps = 4
    label = f"HTA environment {spec.name}"
    shutil.rmtree(env_dir, ignore_errors=True)
    try:
        report(f"{label}: creating virtual environment", 0, steps)
        _check(spec, [str(base_python), "-m", "venv", str(env_dir)], "creating the venv")
        python = str(env_dir / "bin" / "python")
        pip = [python, "-I", "-m", "pip", "install", "--no-input", "--progress-bar", "off"]
        report(f"{label}: installing {spec.requirement} (no dependencies)", 1, steps)
        _check(spec, [*pip, "--no-deps", spec.requirement], f"installing {spec.requirement}")
        deps = spec.dependencies()
        report(f"{label}: installing {', '.join(deps)}", 2, steps)
        _check(spec, [*pip, *deps], "installing its dependencies")
        report(f"{label}: verifying `import hta.trace_analysis`", 3, steps)
        names = [spec.distribution, *(_project(d) for d in deps)]
        out = _check(spec, [python, "-I", "-c", VERIFY_SCRIPT, *names], "importing hta")
        found = json.loads(out.strip().splitlines()[-1])
        env = HtaEnv(spec, env_dir, found["packages"], found["python"], time.perf_counter() - start)
        _write_marker(env)
        report(f"{label}: ready", steps, steps)
        return env
    except BaseException:
        shutil.rmtree(env_dir, ignore_errors=True)
        raise


def _project(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]


def _check(spec: HtaSpec, command: list[str], doing: str) -> str:
    """Run one build step; its failure becomes a one-line HtaEnvError saying why."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise HtaEnvError(
            f"HTA environment {spec.name}: {doing} timed out after {PIP_TIMEOUT_S} s"
        ) from exc
    except OSError as exc:
        raise HtaEnvError(f"HTA environment {spec.name}: {doing} failed ({exc})") from exc
    if done.returncode != 0:
        why = _last_error_line(done.stderr) or _last_error_line(done.stdout) or "no output"
        raise HtaEnvError(f"HTA environment {spec.name}: {doing} failed: {why}")
    return done.stdout


def _last_error_line(text: str) -> str:
    """pip's last `ERROR:` line, else the last line that is not a pip warning."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    if errors:
        return errors[-1][:300]
    others = [line for line in lines if not line.startswith("WARNING:")]
    return others[-1][:300] if others else ""


def _write_marker(env: HtaEnv) -> None:
    marker = {
        "format": MARKER_FORMAT,
        "spec": env.spec.requirement,
        "name": env.spec.name,
        "requirements": list(env.spec.dependencies()),
        "packages": env.packages,
        "python": env.python_version,
        "build_seconds": round(env.build_seconds, 2),
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    outputs.write_text(env.path / MARKER, json.dumps(marker, indent=2, sort_keys=True))


@contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Serialize builds of one environment across processes (a second one waits, then reuses)."""
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
