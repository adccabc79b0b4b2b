"""The scheduler defaults the plan takes when nothing sets them (vLLM's --max-num-batched-tokens
and --max-num-seqs), in one place: the serve spec and the encoder budget both read them."""

DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 256
