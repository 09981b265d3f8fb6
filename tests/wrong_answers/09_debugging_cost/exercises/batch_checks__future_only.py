# loses: mask_is_causal_tests
# why: checks only that the future is blocked, not that the diagonal and the past are allowed
def labels_shifted(inputs, targets, ignore_index=-100):
    if inputs.shape != targets.shape:
        return False
    known = targets[:, :-1] != ignore_index
    return bool(((targets[:, :-1] == inputs[:, 1:]) | ~known).all())


def mask_is_causal(mask):
    if mask.dim() != 2 or mask.shape[0] != mask.shape[1]:
        return False
    allowed = mask if mask.dtype == torch.bool else mask == 0
    T = mask.shape[0]
    i = torch.arange(T)
    return not bool((allowed & (i[None, :] > i[:, None])).any())


def padding_ok(inputs, targets, attention_mask, pad_id, ignore_index=-100, eos_id=None):
    if not (inputs.shape == targets.shape == attention_mask.shape):
        return False
    pad = (inputs == pad_id).flip(1).long().cumprod(1).flip(1).bool()   # the run of pad_id at the end
    shared = eos_id is not None and eos_id == pad_id
    if shared:                                                          # its first token is the EOS
        first = pad & ~torch.cat([torch.zeros_like(pad[:, :1]), pad[:, :-1]], 1)
        pad = pad & ~first
    if not torch.equal(attention_mask.bool(), ~pad):
        return False
    before = torch.cat([pad[:, 1:], torch.zeros_like(pad[:, :1])], 1)
    if bool((targets[pad | before] != ignore_index).any()):
        return False
    return shared or not bool((targets == pad_id).any())
