# loses: saved_bytes_tests
# why: keyed by id(t): k and k.T (one storage) are counted twice
def saved_bytes(fn, *args):
    """Bytes of the distinct storages autograd saves for the backward while fn(*args) runs."""
    storages = {}

    def pack(t):
        st = t.untyped_storage()
        storages[id(t)] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return int(sum(storages.values()))


a_demo = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
print("x * y keeps both factors:", saved_bytes(lambda x, y: x * y, a_demo, a_demo.detach().clone().requires_grad_()), "bytes")
