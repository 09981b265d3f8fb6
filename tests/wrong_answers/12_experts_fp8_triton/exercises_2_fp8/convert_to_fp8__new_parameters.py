# loses: convert_to_fp8_tests
# why: replaces each Linear with a new module holding copies of the weights: an optimizer built before updates nothing
def convert_to_fp8(model):
    """Route every nn.Linear of model through fp8_linear, in place; Parameters stay fp32."""
    class FP8Linear(nn.Module):
        def __init__(self, lin):
            super().__init__()
            self.weight = nn.Parameter(lin.weight.detach().clone())
            self.bias = nn.Parameter(lin.bias.detach().clone()) if lin.bias is not None else None

        def forward(self, inp):
            return fp8_linear(inp, self.weight, self.bias)

    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, FP8Linear(child))
    return model
