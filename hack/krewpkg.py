"""The krew archive of ``kubectl bootc`` and its manifest's ``uri`` and ``sha256``.

krew installs a plugin from an archive: it unpacks it, and links the manifest's
``bin`` into ``~/.krew/bin``. For a Python plugin the archive holds one file,
``kubectl-bootc``: a zipapp (``#!/usr/bin/env python3`` then a zip, run by
Python as a script) of the modules the plugin imports and their dependencies, as
pure Python. The admin's machine needs ``python3`` >= 3.11 on ``PATH``, nothing
else; one archive serves Linux and macOS on any CPU.

What goes in (:func:`contents`):

- the ``bootc_operator`` modules the plugin imports, found by reading the import
  statements from ``bootc_operator.kubectl.main`` on (function-level ones too,
  so no lazily imported module is missing), less :data:`NOT_BUNDLED`;
- the distributions those modules import, with their requirements (markers
  evaluated for the oldest Python supported), plus :data:`EXTRA_DISTRIBUTIONS`,
  each without compiled extensions: aiohttp, multidict, yarl, frozenlist,
  propcache and PyYAML fall back to their pure-Python code when theirs is
  missing; each distribution's METADATA and licence files come along.

Its ``__main__`` unpacks the zip once into the user's cache directory (per build)
and runs from there, so Python caches the bytecode: run from the zip, every start
would compile every module (about twice the start-up time).

The archive is reproducible: entries sorted, fixed times and modes, the zip stored
(the tar is gzipped, once), so its sha256 depends only on those files. The
manifest's ``uri`` is where a release publishes it (:data:`RELEASES`: the GitHub
release of the tag ``v<version>``); this script writes ``sha256`` and ``uri``
into ``plugins/krew/bootc.yaml``, ``--check`` only compares.
``e2e/test_krew.py`` installs the archive as krew would and runs it through the
real kubectl.

    python -m hack.krewpkg [--out DIR] [--check]      (hack/krew-archive)
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import importlib.metadata as md
import io
import re
import sys
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement

import bootc_operator
from hack.generated import write_or_check

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "plugins" / "krew" / "bootc.yaml"
ENTRY = "bootc_operator.kubectl.main"
BIN = "kubectl-bootc"
#: where a release publishes its artifacts (the tag is ``v<version>``)
RELEASES = "https://github.com/bootc-dev/bootc-operator-py/releases/download"
#: the oldest Python the plugin supports (pyproject's requires-python)
PYTHON = "3.11"
SHEBANG = b"#!/usr/bin/env python3\n"
#: the zipapp's __main__.py; BUILD is replaced by the id of the files beside it
MAIN = f'''"""kubectl-bootc from its krew archive. The first run unpacks the archive into
$XDG_CACHE_HOME/kubectl-bootc/<build> (else ~/.cache): run from the zip, Python
would compile every module on every start; from there it caches their bytecode.
Where nothing can be written it runs from the zip.
"""

import os
import sys

BUILD = "@BUILD@"


def _unpacked(archive):
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    target = os.path.join(cache, "kubectl-bootc", BUILD)
    if os.path.isdir(target):
        return target
    import shutil
    import tempfile
    import zipfile

    tmp = None
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = tempfile.mkdtemp(dir=os.path.dirname(target))
        with zipfile.ZipFile(archive) as bundle:
            bundle.extractall(tmp)
        os.rename(tmp, target)  # a concurrent first run may have won: its copy is the same
    except OSError:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return target if os.path.isdir(target) else None


sys.path[0] = _unpacked(sys.path[0]) or sys.path[0]

from {ENTRY} import main  # noqa: E402

sys.exit(main())
'''
#: modules imported only on a path the plugin never takes, and why
NOT_BUNDLED = {
    "bootc_operator.kube.client": "load_api_client (kubernetes_asyncio), which kube/__init__ "
    "imports only when asked for it; the plugin uses kube.lite",
}
#: distributions no import statement names, and why they are needed
EXTRA_DISTRIBUTIONS = {
    "tzdata": "IANA time zones for maintenance windows where the OS has none (zoneinfo)",
}
#: what a pure-Python bundle leaves out of a distribution
COMPILED = (".so", ".pyd", ".dylib", ".pyc", ".pxd", ".pyx", ".c", ".h")


def version() -> str:
    return f"v{bootc_operator.__version__}"


def archive_name() -> str:
    return f"{BIN}-{version()}.tar.gz"


def uri() -> str:
    return f"{RELEASES}/{version()}/{archive_name()}"


def _module_file(name: str) -> Path | None:
    path = ROOT.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def _imports(name: str, path: Path) -> set[str]:
    """Every module name an import statement of module NAME (at PATH) names."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return found


def plugin_modules() -> tuple[dict[str, Path], set[str]]:
    """The project's modules the plugin imports (name to file), and the top-level
    names of everything else they import."""
    modules: dict[str, Path] = {}
    others: set[str] = set()
    todo = [ENTRY]
    while todo:
        name = todo.pop()
        if name in modules or name in NOT_BUNDLED:
            continue
        path = _module_file(name)
        if path is None:  # ``from package import function``: not a module
            continue
        modules[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        for imported in _imports(name, path):
            if imported.split(".")[0] == "bootc_operator":
                todo.append(imported)
            elif imported:
                others.add(imported.split(".")[0])
    return modules, {m for m in others if m not in sys.stdlib_module_names}


def distributions(top_level: Iterable[str]) -> list[md.Distribution]:
    """The distributions providing TOP_LEVEL (import names), the extra ones, and all
    their requirements, by name."""
    providers = md.packages_distributions()
    todo = [d for name in top_level for d in providers.get(name, [])]
    todo += list(EXTRA_DISTRIBUTIONS)
    env = {"extra": "", "python_version": PYTHON, "python_full_version": f"{PYTHON}.0"}
    found: dict[str, md.Distribution] = {}
    while todo:
        dist = md.distribution(todo.pop())
        key = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
        if key in found:
            continue
        found[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return [found[k] for k in sorted(found)]


def _wanted(relative: str) -> bool:
    """A file of an installed distribution the bundle takes."""
    if relative.startswith("..") or "__pycache__" in relative or relative.endswith(COMPILED):
        return False
    if ".dist-info/" in relative:
        name = relative.split(".dist-info/", 1)[1]
        return name == "METADATA" or name.startswith("licenses/") or "LICEN" in name.upper()
    return True


def contents() -> dict[str, bytes]:
    """Every file of the zipapp, by its path inside it."""
    modules, others = plugin_modules()
    files = {f"{'/'.join(n.split('.'))}" + ("/__init__.py" if p.name == "__init__.py" else ".py"): p
             for n, p in modules.items()}  # fmt: skip
    out = {name: path.read_bytes() for name, path in files.items()}
    for dist in distributions(others):
        for entry in dist.files or []:
            relative = str(entry)
            if _wanted(relative):
                out[relative] = Path(str(dist.locate_file(entry))).read_bytes()
    build = hashlib.sha256()
    for name in sorted(out):
        build.update(f"{name}\0{len(out[name])}\0".encode() + out[name])
    out["__main__.py"] = MAIN.replace("@BUILD@", build.hexdigest()[:16]).encode()
    return out


def zipapp(files: dict[str, bytes]) -> bytes:
    """FILES as an executable zipapp, byte for byte the same for the same files."""
    buffer = io.BytesIO()
    buffer.write(SHEBANG)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, files[name])
    return buffer.getvalue()


def tarball(members: dict[str, tuple[bytes, int]]) -> bytes:
    """MEMBERS (name: (data, mode)) as a reproducible .tar.gz."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            data, mode = members[name]
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0)


def build(out_dir: Path) -> Path:
    """Write the archive into OUT_DIR; its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / archive_name()
    path.write_bytes(tarball({BIN: (zipapp(contents()), 0o755)}))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_text(text: str, digest: str) -> str:
    """The manifest TEXT with the platform's ``uri`` and ``sha256`` set (comments and
    layout kept)."""
    text, n_uri = re.subn(r"(?m)^(\s+uri: ).*$", rf"\g<1>{uri()}", text)
    text, n_sha = re.subn(r"(?m)^(\s+sha256: ).*$", rf'\g<1>"{digest}"', text)
    if (n_uri, n_sha) != (1, 1):
        raise ValueError(f"{MANIFEST}: expected one platform with uri and sha256")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/krew-archive", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "krew")
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    path = build(args.out)
    digest = sha256(path)
    print(f"{path} sha256 {digest}")
    wanted = manifest_text(MANIFEST.read_text(), digest)
    return write_or_check(MANIFEST, wanted, check=args.check, regenerate="hack/krew-archive")


if __name__ == "__main__":
    sys.exit(main())
