"""The Kubernetes manifests of deploy/kubernetes/, rendered and checked offline (`make lint`).

- `render(folder)`: a kustomization as `kubectl kustomize` builds it, for the features the
  shipped ones use (`resources`, files or folders; `images`); any other key is refused rather
  than ignored. No kustomize binary is installable from the registries this machine reaches.
- `lint(folder)`: every rendered document against the Kubernetes API's own schemas
  (kubernetes-validate, strict: an unknown field is an error, as `kubectl apply`'s strict field
  validation makes it), KEDA's `ScaledObject` against KEDA's CRD schema (the npm package
  @kubernetes-models/keda, run by Node: required fields and types; its unknown fields and enums
  checked here), then recheck's own rules: grace periods above the shutdown timeout, probes,
  requests, references that resolve.

`python -m tests.support.kube deploy/kubernetes` lints the base and every overlay; exit 1 with one
line per problem.
"""

from __future__ import annotations

import base64
import fcntl
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from tests.support.helpers import REPO

# The oldest Kubernetes the manifests promise to work on, and the newest the schemas know.
KUBERNETES_VERSIONS = ("1.29", kubernetes_validate.latest_version())
KEDA_MODELS = "@kubernetes-models/keda@2.0.0"  # KEDA 2.x's CRDs, as JSON schemas compiled for Node
NODE_PREFIX = REPO / "build" / "keda-models"
SHUTDOWN_DEFAULT_S = 10.0  # RECHECK_SHUTDOWN_TIMEOUT's default (docs/configuration.md)
WRITE_BACK_ROOM_S = 10.0  # after the shutdown timeout: the last write-back and the exit
# ScaledObject fields (KEDA 2.x's reference, keda.sh/docs/latest/reference/scaledobject-spec): the
# compiled schema accepts unknown keys, which Kubernetes' strict validation would refuse.
KEDA_SPEC_KEYS = {
    "scaleTargetRef", "pollingInterval", "cooldownPeriod", "initialCooldownPeriod",
    "idleReplicaCount", "minReplicaCount", "maxReplicaCount", "fallback", "advanced", "triggers",
}  # fmt: skip
KEDA_TRIGGER_KEYS = {"type", "name", "metadata", "authenticationRef", "metricType", "useCachedMetrics"}
KEDA_METRIC_TYPES = {"AverageValue", "Value", "Utilization"}
KUSTOMIZE_KEYS = {"apiVersion", "kind", "resources", "images"}


class Problem(Exception):
    """What `lint` found: one line per problem."""


def render(folder: Path) -> list[dict[str, Any]]:
    """The documents `kubectl kustomize folder` would print, in order."""
    spec = yaml.safe_load((folder / "kustomization.yaml").read_text())
    unknown = set(spec) - KUSTOMIZE_KEYS
    if unknown:
        raise Problem(f"{folder}/kustomization.yaml: {sorted(unknown)} not supported by this renderer")
    documents: list[dict[str, Any]] = []
    for resource in spec.get("resources", []):
        path = (folder / resource).resolve()
        if path.is_dir():
            documents += render(path)
        else:
            documents += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    images = {image["name"]: image for image in spec.get("images", [])}
    for container in containers(documents):
        name, _, tag = container["image"].partition(":")
        if name in images:
            new = images[name]
            container["image"] = f"{new.get('newName', name)}:{new.get('newTag', tag or 'latest')}"
    return documents


def pod_specs(documents: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(document, its pod spec) for every Deployment and Job."""
    for doc in documents:
        if doc["kind"] in ("Deployment", "Job"):
            yield doc, doc["spec"]["template"]["spec"]


def containers(documents: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for _, pod in pod_specs(documents):
        yield from pod.get("initContainers", [])
        yield from pod["containers"]


def lint(folder: Path) -> None:
    """Raise Problem, one line per problem, if a rendered document is invalid or breaks a rule."""
    documents, examples = render(folder), example_secrets(folder)
    problems = [
        f"{name(doc)}: {problem}" for doc in [*documents, *examples] for problem in schema_problems(doc)
    ]
    problems += keda_problems([doc for doc in documents if doc["kind"] == "ScaledObject"])
    problems += rule_problems(documents, secrets={doc["metadata"]["name"] for doc in examples})
    if problems:
        raise Problem("\n".join(f"{folder}: {problem}" for problem in problems))


def name(doc: dict[str, Any]) -> str:
    return f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"


def schema_problems(doc: dict[str, Any]) -> list[str]:
    if doc["kind"] == "ScaledObject":
        return []  # keda_problems
    problems = []
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            where = "/".join(str(part) for part in error.path) or "(top level)"
            problems.append(f"Kubernetes {version}: {where}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            problems.append(error.message)
    return problems


def keda_problems(scaled: list[dict[str, Any]]) -> list[str]:
    problems = []
    for doc in scaled:
        spec = doc.get("spec", {})
        problems += [f"{name(doc)}: spec.{key}: unknown field" for key in sorted(set(spec) - KEDA_SPEC_KEYS)]
        for i, trigger in enumerate(spec.get("triggers", [])):
            unknown = sorted(set(trigger) - KEDA_TRIGGER_KEYS)
            problems += [f"{name(doc)}: spec.triggers[{i}].{key}: unknown field" for key in unknown]
            if trigger.get("metricType", "AverageValue") not in KEDA_METRIC_TYPES:
                problems.append(
                    f"{name(doc)}: spec.triggers[{i}].metricType: not one of {sorted(KEDA_METRIC_TYPES)}"
                )
    if not scaled:
        return problems
    script = NODE_PREFIX / "validate.mjs"
    keda_models()
    out = subprocess.run(
        ["node", str(script)],
        input=json.dumps(scaled),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    for doc, verdict in zip(scaled, json.loads(out), strict=True):
        if verdict:
            problems.append(f"{name(doc)}: KEDA's schema: {verdict}")
    return problems


VALIDATE_MJS = """\
// Written by tests/support/kube.py: each ScaledObject of stdin's JSON array against KEDA's CRD
// schema; prints a JSON array, "" for a valid one, else the schema's message.
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1";
import { readFileSync } from "node:fs";
const verdicts = JSON.parse(readFileSync(0, "utf8")).map((doc) => {
  try { new ScaledObject(doc).validate(); return ""; } catch (error) { return error.message; }
});
console.log(JSON.stringify(verdicts));
"""


def keda_models() -> None:
    """KEDA's compiled schemas under build/keda-models (npm, once per checkout)."""
    if not shutil.which("node"):
        raise Problem("node is needed to check KEDA's ScaledObject (Debian's nodejs package)")
    NODE_PREFIX.mkdir(parents=True, exist_ok=True)
    with open(NODE_PREFIX / ".lock", "w") as lock:  # pytest -n 4 in a fresh clone: one install
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (NODE_PREFIX / "node_modules" / "@kubernetes-models" / "keda").is_dir():
            install = ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(NODE_PREFIX)]
            subprocess.run([*install, KEDA_MODELS], check=True, timeout=600)
        script = NODE_PREFIX / "validate.mjs"
        if not script.exists() or script.read_text() != VALIDATE_MJS:
            script.write_text(VALIDATE_MJS)


def example_secrets(folder: Path) -> list[dict[str, Any]]:
    """The Secrets a user creates, as the base's secret.example.yaml shows them (not applied by
    the kustomization: validated with it, and what its references must name)."""
    for candidate in (folder, *folder.parents):
        example = candidate / (
            "secret.example.yaml" if candidate.name == "base" else "base/secret.example.yaml"
        )
        if example.exists():
            return [doc for doc in yaml.safe_load_all(example.read_text()) if doc]
    return []


def shutdown_timeout(documents: list[dict[str, Any]]) -> float:
    for doc in documents:
        if doc["kind"] == "ConfigMap" and "RECHECK_SHUTDOWN_TIMEOUT" in doc.get("data", {}):
            return float(doc["data"]["RECHECK_SHUTDOWN_TIMEOUT"])
    return SHUTDOWN_DEFAULT_S


def rule_problems(documents: list[dict[str, Any]], secrets: set[str]) -> list[str]:
    """recheck's own rules (docs/kubernetes.md says why each)."""
    problems = []
    config_maps = {doc["metadata"]["name"] for doc in documents if doc["kind"] == "ConfigMap"}
    deployments = {doc["metadata"]["name"] for doc in documents if doc["kind"] == "Deployment"}
    least = shutdown_timeout(documents) + WRITE_BACK_ROOM_S
    for doc, pod in pod_specs(documents):
        grace = pod.get("terminationGracePeriodSeconds", 30)
        if doc["kind"] == "Deployment" and grace < least:
            problems.append(
                f"{name(doc)}: terminationGracePeriodSeconds {grace} must be at least "
                f"RECHECK_SHUTDOWN_TIMEOUT + {WRITE_BACK_ROOM_S:.0f} s ({least:.0f}): a stopped "
                "process finishes its batch and releases what it holds before SIGKILL"
            )
        mounts = {volume["name"] for volume in pod.get("volumes", []) if "emptyDir" in volume}
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            where = f"{name(doc)}: container {container['name']}"
            if not container.get("resources", {}).get("requests"):
                problems.append(f"{where}: no resources.requests")
            for source in container.get("envFrom", []):
                if "configMapRef" in source and source["configMapRef"]["name"] not in config_maps:
                    problems.append(
                        f"{where}: ConfigMap {source['configMapRef']['name']} not in the manifests"
                    )
                if "secretRef" in source and source["secretRef"]["name"] not in secrets:
                    problems.append(
                        f"{where}: Secret {source['secretRef']['name']} not in secret.example.yaml"
                    )
        if doc["kind"] == "Deployment":  # the long-running roles: a health file and its probe
            for container in pod["containers"]:
                where = f"{name(doc)}: container {container['name']}"
                probe = container.get("livenessProbe", {}).get("exec", {}).get("command")
                if probe != ["recheck", "health"]:
                    problems.append(f"{where}: livenessProbe must run recheck health")
                read_only = container.get("securityContext", {}).get("readOnlyRootFilesystem")
                tmp = {m["name"] for m in container.get("volumeMounts", []) if m["mountPath"] == "/tmp"}
                if read_only and not tmp & mounts:
                    problems.append(f"{where}: a read-only root needs an emptyDir on /tmp (the health file)")
    for doc in documents:
        if doc["kind"] in ("ScaledObject", "HorizontalPodAutoscaler"):
            target = doc["spec"].get("scaleTargetRef", {}).get("name")
            if target not in deployments:
                problems.append(
                    f"{name(doc)}: scaleTargetRef {target!r} is not a Deployment of the manifests"
                )
    return problems


def kustomizations(root: Path) -> list[Path]:
    """Every folder of root holding a kustomization.yaml (the base and each overlay)."""
    return sorted(path.parent for path in root.rglob("kustomization.yaml"))


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else REPO / "deploy" / "kubernetes"
    failed = False
    for folder in kustomizations(root):
        try:
            lint(folder)
            print(f"kubernetes: {folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder}: valid")
        except Problem as problem:
            failed = True
            print(problem, file=sys.stderr)
    return 1 if failed else 0


def for_podman(documents: list[dict[str, Any]], image: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What `podman kube play` (Podman 4.3, Debian's) can run of rendered documents, as
    (the init-db Job's pod, [the ConfigMaps and Deployments]); what differs, and why:

    - the image: the test's local build (no registry);
    - the Job: Podman has no Job kind; its pod template is played as a Pod;
    - the Deployments' initContainers: Podman 4.3 gives them the pod's restartPolicy (Always), so
      an init container that exits 0 is started again and the pod never comes up (seen here:
      "failed to remove once init container ... as it is running"). The test runs the init
      container's command by itself instead (`wait_container`);
    - containerPorts and the readinessProbe: Podman 4.3 publishes every containerPort on the host,
      so a second replica cannot bind it; and it has no readiness probe. Services, budgets and
      autoscalers: Podman has none of them.
    Everything else runs as written: commands, environment from the ConfigMap and Secrets,
    replicas, the liveness probe (as a Podman health check), the security context (a read-only
    root), the emptyDir volume, the grace period."""
    documents = json.loads(json.dumps(documents))  # a deep copy
    for container in containers(documents):
        container["image"] = image
    job = next(doc for doc in documents if doc["kind"] == "Job")
    template = job["spec"]["template"]
    metadata = {"name": job["metadata"]["name"], **template["metadata"]}
    init_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
    rest = []
    for doc in documents:
        if doc["kind"] == "ConfigMap":
            rest.append(doc)
        elif doc["kind"] == "Deployment":
            pod = doc["spec"]["template"]["spec"]
            pod.pop("initContainers", None)
            for container in pod["containers"]:
                container.pop("ports", None)
                container.pop("readinessProbe", None)
            rest.append(doc)
    return init_pod, rest


def wait_container(documents: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    """The first init container of `deployment`, as rendered."""
    for doc, pod in pod_specs(documents):
        if doc["kind"] == "Deployment" and doc["metadata"]["name"] == deployment:
            return dict(pod["initContainers"][0])
    raise KeyError(deployment)


def podman_secret(values: dict[str, str]) -> str:
    """A Secret's data as Podman 4.3's kube play reads a Podman secret: a JSON object of base64
    values (not a Secret document: Podman 4.3 has no Secret kind)."""
    return json.dumps({key: base64.b64encode(value.encode()).decode() for key, value in values.items()})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
