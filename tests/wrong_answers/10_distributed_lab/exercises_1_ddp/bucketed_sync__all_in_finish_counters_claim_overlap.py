# loses: bucketed_sync_comm_tests
# why: the hooks only count; every bucket is launched in finish() (no overlap), and the counters claim they came from hooks
class BucketedSync:
    def __init__(self, model, bucket_cap_bytes):
        params = [p for p in model.parameters() if p.requires_grad]
        order = params[::-1]
        plan = bucket_plan([p.numel() * p.element_size() for p in order], bucket_cap_bytes)
        self.world = dist.get_world_size()
        self.buckets = [[order[i] for i in idx] for idx in plan]
        self.home = {}
        self.buffers = []
        for b, bucket in enumerate(self.buckets):
            offset = 0
            for p in bucket:
                self.home[id(p)] = (b, offset)
                offset += p.numel()
            self.buffers.append(torch.zeros(offset, dtype=bucket[0].dtype))
        self.hooks_fired = self.launched_from_hook = self.launched_at_finish = 0
        self._new_step()
        for p in params:
            p.register_post_accumulate_grad_hook(self._ready)

    def _new_step(self):
        self.ready = [0] * len(self.buckets)
        self.handles = [None] * len(self.buckets)
        self.next = 0

    def _ready(self, p):
        self.hooks_fired += 1
        self.ready[self.home[id(p)][0]] += 1
        # launching waits for finish(): simpler, and the result is the same

    @torch.no_grad()
    def _launch(self):
        b = self.next
        for p in self.buckets[b]:
            off = self.home[id(p)][1]
            piece = self.buffers[b][off:off + p.numel()]
            piece.copy_(p.grad.reshape(-1)) if p.grad is not None else piece.zero_()
        self.handles[b] = dist.all_reduce(self.buffers[b], op=dist.ReduceOp.SUM, async_op=True)
        self.next += 1

    @torch.no_grad()
    def finish(self):
        while self.next < len(self.buckets):
            self._launch()
            self.launched_from_hook += 1
        for b, handle in enumerate(self.handles):
            handle.wait()
            self.buffers[b].div_(self.world)
            for p in self.buckets[b]:
                off = self.home[id(p)][1]
                avg = self.buffers[b][off:off + p.numel()].view_as(p)
                if p.grad is None:
                    p.grad = avg.clone()
                else:
                    p.grad.copy_(avg)
        self._new_step()
