"""One rank of a real Lightning run for test_lightning.py: DDP over gloo on CPU (or one process),
ModelCheckpoint every 2 steps through TieredCheckpointIO, SIGKILLed at a step if asked.

Started by the test with the environment of an externally launched rank (RANK, LOCAL_RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so Lightning launches nothing itself. Appends JSON events
to --events: "save" (rank 0, each checkpoint Lightning saves, with digests of its model,
optimizer, schedulers and loops), "loaded" (the checkpoint a resume loaded, each rank),
"resume" (the live state after the restore, each rank), "kill".
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import time
import warnings

import torch

warnings.filterwarnings("ignore")

import lightning as L  # noqa: E402
from lightning.pytorch.callbacks import Callback, ModelCheckpoint  # noqa: E402
from lightning.pytorch.plugins.io import AsyncCheckpointIO  # noqa: E402
from lightning.pytorch.strategies import DDPStrategy  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from tierckpt.lightning import LATEST, TieredCheckpointIO, read_pointer  # noqa: E402
from tierckpt.torch import CheckpointConfig  # noqa: E402
from states import digest  # noqa: E402  (python/tests, the script's directory)



class Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=1e-2, betas=(0.9, 0.99))
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class Recorder(Callback):
    def __init__(self, events: str, kill_at: int, last: str) -> None:
        self.events, self.kill_at, self.last = events, kill_at, last

    def _emit(self, **event) -> None:
        with open(self.events, "a") as f:
            f.write(json.dumps(event) + "\n")

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        self._emit(event="save", rank=trainer.global_rank, step=checkpoint["global_step"],
                   epoch=checkpoint["epoch"], model=digest(checkpoint["state_dict"]),
                   optim=digest(checkpoint["optimizer_states"]), sched=digest(checkpoint["lr_schedulers"]),
                   loops=digest(checkpoint["loops"]))

    def on_load_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        self._emit(event="loaded", rank=trainer.global_rank, step=checkpoint["global_step"],
                   epoch=checkpoint["epoch"], model=digest(checkpoint["state_dict"]),
                   optim=digest(checkpoint["optimizer_states"]), sched=digest(checkpoint["lr_schedulers"]),
                   loops=digest(checkpoint["loops"]))

    def on_train_start(self, trainer, pl_module) -> None:
        if trainer.global_step:
            self._emit(event="resume", rank=trainer.global_rank, step=trainer.global_step,
                       epoch=trainer.current_epoch, model=digest(pl_module.state_dict()),
                       optim=digest([o.state_dict() for o in trainer.optimizers]),
                       sched=digest([c.scheduler.state_dict() for c in trainer.lr_scheduler_configs]))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step != self.kill_at or trainer.global_rank != 0:
            return
        # The kill comes once the last save before it is committed (its pointer names it), so the
        # test knows which step the resume must find, with or without AsyncCheckpointIO.
        want = self.kill_at - self.kill_at % 2
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.exists(self.last) and read_pointer(self.last)["step"] == want:
                break
            time.sleep(0.02)
        self._emit(event="kill", rank=0, step=trainer.global_step)
        os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--events", required=True)
    p.add_argument("--max-steps", type=int, default=12)
    p.add_argument("--kill-at", type=int, default=-1)
    p.add_argument("--resume", choices=["none", "last", "latest"], default="none")
    p.add_argument("--async-save", action="store_true")
    p.add_argument("--persist-every", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    L.seed_everything(0, verbose=False)
    world = int(os.environ.get("WORLD_SIZE", "1"))

    cfg = CheckpointConfig(args.namespace, persist_every=args.persist_every)
    io = TieredCheckpointIO(cfg)
    plugin = AsyncCheckpointIO(io) if args.async_save else io
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, generator=gen)
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=4, shuffle=False)
    trainer = L.Trainer(
        accelerator="cpu", devices=world, num_nodes=1,
        strategy=DDPStrategy(process_group_backend="gloo") if world > 1 else "auto",
        max_steps=args.max_steps, plugins=[plugin], logger=False, enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ModelCheckpoint(dirpath=args.ckpt_dir, every_n_train_steps=2, save_top_k=-1, save_last=True),
                   Recorder(args.events, args.kill_at, os.path.join(args.ckpt_dir, "last.ckpt"))])
    ckpt_path = {"none": None, "last": "last", "latest": LATEST}[args.resume]
    trainer.fit(Model(), train_dataloaders=data, ckpt_path=ckpt_path)


if __name__ == "__main__":
    main()
