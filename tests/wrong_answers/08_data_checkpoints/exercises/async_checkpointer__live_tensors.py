# loses: async_checkpointer_tests
# why: the thread writes the live state dicts: the next optimizer steps change what is written
class AsyncCheckpointer:
    def __init__(self, directory, writer=torch.save):
        self.directory, self.writer = directory, writer
        os.makedirs(directory, exist_ok=True)
        self._thread, self._error = None, None

    def path(self, step):
        return os.path.join(self.directory, f"step_{step:06d}.pt")

    def save(self, step, model, optimizer):
        self.wait()
        snapshot = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}

        def work():
            try:
                self.writer(snapshot, self.path(step))
            except BaseException as e:  # re-raised by wait()
                self._error = e

        self._thread = threading.Thread(target=work, daemon=True)
        self._thread.start()

    def wait(self):
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def load(self, step, model, optimizer):
        self.wait()
        state = torch.load(self.path(step), weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        return state["step"]
