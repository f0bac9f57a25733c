//! What the hardware and its toolchain refuse: L1/L2 capacity with double
//! buffering, DMA channel counts, alignment, repeat counts (the GEMV K limit),
//! DMA strides, launches per call. A violation names the constraint, the
//! kernel, where it sits in a plan and the numbers, so a reader can act on it
//! without reading the emulator. Kernel-level rules live with each kernel's
//! spec (`kernels::*Spec::check`); this module holds the shared vocabulary.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::device::Device;
use super::kernels::Kernel;

/// The rule that was broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Constraint {
    /// Compute-tile data memory (64 KiB) with double buffering.
    L1Capacity,
    /// Memory-tile capacity (512 KiB).
    L2Capacity,
    /// DMA channels of a compute, memory or shim tile.
    DmaChannels,
    /// Shapes and tiles that must divide each other.
    Alignment,
    /// GEMV reduction length beyond what one launch can stream.
    GemvKLimit,
    /// DMA repeat counts (`push_queue` repeat in [0,255]).
    RepeatCount,
    /// DMA buffer-descriptor stride range.
    DmaStride,
    /// Herd shape outside the array or unsupported by the kernel.
    Herd,
    /// Operand layout the kernel cannot read (bf16 DMA cannot transpose).
    Layout,
    /// Launch grouping the toolchain cannot compile.
    Merge,
    /// Operand sizes that do not match the launch's shape.
    Shape,
    /// Buffer larger than one buffer object can address.
    BufferSize,
}

impl Constraint {
    pub fn label(self) -> &'static str {
        match self {
            Constraint::L1Capacity => "L1 capacity",
            Constraint::L2Capacity => "L2 capacity",
            Constraint::DmaChannels => "DMA channels",
            Constraint::Alignment => "alignment",
            Constraint::GemvKLimit => "GEMV K limit",
            Constraint::RepeatCount => "DMA repeat count",
            Constraint::DmaStride => "DMA stride",
            Constraint::Herd => "herd shape",
            Constraint::Layout => "layout",
            Constraint::Merge => "launch merge",
            Constraint::Shape => "operand shape",
            Constraint::BufferSize => "buffer size",
        }
    }
}

/// One refused condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConstraintViolation {
    pub constraint: Constraint,
    pub kernel: Kernel,
    /// Where in a plan (`layer/o_ffn/launch 3`); empty for a standalone kernel.
    pub location: String,
    /// The numbers: what was needed against what exists.
    pub detail: String,
}

impl fmt::Display for ConstraintViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.constraint.label(), self.kernel.name())?;
        if !self.location.is_empty() {
            write!(f, " at {}", self.location)?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// Collects violations for one kernel configuration.
#[derive(Debug)]
pub struct Checker<'d> {
    pub device: &'d Device,
    kernel: Kernel,
    found: Vec<ConstraintViolation>,
}

impl<'d> Checker<'d> {
    pub fn new(device: &'d Device, kernel: Kernel) -> Self {
        Self {
            device,
            kernel,
            found: Vec::new(),
        }
    }

    /// Records a violation when `ok` is false; `detail` is built only then.
    pub fn require(&mut self, ok: bool, constraint: Constraint, detail: impl FnOnce() -> String) {
        if !ok {
            self.found.push(ConstraintViolation {
                constraint,
                kernel: self.kernel,
                location: String::new(),
                detail: detail(),
            });
        }
    }

    /// L1 use per compute tile against the tile's data memory; `parts` names
    /// each buffer and its bytes.
    pub fn l1(&mut self, parts: &[(&str, usize)]) {
        let capacity = self.device.compute_tile.data_memory_bytes;
        let used: usize = parts.iter().map(|(_, b)| b).sum();
        self.require(used <= capacity, Constraint::L1Capacity, || {
            format!(
                "needs {used} B of {capacity} B per compute tile ({})",
                breakdown(parts)
            )
        });
    }

    /// L2 use per memory tile against its capacity.
    pub fn l2(&mut self, parts: &[(&str, usize)]) {
        let capacity = self.device.mem_tile.memory_bytes;
        let used: usize = parts.iter().map(|(_, b)| b).sum();
        self.require(used <= capacity, Constraint::L2Capacity, || {
            format!(
                "needs {used} B of {capacity} B per memory tile ({})",
                breakdown(parts)
            )
        });
    }

    /// The output rows split into whole blocks of `tile_m` rows per herd column
    /// (GEMM and GEMV alike).
    pub fn whole_row_blocks(&mut self, m: usize, tile_m: usize, cols: usize) {
        let m_block = tile_m * cols;
        self.require(
            m_block > 0 && m % m_block == 0,
            Constraint::Alignment,
            || {
                format!(
                    "M {m} is not a multiple of tile_m {tile_m} x herd columns {cols} = {m_block}"
                )
            },
        );
    }

    /// Herd within the array.
    pub fn herd_fits(&mut self, cols: usize, rows: usize) {
        let (max_c, max_r) = (self.device.columns, self.device.compute_rows);
        self.require(
            (1..=max_c).contains(&cols) && (1..=max_r).contains(&rows),
            Constraint::Herd,
            || format!("herd [{cols},{rows}] outside the {max_c}x{max_r} array"),
        );
    }

    /// DMA channels per column at each tile level.
    pub fn channels(&mut self, cols: usize, usage: ChannelUse) {
        let d = self.device;
        let levels = [
            (
                "compute tile",
                "in",
                usage.compute_in,
                d.compute_tile.dma_in,
            ),
            (
                "compute tile",
                "out",
                usage.compute_out,
                d.compute_tile.dma_out,
            ),
            ("memory tile", "in", usage.mem_in, d.mem_tile.dma_in),
            ("memory tile", "out", usage.mem_out, d.mem_tile.dma_out),
            ("shim tile", "in", usage.shim_in, d.shim_tile.dma_in),
            ("shim tile", "out", usage.shim_out, d.shim_tile.dma_out),
        ];
        for (level, dir, used, available) in levels {
            self.require(used <= available, Constraint::DmaChannels, || {
                format!(
                    "{level} needs {used} {dir} channels per column, has {available} (herd of {cols} columns)"
                )
            });
        }
    }

    pub fn finish(self) -> Vec<ConstraintViolation> {
        self.found
    }
}

/// DMA channels one column of a herd uses at each level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelUse {
    pub compute_in: usize,
    pub compute_out: usize,
    pub mem_in: usize,
    pub mem_out: usize,
    pub shim_in: usize,
    pub shim_out: usize,
}

fn breakdown(parts: &[(&str, usize)]) -> String {
    parts
        .iter()
        .filter(|(_, bytes)| *bytes > 0)
        .map(|(name, bytes)| format!("{name} {bytes}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Adds a location to violations found for one launch of a plan.
pub fn locate(mut found: Vec<ConstraintViolation>, location: &str) -> Vec<ConstraintViolation> {
    for v in &mut found {
        v.location = location.to_string();
    }
    found
}
