"""DeepSpeed ZeRO stages 1 and 2 as its tutorials write them for GPUs, and Hugging Face ``Trainer`` with a
DeepSpeed config.

``python deepspeed_zero.py OUT_DIR [--cpu] [--trainer] [--torch-adam]`` for one process (the launcher's variables are
set here), ``torchrun --nproc_per_node 2 deepspeed_zero.py OUT_DIR [--cpu]`` for two. The global batch of 16
samples is split over the processes. Each rank writes ``OUT_DIR/rank<N>.json``: the accelerator DeepSpeed
chose, its optimizer, and for each ZeRO stage the losses (averaged over the ranks) and the trained weights;
with ``--trainer``, the losses ``Trainer`` logged with a ZeRO-2 config.
"""

import argparse
import json
import os

import deepspeed
import torch
import torch.distributed as dist
from deepspeed.accelerator import get_accelerator
from torch import nn

GLOBAL_BATCH = 16
LAUNCHER = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500"}


def zero(stage: int, device: torch.device, world: int, rank: int, torch_adam: bool = False) -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    config = {"train_micro_batch_size_per_gpu": GLOBAL_BATCH // world, "gradient_accumulation_steps": 1,
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "torch_adam": torch_adam}},
              "zero_optimization": {"stage": stage}}
    engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(4 * GLOBAL_BATCH, 8, generator=generator)
    y = x.sum(-1, keepdim=True).sin()
    losses = []
    for step in range(4):
        start = step * GLOBAL_BATCH + rank * GLOBAL_BATCH // world
        rows = slice(start, start + GLOBAL_BATCH // world)
        loss = nn.functional.mse_loss(engine(x[rows].to(device)), y[rows].to(device))
        engine.backward(loss)
        engine.step()
        reduced = loss.detach().clone()
        dist.all_reduce(reduced)
        losses.append(reduced.item() / world)
    weights = [p.detach().float().cpu().flatten().tolist() for p in engine.module.parameters()]
    return {"losses": losses, "weights": weights, "optimizer": type(optimizer.optimizer).__name__}


def trainer(out: str, cpu: bool) -> list[float]:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed

    set_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0)
    tokens = torch.randint(0, 64, (32, 16), generator=torch.Generator().manual_seed(1))
    ds_config = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
                 "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}},
                 "zero_optimization": {"stage": 2}}
    arguments = TrainingArguments(output_dir=os.path.join(out, "trainer"), max_steps=4, per_device_train_batch_size=8,
                                  learning_rate=5e-3, logging_steps=1, report_to=[], save_strategy="no", use_cpu=cpu,
                                  seed=0, disable_tqdm=True, deepspeed=ds_config)
    run = Trainer(model=GPT2LMHeadModel(config), args=arguments, train_dataset=[{"input_ids": r, "labels": r}
                                                                               for r in tokens])
    run.train()
    assert type(run.model_wrapped).__name__ == "DeepSpeedEngine"
    return [entry["loss"] for entry in run.state.log_history if "loss" in entry]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--trainer", action="store_true")
    parser.add_argument("--torch-adam", action="store_true", help="torch's AdamW rather than DeepSpeed's FusedAdam")
    args = parser.parse_args()
    for name, value in LAUNCHER.items():
        os.environ.setdefault(name, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if not args.cpu:
        torch.cuda.set_device(local_rank)
    device = torch.device("cpu") if args.cpu else torch.device("cuda", local_rank)
    deepspeed.init_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()
    record = {"rank": rank, "world": world, "accelerator": get_accelerator().device_name(),
              **{f"stage{stage}": zero(stage, device, world, rank, args.torch_adam) for stage in (1, 2)}}
    if args.trainer:
        record["trainer"] = trainer(args.out, args.cpu)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as out:
        json.dump(record, out)
