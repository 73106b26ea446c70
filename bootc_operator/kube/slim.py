"""kubernetes_asyncio's ``ApiClient`` and config loaders, without its generated classes.

``import kubernetes_asyncio.client`` runs a package ``__init__`` that imports every
generated API and model class (about 1,000 modules: 38 MiB of the controller's RSS
and most of its start-up), and ``client.api_client`` imports the models package
itself. The controller uses none of them: requests go through
``ApiClient.call_api(..., _preload_content=False)`` and bodies are parsed into
plain dicts (``kube.rest``); only ``ApiClient``, ``Configuration`` and the
kubeconfig / in-cluster loaders are needed.

So, before importing those, the three packages whose ``__init__`` imports the
generated classes (``kubernetes_asyncio``, ``.client``, ``.client.models``) are
registered as *lazy packages*: their submodules import as usual, and their own
``__init__`` runs only when a name that is not a submodule is asked of them (a
test's ``from kubernetes_asyncio.client import CoreV1Api``, ``ApiClient``
deserializing into a model), so a process that wants the whole library still gets
it. A process that imported them already (a test run) keeps them as they are.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any, Final

LAZY_PACKAGES: Final = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.models",
)


class LazyPackage(types.ModuleType):
    """A package whose ``__init__`` runs on the first name asked of it that is not a
    submodule (see the module docstring)."""

    _loaded = False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        full = f"{self.__name__}.{name}"
        if full in sys.modules or importlib.util.find_spec(full) is not None:
            return importlib.import_module(full)
        if not self._loaded:
            self._loaded = True
            spec = self.__spec__
            assert spec is not None and spec.loader is not None
            spec.loader.exec_module(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None


def lazy_packages(names: tuple[str, ...] = LAZY_PACKAGES) -> None:
    """Register ``names`` (parents first) as lazy packages, unless already imported."""
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            raise ImportError(f"{name} is not an installed package")
        module = LazyPackage(name)
        module.__spec__ = spec
        module.__path__ = list(spec.submodule_search_locations)
        module.__file__ = spec.origin
        module.__loader__ = spec.loader
        module.__package__ = name
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


lazy_packages()

# The names the controller needs, set on the lazy package too so that
# ``from kubernetes_asyncio.client import ApiClient`` (the library's own config
# loaders say so) finds them without running the package's ``__init__``.
from kubernetes_asyncio.client.api_client import ApiClient  # noqa: E402
from kubernetes_asyncio.client.configuration import Configuration  # noqa: E402

for _cls in (ApiClient, Configuration):
    setattr(sys.modules["kubernetes_asyncio.client"], _cls.__name__, _cls)

from kubernetes_asyncio.config.incluster_config import load_incluster_config  # noqa: E402
from kubernetes_asyncio.config.kube_config import load_kube_config  # noqa: E402

__all__ = [
    "ApiClient",
    "Configuration",
    "LazyPackage",
    "lazy_packages",
    "load_incluster_config",
    "load_kube_config",
]
