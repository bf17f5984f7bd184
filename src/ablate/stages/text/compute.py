"""How torch computes: numeric precision (``fp32`` | ``bf16``) and the thread count, for encoding, cross-encoder scoring
and cross-encoder training (``dense.precision`` / ``dense.num_threads``, ``rerank.precision`` /
``rerank.num_threads``, ``rerank.train.precision``).

**Precision.** ``fp32`` is torch's default. ``bf16`` runs the model's forward (and, in training, backward) passes
under ``torch.autocast("cpu", dtype=torch.bfloat16)``: weights stay float32, matrix products run in bfloat16, and the
outputs are cast back to float32 (vectors are still unit-norm float32 rows). A bf16 vector is not the fp32 vector
(cosine to it >= 0.999 on SciFact with all-MiniLM-L6-v2, measured in ``experiments/bench_encode.py``), so precision is
part of every fingerprint that keys a cache of model outputs (embeddings, reranker scores, the trained reranker).
``fp32`` adds nothing to those fingerprints, so caches written before these options existed stay valid.

Where torch reports native bf16 kernels (:func:`native_bf16`: oneDNN's check, true on CPUs with AVX512-BF16 or AMX),
``bf16`` runs without a word. Where it does not, torch still runs bf16 by emulation (converting on the fly), and
whether that is worth it was measured, per workload, on such a CPU (:data:`EMULATED_SPEEDUP`: AMD EPYC, AVX2 only,
torch 2.13, side by side with fp32 at 1 thread on 2 shared cores). A workload that emulation made faster would run
with one plain line on stderr and be logged with ``precision_native=false``; one it made slower is refused with a
:class:`~ablate.errors.ConfigError` naming the CPU capability and suggesting ``fp32``. On that CPU emulated bf16
encoding was 5.2x *slower* than fp32 (an earlier note claimed 1.8x faster; it did not reproduce), so all three
workloads are refused there: bf16 is for CPUs with AVX512-BF16 or AMX.

**Threads.** ``num_threads: null`` leaves torch's own setting (its default is the number of cores); an integer
``n >= 1`` calls ``torch.set_num_threads(n)`` around the stage's encode / score / train calls only and restores the
previous value afterwards (:func:`torch_threads`), so other stages and the caller are unaffected. On a machine shared
with other work one thread can be several times faster than two (two threads spin against each other when a core is
taken: ``experiments/results/bench_encode.md``). The thread count does not change a result beyond float rounding in
the order of summation (cosine 1.0 to six decimals), so it is logged as a parameter but kept out of every fingerprint
and cache key: a sweep over it reuses vectors, scores and trained models.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from ablate.errors import ConfigError
from ablate.stages.base import check_choice, check_int

PRECISIONS = ("fp32", "bf16")
Workload = Literal["encode", "score", "train"]

#: Speed of emulated bf16 relative to fp32 (time fp32 / time bf16; above 1 = bf16 faster) on a CPU without native
#: bf16: AMD EPYC with AVX2 only, torch 2.13, 1 torch thread, 2 cores shared with other work (load average ~20).
#: ``bf16`` is honoured on such a CPU only for a workload measured faster; ``None`` = not measured faster (refused).
#:
#: * encode: 0.19 (bf16 5.2x slower: best of 3 alternating rounds, 16 SciFact passages at max_seq_length 256, 18.8 s
#:   vs 97.0 s wall, 3.2 s vs 18.9 s CPU; cosine to fp32 >= 0.999), ``experiments/results/bench_encode_precision.md``.
#: * score: the cross-encoder's forward pass is the same 6-layer MiniLM as encode's; not measured apart, refused.
#: * train: a short probe (12 steps of 16 pairs at max_length 128, 1 thread, load ~4): fp32 15.5 s a step; bf16
#:   autocast did not finish 13 steps in 300 s (> 22 s a step). Refused.
EMULATED_SPEEDUP: dict[str, float | None] = {"encode": 0.19, "score": None, "train": None}

_NOTED: set[str] = set()  # workloads whose "running emulated" line this process already printed


@dataclass(frozen=True)
class Compute:
    """A validated precision and thread count. ``native`` is whether the CPU has native bf16 (always True for fp32)."""

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
    """Whether torch (oneDNN) reports native bf16 kernels on this CPU (AVX512-BF16 or AMX)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # pragma: no cover - a torch build without oneDNN
        return False


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
    """Validate ``precision`` and ``num_threads`` and apply the bf16 policy (module docstring) for ``workload``.

    ``native`` overrides the CPU check (tests use it to exercise both sides); ``None`` asks torch. Torch is imported
    only for ``bf16``."""
    prec = check_choice(precision_key, precision, PRECISIONS)
    threads = check_num_threads(threads_key, num_threads)
    if prec == "fp32":
        return Compute("fp32", threads, True)
    has_native = native_bf16() if native is None else native
    if has_native:
        return Compute("bf16", threads, True)
    speedup = EMULATED_SPEEDUP.get(workload)
    capability = cpu_capability()
    if speedup is None or speedup <= 1.0:
        measured = (
            f"emulated bf16 {workload} measured {1 / speedup:.1f}x slower than fp32 on such a CPU"
            if speedup
            else f"emulated bf16 {workload} is not measured faster than fp32"
        )
        raise ConfigError(
            precision_key,
            precision,
            f"this CPU has no native bf16 (torch: {capability}, no AVX512-BF16/AMX) and {measured}; use "
            f"{precision_key}=fp32",
        )
    if workload not in _NOTED:
        _NOTED.add(workload)
        print(
            f"bf16 requested; this CPU has no native bf16 (torch: {capability}), running emulated — measured "
            f"{speedup:.1f}x here",
            file=sys.stderr,
        )
    return Compute("bf16", threads, False)


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
