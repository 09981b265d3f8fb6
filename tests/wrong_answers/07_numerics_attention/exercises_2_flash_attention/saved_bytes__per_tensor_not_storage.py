# loses: saved_bytes_tests
# why: adds numel * element_size of every saved tensor: views of one storage counted twice, slices undercounted
def saved_bytes(fn, *args):
    """Bytes of the distinct storages autograd saves for the backward while fn(*args) runs."""
    storages = {}

    def pack(t):
        storages[len(storages)] = t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return int(sum(storages.values()))


a_demo = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
print("x * y keeps both factors:", saved_bytes(lambda x, y: x * y, a_demo, a_demo.detach().clone().requires_grad_()), "bytes")
