# loses: pack_documents_tests, packing_equals_per_document_tests
# why: an ordinary causal mask over the block: tokens attend to the earlier documents
def pack_documents(docs, block_size, eos_id):
    if block_size < 2:
        raise ValueError("block_size must be at least 2")
    blocks, current, used = [], [], 0
    for d, doc in enumerate(docs):
        doc = [int(t) for t in doc]
        if not doc or len(doc) + 1 > block_size:
            raise ValueError(f"document {d} is empty or longer than block_size - 1")
        if used + len(doc) + 1 > block_size:
            blocks.append(current)
            current, used = [], 0
        current.append(doc + [int(eos_id)])
        used += len(doc) + 1
    if current:
        blocks.append(current)
    n, T = len(blocks), block_size
    input_ids = torch.full((n, T), int(eos_id), dtype=torch.long)
    labels = torch.full((n, T), -100, dtype=torch.long)
    position_ids = torch.zeros((n, T), dtype=torch.long)
    attention_mask = torch.zeros((n, T, T), dtype=torch.bool)
    for b, block in enumerate(blocks):
        start = 0
        for toks in block:
            k = len(toks)
            input_ids[b, start:start + k] = torch.tensor(toks)
            labels[b, start:start + k - 1] = torch.tensor(toks[1:])
            position_ids[b, start:start + k] = torch.arange(k)
            attention_mask[b, start:start + k, :start + k] = torch.tril(torch.ones(k, start + k, dtype=torch.bool), diagonal=start)
            start += k
        for p in range(start, T):
            attention_mask[b, p, p] = True
    return {"input_ids": input_ids, "labels": labels, "position_ids": position_ids,
            "attention_mask": attention_mask, "loss_mask": labels != -100}
