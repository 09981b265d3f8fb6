# loses: save_load_state_tests
# why: the scheduler's state is not loaded: the learning rate restarts from step 0 after the resume
def save_state(path, step, model, optimizer, scheduler, batches):
    path = str(path)
    tmp = path + ".tmp"
    rank = dist.get_rank()
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
    dist.barrier()
    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=tmp)
    mine = {"step": step, "scheduler": scheduler.state_dict(), "batches": batches.state_dict(),
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}}
    if torch.cuda.is_available():
        mine["rng"]["cuda"] = torch.cuda.get_rng_state_all()
    torch.save(mine, os.path.join(tmp, f"rank{rank}.pt"))
    dist.barrier()
    if rank == 0:
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
    dist.barrier()


def load_state(path, model, optimizer, scheduler, batches):
    path = str(path)
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    mine = torch.load(os.path.join(path, f"rank{dist.get_rank()}.pt"), weights_only=False)
    batches.load_state_dict(mine["batches"])
    torch.set_rng_state(mine["rng"]["torch"])
    random.setstate(mine["rng"]["python"])
    np.random.set_state(mine["rng"]["numpy"])
    if "cuda" in mine["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(mine["rng"]["cuda"])
    return mine["step"]
