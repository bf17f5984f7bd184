"""Which instruction sets a llama.cpp build uses, whether this CPU has them, and which pinned tier the build is.

A llama.cpp build names the instruction sets its kernels were compiled for in its system info
(:func:`~ablate.stages.generate.llama_cpp.llama_build`, ``CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | ... | AVX512 = 1 |
... | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |``). Run on a CPU without one of them, it dies mid-run with
``Illegal instruction``; so every command that loads llama.cpp compares the build's instruction sets with the CPU's
flags (``/proc/cpuinfo``) before anything runs and refuses a build the CPU cannot run (:func:`check_build_runs`):
one line naming the missing instruction sets and ``make setup`` as the fix.

``make setup`` (``tools/llama_setup.py``) builds llama-cpp-python at one of two pinned tiers, chosen from the CPU's
flags (:func:`choose_tier`), never for the CPU it runs on: greedy answers are a function of the build, so a pinned
build makes the published answers reproducible on every machine of its tier (``docs/builds.md``):

* ``tier4``: AVX, AVX2, FMA, F16C, BMI2, AVX-512 F/CD/BW/VL/DQ, VBMI, VNNI (the README's tables were made with it);
* ``tier3``: x86-64-v3 (AVX, AVX2, FMA, F16C, BMI2);
* ``neon``: on ARM (aarch64), llama.cpp's default build without ``GGML_NATIVE``;
* ``native`` (``LLAMA_NATIVE=1 make setup``): everything the building CPU has, its own build string and caches.

Everything here is stdlib only (``tools/llama_setup.py`` imports it before anything else is installed) and the
checks are pure functions of the strings and flag sets they are given.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ablate.errors import AblateError

#: llama.cpp's name of an instruction set (its system info) -> the CPU flags it needs (``/proc/cpuinfo``'s spelling;
#: on ARM its ``Features`` line). ``AVX512`` is ggml's ``GGML_AVX512``, which compiles with AVX-512 F, CD, BW, VL and
#: DQ (``-mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw``), so it needs all five.
CPU_FLAGS: Mapping[str, tuple[str, ...]] = {
    "SSE3": ("pni",),
    "SSSE3": ("ssse3",),
    "AVX": ("avx",),
    "AVX2": ("avx2",),
    "F16C": ("f16c",),
    "FMA": ("fma",),
    "BMI2": ("bmi2",),
    "AVX_VNNI": ("avx_vnni",),
    "AVX512": ("avx512f", "avx512cd", "avx512bw", "avx512vl", "avx512dq"),
    "AVX512_VBMI": ("avx512vbmi",),
    "AVX512_VNNI": ("avx512_vnni",),
    "AVX512_BF16": ("avx512_bf16",),
    "AMX_INT8": ("amx_int8", "amx_tile"),
    "AMX_BF16": ("amx_bf16", "amx_tile"),
    "NEON": ("asimd",),
    "ARM_FMA": ("asimd",),
    "FP16_VA": ("asimdhp",),
    "DOTPROD": ("asimddp",),
    "MATMUL_INT8": ("i8mm",),
    "SVE": ("sve",),
    "SME": ("sme",),
}

#: What each pinned tier's build string holds (its instruction sets) and what a CPU needs to run it.
TIER_FEATURES: Mapping[str, frozenset[str]] = {
    "tier4": frozenset(
        {"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI"}
    ),
    "tier3": frozenset({"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2"}),
}
#: The CPU flags that choose a tier (``make setup`` builds tier 4 when the CPU has every one of them).
TIER_CPU_FLAGS: Mapping[str, tuple[str, ...]] = {
    "tier4": (
        "avx",
        "avx2",
        "fma",
        "f16c",
        "bmi2",
        "avx512f",
        "avx512cd",
        "avx512bw",
        "avx512vl",
        "avx512dq",
        "avx512vbmi",
        "avx512_vnni",
    ),
    "tier3": ("avx", "avx2", "fma", "f16c", "bmi2"),
}
#: The instruction sets of an ARM build without ``GGML_NATIVE`` (NEON; FMA is part of AArch64's SIMD).
NEON_FEATURES = frozenset({"NEON", "ARM_FMA"})

CPUINFO = Path("/proc/cpuinfo")
#: The native build's CMAKE_ARGS (``LLAMA_NATIVE=1 make setup``).
NATIVE_ARGS = "-DGGML_NATIVE=ON"


def build_features(build: str) -> frozenset[str]:
    """The instruction sets a llama.cpp system-info string says its CPU kernels use: the entries of its ``CPU :``
    part set to 1 that name an instruction set (:data:`CPU_FLAGS`); ``LLAMAFILE``, ``OPENMP``, ``REPACK``, counts
    such as ``SVE_CNT`` and other backends' entries are not instruction sets."""
    head, sep, tail = build.partition("CPU :")
    text = tail if sep else head
    found: set[str] = set()
    for entry in text.split("|"):
        if re.search(r"\w+\s*:", entry):  # the next backend's part ("CUDA : ARCHS = ...")
            break
        name, eq, value = entry.partition("=")
        if eq and value.strip() == "1" and name.strip() in CPU_FLAGS:
            found.add(name.strip())
    return frozenset(found)


def missing_features(build: str, cpu_flags: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The instruction sets ``build`` uses that a CPU with ``cpu_flags`` lacks, each with the flags it lacks
    (empty: the CPU runs the build)."""
    have = set(cpu_flags)
    out: dict[str, tuple[str, ...]] = {}
    for feature in sorted(build_features(build)):
        lacking = tuple(f for f in CPU_FLAGS[feature] if f not in have)
        if lacking:
            out[feature] = lacking
    return out


def build_tier(build: str, wheel_folder: str | None = None) -> str:
    """The name of the build ``build`` is: ``native`` when it was installed from ``make setup``'s native wheel folder
    (``native-<key>``; its instruction sets are the building CPU's), else the pinned tier whose instruction sets it
    holds exactly (``tier4``, ``tier3``, ``neon``), else ``other`` (pip's own build, or one made by hand)."""
    if wheel_folder is not None and wheel_folder.startswith("native-"):
        return "native"
    features = build_features(build)
    for name, expected in TIER_FEATURES.items():
        if features == expected:
            return name
    if "NEON" in features and features <= NEON_FEATURES:
        return "neon"
    return "other"


def choose_tier(cpu_flags: Iterable[str]) -> tuple[str | None, tuple[str, ...]]:
    """The highest pinned x86-64 tier a CPU with ``cpu_flags`` runs, and the flags it lacks for the tier above (for
    ``tier4``: none); ``(None, lacking)`` when it lacks even tier 3's (the flags of tier 3 it lacks)."""
    have = set(cpu_flags)
    lacking4 = tuple(f for f in TIER_CPU_FLAGS["tier4"] if f not in have)
    if not lacking4:
        return "tier4", ()
    lacking3 = tuple(f for f in TIER_CPU_FLAGS["tier3"] if f not in have)
    return (None, lacking3) if lacking3 else ("tier3", lacking4)


@dataclass(frozen=True)
class Cpu:
    """What ``/proc/cpuinfo`` says of the first CPU: its model name and flags (x86: ``flags``; ARM: ``Features``)."""

    model: str
    flags: frozenset[str]


def parse_cpuinfo(text: str) -> Cpu:
    """The first processor's model name and flags in the text of ``/proc/cpuinfo``."""
    model, flags = "", ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if not sep:
            continue
        if key in ("model name", "cpu model", "hardware") and not model:
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = value
    return Cpu(model, frozenset(flags.split()))


def read_cpu(path: Path = CPUINFO) -> Cpu | None:
    """This machine's CPU (``None`` where there is no ``/proc/cpuinfo``: the build is then not checked)."""
    try:
        return parse_cpuinfo(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


@functools.cache
def installed_wheel_folder(dist: str = "llama-cpp-python") -> str | None:
    """The name of the folder the installed ``dist`` was installed from when pip installed it from a wheel file
    (``tier4-39d72cb67c1b``: ``make setup``'s wheel folders), from pip's ``direct_url.json``; ``None`` otherwise."""
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    try:
        raw = metadata.distribution(dist).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    try:
        url = str(json.loads(raw or "{}").get("url", ""))
    except (ValueError, AttributeError):
        return None
    path = Path(unquote(urlparse(url).path))
    return path.parent.name if url.startswith("file:") and path.suffix == ".whl" else None


def refusal(build: str, cpu_flags: Iterable[str], what: str, wheel_folder: str | None = None) -> str | None:
    """The one-line refusal of running ``build`` on a CPU with ``cpu_flags`` (``what``: the setting that loads it;
    ``wheel_folder``: :func:`installed_wheel_folder`, to name the build), or ``None`` when the CPU has every
    instruction set the build uses."""
    have = frozenset(cpu_flags)
    missing = missing_features(build, have)
    if not missing:
        return None
    named = ", ".join(f"{f} ({' '.join(flags)})" for f, flags in missing.items())
    tier, _ = choose_tier(have)
    if "asimd" in have:
        rebuild = "make setup (it builds the default NEON build on ARM)"
    elif tier:
        rebuild = f"make setup (it builds the pinned {tier} for this CPU)"
    else:
        rebuild = "LLAMA_NATIVE=1 make setup (this CPU lacks even tier 3)"
    return (
        f"{what}: the installed llama-cpp-python ({build_tier(build, wheel_folder)} build) uses "
        f"{named}, which this CPU lacks: it would stop with 'Illegal instruction'. Fix: rebuild it for this CPU "
        f"with {rebuild}; docs/builds.md"
    )


def check_build_runs(build: str, what: str, cpu: Cpu | None = None, wheel_folder: str | None = None) -> None:
    """Refuse, before anything runs, a llama.cpp ``build`` (its system info) that uses an instruction set this CPU
    lacks (:func:`refusal`); ``cpu``: this machine's, ``wheel_folder``: :func:`installed_wheel_folder`, unless given.
    Nothing is checked where the CPU's flags are unknown (no ``/proc/cpuinfo``)."""
    cpu = cpu if cpu is not None else read_cpu()
    if cpu is None or not cpu.flags:
        return
    folder = wheel_folder if wheel_folder is not None else installed_wheel_folder()
    message = refusal(build, cpu.flags, what, folder)
    if message is not None:
        raise AblateError(message)


def native_key(arch: str, cpu: Cpu | None) -> str:
    """The key of a native build's wheel folder (``native-<key>``): the sha256 of its CMAKE_ARGS, the machine, the
    CPU's model and flags (first 12 hex digits), so two CPUs never share a native wheel."""
    flags = " ".join(sorted(cpu.flags)) if cpu else ""
    text = f"{NATIVE_ARGS}\n{arch}\n{cpu.model if cpu else ''}\n{flags}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def check_installed_tier(what: str, cpu: Cpu | None = None, wheel_folder: str | None = None) -> None:
    """Refuse, without loading llama.cpp, an installed ``make setup`` wheel this CPU may not run: a library compiled
    for instructions the CPU lacks can stop with 'Illegal instruction' while it loads (a tier-4 build on an AVX2 CPU
    does, in ``llama_print_system_info``). The folder it was installed from says what it is: a pinned tier
    (``tier4-<key>``: its instruction sets are checked) or a native build (``native-<key>``: refused unless its key is
    this CPU's, :func:`native_key`). ``cpu``: this machine's, ``wheel_folder``: :func:`installed_wheel_folder`,
    unless given. A build from elsewhere is checked by its build string once loaded (:func:`check_build_runs`)."""
    folder = wheel_folder if wheel_folder is not None else installed_wheel_folder()
    tier, _, key = (folder or "").partition("-")
    if tier in TIER_FEATURES:
        build = "CPU : " + " | ".join(f"{f} = 1" for f in sorted(TIER_FEATURES[tier])) + " |"
        check_build_runs(build, what, cpu, folder)
        return
    cpu = cpu if cpu is not None else read_cpu()
    if tier == "native" and cpu is not None and cpu.flags and key != native_key(machine(), cpu):
        raise AblateError(
            f"{what}: the installed llama-cpp-python is a native build made on another CPU ({folder}; this CPU's "
            f"would be native-{native_key(machine(), cpu)}): it may use instructions this CPU lacks and stop with "
            "'Illegal instruction'. Fix: make setup (the pinned tier for this CPU), or LLAMA_NATIVE=1 make setup; "
            "docs/builds.md"
        )


def checked_build(what: str, read_build: Callable[[], str]) -> tuple[str, str]:
    """The build ``read_build`` reports (:func:`~ablate.stages.generate.llama_cpp.llama_build`) and its tier's name,
    once this CPU is known to run it: the installed wheel's tier before the library is loaded
    (:func:`check_installed_tier`), then the loaded build's own string (:func:`check_build_runs`). What every stage
    that runs llama.cpp calls when it is built, so a sweep is refused before anything runs."""
    check_installed_tier(what)
    build = read_build()
    check_build_runs(build, what)
    tier = build_tier(build, installed_wheel_folder())
    return identity(build, tier), tier


#: The entry :func:`identity` appends to the build string of a build that is not a pinned tier.
ORIGIN_ENTRY = "BUILD"


def identity(build: str, tier: str) -> str:
    """The build's identity (``generator.build``, and so the fingerprint and every generation's cache key): its system
    info string for a pinned tier (``tier4``, ``tier3``, ``neon``: its compiler flags are fixed, so equal strings are
    equal builds); with ``BUILD = native |`` or ``BUILD = other |`` appended for any other build. A native build on a
    CPU with exactly a tier's instruction sets reports that tier's string, yet ``-march=native`` lets the compiler use
    more of the CPU elsewhere, so its answers may differ: they never share a tier's cache entries."""
    if tier in ("native", "other"):
        return f"{build.rstrip()} {ORIGIN_ENTRY} = {tier} |"
    return build


def machine() -> str:
    """``x86_64``, ``aarch64``, ... (``arm64`` and ``AMD64`` spelled as Linux spells them)."""
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)
