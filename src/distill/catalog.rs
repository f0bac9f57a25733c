//! The eight phases every bundle has, whatever the trajectory recorded: directory
//! names, titles and the purpose each phase serves. The order and the names mirror
//! the published reference skill system (shared/reference/skill-system.md §2); the
//! wording is ours.

use skillc_runtime::ops::{Metric, OpKind};
use skillc_runtime::phase::DeployPhase;

/// Fixed facts about one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseSpec {
    pub index: DeployPhase,
    /// Agent Skills directory name.
    pub name: &'static str,
    pub title: &'static str,
    /// What the phase establishes, for the SKILL.md purpose and description.
    pub purpose: &'static str,
    /// How to carry the phase out on any model: the rules the recorded steps
    /// instantiate (Llama-3.2-1B's values go to the worked example).
    pub rules: &'static [&'static str],
    /// The checks that decide whether the phase succeeded, as (operation, metric):
    /// only a passing observation of one of these becomes an exit gate. Notes,
    /// ablation cells, one call's time and structure counts are not exit criteria.
    pub exit_criteria: &'static [(OpKind, Metric)],
}

pub const PHASES: [PhaseSpec; 8] = [
    PhaseSpec {
        index: DeployPhase::Reference,
        name: "phase-0-build-cpu-reference",
        title: "Build the CPU reference",
        purpose: "Load the model's configuration and weights, refuse architectures outside \
                  scope, and build the f32 CPU reference that every later gate compares against.",
        rules: &[
            "Read `config.json`: `num_hidden_layers`, `hidden_size`, `num_attention_heads`, `num_key_value_heads` (absent: equal to the heads, MHA), `head_dim` (absent: `hidden_size / num_attention_heads`), `intermediate_size`, `vocab_size`, `rope_theta` (absent: 10000), `rope_scaling`, `tie_word_embeddings` (true: no separate `lm_head.weight`). Do not assume a default the config states otherwise.",
            "Refuse the model before anything else when it is out of scope: mixture of experts, multi-head latent attention, encoder-decoder, or an attention or MLP variant the kernels do not implement; say which feature and why. QKV bias and per-head Q/K norm are in scope (phase 2 adds them around the kernels).",
            "The gate of the phase: every layer's weights load with the shapes the config implies, and the reference runs the canonical prompt with no NaN, a sane top-1 and config fields equal to `config.json`.",
        ],
        exit_criteria: &[
            (OpKind::CheckScope, Metric::Blockers),
            (OpKind::LoadWeights, Metric::NanCount),
            (OpKind::BuildReference, Metric::NanCount),
            (OpKind::BuildReference, Metric::TopKAgree),
            (OpKind::CompareReference, Metric::NanCount),
            (OpKind::CompareReference, Metric::MaxRel),
            (OpKind::CompareReference, Metric::Mismatches),
        ],
    },
    PhaseSpec {
        index: DeployPhase::Kernels,
        name: "phase-1-kernel-validation",
        title: "Kernel validation",
        purpose: "Derive every kernel and shape the model needs, choose a tiling and herd for \
                  each, and prove each one element-wise against the f32 reference before it is \
                  wired into a block.",
        rules: &[
            "Derive every kernel call site from the config (per layer, prefill at `seq_len` rows, decode at one row): Q and O projections `[seq_len, hidden_size, n_heads * head_dim]` (O: K and N swapped), K and V `[seq_len, hidden_size, n_kv_heads * head_dim]`, Gate and Up `[seq_len, hidden_size, intermediate_size]`, Down `[seq_len, intermediate_size, hidden_size]`, causal FlashAttention `[seq_len, seq_len, head_dim]` with `n_heads` query and `n_kv_heads` KV heads, RMSNorm `[seq_len, hidden_size]`, RoPE over `seq_len * n_heads` query and `seq_len * n_kv_heads` key rows of `head_dim`, SiLU·mul over `seq_len * intermediate_size`, residual add over `seq_len * hidden_size`, the LM head against `vocab_size` columns (split into blocks a DMA can address); decode: one GEMV `[N, K]` per projection and per LM-head partition.",
            "For each kernel × shape, start from the kernel registry's row for the same or the nearest shape, check the shape against the constraints below before compiling, then validate element-wise against the f32 reference at the registry tolerance (rtol 1.6e-2; atol per kernel): every element within `atol + rtol * |ref|`. Trust the measured verdict over any rule.",
            "Document the herd of each: compute-bound kernels (GEMM, FlashAttention) on the full 8 × 4 array, row-parallel kernels on 8 × 1; justify anything smaller. One retry per recipe and shape, then escalate.",
        ],
        exit_criteria: &[(OpKind::ValidateKernel, Metric::Mismatches)],
    },
    PhaseSpec {
        index: DeployPhase::Block,
        name: "phase-2-single-block-validation",
        title: "Single-block validation",
        purpose: "Wire one decoder block from validated kernels and compare it with the \
                  reference, catching layout, transpose, padding and bias mistakes on one layer.",
        rules: &[
            "Prerequisites from the config, before wiring: a `hidden_size` or `intermediate_size` that is not a multiple of 1024 → pad with phantom heads inside each KV group (`pad-heads`), checked on the CPU first; QKV bias → add it on the host after RoPE, since RoPE(q + b) = RoPE(q) + RoPE(b) (`bias-after-rope`); per-head Q/K RMSNorm → a norm between the projections and RoPE (`qk-norm`).",
            "Compare layer 0 with the reference block on the canonical prompt: whole-tensor cosine at least 0.99, per-position minimum over real tokens at least 0.99 for head_dim up to 64, 0.98 at 128, 0.97 from 256 (bf16 noise grows with the square root of head_dim times K), no NaN.",
            "On a failure, bisect: swap the NPU kernels for their CPU equivalents one at a time along the block; the first swap that brings the cosine back names the boundary with the layout, transpose or dtype bug.",
        ],
        exit_criteria: &[
            (OpKind::ValidateBlock, Metric::Cosine),
            (OpKind::ValidateBlock, Metric::PositionCosineMin),
            (OpKind::ValidateBlock, Metric::NanCount),
        ],
    },
    PhaseSpec {
        index: DeployPhase::Model,
        name: "phase-3-full-model-validation",
        title: "Full-model validation",
        purpose: "Chain every block and the LM head and check greedy generation against the \
                  reference; per-layer cosines localise a failing layer but do not gate.",
        rules: &[
            "The gate is end to end: the NPU path and the reference each greedy-decode 32 tokens per prompt (2 prompts; 8 for the full set); at the first divergence each side's token must be in the other side's top 5. Per-layer cosines localise, they do not gate.",
            "Localise a failure: a cosine cliff at one layer points at a layer-indexed bug (weights or buffer keys of that layer); layer 0 already low sends you back to phase 2; verify failing while the prefill cosines are fine points at the decode path or the KV cache.",
            "Record the baselines the next phases must beat: prefill time and calls per layer, decode time per token.",
        ],
        exit_criteria: &[
            (OpKind::VerifyModel, Metric::NanCount),
            (OpKind::VerifyModel, Metric::TopKAgree),
        ],
    },
    PhaseSpec {
        index: DeployPhase::Prefill,
        name: "phase-4-prefill-optimization",
        title: "Prefill optimization",
        purpose: "Make prefill faster with the optimization skills while the full-model check \
                  keeps passing after every change; a change that breaks it is reverted.",
        rules: &[
            "Measure the phase-3 baseline first (same prompt and seq_len, 5 warm-up and 20 timed iterations). Apply one optimization skill at a time; after each, run the phase-3 verify: if it fails, revert the change and record why; keep a change only if prefill time strictly drops.",
            "Record per skill: applied, skipped or reverted, the time before and after, and whether each figure was measured or modeled.",
        ],
        exit_criteria: &[
            (OpKind::ProfilePrefill, Metric::TtftS),
            (OpKind::VerifyModel, Metric::NanCount),
            (OpKind::VerifyModel, Metric::TopKAgree),
        ],
    },
    PhaseSpec {
        index: DeployPhase::Decode,
        name: "phase-5-decode-optimization",
        title: "Decode optimization",
        purpose: "Make per-token decode faster with the optimization skills while the \
                  full-model check keeps passing after every change.",
        rules: &[
            "Same protocol as phase 4 for decode: baseline ms per token, one skill at a time, verify after each (its 32 generated tokens are what exercise the KV cache and per-token buffer reuse), keep only what strictly lowers ms per token.",
        ],
        exit_criteria: &[
            (OpKind::ProfileDecode, Metric::MsPerToken),
            (OpKind::VerifyModel, Metric::NanCount),
            (OpKind::VerifyModel, Metric::TopKAgree),
        ],
    },
    PhaseSpec {
        index: DeployPhase::Finalize,
        name: "phase-6-finalize-and-learn",
        title: "Finalize and learn",
        purpose: "Write the production plan, report and trajectory of the run, re-check the \
                  final configuration and record what was learned for the next build.",
        rules: &[
            "One clean runner: setup (weights loaded, pre-transposed and written to the device once) outside the timed region; prefill and the decode loop the only timed code, with no warm-up inside. The verify gate must call these same production functions.",
            "Re-run verify on the final configuration, print TTFT and tokens per second, and record what was learned for the next build.",
        ],
        exit_criteria: &[
            (OpKind::WriteArtifacts, Metric::Errors),
            (OpKind::WriteArtifacts, Metric::UnvalidatedKernels),
            (OpKind::WriteArtifacts, Metric::Unverified),
        ],
    },
    PhaseSpec {
        index: DeployPhase::Evaluate,
        name: "phase-7-independent-evaluator",
        title: "Independent evaluation",
        purpose: "Re-derive the verdict in a fresh process from the written artifacts alone, \
                  without trusting the earlier phases' records.",
        rules: &[
            "Start fresh and trust nothing recorded: audit the gate first (it drives the production path, compares against the reference, and its failure gives a non-zero exit), then re-run it and report measured numbers only.",
        ],
        exit_criteria: &[
            (OpKind::Evaluate, Metric::ExitCode),
            (OpKind::Evaluate, Metric::TopKAgree),
        ],
    },
];

/// The entry skill that orchestrates the phases.
pub const ENTRY_SKILL: &str = "deploy-new-llm";

/// Prefix of optimization skill directories.
pub const OPT_PREFIX: &str = "opt-";
/// Prefix of debugging skill directories.
pub const DEBUG_PREFIX: &str = "debug-";

/// The catalog's entry for `phase` (`PHASES` is in phase order, a test checks it).
pub fn phase(phase: DeployPhase) -> &'static PhaseSpec {
    &PHASES[usize::from(phase.index())]
}

#[cfg(test)]
mod tests {
    use super::PHASES;
    use skillc_runtime::phase::DeployPhase;

    #[test]
    fn the_catalog_lists_every_phase_once_in_order() {
        let indices: Vec<DeployPhase> = PHASES.iter().map(|p| p.index).collect();
        assert_eq!(indices, DeployPhase::ALL);
    }
}
