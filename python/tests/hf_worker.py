"""A real Hugging Face Trainer run for test_hf_trainer.py: a tiny GPT-2 built from a config (no hub
download), save_steps=2, TieredCheckpointCallback, resumed with resume_checkpoint, SIGKILLed if asked.

Appends JSON events to --events: "save" (each checkpoint, with digests of the model, optimizer and
scheduler as saved), "resume" (the live state after the Trainer restored a checkpoint), "start"
(the path resume_checkpoint returned), "kill", "end" (train() returned).
With --kill-step N process 0 dies at the end of training step N, between saves. Started with
torchrun's environment (RANK, WORLD_SIZE, ...) it is one process of a DDP run over gloo.
With --kill-at N the run dies in on_save of step N before the callback commits it, after removing
trainer_state.json from checkpoint-N: a save cut short, as a SIGKILL while the Trainer writes leaves it.
With --plain the callback is left out and resume is the Trainer's own resume_from_checkpoint=True
(the unchanged Trainer that `tierckpt sync` mirrors).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import warnings

import torch

warnings.filterwarnings("ignore")

from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments  # noqa: E402
from transformers.trainer_utils import get_last_checkpoint  # noqa: E402

from tierckpt.hf import TieredCheckpointCallback, resume_checkpoint  # noqa: E402
from tierckpt.torch import CheckpointConfig  # noqa: E402
from states import digest  # noqa: E402  (python/tests, the script's directory)



class Tokens(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.ids = torch.randint(0, 64, (32, 16), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Recorder(TrainerCallback):
    def __init__(self, events: str, kill_at: int, kill_step: int) -> None:
        self.events, self.kill_at, self.kill_step = events, kill_at, kill_step

    def emit(self, **event) -> None:
        with open(self.events, "a") as f:
            f.write(json.dumps({"rank": int(os.environ.get("RANK", "0")), **event}) + "\n")

    def _state(self, kwargs) -> dict:
        return {"model": digest(kwargs["model"].state_dict()), "optim": digest(kwargs["optimizer"].state_dict()),
                "sched": digest(kwargs["lr_scheduler"].state_dict())}

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step:
            self.emit(event="resume", step=state.global_step, **self._state(kwargs))

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.kill_step and state.is_world_process_zero:
            self.emit(event="kill", step=state.global_step)
            os.kill(os.getpid(), signal.SIGKILL)

    def on_save(self, args, state, control, **kwargs):
        self.emit(event="save", step=state.global_step, **self._state(kwargs))
        if state.global_step == self.kill_at:
            os.remove(os.path.join(args.output_dir, f"checkpoint-{state.global_step}", "trainer_state.json"))
            self.emit(event="kill", step=state.global_step)
            os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--output-dir", required=True)
    p.add_argument("--namespace", default="hf")
    p.add_argument("--events", required=True)
    p.add_argument("--max-steps", type=int, default=10)
    p.add_argument("--kill-at", type=int, default=-1)
    p.add_argument("--kill-step", type=int, default=-1)
    p.add_argument("--persist-every", type=int, default=0)
    p.add_argument("--plain", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2))
    targs = TrainingArguments(output_dir=args.output_dir, max_steps=args.max_steps, save_steps=2,
                              per_device_train_batch_size=4, learning_rate=1e-3, lr_scheduler_type="linear",
                              warmup_steps=2, logging_strategy="no", report_to="none", use_cpu=True, seed=0,
                              dataloader_num_workers=0, disable_tqdm=True, save_total_limit=3)
    recorder = Recorder(args.events, args.kill_at, args.kill_step)
    callbacks = [recorder] if args.plain else [recorder, TieredCheckpointCallback(
        CheckpointConfig(args.namespace, persist_every=args.persist_every))]
    trainer = Trainer(model=model, args=targs, train_dataset=Tokens(), callbacks=callbacks)
    if args.plain:
        resume = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
    else:
        resume = resume_checkpoint(CheckpointConfig(args.namespace), args.output_dir)
    recorder.emit(event="start", resume=resume)
    trainer.train(resume_from_checkpoint=resume)
    recorder.emit(event="end", step=trainer.state.global_step)
    if torch.distributed.is_initialized():
        # As PyTorch asks: without it gloo's threads can abort the process at interpreter exit
        # ("terminate called without an active exception", pytorch/pytorch#190489). The barrier first:
        # no process shuts its group down while the other still has work in flight.
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
        # Then leave without tearing down main()'s locals or the interpreter (decision 143): freeing the
        # Trainer frees DDP's Reducer, whose reference is the gloo group's last one, so ~ProcessGroupGloo
        # runs with the GIL held and waits for a gloo worker thread that needs the GIL to free its work's
        # tensors (pytorch/pytorch#56297). Seen twice under load: rank 1 logged "end", its main thread
        # sat in <module> at the call of main(), one thread with no Python frame alive, for 240 s.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
