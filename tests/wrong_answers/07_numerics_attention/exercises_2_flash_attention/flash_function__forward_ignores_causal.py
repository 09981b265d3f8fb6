# loses: flash_function_tests
# why: forward calls fa2_forward without causal, so a causal call attends to the future
class MyFlashAttention2(torch.autograd.Function):
    """softmax(q k^T / sqrt(d)) v; saves q, k, v, O and the row logsumexp L for the backward."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False, block_q=16, block_k=16):
        o, L = fa2_forward(q, k, v, block_q, block_k)
        ctx.save_for_backward(q, k, v, o, L)
        ctx.causal, ctx.block_q, ctx.block_k = causal, block_q, block_k
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, L = ctx.saved_tensors
        dq, dk, dv = fa2_backward(q, k, v, o, L, do, ctx.block_q, ctx.block_k, causal=ctx.causal)
        return dq, dk, dv, None, None, None


# your Parts A, B and C together: gradcheck compares your backward with finite differences
q_demo, k_demo, v_demo = random_qkv(1, 2, 7, 7, 4, seed=4, requires_grad=True)
for causal in (False, True):
    ok = torch.autograd.gradcheck(lambda a, b, c: MyFlashAttention2.apply(a, b, c, causal, 3, 2),
                                  (q_demo, k_demo, v_demo), raise_exception=False)
    print(f"gradcheck with your fa2_forward and fa2_backward, causal={causal}: {ok}")
