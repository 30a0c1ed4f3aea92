# The CUDA idioms of an improved-diffusion-style dist_util.py (MPI, NCCL, blobfile, GPU per rank).
import io
import os
import socket

import blobfile as bf
import torch as th
import torch.distributed as dist
from mpi4py import MPI

GPUS_PER_NODE = 8
SETUP_RETRY_COUNT = 3


def setup_dist():
    if dist.is_initialized():
        return
    comm = MPI.COMM_WORLD
    backend = "gloo" if not th.cuda.is_available() else "nccl"
    if backend == "gloo":
        hostname = "localhost"
    else:
        hostname = socket.gethostbyname(socket.getfqdn())
    os.environ["MASTER_ADDR"] = comm.bcast(hostname, root=0)
    os.environ["RANK"] = str(comm.rank)
    os.environ["WORLD_SIZE"] = str(comm.size)
    dist.init_process_group(backend=backend, init_method="env://")


def dev():
    if th.cuda.is_available():
        return th.device(f"cuda:{MPI.COMM_WORLD.Get_rank() % GPUS_PER_NODE}")
    return th.device("cpu")


def load_state_dict(path, **kwargs):
    if MPI.COMM_WORLD.Get_rank() == 0:
        with bf.BlobFile(path, "rb") as f:
            data = f.read()
    else:
        data = None
    data = MPI.COMM_WORLD.bcast(data)
    return th.load(io.BytesIO(data), **kwargs)


def sync_params(params):
    for p in params:
        with th.no_grad():
            dist.broadcast(p, 0)
