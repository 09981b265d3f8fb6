# loses: ch26_01_c_tests
# why: the hierarchical scheme forgets the intra-node all-gather
from solutions_lib import upstream

t_64_ib = upstream.ring_allreduce_time(64, GRAD_BYTES / 8, ALPHA, 12.5e9)
frac_64_ib = t_64_ib / STEP
t_64_one_nic = upstream.ring_allreduce_time(64, GRAD_BYTES, ALPHA, 12.5e9)
gpn = 8   # GPUs per node
t_rs = (gpn - 1) * ALPHA + (gpn - 1) / gpn * GRAD_BYTES / 50e9
t_64_hier = t_rs + upstream.ring_allreduce_time(8, GRAD_BYTES / gpn, ALPHA, 12.5e9)
frac_64_hier = t_64_hier / STEP
print(f"64 GPUs, flat ring, 8 channels:    {t_64_ib * 1e3:.2f} ms = {frac_64_ib:.2%} of the step")
print(f"64 GPUs, flat ring, one card/node: {t_64_one_nic * 1e3:.2f} ms")
print(f"64 GPUs, hierarchical:             {t_64_hier * 1e3:.2f} ms = {frac_64_hier:.2%} of the step")
