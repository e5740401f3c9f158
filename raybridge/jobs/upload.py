"""Listing a local working dir as Ray's Job API client would upload it, without following a link.

ray@2.60 python/ray/_private/runtime_env/packaging.py (_zip_files, _dir_travel,
get_excludes_from_ignore_files) walks the directory, skipping every path that the
runtime env's `excludes` (relative to the working dir) or a `.gitignore` (unless
RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1, dashboard/modules/dashboard_sdk.py) or
`.rayignore` of the directory being walked (relative to it) match, with Ray's
own gitwildmatch implementation. This module walks the same way with the same
matcher, so what `core.upload` counts is what Ray zips; unlike Ray it never
follows a symlink: it reports where the link leads. A regular file with more
names (hard links) than the listing found is reported as reaching outside it:
its other names may be anywhere on the file system, and only a count can
prove them all inside.

It decides nothing (`core.upload.plan_upload` does) and prints nothing.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional

from raybridge.jobs.decision.upload import Entry, UploadPlan, format_bytes, looks_secret, plan_upload
from raybridge.errors import BadInput, InfraError

#: Bound on the entries listed: a working dir is source code, not a data set.
MAX_ENTRIES = 200_000
IGNORE_GITIGNORE_ENV = "RAY_RUNTIME_ENV_IGNORE_GITIGNORE"

Matcher = Callable[[Path], bool]


def _ray_internal(module: str, name: str) -> Any:
    """`name` of Ray's internal `module`, which the filter must share with Ray's client (its matcher, its limit); a Ray
    release that moved it would make the filter disagree with what Ray uploads, so raybridge refuses to go on."""
    import importlib

    from raybridge.gpu.ray_start import ensure_ray_can_start

    ensure_ray_can_start()  # a Ray that dies at import (a broken amdsmi) is said as such, before importing it
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        import ray

        raise InfraError(
            f"Ray {ray.__version__} has no {module}.{name}, which raybridge's upload filter uses to see the working dir "
            "as Ray's client uploads it; install a Ray release raybridge supports (pyproject.toml)"
        ) from None


def _matcher(base: Path, lines: list[str]) -> Matcher:
    PathSpec = _ray_internal("ray._private.thirdparty.pathspec", "PathSpec")
    spec = PathSpec.from_lines("gitwildmatch", lines)
    return lambda path: bool(spec.match_file(str(path.relative_to(base))))


def _ignore_file_matchers(directory: Path, include_gitignore: bool) -> list[Matcher]:
    found = []
    for name in (".gitignore", ".rayignore") if include_gitignore else (".rayignore",):
        path = directory / name
        if path.is_file() and not path.is_symlink():
            try:
                lines = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            found.append(_matcher(directory, lines))
    return found


def _inside(path: Path, root: Path) -> bool:
    target = os.path.realpath(path)
    return target == str(root) or target.startswith(str(root) + os.sep)


FileKey = tuple[int, int]


def list_working_dir(root: Path, excludes: list[str], include_gitignore: bool = True) -> list[Entry]:
    """Every path Ray would reach under `root` (absolute, resolved), less what its ignore rules skip."""
    entries: list[Entry] = []
    #: Files with more than one name: their names listed here (as indices into `entries`), and how many they have.
    linked: dict[FileKey, tuple[list[int], int]] = {}
    #: Symlinks inside the directory to a file with more than one name: the same, by that file.
    linked_to: dict[FileKey, tuple[list[int], int]] = {}
    base = [_matcher(root, excludes)] if excludes else []
    stack: list[tuple[Path, list[Matcher]]] = [(root, base)]
    while stack:
        directory, inherited = stack.pop()
        matchers = inherited + _ignore_file_matchers(directory, include_gitignore)
        if any(match(directory) for match in matchers):
            continue  # as Ray does: a directory's own ignore files apply to it too ("*" skips it whole)
        try:
            children = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            raise BadInput(f"workingDir: {str(directory)!r} cannot be read: {exc.strerror}") from None
        for child in children:
            path = Path(child.path)
            if any(match(path) for match in matchers):
                continue
            relative = path.relative_to(root).as_posix()
            if len(entries) >= MAX_ENTRIES:
                raise BadInput(
                    f"workingDir: more than {MAX_ENTRIES} files and directories under {str(root)!r}; "
                    "leave out what the job does not need (.gitignore, .rayignore or runtimeEnv.excludes)"
                )
            if child.is_symlink():
                inside = _inside(path, root)
                if path.is_dir():
                    entries.append(Entry(relative, "dir-link", inside=inside))
                else:
                    info = path.stat() if inside and path.is_file() else None
                    if info is not None and info.st_nlink > 1:
                        linked_to.setdefault((info.st_dev, info.st_ino), ([], info.st_nlink))[0].append(len(entries))
                    target = Path(os.path.realpath(path)).relative_to(root).as_posix() if inside else ""
                    entries.append(Entry(relative, "file-link", info.st_size if info else 0, inside=info is not None, target=target))
            elif child.is_dir(follow_symlinks=False):
                entries.append(Entry(relative, "dir"))
                stack.append((path, matchers))
            elif child.is_file(follow_symlinks=False):
                info = child.stat(follow_symlinks=False)
                if info.st_nlink > 1:
                    linked.setdefault((info.st_dev, info.st_ino), ([], info.st_nlink))[0].append(len(entries))
                entries.append(Entry(relative, "file", info.st_size))
            else:
                entries.append(Entry(relative, "other"))
    return _with_hard_links(entries, linked, linked_to)


def _with_hard_links(
    entries: list[Entry], linked: dict[FileKey, tuple[list[int], int]], linked_to: dict[FileKey, tuple[list[int], int]]
) -> list[Entry]:
    """`entries` with each name of a file that has a name outside the listing marked (`inside` False), as each
    symlink to such a file; and each name of a file that is named like a secret elsewhere in the listing, and each
    symlink to it, given that name as its `target` (a hard link uploads what the secret's name holds)."""
    entries = list(entries)
    for key in linked.keys() | linked_to.keys():
        names, count = linked.get(key) or ([], linked_to[key][1])  # a symlink's target may lie where nothing is listed
        named_outside = len(names) < count  # st_nlink counts every name; those not listed are beyond the upload
        secret = next((entries[i].path for i in names if looks_secret(entries[i].path)), "")
        for i in names:
            if named_outside:
                entries[i] = replace(entries[i], inside=False)
            elif secret and entries[i].path != secret:
                entries[i] = replace(entries[i], target=secret)
        for i in linked_to.get(key, ([], 0))[0]:  # a symlink uploads what its target holds
            entries[i] = replace(entries[i], inside=False) if named_outside else replace(entries[i], target=secret or entries[i].target)
    return entries


def _listing_rules(runtime_env: Optional[dict[str, Any]]) -> tuple[list[str], bool]:
    """What Ray's client skips in every directory it uploads: the runtime env's `excludes`, and whether it reads
    `.gitignore` (not with RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1)."""
    excludes = [str(e) for e in (runtime_env or {}).get("excludes") or []]
    return excludes, os.environ.get(IGNORE_GITIGNORE_ENV, "0") != "1"


def plan_working_dir_upload(working_dir: str, runtime_env: Optional[dict[str, Any]]) -> UploadPlan:
    """What of `working_dir` (a local directory) Ray will upload, and what raybridge leaves out of it."""
    root = Path(working_dir).expanduser().resolve()
    plan = plan_upload(list_working_dir(root, *_listing_rules(runtime_env)))
    too_large = _over_upload_limit("workingDir", str(root), plan)
    if too_large:  # refused before Ray reads (and hashes) every byte of it, a sparse file's too
        raise BadInput(f"{too_large}; leave out what the job does not need (.gitignore, .rayignore or runtimeEnv.excludes)")
    return plan


def _over_upload_limit(field_name: str, root: str, plan: UploadPlan) -> Optional[str]:
    """Why Ray would refuse to upload what `plan` lists under `root`, from the listing alone; None when it would not."""
    limit = _ray_package_limit()
    if plan.bytes < limit:
        return None
    return (f"{field_name}: {format_bytes(plan.bytes)} in {plan.files} files under {root!r}, more than Ray uploads "
            f"({format_bytes(limit)}, RAY_max_grpc_message_size)")


def _ray_package_limit() -> int:
    """The largest package Ray's Job API client uploads (ray@2.60 runtime_env/packaging.py GCS_STORAGE_MAX_SIZE:
    the gRPC message limit; packages are zipped uncompressed, so their size is the files' size)."""
    return int(_ray_internal("ray._private.runtime_env.packaging", "GCS_STORAGE_MAX_SIZE"))


#: Runtime env fields whose text value may name a local file that Ray's client reads and sends (a requirements or
#: environment file): ray@2.60 runtime_env/pip.py, conda.py and uv.py read it on the submitting machine.
FILE_FIELDS = ("pip", "conda", "uv")


def local_py_modules(runtime_env: Optional[dict[str, Any]]) -> list[str]:
    """The `py_modules` entries that are local paths (Ray's client zips and uploads each)."""
    from raybridge.core.runtime_env import is_uri

    modules = (runtime_env or {}).get("py_modules")
    return [str(m) for m in modules if isinstance(m, str) and not is_uri(m)] if isinstance(modules, list) else []


def py_module_uploads(runtime_env: Optional[dict[str, Any]]) -> list[tuple[str, UploadPlan]]:
    """What each local `py_modules` directory uploads, listed and judged as the working dir is."""
    rules = _listing_rules(runtime_env)
    plans = []
    for module in local_py_modules(runtime_env):
        root = Path(module).expanduser().resolve()
        if root.is_dir():
            plans.append((str(root), plan_upload(list_working_dir(root, *rules))))
    return plans


def local_path_problems(runtime_env: Optional[dict[str, Any]]) -> list[str]:
    """Local paths of the runtime env that would send what the working dir's filter keeps home, one sentence each.

    A `py_modules` directory holding what the filter leaves out is refused (its left-out paths would have to be
    excluded from every uploaded directory alike, the working dir's files of the same name too); so is a
    `pip`/`conda`/`uv` file that looks like a secret, is no regular file or is reached through a link."""
    from raybridge.jobs.decision.upload import looks_secret

    problems = []
    for module in local_py_modules(runtime_env):
        path = Path(module).expanduser()
        if path.is_symlink():
            problems.append(f"runtimeEnv.py_modules: {module!r} is a symlink; give the directory itself")
        elif not path.exists():
            problems.append(f"runtimeEnv.py_modules: {module!r} does not exist")
    for root, plan in py_module_uploads(runtime_env):
        if plan.left_out:
            problems.append(f"runtimeEnv.py_modules: {root!r} holds what raybridge never uploads: {plan.left_out_text()}; "
                            "move it out of the module")
        else:
            too_large = _over_upload_limit("runtimeEnv.py_modules", root, plan)  # refused from the listing, as the working dir is
            if too_large:
                problems.append(too_large)
    for field_name in FILE_FIELDS:
        value = (runtime_env or {}).get(field_name)
        if not isinstance(value, str) or not value.strip():
            continue
        path = Path(value).expanduser()
        if not (path.exists() or path.is_symlink()):
            continue  # a package or environment name, not a file
        if path.is_symlink() or not path.is_file():
            problems.append(f"runtimeEnv.{field_name}: {value!r} is not a regular file (Ray's client would read it and send it)")
        elif looks_secret(path.name):
            problems.append(f"runtimeEnv.{field_name}: {value!r} looks like a secret; Ray's client would read it and send it")
    return problems


def zip_working_dir(working_dir: str, runtime_env: Optional[dict[str, Any]], max_bytes: int, why: str) -> tuple[bytes, UploadPlan]:
    """The working dir zipped as Ray's client would upload it (the same listing, less what raybridge leaves out), for
    a cluster to fetch without raybridge; BadInput once the zip passes `max_bytes` (`why` says where it has to fit).

    Files are read as listed, never following a link out of the directory (a link inside it is read as its target
    there), and deflated; their mode's executable bits are kept."""
    import io
    import stat as stat_module
    import zipfile

    root = Path(working_dir).expanduser().resolve()
    entries = list_working_dir(root, *_listing_rules(runtime_env))
    plan = plan_upload(entries)
    left_out = {path for path, _ in plan.left_out}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for entry in entries:
            if entry.kind not in ("file", "file-link") or entry.path in left_out:
                continue
            path = root / entry.path
            try:
                flags = os.O_RDONLY | (os.O_NOFOLLOW if entry.kind == "file" else 0)
                fd = os.open(path if entry.kind == "file" else os.path.realpath(path), flags)
                with os.fdopen(fd, "rb") as handle:
                    mode = os.fstat(handle.fileno()).st_mode
                    data = handle.read(max_bytes + 1)
            except OSError as exc:
                raise BadInput(f"workingDir: {entry.path!r} cannot be read: {exc.strerror}") from None
            info = zipfile.ZipInfo(entry.path, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat_module.S_IFREG | (0o755 if mode & 0o111 else 0o644)) << 16
            archive.writestr(info, data)
            if buffer.tell() > max_bytes:
                break
    zipped = buffer.getvalue()
    if len(zipped) > max_bytes:
        raise BadInput(
            f"workingDir: {str(root)!r} ({plan.files} files, {format_bytes(plan.bytes)}) zips to more than {format_bytes(max_bytes)}, "
            f"{why}; give workingDir a URI (s3://, gs://, https://), leave out what the job does not need (.rayignore), "
            "or submit without --no-wait (raybridge then uploads it)"
        )
    return zipped, plan
