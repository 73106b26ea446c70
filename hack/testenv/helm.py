"""The helm binary for the chart's tests, and the chart's renders.

``resolve_helm`` finds the helm that ``hack/build-helm.sh`` builds and caches
(``$BOOTC_OPERATOR_HELM`` when ``hack/test.sh`` exported it, else the script is
run: a stat when warm). ``Helm`` runs it with its own config, cache and data
directories (nothing under ``~/.config``) and, for the cluster commands, a
kubeconfig. ``objects_by_key`` is how renders and ``install.yaml`` are compared:
parsed objects keyed by kind, namespace and name.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from hack.testenv.controlplane import REPO_ROOT, cached_tool

HELM_ENV = "BOOTC_OPERATOR_HELM"
CHART = REPO_ROOT / "manifests" / "chart" / "bootc-operator"

Obj = dict[str, Any]
Key = tuple[str, str, str]


def resolve_helm() -> Path:
    """The cached helm binary (built on first use; minutes when the cache is cold)."""
    return cached_tool(HELM_ENV, "build-helm.sh")


def objects_by_key(docs: Iterable[Obj | None]) -> dict[Key, Obj]:
    """Objects keyed by (kind, namespace or "", name); a duplicate key is an error."""
    out: dict[Key, Obj] = {}
    for doc in docs:
        if not doc:
            continue
        meta = doc["metadata"]
        key = (doc["kind"], meta.get("namespace", ""), meta["name"])
        assert key not in out, f"two objects {key}"
        out[key] = doc
    return out


class Helm:
    """helm with private state under ``home``, against ``kubeconfig`` if given."""

    def __init__(self, binary: Path, home: Path, kubeconfig: Path | None = None) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.env = {
            **os.environ,
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        if kubeconfig is not None:
            self.env["KUBECONFIG"] = str(kubeconfig)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``helm ARGS``; raises AssertionError with its output if ``check`` and it fails."""
        res = subprocess.run(
            [str(self.binary), *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if check:
            assert res.returncode == 0, f"helm {' '.join(args)} failed:\n{res.stdout}{res.stderr}"
        return res

    def template(
        self,
        release: str = "bootc-operator",
        namespace: str = "bootc-operator",
        values: Mapping[str, Any] | None = None,
        chart: Path = CHART,
    ) -> dict[Key, Obj]:
        """``chart`` (a directory or a packaged archive) rendered, CRDs included,
        with ``values`` (a values file's contents), parsed."""
        argv = ["template", release, str(chart), "--namespace", namespace, "--include-crds"]
        if values:
            argv += ["--values", "-"]
        res = subprocess.run(
            [str(self.binary), *argv],
            env=self.env,
            input=yaml.safe_dump(dict(values)) if values else None,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert res.returncode == 0, f"helm template failed:\n{res.stderr}"
        return objects_by_key(yaml.safe_load_all(res.stdout))
