"""The fuzzing harness (`tests/fuzz/decoder.py`, issue 18 item 2): every saved finding and every seed decodes
cleanly (both decoders, identical items), and a minute of coverage-guided fuzzing from the seeds finds nothing. The
run's figures (inputs, inputs per second, coverage, peak memory) are printed at the end of the test run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz import decoder
from tests.summary import add_summary

FUZZ_SECONDS = 60


def test_saved_findings_and_the_seeds_decode_cleanly() -> None:
    """Each file in `tests/fuzz/findings/` (what `make fuzz` found) and each seed: both decoders, identical items, no
    exception."""
    findings = sorted(p for p in decoder.FINDINGS.iterdir() if p.name != "README.md")
    seeds = decoder.seeds()
    assert len(seeds) >= 15
    for data in [p.read_bytes() for p in findings] + list(seeds.values()):
        decoder.check(data)


def test_recrc_makes_every_batch_valid_again() -> None:
    from replay.kafka import batch, writer

    plain = decoder.seeds()["segment-none"][1:]
    broken = writer.corrupt_crc(plain)
    assert [i.kind.value for i in batch.read_bytes(broken, "0.log") if hasattr(i, "kind")] == ["bad_crc"]
    assert decoder.recrc(broken) == plain


@pytest.mark.fuzz
def test_a_minute_of_fuzzing_finds_nothing(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    seeds, work = tmp_path / "seeds", tmp_path / "corpus"
    work.mkdir()
    decoder.write_seeds(seeds)
    proc = subprocess.run([sys.executable, "-m", "tests.fuzz.decoder", f"-max_total_time={FUZZ_SECONDS}",
                           "-timeout=1", "-rss_limit_mb=1024", "-print_final_stats=1",
                           f"-artifact_prefix={tmp_path}/", str(work), str(seeds)],
                          capture_output=True, text=True, timeout=FUZZ_SECONDS * 5,
                          cwd=str(Path(__file__).resolve().parents[2]))
    found = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-", "leak-")))
    assert proc.returncode == 0 and not found, (
        f"the fuzzer found {found}: copy them from {tmp_path} into tests/fuzz/findings/ (a test then replays "
        f"them)\n{proc.stderr[-4000:]}")
    stats = dict(re.findall(r"stat::(\w+):\s+(\d+)", proc.stderr))
    cov = re.findall(r"cov: (\d+) ft: (\d+)", proc.stderr)
    assert int(stats["number_of_executed_units"]) > 1000
    add_summary(request.config, "fuzzing (tests/fuzz)",
                f"{stats['number_of_executed_units']} inputs in {FUZZ_SECONDS} s ({stats['average_exec_per_sec']}/s), "
                f"coverage {cov[-1][0]} edges / {cov[-1][1]} features, peak RSS {stats['peak_rss_mb']} MB, "
                f"{stats['new_units_added']} new inputs kept, no findings")
