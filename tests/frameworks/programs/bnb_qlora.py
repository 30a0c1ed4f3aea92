"""QLoRA and bitsandbytes as their documentation writes them for a GPU, on a tiny Llama built from its config
(random weights, saved here, loaded back quantized; no download).

``python bnb_qlora.py OUT_DIR [--cpu]``. Writes ``OUT_DIR/rank0.json``:

- ``4bit``: ``from_pretrained(quantization_config=BitsAndBytesConfig(load_in_4bit=True, nf4, double quantization,
  bnb_4bit_compute_dtype=torch.float16), device_map=DEVICE)``, ``prepare_model_for_kbit_training``, LoRA,
  ``bnb.optim.PagedAdamW8bit``: the layer type, the losses, the logits and greedy ``generate`` tokens;
- ``8bit``: the same with ``load_in_8bit=True`` and ``bnb.optim.AdamW8bit``;
- ``linear8bitlt``: ``bnb.nn.Linear8bitLt`` (int8 weights, outlier threshold 6) on DEVICE: outputs and gradients;
- ``paged_adamw``: ``bnb.optim.PagedAdamW`` (32-bit) training a small model on DEVICE: the trained weights.
"""

import argparse
import json
import os
import tempfile

import bitsandbytes as bnb
import torch
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from torch import nn
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM, set_seed

QUANTIZED = {
    "4bit": (BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                bnb_4bit_compute_dtype=torch.float16), bnb.optim.PagedAdamW8bit),
    "8bit": (BitsAndBytesConfig(load_in_8bit=True), bnb.optim.AdamW8bit),
}


def qlora(saved: str, device: str, tokens: torch.Tensor, which: str) -> dict:
    quantization, optimizer_class = QUANTIZED[which]
    model = LlamaForCausalLM.from_pretrained(saved, quantization_config=quantization, device_map=device)
    layer = type(model.model.layers[0].self_attn.q_proj).__name__
    model = prepare_model_for_kbit_training(model)
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"]))
    optimizer = optimizer_class([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    batch = tokens.to(device)
    losses = []
    for _ in range(3):
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=batch).logits[:, -1].float().cpu().tolist()
        generated = model.generate(input_ids=batch[:2, :3], max_new_tokens=4, do_sample=False, pad_token_id=0)
    return {"layer": layer, "losses": losses, "logits": logits, "generated": generated.cpu().tolist()}


def linear8bitlt(device: str) -> dict:
    torch.manual_seed(2)
    layer = bnb.nn.Linear8bitLt(16, 8, has_fp16_weights=False, threshold=6.0).to(device)
    x = (torch.randn(4, 16) * torch.tensor([8.0] + [1.0] * 15)).half().to(device).requires_grad_()  # an outlier column
    y = layer(x)
    y.float().sum().backward()
    return {"dtype": str(layer.weight.dtype), "out_dtype": str(y.dtype), "out": y.float().cpu().tolist(),
            "grad": x.grad.float().cpu().tolist()}


def paged_adamw(device: str) -> list:
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
    optimizer = bnb.optim.PagedAdamW(model.parameters(), lr=1e-2)
    x = torch.randn(32, 8, generator=torch.Generator().manual_seed(4))
    for _ in range(4):
        loss = nn.functional.mse_loss(model(x.to(device)), x.sum(-1, keepdim=True).sin().to(device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return [p.detach().cpu().flatten().tolist() for p in model.parameters()]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    device = "cpu" if args.cpu else "cuda"
    set_seed(0)
    config = LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    tokens = torch.randint(4, 32, (4, 12), generator=torch.Generator().manual_seed(1))
    with tempfile.TemporaryDirectory() as saved:
        LlamaForCausalLM(config).save_pretrained(saved)
        record = {which: qlora(saved, device, tokens, which) for which in QUANTIZED}
    record |= {"linear8bitlt": linear8bitlt(device), "paged_adamw": paged_adamw(device)}
    with open(os.path.join(args.out, "rank0.json"), "w") as out:
        json.dump(record, out)
