"""Teacher forcing: the baseline's own answers scored, position by position, under another
server, so two setups are compared on the same tokens (token divergence, KL).

- method.py: which method a server offers, probed once before any item is sent
- plan.py: which baseline items are forced, and the job each becomes
- item.py: one forced item's exchange, whatever the method, ending in one record shape
- decoding.py (llama-server), prompt_logprobs.py (vLLM), sglang.py: one module per server
  method; the echo method (the embedded engine, legacy completions) is one client request
- scores.py: the scored position every method's reply becomes
- token_ids.py: the prompt's and the answer's token ids, from the server's own tokenizer
- idle_slots.py: whether llama-server copies idle slots' caches at every task start
"""
