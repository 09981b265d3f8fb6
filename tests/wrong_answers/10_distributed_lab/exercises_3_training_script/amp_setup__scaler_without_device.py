# loses: amp_setup_tests
# why: GradScaler() without the device type means CUDA: on CPU it switches itself off
import contextlib

def amp_setup(amp, device_type):
    if amp == "none":
        return contextlib.nullcontext(), None
    if amp == "bf16":
        return torch.autocast(device_type, dtype=torch.bfloat16), None
    if amp == "fp16":
        return torch.autocast(device_type, dtype=torch.float16), torch.amp.GradScaler()
    raise ValueError(f"amp must be 'none', 'bf16' or 'fp16', got {amp!r}")
