# loses: convert_to_fp8_tests
# why: rounds the weights to e4m3 once, in place, and keeps the fp32 matmul: the master weights are lost and activations are never cast
def convert_to_fp8(model):
    """Route every nn.Linear of model through fp8_linear, in place; Parameters stay fp32."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            with torch.no_grad():
                q, s = quantize_tensorwise(module.weight, torch.float8_e4m3fn)
                module.weight.copy_(q.float() * s)
    return model
