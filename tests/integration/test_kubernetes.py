"""deploy/kubernetes/ read as files, in seconds and without a cluster (issue 49). What the base
does when run is tests/containers/test_kube_play.py (`podman kube play`).

- the base and both overlays render and pass `make lint`'s check (tests/support/kube.py: the
  Kubernetes schemas, strict; KEDA's CRD schema; recheck's rules), and each kind of mistake a
  user's edit could make fails it with a line that names it;
- the rules hold: grace periods above the shutdown timeout, one leader and a standby, workers
  that roll without losing capacity, the autoscalers on the worker Deployment;
- the init containers' wait: it exits 2 at once on a bad configuration (no use waiting), and
  keeps waiting while the servers are away.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.support.helpers import REPO
from tests.support.kube import Problem, kustomizations, lint, main, render, wait_container

ROOT = REPO / "deploy" / "kubernetes"


def test_the_base_and_every_overlay_are_valid():
    folders = kustomizations(ROOT)
    assert [folder.relative_to(ROOT).as_posix() for folder in folders] == [
        "base",
        "overlays/hpa",
        "overlays/keda",
    ]
    for folder in folders:
        lint(folder)  # raises Problem, one line per problem
    assert main([str(ROOT)]) == 0


@pytest.fixture
def copy(tmp_path) -> Path:
    """A copy of deploy/kubernetes/ to break."""
    shutil.copytree(ROOT, tmp_path / "kubernetes")
    return tmp_path / "kubernetes"


def edit(path: Path, change) -> None:
    """Apply change(documents) to a manifest file of the copy."""
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    change(documents)
    path.write_text(yaml.safe_dump_all(documents))


def worker(documents):
    return next(doc for doc in documents if doc["kind"] == "Deployment")["spec"]["template"]["spec"]


BREAKAGES = {
    # A misspelt field: Kubernetes' strict validation refuses it (kubectl apply would too).
    "unknown field": (
        "base/worker.yaml",
        lambda docs: worker(docs).update(terminationGracePeriod=30),
        "Additional properties are not allowed ('terminationGracePeriod' was unexpected)",
    ),
    "wrong type": (
        "base/worker.yaml",
        lambda docs: docs[0]["spec"].update(replicas="two"),
        "spec/replicas: 'two' is not of type 'integer'",
    ),
    "grace below the shutdown timeout": (
        "base/worker.yaml",
        lambda docs: worker(docs).update(terminationGracePeriodSeconds=12),
        "terminationGracePeriodSeconds 12 must be at least RECHECK_SHUTDOWN_TIMEOUT + 10 s (20)",
    ),
    "no liveness probe": (
        "base/dispatcher.yaml",
        lambda docs: worker(docs)["containers"][0].pop("livenessProbe"),
        "container dispatcher: livenessProbe must run recheck health",
    ),
    "a read-only root without /tmp": (
        "base/worker.yaml",
        lambda docs: worker(docs)["containers"][0].pop("volumeMounts"),
        "a read-only root needs an emptyDir on /tmp",
    ),
    "a Secret nobody creates": (
        "base/worker.yaml",
        lambda docs: worker(docs)["containers"][0]["envFrom"][1]["secretRef"].update(name="recheck-typo"),
        "Secret recheck-typo not in secret.example.yaml",
    ),
    # The example Secrets a user copies are checked too (not applied by the kustomization).
    "a misspelt Secret example": (
        "base/secret.example.yaml",
        lambda docs: docs[0].update(stringDat=docs[0].pop("stringData")),
        "Secret/recheck: Kubernetes 1.29: (top level): Additional properties are not allowed ('stringDat'",
    ),
    "KEDA: no target name": (
        "overlays/keda/scaledobject.yaml",
        lambda docs: docs[0]["spec"]["scaleTargetRef"].pop("name"),
        "KEDA's schema: data/spec/scaleTargetRef must have required property name",
    ),
    "KEDA: a threshold as a number": (
        "overlays/keda/scaledobject.yaml",
        lambda docs: docs[0]["spec"]["triggers"][0]["metadata"].update(threshold=200),
        "KEDA's schema: data/spec/triggers/0/metadata/threshold must be string",
    ),
    "KEDA: an unknown metric type": (
        "overlays/keda/scaledobject.yaml",
        lambda docs: docs[0]["spec"]["triggers"][1].update(metricType="Average"),
        "spec.triggers[1].metricType: not one of",
    ),
    "KEDA: a misspelt field": (
        "overlays/keda/scaledobject.yaml",
        lambda docs: docs[0]["spec"].update(pollingIntervall=15),
        "spec.pollingIntervall: unknown field",
    ),
    "HPA: the wrong target": (
        "overlays/hpa/hpa.yaml",
        lambda docs: docs[0]["spec"]["scaleTargetRef"].update(name="recheck-workers"),
        "scaleTargetRef 'recheck-workers' is not a Deployment of the manifests",
    ),
}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_broken_manifest_fails_the_lint_with_a_line_that_names_it(copy, breakage, capsys):
    file, change, message = BREAKAGES[breakage]
    edit(copy / file, change)
    folder = copy / file.rsplit("/", 1)[0]
    with pytest.raises(Problem) as raised:
        lint(folder)
    assert message in str(raised.value), str(raised.value)
    # `make lint`'s command: exit 1, the problem on stderr.
    assert main([str(copy)]) == 1
    assert message in capsys.readouterr().err


def test_the_renderer_refuses_what_it_does_not_implement(copy):
    path = copy / "base" / "kustomization.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["patches"] = [{"path": "more.yaml"}]
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(Problem, match=r"\['patches'\] not supported by this renderer"):
        render(copy / "base")


def test_one_leader_a_standby_and_workers_that_roll_without_losing_capacity():
    documents = render(ROOT / "base")
    deployments = {doc["metadata"]["name"]: doc for doc in documents if doc["kind"] == "Deployment"}
    dispatcher, workers = deployments["recheck-dispatcher"], deployments["recheck-worker"]
    assert dispatcher["spec"]["replicas"] == 2
    for deployment in (dispatcher, workers):
        assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert [c["args"] for c in pod["containers"]] in ([["dispatcher"]], [["worker"]])
    budgets = {
        doc["metadata"]["name"]: doc["spec"] for doc in documents if doc["kind"] == "PodDisruptionBudget"
    }
    assert budgets["recheck-dispatcher"]["minAvailable"] == 1
    for overlay in ("keda", "hpa"):
        scalers = [
            doc
            for doc in render(ROOT / "overlays" / overlay)
            if doc["kind"] not in {d["kind"] for d in documents}
        ]
        assert [doc["spec"]["scaleTargetRef"]["name"] for doc in scalers] == ["recheck-worker"], overlay


def run_wait(environment: dict[str, str]) -> subprocess.Popen:
    """The worker's init container command, run here with `recheck` on PATH."""
    container = wait_container(render(ROOT / "base"), "recheck-worker")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECHECK_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.update(environment)
    return subprocess.Popen(
        container["command"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_the_wait_for_the_table_stops_at_once_on_a_bad_configuration():
    process = run_wait({"RECHECK_INTERVAL": "soon"})
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 2, out
    assert "configuration error" in out and "waiting" not in out


def test_the_wait_for_the_table_keeps_waiting_while_the_servers_are_away():
    away = {
        "RECHECK_MYSQL_URL": "mysql://recheck:x@127.0.0.1:9/recheck",
        "RECHECK_REDIS_URL": "redis://127.0.0.1:9/0",
    }
    process = run_wait(away)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            line = process.stdout.readline()
            if "waiting for the table" in line:
                break
        assert process.poll() is None, process.stdout.read()
    finally:
        process.kill()
        process.wait()
