//! Launch groups into calls: one merged call, even calls under the device's
//! launch limit, the options' split of the prefill O+FFN, or one call per
//! launch; each call with the host traffic of every buffer it binds. Host
//! steps go between the calls in the order they are written.

use std::collections::BTreeSet;

use super::super::plan::{Binding, BufferClass, Call, HostOp, Launch, Role, Step};
use super::{Builder, Group, PlanError};

/// Where a group's calls go: the layer loop or the epilogue.
#[derive(Debug, Clone, Copy)]
pub(super) enum Part {
    Layer,
    Epilogue,
}

impl Builder<'_> {
    /// A host step of the layer loop, between its calls.
    pub(super) fn host(&mut self, op: HostOp) {
        self.layer.push(Step::Host(op));
    }

    pub(super) fn emit(&mut self, group: Group) {
        self.emit_into(group, Part::Layer);
    }

    /// Emits the prefill O+FFN group as the options' split calls, when it is
    /// merged and a split is given.
    pub(super) fn emit_split(&mut self, group: Group) -> Result<(), PlanError> {
        let splits = &self.options.o_ffn_calls;
        if splits.is_empty() || !self.options.merge_launches {
            self.emit(group);
            return Ok(());
        }
        let split: usize = splits.iter().map(|s| s.launches).sum();
        if split != group.launches.len() {
            return Err(PlanError::Split {
                model: self.model.clone(),
                split,
                launches: group.launches.len(),
            });
        }
        let mut start = 0;
        for s in splits {
            let call = self.call(&group, start..start + s.launches, s.name.clone());
            self.layer.push(Step::Call(call));
            start += s.launches;
        }
        Ok(())
    }

    /// Emits a group as one merged call or one call per launch.
    pub(super) fn emit_into(&mut self, group: Group, part: Part) {
        let n = group.launches.len();
        let limit = self.device.limits.launches_per_call_max.max(1);
        let fits = n <= limit || self.options.published_calls;
        let calls: Vec<Call> = if (self.options.merge_launches && fits) || n == 1 {
            vec![self.call(&group, 0..n, group.name.to_string())]
        } else if self.options.merge_launches {
            // More launches than one call may hold (Gemma's sandwich norms make
            // o_ffn 10): as few calls as the limit allows, of even size.
            let parts = n.div_ceil(limit);
            let size = n.div_ceil(parts);
            (0..parts)
                .map(|p| {
                    let range = p * size..((p + 1) * size).min(n);
                    self.call(&group, range, format!("{}.{p}", group.name))
                })
                .collect()
        } else {
            (0..group.launches.len())
                .map(|i| {
                    let name =
                        format!("{}.{}.{}", group.name, i, group.launches[i].kernel().name());
                    self.call(&group, i..i + 1, name)
                })
                .collect()
        };
        let steps = match part {
            Part::Layer => &mut self.layer,
            Part::Epilogue => &mut self.epilogue,
        };
        steps.extend(calls.into_iter().map(Step::Call));
    }

    /// The call running `range` of the group's launches, with the host
    /// traffic of every buffer it binds.
    pub(super) fn call(&self, group: &Group, range: std::ops::Range<usize>, name: String) -> Call {
        let o = self.options;
        let inside = &group.launches[range.clone()];
        let before = &group.launches[..range.start];
        let after = &group.launches[range.end..];
        let mut order: Vec<&str> = Vec::new();
        for l in inside {
            for n in l.inputs().into_iter().chain([l.output()]) {
                if !order.contains(&n) {
                    order.push(n);
                }
            }
        }
        let written_before: BTreeSet<&str> = before.iter().map(Launch::output).collect();
        let read_after: BTreeSet<&str> = after.iter().flat_map(Launch::inputs).collect();
        let bindings = order
            .into_iter()
            .map(|name| {
                let buffer = &self.buffers[name];
                if buffer.class != BufferClass::Activation {
                    return Binding {
                        buffer: name.into(),
                        role: Role::Weight,
                        write: buffer.class == BufferClass::Weight,
                        read: false,
                    };
                }
                let first_read = inside.iter().position(|l| l.inputs().contains(&name));
                let first_write = inside.iter().position(|l| l.output() == name);
                let is_input = match (first_read, first_write) {
                    (Some(r), Some(w)) => r <= w,
                    (Some(_), None) => true,
                    _ => false,
                };
                let group_output = group.outputs.iter().any(|g| g == name);
                let needed_later =
                    first_write.is_some() && (group_output || read_after.contains(name));
                let read = first_write.is_some()
                    && (group_output || (read_after.contains(name) && !o.shared_intermediates));
                if is_input {
                    let resident = written_before.contains(name) && o.shared_intermediates;
                    Binding {
                        buffer: name.into(),
                        role: Role::Input,
                        write: !resident,
                        read,
                    }
                } else {
                    let role = if needed_later {
                        Role::Output
                    } else {
                        Role::Scratch
                    };
                    Binding {
                        buffer: name.into(),
                        role,
                        write: !o.mark_intermediates,
                        read,
                    }
                }
            })
            .collect();
        Call {
            name,
            group: group.name.to_string(),
            launches: inside.to_vec(),
            bindings,
        }
    }
}
