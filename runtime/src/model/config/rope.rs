//! The rotary position embedding from either layout: the global base and
//! scaling (classic `rope_theta`/`rope_scaling` or transformers 5's
//! `rope_parameters`), and the sliding-window layers' own RoPE when they have
//! one.

use serde_json::Value;

use super::super::arch::{Family, Rope, RopeScaling};
use super::{Config, ConfigError};

impl Config<'_> {
    /// RoPE base and scaling from either layout. transformers 5 nests them in
    /// `rope_parameters`, per layer type for models that mix attention kinds
    /// (the global `full_attention` entry is the one the architecture records).
    pub(super) fn rope(&self, family: Family) -> Result<(f64, RopeScaling), ConfigError> {
        let prefix = match self.get("rope_parameters") {
            Some(Value::Object(p)) if p.contains_key("full_attention") => {
                "rope_parameters.full_attention"
            }
            Some(Value::Object(_)) => "rope_parameters",
            Some(other) => return Err(self.wrong_type("rope_parameters", "an object", other)),
            None => "",
        };
        let (theta_field, scaling_prefix) = if prefix.is_empty() {
            ("rope_theta".to_string(), "rope_scaling".to_string())
        } else {
            (format!("{prefix}.rope_theta"), prefix.to_string())
        };
        let rope = self.rope_at(&theta_field, &scaling_prefix, default_rope_theta(family))?;
        Ok((rope.theta, rope.scaling))
    }

    /// A RoPE base at `theta_field` (default `default_theta`) with the scaling
    /// object at `scaling_prefix`.
    fn rope_at(
        &self,
        theta_field: &str,
        scaling_prefix: &str,
        default_theta: f64,
    ) -> Result<Rope, ConfigError> {
        let theta = match self.opt_f64(theta_field)? {
            Some(t) => self.positive(theta_field, t)?,
            None => default_theta,
        };
        if let Some(v) = self.get(scaling_prefix) {
            if !v.is_object() {
                return Err(self.wrong_type(scaling_prefix, "an object or null", v));
            }
        }
        Ok(Rope {
            theta,
            scaling: self.rope_scaling(scaling_prefix)?,
        })
    }

    /// The RoPE of sliding-window layers when it is not the global one:
    /// transformers 5's `rope_parameters.sliding_attention`, or Gemma 3's
    /// classic `rope_local_base_freq` (unscaled: transformers gives the local
    /// rotary embedding the default rope type, whatever `rope_scaling` says;
    /// 10000 when absent, its config default).
    pub(super) fn local_rope(
        &self,
        family: Family,
        theta: f64,
        scaling: &RopeScaling,
    ) -> Result<Option<Rope>, ConfigError> {
        let local = if self.get("rope_parameters.sliding_attention").is_some() {
            let prefix = "rope_parameters.sliding_attention";
            Some(self.rope_at(&format!("{prefix}.rope_theta"), prefix, theta)?)
        } else if family == Family::Gemma3Text {
            let theta = match self.opt_f64("rope_local_base_freq")? {
                Some(t) => self.positive("rope_local_base_freq", t)?,
                None => 10_000.0,
            };
            Some(Rope {
                theta,
                scaling: RopeScaling::Default,
            })
        } else {
            None
        };
        Ok(local.filter(|l| !(l.theta == theta && l.scaling == *scaling)))
    }

    fn rope_scaling(&self, prefix: &str) -> Result<RopeScaling, ConfigError> {
        if self.get(prefix).is_none() {
            return Ok(RopeScaling::Default);
        }
        let type_field = if self.get(&format!("{prefix}.rope_type")).is_some() {
            format!("{prefix}.rope_type")
        } else {
            format!("{prefix}.type")
        };
        let kind = self.opt_str(&type_field)?.unwrap_or("default");
        let number = |name: &str| -> Result<f64, ConfigError> {
            let field = format!("{prefix}.{name}");
            let value = self.opt_f64(&field)?.ok_or_else(|| self.missing(&field))?;
            self.positive(&field, value)
        };
        match kind {
            "default" => Ok(RopeScaling::Default),
            "linear" => Ok(RopeScaling::Linear {
                factor: number("factor")?,
            }),
            "llama3" => {
                let low_freq_factor = number("low_freq_factor")?;
                let high_freq_factor = number("high_freq_factor")?;
                if high_freq_factor <= low_freq_factor {
                    return Err(self.invalid(
                        &format!("{prefix}.high_freq_factor"),
                        high_freq_factor,
                        format!("must exceed low_freq_factor ({low_freq_factor})"),
                    ));
                }
                let original_field = format!("{prefix}.original_max_position_embeddings");
                let original = self
                    .opt_uint(&original_field)?
                    .ok_or_else(|| self.missing(&original_field))?;
                if original == 0 {
                    return Err(self.invalid(&original_field, 0, "must be at least 1"));
                }
                Ok(RopeScaling::Llama3 {
                    factor: number("factor")?,
                    low_freq_factor,
                    high_freq_factor,
                    original_max_position_embeddings: original,
                })
            }
            other => {
                self.block(
                    "RoPE scaling",
                    &type_field,
                    format!("\"{other}\""),
                    "supported RoPE types are default, linear and llama3",
                    format!(
                        "the `{other}` frequency formula in the oracle's RoPE (model/oracle/blocks.rs) \
                         and in the NPU's RoPE table (xdna2/interpreter/rope.rs)"
                    ),
                );
                Ok(RopeScaling::Default)
            }
        }
    }
}

fn default_rope_theta(family: Family) -> f64 {
    match family {
        Family::Gemma3Text => 1_000_000.0,
        _ => 10_000.0,
    }
}
