"""The Databricks Asset Bundle (`databricks.yml`, `resources/`; issue 15 item 3) against the code it runs: the wheel
task's package and entry point are the project's, every command line parses with the CLI's own parser (variables
given their defaults), the notebook exists and has every widget a task passes, every variable used is defined and
every one defined is used, and the two compute variants run the same tasks. No workspace is needed (none is here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml

from replay import cli

ROOT = Path(__file__).resolve().parents[1]
VAR_RE = re.compile(r"\$\{var\.([A-Za-z_][A-Za-z0-9_]*)\}")


def _bundle() -> tuple[dict[str, Any], dict[str, tuple[Path, dict[str, Any]]]]:
    top = yaml.safe_load((ROOT / "databricks.yml").read_text())
    jobs: dict[str, tuple[Path, dict[str, Any]]] = {}
    for pattern in top["include"]:
        for path in sorted(ROOT.glob(pattern)):
            for name, job in (yaml.safe_load(path.read_text())["resources"]["jobs"]).items():
                assert name not in jobs, f"job {name} defined twice"
                jobs[name] = (path, job)
    return top, jobs


def _with_defaults(text: str, variables: dict[str, Any]) -> str:
    return VAR_RE.sub(lambda m: str(variables[m.group(1)]["default"]), text)


def test_the_bundle_names_what_the_code_has() -> None:
    top, jobs = _bundle()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    package = re.sub(r"[-.]+", "_", project["name"])
    variables = top["variables"]
    assert set(jobs) == {"kraft_replay", "kraft_replay_classic"}
    parser = cli.build_parser()
    texts = [(ROOT / "databricks.yml").read_text(), *[p.read_text() for p, _ in jobs.values()]]
    used = {v for t in texts for v in VAR_RE.findall(t)}
    assert used == set(variables), (used, set(variables))
    assert "pip wheel --no-deps -w dist ." in top["artifacts"]["wheel"]["build"]
    assert "dist/*.whl" in top["sync"]["include"]

    shape = {}
    for name, (path, job) in jobs.items():
        assert job["trigger"]["file_arrival"]["url"].startswith("${var.dumps}")
        tasks = {t["task_key"]: t for t in job["tasks"]}
        shape[name] = {}
        for key, task in tasks.items():
            for dep in task.get("depends_on", []):
                assert dep["task_key"] in tasks
            if "python_wheel_task" in task:
                wheel = task["python_wheel_task"]
                assert wheel["package_name"] == package
                assert wheel["entry_point"] in project["scripts"]
                argv = [_with_defaults(str(a), variables) for a in wheel["parameters"]]
                args = parser.parse_args(argv)  # exits (fails the test) on an argument the CLI does not take
                assert args.func.__name__ == f"cmd_{argv[0].replace('-', '_')}"
                shape[name][key] = argv
            else:
                nb = task["notebook_task"]
                notebook = (path.parent / nb["notebook_path"]).resolve()
                assert notebook.is_file(), notebook
                source = notebook.read_text()
                widgets = set(re.findall(r'widget\(dbutils, "([a-z_]+)"', source))
                widgets |= set(re.findall(r'widgets\.text\("([a-z_]+)"', source))
                assert set(nb["base_parameters"]) <= widgets, set(nb["base_parameters"]) - widgets
                shape[name][key] = sorted(set(nb["base_parameters"]) - {"wheel"})
            if name == "kraft_replay":  # serverless: the environment carries the wheel, the notebook its %pip
                assert "environment_key" in task or "notebook_task" in task
                if "notebook_task" in task:
                    assert task["notebook_task"]["base_parameters"]["wheel"].endswith("/dist")
            else:
                assert task["job_cluster_key"] == job["job_clusters"][0]["job_cluster_key"]
                assert task["libraries"] == [{"whl": "../dist/*.whl"}]
    assert shape["kraft_replay"] == shape["kraft_replay_classic"]
    assert jobs["kraft_replay_classic"][1]["trigger"]["pause_status"] == "PAUSED"  # one job ingests an arrival
    watch = parser.parse_args(shape["kraft_replay"]["ingest"])
    assert watch.cluster_from_path and watch.trigger == "available-now" and watch.catalog == "main.kafka_audit"


@pytest.mark.parametrize("job", ["kraft_replay", "kraft_replay_classic"])
def test_the_environment_takes_the_built_wheel(job: str) -> None:
    _, jobs = _bundle()
    path, spec = jobs[job]
    wheels = ([d for e in spec.get("environments", []) for d in e["spec"]["dependencies"]]
              + [lib["whl"] for t in spec["tasks"] for lib in t.get("libraries", [])])
    assert wheels and all(w == "../dist/*.whl" for w in wheels)
    assert (path.parent / "../dist").resolve() == (ROOT / "dist").resolve()  # where the artifact build writes it
