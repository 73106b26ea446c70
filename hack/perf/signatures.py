"""Figures for the signature gate (issue 30 §1): time to verify one digest, cold and cached.

Not a test (no thresholds): ``hack/bench-signatures [--images N]`` prints the figures.
Real parts: Debian's docker-registry on loopback (``hack.testenv.registry``), images
signed by the real cosign (``hack.testenv.cosign``), the controller's own code path
(``reconcilers.loops.signatures.collect_keys``, ``RegistryClient.signature``,
``SignatureDocuments.verify``, ``VerdictCache``):

- *cold*: the verdict cache misses: the keys are collected, the ``.sig`` manifest
  and its payload fetched from the registry over the controller's long-lived client
  (connections kept), the signature checked, the verdict cached. The very first
  digest (new connection, ``cryptography`` imported) is shown apart;
- *cold, unsigned*: the same for digests without a signature (one 404);
- *cached*: what a reconcile pays for a digest already verified: the keys collected
  and fingerprinted again, then the cache hit (no registry request).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bootc_operator.reconcilers.loops.signatures import collect_keys
from bootc_operator.reconcilers.watchers.pullsecrets import WatchedSecret
from bootc_operator.registry import RegistryClient
from bootc_operator.registry.signature import VerdictCache, keyset_id
from hack.testenv.cosign import Cosign, resolve_cosign
from hack.testenv.push import make_image, push_image
from hack.testenv.registry import Registry


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"median {statistics.median(ordered) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms   "
        f"max {ordered[-1] * 1000:7.2f} ms   (n={len(ordered)})"
    )


async def _measure(registry: Registry, cosign: Cosign, images: int, cached_rounds: int) -> None:
    key = cosign.generate_key_pair("bench")
    verification = {"publicKeys": [key.public]}
    repo = "bench-os"
    signed: list[str] = []
    unsigned: list[str] = []
    async with RegistryClient(registry.options()) as client:
        for n in range(images * 2):
            ref = registry.ref(repo, f"v{n}")
            digest = await push_image(client, ref, make_image(f"bench image {n}"))
            (signed if n % 2 == 0 else unsigned).append(digest)
    for digest in signed:
        cosign.sign(registry, registry.ref(repo, digest=digest), key)
    image = registry.ref(repo)

    def never_read(ref: tuple[str, str]) -> WatchedSecret:
        return WatchedSecret(pending=True)

    cache = VerdictCache()
    cold: list[float] = []
    cold_unsigned: list[float] = []
    first = 0.0
    async with RegistryClient(registry.options()) as client:

        async def verify(digest: str) -> bool:
            keys = collect_keys(verification, never_read).keys
            ident = keyset_id(keys)
            verdict = cache.get(image, digest, ident, now=time.monotonic())
            if verdict is None:
                docs = await client.signature(f"{image}@{digest}")
                verdict = docs.verify(image, digest, keys)
                cache.put(image, digest, ident, verdict, now=time.monotonic())
            return verdict.verified

        for i, digest in enumerate(signed):
            start = time.perf_counter()
            assert await verify(digest), digest
            took = time.perf_counter() - start
            if i == 0:
                first = took
            else:
                cold.append(took)
        for digest in unsigned:
            start = time.perf_counter()
            assert not await verify(digest), digest
            cold_unsigned.append(time.perf_counter() - start)
        cached: list[float] = []
        for _ in range(cached_rounds):
            for digest in signed:
                start = time.perf_counter()
                assert await verify(digest)
                cached.append(time.perf_counter() - start)
    print(f"signature verification per digest ({images} signed + {images} unsigned images,")
    print(f"cosign ECDSA P-256 signatures, loopback registry {registry.host})")
    print(f"  cold, first digest (new connection):   {first * 1000:7.2f} ms")
    print(f"  cold, signed (fetch .sig + payload):   {_ms(cold)}")
    print(f"  cold, unsigned (one 404):              {_ms(cold_unsigned)}")
    print(f"  cached (keys collected, cache hit):    {_ms(cached)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--images", type=int, default=20, help="signed (and unsigned) images")
    parser.add_argument("--cached-rounds", type=int, default=50, help="cache hits per image")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="bench-signatures-") as tmp,
        Registry(Path(tmp) / "registry") as registry,
    ):
        cosign = Cosign(resolve_cosign(), Path(tmp) / "cosign")
        asyncio.run(_measure(registry, cosign, args.images, args.cached_rounds))


if __name__ == "__main__":
    main()
