//! Operations with typed parameters: one variant per operation, read once from the
//! language's `key=value` parameters ([`Op::read`]) and written back
//! ([`Op::params`]). Reading enforces the table's kinds and ranges
//! ([`ParamSpec::bound`]), so whatever comes from a trajectory or a hand-edited
//! bundle.json is a valid operation from here on. Keys the operation does not take
//! are left alone: the front end reports them in trajectories, and the executor
//! hands a fix the failing action's whole parameter map.

use std::collections::BTreeMap;
use std::str::FromStr;

use super::operations::{OpKind, ParamSpec};
use super::words::{BufferKey, RopeConvention, RopeScaling, UnknownWord, WeightOrigin};
use super::Value;
use crate::xdna2::kernels::{Epilogue, Herd, Kernel, Precision, QkvLayout};
use crate::xdna2::plan::FusedKv;

/// One operation with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    CheckScope,
    LoadWeights {
        source: Option<WeightOrigin>,
        seed: Option<u64>,
    },
    BuildReference,
    CompareReference {
        against: String,
        tol: Option<f64>,
    },
    RopeConvention {
        convention: RopeConvention,
    },
    RopeScaling {
        scaling: RopeScaling,
    },
    EnumerateKernels,
    SelectTiling(KernelChoice),
    ValidateKernel(KernelCheck),
    RegisterKernel {
        kernel: Kernel,
        shape: Option<Vec<usize>>,
    },
    PadDims,
    BuildBlock {
        layer: Option<usize>,
    },
    PadHeads {
        multiple: usize,
    },
    BiasAfterRope,
    QkNorm,
    ValidateBlock {
        layer: Option<usize>,
        cosine_min: Option<f64>,
        position_min: Option<f64>,
    },
    BuildModel,
    VerifyModel {
        tokens: Option<usize>,
        top_k: Option<usize>,
    },
    DiagnoseLayers,
    MergeLaunches {
        group: String,
    },
    SplitLaunches {
        group: String,
    },
    ReuseStaticWeights {
        key: Option<BufferKey>,
    },
    MarkIntermediates,
    AlignLayout {
        layout: QkvLayout,
    },
    LastTokenLmHead,
    TuneTiling {
        kernel: Kernel,
        tile: Option<Vec<usize>>,
        herd: Option<Herd>,
    },
    ProfilePrefill {
        seq_len: Option<usize>,
        warmup: Option<usize>,
        iters: Option<usize>,
    },
    GemvDecode {
        herd: Option<Herd>,
    },
    CpuDecodeAttention,
    PretransposeWeights,
    PartitionLmHead {
        parts: usize,
    },
    CascadeFfn {
        rows: usize,
    },
    OmitPingpong,
    FusedDecode {
        kv: Option<FusedKv>,
        channels: Option<usize>,
    },
    ProfileDecode {
        tokens: Option<usize>,
        seq_len: Option<usize>,
    },
    WriteArtifacts,
    RecordLessons,
    Evaluate {
        fresh_process: Option<bool>,
    },
    NoteHost {
        text: Option<String>,
    },
}

/// `select-tiling`: a kernel configuration at one shape.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelChoice {
    pub kernel: Kernel,
    pub shape: Vec<usize>,
    pub herd: Option<Herd>,
    /// GEMM `[tile_m, tile_k_l2, tile_k_l1, tile_n]`; row kernels `[tile]`.
    pub tile: Option<Vec<usize>>,
    pub precision: Option<Precision>,
    pub epilogue: Option<Epilogue>,
    pub layout: Option<QkvLayout>,
}

/// `validate-kernel`: one kernel against the f32 reference.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelCheck {
    pub kernel: Kernel,
    pub shape: Vec<usize>,
    pub rtol: Option<f64>,
    pub atol: Option<f64>,
}

/// Why parameters do not make an operation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    #[error("`{op}` needs parameter `{param}`")]
    Missing { op: OpKind, param: &'static str },
    #[error("`{op}` parameter `{param}` takes {expected}, found {found}")]
    WrongKind {
        op: OpKind,
        param: &'static str,
        expected: &'static str,
        found: String,
    },
    #[error("`{op}` parameter `{param}`: {source}")]
    Word {
        op: OpKind,
        param: &'static str,
        source: UnknownWord,
    },
    #[error("`{op}` parameter `{param}` = {value}: {rule}")]
    OutOfRange {
        op: OpKind,
        param: &'static str,
        value: String,
        rule: &'static str,
    },
}

impl Op {
    /// Reads operation `kind` from `params` (trajectory or bundle.json values).
    pub fn read(kind: OpKind, params: &BTreeMap<String, Value>) -> Result<Op, ParamError> {
        let r = Reader { kind, params };
        use OpKind as K;
        Ok(match kind {
            K::CheckScope => Op::CheckScope,
            K::LoadWeights => Op::LoadWeights {
                source: r.opt_word("source")?,
                seed: r.opt_int("seed")?.map(|s| s as u64),
            },
            K::BuildReference => Op::BuildReference,
            K::CompareReference => Op::CompareReference {
                against: r.text("against")?,
                tol: r.opt_float("tol")?,
            },
            K::RopeConvention => Op::RopeConvention {
                convention: r.word("convention")?,
            },
            K::RopeScaling => Op::RopeScaling {
                scaling: r.word("scaling")?,
            },
            K::EnumerateKernels => Op::EnumerateKernels,
            K::SelectTiling => Op::SelectTiling(KernelChoice {
                kernel: r.word("kernel")?,
                shape: r.dims("shape")?,
                herd: r.opt_herd("herd")?,
                tile: r.opt_dims("tile")?,
                precision: r.opt_word("precision")?,
                epilogue: r.opt_word("epilogue")?,
                layout: r.opt_word("layout")?,
            }),
            K::ValidateKernel => Op::ValidateKernel(KernelCheck {
                kernel: r.word("kernel")?,
                shape: r.dims("shape")?,
                rtol: r.opt_float("rtol")?,
                atol: r.opt_float("atol")?,
            }),
            K::RegisterKernel => Op::RegisterKernel {
                kernel: r.word("kernel")?,
                shape: r.opt_dims("shape")?,
            },
            K::PadDims => Op::PadDims,
            K::BuildBlock => Op::BuildBlock {
                layer: r.opt_int("layer")?,
            },
            K::PadHeads => Op::PadHeads {
                multiple: r.int("multiple")?,
            },
            K::BiasAfterRope => Op::BiasAfterRope,
            K::QkNorm => Op::QkNorm,
            K::ValidateBlock => Op::ValidateBlock {
                layer: r.opt_int("layer")?,
                cosine_min: r.opt_float("cosine_min")?,
                position_min: r.opt_float("position_min")?,
            },
            K::BuildModel => Op::BuildModel,
            K::VerifyModel => Op::VerifyModel {
                tokens: r.opt_int("tokens")?,
                top_k: r.opt_int("top_k")?,
            },
            K::DiagnoseLayers => Op::DiagnoseLayers,
            K::MergeLaunches => Op::MergeLaunches {
                group: r.text("group")?,
            },
            K::SplitLaunches => Op::SplitLaunches {
                group: r.text("group")?,
            },
            K::ReuseStaticWeights => Op::ReuseStaticWeights {
                key: r.opt_word("key")?,
            },
            K::MarkIntermediates => Op::MarkIntermediates,
            K::AlignLayout => Op::AlignLayout {
                layout: r.word("layout")?,
            },
            K::LastTokenLmHead => Op::LastTokenLmHead,
            K::TuneTiling => Op::TuneTiling {
                kernel: r.word("kernel")?,
                tile: r.opt_dims("tile")?,
                herd: r.opt_herd("herd")?,
            },
            K::ProfilePrefill => Op::ProfilePrefill {
                seq_len: r.opt_int("seq_len")?,
                warmup: r.opt_int("warmup")?,
                iters: r.opt_int("iters")?,
            },
            K::GemvDecode => Op::GemvDecode {
                herd: r.opt_herd("herd")?,
            },
            K::CpuDecodeAttention => Op::CpuDecodeAttention,
            K::PretransposeWeights => Op::PretransposeWeights,
            K::PartitionLmHead => Op::PartitionLmHead {
                parts: r.int("parts")?,
            },
            K::CascadeFfn => Op::CascadeFfn {
                rows: r.int("rows")?,
            },
            K::OmitPingpong => Op::OmitPingpong,
            K::FusedDecode => Op::FusedDecode {
                kv: r.opt_word("kv")?,
                channels: r.opt_int("channels")?,
            },
            K::ProfileDecode => Op::ProfileDecode {
                tokens: r.opt_int("tokens")?,
                seq_len: r.opt_int("seq_len")?,
            },
            K::WriteArtifacts => Op::WriteArtifacts,
            K::RecordLessons => Op::RecordLessons,
            K::Evaluate => Op::Evaluate {
                fresh_process: r.opt_bool("fresh_process")?,
            },
            K::NoteHost => Op::NoteHost {
                text: r.opt_text("text")?,
            },
        })
    }

    /// The operation this is.
    pub fn kind(&self) -> OpKind {
        use OpKind as K;
        match self {
            Op::CheckScope => K::CheckScope,
            Op::LoadWeights { .. } => K::LoadWeights,
            Op::BuildReference => K::BuildReference,
            Op::CompareReference { .. } => K::CompareReference,
            Op::RopeConvention { .. } => K::RopeConvention,
            Op::RopeScaling { .. } => K::RopeScaling,
            Op::EnumerateKernels => K::EnumerateKernels,
            Op::SelectTiling(_) => K::SelectTiling,
            Op::ValidateKernel(_) => K::ValidateKernel,
            Op::RegisterKernel { .. } => K::RegisterKernel,
            Op::PadDims => K::PadDims,
            Op::BuildBlock { .. } => K::BuildBlock,
            Op::PadHeads { .. } => K::PadHeads,
            Op::BiasAfterRope => K::BiasAfterRope,
            Op::QkNorm => K::QkNorm,
            Op::ValidateBlock { .. } => K::ValidateBlock,
            Op::BuildModel => K::BuildModel,
            Op::VerifyModel { .. } => K::VerifyModel,
            Op::DiagnoseLayers => K::DiagnoseLayers,
            Op::MergeLaunches { .. } => K::MergeLaunches,
            Op::SplitLaunches { .. } => K::SplitLaunches,
            Op::ReuseStaticWeights { .. } => K::ReuseStaticWeights,
            Op::MarkIntermediates => K::MarkIntermediates,
            Op::AlignLayout { .. } => K::AlignLayout,
            Op::LastTokenLmHead => K::LastTokenLmHead,
            Op::TuneTiling { .. } => K::TuneTiling,
            Op::ProfilePrefill { .. } => K::ProfilePrefill,
            Op::GemvDecode { .. } => K::GemvDecode,
            Op::CpuDecodeAttention => K::CpuDecodeAttention,
            Op::PretransposeWeights => K::PretransposeWeights,
            Op::PartitionLmHead { .. } => K::PartitionLmHead,
            Op::CascadeFfn { .. } => K::CascadeFfn,
            Op::OmitPingpong => K::OmitPingpong,
            Op::FusedDecode { .. } => K::FusedDecode,
            Op::ProfileDecode { .. } => K::ProfileDecode,
            Op::WriteArtifacts => K::WriteArtifacts,
            Op::RecordLessons => K::RecordLessons,
            Op::Evaluate { .. } => K::Evaluate,
            Op::NoteHost { .. } => K::NoteHost,
        }
    }

    /// The parameters as the language writes them (what [`Op::read`] reads back).
    pub fn params(&self) -> BTreeMap<String, Value> {
        let mut w = Writer::default();
        match self {
            Op::CheckScope
            | Op::BuildReference
            | Op::EnumerateKernels
            | Op::PadDims
            | Op::BiasAfterRope
            | Op::QkNorm
            | Op::BuildModel
            | Op::DiagnoseLayers
            | Op::MarkIntermediates
            | Op::LastTokenLmHead
            | Op::CpuDecodeAttention
            | Op::PretransposeWeights
            | Op::OmitPingpong
            | Op::WriteArtifacts
            | Op::RecordLessons => {}
            Op::LoadWeights { source, seed } => {
                w.word("source", *source);
                w.int("seed", seed.map(|s| s as usize));
            }
            Op::CompareReference { against, tol } => {
                w.text("against", Some(against));
                w.float("tol", *tol);
            }
            Op::RopeConvention { convention } => w.word("convention", Some(*convention)),
            Op::RopeScaling { scaling } => w.word("scaling", Some(*scaling)),
            Op::SelectTiling(c) => {
                w.word("kernel", Some(c.kernel));
                w.dims("shape", Some(&c.shape));
                w.dims("herd", c.herd.as_ref().map(|h| &h.0[..]));
                w.dims("tile", c.tile.as_deref());
                w.word("precision", c.precision);
                w.word("epilogue", c.epilogue);
                w.word("layout", c.layout);
            }
            Op::ValidateKernel(c) => {
                w.word("kernel", Some(c.kernel));
                w.dims("shape", Some(&c.shape));
                w.float("rtol", c.rtol);
                w.float("atol", c.atol);
            }
            Op::RegisterKernel { kernel, shape } => {
                w.word("kernel", Some(*kernel));
                w.dims("shape", shape.as_deref());
            }
            Op::BuildBlock { layer } => w.int("layer", *layer),
            Op::PadHeads { multiple } => w.int("multiple", Some(*multiple)),
            Op::ValidateBlock {
                layer,
                cosine_min,
                position_min,
            } => {
                w.int("layer", *layer);
                w.float("cosine_min", *cosine_min);
                w.float("position_min", *position_min);
            }
            Op::VerifyModel { tokens, top_k } => {
                w.int("tokens", *tokens);
                w.int("top_k", *top_k);
            }
            Op::MergeLaunches { group } | Op::SplitLaunches { group } => {
                w.text("group", Some(group))
            }
            Op::ReuseStaticWeights { key } => w.word("key", *key),
            Op::AlignLayout { layout } => w.word("layout", Some(*layout)),
            Op::TuneTiling { kernel, tile, herd } => {
                w.word("kernel", Some(*kernel));
                w.dims("tile", tile.as_deref());
                w.dims("herd", herd.as_ref().map(|h| &h.0[..]));
            }
            Op::ProfilePrefill {
                seq_len,
                warmup,
                iters,
            } => {
                w.int("seq_len", *seq_len);
                w.int("warmup", *warmup);
                w.int("iters", *iters);
            }
            Op::GemvDecode { herd } => w.dims("herd", herd.as_ref().map(|h| &h.0[..])),
            Op::PartitionLmHead { parts } => w.int("parts", Some(*parts)),
            Op::CascadeFfn { rows } => w.int("rows", Some(*rows)),
            Op::FusedDecode { kv, channels } => {
                w.word("kv", *kv);
                w.int("channels", *channels);
            }
            Op::ProfileDecode { tokens, seq_len } => {
                w.int("tokens", *tokens);
                w.int("seq_len", *seq_len);
            }
            Op::Evaluate { fresh_process } => {
                if let Some(b) = fresh_process {
                    w.0.insert("fresh_process".into(), Value::Bool(*b));
                }
            }
            Op::NoteHost { text } => w.text("text", text.as_deref()),
        }
        w.0
    }
}

/// Typed reads of one operation's parameters, checked against its table row.
struct Reader<'p> {
    kind: OpKind,
    params: &'p BTreeMap<String, Value>,
}

impl Reader<'_> {
    fn spec(&self, key: &'static str) -> &'static ParamSpec {
        self.kind
            .spec()
            .param(key)
            .unwrap_or_else(|| panic!("`{}` has no parameter `{key}` in its table row", self.kind))
    }

    fn get(&self, key: &'static str) -> Option<&Value> {
        self.params.get(key)
    }

    fn required<T>(&self, key: &'static str, value: Option<T>) -> Result<T, ParamError> {
        value.ok_or(ParamError::Missing {
            op: self.kind,
            param: self.spec(key).name,
        })
    }

    fn wrong(&self, key: &'static str, expected: &'static str, found: &Value) -> ParamError {
        ParamError::WrongKind {
            op: self.kind,
            param: self.spec(key).name,
            expected,
            found: describe(found),
        }
    }

    fn out_of_range(&self, key: &'static str, value: String, rule: &'static str) -> ParamError {
        ParamError::OutOfRange {
            op: self.kind,
            param: self.spec(key).name,
            value,
            rule,
        }
    }

    fn opt_word<T: FromStr<Err = UnknownWord>>(
        &self,
        key: &'static str,
    ) -> Result<Option<T>, ParamError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Text(word)) => word.parse().map(Some).map_err(|source| ParamError::Word {
                op: self.kind,
                param: self.spec(key).name,
                source,
            }),
            Some(other) => Err(self.wrong(key, "a word", other)),
        }
    }

    fn word<T: FromStr<Err = UnknownWord>>(&self, key: &'static str) -> Result<T, ParamError> {
        let value = self.opt_word(key)?;
        self.required(key, value)
    }

    fn opt_text(&self, key: &'static str) -> Result<Option<String>, ParamError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Text(text)) => Ok(Some(text.clone())),
            Some(other) => Err(self.wrong(key, "text", other)),
        }
    }

    fn text(&self, key: &'static str) -> Result<String, ParamError> {
        let value = self.opt_text(key)?;
        self.required(key, value)
    }

    fn opt_bool(&self, key: &'static str) -> Result<Option<bool>, ParamError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.wrong(key, "true or false", other)),
        }
    }

    fn opt_int(&self, key: &'static str) -> Result<Option<usize>, ParamError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Int(i)) => self.integer(key, *i).map(Some),
            Some(other) => Err(self.wrong(key, "an integer", other)),
        }
    }

    fn int(&self, key: &'static str) -> Result<usize, ParamError> {
        let value = self.opt_int(key)?;
        self.required(key, value)
    }

    fn integer(&self, key: &'static str, value: i64) -> Result<usize, ParamError> {
        let bound = self.spec(key).bound;
        match usize::try_from(value) {
            Ok(n) if bound.admits(n as f64) => Ok(n),
            _ => Err(self.out_of_range(key, value.to_string(), bound.rule())),
        }
    }

    fn opt_float(&self, key: &'static str) -> Result<Option<f64>, ParamError> {
        let value = match self.get(key) {
            None => return Ok(None),
            Some(Value::Int(i)) => *i as f64,
            Some(Value::Float(f)) => *f,
            Some(other) => return Err(self.wrong(key, "a number", other)),
        };
        let bound = self.spec(key).bound;
        if value.is_finite() && bound.admits(value) {
            Ok(Some(value))
        } else {
            Err(self.out_of_range(key, format!("{value:?}"), bound.rule()))
        }
    }

    fn opt_dims(&self, key: &'static str) -> Result<Option<Vec<usize>>, ParamError> {
        let items = match self.get(key) {
            None => return Ok(None),
            Some(Value::IntList(items)) => items,
            Some(other) => return Err(self.wrong(key, "a list of integers", other)),
        };
        let spec = self.spec(key);
        if !spec.components.is_empty() && items.len() > spec.components.len() {
            return Err(self.out_of_range(
                key,
                format!("{items:?}"),
                "more slots than the parameter has",
            ));
        }
        items
            .iter()
            .map(|&i| self.integer(key, i))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn dims(&self, key: &'static str) -> Result<Vec<usize>, ParamError> {
        let value = self.opt_dims(key)?;
        self.required(key, value)
    }

    fn opt_herd(&self, key: &'static str) -> Result<Option<Herd>, ParamError> {
        match self.opt_dims(key)? {
            None => Ok(None),
            Some(dims) => match dims[..] {
                [columns, rows] => Ok(Some(Herd([columns, rows]))),
                _ => Err(self.out_of_range(key, format!("{dims:?}"), "a herd is [columns, rows]")),
            },
        }
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format!("{f:?}"),
        Value::IntList(items) => format!("{items:?}"),
        Value::Text(t) => format!("`{t}`"),
        Value::Quantity { value, unit } => format!("{value} {unit}"),
    }
}

/// Builds a parameter map, skipping absent optional parameters.
#[derive(Default)]
struct Writer(BTreeMap<String, Value>);

impl Writer {
    fn word<T: std::fmt::Display>(&mut self, key: &str, value: Option<T>) {
        if let Some(v) = value {
            self.0.insert(key.into(), Value::Text(v.to_string()));
        }
    }

    fn text(&mut self, key: &str, value: Option<&str>) {
        self.word(key, value);
    }

    fn int(&mut self, key: &str, value: Option<usize>) {
        if let Some(v) = value {
            self.0.insert(key.into(), Value::Int(v as i64));
        }
    }

    fn float(&mut self, key: &str, value: Option<f64>) {
        if let Some(v) = value {
            self.0.insert(key.into(), Value::Float(v));
        }
    }

    fn dims(&mut self, key: &str, value: Option<&[usize]>) {
        if let Some(v) = value {
            let list = v.iter().map(|&x| x as i64).collect();
            self.0.insert(key.into(), Value::IntList(list));
        }
    }
}
