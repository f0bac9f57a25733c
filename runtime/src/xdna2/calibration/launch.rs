//! A kernel point's subject as the standalone launch the registry harness timed: the
//! kernel's spec selected for its shape, the recorded herd, tile and epilogue applied,
//! and refused when the hardware would refuse it.

use crate::xdna2::device::Device;
use crate::xdna2::kernels::{
    Dtype, EltwiseSpec, FlashAttentionSpec, GemmSpec, GemvSpec, Herd, Kernel, NormSpec, Precision,
    RopeSpec,
};
use crate::xdna2::plan::{Launch, Standalone};

use super::{CalibrationError, KernelSubject};

impl KernelSubject {
    fn dims<const N: usize>(&self, id: &str) -> Result<[usize; N], CalibrationError> {
        self.shape
            .clone()
            .try_into()
            .map_err(|_| CalibrationError::Point {
                id: id.to_string(),
                message: format!("{} needs a shape of {N} dimensions", self.kernel.name()),
            })
    }

    /// The standalone launch the registry timed.
    pub fn launch(&self, id: &str, device: &Device) -> Result<Launch, CalibrationError> {
        let herd = self.herd.unwrap_or(Herd::ROW);
        let missing = |what: &str| CalibrationError::Point {
            id: id.to_string(),
            message: format!("{} needs {what}", self.kernel.name()),
        };
        let spec = match self.kernel {
            Kernel::Gemm => {
                let [m, k, n] = self.dims(id)?;
                let mut spec = GemmSpec::select(device, m, k, n, Precision::Bf16, Dtype::Bf16);
                spec.herd = self.herd.unwrap_or(spec.herd);
                if let Some([tm, kl2, kl1, tn]) = self
                    .tile
                    .as_deref()
                    .and_then(|t| <[usize; 4]>::try_from(t).ok())
                {
                    spec.tile = crate::xdna2::kernels::GemmTile {
                        tile_m: tm,
                        tile_k_l2: kl2,
                        tile_k_l1: kl1,
                        tile_n: tn,
                        epilogue: spec.tile.epilogue,
                    };
                }
                spec.tile.epilogue = self.epilogue.unwrap_or(spec.tile.epilogue);
                Standalone::Gemm(spec)
            }
            Kernel::Gemv => {
                let [m, k] = self.dims(id)?;
                let mut spec = GemvSpec::select(device, m, k, herd);
                if let Some([tile_m, m_input]) = self
                    .tile
                    .as_deref()
                    .and_then(|t| <[usize; 2]>::try_from(t).ok())
                {
                    spec.tile.tile_m = tile_m;
                    spec.tile.m_input = m_input;
                }
                spec.tile.k_split = self.k_split.unwrap_or(spec.tile.k_split);
                Standalone::Gemv(spec)
            }
            Kernel::FlashAttention => {
                let [lq, lk] = self.dims(id)?;
                let heads = self.heads.ok_or_else(|| missing("heads"))?;
                let kv = self.kv_heads.ok_or_else(|| missing("kv_heads"))?;
                let hd = self.head_dim.ok_or_else(|| missing("head_dim"))?;
                Standalone::FlashAttention(FlashAttentionSpec::select(
                    lq,
                    lk,
                    heads,
                    kv,
                    hd,
                    self.causal.unwrap_or(true),
                ))
            }
            Kernel::Rmsnorm => {
                let [rows, cols] = self.dims(id)?;
                let spec = NormSpec {
                    rows,
                    cols,
                    herd,
                    weighted: true,
                    real_cols: None,
                };
                Standalone::Rmsnorm(spec, 1e-5)
            }
            Kernel::EltwiseAdd => {
                let [n] = self.dims(id)?;
                Standalone::EltwiseAdd(EltwiseSpec::select(device, n, herd))
            }
            Kernel::SiluMul => {
                let [n] = self.dims(id)?;
                Standalone::SiluMul(EltwiseSpec::select(device, n, herd))
            }
            Kernel::Rope => {
                let [rows, head_dim] = self.dims(id)?;
                Standalone::Rope(RopeSpec {
                    rows,
                    heads: 1,
                    head_dim,
                    herd,
                    rotary_dim: None,
                })
            }
            other => {
                return Err(CalibrationError::Point {
                    id: id.to_string(),
                    message: format!("no standalone model for {}", other.name()),
                })
            }
        };
        let launch = spec.launch();
        let violations = launch.check(device);
        if violations.is_empty() {
            Ok(launch)
        } else {
            Err(CalibrationError::Refused {
                id: id.to_string(),
                violations,
            })
        }
    }
}
