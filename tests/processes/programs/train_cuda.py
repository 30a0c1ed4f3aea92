"""The training of ``train_cpu.py`` written for an NVIDIA GPU: one process, the whole batch at once."""

import json

import torch
from torch import nn

STEPS, BATCH = 5, 16

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(STEPS, BATCH, 8, device="cuda")
target = data.sum(-1, keepdim=True).sin()
for x, y in zip(data, target, strict=True):
    optimizer.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()

print(json.dumps({"params": [p.detach().cpu().flatten().tolist() for p in model.parameters()]}))
