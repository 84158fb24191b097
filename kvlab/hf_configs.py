"""Published Hugging Face `config.json` fields of the models in module 6's KV-memory table, as data.

`CONFIGS[name]` is a `PublishedConfig`: `config` holds the fields of the model's config.json that
bear on its shape, spelled and valued exactly as published (a student's `kv_memory` functions take
that dictionary), `n_params` the checkpoint's parameter count (for the lab's closing question:
what else fits beside the weights), and `source` where both come from. There is deliberately no
byte formula here: computing KV bytes from a config is module 6's exercise.

Notes on the fields: Qwen2.5's files have no `head_dim` (it is hidden_size // num_attention_heads);
DeepSeek-V3's lists `num_key_value_heads` 128, which its multi-head latent attention never caches
(it caches `kv_lora_rank` + `qk_rope_head_dim` values per layer and token instead).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

_HF = "https://huggingface.co/{}/blob/main/config.json"


@dataclass(frozen=True)
class PublishedConfig:
    """One model: its config.json fields (read-only), parameter count, and source."""

    name: str
    config: Mapping[str, Any]
    n_params: int
    source: str

    def as_dict(self) -> dict[str, Any]:
        """A fresh, mutable copy of the config fields (what `kv_memory` functions take)."""
        return dict(self.config)


def _published(name: str, n_params: int, source: str, **fields: Any) -> PublishedConfig:
    return PublishedConfig(name, MappingProxyType(fields), n_params, source)


# Parameter counts: Qwen2.5's from each checkpoint's model.safetensors.index.json total_size / 2
# bytes (the same figures as kvlab.specs.MODELS); DeepSeek-V3's from its technical report.
CONFIGS: dict[str, PublishedConfig] = {
    spec.name: spec
    for spec in (
        _published(
            "Qwen2.5-0.5B", 494_032_768, _HF.format("Qwen/Qwen2.5-0.5B"),
            architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=896,
            intermediate_size=4864, num_attention_heads=14, num_hidden_layers=24, num_key_value_heads=2,
            max_position_embeddings=32768, vocab_size=151936, tie_word_embeddings=True,
            torch_dtype="bfloat16", rope_theta=1000000.0, rms_norm_eps=1e-06,
        ),
        _published(
            "Qwen2.5-7B", 7_615_616_512, _HF.format("Qwen/Qwen2.5-7B"),
            architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=3584,
            intermediate_size=18944, num_attention_heads=28, num_hidden_layers=28, num_key_value_heads=4,
            max_position_embeddings=131072, vocab_size=152064, tie_word_embeddings=False,
            torch_dtype="bfloat16", rope_theta=1000000.0, rms_norm_eps=1e-06,
        ),
        _published(
            "Qwen2.5-72B", 72_706_203_648, _HF.format("Qwen/Qwen2.5-72B"),
            architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=8192,
            intermediate_size=29568, num_attention_heads=64, num_hidden_layers=80, num_key_value_heads=8,
            max_position_embeddings=131072, vocab_size=152064, tie_word_embeddings=False,
            torch_dtype="bfloat16", rope_theta=1000000.0, rms_norm_eps=1e-05,
        ),
        _published(
            "DeepSeek-V3", 671_000_000_000,
            _HF.format("deepseek-ai/DeepSeek-V3") + "; 671B parameters (37B activated per token, without "
            "the multi-token-prediction module) from the DeepSeek-V3 technical report, arXiv 2412.19437",
            architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", hidden_size=7168,
            intermediate_size=18432, moe_intermediate_size=2048, num_attention_heads=128,
            num_hidden_layers=61, num_key_value_heads=128, q_lora_rank=1536, kv_lora_rank=512,
            qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, n_routed_experts=256,
            n_shared_experts=1, num_experts_per_tok=8, first_k_dense_replace=3,
            max_position_embeddings=163840, vocab_size=129280, tie_word_embeddings=False,
            torch_dtype="bfloat16", rope_theta=10000,
        ),
    )
}

# The lab's table: these sequence lengths and batch sizes, FP16 (2 bytes per value).
LAB_SEQ_LENS = (2048, 4096, 8192, 32768)
LAB_BATCHES = (1, 8)
# How the lab computes DeepSeek-V3: as if it were GQA with 61 layers of 8 KV heads of 128.
LAB_DEEPSEEK_AS_GQA = {"num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
                       "num_key_value_heads": 8, "head_dim": 128}
