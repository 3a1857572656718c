#!/usr/bin/env python3
"""torch_train_check.py: `torch_train_bench.py --check`: its float64 model (logits and every parameter
gradient) against tools/torch_reference.py's explicit-product rebuild, over small models covering every
attention kind, MLP, norm, tied heads and hybrids; fails above a relative error of 1e-8.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deps import need  # noqa: E402

torch = need("torch_train_check.py", "torch")
import torch.nn.functional as F  # noqa: E402


CHECK_CONFIGS = [  # small shapes; T = 11 with block 4 exercises padding and 3 blocks
    dict(layers="path,path"),
    dict(layers="path_fox,path_fox", mlp="gelu"),
    dict(layers="fox,rope", norm="layernorm"),
    dict(layers="nope,path", tied=True, conv_bias=True, beta_clamp=1.9),
    dict(layers="rope,path_fox", mlp="none"),
    dict(layers="sba,sba", sba_remainder="none"),
    dict(layers="sba,rope"),
]


def check(tb):
    """tb: the torch_train_bench module (its parse_args, Model and constants)."""
    import torch_reference  # sets the default dtype to float64 on import (its zeros rely on it)
    dt = torch.float64
    worst, runs = 0.0, 0
    for idx, extra in enumerate(CHECK_CONFIGS):
        argv = ["--d-model", "16", "--n-heads", "2", "--rank", "4", "--block", "4", "--vocab", "7", "--T", "11",
                "--batch", "2", "--mlp-ratio", "2"]
        for key, value in extra.items():
            flag = "--" + key.replace("_", "-")
            argv += [flag] if value is True else [flag, str(value)]
        for sdpa in ([True, False] if hasattr(F, "scaled_dot_product_attention") else [False]):
            a = tb.parse_args(argv + ([] if sdpa else ["--no-sdpa"]))
            model = tb.Model(a).to(dt)
            model.init_params(100 + idx, std=0.3)
            gen = torch.Generator().manual_seed(200 + idx)
            with torch.no_grad():  # non-trivial gains and biases too
                for name, p in model.named_parameters():
                    if p.dim() == 1:
                        p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=dt))
            ids = torch.randint(0, a.vocab, (a.batch, a.T), generator=gen)
            labels = torch.randint(0, a.vocab, (a.batch, a.T), generator=gen)
            labels[0, :3] = -100
            # the reference's parameter dict: w_gate_up split into w_gate / w_up
            ref_params = {}
            for name, p in model.named_parameters():
                if name.endswith("mlp.w_gate_up"):
                    pre = name[: -len("w_gate_up")]
                    ref_params[pre + "w_gate"] = p.detach()[: a.mlp_hidden].clone().requires_grad_(True)
                    ref_params[pre + "w_up"] = p.detach()[a.mlp_hidden:].clone().requires_grad_(True)
                else:
                    ref_params[name] = p.detach().clone().requires_grad_(True)
            cfg = dict(norm=a.norm, norm_eps=tb.RMS_EPS if a.norm == "rmsnorm" else tb.LN_EPS, n_heads=a.n_heads,
                       head_dim=a.head_dim, rope_theta=a.rope_theta, l2norm_eps=tb.W_EPS, beta_clamp=a.beta_clamp,
                       mlp=a.mlp, layers=a.layer_kinds, tied_embeddings=a.tied, sba_remainder=a.sba_remainder)
            ref_logits = torch_reference.Model(cfg, ref_params).logits(ids)
            torch_reference.loss_fn(ref_logits, labels).backward()
            logits = model(ids)
            torch_reference.loss_fn(logits, labels).backward()

            def rel(x, y):
                return float((x - y).abs().max() / y.abs().max().clamp(min=1e-300))
            errs = {"logits": rel(logits.detach(), ref_logits.detach())}
            for name, p in model.named_parameters():
                if name.endswith("mlp.w_gate_up"):
                    pre = name[: -len("w_gate_up")]
                    ref_grad = torch.cat([ref_params[pre + "w_gate"].grad, ref_params[pre + "w_up"].grad])
                else:
                    ref_grad = ref_params[name].grad
                errs["d" + name] = rel(p.grad, ref_grad)
            top = max(errs, key=errs.get)
            worst = max(worst, errs[top])
            runs += 1
            print(f"check {runs}: layers={a.attention if not a.layers else a.layers} mlp={a.mlp} norm={a.norm} "
                  f"tied={a.tied} sdpa={a.sdpa}: logits {errs['logits']:.1e}, {len(errs) - 1} gradients, "
                  f"max {errs[top]:.1e} ({top})")
    ok = worst <= 1e-8
    print(f"torch_train_bench --check: {runs} models, max relative error {worst:.2e} ({'OK' if ok else 'FAIL'}, "
          f"limit 1e-8)")
    return ok
