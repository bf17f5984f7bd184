"""The pinned llama.cpp builds (docs/builds.md): what a build string says it uses, which tier it is, whether a CPU runs
it (a build using an instruction the CPU lacks is refused before anything runs, not left to die with 'Illegal
instruction'), the tier ``make setup`` chooses for a CPU (tools/llama_setup.py), and that the record names the tier
while the build string alone keys the generation cache."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.cache import key_of
from ablate.errors import AblateError
from ablate.stages.generate import cpu
from conftest import REPO, TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

#: The README's build (tier 4), as llama-cpp-python 0.3.36 built with tools/llama_setup.py's tier-4 flags reports it.
TIER4 = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | AVX512_VBMI = 1 | "
    "AVX512_VNNI = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
)
TIER3 = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
#: pip's native build on a Sapphire Rapids CPU (AVX-512 with AMX)
NATIVE_SPR = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
    "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
)
BASE_X86 = "fpu sse sse2 pni ssse3 sse4_1 sse4_2 popcnt"
#: an AVX2-only CPU (x86-64-v3: Haswell, Zen 2)
HASWELL = frozenset(f"{BASE_X86} avx avx2 fma f16c bmi1 bmi2".split())
#: AVX-512 with VBMI and VNNI, no AMX, no BF16 (Ice Lake server)
ICELAKE = HASWELL | frozenset("avx512f avx512cd avx512bw avx512vl avx512dq avx512vbmi avx512_vnni".split())
#: below x86-64-v3: AVX without AVX2 (Sandy Bridge)
SANDY = frozenset(f"{BASE_X86} avx".split())


def _cpuinfo(flags: frozenset[str], model: str = "Test CPU") -> str:
    return "".join(
        f"processor\t: {i}\nmodel name\t: {model}\nflags\t\t: {' '.join(sorted(flags))}\n\n" for i in (0, 1)
    )


# -- the build string ------------------------------------------------------------------------------------------------


def test_a_build_string_is_read_as_its_instruction_sets_and_named_by_its_tier():
    assert cpu.build_features(TIER4) == cpu.TIER_FEATURES["tier4"]
    assert cpu.build_features(TIER3) == cpu.TIER_FEATURES["tier3"]
    assert "LLAMAFILE" not in cpu.build_features(TIER4)  # not an instruction set: OPENMP, REPACK neither
    assert cpu.build_features("CPU : AVX = 1 | AVX2 = 0 | AVX512 = 0 |") == {
        "AVX"
    }  # older builds print the zeros
    other_backend = "CUDA : ARCHS = 890 | USE_GRAPHS = 1 | CPU : AVX = 1 | AVX2 = 1 | FMA = 1 |"
    assert cpu.build_features(other_backend) == {"AVX", "AVX2", "FMA"}
    assert cpu.build_features("llama-cpp-python not installed") == frozenset()
    assert cpu.build_tier(TIER4) == "tier4" and cpu.build_tier(TIER3) == "tier3"
    assert cpu.build_tier(NATIVE_SPR) == "other"  # pip's own build: not a pinned tier
    assert cpu.build_tier(NATIVE_SPR, "native-cc0499beaae4") == "native"  # make setup's native wheel folder
    assert (
        cpu.build_tier(TIER3, "native-0123456789ab") == "native"
    )  # native on an AVX2 CPU: still named native
    assert cpu.build_tier(TIER4, "tier4-39d72cb67c1b") == "tier4"
    assert cpu.build_tier("CPU : NEON = 1 | ARM_FMA = 1 | OPENMP = 1 | REPACK = 1 |") == "neon"


def test_a_tier_4_build_on_an_avx2_cpu_is_refused_naming_avx512_and_make_setup():
    message = cpu.refusal(TIER4, HASWELL, "generator (llama.cpp)")
    assert message is not None and "\n" not in message
    assert message.startswith(
        "generator (llama.cpp): the installed llama-cpp-python (tier4 build) uses AVX512 ("
    )
    assert (
        "AVX512 (avx512f avx512cd avx512bw avx512vl avx512dq), AVX512_VBMI (avx512vbmi), AVX512_VNNI (avx512_vnni)"
        in message
    )
    assert "Illegal instruction" in message
    assert "Fix: rebuild it for this CPU with make setup (it builds the pinned tier3 for this CPU)" in message
    assert cpu.missing_features(TIER3, HASWELL) == {} and cpu.refusal(TIER3, HASWELL, "x") is None
    assert cpu.refusal(TIER4, ICELAKE, "x") is None


def test_a_native_build_with_amx_is_refused_on_a_cpu_without_amx():
    missing = cpu.missing_features(NATIVE_SPR, ICELAKE)
    assert missing == {
        "AMX_INT8": ("amx_int8", "amx_tile"),
        "AVX512_BF16": ("avx512_bf16",),
        "AVX_VNNI": ("avx_vnni",),
    }
    message = cpu.refusal(NATIVE_SPR, ICELAKE, "rerank (llama.cpp)", "native-cc0499beaae4")
    assert message is not None and "(native build) uses AMX_INT8 (amx_int8 amx_tile), AVX512_BF16" in message
    assert "make setup (it builds the pinned tier4 for this CPU)" in message
    below = cpu.refusal(TIER3, SANDY, "generator (llama.cpp)")  # no tier fits: the native build is the fix
    assert (
        below is not None
        and "AVX2 (avx2)" in below
        and below.endswith("LLAMA_NATIVE=1 make setup (this CPU lacks even tier 3); docs/builds.md")
    )


def test_the_readme_build_runs_on_this_machine_when_it_is_a_tier_4_cpu():
    here = cpu.read_cpu()
    if here is None or cpu.choose_tier(here.flags)[0] != "tier4":
        pytest.skip("not a tier-4 x86-64 CPU")
    assert cpu.missing_features(TIER4, here.flags) == {}
    cpu.check_build_runs(TIER4, "generator (llama.cpp)")  # the real /proc/cpuinfo: no refusal


def test_check_build_runs_raises_one_line_and_skips_an_unknown_cpu():
    with pytest.raises(AblateError, match=r"uses AVX512 \(avx512f"):
        cpu.check_build_runs(TIER4, "generator (llama.cpp)", cpu.Cpu("Haswell", HASWELL))
    cpu.check_build_runs(
        TIER4, "generator (llama.cpp)", cpu.Cpu("", frozenset())
    )  # flags unknown: not checked


def test_cpuinfo_is_read_on_x86_and_arm():
    x86 = cpu.parse_cpuinfo(_cpuinfo(HASWELL, "Intel(R) Core(TM) i7-4770"))
    assert x86 == cpu.Cpu("Intel(R) Core(TM) i7-4770", HASWELL)
    arm = cpu.parse_cpuinfo(
        "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes crc32 asimddp\n"
    )
    assert arm.flags == {"fp", "asimd", "evtstrm", "aes", "crc32", "asimddp"}
    assert cpu.missing_features(
        "CPU : NEON = 1 | ARM_FMA = 1 | DOTPROD = 1 | MATMUL_INT8 = 1 |", arm.flags
    ) == {"MATMUL_INT8": ("i8mm",)}


def test_the_tier_is_chosen_from_the_cpu_flags():
    assert cpu.choose_tier(ICELAKE) == ("tier4", ())
    assert cpu.choose_tier(ICELAKE | {"amx_int8", "amx_tile", "avx512_bf16", "avx_vnni"}) == ("tier4", ())
    tier, lacking = cpu.choose_tier(ICELAKE - {"avx512_vnni"})  # AVX-512 without VNNI (Skylake-X): tier 3
    assert (tier, lacking) == ("tier3", ("avx512_vnni",))
    assert cpu.choose_tier(HASWELL)[0] == "tier3"
    assert cpu.choose_tier(SANDY) == (None, ("avx2", "fma", "f16c", "bmi2"))


# -- tools/llama_setup.py: which build make setup installs -----------------------------------------------------------


def _setup_module():
    spec = importlib.util.spec_from_file_location("llama_setup", REPO / "tools" / "llama_setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["llama_setup"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_setup_chooses_the_pinned_tier_and_its_wheel_folder(tmp_path):
    setup = _setup_module()
    t4 = setup.plan("x86_64", cpu.Cpu("Xeon", ICELAKE | {"amx_int8", "amx_tile"}), False, tmp_path)
    assert (t4.tier, t4.key) == ("tier4", "39d72cb67c1b")  # sha256 of the CMAKE_ARGS, byte for byte
    assert t4.folder == tmp_path / ".wheels" / "llama-cpp-python-0.3.36" / "tier4-39d72cb67c1b"
    assert "-DGGML_NATIVE=OFF " in t4.cmake_args and "-DGGML_AVX512=ON" in t4.cmake_args
    for off in ("AMX_TILE", "AMX_INT8", "AMX_BF16", "AVX512_BF16", "AVX_VNNI"):
        assert f"-DGGML_{off}=OFF" in t4.cmake_args
    t3 = setup.plan("x86_64", cpu.Cpu("i7", HASWELL), False, tmp_path)
    assert (t3.tier, t3.key, t3.folder.name) == ("tier3", "11ba03268d36", "tier3-11ba03268d36")
    assert "-DGGML_AVX512=OFF" in t3.cmake_args and "avx512f" in t3.reason
    arm = setup.plan("aarch64", None, False, tmp_path)
    assert (arm.tier, arm.cmake_args) == ("neon", "-DGGML_NATIVE=OFF")
    with pytest.raises(
        setup.Refused, match=r"^error: this CPU lacks avx2 fma f16c bmi2 of tier 3 .*LLAMA_NATIVE=1"
    ):
        setup.plan("x86_64", cpu.Cpu("Sandy", SANDY), False, tmp_path)
    with pytest.raises(setup.Refused, match="no pinned llama.cpp build for a riscv64 CPU"):
        setup.plan("riscv64", None, False, tmp_path)


def test_a_native_build_has_its_own_folder_per_cpu(tmp_path):
    setup = _setup_module()
    a = setup.plan("x86_64", cpu.Cpu("Xeon A", ICELAKE), True, tmp_path)
    b = setup.plan("x86_64", cpu.Cpu("Xeon B", ICELAKE), True, tmp_path)
    c = setup.plan("x86_64", cpu.Cpu("Xeon A", ICELAKE | {"amx_tile"}), True, tmp_path)
    assert a.cmake_args == "-DGGML_NATIVE=ON" and a.tier == "native"
    assert a.folder.name.startswith("native-") and len({a.folder, b.folder, c.folder}) == 3
    assert setup.native_wanted("1") and not setup.native_wanted("") and not setup.native_wanted("0")
    with pytest.raises(setup.Refused, match="LLAMA_NATIVE='maybe' is not valid"):
        setup.native_wanted("maybe")


def test_setup_reuses_a_wheel_its_folder_holds_and_refuses_a_cpu_below_tier_3(tmp_path, capsys, monkeypatch):
    setup = _setup_module()
    monkeypatch.delenv("LLAMA_NATIVE", raising=False)
    info = tmp_path / "cpuinfo"
    info.write_text(_cpuinfo(HASWELL))
    folder = tmp_path / ".wheels" / "llama-cpp-python-0.3.36" / "tier3-11ba03268d36"
    args = ["--dry-run", "--cpuinfo", str(info), "--machine", "x86_64", "--root", str(tmp_path)]
    assert setup.main(args) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith("llama.cpp build: tier3: the CPU lacks avx512f") and "no wheel yet: would build" in out
    )
    folder.mkdir(parents=True)
    (folder / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
    assert setup.main(args) == 0
    assert f"{folder} (llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl)" in capsys.readouterr().out
    info.write_text(_cpuinfo(SANDY))
    assert setup.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: this CPU lacks avx2 fma f16c bmi2 of tier 3") and err.count("\n") == 1


# -- the record: the tier is named, the build string keys the cache --------------------------------------------------


def _generator(monkeypatch, build: str):
    from ablate.stages.generate import llama_cpp as stage_module
    from ablate.stages.generate.gguf import SMOLLM2

    monkeypatch.setattr(stage_module, "llama_build", lambda: build)
    return stage_module.LlamaCppGenerator(model=SMOLLM2, prompt="grounded", n_threads=1)


def test_the_tier_is_logged_and_another_build_is_another_generation_cache_key(monkeypatch):
    """Native answers never mix with tier answers: the build string is in the fingerprint, so in every generation's
    cache key; the tier's name is logged beside it (``generator.build_tier``) but is not an identity of its own."""
    here = cpu.read_cpu()
    if here is None or cpu.choose_tier(here.flags)[0] != "tier4":
        pytest.skip("not a tier-4 x86-64 CPU")
    tier4 = _generator(monkeypatch, TIER4)
    tier3 = _generator(monkeypatch, TIER3)
    assert (tier4.params()["build"], tier4.params()["build_tier"]) == (TIER4, "tier4")
    assert tier3.params()["build_tier"] == "tier3"
    assert "build_tier" not in tier4.fingerprint().params and tier4.fingerprint().params["build"] == TIER4
    assert tier4.fingerprint().key != tier3.fingerprint().key
    assert key_of(tier4.generation_identity()) != key_of(tier3.generation_identity())
    if {"amx_int8", "amx_tile", "avx512_bf16", "avx_vnni"} <= here.flags:  # pip's native build runs here too
        native = _generator(monkeypatch, NATIVE_SPR)
        assert key_of(native.generation_identity()) not in {
            key_of(tier4.generation_identity()),
            key_of(tier3.generation_identity()),
        }


def test_every_stage_that_loads_llama_cpp_refuses_a_build_the_cpu_lacks(monkeypatch):
    from ablate.runner.judge import _judge_generator
    from ablate.stages.generate import llama_cpp as stage_module
    from ablate.stages.generate.gguf import SMOLLM2
    from ablate.stages.rerank import llm

    monkeypatch.setattr(cpu, "read_cpu", lambda path=cpu.CPUINFO: cpu.Cpu("Haswell", HASWELL))
    monkeypatch.setattr(stage_module, "llama_build", lambda: TIER4)
    monkeypatch.setattr(llm, "llama_build", lambda: TIER4)
    with pytest.raises(AblateError, match=r"^generator \(llama.cpp\): .* uses AVX512 \("):
        stage_module.LlamaCppGenerator(model=SMOLLM2, prompt="grounded")
    with pytest.raises(AblateError, match=r"^rerank \(llama.cpp\): .* uses AVX512 \("):
        llm.LLMReranker(model=SMOLLM2, prompt=str(REPO / "conf" / "prompts" / "rerank_yes_no.txt"))
    with pytest.raises(AblateError, match=r"^answer_judge \(llama.cpp\): .* uses AVX512 \("):
        _judge_generator(SMOLLM2, type("Gen", (), {"prompt_path": "grounded", "n_threads": 1})())
    monkeypatch.setattr(stage_module, "llama_build", lambda: stage_module.NOT_INSTALLED)
    monkeypatch.setattr(cpu, "installed_wheel_folder", lambda dist="llama-cpp-python": None)
    not_installed = stage_module.LlamaCppGenerator(model=SMOLLM2, prompt="grounded")
    assert not_installed.build_tier == "other"  # it fails when it loads its model, as before


def test_a_pinned_wheel_the_cpu_cannot_run_is_refused_before_llama_cpp_is_loaded(monkeypatch):
    """Loading a library compiled for instructions the CPU lacks may itself stop with 'Illegal instruction': the
    wheel folder make setup installed from names the tier, so that is checked first, without importing llama_cpp."""
    from ablate.stages.generate import llama_cpp as stage_module
    from ablate.stages.generate.gguf import SMOLLM2

    haswell, sandy = cpu.Cpu("Haswell", HASWELL), cpu.Cpu("Sandy Bridge", SANDY)
    with pytest.raises(
        AblateError, match=r"\(tier4 build\) uses AVX512 \(avx512f .*pinned tier3 for this CPU"
    ):
        cpu.check_installed_tier("generator (llama.cpp)", haswell, "tier4-39d72cb67c1b")
    with pytest.raises(
        AblateError, match=r"\(tier3 build\) uses AVX2 \(avx2\), BMI2 \(bmi2\), F16C \(f16c\), FMA"
    ):
        cpu.check_installed_tier("generator (llama.cpp)", sandy, "tier3-11ba03268d36")
    cpu.check_installed_tier("x", haswell, "tier3-11ba03268d36")  # runs
    cpu.check_installed_tier("x", sandy, "")  # not installed from make setup's folders

    a, b = cpu.Cpu("Xeon A", ICELAKE), cpu.Cpu("Xeon B", ICELAKE | {"amx_tile", "amx_int8"})
    cpu.check_installed_tier("x", a, f"native-{cpu.native_key(cpu.machine(), a)}")  # built on this CPU
    with pytest.raises(
        AblateError, match=r"^x: the installed llama-cpp-python is a native build made on another CPU"
    ):
        cpu.check_installed_tier("x", a, f"native-{cpu.native_key(cpu.machine(), b)}")

    def loaded() -> str:
        raise AssertionError("llama.cpp was loaded before the check")

    monkeypatch.setattr(cpu, "read_cpu", lambda path=cpu.CPUINFO: haswell)
    monkeypatch.setattr(cpu, "installed_wheel_folder", lambda dist="llama-cpp-python": "tier4-39d72cb67c1b")
    monkeypatch.setattr(stage_module, "llama_build", loaded)
    with pytest.raises(
        AblateError, match=r"^generator \(llama.cpp\): the installed llama-cpp-python \(tier4 build\)"
    ):
        stage_module.LlamaCppGenerator(model=SMOLLM2, prompt="grounded")


#: Runs ``python -m MODULE ARGS`` as a user would, on a CPU that reports only AVX2 (tier 3), with the README's tier-4
#: build installed (its wheel folder and its build string).
ON_AN_AVX2_CPU = f"""
import runpy, sys
from ablate.stages.generate import cpu, llama_cpp
cpu.read_cpu = lambda path=cpu.CPUINFO: cpu.Cpu("Haswell", frozenset({sorted(HASWELL)!r}))
cpu.installed_wheel_folder = lambda dist="llama-cpp-python": "tier4-39d72cb67c1b"
llama_cpp.llama_build = lambda: {TIER4!r}
module = sys.argv[1]
sys.argv = [module, *sys.argv[2:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def _judge_pool(root: Path) -> Path:
    """A pool of two pairs of the tiny corpus, as python -m ablate.label pool records one."""
    from ablate.labels import poolfile

    block = {"name": "tiny", "path": str(root), "split": "dev", "identity": None, "as_of": None}
    meta = poolfile.PoolMeta("tiny", str(root), "chunk", "tiny-v1", "", 10, "dev", corpus_config=block)
    entries = [
        poolfile.PoolEntry("q1", "INV-102#p0", ("A",), 1),
        poolfile.PoolEntry("q2", "POL-1#4.2-a", ("A",), 2),
    ]
    poolfile.write(root / "pool.tsv", poolfile.Pool(meta, entries))
    return root / "pool.tsv"


@pytest.mark.parametrize("command", ["sweep", "label-judge"])
def test_a_command_with_a_build_the_cpu_lacks_is_one_line_exit_2_and_leaves_nothing(tmp_path, command):
    root = write_corpus(tmp_path / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    store = tmp_path / "m.db"
    model = ["generator=llama_cpp", "generator.model=smollm2-135m-instruct"]
    if command == "sweep":
        args = [
            "ablate",
            "-m",
            "variant=A,C",
            *model,
            "corpus=beir",
            f"corpus.path={root}",
            "corpus.split=dev",
        ]
        args += ["corpus.identity=employee", f"tracking.uri=sqlite:///{store}", "progress=false"]
    else:
        args = ["ablate.label", "judge", "--pool", str(_judge_pool(root)), *model]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # the session's cache: what is checked is that no run starts
    env.pop("MLFLOW_TRACKING_URI", None)
    p = subprocess.run(
        [sys.executable, "-c", ON_AN_AVX2_CPU, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(
        "error: generator (llama.cpp): the installed llama-cpp-python (tier4 build) uses "
    ), p.stderr
    assert "AVX512 (avx512f avx512cd avx512bw avx512vl avx512dq)" in p.stderr and "make setup" in p.stderr
    assert not store.exists() and not (tmp_path / "multirun").exists()  # no run, no store, no output folder
    assert not (tmp_path / "labels").exists()  # nothing judged


def test_a_build_that_is_not_a_pinned_tier_carries_its_origin_in_its_identity():
    """A native build on a CPU with exactly tier 4's instruction sets reports tier 4's string, yet was compiled with
    ``-march=native``: its identity (``generator.build``, the fingerprint, the cache keys) says so, so its answers
    never share a tier's cache entries. A pinned tier's identity is its string as it is (the README's build)."""
    assert cpu.identity(TIER4, cpu.build_tier(TIER4, "tier4-39d72cb67c1b")) == TIER4
    native = cpu.identity(TIER4, cpu.build_tier(TIER4, "native-0123456789ab"))
    assert native == TIER4 + " BUILD = native |"
    other = cpu.identity(NATIVE_SPR, cpu.build_tier(NATIVE_SPR))
    assert other == NATIVE_SPR + " BUILD = other |"
    assert len({key_of({"build": b}) for b in (TIER4, native, other)}) == 3
    assert cpu.build_features(native) == cpu.build_features(TIER4)  # the entry is not an instruction set
