# loses: convert_to_fp8_tests
# why: converts only the model's direct children (the LM head), not the nested Linears
def convert_to_fp8(model):
    """Route every nn.Linear of model through fp8_linear, in place; Parameters stay fp32."""
    for module in model.children():
        if isinstance(module, nn.Linear):
            module.forward = lambda inp, m=module: fp8_linear(inp, m.weight, m.bias)
    return model
