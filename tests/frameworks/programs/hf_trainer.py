"""Hugging Face ``Trainer`` fine-tuning a tiny GPT-2 built from its config (random weights, no download).

``python hf_trainer.py OUT_DIR [--cpu] [--fp16]``. Writes ``OUT_DIR/rank0.json``: the logged losses, the
device the model trained on, and what autocast did in the forward pass (the dtypes the final layer norm
and the language-model head produced).
"""

import argparse
import json
import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--fp16", action="store_true")
    args = parser.parse_args()

    set_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config)
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 64, (32, 16), generator=generator)
    data = [{"input_ids": row, "labels": row} for row in tokens]

    seen: dict = {}

    def record(name):
        def hook(module, inputs, output):
            if name not in seen and module.training:
                seen[name] = {"dtype": str(output.dtype), "autocast": torch.is_autocast_enabled("cuda"),
                              "autocast_dtype": str(torch.get_autocast_dtype("cuda"))}
        return hook

    model.transformer.ln_f.register_forward_hook(record("ln_f"))
    model.lm_head.register_forward_hook(record("lm_head"))
    training = TrainingArguments(output_dir=os.path.join(args.out, "trainer"), max_steps=6,
                                 per_device_train_batch_size=8, learning_rate=5e-3, logging_steps=1,
                                 report_to=[], save_strategy="no", use_cpu=args.cpu, fp16=args.fp16, seed=0,
                                 disable_tqdm=True)
    trainer = Trainer(model=model, args=training, train_dataset=data)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    record = {"device": str(training.device), "on": str(next(model.parameters()).device), "losses": losses,
              "forward": seen}
    with open(os.path.join(args.out, "rank0.json"), "w") as out:
        json.dump(record, out)
