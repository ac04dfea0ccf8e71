"""Qwen2.5-0.5B's shape outside the trainers, alone on the GPU:

    W=/tmp/gpucheck python benchmarks/gpu/micro.py MODEL_FOLDER OUT.json     (reads $W/peak.json from env_check.py)

1. forward + backward at batch sizes that fill the GPU (a GRPO step's training part: bf16 weights, full fine-tuning,
   activation checkpointing on and off), against the bf16 matmul rate measured in the same run: MFU;
2. generation throughput, as GRPO samples;
3. Liger's fused linear GRPO loss against the same loss on materialised logits: values, gradients, time, memory;
4. trl's chunked LM head (trl >= 1.15, GRPO's trl) against the logits trl 1.12 materialises: a GRPO microbatch's
   per-token log-probabilities, forward and backward: values, time, memory.

Model FLOPs are counted, not measured: 2 x (every nn.Linear weight, lm_head included) per token forward plus causal
attention's 2 x 2 x layers x seq x heads x head_dim / 2, x3 for forward + backward. The forward that activation
checkpointing recomputes is not counted (model FLOPs utilisation, not the hardware's).
"""

import json
import os
import sys
import time

import torch
from transformers import AutoModelForCausalLM

path, out = sys.argv[1], sys.argv[2]
dry = os.environ.get("DRY") == "1"
device = "cuda" if torch.cuda.is_available() else "cpu"
with open(os.path.join(os.environ["W"], "peak.json")) as f:
    peak = json.load(f)
measured = peak.get("bf16_matmul_tflops_measured") or 1.0
datasheet = peak["bf16_dense_peak_tflops_datasheet"]
result = {"device": peak.get("name", device), "fwd_bwd": [], "generate": [], "liger": None, "lm_head": []}


def save():
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


def sync():
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, warmup=2, reps=5) -> float:
    """The median of `reps` timed calls after `warmup` untimed ones, in seconds."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def reset():
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gib():
    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "cuda" else None


model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).to(device)
config = model.config
n_linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
result["params"], result["linear_params"] = sum(p.numel() for p in model.parameters()), n_linear
vocab = config.vocab_size


def forward_flops(tokens, seq):
    return 2 * n_linear * tokens + 2 * config.num_hidden_layers * seq * config.num_attention_heads * head_dim * tokens


# 1. forward + backward, sequence = 128 prompt + 512 completion tokens
seq = 64 if dry else 640
for batch, checkpointing in [(2, True)] if dry else [(4, True), (16, True), (16, False), (32, True), (64, True),
                                                       (96, True)]:
    reset()
    row = {"batch": batch, "seq": seq, "activation_checkpointing": checkpointing}
    try:
        model.train()
        if checkpointing:
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.activation_checkpointing_disable()
        ids = torch.randint(0, vocab, (batch, seq), device=device)

        def step(ids=ids):
            model(input_ids=ids, labels=ids).loss.backward()
            model.zero_grad(set_to_none=True)

        seconds = timed(step, warmup=1, reps=3)
        tflops = 3 * forward_flops(batch * seq, seq) / seconds / 1e12
        row.update(seconds=round(seconds, 4), tflops=round(tflops, 1), mfu_datasheet=round(tflops / datasheet, 3),
                   of_measured_matmul=round(tflops / measured, 3), tokens_per_s=round(batch * seq / seconds),
                   peak_gib=peak_gib())
    except torch.OutOfMemoryError:
        row["oom"] = True
    model.zero_grad(set_to_none=True)
    result["fwd_bwd"].append(row)
    print("fwd_bwd", row, flush=True)
    save()

# 2. generation: 128 prompt tokens, 128 new ones forced (min_new_tokens), sampled as GRPO samples
model.eval()
prompt, new = (16, 8) if dry else (128, 128)
model.generate(input_ids=torch.randint(0, vocab, (16, prompt), device=device), max_new_tokens=4, do_sample=True,
               pad_token_id=0)
for batch in [2] if dry else [16, 64, 256]:
    reset()
    row = {"batch": batch, "prompt": prompt, "new_tokens": new}
    try:
        ids = torch.randint(0, vocab, (batch, prompt), device=device)
        seconds = timed(lambda ids=ids: model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new, do_sample=True,
            temperature=1.0, top_k=0, pad_token_id=0), warmup=0, reps=2)
        flops = forward_flops(batch * prompt, prompt) + sum(forward_flops(batch, prompt + i) for i in range(new))
        row.update(seconds=round(seconds, 3), new_tokens_per_s=round(batch * new / seconds),
                   ms_per_token_step=round(seconds / new * 1e3, 2), tflops=round(flops / seconds / 1e12, 2),
                   mfu_datasheet=round(flops / seconds / 1e12 / datasheet, 4), peak_gib=peak_gib())
    except torch.OutOfMemoryError:
        row["oom"] = True
    result["generate"].append(row)
    print("generate", row, flush=True)
    save()

# 3. Liger's fused linear GRPO loss vs. the same loss function on materialised logits
try:
    from liger_kernel.chunked_loss import LigerFusedLinearGRPOLoss
    from liger_kernel.chunked_loss.grpo_loss import LigerFusedLinearGRPOFunction

    B, T = (2, 8) if dry else (64, 128)  # 64 completions of 128 tokens: materialised logits peak ~20 GB
    weight = model.get_output_embeddings().weight.detach().clone().requires_grad_(True)
    generator = torch.Generator(device=device).manual_seed(0)
    hidden = (torch.randn(B, T, config.hidden_size, device=device, generator=generator) * 2.0).to(torch.bfloat16)
    ids = torch.randint(0, vocab, (B, T), device=device, generator=generator)
    mask = torch.ones(B, T, device=device)
    mask[:, T * 3 // 4:] = 0  # a quarter padding
    advantages = torch.randn(B, device=device, generator=generator)
    with torch.no_grad():
        logps = torch.log_softmax(hidden.float() @ weight.float().T, -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    old = logps + 0.05 * torch.randn(B, T, device=device, generator=generator)  # off-policy enough to clip some

    def plain():
        h = hidden.clone().requires_grad_(True)
        logits = (h @ weight.T).float()  # a bf16 matmul, then an fp32 log-softmax, as TRL's own path
        logp = torch.log_softmax(logits, -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
        loss, _ = LigerFusedLinearGRPOFunction.ppo_loss_fn(
            per_token_logps=logp, attention_mask=mask, advantages=advantages, full_attention_mask=mask,
            old_per_token_logps=old, beta=0.0, loss_type="bnpo")
        loss.backward()
        return loss.detach(), h.grad

    fused_loss = LigerFusedLinearGRPOLoss(beta=0.0, use_ref_model=False, loss_type="bnpo", temperature=1.0,
                                          compiled=not dry)  # compiled, as TRL calls it; not on a CPU rehearsal

    def fused():
        h = hidden.clone().requires_grad_(True)
        loss, _ = fused_loss(_input=h, lin_weight=weight, selected_token_ids=ids, attention_mask=mask,
                             advantages=advantages, old_per_token_logps=old)
        loss.backward()
        return loss.detach(), h.grad

    rows = {}
    for name, fn in (("plain", plain), ("liger", fused)):
        weight.grad = None
        reset()
        start = time.perf_counter()
        loss, grad_hidden = fn()
        sync()
        first = time.perf_counter() - start  # with compilation
        grad_weight = weight.grad.detach().clone()
        weight.grad = None
        reset()
        seconds = timed(lambda fn=fn: (fn(), setattr(weight, "grad", None)), warmup=0, reps=3)
        rows[name] = dict(loss=loss.float().item(), first_call_s=round(first, 2), seconds=round(seconds, 4),
                          peak_gib=peak_gib(), grads=(grad_hidden.float(), grad_weight.float()))

    def relative_error(a, b):
        return ((a - b).norm() / b.norm()).item()

    plain_grads, liger_grads = rows["plain"].pop("grads"), rows["liger"].pop("grads")
    result["liger"] = {"B": B, "T": T, "vocab": vocab,
                       "rel_err_grad_hidden": relative_error(liger_grads[0], plain_grads[0]),
                       "rel_err_grad_weight": relative_error(liger_grads[1], plain_grads[1]),
                       **{f"{name}_{key}": value for name, row in rows.items() for key, value in row.items()}}
except Exception as err:  # noqa: BLE001 -- recorded, so that the summary says why
    result["liger"] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
print("liger", result["liger"], flush=True)
save()

# 4. trl's chunked LM head against materialised logits, with activation checkpointing as the recipes train. Last: the
#    head is patched into the model for good
try:
    from trl.trainer.utils import add_fused_lm_head, entropy_from_logits, selective_log_softmax

    prompt, completion = (8, 8) if dry else (128, 512)
    model.train()
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    generator = torch.Generator(device=device).manual_seed(0)
    batches = {b: torch.randint(0, vocab, (b, prompt + completion), device=device, generator=generator)
               for b in ([2] if dry else [16, 64])}

    def materialised(ids):  # trl 1.12: the head's logits over the completion, a log-softmax row by row, the entropy
        logits = model(input_ids=ids, logits_to_keep=completion + 1).logits[:, :-1]
        logps = selective_log_softmax(logits, ids[:, prompt:])
        with torch.no_grad():
            entropy_from_logits(logits)
        logps.sum().backward()
        return logps.detach()

    def chunked(ids):  # trl >= 1.15: no logits; the prompt's labels are -100, so only the completion is scored
        labels = ids.clone()
        labels[:, :prompt] = -100
        logps = model(input_ids=ids, labels=labels, fused_lm_head=True).log_probs[:, -completion:]
        logps.sum().backward()
        return logps.detach()

    values = {}
    for name, fn in (("materialised", materialised), ("chunked", chunked)):
        if name == "chunked":
            add_fused_lm_head(model, outputs=("log_probs", "entropy"))  # as GRPOTrainer adds it
        for batch, ids in batches.items():
            reset()
            row = {"head": name, "batch": batch, "prompt": prompt, "completion": completion}
            try:
                values.setdefault(batch, {})[name] = fn(ids)
                model.zero_grad(set_to_none=True)
                seconds = timed(lambda fn=fn, ids=ids: (fn(ids), model.zero_grad(set_to_none=True)), warmup=0, reps=2)
                row.update(seconds=round(seconds, 4), tokens_per_s=round(ids.numel() / seconds), peak_gib=peak_gib())
            except torch.OutOfMemoryError:
                row["oom"] = True
            model.zero_grad(set_to_none=True)
            if len(values.get(batch, {})) == 2:
                row["max_abs_diff_logp"] = (values[batch]["chunked"].float() - values[batch]["materialised"].float()
                                            ).abs().max().item()
            result["lm_head"].append(row)
            print("lm_head", row, flush=True)
except Exception as err:  # noqa: BLE001 -- recorded, so that the summary says why
    result["lm_head"].append({"error": f"{type(err).__name__}: {str(err)[:300]}"})
    print("lm_head", result["lm_head"][-1], flush=True)
save()
