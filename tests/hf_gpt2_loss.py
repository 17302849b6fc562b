#!/usr/bin/env python3
"""Scores a text file with a `ringmaster ckpt export` safetensors file in PyTorch, with the model
written the way Hugging Face transformers' GPT2LMHeadModel is (Conv1D weights [in, out],
x @ W + b; q, k, v as thirds of c_attn's output; gelu_new; LayerNorm eps 1e-5; tied lm_head),
and the weights loaded with load_state_dict(strict=True), so that every name and shape must be
GPT-2's. transformers itself is not a Debian package; this is its GPT-2 forward pass, written out.

usage: hf_gpt2_loss.py MODEL.safetensors TEXT_FILE WINDOWS
prints the mean cross-entropy (nats per token) over the first WINDOWS non-overlapping windows of
n_positions bytes, as `ringmaster eval --max-tokens WINDOWS*n_positions` scores them.

usage: hf_gpt2_loss.py --random OUT.safetensors LAYERS HEADS WIDTH POSITIONS SEED TEXT_FILE
       WINDOWS WINDOW
makes a GPT-2 of that shape over bytes (vocabulary 256) with random weights (every tensor, the
layer norms too), writes it the way GPT-2's published model.safetensors is written -- GPT2Model's
names (no "transformer.", no lm_head), the causal-mask buffers h.N.attn.bias, metadata
{"format": "pt"} and nothing else -- and prints its loss over WINDOWS windows of WINDOW bytes
(WINDOW <= POSITIONS: the first rows of wpe, as for any shorter input): what `model.init_from`
must reproduce from a file it did not write.

Exits 77 (ctest's skip) when PyTorch is not installed.
"""
import json
import math
import struct
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"skip: {e}", file=sys.stderr)
    sys.exit(77)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", (name, info["dtype"])
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype="<f4").reshape(info["shape"])
        tensors[name] = torch.from_numpy(arr.copy())
    return tensors, metadata


class Conv1D(nn.Module):
    """transformers.pytorch_utils.Conv1D: a linear layer with its weight stored [in, out]."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        out = torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight)
        return out.view(x.size()[:-1] + (self.nf,))


class Attention(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.c, self.heads = c, heads
        self.c_attn = Conv1D(3 * c, c)
        self.c_proj = Conv1D(c, c)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.heads
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = Conv1D(4 * c, c)
        self.c_proj = Conv1D(c, 4 * c)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))  # gelu_new


class Block(nn.Module):
    def __init__(self, c, heads, eps):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c, eps=eps)
        self.attn = Attention(c, heads)
        self.ln_2 = nn.LayerNorm(c, eps=eps)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["n_embd"]
        self.wte = nn.Embedding(cfg["vocab_size"], c)
        self.wpe = nn.Embedding(cfg["n_positions"], c)
        self.h = nn.ModuleList(
            Block(c, cfg["n_head"], cfg["layer_norm_epsilon"]) for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(c, eps=cfg["layer_norm_epsilon"])


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.transformer = Transformer(cfg)
        self.lm_head = nn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tie_word_embeddings

    def forward(self, idx):
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(idx.size(1)))
        for block in t.h:
            x = block(x)
        return self.lm_head(t.ln_f(x))


def write_safetensors(path, tensors, metadata):
    """The safetensors layout (8-byte header length, JSON header, data), F32 only."""
    header, blobs, at = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        b = t.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def loss_on(model, text_path, windows, T):
    with open(text_path, "rb") as f:
        data = torch.tensor(list(f.read(windows * T + 1)), dtype=torch.long)
    assert data.numel() == windows * T + 1, "text file too short"
    inputs = data[:-1].view(windows, T)
    targets = data[1:].view(windows, T)
    with torch.no_grad():
        logits = model(inputs)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1)).item()


def random_model(argv):
    out, layers, heads, width, positions, seed, text_path, windows, T = argv
    cfg = {"vocab_size": 256, "n_positions": int(positions), "n_embd": int(width),
           "n_layer": int(layers), "n_head": int(heads), "layer_norm_epsilon": 1e-5}
    torch.manual_seed(int(seed))
    model = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            # Large enough that the model is far from uniform (ln 256 = 5.55 nats): a tensor
            # misplaced or mistransposed moves the loss by far more than the check's tolerance.
            gain = name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight"))
            p.copy_(torch.randn_like(p) * 0.3 + (1.0 if gain else 0.0))
    state = {k[len("transformer."):]: v for k, v in model.state_dict().items()
             if k.startswith("transformer.")}
    n = cfg["n_positions"]
    for i in range(cfg["n_layer"]):
        state[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
    write_safetensors(out, state, {"format": "pt"})
    print(f"loss={loss_on(model, text_path, int(windows), int(T)):.6f}")


def main():
    if sys.argv[1] == "--random":
        return random_model(sys.argv[2:])
    path, text_path, windows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tensors, metadata = read_safetensors(path)
    cfg = json.loads(metadata["gpt2_config"])
    assert cfg["activation_function"] == "gelu_new" and cfg["model_type"] == "gpt2", cfg
    model = GPT2LMHeadModel(cfg)
    model.load_state_dict(tensors, strict=True)  # every name and shape must match
    if not torch.equal(tensors["lm_head.weight"], tensors["transformer.wte.weight"]):
        sys.exit("lm_head.weight differs from transformer.wte.weight (they are tied)")

    print(f"loss={loss_on(model, text_path, windows, cfg['n_positions']):.6f}")


if __name__ == "__main__":
    main()
