//! The deployment the executor is shaping: the builder's plan structure for this
//! model under the current optimization switches, with the kernel configurations
//! phase 1 chose, and the NPU-path choices. Fixes from lessons and optimizations
//! from the bundle change a `Design`; the plans are rebuilt from it, never edited
//! by hand, so what is verified is exactly what `plan.json` holds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::artifacts::record::ModeledTimes;
use crate::bundle::Value;
use crate::model::arch::Architecture;
use crate::ops::OpKind;
use crate::xdna2::builder::{plan_for, Optimization};
use crate::xdna2::cost::{time_plan, Params};
use crate::xdna2::device::Device;
use crate::xdna2::interpreter::{NpuPath, RopeTable};
use crate::xdna2::kernels::{GemmSpec, GemmTile, GemvTile, Herd, Precision, QkvLayout};
use crate::xdna2::plan::{Launch, Phase, Plan, PlanOptions, Step, Transform, WeightSource};

/// Prefill rows and decode context the plans are built and timed at, like the
/// published figures.
pub const SEQ_LEN: usize = 2048;

/// A kernel configuration chosen for one kernel × shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kernel", rename_all = "snake_case")]
pub enum Tiling {
    Gemm {
        herd: Herd,
        tile: GemmTile,
        precision: Precision,
    },
    Gemv {
        herd: Herd,
        tile: GemvTile,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Design {
    pub options: PlanOptions,
    /// By site key (`gemm 2048x2048x512`).
    pub tilings: BTreeMap<String, Tiling>,
    pub path: NpuPath,
    /// The FFN width the kernels see, when the model's is padded with zero rows of
    /// gate/up and zero columns of down to meet a kernel's K granularity (exact:
    /// silu(0)·0 = 0 meets zero weights).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ffn_padded: Option<usize>,
}

/// The prefill plan (SEQ_LEN rows) and the decode plan (SEQ_LEN context).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plans {
    pub prefill: Plan,
    pub decode: Plan,
}

/// Where the executor starts: every launch its own call, every buffer written per
/// call, activations through the host, the LM head as a full-sequence GEMM in
/// prefill and a CPU matvec in decode, no decode cascade, head-first attention.
pub fn baseline_options() -> PlanOptions {
    PlanOptions {
        last_token_lm_head: false,
        npu_lm_head: false,
        cascade_ffn: false,
        omit_pingpong: false,
        layout: QkvLayout::HeadFirst,
        ..PlanOptions::naive()
    }
}

impl Design {
    pub fn baseline() -> Self {
        Design {
            options: baseline_options(),
            tilings: BTreeMap::new(),
            path: NpuPath::CORRECT,
            ffn_padded: None,
        }
    }

    /// Builds both plans and applies the chosen configurations.
    pub fn plans(
        &self,
        model: &str,
        arch: &Architecture,
        device: &Device,
    ) -> Result<Plans, String> {
        Ok(Plans {
            prefill: self.plan(model, arch, device, Phase::Prefill, SEQ_LEN)?,
            decode: self.plan(model, arch, device, Phase::Decode, SEQ_LEN)?,
        })
    }

    /// One plan at `seq_len` (prompt rows for prefill, cached context for decode),
    /// with the chosen configurations applied.
    pub fn plan(
        &self,
        model: &str,
        arch: &Architecture,
        device: &Device,
        phase: Phase,
        seq_len: usize,
    ) -> Result<Plan, String> {
        let mut kernels_arch = arch.clone();
        if let Some(ffn) = self.ffn_padded {
            if ffn < arch.intermediate_size {
                return Err(format!("FFN padded to {ffn} < {}", arch.intermediate_size));
            }
            kernels_arch.intermediate_size = ffn;
        }
        let mut plan = plan_for(model, &kernels_arch, device, phase, seq_len, &self.options)
            .map_err(|e| e.to_string())?;
        pad_ffn_sources(
            &mut plan,
            arch.intermediate_size,
            kernels_arch.intermediate_size,
        );
        for launch in launches_mut(&mut plan) {
            if let Some(t) = self.tilings.get(&site_key(launch)) {
                apply_tiling(launch, t);
            }
        }
        Ok(plan)
    }
}

/// Fills FFN buffers of a plan built at width `padded` from tensors of width `ffn`:
/// zero rows after gate/up, zero columns after down. The column padding is written
/// as phantom heads of one KV group (blocks of `gcd(ffn, padded)` columns), which is
/// exactly "zeros at the end" in the plan's transform vocabulary.
fn pad_ffn_sources(plan: &mut Plan, ffn: usize, padded: usize) {
    if ffn == padded {
        return;
    }
    let block = gcd(ffn, padded);
    for buffer in plan.buffers.values_mut() {
        let Some(WeightSource::Tensor { name, transforms }) = &mut buffer.source else {
            continue;
        };
        let pad = if name.ends_with("mlp.gate_proj.weight") || name.ends_with("mlp.up_proj.weight")
        {
            Transform::Rows {
                start: 0,
                rows: ffn,
                padded_rows: padded,
            }
        } else if name.ends_with("mlp.down_proj.weight") {
            Transform::PadHeads {
                axis: 1,
                heads: ffn / block,
                padded_heads: padded / block,
                kv_heads: 1,
                head_dim: block,
            }
        } else {
            continue;
        };
        transforms.insert(0, pad);
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `gemm 2048x2048x512`: the kernel and its production shape.
pub fn site_key(launch: &Launch) -> String {
    format!("{} {}", launch.kernel().name(), launch.shape_label())
}

fn launches_mut(plan: &mut Plan) -> impl Iterator<Item = &mut Launch> {
    plan.prologue
        .iter_mut()
        .chain(plan.layer.iter_mut())
        .chain(plan.epilogue.iter_mut())
        .filter_map(|s| match s {
            Step::Call(c) => Some(c.launches.iter_mut()),
            Step::Host(_) => None,
        })
        .flatten()
}

/// Every launch of a plan, in order.
pub fn launches(plan: &Plan) -> impl Iterator<Item = &Launch> {
    plan.calls().flat_map(|(_, c)| c.launches.iter())
}

/// One launch per kernel × shape over both plans, by site key.
pub fn sites(plans: &Plans) -> BTreeMap<String, (Phase, Launch)> {
    let mut out = BTreeMap::new();
    for plan in [&plans.prefill, &plans.decode] {
        for launch in launches(plan) {
            out.entry(site_key(launch))
                .or_insert_with(|| (plan.phase, launch.clone()));
        }
    }
    out
}

pub fn apply_tiling(launch: &mut Launch, tiling: &Tiling) {
    match (launch, tiling) {
        (
            Launch::Gemm { spec, .. },
            Tiling::Gemm {
                herd,
                tile,
                precision,
            },
        ) => {
            spec.herd = *herd;
            spec.tile = *tile;
            spec.precision = *precision;
        }
        (Launch::Gemv { spec, .. }, Tiling::Gemv { herd, tile }) => {
            spec.herd = *herd;
            spec.tile = *tile;
        }
        _ => {}
    }
}

/// The configuration a launch carries now.
pub fn tiling_of(launch: &Launch) -> Option<Tiling> {
    match launch {
        Launch::Gemm { spec, .. } => Some(Tiling::Gemm {
            herd: spec.herd,
            tile: spec.tile,
            precision: spec.precision,
        }),
        Launch::Gemv { spec, .. } => Some(Tiling::Gemv {
            herd: spec.herd,
            tile: spec.tile,
        }),
        _ => None,
    }
}

/// The `select-tiling` parameters of a launch (kernel, shape, herd, tile,
/// precision), as the trajectory language writes them.
pub fn tiling_params(launch: &Launch) -> BTreeMap<String, Value> {
    let mut p = BTreeMap::from([(
        "kernel".to_string(),
        Value::Text(launch.kernel().name().to_string()),
    )]);
    let list = |v: &[usize]| Value::IntList(v.iter().map(|&x| x as i64).collect());
    p.insert("shape".into(), list(&shape_of(launch)));
    match launch {
        Launch::Gemm { spec, .. } => {
            p.insert("herd".into(), list(&spec.herd.0));
            let t = spec.tile;
            p.insert(
                "tile".into(),
                list(&[t.tile_m, t.tile_k_l2, t.tile_k_l1, t.tile_n]),
            );
            let precision = match spec.precision {
                Precision::Bf16 => "bf16",
                Precision::Bfp16 => "bfp16",
            };
            p.insert("precision".into(), Value::Text(precision.into()));
        }
        Launch::Gemv { spec, .. } => {
            p.insert("herd".into(), list(&spec.herd.0));
            p.insert("tile".into(), list(&[spec.tile.tile_m]));
        }
        _ => {}
    }
    p
}

/// The production shape as a list: `[M,K,N]` for GEMM, `[M,K]` for GEMV, rows and
/// columns for row kernels, `[rows·heads, head_dim]` for RoPE.
pub fn shape_of(launch: &Launch) -> Vec<usize> {
    match launch {
        Launch::Gemm { spec, .. } => vec![spec.m, spec.k, spec.n],
        Launch::Gemv { spec, .. } | Launch::GemvSwiglu { spec, .. } => vec![spec.m, spec.k],
        Launch::Rmsnorm { spec, .. }
        | Launch::QkRmsnorm { spec, .. }
        | Launch::Softmax { spec, .. } => {
            vec![spec.rows, spec.cols]
        }
        Launch::Rope { spec, .. } => vec![spec.rows * spec.heads, spec.head_dim],
        Launch::SiluMul { spec, .. } | Launch::EltwiseAdd { spec, .. } => vec![spec.n],
        Launch::FlashAttention { spec, .. } => vec![spec.lq, spec.lk, spec.head_dim],
        Launch::LmHeadGemv { spec, .. } => vec![spec.vocab, spec.part.k],
    }
}

/// A GEMM launch's spec with `select-tiling` parameters applied.
pub fn gemm_with(spec: &GemmSpec, params: &BTreeMap<String, Value>) -> Result<GemmSpec, String> {
    let mut s = *spec;
    if let Some(Value::IntList(h)) = params.get("herd") {
        let [c, r] = h[..] else {
            return Err(format!("herd {h:?} is not [columns, rows]"));
        };
        s.herd = Herd([usize_of(c)?, usize_of(r)?]);
    }
    if let Some(Value::IntList(t)) = params.get("tile") {
        let [m, kl2, kl1, n] = t[..] else {
            return Err(format!(
                "tile {t:?} is not [tile_m, tile_k_l2, tile_k_l1, tile_n]"
            ));
        };
        s.tile = GemmTile {
            tile_m: usize_of(m)?,
            tile_k_l2: usize_of(kl2)?,
            tile_k_l1: usize_of(kl1)?,
            tile_n: usize_of(n)?,
            ..s.tile
        };
    }
    match params.get("precision") {
        Some(Value::Text(p)) if p == "bf16" => s.precision = Precision::Bf16,
        Some(Value::Text(p)) if p == "bfp16" => s.precision = Precision::Bfp16,
        Some(other) => return Err(format!("precision {other:?} is neither bf16 nor bfp16")),
        None => {}
    }
    Ok(s)
}

fn usize_of(v: i64) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{v} is not a size"))
}

/// What a lesson's fix or a bundle technique changes in the design. `site` is the
/// kernel × shape a tiling fix applies to.
pub fn apply_change(
    design: &mut Design,
    arch: &Architecture,
    op: OpKind,
    params: &BTreeMap<String, Value>,
    site: Option<&Launch>,
) -> Result<(), String> {
    let int = |key: &str| match params.get(key) {
        Some(Value::Int(i)) => usize::try_from(*i).ok(),
        _ => None,
    };
    match op {
        OpKind::SelectTiling | OpKind::TuneTiling
            if matches!(site, Some(Launch::FlashAttention { .. })) =>
        {
            match params.get("layout") {
                Some(Value::Text(l)) if l == "head-first" => {
                    design.options.layout = QkvLayout::HeadFirst
                }
                Some(Value::Text(l)) if l == "seq-first" => {
                    design.options.layout = QkvLayout::SeqFirst
                }
                _ => return Err("a flash-attention configuration fix must name a layout".into()),
            }
        }
        OpKind::SelectTiling | OpKind::TuneTiling => {
            let Some(launch @ Launch::Gemm { spec, .. }) = site else {
                return Err("tiling fixes apply to a GEMM site; none failed here".into());
            };
            let fixed = gemm_with(spec, params)?;
            design.tilings.insert(
                site_key(launch),
                Tiling::Gemm {
                    herd: fixed.herd,
                    tile: fixed.tile,
                    precision: fixed.precision,
                },
            );
        }
        OpKind::BiasAfterRope if arch.qkv_bias => design.path.qkv_bias = true,
        OpKind::BiasAfterRope => return Err("the model has no q/k/v bias".into()),
        OpKind::QkNorm if arch.qk_norm => design.path.qk_norm = true,
        OpKind::QkNorm => return Err("the model has no Q/K norm".into()),
        OpKind::RopeScaling => {
            design.path.rope = match params.get("scaling") {
                Some(Value::Text(s)) if s == "none" => RopeTable::Unscaled,
                _ => RopeTable::Scaled,
            }
        }
        OpKind::PadHeads => design.options.pad_heads = true,
        OpKind::AlignLayout => {
            design.options.layout = match params.get("layout") {
                Some(Value::Text(l)) if l == "head-first" => QkvLayout::HeadFirst,
                _ => QkvLayout::SeqFirst,
            }
        }
        OpKind::MergeLaunches => design.options.merge_launches = true,
        OpKind::SplitLaunches => design.options.merge_launches = false,
        OpKind::ReuseStaticWeights => design.options.static_weights = true,
        OpKind::MarkIntermediates => {
            design.options.mark_intermediates = true;
            design.options.shared_intermediates = true;
        }
        OpKind::LastTokenLmHead => design.options.last_token_lm_head = true,
        OpKind::PartitionLmHead => {
            design.options.npu_lm_head = true;
            if let Some(parts) = int("parts") {
                design.options.lm_head_parts = parts.max(1);
            }
        }
        OpKind::CascadeFfn => {
            design.options.cascade_ffn = true;
            if let Some(rows) = int("rows") {
                design.options.cascade_rows = rows.max(1);
            }
        }
        OpKind::OmitPingpong => design.options.omit_pingpong = true,
        // Already how the runtime's plans work: decode projections are NPU GEMVs,
        // decode attention runs on the host, prefill GEMM weights are
        // pre-transposed at setup.
        OpKind::GemvDecode | OpKind::CpuDecodeAttention | OpKind::PretransposeWeights => {}
        other => return Err(format!("`{other}` changes nothing the runtime models")),
    }
    Ok(())
}

/// Applies every change of a fix in order.
pub fn apply_changes(
    design: &mut Design,
    arch: &Architecture,
    changes: &[(OpKind, BTreeMap<String, Value>)],
    site: Option<&Launch>,
) -> Result<(), String> {
    for (op, params) in changes {
        apply_change(design, arch, *op, params, site)?;
    }
    Ok(())
}

/// The optimization a technique turns on, for reports.
pub fn optimization_of(op: OpKind) -> Option<Optimization> {
    Some(match op {
        OpKind::MergeLaunches => Optimization::MergeLaunches,
        OpKind::ReuseStaticWeights => Optimization::ReuseStaticWeights,
        OpKind::MarkIntermediates => Optimization::MarkIntermediates,
        OpKind::LastTokenLmHead => Optimization::LastTokenLmHead,
        OpKind::PartitionLmHead => Optimization::NpuLmHead,
        OpKind::CascadeFfn => Optimization::CascadeFfn,
        OpKind::AlignLayout => Optimization::AlignLayout,
        OpKind::OmitPingpong => Optimization::OmitPingpong,
        _ => return None,
    })
}

/// A digest of everything the emulated forward pass reads: every launch with its
/// spec and buffers, every host op, every weight buffer's source and transforms, in
/// plan order, and the NPU-path choices. How launches are grouped into calls and
/// which buffers the host re-writes do not enter it, so two plans with the same
/// fingerprint compute bit-identical outputs (the interpreter is deterministic).
pub fn fingerprint(plans: &Plans, path: &NpuPath) -> String {
    let mut program = Vec::new();
    for plan in [&plans.prefill, &plans.decode] {
        let mut steps = Vec::new();
        for (section, list) in plan.sections() {
            for step in list {
                match step {
                    Step::Call(call) => {
                        for launch in &call.launches {
                            let entry = serde_json::to_value(launch).unwrap_or_default();
                            steps.push((section.name(), entry));
                        }
                    }
                    Step::Host(op) => {
                        steps.push((section.name(), serde_json::to_value(op).unwrap_or_default()))
                    }
                }
            }
        }
        let sources: BTreeMap<&String, _> = plan
            .buffers
            .iter()
            .filter_map(|(name, b)| b.source.as_ref().map(|s| (name, s)))
            .collect();
        program.push(serde_json::json!({
            "phase": plan.phase,
            "seq_len": plan.seq_len,
            "layers": plan.num_layers,
            "steps": steps,
            "sources": sources,
        }));
    }
    let text = serde_json::json!({ "plans": program, "path": path }).to_string();
    super::artifacts::sha256_hex(text.as_bytes())
}

/// Modeled TTFT and decode speed of the plans.
pub fn modeled(plans: &Plans, device: &Device, params: &Params) -> ModeledTimes {
    let prefill = time_plan(&plans.prefill, device, params);
    let decode = time_plan(&plans.decode, device, params);
    ModeledTimes {
        seq_len: SEQ_LEN,
        ttft_s: prefill.total_s,
        ms_per_token: decode.total_s * 1e3,
        tok_s: if decode.total_s > 0.0 {
            1.0 / decode.total_s
        } else {
            0.0
        },
        calls_per_layer_prefill: plans.prefill.calls_per_layer(),
        calls_per_layer_decode: plans.decode.calls_per_layer(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::load_config;

    fn fixture(name: &str) -> Architecture {
        let path = format!(
            "{}/../../shared/fixtures/{name}/config.json",
            env!("CARGO_MANIFEST_DIR")
        );
        load_config(std::path::Path::new(&path)).expect("fixture config")
    }

    #[test]
    fn call_grouping_and_host_traffic_leave_the_fingerprint_alone() {
        let arch = fixture("llama32-tiny");
        let device = Device::npu2();
        let base = Design::baseline();
        let fp = |d: &Design| {
            let plans = d.plans("m", &arch, &device).unwrap();
            fingerprint(&plans, &d.path)
        };
        for op in [
            OpKind::MergeLaunches,
            OpKind::ReuseStaticWeights,
            OpKind::MarkIntermediates,
        ] {
            let mut d = base.clone();
            apply_change(&mut d, &arch, op, &BTreeMap::new(), None).unwrap();
            assert_ne!(
                d.plans("m", &arch, &device).unwrap(),
                base.plans("m", &arch, &device).unwrap(),
                "{op}"
            );
            assert_eq!(fp(&d), fp(&base), "{op}");
        }
        let mut d = base.clone();
        apply_change(&mut d, &arch, OpKind::CascadeFfn, &BTreeMap::new(), None).unwrap();
        assert_ne!(fp(&d), fp(&base));
        let mut d = base.clone();
        d.path.qk_norm = false;
        assert_ne!(fp(&d), fp(&base));
    }
}
