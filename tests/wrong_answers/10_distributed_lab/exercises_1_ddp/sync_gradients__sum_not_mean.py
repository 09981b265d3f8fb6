# loses: sync_gradients_tests
# why: averaging forgotten: the all-reduced SUM is used as the gradient (the learning rate grows with N)
def sync_gradients(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if not p.requires_grad:
            continue
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
