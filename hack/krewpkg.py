"""The krew archive of ``kubectl bootc`` and the release's manifest rendered for it.

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

Its ``__main__`` unpacks the zip once into the user's cache directory (per build,
mode 0700) and runs from there, so Python caches the bytecode: run from the zip,
every start would compile every module (about twice the start-up time). It runs
from that directory only when no one but the user could have put code there
(:data:`TRUST`: it and kubectl-bootc's directory are the user's and writable by no
one else, every directory above them the user's or root's and writable by no one
else but a root-owned sticky one); else it says why on stderr and runs from the zip.

The archive is reproducible: entries sorted, fixed times and modes, the zip stored
(the tar is gzipped, once), so its sha256 depends only on those files.

The repository holds no sha256: it changes with every edit of a bundled module.
``plugins/krew/bootc.yaml`` is a manifest *template* in krew-release-bot's format
(Go text/template: ``{{ .TagName }}`` is the release's tag, ``{{ addURIAndSha
"URL" .TagName }}`` becomes the ``uri:`` and ``sha256:`` lines of the asset at
URL, itself a template of the tag). At release time :func:`release` builds the
archive of the tag and renders the final manifest (:func:`render`, the subset of
the bot's template language the template uses) into one directory: both go on
the GitHub release, the manifest to krew-index (or krew-release-bot renders the
same template from the published asset). ``e2e/test_krew.py`` renders a release
into a temporary directory, installs it as krew would and runs it through the
real kubectl.

    python -m hack.krewpkg [--version vX.Y.Z] [--out DIR]      (hack/krew-archive)
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
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement

import bootc_operator

ROOT = Path(__file__).resolve().parents[1]
#: the manifest template (krew-release-bot's format); a release renders it
TEMPLATE = ROOT / "plugins" / "krew" / "bootc.yaml"
API_VERSION = "krew.googlecontainertools.github.com/v1alpha2"
ENTRY = "bootc_operator.kubectl.main"
BIN = "kubectl-bootc"
#: the oldest Python the plugin supports (pyproject's requires-python)
PYTHON = "3.11"
SHEBANG = b"#!/usr/bin/env python3\n"
#: the cache's trust check in the zipapp's __main__.py (standard library only; the
#: unit tests run it): what the plugin imports from a directory it runs as code
TRUST = r'''
def _untrusted(target, own=1, uid=None):
    """Why directory TARGET may not be trusted with code user UID (default: this
    process's) runs ("" if it may): TARGET and the OWN directories above it
    (kubectl-bootc's) must be the user's and writable by no one else; every
    directory above those the user's or root's, writable by no one else (a
    root-owned sticky one, such as /tmp, aside). Both the path as given and the
    path its symlinks lead to are checked."""
    import stat

    uid = os.geteuid() if uid is None else uid
    chains = set()
    for start in (os.path.abspath(target), os.path.realpath(target)):
        path, depth = start, 0
        while True:
            chains.add((path, depth <= own))
            parent = os.path.dirname(path)
            if parent == path:
                break
            path, depth = parent, depth + 1
    for path, ours in sorted(chains):
        try:
            st = os.stat(path)
        except OSError as err:
            return "%s: %s" % (path, err.strerror)
        if not stat.S_ISDIR(st.st_mode):
            return "%s is not a directory" % path
        if st.st_uid != uid and (ours or st.st_uid != 0):
            return "%s is owned by uid %d, not %d" % (path, st.st_uid, uid)
        sticky = st.st_mode & stat.S_ISVTX and st.st_uid == 0 and not ours
        if st.st_mode & 0o022 and not sticky:
            return "%s is writable by its group or others (mode %o)" % (
                path,
                stat.S_IMODE(st.st_mode),
            )
    return ""
'''
#: the zipapp's __main__.py; BUILD is replaced by the id of the files beside it
MAIN = (
    '''"""kubectl-bootc from its krew archive. The first run unpacks the archive into
$XDG_CACHE_HOME/kubectl-bootc/<build> (else ~/.cache), directories of mode 0700: run
from the zip, Python would compile every module on every start; from there it caches
their bytecode. It runs from that directory only if no one but the user (and root)
could have written it (``_untrusted``): else, or where nothing can be written, it
runs from the zip.
"""

import os
import sys

BUILD = "@BUILD@"
'''
    + TRUST
    + f"""

def _unpacked(archive):
    if not hasattr(os, "geteuid"):
        return None  # no owners to check: run from the zip
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    home = os.path.join(cache, "kubectl-bootc")
    target = os.path.join(home, BUILD)
    if not os.path.isdir(target):
        import shutil
        import tempfile
        import zipfile

        tmp = None
        try:
            os.makedirs(cache, mode=0o700, exist_ok=True)
            os.makedirs(home, mode=0o700, exist_ok=True)
            tmp = tempfile.mkdtemp(dir=home)
            with zipfile.ZipFile(archive) as bundle:
                bundle.extractall(tmp)
            os.rename(tmp, target)  # a concurrent first run may have won: its copy is the same
        except OSError:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        if not os.path.isdir(target):
            return None  # nothing can be written here: run from the zip
    why = _untrusted(target)
    if why:
        sys.stderr.write(
            "kubectl-bootc: not running the copy in %s: %s; running from the archive\\n"
            % (target, why)
        )
        return None
    return target


sys.path[0] = _unpacked(sys.path[0]) or sys.path[0]

from {ENTRY} import main  # noqa: E402

sys.exit(main())
"""
)
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
    """The release tag of this tree's version (krew wants ``v`` and semver)."""
    return f"v{bootc_operator.__version__}"


def archive_name(tag: str) -> str:
    return f"{BIN}-{tag}.tar.gz"


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


def build(out_dir: Path, tag: str) -> Path:
    """Write the archive of release TAG into OUT_DIR; its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / archive_name(tag)
    path.write_bytes(tarball({BIN: (zipapp(contents()), 0o755)}))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


#: the actions of krew-release-bot's template language that :func:`render` knows:
#: a value (``.TagName``, or ``.Version``: the tag's numbers) and ``addURIAndSha``
_ACTION = re.compile(
    r'\{\{\s*(?:\.(?P<field>TagName|Version)|addURIAndSha\s+"(?P<url>[^"]*)"\s+\.TagName)\s*\}\}'
)


def render(template: str, tag: str, sha256_of: Callable[[str], str]) -> str:
    """TEMPLATE (krew-release-bot's format) rendered for release TAG, as the bot
    does: ``addURIAndSha`` becomes ``uri: URL`` and, indented by 4 (the bot's
    fixed indent), ``sha256:`` of SHA256_OF(URL). Any other action is an error,
    not left in the manifest."""
    values = {"TagName": tag, "Version": re.sub(r"^v", "", tag)}

    def field(match: re.Match[str]) -> str:
        if match["field"] is None:
            raise ValueError(f"addURIAndSha inside addURIAndSha's URL: {match[0]}")
        return values[match["field"]]

    def action(match: re.Match[str]) -> str:
        if match["field"] is not None:
            return values[match["field"]]
        url = _ACTION.sub(field, match["url"])
        return f"uri: {url}\n    sha256: {sha256_of(url)}"

    text = _ACTION.sub(action, template)
    for number, line in enumerate(text.splitlines(), 1):
        if "{{" in line or "}}" in line:
            raise ValueError(f"line {number}: a template action render does not know: {line}")
    return text


def problems(manifest: Any) -> list[str]:
    """What krew's manifest rules (those of its validate-krew-manifest this plugin
    could break) find wrong in MANIFEST, a parsed rendered manifest; [] when none."""
    if not isinstance(manifest, dict):
        return ["not a YAML mapping"]
    found: list[str] = []

    def need(ok: object, problem: str) -> None:
        if not ok:
            found.append(problem)

    need(manifest.get("apiVersion") == API_VERSION, f"apiVersion is not {API_VERSION}")
    need(manifest.get("kind") == "Plugin", "kind is not Plugin")
    name = (manifest.get("metadata") or {}).get("name")
    need(isinstance(name, str) and re.fullmatch(r"[a-z][a-z0-9-]*", name), f"name {name!r}")
    spec = manifest.get("spec") or {}
    tag = spec.get("version")
    need(isinstance(tag, str) and re.fullmatch(r"v\d+\.\d+\.\d+", tag), f"version {tag!r}")
    short = spec.get("shortDescription")
    need(isinstance(short, str) and 0 < len(short) <= 50, "shortDescription: 1 to 50 characters")
    need(str(spec.get("homepage", "")).startswith("https://"), "homepage: not https://")
    need(spec.get("description"), "no description")
    platforms = spec.get("platforms")
    need(isinstance(platforms, list) and platforms, "no platforms")
    for i, platform in enumerate(platforms if isinstance(platforms, list) else []):
        at = f"platforms[{i}]"
        selector = platform.get("selector") or {}
        need(selector.get("matchLabels") or selector.get("matchExpressions"), f"{at}: no selector")
        for expr in selector.get("matchExpressions") or []:
            need(expr.get("key") in ("os", "arch"), f"{at}: selector key {expr.get('key')!r}")
            need(
                expr.get("operator") in ("In", "NotIn"), f"{at}: operator {expr.get('operator')!r}"
            )
            need(isinstance(expr.get("values"), list) and expr["values"], f"{at}: no values")
        uri = str(platform.get("uri", ""))
        need(uri.startswith("https://") and f"/{tag}/" in uri, f"{at}: uri {uri!r}")
        digest = platform.get("sha256")
        need(isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest), f"{at}: sha256")
        files = platform.get("files") or []
        need(platform.get("bin") == BIN, f"{at}: bin is not {BIN}")
        need(any(f.get("from") == platform.get("bin") for f in files), f"{at}: bin not in files")
        need(all(f.get("from") and f.get("to") for f in files), f"{at}: a file without from/to")
    return found


def release(tag: str, out_dir: Path) -> tuple[Path, Path]:
    """Build the archive of release TAG into OUT_DIR and render the manifest
    template beside it (``bootc.yaml``, uri and sha256 of that archive): what
    the release publishes. The archive and manifest paths."""
    if not re.fullmatch(r"v\d+\.\d+\.\d+", tag):
        raise ValueError(f"--version {tag}: a release tag is vMAJOR.MINOR.PATCH (krew's rule)")
    if tag != version():
        raise ValueError(
            f"--version {tag}: this tree is {version()} (bootc_operator.__version__); "
            "release the tag of the version the tree says"
        )
    archive = build(out_dir, tag)
    digest = sha256(archive)

    def sha256_of(url: str) -> str:
        if url.rpartition("/")[2] != archive.name:
            raise ValueError(f"{TEMPLATE}: addURIAndSha names {url}, the archive is {archive.name}")
        return digest

    text = render(TEMPLATE.read_text(), tag, sha256_of)
    wrong = problems(yaml.safe_load(text))
    if wrong:
        raise ValueError(f"{TEMPLATE} renders a manifest krew refuses: {'; '.join(wrong)}")
    manifest = out_dir / TEMPLATE.name
    manifest.write_text(text)
    return archive, manifest


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hack/krew-archive", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--version", default=version(), help="the release tag (default: %(default)s, the tree's)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "krew")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        archive, manifest = release(args.version, args.out)
    except ValueError as exc:
        print(f"hack/krew-archive: {exc}", file=sys.stderr)
        return 2
    print(f"{archive} sha256 {sha256(archive)}")
    print(f"{manifest} (the release's krew manifest)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
