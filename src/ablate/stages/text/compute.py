"""How torch computes: numeric precision (``fp32`` | ``bf16``) and the thread count, for encoding, cross-encoder scoring
and cross-encoder training (``dense.precision`` / ``dense.num_threads``, ``rerank.precision`` /
``rerank.num_threads``, ``rerank.train.precision``).

**Precision.** ``fp32`` is torch's default. ``bf16`` runs the model's forward (and, in training, backward) passes
under ``torch.autocast("cpu", dtype=torch.bfloat16)``: weights stay float32, matrix products run in bfloat16, and the
outputs are cast back to float32 (vectors are still unit-norm float32 rows). A bf16 vector is not the fp32 vector
(close to it: ``tests/test_compute.py`` holds it to cosine >= 0.999; ``experiments/bench_encode.py --sections
precision`` measures it), so precision is part of every fingerprint that keys a cache of model outputs (embeddings,
reranker scores, the trained reranker). ``fp32`` adds nothing to those fingerprints, so an fp32 key is the key the
same work has without the option.

**Whether bf16 runs on this CPU** is measured here, not assumed: whether bf16 pays depends on the CPU and the torch
build. Torch may report native bf16 kernels (:func:`native_bf16`, oneDNN's check, which is also true on AVX-512 CPUs
without AVX512-BF16 or AMX, where bf16 can still be slower than fp32), or convert on the fly (emulation). So the
first ``bf16`` request on a machine runs a short probe (:func:`bf16_probe`: a BERT encoder layer of MiniLM's size,
timed in fp32 and in autocast bf16 side by side in alternating rounds at one thread, forward only for ``encode`` /
``score``, forward and backward for ``train``) and keeps the result in the user cache folder (``bf16-probe/``), keyed
by the CPU's model, torch's capability and version and the probe's version: it runs once per machine and kind of work,
and deleting it measures again. A workload that bf16 makes at least :data:`MIN_SPEEDUP` times faster runs (where
torch reports no native bf16, with one plain line on stderr); any other is refused before anything runs with a
:class:`~ablate.errors.ConfigError` giving the measured ratio, the CPU capability and ``fp32`` as the fix. Whether it
ran natively is logged (``precision_native``).

**Threads.** ``num_threads: null`` leaves torch's own setting (its default is the number of cores); an integer
``n >= 1`` calls ``torch.set_num_threads(n)`` around the stage's encode / score / train calls only and restores the
previous value afterwards (:func:`torch_threads`), so other stages and the caller are unaffected. On a machine shared
with other work one thread can be faster than two (two threads spin against each other when a core is taken:
``experiments/results/bench_encode.md``). The thread count does not change a result beyond float rounding in the
order of summation, so it is logged as a parameter but kept out of every fingerprint and cache key: a sweep over it
reuses vectors, scores and trained models.
"""

from __future__ import annotations

import contextlib
import math
import platform
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from ablate.errors import ConfigError
from ablate.stages.base import check_choice, check_int

PRECISIONS = ("fp32", "bf16")
Workload = Literal["encode", "score", "train"]

#: bf16 must measure at least this many times faster than fp32 to be used: a margin over the timing noise
#: of a shared machine, so that a tie does not flip between runs.
MIN_SPEEDUP = 1.1
#: Bump when the probe's work or timing changes: part of its cache key, so every CPU measures again.
PROBE_VERSION = "ablate-bf16-probe/1"
#: The probe: ``batch`` texts of ``tokens`` tokens through one transformer-encoder layer of MiniLM's size, in
#: ``rounds`` alternating rounds of ``repeats`` passes each; the best round of each precision is compared.
PROBE = {"batch": 8, "tokens": 64, "d_model": 384, "heads": 12, "ffn": 1536, "rounds": 3, "repeats": 2}

_NOTED: set[str] = set()  # workloads whose "running emulated" line this process already printed
_MEASURED: dict[str, dict[str, Any]] = {}  # probe results this process has read or measured, by their key


@dataclass(frozen=True)
class Compute:
    """A validated precision and thread count. ``native``: whether torch reports native bf16 kernels (True for fp32)."""

    precision: str = "fp32"
    num_threads: int | None = None
    native: bool = True

    @property
    def bf16(self) -> bool:
        return self.precision == "bf16"

    def fingerprint_part(self) -> dict[str, str]:
        """What to add to a fingerprint of model outputs: nothing for fp32 (keys made before these options stay
        valid), ``{"precision": "bf16-autocast"}`` for bf16. The thread count never appears (module docstring)."""
        return {"precision": "bf16-autocast"} if self.bf16 else {}

    def log_params(self) -> dict[str, object]:
        """The parameters to log: precision, num_threads (``None`` = torch's default) and, for bf16, whether it ran
        natively."""
        p: dict[str, object] = {"precision": self.precision, "num_threads": self.num_threads}
        if self.bf16:
            p["precision_native"] = self.native
        return p

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Threads set (and restored) and, for bf16, autocast on, for the duration of the block."""
        with torch_threads(self.num_threads):
            if not self.bf16:
                yield
                return
            import torch

            with torch.autocast("cpu", dtype=torch.bfloat16):
                yield


def cpu_capability() -> str:
    """torch's name for the CPU's vector instruction set (``AVX2``, ``AVX512``, ...)."""
    import torch

    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):  # pragma: no cover - very old torch
        return "unknown"


def native_bf16() -> bool:
    """Whether torch (oneDNN) reports native bf16 kernels on this CPU (logged as ``precision_native``; not whether bf16
    is faster: :func:`bf16_probe`)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # pragma: no cover - a torch build without oneDNN
        return False


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name``; else what :mod:`platform` knows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _probe_layer(torch: Any) -> Any:
    """One BERT encoder layer (post-LayerNorm self-attention and GELU feed-forward) of :data:`PROBE`'s size, built
    from plain modules so that fp32 and autocast bf16 run the same operations (torch's fused encoder fast path is
    taken only without autocast)."""
    d, h, ffn = PROBE["d_model"], PROBE["heads"], PROBE["ffn"]
    nn = torch.nn
    qkv, out, up, down = nn.Linear(d, 3 * d), nn.Linear(d, d), nn.Linear(d, ffn), nn.Linear(ffn, d)
    ln1, ln2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(x: Any) -> Any:
        b, t, _ = x.shape
        q, k, v = qkv(x).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // h), dim=-1) @ v
        x = ln1(x + out(att.transpose(1, 2).reshape(b, t, d)))
        return ln2(x + down(torch.nn.functional.gelu(up(x))))

    return forward


def _measure(kind: str) -> dict[str, float]:
    """Best seconds per pass of the probe layer in fp32 and in autocast bf16, timed side by side in alternating
    rounds at one torch thread; ``kind`` ``forward`` (inference) or ``train`` (forward and backward)."""
    import torch

    with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
        torch.manual_seed(0)
        layer = _probe_layer(torch)
        x = torch.randn(PROBE["batch"], PROBE["tokens"], PROBE["d_model"])

    def one_pass(bf16: bool) -> None:
        cast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        if kind == "train":
            with cast:
                y = layer(x)
            y.float().sum().backward()
        else:
            with torch.inference_mode(), cast:
                layer(x)

    def timed(bf16: bool) -> float:
        t0 = time.perf_counter()
        for _ in range(PROBE["repeats"]):
            one_pass(bf16)
        return (time.perf_counter() - t0) / PROBE["repeats"]

    best = {False: math.inf, True: math.inf}
    with torch_threads(1):
        for bf16 in (False, True):  # warm-up: first-call allocations and kernel selection
            one_pass(bf16)
        for r in range(PROBE["rounds"]):
            for bf16 in (False, True) if r % 2 == 0 else (True, False):
                best[bf16] = min(best[bf16], timed(bf16))
    return {"fp32_seconds": best[False], "bf16_seconds": best[True]}


def bf16_probe(workload: Workload) -> dict[str, Any]:
    """Autocast bf16 against fp32 for ``workload`` on this CPU: ``speedup`` (fp32 time / bf16 time; above 1 = bf16
    faster), the seconds of each and where the result is kept (``folder``). Measured by :func:`_measure` the first
    time on this CPU, torch version and probe version, then read from the user cache folder (``bf16-probe``)."""
    import torch

    from ablate.cache import Cache, key_of

    kind = "train" if workload == "train" else "forward"
    identity = {
        "probe": PROBE_VERSION,
        "shape": PROBE,
        "kind": kind,
        "cpu": cpu_model(),
        "capability": cpu_capability(),
        "torch": torch.__version__,
    }
    key = key_of(identity)
    if key not in _MEASURED:
        cache = Cache()
        found = cache.load_json("bf16-probe", key)
        if not (isinstance(found, dict) and isinstance(found.get("speedup"), (int, float))):
            seconds = _measure(kind)
            found = {**identity, **seconds, "speedup": seconds["fp32_seconds"] / seconds["bf16_seconds"]}
            cache.save_json("bf16-probe", key, found)
        _MEASURED[key] = {**found, "folder": str(cache.root / "bf16-probe")}
    return _MEASURED[key]


def bf16_speedup(workload: Workload) -> float:
    """How many times faster bf16 runs ``workload`` than fp32 on this CPU (:func:`bf16_probe`)."""
    return float(bf16_probe(workload)["speedup"])


def check_num_threads(key: str, value: object) -> int | None:
    """``None`` (torch's default) or an integer >= 1, else a :class:`ConfigError` naming ``key``."""
    if value is None:
        return None
    try:
        return check_int(key, value, 1)
    except ConfigError:
        raise ConfigError(
            key, value, "it must be null (torch's default) or an integer >= 1, e.g. 1 on a shared machine"
        ) from None


def resolve_compute(
    precision_key: str,
    precision: object,
    threads_key: str,
    num_threads: object,
    workload: Workload,
    *,
    native: bool | None = None,
) -> Compute:
    """Validate ``precision`` and ``num_threads`` and apply the bf16 policy (module docstring) for ``workload``: bf16
    runs where :func:`bf16_probe` measured it at least :data:`MIN_SPEEDUP` times faster than fp32, else a ConfigError.

    ``native`` overrides torch's report of native bf16 kernels (tests use it to exercise both sides); ``None`` asks
    torch. Torch is imported only for ``bf16``."""
    prec = check_choice(precision_key, precision, PRECISIONS)
    threads = check_num_threads(threads_key, num_threads)
    if prec == "fp32":
        return Compute("fp32", threads, True)
    has_native = native_bf16() if native is None else native
    probe = bf16_probe(workload)
    speedup = float(probe["speedup"])
    capability = cpu_capability()
    if speedup < MIN_SPEEDUP:
        kernels = "native bf16 kernels" if has_native else "no native bf16, no AVX512-BF16/AMX"
        ratio = f"{1 / speedup:.1f}x slower than" if speedup < 1 else f"only {speedup:.2f}x as fast as"
        raise ConfigError(
            precision_key,
            precision,
            f"bf16 {workload} measured {ratio} fp32 on this CPU (torch: {capability}, {kernels}; probe kept in "
            f"{probe['folder']}, delete it to measure again); use {precision_key}=fp32",
        )
    if not has_native and workload not in _NOTED:
        _NOTED.add(workload)
        print(
            f"bf16 requested; this CPU has no native bf16 (torch: {capability}), running emulated — measured "
            f"{speedup:.1f}x faster than fp32 here",
            file=sys.stderr,
        )
    return Compute("bf16", threads, has_native)


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """``torch.set_num_threads(n)`` for the block, then the previous value; ``None`` changes nothing."""
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
