#!/usr/bin/python3
"""PyTorch CPU anchor: GPT-2 style decoder training, 1 process or DDP (gloo).

Model: token + position embedding, L blocks of [pre-LN causal self-attention,
pre-LN MLP with GELU(tanh)], final LN, LM head tied to the token embedding;
every weight ~ N(0, 0.02), biases 0, LN = (1, 0). Optimizer: AdamW.
Data: byte-level text (../data/tinyshakespeare.txt beside this folder when V == 256 and the
file exists, else --data) as random windows, otherwise uniform random tokens.

Timing (rank 0): `--warmup` untimed steps, then `--steps` timed steps; ms/step
is reported as median [min-max]; tokens/s is global (nproc * B * T / step).
With --nproc > 1, timed steps alternate between normal DDP steps and steps
under ddp.no_sync() (no gradient all-reduce); the difference of the medians is
the *exposed* all-reduce time. A standalone dist.all_reduce of one flat buffer
the size of all parameters gives the *total* gloo all-reduce cost.
--ckpt DIR (single process) times torch.save of {model, optimizer} state and
of a --ckpt-gib GiB tensor, with and without fsync, plus a warm torch.load.

Uses Debian's python3-torch (1.13): run with /usr/bin/python3, e.g.
  /usr/bin/python3 scripts/torch_gpt_ddp.py --nproc 2 --L 4 --H 4 --C 256 --T 256 --B 8
(scripts/bench-readme.sh runs it beside Ringmaster for every row of docs/performance.md's speed table.)
"""
import argparse
import ctypes
import math
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_TEXT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "data", "tinyshakespeare.txt"))


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(T, T, dtype=torch.bool).triu_(1)  # True above diagonal = future
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        return self.attn_proj((att @ v).transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, L, H, C, T):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1))
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def batches(a, rank):
    """Yield (x, y) token batches of shape (B, T) for this rank."""
    g = torch.Generator().manual_seed(1234 + rank)
    path = a.data or (DEFAULT_TEXT if a.V == 256 else None)
    data = None
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
        assert int(data.max()) < a.V, "text has bytes >= V"
    while True:
        if data is None:
            xy = torch.randint(0, a.V, (a.B, a.T + 1), generator=g)
        else:
            starts = torch.randint(0, len(data) - a.T - 1, (a.B,), generator=g)
            xy = torch.stack([data[s : s + a.T + 1] for s in starts.tolist()])
        yield xy[:, :-1], xy[:, 1:]


def fmt(ts):
    ms = [t * 1e3 for t in ts]
    return statistics.median(ms), min(ms), max(ms)


def ckpt_bench(a, model, opt):
    """Time torch.save (+fsync) of model+optimizer state and of a big tensor."""
    def save(obj, path, fsync):
        t0 = time.perf_counter()
        with open(path, "wb") as f:
            torch.save(obj, f)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        return time.perf_counter() - t0

    big = torch.randn(int(a.ckpt_gib * (1 << 30)) // 4)
    objs = {"model+optim": {"model": model.state_dict(), "optim": opt.state_dict()},
            f"{a.ckpt_gib:g}GiB tensor": big}
    path = os.path.join(a.ckpt, f"anchor_ckpt_{os.getpid()}.pt")
    try:
        for name, obj in objs.items():
            for fsync in (False, True):
                ts = []
                for _ in range(a.ckpt_reps):
                    if os.path.exists(path):
                        os.remove(path)
                    ts.append(save(obj, path, fsync))
                mb = os.path.getsize(path) / 1e6
                med, lo, hi = fmt(ts)
                print(f"ckpt save {name:>14} {mb:8.1f} MB fsync={int(fsync)}: median {med:8.1f} ms "
                      f"[{lo:.1f}-{hi:.1f}]  = {mb / med:.2f} GB/s")
            ts = []
            for _ in range(a.ckpt_reps):  # file is in the page cache: warm load
                t0 = time.perf_counter()
                torch.load(path)
                ts.append(time.perf_counter() - t0)
            med, lo, hi = fmt(ts)
            print(f"ckpt load {name:>14} {mb:8.1f} MB (warm cache): median {med:8.1f} ms [{lo:.1f}-{hi:.1f}]")
    finally:
        if os.path.exists(path):
            os.remove(path)


def set_blas_threads(n):
    """Debian's torch calls sgemm through libblas.so.3 = OpenBLAS (pthreads),
    whose own pool ignores torch.set_num_threads: size it explicitly."""
    try:
        ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(n)
        return n
    except (OSError, AttributeError):
        return None


def worker(rank, a, port):
    torch.manual_seed(0)  # same init on every rank
    torch.set_num_threads(a.threads)
    blas = set_blas_threads(a.threads)
    ddp = a.nproc > 1
    if ddp:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                rank=rank, world_size=a.nproc)
    model = GPT(a.V, a.L, a.H, a.C, a.T)
    nparams = sum(p.numel() for p in model.parameters())
    net = nn.parallel.DistributedDataParallel(model) if ddp else model
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=a.wd)
    data = batches(a, rank)
    if rank == 0:
        print(f"# torch {torch.__version__} nproc={a.nproc} threads/proc={torch.get_num_threads()} (openblas {blas}) "
              f"V={a.V} L={a.L} H={a.H} C={a.C} T={a.T} B={a.B} params={nparams / 1e6:.2f}M "
              f"data={'text' if (a.data or (a.V == 256 and os.path.exists(DEFAULT_TEXT))) else 'random'}")

    def step(sync=True):
        x, y = next(data)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = net(x, y)
        if sync or not ddp:
            loss.backward()
        else:
            with net.no_sync():
                loss.backward()
        opt.step()
        return time.perf_counter() - t0, loss.item()

    first_loss = None
    for _ in range(a.warmup):
        _, l = step()
        first_loss = first_loss if first_loss is not None else l
    t_sync, t_nosync, last = [], [], None
    for i in range(a.steps):
        if ddp and a.compare_nosync and i % 2 == 1:
            t_nosync.append(step(sync=False)[0])
        else:
            dt, last = step()
            t_sync.append(dt)
    tok = a.nproc * a.B * a.T
    if rank == 0:
        med, lo, hi = fmt(t_sync)
        print(f"step{' (all-reduce)' if ddp else '             '}: median {med:8.1f} ms [{lo:.1f}-{hi:.1f}] n={len(t_sync)}  "
              f"tokens/s(global) {tok / med * 1e3:9.0f}  loss {first_loss:.3f} -> {last:.3f}")
        if t_nosync:
            mn, lo2, hi2 = fmt(t_nosync)
            print(f"step (no_sync)   : median {mn:8.1f} ms [{lo2:.1f}-{hi2:.1f}] n={len(t_nosync)}  "
                  f"=> exposed all-reduce {med - mn:.1f} ms = {(med - mn) / med * 100:.0f}% of step")
    if ddp:  # standalone all-reduce of a gradient-sized flat fp32 buffer
        buf = torch.zeros(nparams)
        for _ in range(2):
            dist.all_reduce(buf)
        ts = []
        for _ in range(a.ar_reps):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            ts.append(time.perf_counter() - t0)
        if rank == 0:
            med, lo, hi = fmt(ts)
            nb = nparams * 4
            bus = nb / (med / 1e3) * 2 * (a.nproc - 1) / a.nproc / 1e9
            print(f"gloo all_reduce {nb / 1e6:.1f} MB: median {med:.1f} ms [{lo:.1f}-{hi:.1f}]  "
                  f"busbw {bus:.2f} GB/s  = {med / statistics.median(t_sync) / 1e3 * 100:.0f}% of a step")
    if a.ckpt and rank == 0:
        ckpt_bench(a, model, opt)
    if ddp:
        # torch 1.13 + gloo can deadlock in ~Reducer/~ProcessGroupGloo at exit
        # (a gloo thread waits for the GIL held by the joining main thread):
        # synchronise, then leave without running destructors.
        dist.barrier()
        print("", end="", flush=True)
        os._exit(0)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=1, help="processes; >1 = DDP over gloo")
    for k, v in dict(V=256, L=4, H=4, C=256, T=256, B=8).items():
        p.add_argument(f"--{k}", type=int, default=v)
    p.add_argument("--steps", type=int, default=20, help="timed steps (DDP: half of them no_sync)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads/proc (0: 2 if nproc==1 else 1)")
    p.add_argument("--no-compare-nosync", dest="compare_nosync", action="store_false")
    p.add_argument("--ar-reps", type=int, default=10, help="standalone all_reduce repetitions")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--wd", type=float, default=0.0)
    p.add_argument("--data", default=None, help="byte-level text file (V must be >= 256)")
    p.add_argument("--ckpt", default=None, help="dir for the checkpoint save/load bench (e.g. /tmp)")
    p.add_argument("--ckpt-gib", type=float, default=1.0)
    p.add_argument("--ckpt-reps", type=int, default=5)
    a = p.parse_args()
    a.threads = a.threads or (2 if a.nproc == 1 else 1)
    if a.nproc == 1:
        worker(0, a, None)
    else:
        with socket.socket() as s:  # free port for the rendezvous on loopback
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(worker, args=(a, port), nprocs=a.nproc, join=True)


if __name__ == "__main__":
    main()
