"""The Kubernetes base in deploy/k8s: rendered by kustomize, validated by kubeconform in
strict mode against the Kubernetes JSON schemas, and held to what the server needs."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.schemas import KUBERNETES_VERSIONS, schema_location, write_schemas

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "k8s"
HTTP_OVERLAY = ROOT / "deploy" / "overlays" / "http"
DEPLOY_README = ROOT / "deploy" / "README.md"
KUSTOMIZE = ROOT / "build" / "bin" / "kustomize"
KUBECONFORM = ROOT / "build" / "bin" / "kubeconform"
DOCKERFILE = ROOT / "Dockerfile"
CHAT_SERVICE = "agentskit.chat.v1.ChatService"
ASSUMED_DRAIN_DELAY = 5
"""Seconds the server keeps serving after SIGTERM before it drains (`--drain-delay`)."""
AFTER_GRACE = 7
"""Seconds a drain may take past `--grace`: 2 s to close calls, 5 s to release leases
(transport/_running.py)."""
EXPECTED = {
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("policy/v1", "PodDisruptionBudget"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("batch/v1", "Job"),
}

Manifest = dict[str, Any]


def tool(path: Path) -> Path:
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: run `make deploy-tools`", pytrace=False)
    return path


def render(directory: Path, out: Path) -> Path:
    """`kustomize build DIRECTORY` written to `out`."""
    result = subprocess.run(
        [tool(KUSTOMIZE), "build", directory],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out.write_text(result.stdout, encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base rendered by kustomize, as one YAML stream in a file."""
    return render(BASE, tmp_path_factory.mktemp("k8s") / "rendered.yaml")


@pytest.fixture(scope="module")
def manifests(rendered: Path) -> list[Manifest]:
    return [m for m in yaml.safe_load_all(rendered.read_text(encoding="utf-8")) if m]


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory, manifests: list[Manifest]) -> Path:
    root = tmp_path_factory.mktemp("schemas")
    for version in KUBERNETES_VERSIONS:
        write_schemas(root, version, {(m["apiVersion"], m["kind"]) for m in manifests})
    return root


def kubeconform(schemas: Path, version: str, *files: Path) -> dict[str, Any]:
    """kubeconform's JSON report (strict, no schema download, a missing schema an error)."""
    result = subprocess.run(
        [
            tool(KUBECONFORM),
            "-strict",
            "-summary",
            "-output",
            "json",
            "-kubernetes-version",
            version,
            "-schema-location",
            schema_location(schemas),
            *files,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report: dict[str, Any] = json.loads(result.stdout)
    report["returncode"] = result.returncode
    return report


def one(manifests: list[Manifest], kind: str) -> Manifest:
    found = [m for m in manifests if m["kind"] == kind]
    assert len(found) == 1, [m["kind"] for m in manifests]
    return found[0]


def pod_spec(manifests: list[Manifest], kind: str = "Deployment") -> Manifest:
    spec: Manifest = one(manifests, kind)["spec"]["template"]["spec"]
    return spec


def containers(manifests: list[Manifest]) -> Iterator[Manifest]:
    for kind in ("Deployment", "Job"):
        yield from pod_spec(manifests, kind)["containers"]


def env_of(container: Manifest) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_rendered_base_is_valid_in_strict_mode(
    rendered: Path, schemas: Path, manifests: list[Manifest], version: str
) -> None:
    assert {(m["apiVersion"], m["kind"]) for m in manifests} == EXPECTED
    report = kubeconform(schemas, version, rendered)
    assert report["returncode"] == 0, report
    summary = report["summary"]
    assert summary["valid"] == len(manifests), report
    assert summary["invalid"] == summary["errors"] == summary["skipped"] == 0


def test_kubeconform_rejects_a_field_the_schema_does_not_have(
    manifests: list[Manifest], schemas: Path, tmp_path: Path
) -> None:
    broken = json.loads(json.dumps(one(manifests, "Deployment")))
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["grpc"]["port"] = "grpc"
    broken["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(broken), encoding="utf-8")
    report = kubeconform(schemas, KUBERNETES_VERSIONS[-1], path)
    assert report["returncode"] == 1
    (resource,) = report["resources"]
    assert resource["status"] == "statusInvalid"
    assert "additional properties 'readinessprobe' not allowed" in resource["msg"]
    assert "/livenessProbe/grpc/port': got string, want integer" in resource["msg"]


def test_the_service_speaks_grpc_on_the_named_port(manifests: list[Manifest]) -> None:
    (port,) = one(manifests, "Service")["spec"]["ports"]
    assert (port["name"], port["appProtocol"], port["targetPort"]) == ("grpc", "grpc", "grpc")
    (container,) = pod_spec(manifests)["containers"]
    named = container_ports(container)
    assert set(named) == {"grpc", "metrics"}  # the HTTP listener is an overlay's
    assert env_of(container)["AGENTSKIT_CHAT_LISTEN"] == f"0.0.0.0:{named['grpc']}"
    assert "AGENTSKIT_CHAT_HTTP_LISTEN" not in env_of(container)


def container_ports(container: Manifest) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container["ports"]}


def test_the_pods_serve_metrics_where_prometheus_is_told_to_scrape(
    manifests: list[Manifest],
) -> None:
    (container,) = pod_spec(manifests)["containers"]
    port = container_ports(container)["metrics"]
    assert env_of(container)["AGENTSKIT_CHAT_METRICS_LISTEN"] == f"0.0.0.0:{port}"
    assert env_of(container)["AGENTSKIT_CHAT_WORKERS"] == "1"  # serve refuses metrics with more
    annotations = one(manifests, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": "/metrics",
    }
    # deploy/README.md's scrape job targets the same port.
    scrape = DEPLOY_README.read_text(encoding="utf-8")
    assert f"--metrics-listen 0.0.0.0:{port}" in scrape
    assert f'"chat-1:{port}"' in scrape


def test_the_http_overlay_adds_the_listener_to_pods_and_service(
    tmp_path: Path, schemas: Path
) -> None:
    out = render(HTTP_OVERLAY, tmp_path / "http.yaml")
    for version in KUBERNETES_VERSIONS:
        report = kubeconform(schemas, version, out)
        assert report["returncode"] == 0, report
        assert report["summary"]["invalid"] == report["summary"]["errors"] == 0
    manifests = [m for m in yaml.safe_load_all(out.read_text(encoding="utf-8")) if m]
    (container,) = pod_spec(manifests)["containers"]
    ports = container_ports(container)
    assert set(ports) == {"grpc", "metrics", "http"}
    env = env_of(container)
    assert env["AGENTSKIT_CHAT_HTTP_LISTEN"] == f"0.0.0.0:{ports['http']}"
    assert env["AGENTSKIT_CHAT_AUTH_TOKENS"]  # beyond loopback, serve needs tokens for it too
    service = {p["name"]: p for p in one(manifests, "Service")["spec"]["ports"]}
    assert set(service) == {"grpc", "http"}
    assert service["http"]["targetPort"] == "http"
    assert service["grpc"]["appProtocol"] == "grpc"


def test_selectors_pick_the_server_pods_only(manifests: list[Manifest]) -> None:
    pods = one(manifests, "Deployment")["spec"]["template"]["metadata"]["labels"]
    job = one(manifests, "Job")["spec"]["template"]["metadata"]["labels"]
    selectors = [
        one(manifests, "Service")["spec"]["selector"],
        one(manifests, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        one(manifests, "Deployment")["spec"]["selector"]["matchLabels"],
    ]
    for selector in selectors:
        assert selector.items() <= pods.items()
        assert not selector.items() <= job.items()
    target = one(manifests, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == (
        "Deployment",
        one(manifests, "Deployment")["metadata"]["name"],
    )
    assert "replicas" not in one(manifests, "Deployment")["spec"]  # the autoscaler owns it


def test_probes_call_the_grpc_health_service(manifests: list[Manifest]) -> None:
    (container,) = pod_spec(manifests)["containers"]
    port = container["ports"][0]["containerPort"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == port, probe
    assert container["readinessProbe"]["grpc"]["service"] == CHAT_SERVICE
    # Health reports NOT_SERVING for the whole drain: liveness must outlast it.
    liveness = container["livenessProbe"]
    grace = float(env_of(container)["AGENTSKIT_CHAT_GRACE"])
    tolerated = liveness["periodSeconds"] * liveness["failureThreshold"]
    assert tolerated > ASSUMED_DRAIN_DELAY + grace + AFTER_GRACE


def test_the_termination_grace_period_covers_the_drain(manifests: list[Manifest]) -> None:
    spec = pod_spec(manifests)
    grace = float(env_of(spec["containers"][0])["AGENTSKIT_CHAT_GRACE"])
    assert spec["terminationGracePeriodSeconds"] > ASSUMED_DRAIN_DELAY + grace + AFTER_GRACE


def test_pods_run_non_root_with_a_read_only_root_and_no_capabilities(
    manifests: list[Manifest],
) -> None:
    user = dockerfile_user()
    for kind in ("Deployment", "Job"):
        pod = pod_spec(manifests, kind)
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == user
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            for mount in container.get("volumeMounts", []):
                if not mount.get("readOnly"):  # every writable path is scratch space
                    assert "emptyDir" in volumes[mount["name"]], mount


def test_store_and_digest_key_come_from_the_secret(manifests: list[Manifest]) -> None:
    secret = one(manifests, "Secret")
    keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
    for container in containers(manifests):
        store = env_of(container)["AGENTSKIT_CHAT_STORE"]["secretKeyRef"]
        assert store["name"] == secret["metadata"]["name"]
        assert store["key"] in keys
        assert secret["stringData"][store["key"]].startswith("postgresql://")
    (server,) = pod_spec(manifests)["containers"]
    mounts = {m["name"]: m["mountPath"] for m in server["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(manifests)["volumes"]}
    files = {}
    for name, volume in volumes.items():
        if volume.get("secret", {}).get("secretName") == secret["metadata"]["name"]:
            for item in volume["secret"]["items"]:
                assert item["key"] in keys
                files[f"{mounts[name]}/{item['path']}"] = item["key"]
    env = env_of(server)
    assert files[env["AGENTSKIT_CHAT_DIGEST_KEY_FILE"]] == "digest-key"
    assert files[env["AGENTSKIT_CHAT_AUTH_TOKENS"]] == "auth-tokens.yaml"
    assert files[env["AGENTSKIT_CHAT_STORE_PASSWORD_FILE"]] == "store-password"


def test_the_store_password_is_a_file_not_part_of_the_url(manifests: list[Manifest]) -> None:
    secret = one(manifests, "Secret")
    url = secret["stringData"]["store-url"]
    assert "@" in url
    assert ":" not in url.removeprefix("postgresql://").split("@")[0], url  # no user:password
    assert secret["stringData"]["store-password"]
    for kind in ("Deployment", "Job"):
        pod = pod_spec(manifests, kind)
        (container,) = pod["containers"]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        files = {
            f"{mounts[volume['name']]}/{item['path']}": item["key"]
            for volume in pod["volumes"]
            if volume.get("secret", {}).get("secretName") == secret["metadata"]["name"]
            for item in volume["secret"]["items"]
        }
        path = env_of(container)["AGENTSKIT_CHAT_STORE_PASSWORD_FILE"]
        assert files[path] == "store-password", kind
        # The files are mode 0440 and the pod runs as another user: its group must read them.
        assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"], kind
    (job,) = pod_spec(manifests, "Job")["containers"]
    assert set(env_of(job)) == {"AGENTSKIT_CHAT_STORE", "AGENTSKIT_CHAT_STORE_PASSWORD_FILE"}


def test_the_migration_job_runs_migrate_with_the_servers_image(manifests: list[Manifest]) -> None:
    (job,) = pod_spec(manifests, "Job")["containers"]
    (server,) = pod_spec(manifests)["containers"]
    assert job["args"] == ["migrate"]
    assert server["args"] == ["serve"]
    assert job["image"] == server["image"]
    assert pod_spec(manifests, "Job")["restartPolicy"] in ("OnFailure", "Never")


def test_the_definitions_config_map_holds_valid_definitions(
    manifests: list[Manifest], tmp_path: Path
) -> None:
    config = one(manifests, "ConfigMap")
    volumes = pod_spec(manifests)["volumes"]
    assert {"name": "definitions", "configMap": {"name": config["metadata"]["name"]}} in volumes
    (server,) = pod_spec(manifests)["containers"]
    mounted = {m["name"]: m["mountPath"] for m in server["volumeMounts"]}["definitions"]
    assert (
        env_of(server)["AGENTSKIT_CHAT_DEFINITIONS"]
        == mounted
        == dockerfile_env()["AGENTSKIT_CHAT_DEFINITIONS"]
    )
    for name, text in config["data"].items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "agentskit_chat.cli", "validate", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert config["data"]


def test_the_state_directory_matches_the_image(manifests: list[Manifest]) -> None:
    (server,) = pod_spec(manifests)["containers"]
    state = dockerfile_env()["AGENTSKIT_CHAT_STATE_DIR"]
    assert env_of(server)["AGENTSKIT_CHAT_STATE_DIR"] == state
    assert state in {m["mountPath"] for m in server["volumeMounts"]}
    entry = re.search(r"^ENTRYPOINT (.+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert entry is not None
    assert json.loads(entry.group(1)) == ["agentskit-chat"]  # args name the subcommand


def dockerfile_user() -> int:
    found = re.search(r"^USER (\d+):(\d+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert found is not None
    return int(found.group(1))


def dockerfile_env() -> dict[str, str]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for pair in shlex.split(line[4:]):
                key, _, value = pair.partition("=")
                env[key] = value
    return env
