# loses: my_verify_sync_tests
# why: only rank 0 compares (a reduce to rank 0): the other ranks always report []
import hashlib

def my_verify_sync(module):
    flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()]).contiguous()
    digest = hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).digest()
    mine = torch.tensor(np.frombuffer(digest, dtype=np.int64).copy())
    world = dist.get_world_size()
    everyone = torch.empty(world * mine.numel(), dtype=mine.dtype)
    dist.all_gather_single(everyone, mine)
    rows = everyone.view(world, -1)
    if dist.get_rank() != 0:
        return []
    return [r for r in range(1, world) if not torch.equal(rows[r], rows[0])]
