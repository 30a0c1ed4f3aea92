"""Training fed by a DataLoader as written for an NVIDIA GPU: two worker processes started with ``spawn`` (macOS's
default) that use the CUDA API, pinned batches moved with ``.cuda(non_blocking=True)``. Prints one JSON line per
step: whether the batch arrived pinned, where it went, the loss."""

import json

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Regression(Dataset):
    """Each sample drawn from its index alone: the same whichever worker makes it."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        assert torch.cuda.is_available(), "this worker sees no GPU"
        x = torch.randn(8, generator=torch.Generator().manual_seed(index))
        return x, x.sum(0, keepdim=True).sin()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Regression(), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0),
                        num_workers=2, multiprocessing_context="spawn", pin_memory=True)
    for x, y in loader:
        pinned = x.is_pinned() and y.is_pinned()
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        print(json.dumps({"pinned": pinned, "on": [str(x.device), str(y.device), str(loss.device)],
                          "loss": loss.item()}))
