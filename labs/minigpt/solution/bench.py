"""How fast does your model train? Written-out vs fused path, side by side
(complete, given; README.md, section 4.2).

    python bench.py                   # nanoGPT's CPU shape: 4 layers, 4 heads, 128-dim, context 64, batch 12
    python bench.py --steps 50 --threads 2
    python bench.py --bias            # GPT-2's layout, biases everywhere (train.py's default has none)

It times training steps of YOUR GPT twice: with GPTConfig(fused=False) (your LayerNorm
and attention) and fused=True (F.layer_norm and F.scaled_dot_product_attention), in
alternating rounds so both see the same machine load, and prints tokens/s and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from model import GPT, GPTConfig


def steps_per_second(model: GPT, x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    for _ in range(steps):
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return steps / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Tokens/s of your GPT: written-out vs fused path.")
    parser.add_argument("--steps", type=int, default=30, help="steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (README.md, section 5.6)")
    parser.add_argument("--n-layer", type=int, default=4)
    parser.add_argument("--n-embd", type=int, default=128)
    parser.add_argument("--block-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--bias", action=argparse.BooleanOptionalAction, default=False,
                        help="biases in the Linears and LayerNorms (default: none, as train.py; section 4.3)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    tokens = args.batch_size * args.block_size
    x = torch.randint(65, (args.batch_size, args.block_size))
    y = torch.randint(65, (args.batch_size, args.block_size))
    rates: dict[bool, list[float]] = {False: [], True: []}
    for fused in (False, True):  # one untimed warm-up step each
        steps_per_second(GPT(GPTConfig(n_layer=args.n_layer, n_embd=args.n_embd, block_size=args.block_size,
                                       fused=fused, bias=args.bias)), x, y, 1)
    for r in range(args.rounds):
        for fused in (False, True):
            torch.manual_seed(0)
            model = GPT(GPTConfig(n_layer=args.n_layer, n_embd=args.n_embd, block_size=args.block_size, fused=fused,
                                  bias=args.bias))
            rates[fused].append(steps_per_second(model, x, y, args.steps) * tokens)
            print(f"round {r + 1}: {'fused      ' if fused else 'written-out'} {rates[fused][-1]:9,.0f} tokens/s")
    written, fused = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"median: written-out {written:,.0f} tokens/s, fused {fused:,.0f} tokens/s: fused is {fused / written:.2f}x")


if __name__ == "__main__":
    main()
