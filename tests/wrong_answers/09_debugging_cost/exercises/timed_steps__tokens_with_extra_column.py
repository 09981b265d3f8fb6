# loses: timed_steps_tests
# why: counts the tokens of the (B, T+1) rows instead of the B*T predicted tokens
def timed_steps(model, opt, loader, n_steps, checkpoint_every):
    now = time.perf_counter
    records = []
    for step in range(n_steps):
        rec = {}
        t_step = now()
        t = now()
        rows = loader.next()
        x, y = rows[:, :-1], rows[:, 1:]
        rec["data"] = now() - t
        t = now()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        rec["forward"] = now() - t
        t = now()
        loss.backward()
        rec["backward"] = now() - t
        t = now()
        opt.step()
        opt.zero_grad(set_to_none=True)
        rec["optimizer"] = now() - t
        t = now()
        if (step + 1) % checkpoint_every == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, io.BytesIO())
            rec["checkpoint"] = now() - t
        else:
            rec["checkpoint"] = 0.0
        rec["step"] = now() - t_step
        rec["tokens"] = rows.numel()
        records.append(rec)
    return records, sum(r["tokens"] for r in records) / sum(r["step"] for r in records)
