//! Turns a recorded kernel choice (`select-tiling kernel=… shape=… herd=… tile=…`)
//! into the emulator's launch description, starting from the emulator's own
//! default for the shape and overriding only what the action wrote. Shapes follow
//! the vocabulary's conventions: GEMM `[M,K,N]`, GEMV `[M,K]` (M output rows),
//! LM-head GEMV `[vocab,K]`, RMSNorm `[rows,cols]`, RoPE `[rows,head_dim]`,
//! element-wise `[n]`, FlashAttention `[lq,lk,head_dim]` with the model's head
//! counts. Row kernels read `tile=[t]` as their tile size, GEMV as `tile_m`.

use skillc_runtime::model::arch::Architecture;
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::kernels::{
    Dtype, EltwiseSpec, Epilogue, FlashAttentionSpec, GemmSpec, GemmTile, GemvSpec, Herd, Kernel,
    LmHeadSpec, NormSpec, Precision, QkvLayout, RopeSpec, RowTile,
};
use skillc_runtime::xdna2::plan::{Launch, Standalone};

use super::params::Params;

/// Why a recorded kernel choice has no emulator counterpart.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelChoiceError {
    #[error("kernel `{0}` is not one the emulator runs standalone")]
    Unsupported(String),
    #[error("{kernel} takes a shape of {expected} dimensions, got {got:?}")]
    Shape {
        kernel: &'static str,
        expected: usize,
        got: Vec<usize>,
    },
    #[error("{0} needs a `shape` parameter")]
    NoShape(&'static str),
    #[error("`{key}` must have {expected} entries, got {got:?}")]
    List {
        key: &'static str,
        expected: &'static str,
        got: Vec<usize>,
    },
}

/// Everything a kernel choice depends on besides the action itself.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub arch: &'a Architecture,
    pub device: &'a Device,
    /// LM-head partitions currently chosen (`partition-lm-head`).
    pub lm_head_parts: usize,
}

/// The kernel named by `params` (`kernel=…`).
pub fn kernel_of(params: Params<'_>) -> Result<Kernel, KernelChoiceError> {
    let name = params.word("kernel").unwrap_or_default();
    Kernel::from_name(name).ok_or_else(|| KernelChoiceError::Unsupported(name.to_string()))
}

/// The launch for `params` (a `select-tiling`, or a `validate-kernel` with no
/// earlier choice, which takes the emulator's defaults).
pub fn launch(params: Params<'_>, ctx: Context<'_>) -> Result<Launch, KernelChoiceError> {
    let kernel = kernel_of(params)?;
    let shape = params
        .dims("shape")
        .ok_or(KernelChoiceError::NoShape(kernel.name()))?;
    let herd = herd(params)?;
    let tile = params.dims("tile").unwrap_or_default();
    let spec = match kernel {
        Kernel::Gemm => {
            let [m, k, n] = dims(kernel, &shape)?;
            Standalone::Gemm(gemm_spec(params, ctx.device, [m, k, n], herd, &tile)?)
        }
        Kernel::Gemv => {
            let [m, k] = dims(kernel, &shape)?;
            let mut spec = GemvSpec::select(ctx.device, m, k, herd.unwrap_or(Herd::ROW));
            if let Some(&tile_m) = tile.first() {
                spec.tile.tile_m = tile_m;
                spec.tile.m_input = tile_m;
            }
            Standalone::Gemv(spec)
        }
        Kernel::LmHeadGemv => {
            let [vocab, k] = dims(kernel, &shape)?;
            let mut spec = LmHeadSpec::select(ctx.device, vocab, k, ctx.lm_head_parts.max(1));
            if let Some(&tile_m) = tile.first() {
                spec.part.tile.tile_m = tile_m;
                spec.part.tile.m_input = tile_m;
                let block = (tile_m * spec.part.herd.cols()).max(1);
                spec.part.m = vocab.div_ceil(spec.parts.max(1)).div_ceil(block) * block;
            }
            Standalone::LmHeadGemv(spec)
        }
        Kernel::Rmsnorm => {
            let [rows, cols] = dims(kernel, &shape)?;
            let default = if rows % ctx.device.columns == 0 {
                Herd::ROW
            } else {
                Herd::SINGLE
            };
            let spec = NormSpec {
                rows,
                cols,
                herd: herd.unwrap_or(default),
                weighted: true,
                real_cols: None,
            };
            Standalone::Rmsnorm(spec, ctx.arch.rms_norm_eps)
        }
        Kernel::Rope => {
            let [rows, head_dim] = dims(kernel, &shape)?;
            Standalone::Rope(RopeSpec {
                rows,
                heads: 1,
                head_dim,
                herd: herd.unwrap_or(Herd::ROW),
                rotary_dim: None,
            })
        }
        Kernel::SiluMul | Kernel::EltwiseAdd => {
            let [n] = dims(kernel, &shape)?;
            let mut spec = EltwiseSpec::select(ctx.device, n, herd.unwrap_or(Herd::ROW));
            if let Some(&t) = tile.first() {
                spec.tile = RowTile { tile: t };
            }
            if kernel == Kernel::SiluMul {
                Standalone::SiluMul(spec)
            } else {
                Standalone::EltwiseAdd(spec)
            }
        }
        Kernel::FlashAttention => {
            let [lq, lk, head_dim] = dims(kernel, &shape)?;
            let (heads, kv_heads) = (ctx.arch.num_heads, ctx.arch.num_kv_heads);
            let mut spec = FlashAttentionSpec::select(lq, lk, heads, kv_heads, head_dim, true);
            match params.word("layout") {
                Some("seq-first") => spec.layout = QkvLayout::SeqFirst,
                Some("head-first") => spec.layout = QkvLayout::HeadFirst,
                _ => {}
            }
            Standalone::FlashAttention(spec)
        }
        other => return Err(KernelChoiceError::Unsupported(other.name().to_string())),
    };
    Ok(spec.launch())
}

fn gemm_spec(
    params: Params<'_>,
    device: &Device,
    [m, k, n]: [usize; 3],
    herd: Option<Herd>,
    tile: &[usize],
) -> Result<GemmSpec, KernelChoiceError> {
    let precision = match params.word("precision") {
        Some("bfp16") => Precision::Bfp16,
        _ => Precision::Bf16,
    };
    let epilogue = match params.word("epilogue") {
        Some("drain") => Some(Epilogue::Drain),
        Some("f32") => Some(Epilogue::F32),
        Some("fused-cast") => Some(Epilogue::FusedCast),
        _ => None,
    };
    let out_dtype = if epilogue == Some(Epilogue::F32) {
        Dtype::F32
    } else {
        Dtype::Bf16
    };
    let mut spec = GemmSpec::select(device, m, k, n, precision, out_dtype);
    spec.herd = herd.unwrap_or(spec.herd);
    if !tile.is_empty() {
        let [tile_m, tile_k_l2, tile_k_l1, tile_n]: [usize; 4] =
            tile.try_into().map_err(|_| KernelChoiceError::List {
                key: "tile",
                expected: "four (tile_m, tile_k_l2, tile_k_l1, tile_n) for a GEMM",
                got: tile.to_vec(),
            })?;
        spec.tile = GemmTile {
            tile_m,
            tile_k_l2,
            tile_k_l1,
            tile_n,
            epilogue: spec.tile.epilogue,
        };
    }
    spec.tile.epilogue = epilogue.unwrap_or(spec.tile.epilogue);
    Ok(spec)
}

fn herd(params: Params<'_>) -> Result<Option<Herd>, KernelChoiceError> {
    match params.dims("herd") {
        None => Ok(None),
        Some(h) => match h.as_slice() {
            [cols, rows] => Ok(Some(Herd([*cols, *rows]))),
            _ => Err(KernelChoiceError::List {
                key: "herd",
                expected: "two (columns, rows)",
                got: h,
            }),
        },
    }
}

fn dims<const N: usize>(kernel: Kernel, shape: &[usize]) -> Result<[usize; N], KernelChoiceError> {
    shape.try_into().map_err(|_| KernelChoiceError::Shape {
        kernel: kernel.name(),
        expected: N,
        got: shape.to_vec(),
    })
}

/// FLOPs the registry counts for a launch's throughput (GEMM 2·M·K·N, GEMV
/// 2·M·K, FlashAttention halved for causal), `None` for memory-bound kernels.
pub fn counted_flops(launch: &Launch) -> Option<f64> {
    match launch {
        Launch::Gemm { spec, .. } => Some(spec.flops()),
        Launch::Gemv { spec, .. } => Some(2.0 * spec.m as f64 * spec.k as f64),
        Launch::FlashAttention { spec, .. } => {
            let full = spec.executed_flops();
            Some(if spec.causal { full / 2.0 } else { full })
        }
        _ => None,
    }
}
