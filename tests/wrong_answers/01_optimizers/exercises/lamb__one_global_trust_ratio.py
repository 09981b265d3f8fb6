# loses: lamb_reference_tests
# why: one trust ratio for the whole model (norms over all tensors) instead of one per tensor
class Lamb(torch.optim.Optimizer):
    """LAMB: Adam's direction plus decoupled decay, rescaled per tensor by ||w|| / ||u||."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError("lr, eps and weight_decay must be >= 0")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must lie in [0, 1), got {betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        updates = []
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for w in group["params"]:
                if w.grad is None:
                    continue
                state = self.state[w]
                if not state:
                    state["t"] = 0
                    state["m"] = torch.zeros_like(w)
                    state["v"] = torch.zeros_like(w)
                state["t"] += 1
                t, m, v, g = state["t"], state["m"], state["v"], w.grad
                m.mul_(beta1).add_((1 - beta1) * g)
                v.mul_(beta2).add_((1 - beta2) * g * g)
                u = (m / (1 - beta1**t)) / ((v / (1 - beta2**t)).sqrt() + group["eps"]) + group["weight_decay"] * w
                updates.append((w, u, group["lr"]))
        w_norm = math.sqrt(sum(float(w.norm()) ** 2 for w, _, _ in updates))
        u_norm = math.sqrt(sum(float(u.norm()) ** 2 for _, u, _ in updates))
        r = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        for w, u, lr in updates:
            w.add_(u, alpha=-lr * r)
        return loss
