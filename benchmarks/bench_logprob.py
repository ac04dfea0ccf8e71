"""GRPO's log-probability pass on a CPU: trl 1.12's logits of the completions, trl 1.16's chunked LM head as shipped
(every position of every row scored, off Triton), and the same head scoring only the completions' positions
(extras/runtime.py's score_completions_only), forward and backward, side by side in one process.

    python benchmarks/bench_logprob.py               # SmolLM2's widths: 16 rows, 48-token prompts, 16-token answers
    python benchmarks/bench_logprob.py --prompt 100  # longer prompts

Two measurements, each variant in turn, `--rounds` times, the median reported with the fp32 matmul rate taken at the
start (threads as torch has them):
- the LM head alone: hidden states [rows, prompt + completion, 576] through SmolLM2's 49,152 x 576 head;
- a 4-layer model of SmolLM2's widths (random weights), the whole forward and backward, as GRPOTrainer calls it.
The log-probabilities and gradients of the variants are compared too: the fix must change the time, nothing else.
"""

import argparse
import statistics
import sys
import time

import torch
import trl.trainer.utils as trl_utils
from harness import REPO, machine, matmul_gflops
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, str(REPO))  # extras/, whose fix is measured
from extras import runtime  # noqa: E402

SHIPPED = trl_utils._use_triton
VOCAB, HIDDEN = 49152, 576  # SmolLM2-135M's


def batch(rows: int, prompt: int, completion: int):
    """Left-padded rows as GRPOTrainer builds them: prompts of different lengths (the longest `prompt`), then the
    completion; labels -100 on the padding and the prompt."""
    torch.manual_seed(0)
    lengths = [prompt - (i * prompt) // (2 * rows) for i in range(rows)]  # from `prompt` down to about half of it
    width = prompt + completion
    ids = torch.randint(1, VOCAB, (rows, width))
    mask = torch.tensor([[0] * (prompt - n) + [1] * (n + completion) for n in lengths])
    ids = ids.masked_fill(mask == 0, 0)
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-completion] = -100
    return ids, mask, labels


def trl_112(model, ids, mask, completion: int, temperature: float):
    """trl 1.12's _get_per_token_logps_and_entropies: the logits of the completions only (logits_to_keep), their
    log-softmax at the sampled tokens, and the entropy."""
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=completion + 1).logits[:, :-1] / temperature
    logps = logits.log_softmax(-1)
    return logps.gather(-1, ids[:, -completion:, None])[..., 0], -(logps.exp() * logps).sum(-1)


def trl_116(model, ids, mask, labels, completion: int):
    out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -completion:], out.entropy[:, -completion:]


def timed(fn) -> tuple[float, tuple]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--prompt", type=int, default=48, help="the longest prompt, in tokens")
    parser.add_argument("--completion", type=int, default=16)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{machine()}; fp32 matmul {matmul_gflops():.0f} GFLOP/s; {args.rows} rows, prompts up to {args.prompt} "
          f"tokens, {args.completion}-token completions")
    ids, mask, labels = batch(args.rows, args.prompt, args.completion)
    temperature = 0.7
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=1536, num_hidden_layers=args.layers,
                         num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    plain = LlamaForCausalLM(config)  # trl 1.12's: the model's own forward
    plain.load_state_dict(model.state_dict())
    trl_utils.add_fused_lm_head(model, temperature=temperature, outputs=("log_probs", "entropy"))
    head = model.get_output_embeddings().weight
    hidden = torch.randn(args.rows, args.prompt + args.completion, HIDDEN, requires_grad=True)
    keep = labels[:, 1:] != -100

    def head_alone(compact: bool):
        def run():
            rows = hidden[:, :-1][keep] if compact else hidden[:, :-1].reshape(-1, HIDDEN)
            targets = labels[:, 1:][keep] if compact else labels[:, 1:].clamp(min=0).reshape(-1)
            logps, entropy, *_ = trl_utils._ChunkedLogProbFunction.apply(
                rows, head, None, targets, temperature, trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE, None, 1.0,
                ("log_probs", "entropy"))
            if not compact:
                logps, entropy = logps.view(keep.shape)[keep], entropy.view(keep.shape)[keep]
            (logps.sum() + 0.1 * entropy.sum()).backward()
            return logps.detach()
        return run

    def head_112():
        logits = hidden[:, -args.completion - 1:-1] @ head.t() / temperature
        logps = logits.log_softmax(-1)
        picked = logps.gather(-1, ids[:, -args.completion:, None])[..., 0]
        (picked.sum() + 0.1 * -(logps.exp() * logps).sum()).backward()
        return picked.detach()

    def whole(variant: str):
        def run():
            for m in (model, plain):
                m.zero_grad()
            if variant == "1.12":
                logps, entropy = trl_112(plain, ids, mask, args.completion, temperature)
            else:
                trl_utils._use_triton = SHIPPED
                if variant == "1.16 + fix":
                    runtime.score_completions_only()
                logps, entropy = trl_116(model, ids, mask, labels, args.completion)
                trl_utils._use_triton = SHIPPED
            (logps.sum() + 0.1 * entropy.sum()).backward()
            grads = {n: p.grad.clone() for n, p in (plain if variant == "1.12" else model).named_parameters()}
            return logps.detach(), grads
        return run

    studies = {
        "the LM head alone": {"1.12": head_112, "1.16 as shipped": head_alone(False), "1.16 + fix": head_alone(True)},
        f"a {args.layers}-layer model": {name: whole(name) for name in ("1.12", "1.16 as shipped", "1.16 + fix")},
    }
    for study, variants in studies.items():
        times = {name: [] for name in variants}
        results = {}
        for _ in range(args.rounds):
            for name, fn in variants.items():
                hidden.grad = None
                seconds, results[name] = timed(fn)
                times[name].append(seconds)
        medians = {name: statistics.median(t) for name, t in times.items()}
        print(f"\n{study}, forward and backward (median of {args.rounds}):")
        for name, seconds in medians.items():
            print(f"  {name:<17} {seconds:7.3f} s   {seconds / medians['1.16 + fix']:5.2f}x the fix's")
        fixed, shipped = results["1.16 + fix"], results["1.16 as shipped"]
        if isinstance(fixed, tuple):  # the whole model: log-probabilities and every gradient
            logps_diff = (fixed[0] - shipped[0]).abs().max().item()
            grad_diff = max((fixed[1][n] - shipped[1][n]).abs().max().item() for n in fixed[1])
            vs_112 = (fixed[0] - results["1.12"][0]).abs().max().item()
            print(f"  fix against shipped: log-probabilities differ by at most {logps_diff:.1e}, gradients by "
                  f"{grad_diff:.1e}; against 1.12's log-probabilities by {vs_112:.1e}")
        else:
            print(f"  fix against shipped: log-probabilities differ by at most {(fixed - shipped).abs().max():.1e}")


if __name__ == "__main__":
    main()
