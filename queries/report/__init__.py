"""`tracegraph report`: HTA's standard analyses and the findings, from the run archive."""

from .findings import Finding
from .report import HTA_MODE, Report, ReportError, build_report

__all__ = ["HTA_MODE", "Finding", "Report", "ReportError", "build_report"]
