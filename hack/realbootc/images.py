"""Real bootc images for the real-bootc host: tiny, deterministic, made in memory.

``bootc_image("v2", version="2.0")`` is a single-layer OCI image that bootc 1.16
deploys: the ``containers.bootc`` label (bootc's importer requires it, or
``ostree.bootable``), ``amd64``, and a tree with what ostree needs to deploy and
libostree needs to call it booted: ``/usr/lib/modules/<kernel>/vmlinuz`` and
``initramfs.img`` (the same bytes for the same ``kernel``, so images sharing a kernel
share ostree's boot checksum: a staged one is ``softRebootCapable``), ``os-release``,
the mount points (``/sysroot``, ``/boot``, ``/var``, ``/proc``, ``/dev``, ``/sys``,
``/run``, ``/tmp``), ``/ostree -> sysroot/ostree``, ``/etc/os-release`` as a file
(the host's ``/usr`` is the machine's: a link into it would say Debian), the
merged-``/usr`` symlinks (``/lib64`` is where the ELF interpreter is), a permissive
``/etc/containers/policy.json`` (skopeo needs one; real base images ship it) and a
marker file naming the image, so every name is another digest.

Plain (non-ostree-encapsulated) layers: bootc imports them as "derived" layers, as it
does images built ``FROM scratch`` with a container tool. That costs nothing here
(no ``ostree commit``, no ``container encapsulate``, no skopeo: about a millisecond to
make and one registry upload), which matters because tests need several digests.
``push_bootc_image(registry, ref, image)`` uploads one with the project's registry
client (``hack.testenv.push``).

``/usr`` holds only what the deployment's identity needs: the host's programs come
from the machine's ``/usr`` (``hack.realbootc``'s docstring says why).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from bootc_operator.registry.client import RegistryClient
from hack.testenv.push import Image, TreeEntry, make_image, push_image
from hack.testenv.registry import Registry

#: the kernel every image ships unless told otherwise
KERNEL = "6.12.0-realbootc"
POLICY = {"default": [{"type": "insecureAcceptAnything"}]}
_DIRS = (
    "usr",
    "usr/bin",
    "usr/sbin",
    "usr/lib",
    "usr/lib64",
    "usr/lib/modules",
    "usr/share",
    "etc",
    "etc/containers",
    "var",
    "boot",
    "sysroot",
    "dev",
    "proc",
    "sys",
    "run",
    "tmp",
    "root",
    "home",
    "mnt",
    "opt",
    "srv",
)
_LINKS = {
    "bin": "usr/bin",
    "sbin": "usr/sbin",
    "lib": "usr/lib",
    "lib64": "usr/lib64",
    "ostree": "sysroot/ostree",
}


def bootc_tree(name: str, *, version: str | None = None, kernel: str = KERNEL) -> list[TreeEntry]:
    """The layer of ``bootc_image`` (module docstring)."""
    modules = f"usr/lib/modules/{kernel}"
    os_release = (
        'NAME="realbootc"\nID=realbootc\n'
        f'VERSION_ID="{version or "0"}"\nPRETTY_NAME="realbootc {name}"\n'
    )
    entries = [TreeEntry(d) for d in _DIRS]
    entries += [TreeEntry(modules)]
    entries += [TreeEntry(path, link=target) for path, target in _LINKS.items()]
    entries += [
        TreeEntry(f"{modules}/vmlinuz", f"realbootc kernel {kernel}\n".encode()),
        TreeEntry(f"{modules}/initramfs.img", f"realbootc initramfs {kernel}\n".encode()),
        TreeEntry("usr/lib/os-release", os_release.encode()),
        # a copy, not the usual link into /usr: the host's /usr is the machine's, and
        # what reads /etc/os-release (a kubelet's osImage) should see the image's
        TreeEntry("etc/os-release", os_release.encode()),
        TreeEntry("usr/share/realbootc-image", f"{name}\n".encode()),
        TreeEntry("etc/containers/policy.json", (json.dumps(POLICY, indent=2) + "\n").encode()),
        TreeEntry("etc/hostname", b"realbootc\n"),
        TreeEntry("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"),
        TreeEntry("etc/group", b"root:x:0:\n"),
    ]
    return entries


def bootc_image(
    name: str,
    *,
    version: str | None = None,
    kernel: str = KERNEL,
    architecture: str = "amd64",
    created: str = "2024-01-01T00:00:00Z",
    labels: Mapping[str, str] | None = None,
) -> Image:
    """A real bootc image named ``name`` (module docstring); the same arguments give the
    same digest."""
    return make_image(
        name,
        architecture=architecture,
        version=version,
        created=created,
        labels=labels,
        tree=bootc_tree(name, version=version, kernel=kernel),
    )


async def push_bootc_image(registry: Registry, ref: str, image: Image) -> str:
    """Upload ``image`` as ``ref`` to the harness ``registry``; returns its digest."""
    creds = registry.dockerconfigjson() if registry.auth else None
    async with RegistryClient(registry.options()) as client:
        return await push_image(client, ref, image, dockerconfigjson=creds)
