#!/usr/bin/env python3
"""Writes the GGUF corpus: `ok-*.gguf` controls that must load, and one file per
malformed case, each the `ok-micro` model with exactly one thing wrong.

Standard library only; deterministic. Run from anywhere: `python3 generate.py`.
Tensor data follows llama.cpp's block layouts (see runtime/src/model/quant.rs).
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# GGUF value types.
U32, I32, F32, BOOL, STRING, ARRAY, U64 = 4, 5, 6, 7, 8, 9, 10
# ggml tensor types.
T_F32, T_F16, T_Q4_0, T_Q4_1, T_Q8_0, T_Q4_K, T_BF16 = 0, 1, 2, 3, 8, 12, 30

HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM, VOCAB, LAYERS = 64, 96, 2, 1, 32, 32, 1


def string(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(kind, v):
    if kind == STRING:
        return string(v)
    if kind == ARRAY:
        inner, items = v
        return struct.pack("<IQ", inner, len(items)) + b"".join(value(inner, i) for i in items)
    fmt = {U32: "<I", I32: "<i", F32: "<f", BOOL: "<?", U64: "<Q"}[kind]
    return struct.pack(fmt, v)


def f16(x):
    return struct.pack("<e", x)


def q4_1_rows(rng, rows, cols):
    out = b""
    for _ in range(rows * cols // 32):
        d, m = rng.uniform(0.005, 0.02), rng.uniform(-0.1, 0.0)
        out += f16(d) + f16(m) + bytes(rng.randrange(256) for _ in range(16))
    return out


def q4_0_rows(rng, rows, cols):
    out = b""
    for _ in range(rows * cols // 32):
        out += f16(rng.uniform(0.005, 0.02)) + bytes(rng.randrange(256) for _ in range(16))
    return out


def q8_0_rows(rng, rows, cols):
    out = b""
    for _ in range(rows * cols // 32):
        out += f16(rng.uniform(0.001, 0.004)) + bytes(rng.randrange(256) for _ in range(32))
    return out


def f32_values(values):
    return b"".join(struct.pack("<f", v) for v in values)


def f16_rows(rng, rows, cols):
    return b"".join(f16(rng.gauss(0, 0.1)) for _ in range(rows * cols))


def bf16_rows(rng, rows, cols):
    out = b""
    for _ in range(rows * cols):
        bits = struct.unpack("<I", struct.pack("<f", rng.gauss(0, 0.1)))[0]
        out += struct.pack("<H", bits >> 16)
    return out


class Model:
    """A GGUF file as data: metadata (key, type, value) and tensors
    (name, dims fastest-first, ggml type, bytes), written in order."""

    def __init__(self, arch="llama", matrix=T_Q4_1, seed=0):
        rng = random.Random(seed)
        self.version = 3
        self.alignment = 32
        self.metadata = [
            ("general.architecture", STRING, arch),
            ("general.name", STRING, "micro"),
            (f"{arch}.block_count", U32, LAYERS),
            (f"{arch}.context_length", U32, 256),
            (f"{arch}.embedding_length", U32, HIDDEN),
            (f"{arch}.feed_forward_length", U32, FFN),
            (f"{arch}.attention.head_count", U32, HEADS),
            (f"{arch}.attention.head_count_kv", U32, KV_HEADS),
            (f"{arch}.rope.freq_base", F32, 10000.0),
            (f"{arch}.attention.layer_norm_rms_epsilon", F32, 1e-5),
            (f"{arch}.rope.dimension_count", U32, HEAD_DIM),
            (f"{arch}.vocab_size", U32, VOCAB),
            ("tokenizer.ggml.bos_token_id", U32, 1),
            ("tokenizer.ggml.eos_token_id", U32, 2),
        ]
        make = {T_Q4_1: q4_1_rows, T_Q4_0: q4_0_rows, T_F16: f16_rows, T_BF16: bf16_rows}[matrix]
        norm = lambda: f32_values(1.0 + rng.gauss(0, 0.1) for _ in range(HIDDEN))
        q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
        self.tensors = [("token_embd.weight", [HIDDEN, VOCAB], T_Q8_0, q8_0_rows(rng, VOCAB, HIDDEN))]
        for i in range(LAYERS):
            p = f"blk.{i}."
            self.tensors += [
                (p + "attn_norm.weight", [HIDDEN], T_F32, norm()),
                (p + "attn_q.weight", [HIDDEN, q], matrix, make(rng, q, HIDDEN)),
                (p + "attn_k.weight", [HIDDEN, kv], matrix, make(rng, kv, HIDDEN)),
                (p + "attn_v.weight", [HIDDEN, kv], matrix, make(rng, kv, HIDDEN)),
                (p + "attn_output.weight", [q, HIDDEN], matrix, make(rng, HIDDEN, q)),
                (p + "ffn_norm.weight", [HIDDEN], T_F32, norm()),
                (p + "ffn_gate.weight", [HIDDEN, FFN], matrix, make(rng, FFN, HIDDEN)),
                (p + "ffn_up.weight", [HIDDEN, FFN], matrix, make(rng, FFN, HIDDEN)),
                (p + "ffn_down.weight", [FFN, HIDDEN], matrix, make(rng, HIDDEN, FFN)),
            ]
            if arch == "qwen2":
                for name, n in (("attn_q.bias", q), ("attn_k.bias", kv), ("attn_v.bias", kv)):
                    self.tensors.append((p + name, [n], T_F32, f32_values(rng.gauss(0, 0.1) for _ in range(n))))
        self.tensors.append(("output_norm.weight", [HIDDEN], T_F32, norm()))
        # Optional overrides of the written layout (the malformed cases).
        self.offsets = {}
        self.dims_count = {}
        self.raw_types = {}
        self.key_bytes = {}
        self.magic = b"GGUF"
        self.tensor_count = None
        self.kv_count = None

    def set(self, key, kind, v):
        self.metadata = [(k, t, x) if k != key else (key, kind, v) for k, t, x in self.metadata]
        if key not in [k for k, _, _ in self.metadata]:
            self.metadata.append((key, kind, v))

    def drop(self, key):
        self.metadata = [m for m in self.metadata if m[0] != key]

    def drop_tensor(self, name):
        self.tensors = [t for t in self.tensors if t[0] != name]

    def tensor(self, name):
        return next(i for i, t in enumerate(self.tensors) if t[0] == name)

    def layout(self):
        """Offsets of each tensor in the data section (aligned, in order)."""
        offsets, at = [], 0
        for name, _, _, data in self.tensors:
            offsets.append(self.offsets.get(name, at))
            at += (len(data) + self.alignment - 1) // self.alignment * self.alignment
        return offsets

    def write(self):
        out = self.magic + struct.pack("<I", self.version)
        out += struct.pack("<Q", len(self.tensors) if self.tensor_count is None else self.tensor_count)
        out += struct.pack("<Q", len(self.metadata) if self.kv_count is None else self.kv_count)
        for key, kind, v in self.metadata:
            out += self.key_bytes.get(key, string(key)) + struct.pack("<I", kind) + value(kind, v)
        offsets = self.layout()
        for (name, dims, kind, _), offset in zip(self.tensors, offsets):
            out += string(name) + struct.pack("<I", self.dims_count.get(name, len(dims)))
            out += b"".join(struct.pack("<Q", d) for d in dims)
            out += struct.pack("<I", self.raw_types.get(name, kind)) + struct.pack("<Q", offset)
        out += b"\0" * (-len(out) % self.alignment)
        data = bytearray()
        for (_, _, _, blob), offset in zip(self.tensors, offsets):
            end = offset + len(blob)
            if offset > 1 << 24:  # a lying offset: its data is nowhere
                continue
            if len(data) < end:
                data += b"\0" * (end - len(data))
            data[offset:end] = blob
            data += b"\0" * (-len(data) % self.alignment)
        return out + bytes(data)


def case(name, model=None, raw=None):
    path = os.path.join(HERE, name + ".gguf")
    with open(path, "wb") as f:
        f.write(raw if raw is not None else model.write())


def mutated(change):
    m = Model()
    change(m)
    return m


def main():
    for old in os.listdir(HERE):
        if old.endswith(".gguf"):
            os.remove(os.path.join(HERE, old))
    ok = Model().write()
    case("ok-micro", Model())
    case("ok-qwen2-f16", Model(arch="qwen2", matrix=T_F16, seed=1))
    case("ok-q4_0", Model(matrix=T_Q4_0, seed=2))
    case("ok-bf16", Model(matrix=T_BF16, seed=3))

    case("truncated-header", raw=ok[:20])
    case("truncated-data", raw=ok[:-100])
    case("bad-magic", mutated(lambda m: setattr(m, "magic", b"GGML")))
    case("version-1", mutated(lambda m: setattr(m, "version", 1)))
    case("version-4", mutated(lambda m: setattr(m, "version", 4)))
    case("tensor-count-past-end", mutated(lambda m: setattr(m, "tensor_count", 1 << 40)))
    case("metadata-count-past-end", mutated(lambda m: setattr(m, "kv_count", 1 << 62)))
    case("string-length-past-end", mutated(
        lambda m: m.key_bytes.update({"general.name": struct.pack("<Q", 1 << 50) + b"general.name"})))
    case("array-count-past-end", raw=array_count_past_end())
    case("key-not-utf8", mutated(lambda m: m.key_bytes.update({"general.name": string(b"general.\xff\xfe")})))
    case("unknown-value-type", raw=unknown_value_type())
    case("nested-arrays", mutated(lambda m: m.set("general.tags", ARRAY, (ARRAY, [(ARRAY, [(ARRAY, [(ARRAY, [(U32, [1])])])])]))))
    case("duplicate-key", mutated(lambda m: m.metadata.append(("general.name", STRING, "again"))))
    case("duplicate-tensor", mutated(lambda m: m.tensors.append(m.tensors[1])))
    case("alignment-not-power-of-two", mutated(lambda m: m.set("general.alignment", U32, 24)))
    case("overlapping-tensors", mutated(
        lambda m: m.offsets.update({"blk.0.attn_q.weight": m.layout()[m.tensor("blk.0.attn_norm.weight")]})))
    case("misaligned-data", mutated(lambda m: m.offsets.update({"output_norm.weight": m.layout()[-1] + 4})))
    case("offset-past-end", mutated(lambda m: m.offsets.update({"output_norm.weight": 1 << 40})))
    case("unknown-type", mutated(lambda m: m.raw_types.update({"blk.0.ffn_up.weight": 99})))
    case("unsupported-type-q4_k", mutated(lambda m: m.raw_types.update({"blk.0.ffn_up.weight": T_Q4_K})))
    case("shape-overflow", mutated(lambda m: replace_dims(m, "blk.0.ffn_up.weight", [1 << 40, 1 << 40])))
    case("zero-dimension", mutated(lambda m: replace_dims(m, "blk.0.ffn_up.weight", [HIDDEN, 0])))
    case("too-many-dimensions", mutated(lambda m: replace_dims(m, "blk.0.ffn_up.weight", [HIDDEN, FFN, 1, 1, 1])))
    case("row-not-whole-blocks", mutated(lambda m: replace_dims(m, "blk.0.ffn_up.weight", [48, 2 * FFN])))
    case("missing-key-block-count", mutated(lambda m: m.drop("llama.block_count")))
    case("missing-key-architecture", mutated(lambda m: m.drop("general.architecture")))
    case("key-wrong-type", mutated(lambda m: m.set("llama.embedding_length", STRING, "64")))
    case("heads-not-dividing", mutated(lambda m: m.set("llama.attention.head_count_kv", U32, 3)))
    case("unsupported-architecture", mutated(lambda m: m.set("general.architecture", STRING, "gpt2")))
    case("partial-rotary", mutated(lambda m: m.set("llama.rope.dimension_count", U32, 16)))
    case("rope-freqs-tensor", mutated(
        lambda m: m.tensors.append(("rope_freqs.weight", [HEAD_DIM // 2], T_F32, f32_values([1.0] * (HEAD_DIM // 2))))))
    case("missing-tensor", mutated(lambda m: m.drop_tensor("blk.0.ffn_up.weight")))
    case("transposed-tensor", mutated(lambda m: replace_dims(m, "blk.0.ffn_up.weight", [FFN, HIDDEN])))
    case("nan-scale", mutated(nan_scale))
    # Issue 27: values the config checks cannot see, and counts that disagree.
    case("nan-rope-base", mutated(lambda m: m.set("llama.rope.freq_base", F32, float("nan"))))
    case("inf-epsilon", mutated(lambda m: m.set("llama.attention.layer_norm_rms_epsilon", F32, float("inf"))))
    case("more-blocks-than-declared", mutated(extra_block))
    case("unused-tensor", mutated(
        lambda m: m.tensors.append(("blk.0.attn_extra.weight", [HIDDEN], T_F32, f32_values([1.0] * HIDDEN)))))
    case("bos-outside-vocab", mutated(lambda m: m.set("tokenizer.ggml.bos_token_id", U32, 1_000_000_000)))
    case("eos-outside-vocab", mutated(lambda m: m.set("tokenizer.ggml.eos_token_id", U32, VOCAB)))
    case("tokens-fewer-than-vocab", mutated(
        lambda m: m.set("tokenizer.ggml.tokens", ARRAY, (STRING, [f"t{i}" for i in range(3)]))))


def replace_dims(m, name, dims):
    i = m.tensor(name)
    n, _, kind, data = m.tensors[i]
    m.tensors[i] = (n, dims, kind, data)


def extra_block(m):
    """blk.1.* tensors (a copy of blk.0's) in a file declaring one block."""
    copies = [(n.replace("blk.0.", "blk.1."), d, k, b) for n, d, k, b in m.tensors if n.startswith("blk.0.")]
    at = m.tensor("output_norm.weight")
    m.tensors[at:at] = copies


def nan_scale(m):
    i = m.tensor("blk.0.ffn_down.weight")
    n, dims, kind, data = m.tensors[i]
    m.tensors[i] = (n, dims, kind, f16(float("nan")) + data[2:])


def array_count_past_end():
    m = Model()
    m.set("tokenizer.ggml.tokens", ARRAY, (STRING, ["a", "b"]))
    blob = m.write()
    marker = value(ARRAY, (STRING, ["a", "b"]))
    at = blob.index(marker)
    return blob[:at + 4] + struct.pack("<Q", 1 << 58) + blob[at + 12:]


def unknown_value_type():
    m = Model()
    blob = m.write()
    key = string("general.name")
    at = blob.index(key) + len(key)
    return blob[:at] + struct.pack("<I", 77) + blob[at + 4:]


if __name__ == "__main__":
    main()
