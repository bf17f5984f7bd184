"""``make setup``'s llama-cpp-python: built once per pinned tier into ``.wheels/``, installed from there.

Greedy answers are a function of the llama.cpp build (docs/builds.md), so the build is never left to the CPU pip
happens to land on (``GGML_NATIVE``). This script chooses a pinned tier from the CPU's flags (``/proc/cpuinfo``;
:func:`ablate.stages.generate.cpu.choose_tier`), says which and why, and then:

1. builds llama-cpp-python with that tier's ``CMAKE_ARGS`` into ``.wheels/llama-cpp-python-<version>/<tier>-<key>/``
   (``key``: the first 12 hex digits of the sha256 of the ``CMAKE_ARGS``), only when that folder holds no wheel yet,
   with ``--no-binary`` and ``--no-cache-dir`` so pip's wheel cache can never hand back another build;
2. installs exactly that wheel (``--no-deps --force-reinstall`` unless pip's record of the installed one names this
   wheel file and its sha256);
3. installs the ``[server]`` extra's dependencies, never letting pip build or take another llama-cpp-python;
4. reads the installed build's system info back and checks it is the tier's.

Tiers: ``tier4`` (AVX, AVX2, FMA, F16C, BMI2, AVX-512 F/CD/BW/VL/DQ, VBMI, VNNI) when the CPU has every one of them,
``tier3`` (x86-64-v3: AVX, AVX2, FMA, F16C, BMI2) otherwise, ``neon`` on aarch64 (``-DGGML_NATIVE=OFF`` only). Never
native, AMX, BF16 or AVX_VNNI, unless ``LLAMA_NATIVE=1``: then ``-DGGML_NATIVE=ON`` into ``native-<key>``, whose key
holds the CPU's model and flags too, so two machines never share it.

    python tools/llama_setup.py [--dry-run] [--cpuinfo FILE] [--machine ARCH] [--root DIR]

Standard library only (it runs before anything else is installed). A CPU below tier 3, or an architecture without
a tier, is one line and exit 2.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # ablate's stdlib-only CPU module, before ablate is installed

from ablate.stages.generate.cpu import (  # noqa: E402
    CPUINFO,
    NATIVE_ARGS,
    TIER_CPU_FLAGS,
    Cpu,
    build_tier,
    choose_tier,
    machine,
    native_key,
    read_cpu,
)

DIST = "llama-cpp-python"
VERSION = "0.3.36"
#: The pinned tiers' CMAKE_ARGS, byte for byte (their sha256 names the wheel folder: a changed flag is another build).
CMAKE_ARGS = {
    "tier4": "-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON "
    "-DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF",
    "tier3": "-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF "
    "-DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF",
    "neon": "-DGGML_NATIVE=OFF",
    "native": NATIVE_ARGS,
}
NATIVE_ENV = "LLAMA_NATIVE"


class Refused(Exception):
    """No build to make here: ``str(err)`` is the one line to print."""


@dataclass(frozen=True)
class Plan:
    """The build to install: its tier, CMAKE_ARGS, key and wheel folder, and why it was chosen."""

    tier: str
    cmake_args: str
    key: str
    folder: Path
    reason: str


def key_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def wheel_root(root: Path) -> Path:
    return root / ".wheels" / f"{DIST}-{VERSION}"


def native_wanted(value: str | None) -> bool:
    """``LLAMA_NATIVE``: 1/true/yes/on build native, unset/empty/0/false/no/off do not; anything else is refused."""
    v = (value or "").strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("", "0", "false", "no", "off"):
        return False
    raise Refused(
        f"error: {NATIVE_ENV}={value!r} is not valid; use {NATIVE_ENV}=1 (native build) or leave it unset"
    )


def plan(arch: str, cpu: Cpu | None, native: bool, root: Path) -> Plan:
    """Which build ``make setup`` installs on a machine of ``arch`` with ``cpu`` (see the module docstring)."""
    if native:
        args = CMAKE_ARGS["native"]
        described = f"{cpu.model or 'unknown model'}, {len(cpu.flags)} flags" if cpu else "CPU flags unknown"
        key = native_key(arch, cpu)
        reason = (
            f"{NATIVE_ENV}=1: built for this CPU ({described}); its answers can differ from the published tables, "
            "and its build string keys its own caches"
        )
        return Plan("native", args, key, wheel_root(root) / f"native-{key}", reason)
    if arch == "aarch64":
        args = CMAKE_ARGS["neon"]
        return Plan(
            "neon",
            args,
            key_of(args),
            wheel_root(root) / f"neon-{key_of(args)}",
            "aarch64: llama.cpp's default NEON build (-DGGML_NATIVE=OFF only)",
        )
    if arch != "x86_64":
        raise Refused(
            f"error: no pinned llama.cpp build for a {arch} CPU (tiers exist for x86-64 and aarch64). "
            f"Fix: build for this CPU with {NATIVE_ENV}=1 make setup"
        )
    if cpu is None or not cpu.flags:
        raise Refused(
            f"error: cannot read this CPU's flags from {CPUINFO} to choose a llama.cpp tier. "
            f"Fix: build for this CPU with {NATIVE_ENV}=1 make setup"
        )
    tier, lacking = choose_tier(cpu.flags)
    if tier is None:
        raise Refused(
            f"error: this CPU lacks {' '.join(lacking)} of tier 3 (x86-64-v3: {' '.join(TIER_CPU_FLAGS['tier3'])}), "
            f"the lowest pinned llama.cpp build. Fix: build for this CPU with {NATIVE_ENV}=1 make setup (its answers "
            "can differ from the published tables)"
        )
    if tier == "tier4":
        reason = f"the CPU has every tier-4 flag ({' '.join(TIER_CPU_FLAGS['tier4'])})"
    else:
        reason = (
            f"the CPU lacks {' '.join(lacking)} of tier 4; it has tier 3's "
            f"(x86-64-v3: {' '.join(TIER_CPU_FLAGS['tier3'])})"
        )
    args = CMAKE_ARGS[tier]
    return Plan(tier, args, key_of(args), wheel_root(root) / f"{tier}-{key_of(args)}", reason)


def wheels_in(folder: Path) -> list[Path]:
    """The llama-cpp-python wheels of :data:`VERSION` in ``folder``."""
    name = DIST.replace("-", "_")
    return sorted(folder.glob(f"{name}-{VERSION}-*.whl")) if folder.is_dir() else []


def installed_from() -> tuple[str, str] | None:
    """The wheel file pip installed llama-cpp-python from and its sha256 (pip's ``direct_url.json``), when the
    installed version is :data:`VERSION`; ``None`` for anything else (not installed, pip's own build, another
    version)."""
    import json
    from importlib import metadata

    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        return None
    if dist.version != VERSION:
        return None
    try:
        info = json.loads(dist.read_text("direct_url.json") or "{}")
        url, sha = info.get("url"), (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
    except (ValueError, AttributeError):
        return None
    return (str(url), str(sha)) if url and sha else None


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pip(*args: str, env: dict[str, str] | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    done = subprocess.run(cmd, env=env)
    if done.returncode != 0:
        raise SystemExit(f"error: pip {args[0]} failed (exit {done.returncode}): {' '.join(cmd)}")


def build_wheel(p: Plan) -> Path:
    """Build the wheel of ``p`` into a temporary folder beside its own, then move it in: a build cut short leaves no
    wheel that a later setup would take for a finished one."""
    p.folder.mkdir(parents=True, exist_ok=True)
    tmp = p.folder.parent / f".{p.folder.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"llama.cpp: building {DIST} {VERSION} into {p.folder} (CMAKE_ARGS={p.cmake_args}); a few minutes",
        flush=True,
    )
    try:
        pip(
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-binary",
            DIST,
            "--no-cache-dir",
            "-w",
            str(tmp),
            f"{DIST}=={VERSION}",
            env={**os.environ, "CMAKE_ARGS": p.cmake_args},
        )
        built = wheels_in(tmp)
        if len(built) != 1:
            raise SystemExit(f"error: pip wheel left {len(built)} {DIST} wheels in {tmp}, expected one")
        target = p.folder / built[0].name
        built[0].replace(target)
        return target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def installed_build() -> str:
    """The installed llama-cpp-python's system info, read in a fresh interpreter."""
    code = (
        "import llama_cpp, sys; info = llama_cpp.llama_print_system_info(); "
        "sys.stdout.write(info.decode() if isinstance(info, bytes) else str(info))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(
            f"error: the installed {DIST} does not load (exit {done.returncode}): {done.stderr.strip()}"
        )
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument(
        "--dry-run", action="store_true", help="say which build and folder, build and install nothing"
    )
    ap.add_argument("--cpuinfo", type=Path, default=CPUINFO, help="the CPU's flags (default: /proc/cpuinfo)")
    ap.add_argument("--machine", default=None, help="x86_64 or aarch64 (default: this machine's)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the project folder that holds .wheels/")
    a = ap.parse_args(argv)
    try:
        p = plan(
            a.machine or machine(), read_cpu(a.cpuinfo), native_wanted(os.environ.get(NATIVE_ENV)), a.root
        )
    except Refused as e:
        print(e, file=sys.stderr)
        return 2
    print(f"llama.cpp build: {p.tier}: {p.reason}")
    print(f"llama.cpp: CMAKE_ARGS={p.cmake_args}")
    found = wheels_in(p.folder)
    if a.dry_run:
        print(
            f"llama.cpp: wheel folder {p.folder} ({found[0].name if found else 'no wheel yet: would build'})"
        )
        return 0
    if found:
        wheel = found[-1]
        print(f"llama.cpp: reusing {wheel}")
    else:
        wheel = build_wheel(p)
    if installed_from() == (
        wheel.resolve().as_uri(),
        file_sha256(wheel),
    ):  # this very wheel, not a rebuilt one
        print(f"llama.cpp: {DIST} {VERSION} is already installed from {wheel.name} ({p.folder.name})")
    else:
        print(f"llama.cpp: installing {wheel}", flush=True)
        pip("install", "--quiet", "--no-deps", "--force-reinstall", str(wheel))
    pip(
        "install",
        "--quiet",
        "--no-cache-dir",
        "--only-binary",
        DIST,
        "--find-links",
        str(p.folder),
        f"{DIST}[server]=={VERSION}",
    )
    build = installed_build()
    named = build_tier(build, p.folder.name)
    print(f"llama.cpp: installed build {named}: {build}")
    if p.tier in ("tier4", "tier3") and named != p.tier:  # ARM compilers differ in what their default enables
        print(
            f"error: the wheel in {p.folder} is not a {p.tier} build (it is {named}): delete it and run make setup again",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
