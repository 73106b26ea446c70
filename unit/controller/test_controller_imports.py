"""The controller loads only what the cluster uses (issue 39 §2): fresh interpreters.

``bootc-operator controller`` imports neither kubernetes_asyncio's generated API and
model classes (``kube.slim``: 38 MiB), nor ``cryptography`` (sealing pull secrets,
verifying signatures: about 7 MiB each time it is first needed), nor the Prometheus
query client (only with ``--prometheus-url``). ``hack.perf.imports`` measures what
each import costs.
"""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_controller_imports_no_generated_classes_no_cryptography_no_query_client() -> None:
    run(
        "import sys\n"
        "import bootc_operator.cli, bootc_operator.controller.lifecycle\n"
        "from bootc_operator.kube import load_api_client\n"
        "from bootc_operator.kube.slim import ApiClient, Configuration\n"
        "loaded = [m for m in sys.modules if m.startswith('kubernetes_asyncio.client.')]\n"
        "bad = [m for m in loaded if m.split('.')[2] in ('api', 'models') and m.count('.') > 2]\n"
        "assert not bad, ('generated classes imported', bad[:5])\n"
        "assert 'kubernetes_asyncio.client.api_client' in sys.modules\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'cryptography')\n"
        "assert not bad, ('cryptography', bad[:5])\n"
        "assert 'bootc_operator.sealing' not in sys.modules\n"
        "assert 'bootc_operator.gates.prometheus' not in sys.modules\n"
    )


def test_a_process_that_wants_the_whole_client_still_gets_it() -> None:
    """After ``kube.slim``, the lazy packages load on the first name they define."""
    run(
        "import bootc_operator.kube.slim as slim\n"
        "import kubernetes_asyncio.client as client\n"
        "from kubernetes_asyncio.client import ApiClient, CoreV1Api, V1Pod\n"
        "assert ApiClient is slim.ApiClient\n"
        "assert client.models.V1Pod is V1Pod\n"
        "import kubernetes_asyncio\n"
        "assert kubernetes_asyncio.watch.Watch\n"
        "try:\n"
        "    client.NoSuchName\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('a missing name was found')\n"
    )


def test_the_first_query_loads_the_query_client() -> None:
    run(
        "import asyncio, sys\n"
        "from bootc_operator.gates import ask\n"
        "assert 'bootc_operator.gates.prometheus' not in sys.modules\n"
        "class Fake:\n"
        "    async def query(self, promql):\n"
        "        return [{'metric': {}, 'value': [0, '1']}]\n"
        "result, error = asyncio.run(ask(Fake(), 'up'))\n"
        "assert result == [{'metric': {}, 'value': [0, '1']}] and error == '', (result, error)\n"
        "assert 'bootc_operator.gates.prometheus' in sys.modules\n"
    )
