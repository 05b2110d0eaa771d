PY ?= python

.PHONY: check lint types test bench

# lint, types, tests (the tests hold the import layers: tests/test_architecture.py)
check: lint types test

lint:
	ruff check .

types:
	mypy ingest queries api

test:
	$(PY) -m pytest

# side-by-side benchmarks; each prints medians and ratios against its baseline
bench:
	$(PY) benchmarks/primer.py
	$(PY) benchmarks/ingest_vs_hta.py
	$(PY) benchmarks/merged_scaling.py
	$(PY) benchmarks/peak_rss.py
	$(PY) benchmarks/ingest_rss_scaling.py
	$(PY) benchmarks/native_vs_hta.py
	$(PY) benchmarks/query_rss.py
