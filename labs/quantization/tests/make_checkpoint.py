"""Makes data/tiny_gpt.pt, data/calib.txt and data/heldout.txt (run by hand, never by the grader):

    python labs/quantization/tests/make_checkpoint.py

1. Train tiny_gpt.TinyGPT (2 layers, 4 heads, 64 wide, 64 tokens of context, ~108k parameters)
   on the first 90% of the MiniGPT lab's corpus (labs/minigpt/data/shakespeare_small.txt):
   fixed seed, one thread, 600 AdamW steps of 32 x 64 characters (~1 minute on one CPU core).
2. Plant activation outliers: in every block, OUTLIER_CHANNELS channels of ln_1 and of ln_2
   get their LayerNorm weight and bias multiplied by OUTLIER_FACTOR, and the matching input
   columns of attn.c_attn and mlp.c_fc are divided by it. (ln(x) * K) @ (W / K)^T = ln(x) @ W^T:
   the float model is the same function (up to rounding), but the inputs of c_attn and c_fc
   now carry a few channels ~OUTLIER_FACTOR times larger than the rest, as big LLMs' do.
3. Save {"config", "state_dict", "chars"} with torch.save, the calibration text (2,048
   characters of the training split) and the held-out text (the first 4,096 characters of the
   last 10%, never trained on).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import tiny_gpt  # noqa: E402

CORPUS = HERE.parent.parent / "minigpt" / "data" / "shakespeare_small.txt"
DATA = HERE.parent / "data"
SEED = 2211
STEPS = 600
BATCH = 32
OUTLIER_CHANNELS = (5, 23, 41)
OUTLIER_FACTOR = 40.0


def main() -> None:
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    text = CORPUS.read_text(encoding="utf-8")
    chars = "".join(sorted(set(text)))
    cfg = tiny_gpt.TinyConfig(vocab_size=len(chars))
    data = tiny_gpt.encode(text, chars)
    n_train = int(0.9 * len(data))
    train = data[:n_train]
    model = tiny_gpt.TinyGPT(cfg)
    for name, p in model.named_parameters():   # GPT-2's init: N(0, 0.02) weights, zero biases
        if p.dim() == 2:
            torch.nn.init.normal_(p, 0.0, 0.02)
        elif name.endswith(".bias"):
            torch.nn.init.zeros_(p)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    T = cfg.block_size
    for step in range(STEPS):
        lr = 1e-2 * (0.1 + 0.9 * (1 - step / STEPS))
        for group in opt.param_groups:
            group["lr"] = lr
        ix = torch.randint(len(train) - T - 1, (BATCH,))
        x = torch.stack([train[i:i + T] for i in ix])
        y = torch.stack([train[i + 1:i + T + 1] for i in ix])
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 100 == 0 or step == STEPS - 1:
            print(f"step {step}: loss {loss.item():.3f}")
    with torch.no_grad():
        for block in model.blocks:
            for ln, lin in ((block.ln_1, block.attn.c_attn), (block.ln_2, block.mlp.c_fc)):
                for j in OUTLIER_CHANNELS:
                    ln.weight[j] *= OUTLIER_FACTOR
                    ln.bias[j] *= OUTLIER_FACTOR
                    lin.weight[:, j] /= OUTLIER_FACTOR
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    torch.save({"config": vars(cfg), "state_dict": state, "chars": chars}, DATA / "tiny_gpt.pt")
    full = text
    cut = len(full) * 9 // 10
    (DATA / "calib.txt").write_text(full[cut - 6000:cut - 6000 + 2048], encoding="utf-8")
    (DATA / "heldout.txt").write_text(full[cut + 64:cut + 64 + 4096], encoding="utf-8")


if __name__ == "__main__":
    main()
