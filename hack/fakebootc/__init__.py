"""A simulated bootc host: the fake ``bootc`` and the host tools the daemon runs.

Owns everything about simulated hosts; every test that needs a node and the demo
use it. A host is a directory ROOT standing for the host's ``/`` (``state.py``
lists the files). Modules:

- ``host``: the Python API (``make_host``, ``open_host``, ``Host``: run tools, switch,
  reboot (full or soft: a soft one keeps the kernel and its boot ID, and ``/run``),
  rollback, faults, catalog, inspection, a daemon's command line).
- ``bootc``: the fake ``bootc`` (``status``/``switch``/``upgrade``/``rollback``, with
  ``--soft-reboot=auto|required``) and the real-bootc behaviours it reproduces.
- ``shims``: ``nsenter``, ``systemd-run``, ``systemctl``, ``journalctl`` and the
  generated ``bin/`` directory of executables.
- ``boot``: each boot's assessment (``boot-complete.target``: complete after a delay,
  a failing or never-finishing check from a fault or the image's label), what
  ``systemctl`` reports about it.
- ``render``: the ``org.containers.bootc/v1`` status document and output formats.
- ``resolve`` / ``registry`` / ``imageref``: how a switch target becomes a digest
  (a real registry when it answers, else a catalog; see ``resolve``'s docstring).
- ``policy``: the host's ``/etc/containers/policy.json`` (reject, insecureAcceptAnything,
  sigstoreSigned against the registry's cosign signatures) and
  ``--enforce-container-sigpolicy`` (``Host.set_policy``, ``fake-host policy``).
- ``state``: paths, the state file, locks, each image's kernel and which deployments
  are ``softRebootCapable`` (the booted one's kernel). ``cli``: the ``fake-host``
  command.

Standard library only, so the shims run under any Python 3.11+ quickly.

    host = make_host(tmp / "node-a", booted="quay.io/org/os@sha256:...")
    subprocess.run(["nsenter", "--target", "1", "--", "bootc", "switch", ref], env=host.env())
    host.reboot()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hack.fakebootc.host import (
        FAULTS,
        Host,
        add_catalog_image,
        make_host,
        open_host,
        set_fault,
        simulate_reboot,
    )
    from hack.fakebootc.state import Config, Deployment, FakeHostError, Faults, Paths, State

# Where each exported name lives. Imported on first use (PEP 562), so a shim that
# imports ``hack.fakebootc.entry`` does not pay for ``host`` and everything it
# pulls in: each simulated host command is a Python start, and the daemon's
# start-up on a simulated host runs several of them.
_EXPORTS = {
    **dict.fromkeys(
        (
            "FAULTS",
            "Host",
            "add_catalog_image",
            "make_host",
            "open_host",
            "set_fault",
            "simulate_reboot",
        ),
        "host",
    ),
    **dict.fromkeys(("Config", "Deployment", "FakeHostError", "Faults", "Paths", "State"), "state"),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "FAULTS",
    "Config",
    "Deployment",
    "FakeHostError",
    "Faults",
    "Host",
    "Paths",
    "State",
    "add_catalog_image",
    "make_host",
    "open_host",
    "set_fault",
    "simulate_reboot",
]
