"""Real models (`MODELS`) and accelerators (`HARDWARE`), each figure with its source.

Model shapes come from each model's published Hugging Face `config.json` (the `source` field names
it); `n_params` is the checkpoint's parameter count (its `model.safetensors.index.json` `total_size`
divided by 2 bytes per BF16 value), which the dense models' shapes reproduce exactly (a repository
test checks that). `kv_bytes_per_token` is the published figure of the course's reference table
(shared/reference/domain.md, "KV bytes per token"), recorded as data: computing it from a model's
shape is lecture 2's exercise (`kv_bytes_per_token` in kv_decode.py), and kvlab must not hand
students that answer. Hardware figures come from NVIDIA's datasheets and architecture whitepapers.

Units: bytes, FLOP (one multiply or one add), seconds. "Dense" peak means without 2:4 structured
sparsity: NVIDIA's datasheets print the sparse figure, twice the dense one, with a footnote.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A published decoder-only model's shape.

    `d_head` is the size of one key/value head; `d_ff` the MLP's hidden size (SwiGLU: gate, up and
    down projections). `kv_bytes_per_token`: the bytes of KV cache one token occupies across all
    layers in BF16, as published (domain.md's table), not derived here. `weight_dtype_bytes`
    defaults to BF16 (2 bytes). `tied_embeddings`: the LM head reuses the embedding table.
    `qkv_bias`: the q, k, v projections carry biases (Qwen2.5). DeepSeek-V3 is the exception to the
    plain shape: multi-head latent attention (MLA, `kv_lora_rank` and `qk_rope_head_dim` set) caches
    one compressed vector per token per layer instead of separate K and V, and its MLP is a mixture
    of experts (`n_active_params` set: parameters used per token, fewer than `n_params`).
    """

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ff: int
    vocab: int
    n_params: int
    kv_bytes_per_token: int
    weight_dtype_bytes: int = 2
    tied_embeddings: bool = False
    qkv_bias: bool = False
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    n_active_params: int | None = None
    source: str

    @property
    def is_mla(self) -> bool:
        """Whether the KV cache holds MLA's compressed latent instead of per-head K and V."""
        return self.kv_lora_rank is not None

    @property
    def is_dense_llama_like(self) -> bool:
        """A Llama-style decoder (GQA attention, one SwiGLU MLP per layer): what `kvlab.costs` models."""
        return not self.is_mla and self.n_active_params is None

    @property
    def weight_bytes(self) -> int:
        """Bytes of all the weights at `weight_dtype_bytes` per parameter."""
        return self.n_params * self.weight_dtype_bytes


_HF = "https://huggingface.co/{}/blob/main/config.json"

# kv_bytes_per_token: the BF16 figures of domain.md's "KV bytes per token" table (layers, KV heads
# and head size from the same config.json files), literals on purpose (see the module docstring).
MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="Llama-3.1-8B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_head=128,
            d_ff=14336, vocab=128256, n_params=8_030_261_248, kv_bytes_per_token=131_072,
            source=_HF.format("meta-llama/Llama-3.1-8B"),
        ),
        ModelSpec(
            name="Llama-3.1-70B", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, d_head=128,
            d_ff=28672, vocab=128256, n_params=70_553_706_496, kv_bytes_per_token=327_680,
            source=_HF.format("meta-llama/Llama-3.1-70B"),
        ),
        ModelSpec(
            name="Llama-2-70B", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, d_head=128,
            d_ff=28672, vocab=32000, n_params=68_976_648_192, kv_bytes_per_token=327_680,
            source=_HF.format("meta-llama/Llama-2-70b-hf"),
        ),
        ModelSpec(
            name="Qwen2.5-0.5B", n_layers=24, d_model=896, n_heads=14, n_kv_heads=2, d_head=64,
            d_ff=4864, vocab=151936, n_params=494_032_768, kv_bytes_per_token=12_288,
            tied_embeddings=True, qkv_bias=True,
            source=_HF.format("Qwen/Qwen2.5-0.5B"),
        ),
        ModelSpec(
            name="Qwen2.5-7B", n_layers=28, d_model=3584, n_heads=28, n_kv_heads=4, d_head=128,
            d_ff=18944, vocab=152064, n_params=7_615_616_512, kv_bytes_per_token=57_344, qkv_bias=True,
            source=_HF.format("Qwen/Qwen2.5-7B"),
        ),
        ModelSpec(
            name="Qwen2.5-72B", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, d_head=128,
            d_ff=29568, vocab=152064, n_params=72_706_203_648, kv_bytes_per_token=327_680, qkv_bias=True,
            source=_HF.format("Qwen/Qwen2.5-72B"),
        ),
        # d_ff is the dense layers' intermediate_size (the first 3 layers); the other 58 layers are
        # mixtures of 256 routed experts (8 per token) plus 1 shared expert of size 2048.
        # KV: multi-head latent attention caches, per token and layer, one joint latent c_KV
        # (kv_lora_rank 512) plus the decoupled RoPE key shared by all heads (64), with no separate
        # K and V: 61 layers x 576 values x 2 bytes = 70,272. The plain per-head formula with its
        # 128 KV heads of 128 would claim about 3.8 MiB per token.
        ModelSpec(
            name="DeepSeek-V3", n_layers=61, d_model=7168, n_heads=128, n_kv_heads=128, d_head=128,
            d_ff=18432, vocab=129280, n_params=671_000_000_000, kv_bytes_per_token=70_272,
            kv_lora_rank=512, qk_rope_head_dim=64, n_active_params=37_000_000_000,
            source=(_HF.format("deepseek-ai/DeepSeek-V3") + "; parameter counts (671B total, 37B "
                    "activated per token, rounded, without the multi-token-prediction module) "
                    "from the DeepSeek-V3 technical report, arXiv 2412.19437"),
        ),
    )
}


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """An accelerator's roofline: dense BF16 peak (FLOP/s), HBM bandwidth (bytes/s) and size (bytes)."""

    name: str
    peak_flops: float
    hbm_bandwidth: float
    hbm_bytes: int
    source: str

    @property
    def ridge_point(self) -> float:
        """FLOP per byte at which compute time equals memory time; below it a kernel is memory-bound."""
        return self.peak_flops / self.hbm_bandwidth


HARDWARE: dict[str, Hardware] = {
    hw.name: hw
    for hw in (
        # 989.4 TFLOP/s dense BF16 (the datasheet's 1,979 is with sparsity), 3.35 TB/s HBM3, 80 GB:
        # ridge point about 295 FLOP/byte.
        Hardware(
            name="H100 SXM", peak_flops=989.4e12, hbm_bandwidth=3.35e12, hbm_bytes=80 * 10**9,
            source=("NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: BF16 Tensor Core 1,979 TFLOPS "
                    "with sparsity, GPU memory 80GB, bandwidth 3.35TB/s) and the NVIDIA H100 "
                    "architecture whitepaper (989.4 TFLOPS dense BF16)"),
        ),
        # The China-market A100 variant (NVLink cut to 400 GB/s); compute and memory as the A100
        # 80GB SXM: 312 TFLOP/s dense BF16, 2,039 GB/s HBM2e. Ridge point about 153 FLOP/byte.
        # Mooncake (arXiv 2407.00079) serves on A800 SXM4 80GB nodes.
        Hardware(
            name="A800 80GB", peak_flops=312e12, hbm_bandwidth=2.039e12, hbm_bytes=80 * 10**9,
            source=("NVIDIA A800 Tensor Core GPU datasheet (A800 80GB SXM: BF16 Tensor Core 312 "
                    "TFLOPS, 624 with sparsity, GPU memory 80GB HBM2e, bandwidth 2,039GB/s)"),
        ),
    )
}
