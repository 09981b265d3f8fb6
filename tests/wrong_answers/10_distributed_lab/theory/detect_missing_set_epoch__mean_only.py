# loses: detect_missing_set_epoch_tests
# why: removes only each epoch's mean, not its trend within the epoch
def detect_missing_set_epoch(losses):
    a = np.asarray(losses, dtype=np.float64)
    t = np.arange(a.shape[1])
    resid = []
    for row in a:
        resid.append(row - row.mean())
    corr = [np.corrcoef(resid[e], resid[e + 1])[0, 1] for e in range(len(resid) - 1)]
    return bool(np.median(corr) > 0.6)
