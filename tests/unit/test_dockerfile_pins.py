"""The adjuster image installs the same bytes on every rebuild: the Dockerfile's pins.

The base image by digest, every pip install from a lock with --require-hashes (wheels only),
the lock covering the runtime dependencies in pyproject.toml within pyproject's bounds, the
build tools of the raybridge wheel locked too; and a build context (.dockerignore) of what the Dockerfile copies,
without a local build such as the searches an editable install compiled in place. No Docker needed: the files are read.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
#: pyproject dependencies the adjuster never imports (every test that runs `adjuster run` as a process runs it with
#: them unimportable: tests/adjuster_world.py SLIM_ADJUSTER), so the image leaves them out.
NOT_IN_THE_IMAGE = {"ray", "rich", "nvidia-ml-py", "shtab"}
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}")


def _instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in DOCKERFILE.splitlines() if not line.lstrip().startswith("#")))
    return [line.strip() for line in text.splitlines() if line.strip()]


def _base_images() -> list[str]:
    args = {}
    images = []
    for line in _instructions():
        word, _, rest = line.partition(" ")
        if word.upper() == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            args[name.strip()] = value.strip()
        if word.upper() == "FROM":
            image = rest.split()[0]
            images.append(re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), ""), image))
    return images


def _shell_commands(line: str) -> list[list[str]]:
    """A RUN line's commands, split at `&&`, `||` and `;` outside quotes (a `python -c "a; b"` is one command)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in (";", "&&", "||"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [words for words in commands if words]


def _pip_commands() -> list[list[str]]:
    commands = []
    for line in _instructions():
        if line.upper().startswith("RUN "):
            for words in _shell_commands(line[4:]):
                if words[:1] == ["pip"] or words[:3] == ["python", "-m", "pip"]:
                    commands.append(words[words.index("pip") + 1:] if "pip" in words else words)
    return commands


def _lock(name: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a pip-compile --generate-hashes lock."""
    text = re.sub(r"\\\n", " ", (REPO / name).read_text())
    pins = {}
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        requirement, *options = line.split()
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)", requirement)
        assert match, f"{name}: {requirement!r} is not pinned with =="
        hashes = [o.split("=", 1)[1] for o in options if o.startswith("--hash=")]
        pins[canonicalize_name(match.group(1))] = (match.group(2), hashes)
    return pins


def test_every_base_image_is_pinned_by_digest() -> None:
    images = _base_images()
    assert images, "no FROM found"
    for image in images:
        assert DIGEST.search(image), f"FROM {image} is pinned by tag only"


def test_every_pip_install_is_from_a_lock_with_hashes_or_a_local_wheel_without_dependencies() -> None:
    commands = _pip_commands()
    assert commands
    for words in commands:
        verb = words[0]
        if "-r" in words:
            assert verb in ("install", "download"), words
            assert "--require-hashes" in words and "--only-binary=:all:" in words, f"pip {' '.join(words)}"
            assert words[words.index("-r") + 1].rsplit("/", 1)[-1] in ("requirements.lock", "requirements-build.lock"), words
        else:
            # the raybridge wheel itself: nothing fetched from an index, no unpinned build tools
            assert "--no-deps" in words, f"pip {' '.join(words)} may fetch unpinned dependencies"
            assert verb == "wheel" and "--no-build-isolation" in words or verb == "install" and "--no-index" in words, words


@pytest.mark.parametrize("lock", ["requirements.lock", "requirements-build.lock"])
def test_every_locked_release_has_hashes(lock: str) -> None:
    pins = _lock(lock)
    assert pins
    for name, (version, hashes) in pins.items():
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), f"{lock}: {name}=={version} without sha256 hashes"


def test_the_lock_covers_the_runtime_dependencies_in_pyproject_within_their_bounds() -> None:
    pins = _lock("requirements.lock")
    declared = [Requirement(text) for text in PYPROJECT["project"]["dependencies"]]
    assert NOT_IN_THE_IMAGE <= {canonicalize_name(r.name) for r in declared}, "a left-out name is no longer in pyproject"
    for requirement in declared:
        name = canonicalize_name(requirement.name)
        if name in NOT_IN_THE_IMAGE:
            continue
        assert name in pins, f"pyproject's {requirement} is not in requirements.lock"
        assert requirement.specifier.contains(pins[name][0], prereleases=True), f"requirements.lock pins {name}=={pins[name][0]}, outside {requirement}"


def test_the_lock_inputs_say_what_pyproject_says() -> None:
    wanted = {canonicalize_name(Requirement(t).name): str(Requirement(t).specifier) for t in PYPROJECT["project"]["dependencies"]}
    for line in (REPO / "requirements.in").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            assert wanted.get(canonicalize_name(requirement.name)) == str(requirement.specifier), line


def test_the_build_lock_covers_the_build_system() -> None:
    pins = _lock("requirements-build.lock")
    for text in PYPROJECT["build-system"]["requires"]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins and requirement.specifier.contains(pins[name][0]), f"requirements-build.lock lacks {requirement}"


def _docker_ignores(path: str) -> bool:
    """Whether .dockerignore leaves `path` out of the build context: the last pattern that matches it or a folder
    above it decides, `!` re-including (Docker's rules: `*` within a name, `**` across folders)."""
    ignored = False
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keep, pattern = line.startswith("!"), line.lstrip("!").rstrip("/")
        regex = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        parts = path.split("/")
        if any(re.fullmatch(regex, "/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            ignored = not keep
    return ignored


def test_the_build_context_holds_what_the_dockerfile_copies_and_no_local_build() -> None:
    copied = [words[1:-1] for words in (line.split() for line in _instructions()) if words[0].upper() == "COPY" and not words[1].startswith("--from")]
    sources = [source for group in copied for source in group]
    assert "setup.py" in sources and "raybridge" in sources, sources
    for source in [*sources, "raybridge/adjuster/decision/exact_search.py", "raybridge/adjuster/decision/searches.py"]:
        assert not _docker_ignores(source), f"the Dockerfile copies {source}, which .dockerignore leaves out"
    for local in ["raybridge/adjuster/decision/_exact_search_native.cpython-311-x86_64-linux-gnu.so",
                  "raybridge/adjuster/decision/__pycache__/packing.cpython-311.pyc", ".venv/bin/python", "build/mypyc/x.c",
                  "tests/unit/test_dockerfile_pins.py", ".git/HEAD"]:
        assert _docker_ignores(local), f"{local} reaches the image's build context"
