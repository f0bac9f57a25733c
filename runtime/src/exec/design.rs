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
use crate::ops::{
    effect, ApplyError, BufferKey, Effect, KernelChoice, KernelSettings, Op, OpKind, ParamError,
    PlanChange,
};
use crate::xdna2::builder::{plan_for, PlanError};
use crate::xdna2::cost::{time_plan, Params};
use crate::xdna2::device::Device;
use crate::xdna2::interpreter::NpuPath;
use crate::xdna2::kernels::{
    GemmSpec, GemmTile, GemvSpec, GemvTile, Herd, PackedFormat, Precision, QkvLayout,
};
use crate::xdna2::plan::{Launch, Phase, Plan, PlanOptions, Step};

/// Prefill rows and decode context the plans are built and timed at, like the
/// published figures.
pub const SEQ_LEN: usize = 2048;

/// The conditions of a figure modeled at [`SEQ_LEN`]: `seq_len=…`.
pub fn at_seq_len() -> BTreeMap<String, Value> {
    BTreeMap::from([("seq_len".to_string(), Value::Int(SEQ_LEN as i64))])
}

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
    /// The decode GEMV weight buffers read in their stored 4-bit blocks, by
    /// buffer name (the 4-bit weight path's decision, `xdna2::packing`); empty
    /// on the bf16 path.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub packed: BTreeMap<String, PackedFormat>,
}

/// Why a design cannot be built into plans or cannot take a change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DesignError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Param(#[from] ParamError),
    #[error("tile {0:?} is not [tile_m, tile_k_l2, tile_k_l1, tile_n]")]
    TileShape(Vec<usize>),
    #[error("tile {0:?} is not [tile_m] (a GEMV tile)")]
    GemvTileShape(Vec<usize>),
    #[error("`key=shared` keys one weight buffer for every layer, the bug the reference trajectory recorded; the runtime keys static weights per layer")]
    SharedStaticWeights,
    #[error("`{0}` changes nothing the runtime models")]
    NotModeled(OpKind),
    #[error("a flash-attention configuration fix must name a layout")]
    NoLayout,
    #[error("tiling fixes apply to a GEMM or GEMV site; none failed here")]
    NoGemmSite,
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
            packed: BTreeMap::new(),
        }
    }

    /// Builds both plans and applies the chosen configurations.
    pub fn plans(
        &self,
        model: &str,
        arch: &Architecture,
        device: &Device,
    ) -> Result<Plans, DesignError> {
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
    ) -> Result<Plan, DesignError> {
        let mut plan = plan_for(model, arch, device, phase, seq_len, &self.options)?;
        for launch in launches_mut(&mut plan) {
            if let (Phase::Decode, Launch::Gemv { w, spec, .. }) = (phase, &mut *launch) {
                spec.packed = self.packed.get(w.as_str()).copied();
            }
            if let Some(t) = self.tilings.get(&site_key(launch)) {
                apply_tiling(launch, t);
            }
            if self.path.defects.silu_for_gelu {
                plant_silu_for_gelu(launch);
            }
        }
        plant_param_defects(&mut plan, &self.path.defects);
        Ok(plan)
    }
}

/// The planted plan-parameter faults (`param-eps`, `param-scale`,
/// `param-gate-up-swap`) written into the plan's launches and host ops, as a
/// plan builder that got them wrong would; phase 1 checks them against the
/// config (`phases::kernels::params`).
fn plant_param_defects(plan: &mut Plan, defects: &crate::xdna2::interpreter::Defects) {
    use crate::xdna2::plan::HostOp;
    let scale_dim = |scale_dim: &mut Option<usize>, head_dim: usize| {
        *scale_dim = Some(2 * scale_dim.unwrap_or(head_dim));
    };
    for launch in launches_mut(plan) {
        match launch {
            Launch::Rmsnorm { eps, .. }
            | Launch::Layernorm { eps, .. }
            | Launch::QkRmsnorm { eps, .. }
            | Launch::GemvSwiglu { eps, .. }
                if defects.param_eps =>
            {
                *eps *= 100.0;
            }
            Launch::FlashAttention { spec, .. } if defects.param_scale => {
                scale_dim(&mut spec.scale_dim, spec.head_dim);
            }
            Launch::DecodeAttention { spec, .. } if defects.param_scale => {
                scale_dim(&mut spec.scale_dim, spec.head_dim);
            }
            Launch::SiluMul { gate, up, .. } | Launch::GeluMul { gate, up, .. }
                if defects.param_gate_up_swap =>
            {
                std::mem::swap(gate, up);
            }
            _ => {}
        }
        if let Launch::GemvSwiglu { gate, up, .. } = launch {
            if defects.param_gate_up_swap {
                std::mem::swap(gate, up);
            }
        }
    }
    let steps = plan
        .prologue
        .iter_mut()
        .chain(plan.layer.iter_mut())
        .chain(plan.epilogue.iter_mut());
    for step in steps {
        let Step::Host(op) = step else { continue };
        match op {
            HostOp::RmsNorm { eps, .. } | HostOp::LayerNorm { eps, .. } if defects.param_eps => {
                *eps *= 100.0;
            }
            HostOp::DecodeAttention {
                scale_dim: dim,
                head_dim,
                ..
            } if defects.param_scale => scale_dim(dim, *head_dim),
            HostOp::SiluMul { gate, up, .. } if defects.param_gate_up_swap => {
                std::mem::swap(gate, up);
            }
            _ => {}
        }
    }
}

/// Planted fault `silu-for-gelu`: a GELU-tanh gate launch becomes SiLU-mul.
fn plant_silu_for_gelu(launch: &mut Launch) {
    if let Launch::GeluMul {
        gate,
        up,
        out,
        spec,
    } = launch
    {
        *launch = Launch::SiluMul {
            gate: std::mem::take(gate),
            up: std::mem::take(up),
            out: std::mem::take(out),
            spec: *spec,
        };
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

/// One launch per kernel × shape over both plans, by site key. A plan with
/// sliding-window layers runs its flash attention with the window mask there:
/// that configuration is a site of its own.
pub fn sites(plans: &Plans) -> BTreeMap<String, (Phase, Launch)> {
    let mut out = BTreeMap::new();
    for plan in [&plans.prefill, &plans.decode] {
        for launch in launches(plan) {
            let mut variants = vec![launch.clone()];
            if let (Launch::FlashAttention { .. }, Some(sliding)) = (launch, &plan.sliding) {
                let mut windowed = launch.clone();
                if let Launch::FlashAttention { spec, .. } = &mut windowed {
                    spec.window = Some(sliding.window);
                }
                if sliding.layers.len() >= plan.num_layers {
                    variants.clear();
                }
                variants.push(windowed);
            }
            for v in variants {
                out.entry(site_key(&v)).or_insert_with(|| (plan.phase, v));
            }
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

/// The `select-tiling` a launch's configuration is: kernel, shape, herd, tile and,
/// for GEMM, precision.
pub fn tiling_choice(launch: &Launch) -> KernelChoice {
    let mut choice = KernelChoice {
        kernel: launch.kernel(),
        shape: shape_of(launch),
        herd: None,
        tile: None,
        precision: None,
        epilogue: None,
        layout: None,
    };
    match launch {
        Launch::Gemm { spec, .. } => {
            let t = spec.tile;
            choice.herd = Some(spec.herd);
            choice.tile = Some(vec![t.tile_m, t.tile_k_l2, t.tile_k_l1, t.tile_n]);
            choice.precision = Some(spec.precision);
        }
        Launch::Gemv { spec, .. } => {
            choice.herd = Some(spec.herd);
            choice.tile = Some(vec![spec.tile.tile_m]);
        }
        _ => {}
    }
    choice
}

/// The `select-tiling` parameters of a launch, as the trajectory language writes them.
pub fn tiling_params(launch: &Launch) -> BTreeMap<String, Value> {
    Op::SelectTiling(tiling_choice(launch)).params()
}

/// The production shape as a list: `[M,K,N]` for GEMM, `[M,K]` for GEMV, rows and
/// columns for row kernels, `[rows·heads, head_dim]` for RoPE.
pub fn shape_of(launch: &Launch) -> Vec<usize> {
    match launch {
        Launch::Gemm { spec, .. } => vec![spec.m, spec.k, spec.n],
        Launch::Gemv { spec, .. } | Launch::GemvSwiglu { spec, .. } => vec![spec.m, spec.k],
        Launch::Rmsnorm { spec, .. }
        | Launch::Layernorm { spec, .. }
        | Launch::QkRmsnorm { spec, .. }
        | Launch::Softmax { spec, .. } => {
            vec![spec.rows, spec.cols]
        }
        Launch::Rope { spec, .. } => vec![spec.rows * spec.heads, spec.head_dim],
        Launch::SiluMul { spec, .. }
        | Launch::GeluMul { spec, .. }
        | Launch::EltwiseAdd { spec, .. } => vec![spec.n],
        Launch::FlashAttention { spec, .. } => vec![spec.lq, spec.lk, spec.head_dim],
        Launch::LmHeadGemv { spec, .. } => vec![spec.vocab, spec.part.k],
        Launch::KvAppend { spec, .. } => vec![spec.kv_width, spec.context],
        Launch::DecodeAttention { spec, .. } => {
            vec![spec.heads, spec.kv_heads, spec.head_dim, spec.context]
        }
    }
}

/// A GEMM launch's spec with a kernel choice's settings applied.
pub fn gemm_with(spec: &GemmSpec, settings: &KernelSettings) -> Result<GemmSpec, DesignError> {
    let mut s = *spec;
    if let Some(herd) = settings.herd {
        s.herd = herd;
    }
    if let Some(tile) = &settings.tile {
        let [tile_m, tile_k_l2, tile_k_l1, tile_n] = tile[..] else {
            return Err(DesignError::TileShape(tile.clone()));
        };
        s.tile = GemmTile {
            tile_m,
            tile_k_l2,
            tile_k_l1,
            tile_n,
            ..s.tile
        };
    }
    if let Some(precision) = settings.precision {
        s.precision = precision;
    }
    Ok(s)
}

/// What a lesson's fix or a bundle technique changes in the design: the effect
/// `ops::effect` defines, on the executor's one set of plan options (both plans
/// are built from it, so a change's [`PlanScope`](crate::ops::PlanScope) is the
/// whole deployment). `site` is the kernel × shape a tiling fix applies to.
pub fn apply_change(
    design: &mut Design,
    arch: &Architecture,
    device: &Device,
    op: &Op,
    site: Option<&Launch>,
) -> Result<(), DesignError> {
    match effect(op, arch, device)? {
        Effect::Plan {
            change:
                PlanChange::StaticWeights {
                    key: BufferKey::Shared,
                },
            ..
        } => return Err(DesignError::SharedStaticWeights),
        Effect::Plan { change, .. } => change.apply(&mut design.options),
        Effect::Path(change) => change.apply(&mut design.path),
        Effect::Kernel(settings) => apply_kernel_choice(design, &settings, site)?,
        Effect::Measures | Effect::Records | Effect::RopePairing(_) => {
            return Err(DesignError::NotModeled(op.kind()))
        }
    }
    Ok(())
}

/// A tiling fix at the failing site: a layout for flash attention, a
/// configuration for a GEMM.
fn apply_kernel_choice(
    design: &mut Design,
    settings: &KernelSettings,
    site: Option<&Launch>,
) -> Result<(), DesignError> {
    match site {
        Some(Launch::FlashAttention { .. }) => {
            design.options.layout = settings.layout.ok_or(DesignError::NoLayout)?;
        }
        Some(launch @ Launch::Gemm { spec, .. }) => {
            let fixed = gemm_with(spec, settings)?;
            design.tilings.insert(
                site_key(launch),
                Tiling::Gemm {
                    herd: fixed.herd,
                    tile: fixed.tile,
                    precision: fixed.precision,
                },
            );
        }
        Some(launch @ Launch::Gemv { spec, .. }) => {
            let (herd, tile) = gemv_with(spec, settings)?;
            design
                .tilings
                .insert(site_key(launch), Tiling::Gemv { herd, tile });
        }
        _ => return Err(DesignError::NoGemmSite),
    }
    Ok(())
}

/// A GEMV launch's herd and tile with a kernel choice's settings applied
/// (`tile=[tile_m]`); m_input is kept when it still divides tile_m, else
/// tile_m (the re-check's placement says whether it fits L1).
fn gemv_with(spec: &GemvSpec, settings: &KernelSettings) -> Result<(Herd, GemvTile), DesignError> {
    let herd = settings.herd.unwrap_or(spec.herd);
    let mut tile = spec.tile;
    if let Some(t) = &settings.tile {
        let [tile_m] = t[..] else {
            return Err(DesignError::GemvTileShape(t.clone()));
        };
        tile.tile_m = tile_m;
        if tile.m_input == 0 || tile.m_input > tile_m || tile_m % tile.m_input != 0 {
            tile.m_input = tile_m;
        }
    }
    Ok((herd, tile))
}

/// Reads each change of a fix as an operation and applies them in order.
pub fn apply_changes(
    design: &mut Design,
    arch: &Architecture,
    device: &Device,
    changes: &[(OpKind, BTreeMap<String, Value>)],
    site: Option<&Launch>,
) -> Result<(), DesignError> {
    for (kind, params) in changes {
        let op = Op::read(*kind, params)?;
        apply_change(design, arch, device, &op, site)?;
    }
    Ok(())
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
            Op::MergeLaunches {
                group: "rms_gemms_rope".into(),
            },
            Op::ReuseStaticWeights { key: None },
            Op::MarkIntermediates,
        ] {
            let mut d = base.clone();
            apply_change(&mut d, &arch, &device, &op, None).unwrap();
            assert_ne!(
                d.plans("m", &arch, &device).unwrap(),
                base.plans("m", &arch, &device).unwrap(),
                "{op:?}"
            );
            assert_eq!(fp(&d), fp(&base), "{op:?}");
        }
        let mut d = base.clone();
        apply_change(&mut d, &arch, &device, &Op::CascadeFfn { rows: 4 }, None).unwrap();
        assert_ne!(fp(&d), fp(&base));
        let mut d = base.clone();
        d.path.qk_norm = false;
        assert_ne!(fp(&d), fp(&base));
    }

    /// Replay once set 4 rows for a `cascade-ffn` without `rows` and the executor
    /// kept its current value; an unknown operation was a no-op in replay and an
    /// error here. Now `rows` is required wherever `cascade-ffn` is read
    /// (`Op::read`, which replay calls too), and an unknown operation name is
    /// refused where names are read: `skillc check` (E0006,
    /// tests/data/invalid/unknown-operation.traj) and bundle.json
    /// (`bundle::tests::operations_are_read_once_and_unknown_ones_refused`).
    #[test]
    fn cascade_ffn_needs_its_rows_and_unknown_operations_do_not_read() {
        let arch = fixture("llama32-tiny");
        let device = Device::npu2();
        let mut design = Design::baseline();
        let without_rows = apply_changes(
            &mut design,
            &arch,
            &device,
            &[(OpKind::CascadeFfn, BTreeMap::new())],
            None,
        );
        assert_eq!(
            without_rows.unwrap_err().to_string(),
            "`cascade-ffn` needs parameter `rows`"
        );
        assert_eq!(design, Design::baseline(), "nothing applied");
        let rows = BTreeMap::from([("rows".to_string(), Value::Int(2))]);
        apply_changes(
            &mut design,
            &arch,
            &device,
            &[(OpKind::CascadeFfn, rows)],
            None,
        )
        .unwrap();
        assert!(design.options.cascade_ffn);
        assert_eq!(design.options.cascade_rows, 2);
        assert!("launch-rockets".parse::<OpKind>().is_err());
    }

    #[test]
    fn a_technique_out_of_the_models_bounds_is_refused_not_run() {
        let arch = fixture("llama32-tiny");
        let device = Device::npu2();
        let mut design = Design::baseline();
        for parts in [100_000usize, 1_000_000_000_000] {
            let op = Op::PartitionLmHead { parts };
            let err = apply_change(&mut design, &arch, &device, &op, None).unwrap_err();
            assert!(
                err.to_string()
                    .contains("exceeds the model's LM-head row blocks"),
                "{err}"
            );
        }
        let zero = BTreeMap::from([("parts".to_string(), Value::Int(0))]);
        let err = apply_changes(
            &mut design,
            &arch,
            &device,
            &[(OpKind::PartitionLmHead, zero)],
            None,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "`partition-lm-head` parameter `parts` = 0: must be above 0"
        );
        assert_eq!(design, Design::baseline());
    }
}
