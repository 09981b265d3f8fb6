# loses: resume_tests
# why: the loader's generator is not restored: the next epoch is shuffled differently
def save_checkpoint(run, path):
    loader = run["loader"]
    state = {
        "model": run["model"].state_dict(),
        "optimizer": run["optimizer"].state_dict(),
        "scheduler": run["scheduler"].state_dict(),
        "loader": {"generator": loader.generator.get_state(), "epoch": loader.epoch,
                   "pos": loader.pos, "perm": loader.perm.clone()},
        "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
    }
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


def load_checkpoint(run, path):
    state = torch.load(path, weights_only=False)
    run["model"].load_state_dict(state["model"])
    run["optimizer"].load_state_dict(state["optimizer"])
    run["scheduler"].load_state_dict(state["scheduler"])
    loader = run["loader"]
    loader.epoch, loader.pos = state["loader"]["epoch"], state["loader"]["pos"]
    loader.perm = state["loader"]["perm"].clone()
    random.setstate(state["rng"]["python"])
    np.random.set_state(state["rng"]["numpy"])
    torch.set_rng_state(state["rng"]["torch"])
