# loses: sp_sync_comm_tests
# why: one all-reduce per parameter: 6 calls, alpha paid 6 times
def sync_replicated_grads(tp_block):
    ps = [tp_block.ln1.weight, tp_block.ln1.bias, tp_block.ln2.weight, tp_block.ln2.bias,
          tp_block.proj.bias, tp_block.fc2.bias]
    for p in ps:
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
