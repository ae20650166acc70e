# The two commands a new user runs (see README.md): `make demo` and `make test`.
# Both install what a fresh machine needs first: the Python packages and the jars (through mvn).
PYTHON ?= python3
STAMP := .venv-stamp

.PHONY: setup demo test test-fast lint bench bench-pipeline clean

$(STAMP): pyproject.toml
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	$(PYTHON) -m replay.maven
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	kraft-replay demo

# test-fast leaves out the slow parts, each under its own mark (registered in pyproject.toml).
FAST := not kafka and not cluster and not property and not differential and not second_jvm and not slow

test: $(STAMP)
	$(PYTHON) -m pytest --durations=25

test-fast: $(STAMP)
	$(PYTHON) -m pytest --durations=25 -m '$(FAST)'

lint: $(STAMP)
	ruff check replay tests bench
	mypy

bench: $(STAMP)
	$(PYTHON) -m bench.bench_ingest
	$(PYTHON) -m bench.bench_authorize

# The pipeline on realistic logs next to Kafka's DumpLogSegments (bench/README.md); e.g. SIZES=250k,1m,2m,10m
SIZES ?= 250k
CODECS ?= none
bench-pipeline: $(STAMP)
	$(PYTHON) -m bench.bench_pipeline --sizes $(SIZES) --codecs $(CODECS)

clean:
	rm -rf $(STAMP) lakehouse demo-output spark-warehouse
