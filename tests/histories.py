"""Hypothesis strategies for random ACL histories, shared by the reference replayer's and the Spark replay's
property tests. A history is a list of steps in the vocabulary of `replay.kafka.synth.log_from_steps`."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase
from hypothesis import strategies as st

STEP = st.one_of(
    st.tuples(st.just("create"), st.integers(0, 10_000)),
    st.tuples(st.just("delete"), st.integers(0, 1000)),
    st.tuples(st.just("dup"), st.integers(0, 1000), st.booleans()),
    st.tuples(st.just("stray_remove"), st.booleans()),
    st.tuples(st.just("begin")),
    st.tuples(st.just("end")),
    st.tuples(st.just("abort")),
    st.tuples(st.just("noop")),
    st.tuples(st.just("new_batch")),
    st.tuples(st.just("new_leader")),
)
STEPS = st.lists(STEP, min_size=1, max_size=80)
NO_TRANSACTIONS = STEPS.map(lambda steps: [s for s in steps if s[0] not in ("begin", "end", "abort")])
CUTS = st.lists(st.integers(1, 200), max_size=4, unique=True)


def spark_property_settings() -> dict[str, Any]:
    """Settings for a Spark property test (each example ingests and replays several clusters: minutes).

    The suite runs each test's explicit examples, which name every case found so far, and draws no more: the `ci`
    profile would draw the same ones every run anyway, and CI must stay under 40 minutes on 2 cores.
    `KRAFT_REPLAY_PROPERTY_EXAMPLES=N` draws N histories besides them (with `HYPOTHESIS_PROFILE=default`: new ones)."""
    n = int(os.environ.get("KRAFT_REPLAY_PROPERTY_EXAMPLES", "0"))
    return {"max_examples": max(n, 1), "phases": tuple(Phase) if n else (Phase.explicit,), "deadline": None,
            "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.data_too_large,
                                      HealthCheck.too_slow]}
