# loses: hierarchy_tests
# why: the inter-node ring runs over all nodes x g GPUs instead of the nodes
from solutions_lib import upstream


def hierarchical_allreduce_time(nodes, gpus_per_node, nbytes, alpha_intra, bw_intra, alpha_inter, bw_inter):
    """Intra-node reduce-scatter + inter-node ring all-reduce of nbytes/g + intra-node all-gather."""
    if nodes < 1 or gpus_per_node < 1:
        raise ValueError(f"nodes and gpus_per_node must be >= 1, got {nodes} and {gpus_per_node}")
    g = gpus_per_node
    return (upstream.reduce_scatter_time(g, nbytes, alpha_intra, bw_intra)
            + upstream.ring_allreduce_time(nodes * g, nbytes / g, alpha_inter, bw_inter)
            + upstream.all_gather_time(g, nbytes, alpha_intra, bw_intra))


t_flat = upstream.ring_allreduce_time(16 * 8, 1e9 / 8, 15e-6, 25e9)
t_hier = hierarchical_allreduce_time(16, 8, 1e9, 5e-6, 150e9, 15e-6, 25e9)
hier_speedup = t_flat / t_hier
t_flat_1mb = upstream.ring_allreduce_time(16 * 8, 1e6 / 8, 15e-6, 25e9)
t_hier_1mb = hierarchical_allreduce_time(16, 8, 1e6, 5e-6, 150e9, 15e-6, 25e9)
hier_speedup_1mb = t_flat_1mb / t_hier_1mb
print(f"1 GB: flat (8 channels) {t_flat * 1e3:.2f} ms, hierarchical {t_hier * 1e3:.2f} ms, speedup {hier_speedup:.2f}x")
print(f"1 MB: flat (8 channels) {t_flat_1mb * 1e3:.3f} ms, hierarchical {t_hier_1mb * 1e3:.3f} ms, speedup {hier_speedup_1mb:.2f}x")
