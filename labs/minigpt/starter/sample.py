"""Sample text from a trained checkpoint (complete, given; it needs your
GPT.generate from model.py).

    python sample.py                                   # 500 characters from out/ckpt.pt
    python sample.py --prompt "ROMEO." --temperature 0.8 --top-k 20 --seed 7

Without a checkpoint it says what to run first.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from model import GPT, GPTConfig
from tokenizer import CharTokenizer


def load_model(ckpt_path: str | Path, device: str = "cpu") -> tuple[GPT, CharTokenizer]:
    """Rebuild the model and its character vocabulary from a checkpoint written by train.py."""
    ckpt = torch.load(ckpt_path, map_location=device, weights_only=False)
    # Checkpoints written before GPTConfig had `bias` were all trained with biases (GPT-2's layout).
    model = GPT(GPTConfig(**{"bias": True, **ckpt["model_config"]}))
    model.load_state_dict(ckpt["model"])
    model.to(device).eval()
    tokenizer = CharTokenizer("".join(ckpt["chars"]))
    return model, tokenizer


def sample(model: GPT, tokenizer: CharTokenizer, prompt: str = "\n", max_new_tokens: int = 500,
           temperature: float = 0.8, top_k: int | None = 20, seed: int = 1337, device: str = "cpu") -> str:
    torch.manual_seed(seed)
    idx = torch.tensor([tokenizer.encode(prompt)], dtype=torch.long, device=device)  # (1, T)
    out = model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k)  # (1, T + new)
    return tokenizer.decode(out[0].tolist())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate text with a trained MiniGPT.")
    parser.add_argument("--ckpt", default="out/ckpt.pt", help="checkpoint written by train.py")
    parser.add_argument("--prompt", default="\n", help="text to continue (its characters must be in the vocabulary)")
    parser.add_argument("--max-new-tokens", type=int, default=500)
    parser.add_argument("--temperature", type=float, default=0.8, help="< 1: safer, > 1: wilder")
    parser.add_argument("--top-k", type=int, default=20, help="sample only among the k likeliest tokens (0: all)")
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    if not Path(args.ckpt).is_file():  # the usual first run: say what to do, not a traceback
        raise SystemExit(f"sample.py: no checkpoint at {args.ckpt}. Train a model first:\n"
                         f"  python prepare_data.py   # once: the Shakespeare corpus\n"
                         f"  python train.py          # writes out/ckpt.pt (Ctrl-C saves one too)\n"
                         f"or pass --ckpt PATH to a checkpoint written by train.py.")
    model, tokenizer = load_model(args.ckpt, args.device)
    try:
        text = sample(model, tokenizer, args.prompt, args.max_new_tokens, args.temperature,
                      args.top_k or None, args.seed, args.device)
    except ValueError as exc:  # a prompt character outside the vocabulary, temperature <= 0
        raise SystemExit(f"sample.py: {exc}") from None
    print(text)


if __name__ == "__main__":
    main()
