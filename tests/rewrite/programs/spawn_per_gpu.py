"""One process per GPU through torch.multiprocessing.spawn (input of the end-to-end test)."""
import torch
import torch.multiprocessing as mp


def worker(rank, world_size):
    device = torch.device("cuda", rank)
    x = torch.ones(2, device=device) * rank
    print(f"worker {rank} of {world_size} on {x.device.type}", flush=True)


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(worker, args=(world_size,), nprocs=world_size)
