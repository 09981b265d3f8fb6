# loses: amp_setup_tests
# why: bf16 autocasts to float16 (the wrong 16-bit type: 5 exponent bits)
import contextlib

def amp_setup(amp, device_type):
    if amp == "none":
        return contextlib.nullcontext(), None
    if amp == "bf16":
        return torch.autocast(device_type, dtype=torch.float16), None
    if amp == "fp16":
        return torch.autocast(device_type, dtype=torch.float16), torch.amp.GradScaler(device_type)
    raise ValueError(f"amp must be 'none', 'bf16' or 'fp16', got {amp!r}")
