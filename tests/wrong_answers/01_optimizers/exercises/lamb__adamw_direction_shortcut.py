# loses: lamb_hand_tests, lamb_reference_tests, lamb_zero_norm_tests
# why: the shortcut: the Adam direction taken from a shadow torch.optim.AdamW step
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
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for w in group["params"]:
                if w.grad is None:
                    continue
                state = self.state[w]
                if not state:
                    state["shadow"] = torch.zeros_like(w, requires_grad=True)
                    state["opt"] = torch.optim.AdamW([state["shadow"]], lr=1.0, betas=(beta1, beta2), eps=group["eps"], weight_decay=group["weight_decay"])
                q = state["shadow"]
                q.copy_(w)
                q.grad = w.grad.clone()
                state["opt"].step()
                u = w - q
                w_norm, u_norm = float(w.norm()), float(u.norm())
                r = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
                w.add_(u, alpha=-group["lr"] * r)
        return loss
