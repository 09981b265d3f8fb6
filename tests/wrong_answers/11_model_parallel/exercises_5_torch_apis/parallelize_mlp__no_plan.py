# loses: tp_plan_tests, sp_plan_tests
# why: the shortcut: nothing is parallelized, every rank keeps and runs the whole MLP
def parallelize_mlp(mlp, mesh, sequence_parallel=False):
    return mlp
