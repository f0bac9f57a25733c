#!/usr/bin/env python3
"""Writes the malformed-input corpus: one directory per case, each a model
directory (config.json, maybe weights) with exactly one thing wrong.

Standard library only. Run from this directory: `python3 generate.py`.
The control case `ok-micro` is the valid model every weights case mutates.
"""
import json
import os
import random
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

MICRO = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 1,
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 4,
    "vocab_size": 16,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}

SHAPES = [
    ("model.embed_tokens.weight", [16, 8]),
    ("model.layers.0.input_layernorm.weight", [8]),
    ("model.layers.0.mlp.down_proj.weight", [8, 16]),
    ("model.layers.0.mlp.gate_proj.weight", [16, 8]),
    ("model.layers.0.mlp.up_proj.weight", [16, 8]),
    ("model.layers.0.post_attention_layernorm.weight", [8]),
    ("model.layers.0.self_attn.k_proj.weight", [4, 8]),
    ("model.layers.0.self_attn.o_proj.weight", [8, 8]),
    ("model.layers.0.self_attn.q_proj.weight", [8, 8]),
    ("model.layers.0.self_attn.v_proj.weight", [4, 8]),
    ("model.norm.weight", [8]),
]


def bf16(x):
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return struct.pack("<H", (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)


def tensors(rng):
    out = {}
    for name, shape in SHAPES:
        n = 1
        for d in shape:
            n *= d
        out[name] = ("BF16", shape, b"".join(bf16(rng.gauss(0, 0.3)) for _ in range(n)))
    return out


def bf16_values(raw):
    return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]


def widened(entries):
    """q_proj as F32 and k_proj as F16, every value unchanged."""
    out = dict(entries)
    name = "model.layers.0.self_attn.q_proj.weight"
    _, shape, raw = entries[name]
    out[name] = ("F32", shape, b"".join(struct.pack("<f", v) for v in bf16_values(raw)))
    name = "model.layers.0.self_attn.k_proj.weight"
    _, shape, raw = entries[name]
    values = bf16_values(raw)
    half = b"".join(struct.pack("<e", v) for v in values)
    assert [struct.unpack("<e", half[i:i + 2])[0] for i in range(0, len(half), 2)] == values
    out[name] = ("F16", shape, half)
    return out


def serialize(entries, header_patch=None, pad=True):
    """entries: name -> (dtype, shape, bytes). header_patch edits the header dict."""
    header, offset, data = {"__metadata__": {"format": "pt"}}, 0, b""
    for name, (dtype, shape, raw) in entries.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    if header_patch:
        header_patch(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def case(name, config=MICRO, files=None, raw_config=None):
    path = os.path.join(HERE, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        f.write(raw_config if raw_config is not None else json.dumps(config, indent=2) + "\n")
    for file_name, content in (files or {}).items():
        mode = "w" if isinstance(content, str) else "wb"
        with open(os.path.join(path, file_name), mode) as f:
            f.write(content)


def with_config(**changes):
    config = dict(MICRO)
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def main():
    rng = random.Random(0)
    good = tensors(rng)
    ok = serialize(good)

    # The control: must load.
    case("ok-micro", files={"model.safetensors": ok})
    # The same values stored as F32 and F16 (exact for these values): must
    # load to the very same bf16 bits.
    case("ok-mixed-dtypes", files={"model.safetensors": serialize(widened(good))})

    # Configs.
    case("config-moe", with_config(model_type="qwen2_moe", num_experts=60, num_experts_per_tok=4))
    case("config-mla", with_config(model_type="deepseek_v3", kv_lora_rank=512, q_lora_rank=1536))
    case("config-encoder-decoder", with_config(model_type="t5", is_encoder_decoder=True))
    case("config-partial-rotary", with_config(model_type="phi3", partial_rotary_factor=0.5))
    case("config-logit-softcapping", with_config(model_type="gemma3_text", final_logit_softcapping=30.0))
    case("config-multimodal", with_config(model_type="gemma3", text_config={"hidden_size": 8}))
    case("config-quantized", with_config(quantization_config={"quant_method": "awq", "bits": 4}))
    case("config-unknown-model-type", with_config(model_type="mamba"))
    case("config-unknown-activation", with_config(hidden_act="relu2"))
    case("config-heads-not-dividing", with_config(num_key_value_heads=3, num_attention_heads=4))
    case("config-hidden-not-divisible", with_config(head_dim=None, hidden_size=10, num_attention_heads=4, num_key_value_heads=2))
    case("config-zero-layers", with_config(num_hidden_layers=0))
    case("config-absurd-vocab", with_config(vocab_size=10**12))
    case("config-odd-head-dim", with_config(head_dim=5))
    case("config-missing-hidden-size", with_config(hidden_size=None))
    case("config-wrong-type", with_config(hidden_size="8"))
    case("config-negative-eps", with_config(rms_norm_eps=-1e-5))
    case("config-yarn-rope", with_config(rope_scaling={"rope_type": "yarn", "factor": 4.0}))
    case("config-llama3-missing-factor", with_config(rope_scaling={
        "rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}))
    case("config-layer-types-length", with_config(layer_types=["full_attention", "full_attention"]))
    case("config-unknown-dtype", with_config(torch_dtype="float8_e4m3fn"))
    case("config-truncated-json", raw_config=json.dumps(MICRO, indent=2)[:200])
    case("config-not-an-object", raw_config="[1, 2, 3]\n")

    # Weights.
    case("weights-truncated-data", files={"model.safetensors": ok[:-100]})
    case("weights-truncated-header", files={"model.safetensors": ok[:40]})
    case("weights-too-short", files={"model.safetensors": ok[:5]})
    case("weights-trailing-bytes", files={"model.safetensors": ok + b"\0" * 16})
    case("weights-header-length-huge", files={"model.safetensors": struct.pack("<Q", 1 << 60) + ok[8:]})

    def overlap(h):
        h["model.layers.0.self_attn.q_proj.weight"]["data_offsets"][0] -= 64
    case("weights-lying-offsets", files={"model.safetensors": serialize(good, overlap)})

    def wrong_span(h):
        h["model.norm.weight"]["shape"] = [9]
    case("weights-span-disagrees-with-shape", files={"model.safetensors": serialize(good, wrong_span)})

    def huge(h):
        h["model.norm.weight"]["shape"] = [1 << 40, 1 << 40]
    case("weights-huge-declared-shape", files={"model.safetensors": serialize(good, huge)})

    def unknown_dtype(h):
        h["model.norm.weight"]["dtype"] = "BF8"
    case("weights-unknown-dtype", files={"model.safetensors": serialize(good, unknown_dtype)})

    not_json = ok[:8] + b"{" + b"x" * (struct.unpack("<Q", ok[:8])[0] - 1) + ok[8 + struct.unpack("<Q", ok[:8])[0]:]
    case("weights-header-not-json", files={"model.safetensors": not_json})

    wrong_dtype = dict(good)
    name, (_, shape, raw) = "model.layers.0.self_attn.q_proj.weight", good["model.layers.0.self_attn.q_proj.weight"]
    wrong_dtype[name] = ("I16", shape, raw)
    case("weights-wrong-dtype", files={"model.safetensors": serialize(wrong_dtype)})

    missing = {k: v for k, v in good.items() if k != "model.layers.0.self_attn.v_proj.weight"}
    case("weights-missing-tensor", files={"model.safetensors": serialize(missing)})

    transposed = dict(good)
    _, shape, raw = good["model.layers.0.mlp.down_proj.weight"]
    transposed["model.layers.0.mlp.down_proj.weight"] = ("BF16", [16, 8], raw)
    case("weights-shape-mismatch", files={"model.safetensors": serialize(transposed)})

    nan = dict(good)
    _, shape, raw = good["model.layers.0.mlp.up_proj.weight"]
    nan["model.layers.0.mlp.up_proj.weight"] = ("BF16", shape, b"\xc0\x7f" * (len(raw) // 2))
    case("weights-nan-filled", files={"model.safetensors": serialize(nan)})

    first = {k: v for i, (k, v) in enumerate(good.items()) if i < 5}
    second = {k: v for i, (k, v) in enumerate(good.items()) if i >= 5}
    index = {"metadata": {"total_size": 0}, "weight_map": {}}
    for k in first:
        index["weight_map"][k] = "model-00001-of-00002.safetensors"
    for k in second:
        index["weight_map"][k] = "model-00002-of-00002.safetensors"
    case("weights-shard-missing-file", files={
        "model.safetensors.index.json": json.dumps(index, indent=2),
        "model-00001-of-00002.safetensors": serialize(first)})
    case("ok-sharded", files={
        "model.safetensors.index.json": json.dumps(index, indent=2),
        "model-00001-of-00002.safetensors": serialize(first),
        "model-00002-of-00002.safetensors": serialize(second)})
    traversal = json.loads(json.dumps(index))
    traversal["weight_map"]["model.norm.weight"] = "../../escape.safetensors"
    case("weights-index-path-traversal", files={
        "model.safetensors.index.json": json.dumps(traversal, indent=2),
        "model-00001-of-00002.safetensors": serialize(first),
        "model-00002-of-00002.safetensors": serialize(second)})
    misplaced = json.loads(json.dumps(index))
    misplaced["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors"
    case("weights-index-wrong-shard", files={
        "model.safetensors.index.json": json.dumps(misplaced, indent=2),
        "model-00001-of-00002.safetensors": serialize(first),
        "model-00002-of-00002.safetensors": serialize(second)})
    case("weights-several-files-no-index", files={
        "a.safetensors": serialize(first), "b.safetensors": serialize(second)})
    case("weights-none", files={})


if __name__ == "__main__":
    main()
