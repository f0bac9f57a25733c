//! Where an engineer makes each operation's change on a real NPU: the file, builder
//! argument or toolchain step of a deployment laid out as the published ones are (one
//! folder per model: `<model>_weights.py` loads and transforms the checkpoint,
//! `<model>_prefill.py` and `<model>_decode.py` build the NPU calls, `<model>_inference.py`
//! drives them and their buffers, `<model>_cpu_helpers.py` holds the host-side
//! operations, `make verify` and `make profile` check and time them, the kernel
//! registry lists validated kernel configurations). The pages say this beside an
//! operation's name, so an agent with a device knows what to edit. Matched
//! exhaustively: a new operation must say where it is done before it can be rendered.

use skillc_runtime::ops::OpKind;

/// Where `op`'s change is made in a deployment's files.
pub fn where_done(op: OpKind) -> &'static str {
    match op {
        OpKind::CheckScope => "the architecture fields of `config.json`, against what the kernels support",
        OpKind::LoadWeights => "`<model>_weights.py`, which reads the checkpoint",
        OpKind::BuildReference => "the CPU f32 forward pass every gate compares against",
        OpKind::CompareReference => "the CPU reference's logits against the transformers outputs of the same prompts",
        OpKind::RopeConvention => "the pairing of the RoPE table in `<model>_cpu_helpers.py` and the RoPE kernel's reads",
        OpKind::RopeScaling => "the inverse frequencies the RoPE table in `<model>_cpu_helpers.py` is built from (`rope_scaling` of `config.json`)",
        OpKind::EnumerateKernels => "the kernel call sites of `<model>_prefill.py` and `<model>_decode.py`",
        OpKind::SelectTiling => "the kernel's builder call (its tile, herd, layout and compile arguments) in `<model>_prefill.py` (GEMM, attention) or `<model>_decode.py` (GEMV)",
        OpKind::ValidateKernel => "the kernel's standalone test, the way the kernel registry validates a row",
        OpKind::RegisterKernel => "a row of the kernel registry for the validated configuration",
        OpKind::PadDims => "`<model>_weights.py` (zero-padded weights) and the shapes of every builder call",
        OpKind::BuildBlock => "one decoder layer's sequence of NPU calls in `<model>_prefill.py`",
        OpKind::PadHeads => "`<model>_weights.py`: phantom heads with zero weights, appended per KV group",
        OpKind::BiasAfterRope => "the attention-input call: the q/k/v bias added after RoPE (RoPE(q + b) = RoPE(q) + RoPE(b))",
        OpKind::QkNorm => "the attention-input call: a per-head RMSNorm of q and k before RoPE",
        OpKind::ValidateBlock => "one layer's calls run alone on a prompt, compared per position",
        OpKind::BuildModel => "`<model>_inference.py`, which chains every layer and the LM head",
        OpKind::VerifyModel => "`make verify`",
        OpKind::DiagnoseLayers => "each layer's output dumped and compared with the reference layer",
        OpKind::MergeLaunches | OpKind::SplitLaunches => "the multi-launch ELF builders of `<model>_prefill.py` and `<model>_decode.py`",
        OpKind::ReuseStaticWeights => "`<model>_inference.py`: each layer's weights written to buffer objects of their own once, before the timed runs",
        OpKind::MarkIntermediates => "`<model>_inference.py`: buffers the host never reads are not synced back",
        OpKind::AlignLayout => "the activation layout between calls in `<model>_prefill.py`, so no host transpose is needed",
        OpKind::LastTokenLmHead => "`<model>_inference.py`: the prefill LM head on the last row only",
        OpKind::TuneTiling => "the tile arguments of a kernel's builder call, swept against the profile",
        OpKind::ProfilePrefill => "`make profile`",
        OpKind::GemvDecode => "the projection builders of `<model>_decode.py`",
        OpKind::CpuDecodeAttention => "`<model>_cpu_helpers.py`, over the KV cache",
        OpKind::PretransposeWeights => "`<model>_weights.py`: the decode GEMV weights stored transposed once, at load",
        OpKind::PartitionLmHead => "the LM-head GEMV builder of `<model>_decode.py`",
        OpKind::CascadeFfn => "the O and FFN GEMV builders of `<model>_decode.py`",
        OpKind::FusedDecode => "one design that runs every layer's decode and the LM head in a single NPU call per token (the fused decode's builder), with the KV cache appended on the device or uploaded per call",
        OpKind::OmitPingpong => "the decode builder's `omit_pingpong` option (single-buffered GEMV weights)",
        OpKind::ProfileDecode => "`make profile N_TOKENS=…`",
        OpKind::WriteArtifacts => "the model folder's README and ARCHITECTURE.md, the registry rows and the profile",
        OpKind::RecordLessons => "the trajectory of the run, with the lessons it taught",
        OpKind::Evaluate => "a fresh process that re-runs verify and the profile from the written files only",
        OpKind::NoteHost => "the host's setup: power profile, BLAS threads, the NPU lock",
    }
}
