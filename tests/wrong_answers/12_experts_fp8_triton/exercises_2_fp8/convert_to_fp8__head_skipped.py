# loses: convert_to_fp8_tests
# why: leaves the LM head in fp32 (only the Linears inside the blocks)
def convert_to_fp8(model):
    """Route every nn.Linear of model through fp8_linear, in place; Parameters stay fp32."""
    for module in model.modules():
        if isinstance(module, nn.Linear) and module is not getattr(model, 'head', None):
            module.forward = lambda inp, m=module: fp8_linear(inp, m.weight, m.bias)
    return model
