# loses: pipeline_tests
# why: runs GPipe whatever the schedule asked for (1F1B's order and its memory bound are lost)
def torch_pipeline_step(model, x, target, loss_fn, n_microbatches, schedule):
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    if schedule not in ("gpipe", "1f1b"):
        raise ValueError(f"schedule must be 'gpipe' or '1f1b', got {schedule!r}")
    rank, p = dist.get_rank(), dist.get_world_size()
    L = len(model)
    stage = PipelineStage(model[rank * L // p:(rank + 1) * L // p], rank, p, torch.device("cpu"))
    runner = ScheduleGPipe(stage, n_microbatches=n_microbatches, loss_fn=loss_fn)
    losses = []
    if rank == 0:
        runner.step(x)
    elif rank == p - 1:
        runner.step(target=target, losses=losses)
    else:
        runner.step()
    return [float(loss.detach()) for loss in losses]
