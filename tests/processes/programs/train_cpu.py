"""The training of ``ddp_spawn.py`` written for a CPU-only machine: one process, the whole batch at once."""

import json

import torch
from torch import nn

STEPS, BATCH = 5, 16

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
# On a GPU the data (drawn on "cuda") come from CUDA's own generator, which torch.manual_seed(0) seeded and
# the model's initialisation (on the host generator) did not touch: the CPU program draws them alike.
data = torch.randn(STEPS, BATCH, 8, generator=torch.Generator().manual_seed(0))
target = data.sum(-1, keepdim=True).sin()
for x, y in zip(data, target, strict=True):
    optimizer.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()

print(json.dumps({"params": [p.detach().flatten().tolist() for p in model.parameters()]}))
