"""Greedy generation with a Hugging Face GPT-2, written for an NVIDIA GPU.

    torchdevice run examples/hf_generate.py            # moved with .cuda(), wherever it runs
    python examples/hf_generate.py --device cpu        # the same on the CPU, for comparison

The model is a tiny random GPT-2 built from a config in code (no download). Prints a checksum of the
forward pass's logits and the generated token ids.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--new-tokens", type=int, default=12)
    args = parser.parse_args()

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=97, n_positions=64, n_embd=32, n_layer=2, n_head=2, initializer_range=0.5,
                        bos_token_id=0, eos_token_id=96, pad_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    model = model.cuda() if args.device == "cuda" else model.to("cpu")
    prompt = torch.tensor([[5, 17, 42, 8, 1]], device=args.device)
    with torch.no_grad():
        logits = model(prompt).logits
    tokens = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=args.new_tokens,
                            do_sample=False)
    print(f"logits {logits.shape[-1]} {logits.double().sum().item():.6f} on {logits.device.type}")
    print("tokens", tokens[0].tolist())


if __name__ == "__main__":
    main()
