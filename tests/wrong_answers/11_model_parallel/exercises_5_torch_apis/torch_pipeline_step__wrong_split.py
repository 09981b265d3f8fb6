# loses: pipeline_tests
# why: stage r takes layers [r p, (r+1) p) (p where L/p belongs): right only when L = p * p
def torch_pipeline_step(model, x, target, loss_fn, n_microbatches, schedule):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    kinds = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
    if schedule not in kinds:
        raise ValueError(f"schedule must be 'gpipe' or '1f1b', got {schedule!r}")
    rank, p = dist.get_rank(), dist.get_world_size()
    stage = PipelineStage(model[rank * p:(rank + 1) * p], rank, p, torch.device("cpu"))
    runner = kinds[schedule](stage, n_microbatches=n_microbatches, loss_fn=loss_fn)
    losses = []
    if rank == 0:
        runner.step(x)
    elif rank == p - 1:
        runner.step(target=target, losses=losses)
    else:
        runner.step()
    return [float(loss.detach()) for loss in losses]
