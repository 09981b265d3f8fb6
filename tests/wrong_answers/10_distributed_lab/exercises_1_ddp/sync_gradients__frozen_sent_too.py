# loses: sync_gradients_tests, sync_gradients_comm_tests
# why: frozen parameters get a zero gradient and are all-reduced too: extra calls, and AdamW's decay then moves them
def sync_gradients(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad.div_(world)
