# loses: rank_batches_tests
# why: the sampler is built without seed=seed (torch's default 0), so the order ignores the run's seed
class RankBatches:
    def __init__(self, n_samples, rank, world_size, local_batch, seed):
        self.sampler = DistributedSampler(range(n_samples), num_replicas=world_size, rank=rank,
                                          shuffle=True, drop_last=True)
        self.local_batch = local_batch
        self.batches_per_epoch = len(self.sampler) // local_batch
        self.epoch, self.position = 0, 0
        self._order, self._order_epoch = None, None

    def next_indices(self):
        if self.position == self.batches_per_epoch:
            self.epoch, self.position = self.epoch + 1, 0
        if self._order_epoch != self.epoch:
            self.sampler.set_epoch(self.epoch)
            self._order, self._order_epoch = list(self.sampler), self.epoch
        b = self.local_batch
        batch = self._order[self.position * b:(self.position + 1) * b]
        self.position += 1
        return batch

    def state_dict(self):
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state):
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
