# loses: my_verify_sync_tests
# why: a sum of the parameters as fingerprint: blind to a swap or a sum-preserving shift
import hashlib

def my_verify_sync(module):
    flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()]).contiguous()
    mine = flat.double().sum().reshape(1)
    world = dist.get_world_size()
    everyone = torch.empty(world * mine.numel(), dtype=mine.dtype)
    dist.all_gather_single(everyone, mine)
    rows = everyone.view(world, -1)
    return [r for r in range(1, world) if not torch.equal(rows[r], rows[0])]
