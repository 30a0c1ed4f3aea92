"""A tiny Llama saved with ``save_pretrained`` and loaded back with ``from_pretrained`` onto the GPU, the way
a checkpoint is used (config built in code, random weights: no download).

``python hf_pretrained.py OUT_DIR [--device cuda|cpu]``. Writes ``OUT_DIR/rank0.json``: the loaded
model's logits for a fixed prompt, its rotary ``inv_freq`` buffer (not in the checkpoint: computed while
loading) and the device the weights were loaded on.
"""

import argparse
import json
import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    checkpoint = os.path.join(args.out, "checkpoint")
    LlamaForCausalLM(config).save_pretrained(checkpoint)

    model = LlamaForCausalLM.from_pretrained(checkpoint, device_map=args.device).eval()
    prompt = torch.arange(12, device=args.device).unsqueeze(0) % 64
    with torch.no_grad():
        logits = model(prompt).logits
    record = {"on": str(next(model.parameters()).device), "logits": logits.cpu().flatten().tolist(),
              "inv_freq": model.model.rotary_emb.inv_freq.cpu().tolist()}
    with open(os.path.join(args.out, "rank0.json"), "w") as out:
        json.dump(record, out)
