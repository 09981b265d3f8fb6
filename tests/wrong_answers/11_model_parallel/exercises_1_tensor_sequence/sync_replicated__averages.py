# loses: sp_block_tests
# why: the gradients averaged (DDP habit): each rank's sum over its tokens must be summed
def sync_replicated_grads(tp_block):
    ps = [tp_block.ln1.weight, tp_block.ln1.bias, tp_block.ln2.weight, tp_block.ln2.bias,
          tp_block.proj.bias, tp_block.fc2.bias]
    flat = torch.cat([p.grad.reshape(-1) for p in ps])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= dist.get_world_size()
    i = 0
    for p in ps:
        p.grad.copy_(flat[i:i + p.numel()].view_as(p))
        i += p.numel()
