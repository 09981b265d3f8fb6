# loses: detect_missing_set_epoch_tests
# why: correlates the raw losses of consecutive epochs: the common downward trend alone raises the alarm
def detect_missing_set_epoch(losses):
    a = np.asarray(losses, dtype=np.float64)
    t = np.arange(a.shape[1])
    resid = []
    for row in a:
        resid.append(row)
    corr = [np.corrcoef(resid[e], resid[e + 1])[0, 1] for e in range(len(resid) - 1)]
    return bool(np.median(corr) > 0.6)
