"""Everything that talks to a model: the litellm adapter (`provider`, the only importer of
litellm), the gateway's policy over it (cache, retries, budget, batches), and the embedded
default model it serves as the `local/` provider."""

from abtest.llm.budget import Budget, BudgetExceeded
from abtest.llm.gateway import Gateway, GatewayStats, ModelDriftError, ProviderUnreachable
from abtest.llm.provider import (LOCAL_PREFIX, LLMResult, call_hash, canonical_hash, check_credentials,
                       count_tokens, embed, estimate_cost, preload, provider_keys_missing,
                       register_scripted_provider, rerank)

__all__ = ["Budget", "BudgetExceeded", "LOCAL_PREFIX", "Gateway", "GatewayStats", "LLMResult",
           "ModelDriftError", "ProviderUnreachable", "call_hash", "canonical_hash",
           "check_credentials", "count_tokens", "embed", "estimate_cost", "preload",
           "provider_keys_missing", "register_scripted_provider", "rerank"]
