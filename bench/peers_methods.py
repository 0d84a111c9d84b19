"""peers_methods.py - one adapter per checkpointing method that bench/peers.py measures.

Every adapter drives one system the way its documentation (or bench/../shared notes) says, on the
CPU, inside one rank of the torchrun job that bench/peers_rank.py runs:

    m = Method(ctx)          # may raise Skip(reason): the method is left out with that reason
    wait = m.save(state, step)   # returns when the training thread may go on (blocking time);
    wait()                       # returns when the checkpoint is in memory on the node (commit)
    got = m.load(step, dest)     # None: dest was filled in place; else a state to copy into dest
    m.close()

ctx is the rank's context: rank, world, opts (the driver's options), shm (this run's /dev/shm dir).
"""
from __future__ import annotations

import functools

import os
import shutil
from pathlib import Path


class Skip(Exception):
    """The method cannot run here; the message is the exact reason (recorded in the JSON)."""


def _done():
    return None


def _import(module: str, peer: str):
    try:
        return __import__(module, fromlist=["_"])
    except Exception as e:  # noqa: BLE001 - any import failure is a skip reason
        raise Skip(f"{peer}: import {module} failed: {type(e).__name__}: {e}") from e


class Memcpy:
    """The limit: one copy_ of every tensor into pre-allocated, touched buffers (no checkpoint)."""

    label = "memcpy (limit)"

    def __init__(self, ctx):
        self.ctx = ctx
        self.buffers = None

    def save(self, state, step):
        from peers_rank import tensors_of  # noqa: PLC0415

        src = [t for _, t in tensors_of(state)]
        if self.buffers is None:
            self.buffers = [t.clone() for t in src]  # touched once, outside any timing
        for d, s in zip(self.buffers, src):
            d.copy_(s)
        return _done

    def load(self, step, dest):
        from peers_rank import tensors_of  # noqa: PLC0415

        for (_, d), s in zip(tensors_of(dest), self.buffers):
            d.copy_(s)
        return None

    def close(self):
        self.buffers = None


def _drop_tierckpt_client(cfg) -> None:
    """Closes this process's connection to the run's agent (unmaps its cached segments); best effort."""
    from tierckpt import agent as tc_agent

    try:
        tc_agent.drop_client(tc_agent.client(cfg))
    except Exception:  # noqa: BLE001 - best effort
        pass


@functools.lru_cache(maxsize=None)
def _own_planner_classes():
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner

    class OwnSavePlanner(DefaultSavePlanner):
        """DefaultSavePlanner under another name: the storage layer does not cache its plans."""

    class OwnLoadPlanner(DefaultLoadPlanner):
        """DefaultLoadPlanner with a global step of its own (the default's): every item travels."""

        def create_global_plan(self, global_plan):
            return super().create_global_plan(global_plan)

    return OwnSavePlanner, OwnLoadPlanner


def _OwnSavePlanner():  # noqa: N802 - built lazily: torch is imported by the rank, not at module import
    return _own_planner_classes()[0]()


def _OwnLoadPlanner():  # noqa: N802
    return _own_planner_classes()[1]()


class Tierckpt:
    """tierckpt: dcp.async_save with TieredWriter into the node agent's memory tier; dcp.load with
    TieredReader. The agent was started by the driver for this run (socket in opts)."""

    def __init__(self, ctx, mode: str, tuned: bool = False, uncached: bool = False):
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

        tc = _import("tierckpt.torch", "tierckpt")
        self.dcp, self.tc = dcp, tc
        self.mode = getattr(AsyncCheckpointerType, mode)
        # tuned: the two choices that are the caller's (docs/python.md): DCP's plan caching for an
        # unchanged state dict layout, and reads that trust the agent's recent verification.
        self.tuned = tuned
        # uncached: planners of the caller's own (DefaultSavePlanner / DefaultLoadPlanner subclasses that
        # change nothing), for which TieredWriter/TieredReader do not cache plans (decision 84): the
        # default path as it was before that, measured in the same run.
        self.uncached = uncached
        self.label = (f"tierckpt ({mode}{', plan caching + attested reads' if tuned else ''}"
                      f"{', storage-layer plan caching off' if uncached else ''})")
        o = ctx.opts
        name = f"peers-{o['run_id']}-{mode.lower()}{'-tuned' if tuned else ''}{'-uncached' if uncached else ''}"
        self.cfg = tc.CheckpointConfig(name, socket=o["socket"], auto_start=False, persist_every=0,
                                       verify_reads="attested" if tuned else True)

    def save(self, state, step):
        kw = {}
        if self.tuned:
            from torch.distributed.checkpoint.default_planner import DefaultSavePlanner

            kw["planner"] = DefaultSavePlanner(enable_plan_caching=True)
        elif self.uncached:
            kw["planner"] = _OwnSavePlanner()
        fut = self.dcp.async_save(state, storage_writer=self.tc.TieredWriter(self.cfg, step),
                                  async_checkpointer_type=self.mode, **kw)
        return lambda: fut.result()

    def load(self, step, dest):
        kw = {"planner": _OwnLoadPlanner()} if self.uncached else {}
        self.dcp.load(dest, storage_reader=self.tc.TieredReader(self.cfg, step=step), **kw)
        return None

    def close(self):
        _drop_tierckpt_client(self.cfg)


class TierckptDirect:
    """tierckpt's Checkpointer (no DCP planning; DCP's format): the like-for-like of DLRover's
    DdpCheckpointer. save() returns once the step is committed in the agent's memory; load() copies
    into dest in place, trusting the agent's verification after seal (verify_reads="attested")."""

    label = "tierckpt Checkpointer (attested reads)"

    def __init__(self, ctx):
        tc = _import("tierckpt.torch", "tierckpt")
        o = ctx.opts
        self.cfg = tc.CheckpointConfig(f"peers-{o['run_id']}-direct", socket=o["socket"], auto_start=False,
                                       persist_every=0, verify_reads="attested")
        self.ckpt = tc.Checkpointer(self.cfg)

    def save(self, state, step):
        self.ckpt.save(step, state)
        return _done

    def load(self, step, dest):
        self.ckpt.load(dest, step=step)
        return None

    def close(self):
        _drop_tierckpt_client(self.cfg)


class DcpFs:
    """Stock DCP: dcp.async_save with FileSystemWriter into /dev/shm; dcp.load with FileSystemReader."""

    def __init__(self, ctx, mode: str):
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

        self.dcp, self.ctx = dcp, ctx
        self.mode = getattr(AsyncCheckpointerType, mode)
        self.label = f"DCP FileSystemWriter /dev/shm ({mode})"
        self.base = ctx.shm / f"dcp-{mode.lower()}"

    def _dir(self, step) -> Path:
        return self.base / f"step{step}"

    def prepare(self, step):
        if self.ctx.rank == 0:  # the last step was loaded already: free its pages
            shutil.rmtree(self._dir(step - 1), ignore_errors=True)

    def save(self, state, step):
        from torch.distributed.checkpoint import FileSystemWriter

        fut = self.dcp.async_save(state, storage_writer=FileSystemWriter(self._dir(step)),
                                  async_checkpointer_type=self.mode)
        return lambda: fut.result()

    def load(self, step, dest):
        from torch.distributed.checkpoint import FileSystemReader

        self.dcp.load(dest, storage_reader=FileSystemReader(self._dir(step)))
        return None

    def close(self):
        if self.ctx.rank == 0:
            shutil.rmtree(self.base, ignore_errors=True)


class DLRover:
    """DLRover Flash Checkpoint: DdpCheckpointer.save_checkpoint(storage_type=MEMORY), a synchronous
    copy into POSIX shared memory (local rank 0 forks its saver process itself)."""

    label = "DLRover Flash Checkpoint"

    def __init__(self, ctx):
        ddp = _import("dlrover.trainer.torch.flash_checkpoint.ddp", "dlrover")
        # Without dlrover-run, local rank 0 starts DLRover's saver with multiprocessing.Process: a fork of
        # the rank (gloo's threads, a GiB of state). Twice in six full-size runs here the forked saver never
        # created its sockets (TimeoutError: "Timed out waiting for socket server: ckpt_lock_rank_0",
        # engine.py:149, DLRover skipped). Spawned, it starts clean.
        import multiprocessing

        engine = _import("dlrover.trainer.torch.flash_checkpoint.engine", "dlrover")
        engine.Process = multiprocessing.get_context("spawn").Process
        self.StorageType = ddp.StorageType
        self.dir = ctx.shm / "dlrover"
        self.ckpt = ddp.DdpCheckpointer(str(self.dir), local_shard_num=ctx.world, global_shard_num=ctx.world)

    def save(self, state, step):
        self.ckpt.save_checkpoint(step, state, storage_type=self.StorageType.MEMORY)
        return _done

    def load(self, step, dest):
        got = self.ckpt.load_checkpoint()
        if not got:
            raise RuntimeError("DLRover load_checkpoint() returned nothing")
        return got.get("model_states", got)

    def close(self):
        try:
            self.ckpt._engine.close()
        except Exception:  # noqa: BLE001 - best effort; the driver removes its shm segments
            pass


def _nvrx_state_class():
    """A CPU TensorAwareStateDict (the stock one asserts CUDA), at module level so that it pickles."""
    from nvidia_resiliency_ext.checkpointing.local.basic_state_dict import BasicTensorAwareStateDict

    class CpuTensorAwareStateDict(BasicTensorAwareStateDict):
        def __init__(self, state_dict):  # noqa: D107 - no CUDA assertion
            self.state_dict = state_dict
            self._is_hollow = False

        def restore_tensor_device(self, non_blocking=True):
            pass

    CpuTensorAwareStateDict.__module__ = __name__
    CpuTensorAwareStateDict.__qualname__ = "CpuTensorAwareStateDict"
    globals()["CpuTensorAwareStateDict"] = CpuTensorAwareStateDict
    return CpuTensorAwareStateDict


class NVRx:
    """NVIDIA Resiliency Extension: LocalCheckpointManager, synchronous save into local files (here
    /dev/shm), find_latest + load."""

    label = "NVRx LocalCheckpointManager"

    def __init__(self, ctx):
        lm = _import("nvidia_resiliency_ext.checkpointing.local.ckpt_managers.local_manager", "nvidia-resiliency-ext")
        self.cls = _nvrx_state_class()
        self.dir = ctx.shm / "nvrx"
        self.mgr = lm.LocalCheckpointManager(str(self.dir))

    def save(self, state, step):
        self.mgr.save(self.cls(dict(state)), step, is_async=False)
        return _done

    def load(self, step, dest):
        latest = self.mgr.find_latest()
        if latest != step:
            raise RuntimeError(f"NVRx find_latest() = {latest}, expected {step}")
        tasd, _ = self.mgr.load()
        return tasd.state_dict

    def close(self):
        pass


class SageMaker:
    """amzn-sagemaker-checkpointing: dcp.async_save with SageMakerTieredStorageWriter against the
    HTTP stand-in its source distribution ships, or (on_tierckpt) against the private tierckptd's
    HTTP API (--http-listen, docs/http-api.md); both started by the driver, base URLs in opts."""

    def __init__(self, ctx, on_tierckpt: bool = False):
        self.label = ("amzn-sagemaker-checkpointing (on tierckptd --http-listen)" if on_tierckpt
                      else "amzn-sagemaker-checkpointing (stand-in)")
        import torch.distributed.checkpoint as dcp

        fs = _import("amzn_sagemaker_checkpointing.checkpointing.filesystem", "amzn-sagemaker-checkpointing")
        cc = _import("amzn_sagemaker_checkpointing.config.sagemaker_checkpoint_config", "amzn-sagemaker-checkpointing")
        cl = _import("amzn_sagemaker_checkpointing.config.in_memory_client", "amzn-sagemaker-checkpointing")
        ic = _import("amzn_sagemaker_checkpointing.storage.clients.inmemory.inmemory_client",
                     "amzn-sagemaker-checkpointing")
        url = ctx.opts.get("sagemaker_tierckpt_url" if on_tierckpt else "sagemaker_url")
        if not url:
            raise Skip("amzn-sagemaker-checkpointing: its HTTP server did not start (see the driver's note)")
        # As its tests/local_tests/common.py does; the URL is looked up at each client's creation, since
        # both methods run in one process.
        original = getattr(ic.InMemoryCheckpointClient.__init__, "_peers_original", ic.InMemoryCheckpointClient.__init__)

        def patched(client, *args, config=None, **kwargs):
            original(client, *args, config=config or cl.InMemoryClientConfig(base_url=SageMaker.current_url),
                     **kwargs)
        patched._peers_original = original
        ic.InMemoryCheckpointClient.__init__ = patched
        self.dcp, self.fs, self.url, self.rank = dcp, fs, url, ctx.rank
        self.cfg = cc.SageMakerCheckpointConfig(
            namespace=f"peers-{'tc-' if on_tierckpt else ''}{ctx.opts['run_id']}", world_size=ctx.world)

    current_url = ""

    def prepare(self, step):
        """Frees the stand-in's copy of the step before last (outside the timing)."""
        import requests

        requests.delete(f"{self.url}/v1/cp/checkpoints/{self.cfg.namespace}/{self.rank}/{step - 2}", timeout=30)
        SageMaker.current_url = self.url

    def save(self, state, step):
        SageMaker.current_url = self.url
        fut = self.dcp.async_save(state, storage_writer=self.fs.SageMakerTieredStorageWriter(
            checkpoint_config=self.cfg, step=step))
        return lambda: fut.result()

    def load(self, step, dest):
        SageMaker.current_url = self.url
        self.dcp.load(dest, storage_reader=self.fs.SageMakerTieredStorageReader(checkpoint_config=self.cfg, step=step))
        return None

    def close(self):
        pass


class Gemini:
    """lm-resiliency (GEMINI): InMemoryCheckpointManager, host buffers and peer replication over gloo;
    commit = maybe_wait() (the host copy done and replication launched)."""

    label = "lm-resiliency GEMINI"

    def __init__(self, ctx):
        lr = _import("lm_resiliency", "lm-resiliency")
        mgr = _import("lm_resiliency.checkpointing.manager", "lm-resiliency")
        cfg = lr.InMemoryCkptConfig(interval=1, disk_flush_interval=0, disk_folder=str(ctx.shm / "gemini"),
                                    run_id="peers-bench", pin_memory=False, replication_jump=1)
        try:
            self.mgr = mgr.InMemoryCheckpointManager(cfg)
        except Exception as e:  # noqa: BLE001
            raise Skip(f"lm-resiliency: InMemoryCheckpointManager() on CPU failed: {type(e).__name__}: {e}") from e

    def save(self, state, step):
        self.mgr.save(state, step)
        return self.mgr.maybe_wait

    def load(self, step, dest):
        got = self.mgr.load(step=step)
        if got is None:
            raise RuntimeError(f"GEMINI load(step={step}) returned None")
        return got[0]

    def close(self):
        try:
            self.mgr.close()
        except Exception:  # noqa: BLE001
            pass


class TorchCheckpointing:
    """torch-checkpointing (Meta): CheckpointManager with its async saver (a staging copy, then a
    writer process) into local files under /dev/shm; commit = the write future's result; load
    into the live tensors (into=)."""

    label = "torch-checkpointing CheckpointManager"

    def __init__(self, ctx):
        tcp = _import("torch_checkpointing", "torch-checkpointing")
        try:
            self.mgr = tcp.CheckpointManager.Config.with_async_save().build()
        except Exception as e:  # noqa: BLE001
            raise Skip(f"torch-checkpointing: CheckpointManager() on CPU failed: {type(e).__name__}: {e}") from e
        self.ctx, self.base = ctx, ctx.shm / "torch-checkpointing"

    def prepare(self, step):
        if self.ctx.rank == 0:
            shutil.rmtree(self.base / f"step{step - 1}", ignore_errors=True)

    def save(self, state, step):
        fut = self.mgr.save(str(self.base / f"step{step}"), state)
        return (lambda: fut.result()) if fut is not None else _done

    def load(self, step, dest):
        return self.mgr.load(str(self.base / f"step{step}"), into=dest)

    def close(self):
        try:
            self.mgr.close()
        except Exception:  # noqa: BLE001
            pass


def make(name: str, ctx):
    """The adapter for method name (see METHODS), or raises Skip."""
    table = {
        "memcpy": lambda: Memcpy(ctx),
        "tierckpt_thread": lambda: Tierckpt(ctx, "THREAD"),
        "tierckpt_process": lambda: Tierckpt(ctx, "PROCESS"),
        "tierckpt_tuned": lambda: Tierckpt(ctx, "THREAD", tuned=True),
        "tierckpt_uncached": lambda: Tierckpt(ctx, "THREAD", uncached=True),
        "tierckpt_direct": lambda: TierckptDirect(ctx),
        "dlrover": lambda: DLRover(ctx),
        "nvrx": lambda: NVRx(ctx),
        "sagemaker": lambda: SageMaker(ctx),
        "sagemaker_tierckpt": lambda: SageMaker(ctx, on_tierckpt=True),
        "gemini": lambda: Gemini(ctx),
        "torch_checkpointing": lambda: TorchCheckpointing(ctx),
        "dcp_thread": lambda: DcpFs(ctx, "THREAD"),
        "dcp_process": lambda: DcpFs(ctx, "PROCESS"),
    }
    return table[name]()


# Method names, the groups --methods accepts, and the order of the table.
METHODS = ["memcpy", "tierckpt_thread", "tierckpt_process", "tierckpt_tuned", "tierckpt_uncached", "tierckpt_direct", "dlrover", "mlflashpoint", "nvrx", "sagemaker",
           "sagemaker_tierckpt", "gemini", "torch_checkpointing", "dcp_thread", "dcp_process"]
GROUPS = {"tierckpt": ["tierckpt_thread", "tierckpt_process", "tierckpt_tuned", "tierckpt_direct"], "dcp": ["dcp_thread", "dcp_process"],
          "sagemaker": ["tierckpt_thread", "sagemaker", "sagemaker_tierckpt"],
          "all": METHODS}
