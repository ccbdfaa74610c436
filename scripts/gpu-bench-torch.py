#!/usr/bin/env python3
# The same-machine floor of scripts/gpu-bench.sh: PyTorch + transformers greedy decode on
# the same safetensors checkpoint (random weights of a real shape). Prints ONE JSON object
# on stdout; when torch, transformers, a CUDA device or the model type is missing, that
# object carries "error" naming what failed (the bench goes on without the floor).
# Usage: gpu-bench-torch.py MODEL_DIR [--prompt-tokens N] [--gen-tokens N] [--dtype bfloat16]
#        gpu-bench-torch.py --copy-bandwidth   the GPU's device-to-device copy rate (TB/s, bytes
#                                              read + written), the measured ceiling beside the datasheet's
import argparse
import json
import sys
import time


def copy_bandwidth() -> dict:
    out = {'what': 'device-to-device copy through PyTorch, 2 GiB, bytes read + written, median of 10 after 3 warm-ups'}
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - report any import failure
        return {**out, 'error': f'torch is not importable: {e}'}
    if not torch.cuda.is_available():
        return {**out, 'error': 'torch sees no CUDA device', 'torch': torch.__version__}
    n = 2 ** 31
    a = torch.empty(n, dtype=torch.uint8, device='cuda')
    b = torch.empty_like(a)
    times = []
    for i in range(13):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(s.elapsed_time(e) / 1000)
    t = sorted(times)[len(times) // 2]
    return {**out, 'torch': torch.__version__, 'device': torch.cuda.get_device_name(0), 'copy_tb_s': 2 * n / t / 1e12}


def main() -> dict:
    if '--copy-bandwidth' in sys.argv:
        return copy_bandwidth()
    ap = argparse.ArgumentParser()
    ap.add_argument('model')
    ap.add_argument('--prompt-tokens', type=int, default=128)
    ap.add_argument('--gen-tokens', type=int, default=64)
    ap.add_argument('--dtype', default='bfloat16')
    a = ap.parse_args()
    out = {'floor': 'pytorch+transformers greedy decode', 'model': a.model, 'prompt_tokens': a.prompt_tokens, 'gen_tokens': a.gen_tokens}
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - report any import failure
        return {**out, 'error': f'torch is not importable: {e}'}
    try:
        import transformers
    except Exception as e:  # noqa: BLE001
        return {**out, 'error': f'transformers is not importable: {e}', 'torch': torch.__version__}
    out.update(torch=torch.__version__, transformers=transformers.__version__)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    out['device'] = torch.cuda.get_device_name(0) if device == 'cuda' else 'cpu'
    try:
        # transformers 5 names the argument dtype (torch_dtype before)
        key = 'dtype' if int(transformers.__version__.split('.')[0]) >= 5 else 'torch_dtype'
        model = transformers.AutoModelForCausalLM.from_pretrained(a.model, **{key: getattr(torch, a.dtype)}).to(device).eval()
    except Exception as e:  # noqa: BLE001 - e.g. a transformers without this model type
        return {**out, 'error': f'loading the model failed: {type(e).__name__}: {str(e)[:400]}'}
    ids = torch.randint(0, 990, (1, a.prompt_tokens), device=device, generator=torch.Generator(device=device).manual_seed(1))

    def run(n: int) -> float:
        if device == 'cuda':
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        if device == 'cuda':
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    try:
        run(2)  # warm-up
        t1 = run(1)  # prefill + one token
        tn = run(a.gen_tokens)
    except Exception as e:  # noqa: BLE001
        return {**out, 'error': f'generate failed: {type(e).__name__}: {str(e)[:400]}'}
    decode = max(tn - t1, 1e-9) / max(a.gen_tokens - 1, 1)
    return {**out, 'prefill_and_first_ms': t1 * 1000, 'decode_ms_per_token': decode * 1000, 'decode_tok_s': 1 / decode}


if __name__ == '__main__':
    print(json.dumps(main()))
    sys.exit(0)
