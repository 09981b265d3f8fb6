# loses: amp_setup_tests_validation
# why: an unknown amp string silently means no autocast instead of a ValueError
import contextlib

def amp_setup(amp, device_type):
    if amp == "none":
        return contextlib.nullcontext(), None
    if amp == "bf16":
        return torch.autocast(device_type, dtype=torch.bfloat16), None
    if amp == "fp16":
        return torch.autocast(device_type, dtype=torch.float16), torch.amp.GradScaler(device_type)
    return contextlib.nullcontext(), None
