"""A real-bootc host: the real ``bootc`` and libostree on a real ostree sysroot, no VM.

The sibling of ``hack.fakebootc``, with the same host interface as far as the daemon
and the tests are concerned (a daemon reaches it through ``nsenter`` into its PID 1
and runs ``bootc`` / ``systemd-run`` / ``systemctl`` on its ``PATH``), but nothing of
bootc is simulated: the binaries are bootc 1.16.9 and libostree 2026.4 built from the
pinned sources by ``hack/build-bootc.sh``, the deployments are real ostree
deployments, the images real bootc images in the harness registry.

- ``build``: where the build is (``resolve_build``: runs the build script, cached).
- ``images``: tiny real bootc images (``bootc_image``, ``push_bootc_image``).
- ``host``: the Python API (``make_host``, ``Host``: boot, run tools, reboot, close).
- ``hostinit``: what runs inside the host (its boot and PID 1, the systemd shims and
  the bootc / ostree wrappers); standard library only, run by the host's python3.

What is simulated is what has no systemd to be: transient units, ``systemctl``'s
answers (and with them the boot assessment, decided per boot as on the fake host),
the reboot itself (``ostree admin finalize-staged`` as the shutdown unit runs it,
then a new namespace entering the new default deployment).

The host's ``/usr`` is the machine's (bound read-only over the deployment's), not a
userspace shipped in the images: bootc, libostree and skopeo need glibc and some
sixty shared libraries, skopeo alone is 30 MB, and every test image (tests need
several digests) would carry all of it through a push, a pull and an ostree import.
What bootc and ostree track of a deployment, its commit, kernel, ``/usr/etc`` and the
image metadata, is the image's own; only the programs running are the machine's.
The cost: ``/usr/lib/os-release`` inside says Debian (bootc reads the version from
the image's labels, not from there); the images ship ``/etc/os-release`` as a file
of their own, so what reads that (a kubelet's ``osImage``) sees the image.
"""
