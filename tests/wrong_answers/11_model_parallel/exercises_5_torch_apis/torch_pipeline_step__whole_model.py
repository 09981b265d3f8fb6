# loses: pipeline_tests
# why: the shortcut: every rank runs the whole model on every micro-batch, no pipeline at all
def torch_pipeline_step(model, x, target, loss_fn, n_microbatches, schedule):
    if schedule not in ("gpipe", "1f1b"):
        raise ValueError(f"schedule must be 'gpipe' or '1f1b', got {schedule!r}")
    losses = []
    for xb, tb in zip(x.chunk(n_microbatches), target.chunk(n_microbatches)):
        loss = loss_fn(model(xb), tb)
        (loss / n_microbatches).backward()
        losses.append(float(loss.detach()))
    return losses if dist.get_rank() == dist.get_world_size() - 1 else []
