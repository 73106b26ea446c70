"""What Flux and Argo CD see of a rollout, judged by their own code (issue 40 §1, §2).

One module fixture plays real rollouts (the controller in process, real daemons on
simulated hosts pulling from a real registry, the session's kube-apiserver) and
records every version of the pools and BootcNodes the API server held:

- *roll*: three nodes to a second image, canaries first with an approval: created
  before the controller runs (the pool has no status of its own yet), then Pending,
  Progressing, AwaitingApproval, approved but paused, resumed, UpToDate; ``kubectl
  wait --for=condition=Ready`` runs from the apply to the end;
- *halt*: two nodes whose reboots never end, maxUnhealthy 1: RolloutHalted;
- *broken*: one node told to stage a digest the registry does not have: the node
  Degraded (its daemon's switch fails), the pool Degraded/NodeDegraded;
- *invalid*: a short image name the controller refuses: InvalidSpec.

Every recorded version then goes through kstatus (``hack/kstatus``: cli-utils'
``pkg/kstatus``, what Flux computes health with) and Argo CD's health code
(``hack/argocd-health``: its settings manager reading ``manifests/argocd/argocd-cm.yaml``
and its Lua runtime). The tests check each verdict against the table of
docs/observing.md (phase -> kstatus -> Argo CD), each of Argo CD's statuses in its
own test, and what ``kubectl wait`` and ``kubectl describe`` show.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES
from bootc_operator.kube.rest import ApiError, get_object, patch_object
from e2e.controllerenv import create_pool, delete_quietly, get_pool
from e2e.daemonenv import Daemons
from e2e.helpers import condition, push, unique_name, wait_for
from e2e.hostsenv import HostedNodes
from hack.testenv import ControlPlane, api_client
from hack.testenv.controller import running_controller
from hack.testenv.gitops import ARGOCD_CM, Recorder, Verdict, argocd_health, kstatus
from hack.testenv.pools import pool_body
from hack.testenv.registry import Registry

# The first test builds hack/kstatus and hack/argocd-health on a cold cache (3 and 14
# minutes here) unless hack/test.sh built them: more than pytest's 600 s per test.
pytestmark = pytest.mark.timeout(2400)

#: phase -> (kstatus, Argo CD) once the controller has observed the spec (docs/observing.md)
POOL_VERDICTS = {
    c.PHASE_PENDING: ("InProgress", "Progressing"),
    c.PHASE_PROGRESSING: ("InProgress", "Progressing"),
    c.PHASE_AWAITING_APPROVAL: ("InProgress", "Suspended"),
    c.PHASE_PAUSED: ("InProgress", "Suspended"),
    c.PHASE_HALTED: ("Failed", "Degraded"),
    c.PHASE_UP_TO_DATE: ("Current", "Healthy"),
}
#: the Degraded phase: Failed when the reason stops the rollout (here: InvalidSpec)
#: (a degraded node does not stop the others: InProgress, but Argo CD says Degraded)
DEGRADED_VERDICTS = {
    c.REASON_INVALID_SPEC: ("Failed", "Degraded"),
    c.REASON_NODE_DEGRADED: ("InProgress", "Degraded"),
}
UNOBSERVED = ("InProgress", "Progressing")
DEADLINE = 150.0
WAIT = 300  # kubectl wait's --timeout, seconds


@dataclass
class Judged:
    """A recorded object version and what each tool says of it."""

    obj: dict[str, Any]
    kstatus: Verdict
    argocd: Verdict

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def status(self) -> dict[str, Any]:
        return dict(self.obj.get("status") or {})

    @property
    def observed(self) -> bool:
        return bool(self.status.get("observedGeneration") == self.obj["metadata"].get("generation"))

    def cond(self, cond_type: str) -> dict[str, Any]:
        return condition(self.obj, cond_type)

    def describe(self) -> str:
        conds = {x["type"]: (x["status"], x["reason"]) for x in self.status.get("conditions", [])}
        return (
            f"{self.name} gen {self.obj['metadata'].get('generation')} "
            f"observed {self.status.get('observedGeneration')} phase {self.status.get('phase')} "
            f"{conds} -> kstatus {self.kstatus.status} ({self.kstatus.message!r}), "
            f"argocd {self.argocd.status} ({self.argocd.message!r})"
        )


@dataclass
class Rollouts:
    pools: dict[str, list[Judged]] = field(default_factory=dict)  # scenario -> versions
    nodes: list[Judged] = field(default_factory=list)  # every BootcNode version
    node_names: dict[str, list[str]] = field(default_factory=dict)  # scenario -> nodes
    wait_output: str = ""
    after_wait: dict[str, Any] = field(default_factory=dict)  # the pool when wait returned
    described: dict[str, str] = field(default_factory=dict)  # moment -> kubectl describe


def kubectl_describe(cp: ControlPlane, *what: str) -> str:
    return str(cp.kubectl("describe", *what).stdout)


async def until_reason(api: ApiClient, pool: str, reason: str, cond: str = "UpToDate") -> None:
    async def reached() -> bool:
        return condition(await get_pool(api, pool), cond).get("reason") == reason

    await wait_for(reached, DEADLINE, f"{pool}: {cond} reason {reason}")


async def play(cp: ControlPlane, registry: Registry, root: Path) -> tuple[Recorder, Rollouts]:
    out = Rollouts()
    repo = unique_name("os")
    first = await push(registry, registry.ref(repo, "v1"), "gitops-one")
    second = await push(registry, registry.ref(repo, "v2"), "gitops-two")
    roll, halt, broken, bad = (unique_name(p) for p in ("roll", "halt", "broken", "bad"))
    async with await api_client(cp.kubeconfig) as api:
        daemons = Daemons(cp.kubeconfig, root / "logs")
        async with HostedNodes(api, daemons, root / "hosts") as hosted, Recorder(api) as rec:
            for scenario, group, count in (
                ("roll", roll, 3),
                ("halt", halt, 2),
                ("broken", broken, 1),
            ):
                out.node_names[scenario] = [f"{group}-{i}" for i in range(count)]
                for name in out.node_names[scenario]:
                    await hosted.add(name, registry.ref(repo, digest=first), {"group": group})
            hosted.hold(*out.node_names["halt"])  # their reboots never end
            target = registry.ref(repo, digest=second)
            canary = {"nodes": 1, "requireApproval": True}
            # created while no controller runs: what kstatus reads right after an apply
            rec.record(
                await create_pool(api, pool_body(roll, {"group": roll}, target, 1, canary=canary))
            )
            halting = pool_body(
                halt, {"group": halt}, target, 1, maxUnhealthy=1, rebootTimeoutSeconds=1
            )
            await create_pool(api, halting)
            missing = registry.ref(repo, digest="sha256:" + "e" * 64)  # never pushed
            await create_pool(api, pool_body(broken, {"group": broken}, missing, 1))
            await create_pool(api, pool_body(bad, {"group": bad}, "myos:latest", 1))
            wait_argv = ("wait", "--for=condition=Ready", f"bnp/{roll}", f"--timeout={WAIT}s")
            waiting = asyncio.create_task(
                asyncio.to_thread(cp.kubectl, *wait_argv, timeout=WAIT + 30)
            )
            async with running_controller(api, registry=registry.options()):

                async def rolling() -> None:
                    await until_reason(api, roll, c.REASON_AWAITING_APPROVAL)
                    approve = {"paused": True, "approvedDigest": second}
                    await patch_object(api, BOOTC_NODE_POOLS, roll, {"spec": {"rollout": approve}})
                    await until_reason(api, roll, c.REASON_PAUSED)
                    out.described["paused"] = await asyncio.to_thread(
                        kubectl_describe, cp, "bnp", roll
                    )
                    await patch_object(
                        api, BOOTC_NODE_POOLS, roll, {"spec": {"rollout": {"paused": False}}}
                    )
                    out.wait_output = (await waiting).stdout
                    out.after_wait = await get_pool(api, roll)
                    out.described["done"] = await asyncio.to_thread(
                        kubectl_describe, cp, "bnp", roll
                    )

                async def halting_one() -> None:
                    await until_reason(api, halt, c.REASON_ROLLOUT_HALTED, "Degraded")
                    out.described["halted"] = await asyncio.to_thread(
                        kubectl_describe, cp, "bnp", halt
                    )

                async def refused() -> None:
                    await until_reason(api, bad, c.REASON_INVALID_SPEC, "Degraded")

                async def failing() -> None:
                    await until_reason(api, broken, c.REASON_NODE_DEGRADED, "Degraded")

                await asyncio.gather(rolling(), halting_one(), refused(), failing())
                hosted.unhold(*out.node_names["halt"])
                for pool in (roll, halt, broken, bad):
                    await delete_quietly(api, BOOTC_NODE_POOLS, pool)

                async def released() -> bool:
                    for names in out.node_names.values():
                        for name in names:
                            try:
                                await get_object(api, BOOTC_NODES, name)
                            except ApiError as err:
                                if not err.not_found:
                                    raise
                            else:
                                return False
                    return True

                await wait_for(released, DEADLINE, "the pools' BootcNodes collected")
    out.pools = {"roll": [], "halt": [], "broken": [], "bad": []}
    return rec, out


def judge(objs: list[dict[str, Any]]) -> list[Judged]:
    return [
        Judged(o, k, a) for o, k, a in zip(objs, kstatus(objs), argocd_health(objs), strict=True)
    ]


@pytest.fixture(scope="module")
def rollouts(
    control_plane: ControlPlane, registry: Registry, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Rollouts]:
    rec, out = asyncio.run(play(control_plane, registry, tmp_path_factory.mktemp("gitops")))
    # what the rollouts wrote, not their deletion at the end (kstatus: Terminating)
    kept = [o for _, o in rec.versions if not o["metadata"].get("deletionTimestamp")]
    pools = [o for o in kept if o["kind"] == c.POOL_KIND]
    names = {p["metadata"]["name"] for p in pools}
    judged = judge(pools)
    for scenario in out.pools:
        (name,) = (n for n in names if n.startswith(f"{scenario}-"))
        out.pools[scenario] = [j for j in judged if j.name == name]
    members = {n for names_ in out.node_names.values() for n in names_}
    out.nodes = judge(
        [o for o in kept if o["kind"] == c.NODE_KIND and o["metadata"]["name"] in members]
    )
    print_table(out)
    yield out


def print_table(r: Rollouts) -> None:
    """The verdicts seen, per situation (the table of docs/observing.md, as measured)."""
    rows: dict[tuple[str, str, str, str], int] = {}
    for j in all_pools(r):
        what = j.status.get("phase") if j.observed else "(generation not observed)"
        if what == c.PHASE_DEGRADED:
            what += f" ({j.cond(c.COND_DEGRADED).get('reason')})"
        key = (c.POOL_KIND, str(what), j.kstatus.status, j.argocd.status)
        rows[key] = rows.get(key, 0) + 1
    for j in r.nodes:
        idle = j.cond(c.COND_IDLE)
        what = (
            f"{idle.get('reason')} (want {j.obj['spec'].get('desiredImageState')})"
            if j.observed
            else "(generation not observed)"
        )
        key = (c.NODE_KIND, what, j.kstatus.status, j.argocd.status)
        rows[key] = rows.get(key, 0) + 1
    print("\nkind / situation / kstatus / Argo CD (versions seen):")
    for (kind, what, ks, argo), n in sorted(rows.items()):
        print(f"  {kind:<14} {what:<34} {ks:<11} {argo:<12} ({n})")


def expected_for_pool(j: Judged) -> tuple[str, str]:
    if not j.observed:
        return UNOBSERVED
    phase = j.status.get("phase", "")
    if phase == c.PHASE_DEGRADED:
        return DEGRADED_VERDICTS[j.cond(c.COND_DEGRADED)["reason"]]
    return POOL_VERDICTS[phase]


def expected_for_node(j: Judged) -> tuple[str, str]:
    if not j.observed:
        return UNOBSERVED
    if j.cond(c.COND_DEGRADED).get("status") == "True":
        return ("Failed", "Degraded")
    idle = j.cond(c.COND_IDLE)
    staged_as_asked = idle.get("reason") == c.REASON_STAGED and (
        j.obj["spec"].get("desiredImageState") != "Booted"
    )
    if idle.get("status") == "True" or staged_as_asked:
        return ("Current", "Healthy")
    return ("InProgress", "Progressing")


def all_pools(r: Rollouts) -> list[Judged]:
    return [j for versions in r.pools.values() for j in versions]


# ------------------------------------------------------------------ every version


def test_every_pool_version_gets_the_verdict_of_its_phase(rollouts: Rollouts) -> None:
    wrong = [
        j.describe()
        for j in all_pools(rollouts)
        if (j.kstatus.status, j.argocd.status) != expected_for_pool(j)
    ]
    assert wrong == [], "\n".join(wrong)
    seen = {j.status.get("phase") for j in all_pools(rollouts) if j.observed}
    # Pending may pass between two writes; every other phase of the table was seen
    assert seen >= {*POOL_VERDICTS, c.PHASE_DEGRADED} - {c.PHASE_PENDING}, seen


def test_every_bootc_node_version_gets_the_verdict_of_its_daemons_work(rollouts: Rollouts) -> None:
    wrong = [
        j.describe()
        for j in rollouts.nodes
        if (j.kstatus.status, j.argocd.status) != expected_for_node(j)
    ]
    assert wrong == [], "\n".join(wrong)
    reasons = {j.cond(c.COND_IDLE).get("reason") for j in rollouts.nodes}
    stalled = [j for j in rollouts.nodes if j.kstatus.status == "Failed"]
    assert stalled and all(j.cond(c.COND_STALLED)["reason"] == c.REASON_ERROR for j in stalled)
    assert {j.name for j in stalled} == set(rollouts.node_names["broken"])
    assert reasons >= {c.REASON_STAGING, c.REASON_STAGED, c.REASON_REBOOTING, c.REASON_IDLE}, (
        reasons
    )


# ------------------------------------------------------------------ kstatus (Flux)


def test_kstatus_says_in_progress_through_the_rollout_and_current_only_at_its_end(
    rollouts: Rollouts,
) -> None:
    versions = rollouts.pools["roll"]
    created = versions[0]
    # created while no controller ran: the status default makes it unobserved, not Current
    assert created.status == {"observedGeneration": 0}
    assert created.kstatus.status == "InProgress", created.describe()
    assert "latest observed generation is 0" in created.kstatus.message
    current = [j for j in versions if j.kstatus.status == "Current"]
    assert current and current[-1] is versions[-1], [j.describe() for j in versions]
    first_current = versions.index(current[0])
    assert all(j.kstatus.status == "InProgress" for j in versions[:first_current])
    for j in current:  # Current: every node runs the target, out of its slot
        assert j.status["updatedCount"] == j.status["nodeCount"] == 3, j.describe()
    reconciling = {j.cond(c.COND_RECONCILING).get("reason") for j in versions}
    assert {c.PHASE_PROGRESSING} <= reconciling, reconciling


def test_kstatus_says_failed_when_the_rollout_halts(rollouts: Rollouts) -> None:
    halted = [j for j in rollouts.pools["halt"] if j.status.get("phase") == c.PHASE_HALTED]
    assert halted
    for j in halted:
        assert j.kstatus.status == "Failed", j.describe()
        assert j.cond(c.COND_STALLED)["reason"] == c.REASON_ROLLOUT_HALTED
        assert "unhealthy" in j.kstatus.message
        assert j.cond(c.COND_RECONCILING) == {}
    before = rollouts.pools["halt"][: rollouts.pools["halt"].index(halted[0])]
    assert before and all(j.kstatus.status == "InProgress" for j in before)


def test_kstatus_says_failed_for_an_invalid_spec(rollouts: Rollouts) -> None:
    last = rollouts.pools["bad"][-1]
    assert last.kstatus.status == "Failed", last.describe()
    assert last.cond(c.COND_STALLED)["reason"] == c.REASON_INVALID_SPEC
    assert "short name" in last.kstatus.message


def test_kstatus_says_in_progress_while_paused_or_awaiting_approval(rollouts: Rollouts) -> None:
    """A pause is a person's choice, not a stall: InProgress (Ready=False, neither
    Reconciling nor Stalled), so a Flux Kustomization waiting on the pool times out
    rather than passing or failing at once (docs/observing.md)."""
    for phase, reason in (
        (c.PHASE_PAUSED, "Paused"),
        (c.PHASE_AWAITING_APPROVAL, "AwaitingApproval"),
    ):
        waiting = [
            j for j in rollouts.pools["roll"] if j.observed and j.status.get("phase") == phase
        ]
        assert waiting, phase
        for j in waiting:
            assert j.kstatus.status == "InProgress", j.describe()
            assert (j.cond(c.COND_READY)["status"], j.cond(c.COND_READY)["reason"]) == (
                "False",
                reason,
            )
            assert j.cond(c.COND_RECONCILING) == {} and j.cond(c.COND_STALLED) == {}
    paused = next(j for j in rollouts.pools["roll"] if j.status.get("phase") == c.PHASE_PAUSED)
    assert paused.kstatus.message.startswith("rollout paused:"), paused.describe()


# ------------------------------------------------------------------ Argo CD, one test per status


def argocd_seen(r: Rollouts, status: str) -> list[Judged]:
    return [j for j in [*all_pools(r), *r.nodes] if j.argocd.status == status]


def test_argocd_progressing_while_under_way_or_not_yet_observed(rollouts: Rollouts) -> None:
    judged = argocd_seen(rollouts, "Progressing")
    phases = {j.status.get("phase") for j in judged if j.obj["kind"] == c.POOL_KIND}
    assert {c.PHASE_PROGRESSING} <= phases, phases
    created = rollouts.pools["roll"][0]
    assert created.argocd.status == "Progressing"
    assert "generation 1" in created.argocd.message
    moving = next(j for j in judged if j.status.get("phase") == c.PHASE_PROGRESSING)
    assert "updated" in moving.argocd.message  # the progress message: "1/3 updated; ..."
    assert any(j.cond(c.COND_IDLE).get("reason") == c.REASON_REBOOTING for j in judged)


def test_argocd_healthy_once_every_node_runs_the_target(rollouts: Rollouts) -> None:
    last = rollouts.pools["roll"][-1]
    assert last.argocd.status == "Healthy", last.describe()
    assert last.argocd.message.startswith("AllUpdated: 3/3 updated")
    healthy_pools = [j for j in argocd_seen(rollouts, "Healthy") if j.obj["kind"] == c.POOL_KIND]
    assert all(j.cond(c.COND_UP_TO_DATE)["status"] == "True" for j in healthy_pools)


def test_argocd_degraded_when_halted_invalid_or_a_node_fails(rollouts: Rollouts) -> None:
    degraded = argocd_seen(rollouts, "Degraded")
    reasons = {
        j.cond(c.COND_DEGRADED).get("reason") for j in degraded if j.obj["kind"] == c.POOL_KIND
    }
    assert reasons == {
        c.REASON_ROLLOUT_HALTED,
        c.REASON_INVALID_SPEC,
        c.REASON_NODE_DEGRADED,
    }, reasons
    invalid = rollouts.pools["bad"][-1]
    assert invalid.argocd.message.startswith("InvalidSpec: spec.image.ref"), invalid.argocd.message
    # a degraded node: Argo CD says Degraded while kstatus keeps the rollout InProgress
    broken = rollouts.pools["broken"][-1]
    assert (broken.kstatus.status, broken.argocd.status) == ("InProgress", "Degraded")
    assert broken.cond(c.COND_RECONCILING)["reason"] == c.PHASE_DEGRADED
    nodes = [j for j in degraded if j.obj["kind"] == c.NODE_KIND]
    assert nodes and nodes[-1].argocd.message.startswith("Error: "), nodes[-1].describe()
    # up to date but Degraded (e.g. a node conflict; the last version with the flag set):
    # kstatus follows Ready (Current), Argo CD still says Degraded
    done = dict(rollouts.pools["roll"][-1].obj)
    status = dict(done["status"])
    status["conditions"] = [
        {**x, "status": "True", "reason": "NodeConflict", "message": "n9 is in two pools"}
        if x["type"] == c.COND_DEGRADED
        else x
        for x in status["conditions"]
    ]
    done["status"] = status
    assert [v.status for v in (*kstatus([done]), *argocd_health([done]))] == [
        "Current",
        "Degraded",
    ]


def test_argocd_suspended_while_paused_or_awaiting_approval(rollouts: Rollouts) -> None:
    suspended = argocd_seen(rollouts, "Suspended")
    reasons = {j.cond(c.COND_UP_TO_DATE)["reason"] for j in suspended}
    assert reasons == {c.REASON_PAUSED, c.REASON_AWAITING_APPROVAL}, reasons


# ------------------------------------------------------------------ kubectl


def test_kubectl_wait_for_ready_returns_once_every_node_runs_the_target(rollouts: Rollouts) -> None:
    assert "condition met" in rollouts.wait_output
    pool = rollouts.after_wait
    assert condition(pool, c.COND_READY)["status"] == "True"
    assert pool["status"]["updatedCount"] == pool["status"]["nodeCount"] == 3


def described_conditions(text: str) -> dict[str, dict[str, str]]:
    """The ``Conditions:`` of ``kubectl describe`` output: type -> {field: value}."""
    found: dict[str, dict[str, str]] = {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if not sep:
            continue
        fields[key] = value.strip()
        if key == "Type":
            found[fields["Type"]] = fields
            fields = {}
    return found


def test_kubectl_describe_shows_the_kstatus_conditions(rollouts: Rollouts) -> None:
    for moment, cond_type, status, reason in (
        ("paused", "Ready", "False", "Paused"),
        ("halted", "Stalled", "True", "RolloutHalted"),
        ("done", "Ready", "True", "AllUpdated"),
    ):
        text = rollouts.described[moment]
        shown = described_conditions(text).get(cond_type, {})
        assert (shown.get("Status"), shown.get("Reason")) == (status, reason), text
    assert "Reconciling" not in described_conditions(rollouts.described["done"])


# ------------------------------------------------------------------ the shipped ConfigMap


def test_the_documented_patch_merges_the_health_checks_into_argocd_cm(
    rollouts: Rollouts, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """``kubectl patch configmap argocd-cm --patch-file manifests/argocd/argocd-cm.yaml``
    (docs/fleets.md) keeps Argo CD's other settings and yields the verdicts above."""
    ns = unique_name("argocd")
    control_plane.kubectl("create", "namespace", ns)
    try:
        control_plane.kubectl(
            "create",
            "configmap",
            "argocd-cm",
            "-n",
            ns,
            "--from-literal=url=https://argocd.example",
        )
        control_plane.kubectl(
            "patch", "configmap", "argocd-cm", "-n", ns, "--patch-file", str(ARGOCD_CM)
        )
        live = json.loads(
            control_plane.kubectl("get", "configmap", "argocd-cm", "-n", ns, "-o", "json").stdout
        )
        assert live["data"]["url"] == "https://argocd.example"
        patched = tmp_path / "argocd-cm.yaml"
        patched.write_text(json.dumps(live))
        samples = [rollouts.pools["roll"][-1], rollouts.pools["halt"][-1], rollouts.nodes[-1]]
        got = [v.status for v in argocd_health([j.obj for j in samples], patched)]
        assert got == [j.argocd.status for j in samples] and "" not in got, got
    finally:
        control_plane.kubectl("delete", "namespace", ns, "--wait=false")
