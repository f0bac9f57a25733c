//! A 4-bit GGUF written inside the test from a transformers fixture
//! (`shared/fixtures/smollm2-tiny`, bf16 weights): its attention matrices
//! quantized to Q4_1 (q, k) and Q4_0 (v, o), its FFN to Q4_1, the tied
//! embedding kept as BF16 and the norms as F32, with llama.cpp's row
//! permutation of q and k applied, as its converter writes them. The file is
//! deployed on the packed path (all eight phases PASS, both block formats
//! read packed), and the CPU reference phase 0 builds on it is checked
//! against the fixture's transformers outputs within the error the
//! quantization implies. A copy written with its nibbles in the wrong order
//! exceeds that bound, so the check can fail.
//!
//! The bound: the quantized weights are W + E. A matrix product with random-like
//! inputs carries the weights' relative error `ε = ‖E‖_F / ‖W‖_F` into its output,
//! and the errors of the independently quantized matrices add in quadrature along
//! the network, so the outputs' relative error is about `√(Σ ε²)` over every
//! quantized matrix. The gate allows twice that (the residual stream and the
//! exact embedding pull the real error below it; correlated errors and the
//! softmax could push above it). `ε` is computed from the written blocks and the
//! fixture's weights, never from a model output.

use std::path::Path;

use crate::deploy_support::{deploy, fixture, llama1b, scratch, summary};
use skillc_runtime::exec::artifacts::record::{PhaseStatus, Verdict};
use skillc_runtime::model::oracle::compare::{check_all, Agreement, ReferenceTensors};
use skillc_runtime::model::source::ModelSource;
use skillc_runtime::xdna2::kernels::PackedFormat;

const FIXTURE: &str = "smollm2-tiny";
const BLOCK: usize = 32;

/// GGUF metadata value types and ggml tensor types used here.
const U32: u32 = 4;
const F32V: u32 = 6;
const STRING: u32 = 8;
const T_F32: u32 = 0;
const T_Q4_0: u32 = 2;
const T_Q4_1: u32 = 3;
const T_BF16: u32 = 30;

/// One tensor to write: GGUF name, dims fastest-first, type, bytes.
struct Tensor {
    name: String,
    dims: Vec<u64>,
    kind: u32,
    data: Vec<u8>,
}

fn f16_bits(x: f32) -> [u8; 2] {
    half::f16::from_f32(x).to_bits().to_le_bytes()
}

fn f16_value(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}

/// 32 nibbles into 16 bytes: byte j holds weight j low, weight j + 16 high
/// (`swapped` is the planted layout error).
fn pack_nibbles(q: &[u8; BLOCK], swapped: bool, out: &mut Vec<u8>) {
    for j in 0..BLOCK / 2 {
        let (lo, hi) = (q[j], q[j + BLOCK / 2]);
        let (lo, hi) = if swapped { (hi, lo) } else { (lo, hi) };
        out.push(lo | (hi << 4));
    }
}

/// Q4_1: `w = d·q + m`, q in 0..=15, d = (max − min) / 15, m = min.
/// Returns the bytes and the dequantized values.
fn q4_1(values: &[f32], swapped: bool) -> (Vec<u8>, Vec<f32>) {
    let (mut bytes, mut deq) = (Vec::new(), Vec::new());
    for block in values.chunks(BLOCK) {
        let min = block.iter().copied().fold(f32::INFINITY, f32::min);
        let max = block.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let (d, m) = (f16_value((max - min) / 15.0), f16_value(min));
        let mut q = [0u8; BLOCK];
        for (i, &v) in block.iter().enumerate() {
            q[i] = if d > 0.0 {
                ((v - m) / d).round().clamp(0.0, 15.0) as u8
            } else {
                0
            };
            deq.push(d * q[i] as f32 + m);
        }
        bytes.extend(f16_bits(d));
        bytes.extend(f16_bits(m));
        pack_nibbles(&q, swapped, &mut bytes);
    }
    (bytes, deq)
}

/// Q4_0: `w = d·(q − 8)`, d = v / −8 for the value v of largest magnitude.
fn q4_0(values: &[f32], swapped: bool) -> (Vec<u8>, Vec<f32>) {
    let (mut bytes, mut deq) = (Vec::new(), Vec::new());
    for block in values.chunks(BLOCK) {
        let extreme = block
            .iter()
            .copied()
            .fold(0.0f32, |a, v| if v.abs() > a.abs() { v } else { a });
        let d = f16_value(extreme / -8.0);
        let mut q = [0u8; BLOCK];
        for (i, &v) in block.iter().enumerate() {
            q[i] = if d != 0.0 {
                (v / d + 8.0).round().clamp(0.0, 15.0) as u8
            } else {
                8
            };
            deq.push(d * (q[i] as f32 - 8.0));
        }
        bytes.extend(f16_bits(d));
        pack_nibbles(&q, swapped, &mut bytes);
    }
    (bytes, deq)
}

/// llama.cpp's converter order of q/k rows: per head, stored row `2i + j`
/// holds logical row `j·(d/2) + i`.
fn permute_rows(values: &[f32], rows: usize, cols: usize, heads: usize) -> Vec<f32> {
    let (per_head, half) = (rows / heads, rows / heads / 2);
    let mut out = vec![0.0; values.len()];
    for r in 0..rows {
        let (head, within) = (r / per_head, r % per_head);
        let (j, i) = (within / half, within % half);
        let stored = head * per_head + 2 * i + j;
        out[stored * cols..(stored + 1) * cols].copy_from_slice(&values[r * cols..(r + 1) * cols]);
    }
    out
}

/// The fixture as GGUF tensors, and the relative quantization error of every
/// quantized matrix.
fn tensors(swapped: bool) -> (Vec<Tensor>, Vec<f64>) {
    let source = ModelSource::locate(&fixture(FIXTURE)).expect("fixture");
    let arch = source.architecture().expect("config");
    let model = source.load(arch.clone(), None).expect("weights");
    let all = model.weights.tensors();
    let get = |name: &str| {
        let t = all
            .iter()
            .find(|t| t.name() == name)
            .unwrap_or_else(|| panic!("{name} in the fixture"));
        (t.values(), t.shape().to_vec())
    };
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let (embed, shape) = get("model.embed_tokens.weight");
    out.push(Tensor {
        name: "token_embd.weight".into(),
        dims: vec![shape[1] as u64, shape[0] as u64],
        kind: T_BF16,
        data: embed
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect(),
    });
    let norm = |name: String, values: Vec<f32>| Tensor {
        name,
        dims: vec![values.len() as u64],
        kind: T_F32,
        data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    for layer in 0..arch.num_layers {
        let hf = |part: &str| format!("model.layers.{layer}.{part}");
        let gguf = |part: &str| format!("blk.{layer}.{part}");
        out.push(norm(
            gguf("attn_norm.weight"),
            get(&hf("input_layernorm.weight")).0,
        ));
        out.push(norm(
            gguf("ffn_norm.weight"),
            get(&hf("post_attention_layernorm.weight")).0,
        ));
        let matrices = [
            (
                "self_attn.q_proj",
                "attn_q",
                PackedFormat::Q4_1,
                Some(arch.num_heads),
            ),
            (
                "self_attn.k_proj",
                "attn_k",
                PackedFormat::Q4_1,
                Some(arch.num_kv_heads),
            ),
            ("self_attn.v_proj", "attn_v", PackedFormat::Q4_0, None),
            ("self_attn.o_proj", "attn_output", PackedFormat::Q4_0, None),
            ("mlp.gate_proj", "ffn_gate", PackedFormat::Q4_1, None),
            ("mlp.up_proj", "ffn_up", PackedFormat::Q4_1, None),
            ("mlp.down_proj", "ffn_down", PackedFormat::Q4_1, None),
        ];
        for (hf_name, gguf_name, format, heads) in matrices {
            let (values, shape) = get(&hf(&format!("{hf_name}.weight")));
            let (rows, cols) = (shape[0], shape[1]);
            let stored = match heads {
                Some(h) => permute_rows(&values, rows, cols, h),
                None => values,
            };
            let (data, deq, kind) = match format {
                PackedFormat::Q4_1 => {
                    let (b, d) = q4_1(&stored, swapped);
                    (b, d, T_Q4_1)
                }
                PackedFormat::Q4_0 => {
                    let (b, d) = q4_0(&stored, swapped);
                    (b, d, T_Q4_0)
                }
            };
            errors.push(relative_error(&stored, &deq));
            out.push(Tensor {
                name: gguf(&format!("{gguf_name}.weight")),
                dims: vec![cols as u64, rows as u64],
                kind,
                data,
            });
        }
    }
    out.push(norm(
        "output_norm.weight".into(),
        get("model.norm.weight").0,
    ));
    (out, errors)
}

/// ‖deq − w‖_F / ‖w‖_F.
fn relative_error(w: &[f32], deq: &[f32]) -> f64 {
    let (mut e, mut n) = (0.0f64, 0.0f64);
    for (&a, &b) in w.iter().zip(deq) {
        e += ((b - a) as f64).powi(2);
        n += (a as f64).powi(2);
    }
    (e / n).sqrt()
}

fn string(s: &str, out: &mut Vec<u8>) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// Writes a GGUF v3 file: the smollm2-tiny config as `llama.*` metadata,
/// tensors 32-byte aligned.
fn write_gguf(path: &Path, tensors: &[Tensor]) {
    let metadata: Vec<(&str, u32, f64)> = vec![
        ("llama.block_count", U32, 3.0),
        ("llama.context_length", U32, 8192.0),
        ("llama.embedding_length", U32, 128.0),
        ("llama.feed_forward_length", U32, 512.0),
        ("llama.attention.head_count", U32, 4.0),
        ("llama.attention.head_count_kv", U32, 4.0),
        ("llama.rope.freq_base", F32V, 130000.0),
        ("llama.attention.layer_norm_rms_epsilon", F32V, 1e-5),
        ("llama.rope.dimension_count", U32, 32.0),
        ("llama.vocab_size", U32, 512.0),
        ("tokenizer.ggml.bos_token_id", U32, 1.0),
        ("tokenizer.ggml.eos_token_id", U32, 2.0),
    ];
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((metadata.len() as u64 + 2).to_le_bytes());
    for (key, value) in [("general.architecture", "llama"), ("general.name", FIXTURE)] {
        string(key, &mut out);
        out.extend(STRING.to_le_bytes());
        string(value, &mut out);
    }
    for (key, kind, value) in &metadata {
        string(key, &mut out);
        out.extend(kind.to_le_bytes());
        match *kind {
            U32 => out.extend((*value as u32).to_le_bytes()),
            _ => out.extend((*value as f32).to_le_bytes()),
        }
    }
    let align = |n: usize| n.div_ceil(32) * 32;
    let mut offset = 0;
    for t in tensors {
        string(&t.name, &mut out);
        out.extend((t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            out.extend(d.to_le_bytes());
        }
        out.extend(t.kind.to_le_bytes());
        out.extend((offset as u64).to_le_bytes());
        offset += align(t.data.len());
    }
    out.resize(align(out.len()), 0);
    for t in tensors {
        out.extend(&t.data);
        out.resize(align(out.len()), 0);
    }
    std::fs::write(path, out).expect("write gguf");
}

/// The CPU reference on the GGUF's weights against the fixture's transformers
/// outputs: the worst relative tensor error over both prompts.
fn reference_error(path: &Path) -> f64 {
    let source = ModelSource::locate(path).expect("gguf");
    let model = source
        .load(source.architecture().expect("gguf config"), None)
        .expect("gguf weights");
    let reference =
        ReferenceTensors::read(&fixture(FIXTURE).join("reference.safetensors")).expect("reference");
    let checks = check_all(&model, &reference, 1.0).expect("reference runs");
    Agreement::of(&checks).worst
}

#[test]
fn a_q4_gguf_written_from_a_fixture_deploys_packed_and_matches_transformers_within_its_quantization(
) {
    let dir = scratch("gguf-fixture");
    let (written, errors) = tensors(false);
    let path = dir.join("smollm2-tiny-q4.gguf");
    write_gguf(&path, &written);
    let bound = 2.0 * errors.iter().map(|e| e * e).sum::<f64>().sqrt();
    let worst = reference_error(&path);
    eprintln!(
        "gguf-fixture: {} quantized matrices, per-matrix relative error {:.4}..{:.4}, bound {bound:.4}, CPU reference vs transformers {worst:.4}",
        errors.len(),
        errors.iter().copied().fold(f64::INFINITY, f64::min),
        errors.iter().copied().fold(0.0, f64::max)
    );
    assert!(
        worst <= bound,
        "CPU reference on the 4-bit weights vs transformers: {worst:.4} > {bound:.4}"
    );
    // The same file with its nibbles in the wrong order is far outside it.
    let swapped = dir.join("swapped.gguf");
    write_gguf(&swapped, &tensors(true).0);
    let wrong = reference_error(&swapped);
    eprintln!("gguf-fixture: swapped nibbles {wrong:.4}");
    assert!(wrong > bound, "swapped nibbles {wrong:.4} <= {bound:.4}");

    let out = dir.join("deploy");
    let r = deploy(llama1b(), &path, &out, &[]).report;
    assert_eq!(r.verdict, Verdict::Pass, "{}", summary(&r));
    assert_eq!(r.phases.len(), 8, "{}", summary(&r));
    assert!(
        r.phases.iter().all(|p| p.status == PhaseStatus::Passed),
        "{}",
        summary(&r)
    );
    let path = r.weight_path.as_ref().expect("a weight-path record");
    let formats: Vec<PackedFormat> = path.buffers.iter().filter_map(|b| b.packed).collect();
    assert!(
        formats.contains(&PackedFormat::Q4_0) && formats.contains(&PackedFormat::Q4_1),
        "{:?}",
        path.buffers
    );
}
