"""Data loading written for an NVIDIA GPU: worker processes started with ``spawn`` (macOS's default) that
use the CUDA API, seeding it in ``worker_init_fn`` and drawing samples from it.

Prints each batch, as it arrives on the GPU, as a JSON line.
"""

import json

import torch
from torch.utils.data import DataLoader, Dataset


class Noise(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        assert torch.cuda.is_available(), "this worker sees no GPU"
        return torch.randn(3, device="cuda").cpu()  # drawn from the worker's CUDA generator


def seed_worker(worker_id: int) -> None:
    assert torch.cuda.device_count() >= 1
    torch.cuda.manual_seed(1000 + worker_id)


if __name__ == "__main__":
    loader = DataLoader(Noise(), batch_size=2, num_workers=2, worker_init_fn=seed_worker,
                        multiprocessing_context="spawn", pin_memory=True)
    for batch in loader:
        batch = batch.to("cuda", non_blocking=True)
        print(json.dumps({"device": batch.device.type, "values": batch.tolist()}))
