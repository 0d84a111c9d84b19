"""``python -m tierckpt.compat.sagemaker_import``: a step the reference wrote becomes a tierckpt step.

The ``tierckpt`` CLI is C++ (tools/cli) and has no S3 client of its own in Python reach, so the
import is this module rather than a ``tierckpt import`` subcommand (decision 57)::

    python -m tierckpt.compat.sagemaker_import --base s3://bucket/prefix --namespace job --world-size 8 \\
        [--step N] [--to-agent [--persist]] [--to-dir DIR] [--as-namespace NS] [--as-step M]

It finds the step (the newest complete one unless ``--step``; either layout, sagemaker_legacy.py)
and rewrites it without decoding a tensor: each rank's ``checkpoint.pt`` becomes the object
``__<rank>_0.distcp`` unchanged (its items are the same ``torch.save``/raw bytes FileSystemWriter
writes), and the metadata's ``_SageMakerStorageInfo(rank, offset, length)`` become DCP's
``_StorageInfo("__<rank>_0.distcp", offset, length)``. Then:

* ``--to-agent``: the step is committed in the local agent's memory (socket from the usual
  TIERCKPT_* settings), with ``--persist`` also in its durable tier; TieredReader and
  SageMakerTieredStorageReader load it, ``tierckpt ls`` shows it;
* ``--to-dir DIR``: a stock DCP directory (``FileSystemReader(DIR)`` loads it).

Prints one JSON line: what was imported and where. Exit status 1 with the reason on failure.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import pickle
import sys

from torch.distributed.checkpoint.metadata import StorageMeta

from .. import agent
from ..config import CheckpointConfig
from ..torch._dcp_compat import CURRENT_DCP_VERSION, StorageInfo
from ..torch._ids import checkpoint_id
from .sagemaker_legacy import LegacyStep, find_legacy_step

__all__ = ["convert", "import_step", "main"]

METADATA_OBJECT = ".metadata"


def _object_name(rank: int) -> str:
    return f"__{rank}_0.distcp"


def convert(legacy: LegacyStep, ckpt_id: str = "") -> tuple[bytes, dict[str, bytes]]:
    """(pickled DCP Metadata, {object name: bytes}) of a stock DCP step equal to legacy."""
    metadata = copy.copy(legacy.metadata)
    storage = {}
    for index, info in legacy.metadata.storage_data.items():
        storage[index] = StorageInfo(relative_path=_object_name(info.rank), offset=info.offset, length=info.length)
    metadata.storage_data = storage
    metadata.version = CURRENT_DCP_VERSION
    metadata.storage_meta = StorageMeta(checkpoint_id=ckpt_id or None)
    ranks = sorted({info.rank for info in legacy.metadata.storage_data.values()})
    objects = {_object_name(rank): legacy.rank_blob(rank) for rank in ranks}
    return pickle.dumps(metadata), objects


def import_step(legacy: LegacyStep, *, to_agent: CheckpointConfig | None = None, persist: bool = False,
                to_dir: str | None = None, namespace: str | None = None, step: int | None = None) -> dict:
    """Writes legacy as a tierckpt step (to_agent) and/or a DCP directory (to_dir); returns a summary."""
    namespace = namespace or legacy.namespace
    step = legacy.step if step is None else step
    metadata, objects = convert(legacy, checkpoint_id(namespace, step))
    summary = {"from": legacy.where, "namespace": namespace, "step": step, "world_size": legacy.world_size,
               "bytes": sum(len(b) for b in objects.values()) + len(metadata)}
    if to_dir:
        os.makedirs(to_dir, exist_ok=True)
        for name, data in {**objects, METADATA_OBJECT: metadata}.items():
            tmp = os.path.join(to_dir, name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(to_dir, name))  # .metadata last: a partial directory has none
        summary["dir"] = os.path.abspath(to_dir)
    if to_agent is not None:
        cfg = to_agent.resolve()
        c = agent.client(cfg)
        c.begin_save(namespace, step)
        try:
            for name, data in objects.items():
                c.write_object(namespace, step, name, data)
            c.write_object(namespace, step, METADATA_OBJECT, metadata)
            c.commit(namespace, step, world_size=legacy.world_size, persist=persist)
        except BaseException:
            try:
                c.abort(namespace, step)
            except Exception:  # noqa: S110 - the first error is the one to report
                pass
            raise
        if persist:
            c.wait_durable(namespace, step, 0.0)
        summary["agent"] = c.socket_path
        summary["durable"] = bool(persist)
    return summary


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tierckpt.compat.sagemaker_import",
                                description="Import a step written by amzn-sagemaker-checkpointing into tierckpt.")
    p.add_argument("--base", required=True, help="the reference's s3_tier_base_path (s3://bucket/prefix"
                   "[?endpoint=...]) or a directory holding the same tree")
    p.add_argument("--namespace", required=True, help="the reference's namespace")
    p.add_argument("--world-size", type=int, required=True, help="ranks the reference saved with")
    p.add_argument("--step", type=int, default=None, help="the step (default: the newest complete one)")
    p.add_argument("--layout", choices=["auto", "default", "ray"], default="auto",
                   help="rank_R/step_N (default), step_N/rank_R (ray), or whichever has the newest step (auto)")
    p.add_argument("--to-agent", action="store_true", help="commit the step in the local tierckpt agent")
    p.add_argument("--persist", action="store_true", help="with --to-agent: also persist it to the agent's "
                   "durable tier (waits until it is durable)")
    p.add_argument("--to-dir", default=None, help="also write a stock DCP directory here")
    p.add_argument("--as-namespace", default=None, help="tierckpt namespace (default: the same)")
    p.add_argument("--as-step", type=int, default=None, help="tierckpt step number (default: the same)")
    p.add_argument("--socket", default=None, help="the agent's socket (default: TIERCKPT_SOCKET, ...)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.to_agent and not args.to_dir:
        print("sagemaker_import: nothing to do: give --to-agent and/or --to-dir DIR", file=sys.stderr)
        return 2
    if args.persist and not args.to_agent:
        print("sagemaker_import: --persist needs --to-agent", file=sys.stderr)
        return 2
    from .sagemaker_paths import DefaultS3PathStrategy, RayS3PathStrategy

    strategy = {"default": DefaultS3PathStrategy, "ray": RayS3PathStrategy}.get(args.layout)
    try:
        legacy = find_legacy_step(args.base, args.namespace, args.world_size, args.step,
                                  strategy(args.base) if strategy else None, other_layouts=strategy is None)
        if legacy is None:
            which = f"step {args.step}" if args.step is not None else "a complete step"
            print(f"sagemaker_import: found no {which} of namespace {args.namespace!r} with {args.world_size} ranks "
                  f"under {args.base} (layout {args.layout}): every rank's directory and rank 0's metadata.metadata "
                  "must be there", file=sys.stderr)
            return 1
        cfg = None
        if args.to_agent:
            cfg = CheckpointConfig(args.as_namespace or args.namespace, socket=args.socket)
        summary = import_step(legacy, to_agent=cfg, persist=args.persist, to_dir=args.to_dir,
                              namespace=args.as_namespace, step=args.as_step)
    except Exception as e:  # one line with the reason, not a traceback
        print(f"sagemaker_import: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
