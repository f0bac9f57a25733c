//! A plan checked against the device and against itself: every launch's
//! placement limits, call-level merge limits, operand buffers declared, bound
//! and large enough, GEMM weights pre-transposed, buffer objects addressable.

use super::super::constraints::{locate, Constraint, ConstraintViolation};
use super::super::device::Device;
use super::super::kernels::{Kernel, NormSpec};
use super::{Buffer, Call, Launch, Plan, Section, Transform, WeightSource};

impl Plan {
    /// Checks every launch and every call against the device and the plan's
    /// own consistency (bindings name declared buffers, sizes match).
    pub fn check(&self, device: &Device) -> Result<(), Vec<ConstraintViolation>> {
        let mut found = Vec::new();
        for (section, call) in self.calls() {
            found.extend(self.check_call(device, section, call));
        }
        for (name, buffer) in &self.buffers {
            found.extend(self.check_buffer(device, name, buffer));
        }
        if let Some(layout) = &self.fused {
            found.extend(self.check_fused(device, layout));
        }
        if found.is_empty() {
            Ok(())
        } else {
            Err(found)
        }
    }

    fn check_call(
        &self,
        device: &Device,
        section: Section,
        call: &Call,
    ) -> Vec<ConstraintViolation> {
        let mut found = Vec::new();
        let first_kernel = call.launches.first().map_or(Kernel::Gemm, Launch::kernel);
        let call_at = format!("{}/{}", section.name(), call.name);
        let max = device.limits.launches_per_call_max;
        // The fused dispatch is one persistent design whose herds stay
        // configured, not a chain of launches: its limits are `check_fused`'s.
        if call.launches.len() > max && self.fused.is_none() {
            found.push(violation(
                Constraint::Merge,
                first_kernel,
                &call_at,
                format!(
                    "{} launches in one call; the toolchain fails beyond {max}",
                    call.launches.len()
                ),
            ));
        }
        let has_fa = call
            .launches
            .iter()
            .any(|l| l.kernel() == Kernel::FlashAttention);
        if has_fa && call.launches.len() > 1 {
            found.push(violation(
                Constraint::Merge,
                Kernel::FlashAttention,
                &call_at,
                format!(
                "flash attention is a merge hard stop but shares its call with {} other launches",
                call.launches.len() - 1
            ),
            ));
        }
        for (i, launch) in call.launches.iter().enumerate() {
            let at = format!("{call_at}/launch {i}");
            found.extend(locate(launch.check(device), &at));
            found.extend(self.check_operands(launch, call, &at));
        }
        found
    }

    /// Buffers exist, are bound to the call, and hold what the spec needs.
    fn check_operands(&self, launch: &Launch, call: &Call, at: &str) -> Vec<ConstraintViolation> {
        let mut found = Vec::new();
        let kernel = launch.kernel();
        let mut names: Vec<&str> = launch.inputs();
        names.push(launch.output());
        for name in names {
            let bound = call.bindings.iter().any(|b| b.buffer == name);
            if !self.buffers.contains_key(name) || !bound {
                found.push(violation(
                    Constraint::Shape,
                    kernel,
                    at,
                    format!(
                        "buffer {name} is {}",
                        if bound {
                            "not declared"
                        } else {
                            "not bound to the call"
                        }
                    ),
                ));
            }
        }
        for (name, needed) in operand_sizes(launch) {
            if let Some(buffer) = self.buffers.get(name) {
                if buffer.elements < needed {
                    found.push(violation(
                        Constraint::Shape,
                        kernel,
                        at,
                        format!(
                            "buffer {name} holds {} elements, the launch needs {needed}",
                            buffer.elements
                        ),
                    ));
                }
            }
        }
        if let Launch::Gemm { b, .. } = launch {
            let transposed = self.buffers.get(b.as_str()).is_some_and(|buf| {
                matches!(&buf.source, Some(WeightSource::Tensor { transforms, .. }) if transforms.contains(&Transform::Transpose))
            });
            let is_weight = self
                .buffers
                .get(b.as_str())
                .is_some_and(|buf| buf.source.is_some());
            if is_weight && !transposed {
                found.push(violation(Constraint::Layout, kernel, at, format!(
                    "operand B {b} is a checkpoint [out,in] tensor; GEMM reads [K,N] and bf16 DMA cannot transpose (pre-transpose it at setup)"
                )));
            }
        }
        found
    }
}

impl Plan {
    fn check_buffer(
        &self,
        device: &Device,
        name: &str,
        buffer: &Buffer,
    ) -> Vec<ConstraintViolation> {
        let max = device.limits.buffer_offset_max_bytes as f64;
        if buffer.bytes() <= max {
            return Vec::new();
        }
        let user = self
            .calls()
            .flat_map(|(_, c)| &c.launches)
            .find(|l| l.output() == name || l.inputs().contains(&name))
            .map_or(Kernel::Gemm, Launch::kernel);
        vec![violation(
            Constraint::BufferSize,
            user,
            name,
            format!(
                "{} bytes exceed the {max} bytes one buffer object can address",
                buffer.bytes()
            ),
        )]
    }
}

fn violation(
    constraint: Constraint,
    kernel: Kernel,
    at: &str,
    detail: String,
) -> ConstraintViolation {
    ConstraintViolation {
        constraint,
        kernel,
        location: at.to_string(),
        detail,
    }
}

/// Elements each named operand of a launch must hold.
fn operand_sizes(launch: &Launch) -> Vec<(&str, usize)> {
    match launch {
        Launch::Gemm { a, b, out, spec } => vec![
            (a, spec.m * spec.k),
            (b, spec.k * spec.n),
            (out, spec.m * spec.n),
        ],
        Launch::Gemv {
            w,
            x,
            out,
            residual,
            spec,
        } => {
            let mut v = vec![
                (w.as_str(), spec.m * spec.k),
                (x.as_str(), spec.k),
                (out.as_str(), spec.m),
            ];
            v.extend(residual.as_deref().map(|r| (r, spec.m)));
            v
        }
        Launch::GemvSwiglu {
            x,
            norm,
            gate,
            up,
            out,
            spec,
            ..
        } => vec![
            (x, spec.k),
            (norm, spec.k),
            (gate, spec.m * spec.k),
            (up, spec.m * spec.k),
            (out, spec.m),
        ],
        Launch::Rmsnorm {
            x,
            weight,
            out,
            spec,
            ..
        } => norm_operands(x, out, spec, [weight.as_deref(), None]),
        Launch::Layernorm {
            x,
            weight,
            bias,
            out,
            spec,
            ..
        } => norm_operands(x, out, spec, [weight.as_deref(), bias.as_deref()]),
        Launch::QkRmsnorm {
            x,
            weight,
            out,
            spec,
            ..
        } => vec![
            (x, spec.rows * spec.cols),
            (weight, spec.cols),
            (out, spec.rows * spec.cols),
        ],
        Launch::Rope { x, out, spec, .. } => {
            let n = spec.rows * spec.heads * spec.head_dim;
            vec![(x, n), (out, n)]
        }
        Launch::SiluMul {
            gate,
            up,
            out,
            spec,
        }
        | Launch::GeluMul {
            gate,
            up,
            out,
            spec,
        } => vec![(gate, spec.n), (up, spec.n), (out, spec.n)],
        Launch::EltwiseAdd { a, b, out, spec } => vec![(a, spec.n), (b, spec.n), (out, spec.n)],
        Launch::Softmax { x, out, spec } => {
            vec![(x, spec.rows * spec.cols), (out, spec.rows * spec.cols)]
        }
        Launch::FlashAttention { q, k, v, out, spec } => {
            let (nq, nk) = (
                spec.lq * spec.heads * spec.head_dim,
                spec.lk * spec.kv_heads * spec.head_dim,
            );
            vec![(q, nq), (k, nk), (v, nk), (out, nq)]
        }
        Launch::LmHeadGemv {
            w, x, out, spec, ..
        } => vec![
            (w, spec.part.m * spec.part.k),
            (x, spec.part.k),
            (out, spec.vocab),
        ],
        Launch::KvAppend {
            k, v, cache, spec, ..
        } => vec![
            (k, spec.kv_width),
            (v, spec.kv_width),
            (cache, 2 * spec.context * spec.kv_width),
        ],
        Launch::DecodeAttention {
            q,
            cache,
            out,
            spec,
        } => vec![
            (q, spec.heads * spec.head_dim),
            (cache, 2 * spec.context * spec.kv_heads * spec.head_dim),
            (out, spec.heads * spec.head_dim),
        ],
    }
}

/// A norm's operands: input and output rows, and the weight and bias
/// vectors it has.
fn norm_operands<'l>(
    x: &'l str,
    out: &'l str,
    spec: &NormSpec,
    vectors: [Option<&'l str>; 2],
) -> Vec<(&'l str, usize)> {
    let mut v = vec![(x, spec.rows * spec.cols), (out, spec.rows * spec.cols)];
    v.extend(vectors.into_iter().flatten().map(|name| (name, spec.cols)));
    v
}
