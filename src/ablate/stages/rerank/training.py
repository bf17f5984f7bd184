"""Fine-tune a cross-encoder reranker locally, offline, on a corpus's train split (``rerank.model=trained``).

Training data: :mod:`ablate.stages.rerank.training_pairs` (judged-relevant chunks as positives, BM25 hard negatives).

Model (:func:`train_cross_encoder`): a sentence-transformers ``CrossEncoder`` initialised from a local checkpoint —
by default the bundled bi-encoder all-MiniLM-L6-v2, which sentence-transformers turns into a cross-encoder with one
output and a randomly initialised head — trained with ``BinaryCrossEntropyLoss`` (BCE on logits, ``pos_weight`` =
negatives per positive), AdamW, linear warm-up (10 %) and decay, gradient clipping at 1.0. The loop is our own
~30 lines rather than ``CrossEncoderTrainer``: that trainer needs ``datasets`` and ``accelerate`` (not dependencies
of ablate) and brings W&B/hub integrations we would only have to switch off; the loss and the model are the library's.
Every random source (python, numpy, torch: head init, dropout, shuffling) is seeded from ``seed`` and the caller's RNG
state is restored afterwards.

Cache: the trained model is stored by content in ``Cache.dir_for("reranker-trained", key)`` with
``key = key_of(recipe, base model fingerprint, sha256(pairs), hyper-parameters)``. It is saved into a temporary sibling
folder and renamed into place, so a reader sees a whole model or none; a second call with the same inputs trains
nothing and returns the cached folder (``TrainedModel.trained`` is False).

Precision and threads (:mod:`ablate.stages.text.compute`): ``precision="bf16"`` runs the forward and backward passes
under bf16 autocast, where a probe of this CPU measured it faster than fp32 (else it is refused before training);
``"bf16"`` joins the cache key, ``"fp32"`` adds nothing to it (an fp32 key is the key without the option).
``num_threads`` sets torch's threads for the training only; it is not in the key (it changes no weight beyond float
rounding).

Progress: optimizer steps done, the running loss and an ETA (:class:`ablate.progress.Progress`). Training is not
resumable: an interrupted run starts over (the finished model is cached, so it is trained once).

Cost and quality: training reads every pair through the transformer once per epoch, so it takes minutes to hours
on a CPU; on a machine shared with other work one thread (``num_threads: 1``) can be faster than two, which spin
against each other. A small train split teaches little. Measured throughput and what a small split taught:
``experiments/README.md`` ("Figures behind the stages' docstrings") and ``experiments/scifact.md``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate.cache import Cache, key_of, ordinary_folder
from ablate.progress import Progress
from ablate.stages.base import check_float, check_int, library_versions
from ablate.stages.rerank.training_pairs import (
    TrainingPair,
    TrainingPairs,
    check_pairs,
    pairs_from_snapshot,
    pairs_sha256,
)
from ablate.stages.text.compute import Compute, resolve_compute, torch_threads
from ablate.stages.text.encoders import resolve_base_model
from ablate.stages.text.models import ResolvedModel, resolve_model

if TYPE_CHECKING:
    from ablate.data.snapshot import Snapshot

#: ``python -m ablate.train_reranker`` reads the pairs through this module: the ones ``rerank.model=trained`` fits on.
__all__ = [
    "TrainedModel",
    "effective_epochs",
    "pairs_from_snapshot",
    "train_cross_encoder",
    "trained_reranker_path",
]

TRAINED_KIND = "reranker-trained"
META_FILE = (
    "ablate_training.json"  # written inside the model folder; also makes its fingerprint content-specific
)
RECIPE = "ablate-ce-bce/v1"  # the training recipe (loss, schedule); part of the trained model's cache key
#: Bump when the procedure changes (the pairs of :mod:`.training_pairs`, this module's loop): part of the reranker
#: stage's fingerprint.
CODE_VERSION = "ablate-ce-training/2"
LIBRARIES = ("sentence-transformers", "transformers", "torch")
WARMUP_RATIO = 0.1
WEIGHT_DECAY = 0.01
MAX_GRAD_NORM = 1.0
DEFAULT_LR = 5e-5
#: Smallest learning rate accepted: a positive rate (check_float bounds are inclusive, so zero needs a floor above it).
MIN_LR = 1e-12
DEFAULT_MIN_STEPS = 100
#: Shortest ``max_length`` accepted, training or scoring (tokens of question and passage together): the special
#: tokens take 3, and a pair cut shorter than 8 has almost nothing of either left.
MIN_MAX_LENGTH = 8
MAX_CYCLED_EPOCHS = (
    10  # min_steps never cycles a split more than this: repeating a handful of pairs only memorises
)


def effective_epochs(n_pairs: int, batch_size: int, epochs: int, min_steps: int) -> int:
    """``epochs``, raised (up to :data:`MAX_CYCLED_EPOCHS`) until ``min_steps`` optimizer steps are reached."""
    steps_per_epoch = max(1, math.ceil(n_pairs / batch_size))
    return max(epochs, min(MAX_CYCLED_EPOCHS, math.ceil(min_steps / steps_per_epoch)))


@dataclass(frozen=True)
class TrainedModel(ResolvedModel):
    """A :class:`ResolvedModel` of a fine-tuned cross-encoder folder, plus how it was obtained."""

    trained: bool = False  # True when this call trained it, False when it came from the cache
    key: str = ""  # the cache key (content of base model + pairs + hyper-parameters)
    n_pairs: int = 0
    seconds: float = 0.0  # training wall time of this call (0 on a cache hit)


# -- training -------------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed python, numpy and torch; restore the caller's RNG states afterwards."""
    import numpy as np
    import torch

    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


def _say(show: bool, msg: str) -> None:
    if show:
        print(f"[train_reranker] {msg}", file=sys.stderr, flush=True)


def _fit(
    pairs: list[TrainingPair],
    base: ResolvedModel,
    out_dir: Path,
    *,
    epochs: int,
    batch_size: int,
    max_length: int,
    lr: float,
    seed: int,
    show_progress: bool,
    compute: Compute,
) -> None:
    import torch
    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from transformers import get_linear_schedule_with_warmup

    from ablate.models.quiet import quiet_transformers

    n = len(pairs)
    n_pos = sum(1 for _, _, y in pairs if y >= 0.5)
    pos_weight = max(1.0, (n - n_pos) / n_pos) if n_pos else 1.0
    steps_per_epoch = math.ceil(n / batch_size)
    total = steps_per_epoch * epochs
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if compute.bf16 else contextlib.nullcontext()
    with torch_threads(compute.num_threads), _seeded(seed):
        with quiet_transformers():
            model = CrossEncoder(base.path, num_labels=1, max_length=max_length, device="cpu")
        loss_fn = BinaryCrossEntropyLoss(model, pos_weight=torch.tensor(pos_weight))
        no_decay = ("bias", "LayerNorm.weight", "LayerNorm.bias", "layer_norm")
        named = [(k, p) for k, p in model.named_parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(
            [
                {
                    "params": [p for k, p in named if not any(d in k for d in no_decay)],
                    "weight_decay": WEIGHT_DECAY,
                },
                {"params": [p for k, p in named if any(d in k for d in no_decay)], "weight_decay": 0.0},
            ],
            lr=lr,
        )
        scheduler = get_linear_schedule_with_warmup(optimizer, int(WARMUP_RATIO * total), total)
        order = torch.Generator().manual_seed(seed)
        _say(
            show_progress,
            f"training {n} pairs ({n_pos} positive), {epochs} epoch(s) x {steps_per_epoch} steps of {batch_size}, "
            f"max_length {max_length}, lr {lr:g}, base {base.name}, {compute.precision}, "
            f"{torch.get_num_threads()} torch thread(s)",
        )
        model.train()
        with Progress("train reranker", total, unit="steps", enabled=show_progress) as progress:
            for epoch in range(1, epochs + 1):
                perm = torch.randperm(n, generator=order).tolist()
                running = 0.0
                for b in range(steps_per_epoch):
                    batch = [pairs[i] for i in perm[b * batch_size : (b + 1) * batch_size]]
                    labels = torch.tensor([y for _, _, y in batch], dtype=torch.float32)
                    with autocast:
                        loss = loss_fn([[q for q, _, _ in batch], [p for _, p, _ in batch]], labels)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
                    running += float(loss.detach())
                    progress.label = f"train reranker, epoch {epoch}/{epochs}, loss {running / (b + 1):.4f}"
                    progress.update(1)
        model.eval()
        with quiet_transformers():
            model.save(str(out_dir), create_model_card=False)


def _train_into(
    target: Path, meta: dict[str, Any], fit: Callable[[Path], None], replace_existing: bool
) -> float:
    """Run ``fit`` into a temporary sibling of ``target``, write ``meta`` (with the training time) and rename it into
    place, so a reader sees a whole model or none. Returns the training seconds."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = ordinary_folder(Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)))
    try:
        t0 = time.perf_counter()
        fit(tmp)
        seconds = time.perf_counter() - t0
        meta = {**meta, "train_seconds": round(seconds, 3)}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
        if replace_existing and target.exists():
            shutil.rmtree(target)
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / META_FILE).is_file():  # not a lost race with an identical writer: a real failure
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process stored the same model first; keep theirs
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return seconds


def _hyper_parameters(
    epochs: int,
    min_steps: int,
    run_epochs: int,
    batch_size: int,
    max_length: int,
    lr: float,
    seed: int,
    compute: Compute,
) -> dict[str, Any]:
    """Everything about the training run that shapes the model (part of its cache key and its metadata). The
    precision is there only when it is bf16 (fp32 keys are those of models trained before the option existed); the
    thread count never is."""
    return {
        **compute.fingerprint_part(),
        "epochs": epochs,
        "min_steps": min_steps,
        "effective_epochs": run_epochs,
        "batch_size": batch_size,
        "max_length": max_length,
        "lr": lr,
        "seed": seed,
        "warmup_ratio": WARMUP_RATIO,
        "weight_decay": WEIGHT_DECAY,
        "max_grad_norm": MAX_GRAD_NORM,
        "loss": "BinaryCrossEntropyLoss(pos_weight=negatives/positives)",
    }


def train_cross_encoder(
    pairs: TrainingPairs,
    base_model: str = "all-MiniLM-L6-v2",
    epochs: int = 1,
    batch_size: int = 16,
    max_length: int = 128,
    lr: float = DEFAULT_LR,
    seed: int = 13,
    cache: Cache | None = None,
    show_progress: bool = True,
    min_steps: int = DEFAULT_MIN_STEPS,
    precision: str = "fp32",
    num_threads: int | None = None,
) -> TrainedModel:
    """Fine-tune a cross-encoder on ``pairs`` (see :func:`build_pairs`), or return the cached one.

    Returns a :class:`TrainedModel` (a :class:`ResolvedModel` of the saved folder, ready for
    ``CrossEncoderReranker(model=result.path)``) whose ``trained`` flag says whether this call trained.
    ``epochs`` is a floor together with ``min_steps``: a small train split is cycled for whole extra epochs until at
    least ``min_steps`` optimizer steps are taken (at most 10 epochs: :func:`effective_epochs`), because the randomly
    initialised head of a bi-encoder checkpoint needs on the order of a hundred updates to learn anything.
    ``cache=None`` uses the default cache folder; a disabled cache always retrains (and replaces the stored model).
    ``precision`` (``fp32`` | ``bf16``) and ``num_threads`` (``None`` = torch's default): see the module docstring.

    Long because the cache lookup, the seeded loop and the atomic save share one temporary folder and one RNG state
    that must be restored on every exit path.
    """
    for key_name, value, minimum in (
        ("epochs", epochs, 1),
        ("batch_size", batch_size, 1),
        ("max_length", max_length, MIN_MAX_LENGTH),
    ):
        check_int(f"train_reranker.{key_name}", value, minimum)
    check_int("train_reranker.min_steps", min_steps, 0)
    check_float("train_reranker.lr", lr, MIN_LR, 1.0, hint=", e.g. 5e-5")
    compute = resolve_compute(
        "train_reranker.precision", precision, "train_reranker.num_threads", num_threads, "train"
    )
    checked = check_pairs(pairs)
    base = resolve_base_model(base_model, "train_reranker.base_model")
    cache = cache if cache is not None else Cache()
    run_epochs = effective_epochs(len(checked), batch_size, epochs, min_steps)
    hyper = _hyper_parameters(epochs, min_steps, run_epochs, batch_size, max_length, float(lr), seed, compute)
    psha = pairs_sha256(checked)
    key = key_of(RECIPE, CODE_VERSION, library_versions(*LIBRARIES), base.fingerprint, psha, hyper)
    target = cache.dir_for(TRAINED_KIND, key)

    def result(trained: bool, seconds: float) -> TrainedModel:
        r = resolve_model(str(target), kind="cross-encoder", setting="rerank.model")
        return TrainedModel(r.name, r.path, r.fingerprint, trained, key, len(checked), seconds)

    if cache.enabled and (target / META_FILE).is_file():
        _say(show_progress, f"cached model for these {len(checked)} pairs: {target}")
        return result(False, 0.0)

    meta: dict[str, Any] = {
        "recipe": RECIPE,
        "key": key,
        "base_model": base.name,
        "base_model_fingerprint": base.fingerprint,
        "pairs_sha256": psha,
        "n_pairs": len(checked),
        "n_positive": sum(1 for _, _, y in checked if y >= 0.5),
        "hyper_parameters": hyper,
    }
    seconds = _train_into(
        target,
        meta,
        lambda tmp: _fit(
            checked,
            base,
            tmp,
            epochs=run_epochs,
            batch_size=batch_size,
            max_length=max_length,
            lr=float(lr),
            seed=seed,
            show_progress=show_progress,
            compute=compute,
        ),
        replace_existing=not cache.enabled,
    )
    _say(show_progress, f"saved {target} ({seconds:.0f}s, {len(checked) * run_epochs / seconds:.1f} pairs/s)")
    return result(True, seconds)


def trained_reranker_path(
    snapshot: Snapshot,
    train: Mapping[str, Any],
    cache: Cache,
    show_progress: bool = False,
    num_threads: int | None = None,
) -> str:
    """Fine-tune (or fetch from the cache) a cross-encoder on ``train["split"]`` of ``snapshot``; its folder."""
    pairs = pairs_from_snapshot(
        snapshot, str(train["split"]), max_negatives=int(train["max_negatives"]), seed=int(train["seed"])
    )
    resolved = train_cross_encoder(
        pairs,
        base_model=str(train["base_model"]),
        epochs=int(train["epochs"]),
        max_length=int(train["max_length"]),
        seed=int(train["seed"]),
        cache=cache,
        show_progress=show_progress,
        min_steps=int(train["min_steps"]),
        precision=str(train.get("precision", "fp32")),
        num_threads=num_threads,
    )
    return resolved.path
