# loses: ffd_pack_tests
# why: first fit in the given order: not decreasing
def ffd_pack(lengths, block_size):
    lengths = list(lengths)
    if any(n <= 0 or n > block_size for n in lengths):
        raise ValueError("every length must be in 1..block_size")
    blocks, room = [], []
    for i in range(len(lengths)):
        for b in range(len(blocks)):
            if lengths[i] <= room[b]:
                blocks[b].append(i)
                room[b] -= lengths[i]
                break
        else:
            blocks.append([i])
            room.append(block_size - lengths[i])
    return blocks


def utilization(lengths, n_blocks, block_size):
    if n_blocks <= 0 or block_size <= 0 or sum(lengths) > n_blocks * block_size:
        raise ValueError("the blocks cannot hold these tokens")
    return sum(lengths) / (n_blocks * block_size)
