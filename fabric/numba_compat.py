"""Every change wafersim makes to Numba and numba-cuda, with the versions each was tested on.

The engine reaches into Numba's internals in a few places: it copies IR scopes faster, takes a
compiler flag Numba does not offer as an option, locks Numba's cache saves, reads its cache
index, keys the CUDA kernels' disk cache on their sources and fixes the CUDA simulator. Each is
a :class:`Patch` here with the window of versions it was tested on. :func:`install` puts one in
place only inside its window and where the body's own check of the internals it touches holds;
anywhere else Numba stays as it is, with a debug line saying so, and the engine runs as on stock
Numba: the same results, slower or without the optimisation. The bodies stay in the modules
that use them (``Patch.body`` names each); this module holds the windows and the guards, and
imports nothing of Numba, so that ``wafersim --version`` can name the patches cheaply.

Two parts of the engine are POSIX-only (:class:`PosixCall`): the machine's compile lock
(``fcntl.flock``) and the engine's compile in a second process (``os.posix_spawn``). Where
either is missing the engine compiles in its own process, without the lock.
"""

from __future__ import annotations

import importlib
import logging
import re
import sys
from dataclasses import dataclass

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class PosixCall:
    """A POSIX call the engine uses where the platform has it."""

    name: str  # what the engine uses it for
    call: str  # "module.function"
    without: str  # what the engine does where the platform lacks it


COMPILE_LOCK = PosixCall(
    "compile_lock",
    "fcntl.flock",
    "each process compiles the engine on its own, without the machine's compile lock",
)
BACKGROUND_COMPILE = PosixCall(
    "background_compile",
    "os.posix_spawn",
    "the engine compiles in the job's own process, at its first run",
)


def in_window(version: str, window: tuple[str, str]) -> bool:
    """Whether the release ``version`` (its leading numbers) is inside ``window``."""
    low, high = _bounds(window)
    try:
        return low <= _release(version) < high
    except ValueError:  # no release number to compare: not a version tested
        return False


def _bounds(window: tuple[str, str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(">=low", "<high")`` as two releases; a window of any other form is an error."""
    if len(window) != 2 or not window[0].startswith(">=") or not window[1].startswith("<"):
        raise ValueError(f"a patch's window is ('>=low', '<high'), got {window!r}")
    return _release(window[0][2:]), _release(window[1][1:])


def _release(version: str) -> tuple[int, ...]:
    match = re.match(r"\d+(\.\d+)*", version.strip())
    if match is None:
        raise ValueError(f"{version!r} is not a version")
    return tuple(int(part) for part in match.group(0).split("."))


@dataclass(frozen=True)
class Patch:
    """A change to Numba's internals (or a read of them), the versions it was tested on and
    what the engine does without it."""

    name: str
    body: str  # "module:function" that installs it and returns whether it could
    numba: tuple[str, str]  # the tested window of numba, as (">=low", "<high")
    without: str  # what the engine does where it is not installed
    numba_cuda: tuple[str, str] | None = None  # a patch of numba.cuda: numba-cuda's window
    needs: tuple[PosixCall, ...] = ()

    def __post_init__(self):
        for window in (self.numba, self.numba_cuda or self.numba):
            _bounds(window)


NUMBA = (">=0.60", "<0.69")  # pyproject.toml's numba requirement
NUMBA_CUDA = (">=0.4", "<0.31")  # pyproject.toml's numba-cuda requirement (the cuda extra)

SCOPE_COPY = Patch(
    "scope_copy",
    "wafersim.fabric._numba_scope_copy:install",
    NUMBA,
    "Numba's generic deep copy of IR scopes: the engine's first compile takes longer",
)
NOALIAS = Patch(
    "noalias",
    "wafersim.fabric.numba_compat:_register_noalias",
    NUMBA,
    "the kernels compile without noalias: the same results, some per cent slower",
)
LOCKED_CACHE_SAVES = Patch(
    "locked_cache_saves",
    "wafersim.fabric.compile_once:_lock_cache_saves",
    NUMBA,
    "Numba's own unlocked cache saves: processes saving at once may drop an entry (compiled "
    "again later)",
    needs=(COMPILE_LOCK,),
)
CACHE_INDEX = Patch(
    "cache_index",
    "wafersim.fabric.precompile:_knows_cache_index",
    NUMBA,
    "the engine's compile in a second process starts even where the engine is cached",
)
CUDA_CACHE = Patch(
    "cuda_cache",
    "wafersim.fabric._cuda_kernels:_knows_cuda_cache",
    NUMBA,
    "the CUDA kernels compile in every process (no disk cache)",
    numba_cuda=NUMBA_CUDA,
)
CUDASIM_FIXES = Patch(
    "cudasim_fixes",
    "wafersim.fabric._cudasim_fixes:install",
    NUMBA,
    "the CUDA simulator's own module swap (threads in one module race) and polling barrier",
    numba_cuda=NUMBA_CUDA,
)
PATCHES = {
    patch.name: patch
    for patch in (SCOPE_COPY, NOALIAS, LOCKED_CACHE_SAVES, CACHE_INDEX, CUDA_CACHE, CUDASIM_FIXES)
}

_DECIDED: dict[str, bool] = {}  # patch name -> whether it is in place, decided once a process
_TOLD: set[str] = set()  # the POSIX calls whose absence was logged


def install(patch: Patch) -> bool:
    """Put ``patch`` in place where its window and its body's check allow; returns whether it
    is in place (decided once a process, so every caller may ask)."""
    if patch.name not in _DECIDED:
        _DECIDED[patch.name] = _try(patch)
    return _DECIDED[patch.name]


def _try(patch: Patch) -> bool:
    refusal = refusal_of(patch)
    if refusal is None and not _run_body(patch):
        refusal = f"the internals of {_seen(patch)} are not the ones it was written for"
    if refusal is not None:
        LOG.debug("Numba patch %s not installed: %s; %s", patch.name, refusal, patch.without)
        return False
    LOG.debug("Numba patch %s installed (%s)", patch.name, _seen(patch))
    return True


def _run_body(patch: Patch) -> bool:
    module, function = patch.body.split(":")
    try:
        return bool(getattr(importlib.import_module(module), function)())
    except (ImportError, AttributeError):  # internals moved or renamed
        return False


def refusal_of(patch: Patch) -> str | None:
    """Why ``patch`` is not for this process (a version outside its window, a POSIX call the
    platform lacks), or None: read from the packages' metadata, importing nothing of Numba."""
    package, window = _target(patch)
    version = version_of(package)
    if version is None or not in_window(version, window):
        return f"{package} {version} is outside its tested window {','.join(window)}"
    missing = [need.call for need in patch.needs if not available(need)]
    if missing:
        return f"this platform has no {', '.join(missing)}"
    return None


def _target(patch: Patch) -> tuple[str, tuple[str, str]]:
    """The package ``patch`` changes and its window there: numba-cuda, where it is installed,
    provides ``numba.cuda`` in place of Numba's own."""
    if patch.numba_cuda is not None and version_of("numba-cuda") is not None:
        return "numba-cuda", patch.numba_cuda
    return "numba", patch.numba


def _seen(patch: Patch) -> str:
    package, _ = _target(patch)
    return f"{package} {version_of(package)}"


def active_patches() -> tuple[str, ...]:
    """The names of the patches this process has installed, in :data:`PATCHES`' order."""
    return tuple(name for name in PATCHES if _DECIDED.get(name))


def applicable_patches() -> tuple[str, ...]:
    """The names of the patches whose window holds the installed versions and whose POSIX
    calls this platform has: the ones the engine installs where their checks hold."""
    return tuple(name for name, patch in PATCHES.items() if refusal_of(patch) is None)


def describe() -> str:
    """Numba's version (numba-cuda's too, where installed) and the applicable patches, for
    ``wafersim --version``."""
    versions = [f"{package} {version_of(package)}" for package in ("numba", "numba-cuda")
                if version_of(package) is not None]  # fmt: skip
    names = ", ".join(applicable_patches()) or "none"
    lacking = [need.call for need in (COMPILE_LOCK, BACKGROUND_COMPILE) if not available(need)]
    text = f"{', '.join(versions) or 'numba not installed'}; patches: {names}"
    return text + (f"; without {', '.join(lacking)}" if lacking else "")


def version_of(package: str) -> str | None:
    """The installed version of ``package`` from its metadata (that of the imported module
    where there is none), or None where it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        module = sys.modules.get(package.replace("-", "_"))
        return getattr(module, "__version__", None)


def available(part: PosixCall) -> bool:
    """Whether this platform has ``part``'s call; where it does not, a debug line (once a
    process) says what the engine does instead."""
    module, function = part.call.split(".")
    try:
        found = hasattr(importlib.import_module(module), function)
    except ImportError:
        found = False
    if not found and part.name not in _TOLD:
        _TOLD.add(part.name)
        LOG.debug("no %s on this platform (%s): %s", part.call, part.name, part.without)
    return found


def _register_noalias() -> bool:
    """Let ``fabric._engine_jit.engine_function`` take ``noalias=True``: Numba's compiler flag
    (its parfors set it) that marks a function's array arguments as not overlapping, so that
    LLVM keeps a value read from one array in a register across stores to another. Numba does
    not offer it as a decorator option; this registers it as its own are."""
    from numba.core.compiler import Flags
    from numba.core.cpu import CPUTargetOptions
    from numba.core.options import TargetOptions

    if not hasattr(Flags, "noalias"):
        return False
    if not hasattr(CPUTargetOptions, "noalias"):
        CPUTargetOptions.noalias = TargetOptions.Mapping("noalias")
    return True
