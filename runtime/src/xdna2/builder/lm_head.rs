//! The end of a plan: the final norm and the LM head, as a full-sequence GEMM
//! or on the last row in prefill, as the partitioned NPU GEMV or a CPU matvec
//! in decode.

use super::super::kernels::LmHeadSpec;
use super::super::plan::{BufferClass, HostOp, Launch, Step, Transform};
use super::calls::Part;
use super::dims::zero_pad;
use super::{Builder, Group, NormBuffers};

impl Builder<'_> {
    /// The final norm's weight and bias buffers, each when the model's norms
    /// have one.
    pub(super) fn final_norm(&mut self, class: BufferClass) -> NormBuffers {
        let (elements, levels) = self.dims.hidden_vector();
        let weight = self.arch.norm_weight.has_tensor().then(|| {
            let transforms = self.norm_transforms(levels.clone());
            self.tensor(
                "final_norm",
                class,
                "model.norm.weight".into(),
                elements,
                transforms,
            )
        });
        let bias = self.arch.norm_bias.then(|| {
            self.tensor(
                "final_norm_b",
                class,
                "model.norm.bias".into(),
                elements,
                zero_pad(levels, Vec::new()).into_iter().collect(),
            )
        });
        NormBuffers { weight, bias }
    }

    /// Gemma-2's final logit soft-cap on the host over `logits`, when the
    /// model caps them.
    fn soft_cap(&mut self, logits: &str) {
        if let Some(cap) = self.arch.final_logit_softcap {
            let n = self.buffers[logits].elements;
            self.epilogue.push(Step::Host(HostOp::SoftCap {
                x: logits.to_string(),
                n,
                cap,
            }));
        }
    }

    fn output_projection_tensor(&self) -> String {
        if self.arch.tie_word_embeddings {
            "model.embed_tokens.weight".to_string()
        } else {
            "lm_head.weight".to_string()
        }
    }

    pub(super) fn lm_head_prefill(&mut self) {
        let d = self.dims;
        let s = self.seq;
        let class = if self.options.last_token_lm_head {
            BufferClass::Host
        } else {
            self.weight_class()
        };
        let final_norm = self.final_norm(class);
        if self.options.last_token_lm_head {
            self.lm_head_on_one_row(&final_norm, true);
            return;
        }
        let xf = self.act("xf_all", s * d.hidden);
        let norm = Group {
            name: "final_norm",
            launches: vec![self.norm_launch("x", &final_norm, &xf, s)],
            outputs: vec![xf.clone()],
        };
        let parts = self.options.lm_head_parts.max(1);
        let part_n = d.vocab.div_ceil(parts).div_ceil(512) * 512;
        let tensor = self.output_projection_tensor();
        let mut launches = Vec::new();
        let mut outputs = Vec::new();
        for p in 0..parts {
            let start = (p * part_n).min(d.vocab);
            let rows = ((p + 1) * part_n).min(d.vocab) - start;
            let mut transforms = vec![Transform::Rows {
                start,
                rows,
                padded_rows: part_n,
            }];
            transforms.extend(zero_pad(Vec::new(), d.hidden_levels()));
            transforms.push(Transform::Transpose);
            let w = self.tensor(
                &format!("lm_head.{p}"),
                self.weight_class(),
                tensor.clone(),
                part_n * d.hidden,
                transforms,
            );
            let out = self.act(&format!("logits.{p}"), s * part_n);
            launches.push(self.gemm(&xf, &w, &out, d.hidden, part_n));
            outputs.push(out);
        }
        let head = Group {
            name: "lm_head_gemm",
            launches,
            outputs: outputs.clone(),
        };
        self.emit_into(norm, Part::Epilogue);
        self.emit_into(head, Part::Epilogue);
        for logits in &outputs {
            self.soft_cap(logits);
        }
    }

    /// The final norm on the host (weight `final_norm`) of one row of `x` (the
    /// last row of the prompt with `last_row`), then the LM-head GEMV on it.
    pub(super) fn lm_head_on_one_row(&mut self, final_norm: &NormBuffers, last_row: bool) {
        let d = self.dims;
        let xf = self.act("xf", d.hidden);
        let norm = self.host_norm("x", final_norm, &xf, last_row);
        self.epilogue.push(Step::Host(norm));
        self.lm_head_gemv(&xf);
        self.soft_cap("logits");
    }

    /// The partitioned LM-head GEMV on one normalized row `x` (NPU), or a
    /// CPU matvec.
    pub(super) fn lm_head_gemv(&mut self, x: &str) {
        let launches = match self.lm_head(x) {
            LmHead::Npu(launches) => launches,
            LmHead::Host(matvec) => {
                self.epilogue.push(Step::Host(matvec));
                return;
            }
        };
        // More partitions than one call may hold run as several calls.
        let per_call = if self.options.lm_head_one_call {
            launches.len()
        } else {
            self.device.limits.launches_per_call_max
        };
        for chunk in launches.chunks(per_call.max(1)) {
            let group = Group {
                name: "lm_head_gemv",
                launches: chunk.to_vec(),
                outputs: vec!["logits".to_string()],
            };
            self.emit_into(group, Part::Epilogue);
        }
    }

    /// The LM head on one normalized row `x`, its buffers declared: the
    /// partitions' GEMV launches on the NPU, or the CPU matvec.
    pub(super) fn lm_head(&mut self, x: &str) -> LmHead {
        let d = self.dims;
        let tensor = self.output_projection_tensor();
        let logits = self.act("logits", d.vocab);
        if !self.options.npu_lm_head {
            let w = self.tensor(
                "lm_head",
                BufferClass::Host,
                tensor,
                d.vocab * d.hidden,
                zero_pad(Vec::new(), d.hidden_levels())
                    .into_iter()
                    .collect(),
            );
            return LmHead::Host(HostOp::Matvec {
                w,
                x: x.into(),
                out: logits,
                m: d.vocab,
                k: d.hidden,
            });
        }
        // Double-buffered whatever `omit_pingpong` says: the LM head is its
        // own module (the option is module-global), and the reference's
        // 8-partition LM head streamed 38.9 GB/s, faster than the registry's
        // double-buffered 16384x2048 GEMV (calibration §4).
        let spec = LmHeadSpec::select(
            self.device,
            d.vocab,
            d.hidden,
            self.options.lm_head_parts.max(1),
        );
        let class = self.weight_class();
        LmHead::Npu(
            (0..spec.parts)
                .map(|part| {
                    let rows = spec.rows(part);
                    let mut transforms = vec![Transform::Rows {
                        start: rows.start,
                        rows: rows.len(),
                        padded_rows: spec.part.m,
                    }];
                    transforms.extend(zero_pad(Vec::new(), d.hidden_levels()));
                    let w = self.tensor(
                        &format!("lm_head.{part}"),
                        class,
                        tensor.clone(),
                        spec.part.m * d.hidden,
                        transforms,
                    );
                    Launch::LmHeadGemv {
                        w,
                        x: x.into(),
                        out: logits.clone(),
                        spec,
                        part,
                    }
                })
                .collect(),
        )
    }
}

/// Where a plan's LM head runs.
pub(super) enum LmHead {
    /// The partitions' GEMVs.
    Npu(Vec<Launch>),
    /// A CPU matvec.
    Host(HostOp),
}
