# the package's public names, as torchtune/modules/__init__.py re-exports them
from attention import MultiHeadAttention  # noqa: F401
from kv_cache import KVCache  # noqa: F401
from transformer import TransformerDecoder, TransformerSelfAttentionLayer  # noqa: F401
