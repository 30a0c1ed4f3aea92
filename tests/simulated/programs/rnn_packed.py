"""Packed-sequence LSTM and GRU training, written for an NVIDIA GPU; prints one JSON line of losses."""

import json

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 16, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(32, 8, batch_first=True)
        self.out = nn.Linear(8, 5)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(self.embed(tokens), lengths, batch_first=True, enforce_sorted=False)
        hidden, _ = self.lstm(packed)
        hidden, _ = self.gru(hidden)
        padded, _ = pad_packed_sequence(hidden, batch_first=True, total_length=tokens.shape[1])
        return self.out(padded)


torch.manual_seed(0)
device = torch.device("cuda")
model = Tagger().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
tokens = torch.randint(1, 20, (6, 7), device=device)
lengths = torch.tensor([7, 3, 5, 2, 6, 4])  # lengths stay on the host, as pack_padded_sequence wants
tags = torch.randint(0, 5, (6, 7), device=device)
mask = torch.arange(7, device=device)[None, :] < lengths.to(device)[:, None]
losses = []
for _ in range(5):
    optimizer.zero_grad()
    logits = model(tokens, lengths)
    loss = nn.functional.cross_entropy(logits[mask], tags[mask])
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    losses.append(loss.item())
print(json.dumps({"losses": losses, "device": str(logits.device)}))
