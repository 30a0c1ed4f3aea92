"""A GPU program whose cache holds more than it uses: 10 GiB freed, then 11 GiB, which the freed segment cannot
serve (CUDA's allocator makes a second segment and keeps the first cached). Prints its own peaks, reserved and
allocated, as one JSON line."""

import json

import torch

gib = 1 << 30
first = torch.empty(10 * gib, dtype=torch.uint8, device="cuda")  # never written: no host page is touched
del first
second = torch.empty(11 * gib, dtype=torch.uint8, device="cuda")
del second
print(json.dumps({"reserved": torch.cuda.max_memory_reserved(), "allocated": torch.cuda.max_memory_allocated()}))
