//! Results do not depend on the thread count: the oracle's logits (prefill
//! and cached decode) and the emulator's kernels, computed in pools of 1, 2
//! and 4 threads, are equal bit for bit. Sizes are chosen so that every
//! product is split into several tasks (`threads::MIN_TASK_WORK`); the fixture
//! deploy at 1, 2 and 4 threads is `tests/deploy_threads.rs`.

use skillc_runtime::bf16;
use skillc_runtime::model::config::parse_config;
use skillc_runtime::model::oracle::{LogitRows, Reference};
use skillc_runtime::model::Model;
use skillc_runtime::rng::SplitMix64;
use skillc_runtime::threads::MIN_TASK_WORK;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::kernels::*;

const COUNTS: [usize; 3] = [1, 2, 4];

/// `f` run in a fresh pool of each of [`COUNTS`] threads: every result.
fn at_each_count<T: Send>(f: impl Fn() -> T + Sync) -> Vec<T> {
    COUNTS
        .iter()
        .map(|&n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .expect("pool")
                .install(&f)
        })
        .collect()
}

fn assert_all_equal<T: PartialEq + std::fmt::Debug>(what: &str, results: &[T]) {
    for (n, r) in COUNTS.iter().zip(results).skip(1) {
        assert!(r == &results[0], "{what}: {n} threads differ from 1");
    }
}

fn normal(seed: u64, n: usize, scale: f32) -> Vec<u16> {
    let mut g = SplitMix64::new(seed);
    (0..n)
        .map(|_| bf16::from_f32(g.next_normal() * scale))
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn oracle_logits_are_the_same_at_1_2_and_4_threads() {
    let config = r#"{"model_type":"qwen2","num_hidden_layers":2,"hidden_size":512,
        "intermediate_size":1536,"num_attention_heads":8,"num_key_value_heads":2,
        "vocab_size":4096,"tie_word_embeddings":false}"#;
    let model = Model::random(parse_config(config).expect("config"), 5).expect("model");
    // The LM head and the MLP GEMVs are split over several tasks.
    const { assert!(4096 * 512 >= 4 * MIN_TASK_WORK && 1536 * 512 >= 2 * MIN_TASK_WORK) };
    let prompt: Vec<u32> = (0..12).map(|i| (i * 331 + 7) % 4096).collect();
    let results = at_each_count(|| {
        let mut oracle = Reference::new(&model).expect("reference");
        let prefill = oracle.prefill(&prompt, LogitRows::All).expect("prefill");
        let mut all = bits(&prefill.logits.data);
        for token in [17, 4000, 123] {
            all.extend(bits(&oracle.decode_step(token).expect("decode")));
        }
        all
    });
    assert_all_equal("oracle logits", &results);
}

#[test]
fn kernels_are_the_same_at_1_2_and_4_threads() {
    let device = Device::npu2();
    let (m, k, n) = (256, 512, 512);
    let a = normal(1, m * k, 1.0);
    let b = normal(2, n * k, 0.05);
    for precision in [Precision::Bf16, Precision::Bfp16] {
        let spec = GemmSpec::select(&device, m, k, n, precision, Dtype::Bf16);
        let out = at_each_count(|| gemm(&device, &spec, &a, BOperand::NxK(&b)).expect("gemm"));
        assert_all_equal(&format!("gemm {precision:?}"), &out);
    }
    let (rows, cols) = (2048, 512);
    let w = normal(3, rows * cols, 0.05);
    let x = normal(4, cols, 1.0);
    let spec = GemvSpec::select(&device, rows, cols, Herd::ROW);
    let out = at_each_count(|| gemv(&device, &spec, &w, &x, None).expect("gemv"));
    assert_all_equal("gemv", &out);
    let len = 4 * MIN_TASK_WORK;
    let (g, u) = (normal(5, len, 2.0), normal(6, len, 1.0));
    let spec = EltwiseSpec::select(&device, len, Herd::ROW);
    let out = at_each_count(|| silu_mul(&device, &spec, &g, &u).expect("silu_mul"));
    assert_all_equal("silu_mul", &out);
    let norm = NormSpec {
        rows: 4096,
        cols: 256,
        herd: Herd::ROW,
        weighted: false,
        real_cols: None,
    };
    let xs = normal(7, 4096 * 256, 3.0);
    let out = at_each_count(|| rms_norm(&device, &norm, 1e-6, &xs, None).expect("rmsnorm"));
    assert_all_equal("rmsnorm", &out);
}
