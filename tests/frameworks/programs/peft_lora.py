"""LoRA fine-tuning as peft, transformers and trl document it, written for a GPU, on a tiny Llama built from
its config (random weights, no download) and a word-level tokenizer built here.

``python peft_lora.py OUT_DIR [--cpu]``. Writes ``OUT_DIR/rank0.json``:

- ``loop``: a LoRA training loop (AdamW on the adapter) in float32: its losses, the trained model's logits,
  those of the adapter saved and loaded again onto a fresh base model, those of ``merge_and_unload``, and
  greedy ``generate`` tokens;
- ``loop_bf16`` / ``loop_fp16``: the same loop under ``torch.autocast(device, dtype)`` (float16 with a
  ``GradScaler``): the losses and the dtype the adapted projection produced;
- ``trainer`` / ``trainer_bf16``: ``Trainer`` on the LoRA model, float32 and ``bf16=True``;
- ``sft`` / ``dpo``: trl's ``SFTTrainer`` and ``DPOTrainer`` (LoRA, the reference model the adapter disabled).

Everything is seeded; the runs differ only in where ``"cuda"`` is.
"""

import argparse
import json
import os
import tempfile

import torch
from datasets import Dataset
from peft import LoraConfig, PeftModel, get_peft_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Trainer, TrainingArguments, set_seed
from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "a", "mat", "rug", "and", "saw", "bird", "big", "small", "red"]
LORA = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {word: i for i, word in enumerate(["<pad>", "<s>", "</s>", "<unk>", *WORDS])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def base_model() -> LlamaForCausalLM:
    set_seed(0)
    config = LlamaConfig(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(config)


def sentences(count: int, seed: int) -> list[str]:
    generator = torch.Generator().manual_seed(seed)
    picks = torch.randint(0, len(WORDS), (count, 6), generator=generator)
    return [" ".join(WORDS[i] for i in row) for row in picks.tolist()]


def loop(device: str, tokens: torch.Tensor, autocast: torch.dtype | None) -> dict:
    model = get_peft_model(base_model(), LoraConfig(**LORA)).to(device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    scaler = torch.amp.GradScaler(device, enabled=autocast == torch.float16)
    produced = []
    model.base_model.model.model.layers[0].self_attn.q_proj.register_forward_hook(
        lambda module, inputs, output: produced.append(str(output.dtype)))
    batch = tokens.to(device)
    losses = []
    for _ in range(8):
        with torch.autocast(device, dtype=autocast or torch.float32, enabled=bool(autocast)):
            loss = model(input_ids=batch, labels=batch).loss
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        losses.append(loss.item())
    result = {"losses": losses, "q_proj": produced[0]}
    if autocast:
        return result
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=batch).logits
        with tempfile.TemporaryDirectory() as saved:
            model.save_pretrained(saved)
            reloaded = PeftModel.from_pretrained(base_model(), saved).to(device).eval()
            reloaded_logits = reloaded(input_ids=batch).logits
        merged = model.merge_and_unload()
        merged_logits = merged(input_ids=batch).logits
        generated = merged.generate(batch[:2, :3], max_new_tokens=5, do_sample=False, pad_token_id=0)
    last = {"logits": logits, "reloaded": reloaded_logits, "merged": merged_logits}
    return {**result, **{name: value[:, -1].cpu().tolist() for name, value in last.items()},
            "merged_on_cuda": next(merged.parameters()).is_cuda, "generated": generated.cpu().tolist()}


def trainer_losses(out: str, cpu: bool, bf16: bool, tokens: torch.Tensor) -> list[float]:
    model = get_peft_model(base_model(), LoraConfig(**LORA))
    data = [{"input_ids": row, "labels": row} for row in tokens]
    arguments = TrainingArguments(output_dir=os.path.join(out, "trainer"), max_steps=4, per_device_train_batch_size=4,
                                  learning_rate=1e-2, logging_steps=1, report_to=[], save_strategy="no",
                                  use_cpu=cpu, bf16=bf16, seed=0, disable_tqdm=True)
    trainer = Trainer(model=model, args=arguments, train_dataset=data)
    trainer.train()
    assert str(arguments.device) == ("cpu" if cpu else "cuda:0"), arguments.device
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def trl_runs(out: str, cpu: bool) -> dict:
    common = {"max_steps": 3, "per_device_train_batch_size": 4, "learning_rate": 1e-2, "logging_steps": 1,
              "report_to": [], "save_strategy": "no", "use_cpu": cpu, "seed": 0, "disable_tqdm": True}
    sft = SFTTrainer(model=base_model(), args=SFTConfig(output_dir=os.path.join(out, "sft"), max_length=16, **common),
                     train_dataset=Dataset.from_dict({"text": sentences(12, 3)}), processing_class=tokenizer(),
                     peft_config=LoraConfig(task_type="CAUSAL_LM", **LORA))
    sft.train()
    prompts, chosen, rejected = [s + " " for s in sentences(12, 4)], sentences(12, 5), sentences(12, 6)
    dpo = DPOTrainer(model=base_model(), args=DPOConfig(output_dir=os.path.join(out, "dpo"), max_length=16, **common),
                     train_dataset=Dataset.from_dict({"prompt": prompts, "chosen": chosen, "rejected": rejected}),
                     processing_class=tokenizer(), peft_config=LoraConfig(task_type="CAUSAL_LM", **LORA))
    dpo.train()
    logged = {"sft": sft.state.log_history, "dpo": dpo.state.log_history}
    return {name: [{k: v for k, v in entry.items() if k in ("loss", "rewards/chosen", "rewards/margins")}
                   for entry in history if "loss" in entry] for name, history in logged.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    device = "cpu" if args.cpu else "cuda"
    tokens = tokenizer()(sentences(8, 1), return_tensors="pt")["input_ids"]
    record = {"loop": loop(device, tokens, None), "loop_bf16": loop(device, tokens, torch.bfloat16),
              "loop_fp16": loop(device, tokens, torch.float16),
              "trainer": trainer_losses(args.out, args.cpu, False, tokens),
              "trainer_bf16": trainer_losses(args.out, args.cpu, True, tokens), **trl_runs(args.out, args.cpu)}
    with open(os.path.join(args.out, "rank0.json"), "w") as out:
        json.dump(record, out)
