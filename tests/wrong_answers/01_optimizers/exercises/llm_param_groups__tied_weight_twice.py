# loses: llm_param_groups_tests
# why: no de-duplication: a tied embedding/output weight lands in both groups
def llm_param_groups(model, weight_decay):
    """[decay group: Linear weights, no-decay group: everything else], each parameter once."""
    embedding = {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters(recurse=False)}
    decay, no_decay, seen = [], [], set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            seen.add(id(p))
            if isinstance(module, torch.nn.Linear) and name == "weight" :
                decay.append(p)
            else:
                no_decay.append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def update_to_weight_ratios(before, after):
    """{name: ||after - before|| / ||before||} for two dicts of tensors with the same names."""
    return {k: float((after[k] - before[k]).norm() / before[k].norm()) for k in before if float(before[k].norm()) > 0}
