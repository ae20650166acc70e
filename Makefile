# The two commands a new user runs (see README.md): `make demo` and `make test`.
# Both install what a fresh machine needs first: the Python packages, the jars (through mvn) and the compiled
# decoder (native/, through maturin and cargo; without cargo the pure-Python decoder is used).
PYTHON ?= python3
STAMP := .venv-stamp
NATIVE_STAMP := .native-stamp

.PHONY: setup demo test test-all test-fast lint bench bench-pipeline fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	$(PYTHON) -m replay.maven
	touch $(STAMP)

# cargo keeps its compiled crates in the same cache as the jars (`$KRAFT_REPLAY_CACHE`, else
# ~/.cache/kraft-acl-replay), so a new clone on the same machine builds the decoder in seconds, not ~40 s
CARGO_TARGET_DIR ?= $(or $(KRAFT_REPLAY_CACHE),$(HOME)/.cache/kraft-acl-replay)/cargo-target

$(NATIVE_STAMP): native/Cargo.toml native/Cargo.lock native/pyproject.toml $(wildcard native/src/*.rs)
	@if command -v cargo >/dev/null; then CARGO_TARGET_DIR='$(CARGO_TARGET_DIR)' $(PYTHON) -m pip install --quiet ./native && touch $@; \
	else echo "note: cargo not found: the compiled decoder (native/) is not built, the pure-Python one is used"; fi

# the local file system without child processes (replay/spark/local_fs.py), the generated-code cache's agent
# (replay/spark/codegen_cache.py), then the Spark driver's class archive
# (replay/spark/class_archive.py): each built once, the archive in about a minute, when missing
setup: $(STAMP) $(NATIVE_STAMP)
	@$(PYTHON) -m replay.spark.local_fs
	@$(PYTHON) -m replay.spark.codegen_cache
	@$(PYTHON) -m replay.spark.build_class_archive

demo: setup
	kraft-replay demo

# test-fast leaves out the slow parts, each under its own mark (registered in pyproject.toml).
FAST := not extended and not kafka and not cluster and not property and not differential and not second_jvm and not slow and not fuzz and not crash and not samples

# Hypothesis draws the same examples every run under `make` (profile ci, tests/conftest.py), so a landing never
# depends on a seed; `make test HYPOTHESIS_PROFILE=default` (or plain pytest) explores new ones.
export HYPOTHESIS_PROFILE ?= ci

# Three processes (pytest-xdist): the Spark tests in two, the broker's in one, the rest spread (tests/conftest.py).
# `make test` (what CI runs) leaves out the long checks marked `extended`, each of whose features it checks more
# briefly; `make test-all` runs them too.
test: setup
	$(PYTHON) -m pytest --durations=25 -n 3 --dist loadgroup -m 'not extended'

test-all: setup
	$(PYTHON) -m pytest --durations=25 -n 3 --dist loadgroup

test-fast: setup
	$(PYTHON) -m pytest --durations=25 -n 3 --dist loadgroup -m '$(FAST)'

lint: $(STAMP)
	ruff check replay tests bench
	mypy

bench: setup
	$(PYTHON) -m bench.bench_ingest
	$(PYTHON) -m bench.bench_authorize

# The pipeline on realistic logs next to Kafka's DumpLogSegments (bench/README.md); e.g. SIZES=250k,1m,2m,10m
SIZES ?= 250k
CODECS ?= none
bench-pipeline: setup
	$(PYTHON) -m bench.bench_pipeline --sizes $(SIZES) --codecs $(CODECS)

# Coverage-guided fuzzing of both decoders (tests/fuzz/decoder.py) for FUZZ_SECONDS; what grows the coverage is kept
# in .fuzz-corpus/ (the next run starts from it), findings go to tests/fuzz/findings/, where a test replays them.
FUZZ_SECONDS ?= 14400
fuzz: setup
	mkdir -p .fuzz-corpus .fuzz-seeds
	$(PYTHON) -m tests.fuzz.decoder --seeds .fuzz-seeds
	$(PYTHON) -m tests.fuzz.decoder -max_total_time=$(FUZZ_SECONDS) -timeout=1 -rss_limit_mb=1024 \
		-print_final_stats=1 -artifact_prefix=tests/fuzz/findings/ .fuzz-corpus .fuzz-seeds

clean:
	rm -rf $(STAMP) $(NATIVE_STAMP) lakehouse demo-output spark-warehouse
