"""``loader.py`` written for the CPU."""

import json

import torch
from torch.utils.data import DataLoader, Dataset


class Noise(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.randn(3)


def seed_worker(worker_id: int) -> None:
    torch.manual_seed(1000 + worker_id)


if __name__ == "__main__":
    loader = DataLoader(Noise(), batch_size=2, num_workers=2, worker_init_fn=seed_worker,
                        multiprocessing_context="spawn")
    for batch in loader:
        print(json.dumps({"device": batch.device.type, "values": batch.tolist()}))
